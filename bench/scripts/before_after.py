#!/usr/bin/env python3
"""Summarise the before/after eval JSONs of g.sh: per task, binary and workload, the
median of the candidate's timing medians over rounds, and the eval wall times."""
import glob, json, os, re, statistics, sys
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "ba-*.json"))):
    m = re.match(r"ba-(old|new)-(.+)-(\d+)\.json", os.path.basename(f))
    v, task, r = m.groups()
    try:
        j = json.load(open(f))
    except Exception as e:
        print(f"{f}: unreadable ({e})")
        continue
    c = j["candidates"][0]
    for w in c["workloads"]:
        t = (w.get("time") or {}).get("median_s")
        key = (task, w["index"], w.get("holdout", False))
        rows.setdefault(key, {}).setdefault(v, []).append((c["verdict"], t, j.get("wall_s")))
print("task workload | verdicts old/new | median of medians old us | new us | new/old")
for key in sorted(rows):
    o, n = rows[key].get("old", []), rows[key].get("new", [])
    mo = statistics.median([t for _, t, _ in o if t]) if any(t for _, t, _ in o) else None
    mn = statistics.median([t for _, t, _ in n if t]) if any(t for _, t, _ in n) else None
    ratio = f"{mn / mo:.4f}" if mo and mn else "-"
    print(f"{key[0]} w{key[1]}{' holdout' if key[2] else ''} | {sorted(set(x for x,_,_ in o))}/"
          f"{sorted(set(x for x,_,_ in n))} | {mo and round(mo*1e6,3)} | {mn and round(mn*1e6,3)} | {ratio}")

#!/usr/bin/env python3
"""profile_agreement.py DIR OUT.json - the results of bench/profile_agreement.sh as
{"device", "date", "command", "rows": [{"kernel", "metric", "cupti", "ncu", "ratio",
"within_5pct"}], "summary"}, and a table on stdout. A figure both sides leave out is no
row; a percentage or a rate near zero is compared by its absolute difference (within 0.5
points, or 0.05 stall cycles per issue) since a ratio of two near-zero figures says
nothing."""
import json, os, sys

d, dest = sys.argv[1], sys.argv[2]
dev = open(os.path.join(d, "device.txt")).read().split("\n")
FIGS = ["time_us", "dram_gbps", "dram_pct_of_peak", "l2_hit_pct", "l1_hit_pct", "sm_pct",
        "tensor_pct", "achieved_occupancy_pct", "spill_bytes"]
ABS = {"time_us": 0.1, "dram_gbps": 5.0, "spill_bytes": 0}
rows = []


def profile(path):
    try:
        c = json.load(open(path))["candidates"][0]
    except Exception:
        return None
    return c.get("profile")


for f in sorted(os.listdir(d)):
    if not f.startswith("cupti-") or not f.endswith(".json"):
        continue
    k = f[len("cupti-"):-len(".json")]
    a, b = profile(os.path.join(d, f)), profile(os.path.join(d, "ncu-" + k + ".json"))
    if not a or not b or "kernels" not in a or "kernels" not in b:
        rows.append({"kernel": k, "metric": "profile", "cupti": (a or {}).get("error"),
                     "ncu": (b or {}).get("error"), "ratio": None, "within_5pct": False})
        continue
    ka, kb = a["kernels"][0], b["kernels"][0]
    pairs = [(m, ka.get(m), kb.get(m)) for m in FIGS]
    sa = {s["reason"]: s["per_issue"] for s in ka.get("stalls", [])}
    sb = {s["reason"]: s["per_issue"] for s in kb.get("stalls", [])}
    for r in sorted(set(sa) & set(sb)):
        pairs.append(("stall:" + r, sa[r], sb[r]))
    for m, x, y in pairs:
        if x is None or y is None:
            continue
        ratio = x / y if y else None
        tol = ABS.get(m, 0.05 if m.startswith("stall:") else 0.5)
        ok = (ratio is not None and abs(ratio - 1) <= 0.05) or abs(x - y) <= tol
        rows.append({"kernel": k, "metric": m, "cupti": x, "ncu": y,
                     "ratio": round(ratio, 4) if ratio else None, "within_5pct": ok})

n_ok = sum(r["within_5pct"] for r in rows)
doc = {"device": dev[0], "date": dev[1] if len(dev) > 1 else "",
       "command": "bench/profile_agreement.sh build/kevo; bench/profile_agreement.py",
       "rows": rows, "summary": {"rows": len(rows), "within_5pct": n_ok}}
json.dump(doc, open(dest, "w"), indent=1)
for r in rows:
    print("%-16s %-34s %12s %12s %8s %s" % (r["kernel"], r["metric"], r["cupti"], r["ncu"],
                                            r["ratio"], "ok" if r["within_5pct"] else "OFF"))
print("%d of %d figures within 5%%" % (n_ok, len(rows)))

#!/usr/bin/env python3
"""profile_spread.py DIR OUT.json - bench/profile_spread.sh's collections per kernel and
figure: each tool's values, its own spread (max/min), and the ratio of the two medians;
`within_tools_spread` says whether the medians differ by no more than the larger of the
two tools' own spreads (then the 5 % target asks more than either tool repeats)."""
import glob, json, os, statistics, sys

d, dest = sys.argv[1], sys.argv[2]
FIGS = ["time_us", "dram_gbps", "dram_pct_of_peak", "l2_hit_pct", "l1_hit_pct", "sm_pct",
        "achieved_occupancy_pct", "sm_clock_mhz"]


def figures(path):
    try:
        c = json.load(open(path))["candidates"][0]
        k = c["profile"]["kernels"][0]
    except Exception:
        return {}
    f = {m: k.get(m) for m in FIGS if k.get(m) is not None}
    for s in k.get("stalls", []):
        f["stall:" + s["reason"]] = s["per_issue"]
    return f


rows = []
kernels = sorted({os.path.basename(p)[6:].rsplit("-", 1)[0]
                  for p in glob.glob(os.path.join(d, "cupti-*-*.json"))})
for k in kernels:
    a = [figures(p) for p in sorted(glob.glob(os.path.join(d, f"cupti-{k}-*.json")))]
    b = [figures(p) for p in sorted(glob.glob(os.path.join(d, f"ncu-{k}-*.json")))]
    c = [figures(p) for p in sorted(glob.glob(os.path.join(d, f"ncub-{k}-*.json")))]
    for m in sorted(set().union(*a, *b)):
        xa = [f[m] for f in a if f.get(m) is not None]
        xb = [f[m] for f in b if f.get(m) is not None]
        xc = [f[m] for f in c if f.get(m) is not None]
        if len(xa) < 2 or len(xb) < 2:
            continue
        ma, mb = statistics.median(xa), statistics.median(xb)
        sa = max(xa) / min(xa) if min(xa) > 0 else None
        sb = max(xb) / min(xb) if min(xb) > 0 else None
        ratio = ma / mb if mb else None
        spread = max(s for s in (sa, sb) if s) if (sa or sb) else None
        mc = statistics.median(xc) if xc else None
        rows.append({"kernel": k, "metric": m, "cupti": xa, "ncu": xb, "ncu_base_clock": xc,
                     "ratio_to_ncu_base": round(ma / mc, 4) if mc else None,
                     "cupti_spread": sa and round(sa, 4), "ncu_spread": sb and round(sb, 4),
                     "ratio": ratio and round(ratio, 4),
                     "within_5pct": ratio is not None and abs(ratio - 1) <= 0.05,
                     "within_tools_spread": bool(ratio and spread and
                                                 max(ratio, 1 / ratio) <= spread)})
dev = open(os.path.join(d, "device.txt")).read().split("\n")
json.dump({"device": dev[0], "date": dev[1] if len(dev) > 1 else "",
           "command": "bench/profile_spread.sh build/kevo; bench/profile_spread.py",
           "rows": rows}, open(dest, "w"), indent=1)
print("%-16s %-28s %9s %9s %9s %8s %8s %7s %7s" % ("kernel", "metric", "cupti", "ncu",
                                                   "ncu.base", "c.spr", "n.spr", "ratio",
                                                   "r.base"))
for r in rows:
    nb = statistics.median(r["ncu_base_clock"]) if r["ncu_base_clock"] else float("nan")
    print("%-16s %-28s %9.3f %9.3f %9.3f %8s %8s %7s %7s %s%s" % (
        r["kernel"], r["metric"], statistics.median(r["cupti"]), statistics.median(r["ncu"]),
        nb, r["cupti_spread"], r["ncu_spread"], r["ratio"], r["ratio_to_ncu_base"],
        "" if r["within_5pct"] else "OFF",
        " (within the tools' own spread)" if not r["within_5pct"] and r["within_tools_spread"]
        else ""))

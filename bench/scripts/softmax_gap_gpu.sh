#!/usr/bin/env bash
# As run in sessions 9-10, before the repeats after the last trial (session 11): its launch
# counts take verification as 6 launches per workload; it is now 6 plus 8-32 repeats.
# Where kevo and ncu part on softmax_fast at 4096 x 8192 (H200, session 9: kevo 66.7 us,
# ncu 63.9 us, where the other >= 50 us rows agree within 1 %). One device call:
#  kevo   kevo eval as is;             warm   KEVO_WARM_ICACHE=1 (instruction caches kept);
#  ncu    ncu over the verification launches (as the fidelity run);
#  ncu-t  ncu over the *timed* launches of an ordinary eval (timing sets, rotation, poison);
#  ncu-n  ncu with --cache-control none over the verification launches;
#  ncu-tn ncu with --cache-control none over the timed launches: kevo's own cold start,
#         read by ncu's clock.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_CACHE_DIR=/tmp/kevo-sm-cache
K=build-gpu/kevo
T=tasks/level1/softmax_rows.cu
C=examples/seeds/softmax_rows.cu
o=$OUT/sm
mkdir -p $o
$K calibrate --json > $o/calibrate.json 2>/dev/null
for i in 1 2; do
  $K eval --json $T $C > $o/kevo-$i.json 2>/dev/null
  KEVO_WARM_ICACHE=1 $K eval --json $T $C > $o/warm-$i.json 2>/dev/null
done
$K eval --json --profile $T $C > $o/prof.json 2>/dev/null
N="ncu --target-processes all --clock-control none --metrics gpu__time_duration.sum --csv -k regex:^softmax_fast$"
KEVO_CUPTI=0 $N --cache-control all --log-file $o/ncu.csv $K eval --no-timing --trials 10 $T $C > /dev/null 2>&1
KEVO_CUPTI=0 $N --cache-control none --log-file $o/ncu-n.csv $K eval --no-timing --trials 10 $T $C > /dev/null 2>&1
KEVO_CUPTI=0 $N --cache-control all --launch-count 80 --log-file $o/ncu-t.csv $K eval --trials 3 --time-cap 0.5 --deadline 300 $T $C > $o/ncu-t.eval 2>&1
KEVO_CUPTI=0 $N --cache-control none --launch-count 80 --log-file $o/ncu-tn.csv $K eval --trials 3 --time-cap 0.5 --deadline 300 $T $C > $o/ncu-tn.eval 2>&1
python3 - $o <<'PY'
import csv, io, json, statistics, sys
o = sys.argv[1]
def kv(f, key="time"):
    try:
        w = json.load(open(f))["candidates"][0]["workloads"][0]
        return w[key]["median_s"] * 1e6
    except Exception as e:
        return None
for n in ["kevo-1", "kevo-2", "warm-1", "warm-2"]:
    print(n, kv(f"{o}/{n}.json"))
try:
    p = json.load(open(f"{o}/prof.json"))["candidates"][0].get("profile") or {}
    print("profile (range profiler) time_us", [k.get("time_us") for k in p.get("kernels", [])])
except Exception as e:
    print("profile", e)
for n in ["ncu", "ncu-n", "ncu-t", "ncu-tn"]:
    try:
        t = open(f"{o}/{n}.csv").read(); t = t[t.find('"ID"'):]
        v = [float(r["Metric Value"].replace(",", "")) / 1e3 for r in csv.DictReader(io.StringIO(t))
             if r["Metric Name"] == "gpu__time_duration.sum" and r["Grid Size"].startswith("(4096")]
        print(n, len(v), "median %.3f" % statistics.median(v), "first", ["%.1f" % x for x in v[:8]], "last", ["%.1f" % x for x in v[-20:]])
    except Exception as e:
        print(n, e)
PY

#!/usr/bin/env bash
# offset_h100.sh - where kevo's small-kernel times and Nsight Compute's part (issue 13):
# for small workloads of the fidelity kernels, each alone in a task made by sized_task.py,
# three `kevo eval --json --profile` (kevo's time = CUPTI's kernel span + the calibrated
# launch gap; the profile's time = the range profiler's gpu__time_duration, the metric ncu
# reads) and ncu's gpu__time_duration of the same kernel (caches flushed, clocks free).
# usage: bench/scripts/offset_h100.sh BUILD OUT
set -u
B=$1
OUT=$2
K=$B/kevo
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/devlib:${LD_LIBRARY_PATH:-}
export KEVO_CACHE_DIR=/tmp/kevo-offset-cache
$K calibrate --json > "$OUT/calibrate.json" 2>&1
specs=(
  "ss1m scale_shift_vec4 bench/tasks/scale_shift.cu bench/tasks/scale_shift_vec4.cu N=1048576"
  "ss4k scale_shift_vec4 bench/tasks/scale_shift.cu bench/tasks/scale_shift_vec4.cu N=4099"
  "va1m vadd_vec4 tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu N=1000000"
  "va5k vadd_vec4 tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu N=5003"
  "rms1k rmsnorm_warp tasks/level1/rmsnorm_f32.cu tests/exploits/cuda/control_rmsnorm_f32.cu M=1000_N=1536"
)
for s in "${specs[@]}"; do
  set -- $s
  n=$1 k=$2 src=$3 cand=$4 sz=${5//_/ }
  t=bench/tasks/gen-$n.cu
  python3 bench/scripts/sized_task.py "$src" "gen_$n" "$t" "$sz"
  for r in 1 2 3; do
    $K eval --json --profile "$t" "$cand" > "$OUT/kevo-$n-$r.json" 2> "$OUT/kevo-$n-$r.err"
  done
  KEVO_CUPTI=0 /usr/local/cuda/bin/ncu --target-processes all --cache-control all \
      --clock-control none --metrics gpu__time_duration.sum -k "regex:^$k\$" --csv \
      --log-file "$OUT/ncu-$n.csv" $K eval --no-timing --trials 10 "$t" "$cand" > "$OUT/ncu-$n.eval" 2>&1
  rm -f "$t"
done
python3 - "$OUT" <<'PY'
import csv, glob, json, os, statistics, sys
out = sys.argv[1]
cal = json.load(open(os.path.join(out, "calibrate.json")))
gap = cal.get("launch_gap_s", 0) * 1e6
print(f"launch gap (calibrated) {gap:.3f} us")
print(f"{'name':6} {'kevo':>8} {'span':>8} {'profiler':>9} {'ncu':>8} {'ncu-kevo':>9} {'ncu-span':>9} {'prof-span':>10}")
rows = []
for n in ["ss1m", "ss4k", "va1m", "va5k", "rms1k"]:
    kv, pr, gaps = [], [], []
    for f in sorted(glob.glob(os.path.join(out, f"kevo-{n}-*.json"))):
        try:
            c = json.load(open(f))["candidates"][0]
        except Exception as e:
            print(n, "no result", e); continue
        w = c["workloads"][0]
        kv.append(w["time"]["median_s"] * 1e6)
        gaps.append(w["time"].get("launch_gap_s", gap * 1e-6) * 1e6)
        p = (c.get("profile") or {}).get("kernels") or []
        if p:
            pr.append(p[0].get("time_us"))
    nc = []
    try:
        for row in csv.DictReader(l for l in open(os.path.join(out, f"ncu-{n}.csv")) if not l.startswith("==")):
            if row.get("Metric Name") == "gpu__time_duration.sum":
                v = float(row["Metric Value"].replace(",", ""))
                u = row.get("Metric Unit")
                nc.append(v / 1000 if u in ("nsecond", "ns") else v * 1000 if u in ("msecond", "ms") else v)
    except OSError:
        pass
    k = statistics.median(kv) if kv else float("nan")
    g = statistics.median(gaps) if gaps else gap   # each eval's own calibrated gap
    p = statistics.median([x for x in pr if x]) if pr else float("nan")
    m = statistics.median(nc) if nc else float("nan")
    rows.append({"name": n, "kevo_us": kv, "profiler_us": pr, "ncu_us": nc, "gap_us": gaps})
    print(f"{n:6} {k:8.3f} {k-g:8.3f} {p:9.3f} {m:8.3f} {m-k:9.3f} {m-(k-g):9.3f} {p-(k-g):10.3f}")
json.dump({"gap_us": gap, "rows": rows}, open(os.path.join(out, "offset.json"), "w"), indent=1)
PY

#!/usr/bin/env bash
# stall_probe.sh BUILD OUT - why CUPTI's and ncu's warp-stall ratios part
# (results/2026-11-25-h100-profile-spread): each kernel's largest workload alone in a
# task, profiled by the worker (CUPTI) with the raw counters behind the ratios added
# (KEVO_PROFILE_EXTRA), by kevo's ncu collector, and by ncu directly with those raw
# counters (session 8's first probe showed ncu's own ratios do not move with the metric
# set they are collected in: results/2026-11-25-h100-stall-probe/).
set -u
B=$1
OUT=$2
K=$B/kevo
NCU=/usr/local/cuda/bin/ncu
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/devlib:${LD_LIBRARY_PATH:-}
export KEVO_CACHE_DIR=${KEVO_CACHE_DIR:-/tmp/kevo-stall-cache}
P=smsp__average_warps_issue_stalled_
S=_per_issue_active.ratio
RAW=smsp__warps_issue_stalled_wait.sum,smsp__warps_issue_stalled_long_scoreboard.sum,smsp__warps_issue_stalled_drain.sum,smsp__issue_active.sum,smsp__inst_issued.sum,smsp__inst_executed.sum,smsp__cycles_active.sum,sm__cycles_elapsed.avg,smsp__warps_launched.sum,dram__bytes_read.sum
specs=(
  "va64m vadd_vec4 tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu N=67108864"
  "ss16m scale_shift_vec4 bench/tasks/scale_shift.cu bench/tasks/scale_shift_vec4.cu N=16777216"
  "rms16k rmsnorm_warp tasks/level1/rmsnorm_f32.cu tests/exploits/cuda/control_rmsnorm_f32.cu M=16384_N=4096"
)
for sp in "${specs[@]}"; do
  set -- $sp
  n=$1 k=$2 src=$3 cand=$4 sz=${5//_/ }
  t=/tmp/gen_$n.cu
  python3 bench/scripts/sized_task.py "$src" "gen_$n" "$t" "$sz"
  KEVO_PROFILE_EXTRA=$RAW $K eval --json --no-timing --profile $t $cand > "$OUT/cupti-$n.json" 2> "$OUT/cupti-$n.err"
  KEVO_CUPTI=0 $K eval --json --no-timing --profile $t $cand > "$OUT/ncucol-$n.json" 2> "$OUT/ncucol-$n.err"
  KEVO_CUPTI=0 $NCU --target-processes all --cache-control all --clock-control none \
      --metrics "$RAW,${P}wait${S},${P}long_scoreboard${S}" -k "regex:^$k\$" --launch-count 1 \
      --csv --log-file "$OUT/ncu-raw-$n.csv" $K eval --no-timing $t $cand > "$OUT/ncu-raw-$n.eval" 2>&1
done
python3 - "$OUT" <<'PY'
import csv, glob, json, os, sys
out = sys.argv[1]
def prof(p):
    try:
        k = json.load(open(p))["candidates"][0]["profile"]["kernels"][0]
    except Exception as e:
        return {"error": str(e)}
    f = {m: k.get(m) for m in ("time_us", "sm_pct", "sm_clock_mhz")}
    for s in k.get("stalls", []):
        f["stall:" + s["reason"]] = round(s["per_issue"], 3)
    f.update(k.get("counters", {}))
    return f
for p in sorted(glob.glob(os.path.join(out, "*.json"))):
    print(os.path.basename(p), json.dumps(prof(p)))
for p in sorted(glob.glob(os.path.join(out, "ncu-*.csv"))):
    rows = list(csv.reader(l for l in open(p) if l.startswith('"')))
    if not rows:
        print(os.path.basename(p), "no rows"); continue
    h = rows[0]
    for r in rows[1:]:
        d = dict(zip(h, r))
        if "Metric Name" in d:
            print(os.path.basename(p), d.get("Grid Size"), d["Metric Name"], d.get("Metric Unit"), d["Metric Value"])
PY

#!/usr/bin/env bash
# exemplars_h100.sh - issue 15's evidence on a GPU: every exemplar of examples/seeds/ (and
# any extra candidates VARIANTS/NAME_*.cu, NAME a suite task) evaluated on its suite task
# with held-out sizes (kevo eval --json --holdout), PyTorch timed in the same session
# (bench/torch_baseline.py, unless NO_TORCH=1), the rows of the exemplars results file
# (bench/scripts/exemplars_json.py), and with PROFILE="NAME..." those exemplars' hardware
# counters (kevo eval --profile: what limits them); EXTRA="TASK:SEED ..." adds tasks of
# bench/tasks/ (the 8192^3 GEMM).
# usage: bench/scripts/exemplars_h100.sh BUILD OUT [VARIANTS]
set -u
B=$1
OUT=$2
VAR=${3:-}
K=$B/kevo
export LD_LIBRARY_PATH=$PWD/$B/devlib:${LD_LIBRARY_PATH:-}
export KEVO_CACHE_DIR=/tmp/kevo-exemplars-cache
SEEDS=${SEEDS:-"softmax_rows rmsnorm_f32 layernorm_bf16 cross_entropy_f32 transpose_f32
       add_layernorm_gelu_f32 swiglu_bf16 matmul_f32 matmul_bf16 matmul_bias_gelu_bf16
       causal_attention_bf16 conv2d_f32"}
mkdir -p "$OUT/evals"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
$K calibrate > "$OUT/calibrate.txt" 2>&1 || cat "$OUT/calibrate.txt"
tasks=""
for s in $SEEDS; do
    t=$(ls tasks/*/$s.cu)
    tasks="$tasks $t"
    extra=$( [ -n "$VAR" ] && ls "$VAR"/${s}_*.cu 2>/dev/null )
    seed=$( ls examples/seeds/$s.cu 2>/dev/null )
    [ -z "$seed$extra" ] && continue
    start=$(date +%s)
    $K eval --json --holdout --time-cap ${TIME_CAP:-1} "$t" $seed $extra \
        > "$OUT/evals/$s.json" 2> "$OUT/evals/$s.err"
    echo "$s: exit $? in $(( $(date +%s) - start )) s"
done
# EXTRA="TASK:SEED ...": other tasks (bench/tasks/) with an exemplar, as NAME.json
for ts in ${EXTRA:-}; do
    t=${ts%%:*}
    n=$(basename "$t" .cu)
    tasks="$tasks $t"
    $K eval --json --time-cap ${TIME_CAP:-1} "$t" "${ts#*:}" > "$OUT/evals/$n.json" \
        2> "$OUT/evals/$n.err"
    echo "$n: exit $?"
done
if [ "${NO_TORCH:-0}" != 1 ]; then
    start=$(date +%s)
    python3 bench/torch_baseline.py --kevo $K --compile-workloads 2 --out "$OUT/torch.json" \
        $tasks > "$OUT/torch.log" 2>&1
    echo "torch_baseline: exit $? in $(( $(date +%s) - start )) s"
    tail -3 "$OUT/torch.log"
fi
for s in ${PROFILE:-}; do
    start=$(date +%s)
    $K eval --json --profile --no-timing $(ls tasks/*/$s.cu) examples/seeds/$s.cu \
        > "$OUT/evals/profile-$s.json.txt" 2> "$OUT/evals/profile-$s.err"
    echo "profile $s: exit $? in $(( $(date +%s) - start )) s"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["candidates"][0].get("profile",{}); print(" ", p.get("diagnosis") or p.get("error")); [print("   ", k.get("name"), {x: k.get(x) for x in ("time_us","sm_pct","tensor_pct","dram_pct_of_peak","l2_hit_pct","achieved_occupancy_pct")}, k.get("stalls")) for k in p.get("kernels", [])]' "$OUT/evals/profile-$s.json.txt"
done
python3 bench/scripts/exemplars_json.py --evals "$OUT/evals" --torch "$OUT/torch.json" \
    --out "$OUT/exemplars.json"
# failures, for the next round
for f in "$OUT"/evals/*.json; do
    python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d.get("candidates", []):
    h = c.get("holdout") if isinstance(c.get("holdout"), dict) else {}
    if c["verdict"] != "ok" or (h and h.get("verdict") != "ok"):
        print(c["path"], c["verdict"], (c.get("message") or "")[:300], "| holdout:",
              h.get("verdict"), (h.get("message") or "")[:200])
if not d.get("candidates"):
    print(sys.argv[1], "no candidates:", d.get("reference", {}).get("message", "")[:300])
PY
done
tar czf "$OUT/evals.tar.gz" -C "$OUT" evals && rm -rf "$OUT/evals"

#!/usr/bin/env bash
# ncu_fidelity.sh KEVO [KEVO_OLD] - kevo's timing against Nsight Compute on the same kernels
# (issue 13): for each task/candidate pair below, `kevo eval --json` gives kevo's median per
# workload, and ncu (caches flushed and invalidated, clocks not locked: as kevo measures)
# gives gpu__time_duration of every launch of the candidate's kernel in a verification-only
# eval of the same files (KEVO_CUPTI=0 there: ncu holds CUPTI in the process it profiles),
# NCU_TRIALS (default 10) trials per workload: 20 launches (and, since session 11, the 8-32
# repeats after the last trial: launches of the same workload, grouped with it), where the 6 of the default 3
# trials gave medians that moved by 6 % between sessions on a kernel whose single launches
# spread that much (softmax 128 x 50257: 22.1-23.5 us, 2026-11-25-h100-ncu-fidelity-6-icache-ab).
# Then the repeatability: 5 separate evals of two pairs. The calibration (with both launch
# latencies, isolated and back to back) is kept as calibrate.json. Raw output
# in $OUT (or /tmp/ncu-fidelity); bench/ncu_fidelity.py turns it into the results JSON.
set -uo pipefail
kevo=${1:-build/kevo}
old=${2:-}
out=${OUT:-/tmp/ncu-fidelity}
mkdir -p "$out"
export KEVO_CACHE_DIR=${KEVO_CACHE_DIR:-/tmp/kevo-fidelity-cache}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/device.txt"
date -u +%FT%TZ >> "$out/device.txt"
$kevo calibrate --json > "$out/calibrate.json" 2> "$out/calibrate.err"
. "$(dirname "$0")/ncu_pairs.sh"
for p in "${pairs[@]}"; do
  set -- $p
  k=$1 task=$2 cand=$3
  $kevo eval --json "$task" "$cand" > "$out/kevo-$k.json" 2> "$out/kevo-$k.err"
  [ -n "$old" ] && $old eval --json "$task" "$cand" > "$out/old-$k.json" 2> "$out/old-$k.err"
  KEVO_CUPTI=0 ncu --target-processes all --cache-control all --clock-control none \
      --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second -k "regex:^$k\$" --csv --log-file "$out/ncu-$k.csv" \
      $kevo eval --no-timing --trials ${NCU_TRIALS:-10} --deadline 300 "$task" "$cand" > "$out/ncu-$k.eval" 2>&1
  echo "$k: $(grep -c "gpu__time_duration" "$out/ncu-$k.csv") ncu rows"
done
for k in softmax_fast vadd_vec4; do
  for p in "${pairs[@]}"; do set -- $p; [ "$1" = $k ] && task=$2 cand=$3; done
  for i in 1 2 3 4 5; do
    $kevo eval --json "$task" "$cand" > "$out/rep-$k-$i.json" 2>/dev/null
  done
done
echo done

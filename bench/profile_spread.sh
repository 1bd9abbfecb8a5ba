#!/usr/bin/env bash
# profile_spread.sh KEVO - how much each counter moves from one collection to the next,
# by tool (issue 13 item 4): the kernels whose figures parted in
# results/2026-11-25-h100-profile-agreement.json, each profiled REPEAT times (default 3)
# by kevo's worker (CUPTI range profiler) and by kevo's ncu collector (KEVO_CUPTI=0), as
# bench/profile_agreement.sh does once, and by ncu with its clocks locked to base
# (KEVO_NCU_CLOCK=base, ncu's own default); bench/profile_spread.py compares the spreads.
set -uo pipefail
kevo=${1:-build/kevo}
out=${OUT:-/tmp/profile-spread}
n=${REPEAT:-3}
mkdir -p "$out"
export KEVO_CACHE_DIR=${KEVO_CACHE_DIR:-/tmp/kevo-profile-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/device.txt"
date -u +%FT%TZ >> "$out/device.txt"
. "$(dirname "$0")/ncu_pairs.sh"
for p in "${pairs[@]}"; do
  set -- $p
  k=$1 task=$2 cand=$3
  case $k in vadd_vec4|rmsnorm_warp|scale_shift_vec4) ;; *) continue ;; esac
  for i in $(seq 1 "$n"); do
    $kevo eval --json --no-timing --profile "$task" "$cand" > "$out/cupti-$k-$i.json" 2>/dev/null
    KEVO_CUPTI=0 $kevo eval --json --no-timing --profile "$task" "$cand" > "$out/ncu-$k-$i.json" 2>/dev/null
    KEVO_CUPTI=0 KEVO_NCU_CLOCK=base $kevo eval --json --no-timing --profile "$task" "$cand" \
        > "$out/ncub-$k-$i.json" 2>/dev/null
  done
  echo "$k: done"
done

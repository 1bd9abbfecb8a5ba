#!/usr/bin/env bash
# profile_agreement.sh KEVO - kevo's in-worker counters (CUPTI range profiler) against
# Nsight Compute's on the same kernels (issue 13 item 4): for each task/candidate pair,
# `kevo eval --json --no-timing --profile` twice: as it runs (the worker counts through
# CUPTI), then with KEVO_CUPTI=0 (no CUPTI in the worker: kevo's ncu collector runs
# `ncu --cache-control all --clock-control none` on the same files, ctl/profile.c). Both
# give the same profile object; bench/profile_agreement.py compares them figure by figure.
set -uo pipefail
kevo=${1:-build/kevo}
out=${OUT:-/tmp/profile-agreement}
mkdir -p "$out"
export KEVO_CACHE_DIR=${KEVO_CACHE_DIR:-/tmp/kevo-profile-cache}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/device.txt"
date -u +%FT%TZ >> "$out/device.txt"
. "$(dirname "$0")/ncu_pairs.sh"
for p in "${pairs[@]}"; do
  set -- $p
  k=$1 task=$2 cand=$3
  $kevo eval --json --no-timing --profile "$task" "$cand" > "$out/cupti-$k.json" 2> "$out/cupti-$k.err"
  KEVO_CUPTI=0 $kevo eval --json --no-timing --profile "$task" "$cand" > "$out/ncu-$k.json" 2> "$out/ncu-$k.err"
  echo "$k: $(grep -o '"tool": "[a-z]*"' "$out/cupti-$k.json" | head -1) / $(grep -o '"tool": "[a-z]*"' "$out/ncu-$k.json" | head -1)"
done
echo done

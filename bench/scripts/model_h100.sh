#!/usr/bin/env bash
# model_h100.sh - a model's first answer to kevo's generate prompt, on a GPU: the candidate
# (VARIANTS/NAME_*.cu) evaluated with held-out sizes and PyTorch timed in the same call
# (exemplars_h100.sh with SEEDS=NAME), and its counters.
# usage: bench/scripts/model_h100.sh BUILD OUT VARIANTS NAME
set -u
B=$1
OUT=$2
VAR=$3
N=$4
mkdir -p "$OUT"
SEEDS=$N PROFILE= bash bench/scripts/exemplars_h100.sh "$B" "$OUT" "$VAR" > "$OUT/run.log" 2>&1
echo "exit $?"; tail -8 "$OUT/run.log"
export LD_LIBRARY_PATH=$PWD/$B/devlib:${LD_LIBRARY_PATH:-}
"$B/kevo" eval --profile --no-timing "$(ls tasks/*/$N.cu)" "$VAR"/${N}_*.cu 2>&1 | tail -12

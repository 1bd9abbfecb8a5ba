#!/usr/bin/env bash
# run-default.sh KEVO - the main job of `make run`: evaluate the default task and an example
# candidate on the CUDA backend when a GPU is present, on the CPU backend otherwise.
set -eu
kevo=${1:-build/kevo}
if [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; then
    echo "GPU found: CUDA backend"
    exec "$kevo" eval tasks/level1/softmax_rows.cu examples/softmax_rows_fast.cu
else
    echo "no GPU found: CPU backend"
    exec "$kevo" eval tasks/cpu/cpu_softmax_rows.c examples/softmax_rows_fast.c
fi

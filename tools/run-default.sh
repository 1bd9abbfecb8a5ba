#!/usr/bin/env bash
# run-default.sh KEVO - the main job of `make run`: a short search (kevo run) on a default
# task from a parameterized seed, with the operators that need no LLM, on the CUDA backend
# when a GPU is present and on the CPU backend otherwise. The run lands in the default
# archive (kevo runs lists it; kevo export ID --out DIR writes the winner).
set -eu
kevo=${1:-build/kevo}
if [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; then
    echo "GPU found: CUDA backend"
    exec "$kevo" run tasks/level1/softmax_rows.cu --seed examples/seeds/softmax_rows.cu \
        --budget 24
else
    echo "no GPU found: CPU backend"
    exec "$kevo" run tasks/cpu/cpu_matmul.c --seed examples/seeds/cpu_matmul.c --budget 24 \
        --time-cap 0.25
fi

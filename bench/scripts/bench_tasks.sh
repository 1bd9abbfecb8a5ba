#!/usr/bin/env bash
# bench_tasks.sh - the suite tasks at the other sizes the GPU scripts measure, written to
# bench/tasks/ (ignored there) by sized_task.py: the 8192^3 GEMM, attention at issue 15's
# B=8 H=16 S=2048 D=128, and a small attention for compute-sanitizer.
set -eu
s=bench/scripts/sized_task.py
python3 $s tasks/level1/matmul_bf16.cu matmul_bf16_8192 bench/tasks/matmul_bf16_8192.cu \
    "M=8192 N=8192 K=8192"
python3 $s tasks/level3/causal_attention_bf16.cu causal_attention_bf16_b8h16 \
    bench/tasks/causal_attention_bf16_b8h16.cu "B=8 H=16 S=2048 D=128"
python3 $s tasks/level3/causal_attention_bf16.cu causal_attention_bf16_small \
    bench/tasks/causal_attention_bf16_small.cu "B=1 H=3 S=300 D=128" "B=2 H=1 S=257 D=64"

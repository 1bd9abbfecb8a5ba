#!/usr/bin/env bash
# tma_h100.sh - the TMA step of issue 15 on a GPU: the bf16 GEMM exemplar on harness-built
# tensor maps against its cp.async predecessor (VARIANTS/matmul_bf16_cpasync.cu, from git)
# and a 3-stage variant (made here from the exemplar), PyTorch (cuBLAS) timed in the same session, the exemplar's
# counters; then make gpu-test's script (the CUDA backend, the exploit corpus, CUPTI, TMA).
# usage: bench/scripts/tma_h100.sh BUILD OUT VARIANTS
set -u
B=$1
OUT=$2
VAR=$3
mkdir -p "$OUT"
# the 3-stage variant: the exemplar with its ST param's other value as the only one
sed 's|^// kevo param  ST 4 3|// kevo param  ST 3|' examples/seeds/matmul_bf16.cu > "$VAR/matmul_bf16_st3.cu"
SEEDS="${SEEDS:-matmul_bf16}" PROFILE="${PROFILE:-matmul_bf16}" \
    bash bench/scripts/exemplars_h100.sh "$B" "$OUT" "$VAR" 2>&1 | tee "$OUT/exemplars.log"
export LD_LIBRARY_PATH=$PWD/$B/devlib:${LD_LIBRARY_PATH:-}
if [ "${GPU_TEST:-1}" = 1 ]; then
    bash tools/gpu-test.sh "$B/kevo" > "$OUT/gpu-test.txt" 2>&1
    echo "gpu-test: exit $?"; tail -5 "$OUT/gpu-test.txt"
fi

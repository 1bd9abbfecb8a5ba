#!/usr/bin/env bash
# session7_h100.sh - the last GPU checks of session 7: every exemplar with PyTorch in one
# session (exemplars_h100.sh, with the 8192^3 GEMM and the B8 H16 S2048 D128 attention of
# bench/tasks/, counters of the compute-bound ones), then a short `kevo run` on the bf16 GEMM task,
# which now seeds itself from examples/seeds/matmul_bf16.cu (TMA tensor maps), its export,
# and the exported files built and tested with nvcc (the launcher encodes the maps itself).
# usage: bench/scripts/session7_h100.sh BUILD OUT
set -u
B=$1
OUT=$2
mkdir -p "$OUT" /tmp/kevo-novariants
bash bench/scripts/bench_tasks.sh
export LD_LIBRARY_PATH=$PWD/$B/devlib:${LD_LIBRARY_PATH:-}
PROFILE="matmul_bf16 matmul_bias_gelu_bf16 causal_attention_bf16 conv2d_f32" \
    EXTRA="bench/tasks/matmul_bf16_8192.cu:examples/seeds/matmul_bf16.cu
           bench/tasks/causal_attention_bf16_b8h16.cu:examples/seeds/causal_attention_bf16.cu" \
    bash bench/scripts/exemplars_h100.sh "$B" "$OUT/ex" /tmp/kevo-novariants > "$OUT/ex.log" 2>&1
echo "exemplars: exit $?"; tail -3 "$OUT/ex.log"
export KEVO_CACHE_DIR=/tmp/kevo-session7-cache KEVO_DATA_DIR=$PWD   # the suite and its seeds: this tree
"$B/kevo" run tasks/level1/matmul_bf16.cu --budget 4 --archive "$OUT/run.db" > "$OUT/run.txt" 2>&1
echo "run: exit $?"; tail -8 "$OUT/run.txt"
"$B/kevo" export 1 --archive "$OUT/run.db" --out "$OUT/export" > "$OUT/export.txt" 2>&1
echo "export: exit $?"; tail -3 "$OUT/export.txt"
(cd "$OUT/export" && PATH=/usr/local/cuda/bin:$PATH make test) > "$OUT/export-test.txt" 2>&1
echo "exported test: exit $?"; tail -6 "$OUT/export-test.txt"

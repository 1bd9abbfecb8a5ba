#!/usr/bin/env bash
# attention_h100.sh - the FA3-style attention exemplar on a GPU: kevo eval with held-out
# sizes and PyTorch SDPA in the same session (the suite task, and issue 15's
# B=8 H=16 S=2048 D=128 from bench/tasks/), its counters, then compute-sanitizer's synccheck
# and memcheck over a small copy of the task (bench/tasks/causal_attention_bf16_small.cu).
# usage: bench/scripts/attention_h100.sh BUILD OUT
set -u
B=$1
OUT=$2
mkdir -p "$OUT" /tmp/kevo-novariants
bash bench/scripts/bench_tasks.sh
export LD_LIBRARY_PATH=$PWD/$B/devlib:${LD_LIBRARY_PATH:-}
SEEDS=causal_attention_bf16 PROFILE=causal_attention_bf16 \
    EXTRA="bench/tasks/causal_attention_bf16_b8h16.cu:examples/seeds/causal_attention_bf16.cu" \
    bash bench/scripts/exemplars_h100.sh "$B" "$OUT" /tmp/kevo-novariants
for tool in synccheck memcheck; do
    KEVO_CUPTI=0 timeout 240 /usr/local/cuda/bin/compute-sanitizer --target-processes all \
        --tool $tool --error-exitcode 3 "$B/kevo" eval --no-timing \
        bench/tasks/causal_attention_bf16_small.cu examples/seeds/causal_attention_bf16.cu \
        > "$OUT/sanitizer-$tool.txt" 2>&1
    echo "compute-sanitizer $tool: exit $?"; grep -E "ERROR SUMMARY|verdict|ok|error" \
        "$OUT/sanitizer-$tool.txt" | tail -4
done

#!/usr/bin/env bash
# replay-gpu.sh KEVO OUTDIR - the evidence of `kevo run --replay` on a GPU (bench/README.md):
# real CUDA searches (one stopped by its budget, one by the clock), each replayed from the
# archive and compared row by row; the replay's wall time against the run's. Raw output
# under OUTDIR.
set -uo pipefail
kevo=${1:-build/kevo}
out=${2:-/tmp/kevo-replay}
mkdir -p "$out"
export KEVO_ARCHIVE="$out/archive.db"
rm -f "$KEVO_ARCHIVE"*
hdr() { echo "# $1"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"; echo "# date: $(date -u +%FT%TZ)"; echo "# command: $2"; }
timed() { local t0=$EPOCHREALTIME; "$@"; local rc=$?; echo "rc=$rc wall_s=$(awk "BEGIN{print $EPOCHREALTIME - $t0}")"; }
n=0
one() {   # one() NAME RUN-ARGS...: the run, then its replay
    local name=$1; shift
    n=$((n + 1))
    local c="$kevo run $*"
    { hdr "kevo run ($name)" "$c"; timed $kevo run "$@"; } > "$out/run_$name.txt" 2>&1
    tail -6 "$out/run_$name.txt"
    c="$kevo run --replay $n"
    n=$((n + 1))
    { hdr "kevo run --replay of the run above" "$c"; timed $kevo run --replay $((n - 1)); } > "$out/replay_$name.txt" 2>&1
    tail -4 "$out/replay_$name.txt"
}
one softmax_budget tasks/level1/softmax_rows.cu --seed examples/seeds/softmax_rows.cu --budget 24
one matmul_time tasks/level1/matmul_f32.cu --seed examples/seeds/matmul_f32.cu --budget 1000 --time 12
$kevo runs > "$out/runs.txt" 2>&1
cat "$out/runs.txt"

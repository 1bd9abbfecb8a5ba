#!/usr/bin/env bash
# search-gpu.sh KEVO OUTDIR - the evidence of kevo run on a GPU (bench/README.md): a short
# search from each CUDA seed in examples/seeds/, the export of one winner built and tested
# with nvcc, and an exhaustive sweep of the matmul seed's 32 configurations to compare the
# search's answer with. Raw output under OUTDIR.
set -uo pipefail
kevo=${1:-build/kevo}
out=${2:-/tmp/kevo-search}
mkdir -p "$out"
export KEVO_ARCHIVE="$out/archive.db"
hdr() { echo "# $1"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"; echo "# date: $(date -u +%FT%TZ)"; echo "# command: $2"; }
for s in softmax_rows vector_add transpose_f32 sum_rows_f32 matmul_f32; do
    c="$kevo run tasks/level1/$s.cu --seed examples/seeds/$s.cu --budget ${BUDGET:-16}"
    { hdr "kevo run from a seed" "$c"; $c; } > "$out/run_$s.txt" 2>&1
    tail -4 "$out/run_$s.txt"
done
$kevo runs > "$out/runs.txt" 2>&1
$kevo runs --json 5 > "$out/run5.json" 2>&1
c="$kevo export 5 --out $out/export && make -C $out/export test"
{ hdr "export of run 5's winner, built with nvcc and tested against the reference" "$c"
  $kevo export 5 --out "$out/export" && make -C "$out/export" test; echo "rc=$?"; } > "$out/export.txt" 2>&1
tail -8 "$out/export.txt"
python3 tools/variants.py examples/seeds/matmul_f32.cu "$out/variants" > /dev/null
c="$kevo eval --json tasks/level1/matmul_f32.cu $out/variants/*.cu"
{ hdr "exhaustive sweep of the matmul seed's 32 configurations" "$c"
  $kevo eval --json tasks/level1/matmul_f32.cu "$out"/variants/*.cu > "$out/exhaustive.json"; echo "rc=$?"; } > "$out/exhaustive.txt" 2>&1
python3 - "$out/exhaustive.json" "$out/run5.json" <<'PY' | tee -a "$out/exhaustive.txt"
import json, math, sys
ex = json.load(open(sys.argv[1]))
rows = []
for c in ex["candidates"]:
    ts = [w["time"]["median_s"] for w in c.get("workloads", []) if "time" in w]
    if c["verdict"] == "ok" and ts:
        rows.append((math.exp(sum(map(math.log, ts)) / len(ts)), c["path"]))
rows.sort()
print("exhaustive: %d configurations, %d ok; best %s at %.4g s (geomean over workloads)" % (len(ex["candidates"]), len(rows), rows[0][1].split("/")[-1], rows[0][0]))
for t, p in rows[:5]:
    print("  %.4g s  %s" % (t, p.split("/")[-1]))
run = json.load(open(sys.argv[2]))
b = run["report"]["best"]
print("kevo run 5: %d evaluations; best params %s at %.4g s = %.3f of the exhaustive best" % (run["evaluated"], json.dumps(b["params"]), b["score_s"], rows[0][0] / b["score_s"]))
PY
rm -rf "$out/variants" "$out"/export/*.o "$out/export/matmul_f32_test"   # rebuilt by make

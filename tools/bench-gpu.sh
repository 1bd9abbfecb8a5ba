#!/usr/bin/env bash
# bench-gpu.sh KEVO OUTDIR - the benchmarks of bench/README.md on a GPU; raw output under
# OUTDIR (one file each), a summary on stdout.
set -uo pipefail
kevo=${1:-build/kevo}
out=${2:-/tmp/kevo-bench}
build=$(dirname "$kevo")
mkdir -p "$out"
export KEVO_CACHE_DIR=${KEVO_CACHE_DIR:-/tmp/kevo-bench-cache}
hdr() { echo "# $1"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader)"; echo "# date: $(date -u +%FT%TZ)"; echo "# command: $2"; }

c="$build/bench/bench_compile examples/seeds/softmax_rows.cu softmax_fast 30"
{ hdr "compile + load" "$c"; $c; } > "$out/compile.txt" 2>&1; cat "$out/compile.txt"

c="$kevo calibrate --force --json"
{ hdr "calibrate" "$c"; $c; } > "$out/calibrate.txt" 2>&1
python3 - "$out/calibrate.txt" > "$out/copy_vs_calibrate.txt" 2>&1 <<'PY'
import json, sys, torch
txt = open(sys.argv[1]).read()
cal = json.loads(txt[txt.index("{"):])
bw = cal["bandwidth"]
n = 1 << 30                      # 1 GiB copied device to device
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
a.random_(0, 255)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize()
s, e = torch.cuda.Event(True), torch.cuda.Event(True)
ts = []
for _ in range(20):
    s.record(); b.copy_(a); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
ts.sort(); t = ts[len(ts)//2]
copy = 2 * n / t
print("torch device-to-device copy of 1 GiB: %.1f GB/s (read+write), median of 20" % (copy / 1e9))
for k in ("read_bytes_per_s", "write_bytes_per_s", "copy_bytes_per_s", "best_bytes_per_s"):
    print("kevo calibrate %-18s %.1f GB/s = %.3f of the torch copy" % (k, bw[k] / 1e9, bw[k] / copy))
PY
cat "$out/copy_vs_calibrate.txt"

for task in "tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu" \
            "bench/tasks/scale_shift.cu bench/tasks/scale_shift_vec4.cu"; do
  c="$kevo eval --json $task"
  { hdr "whole eval wall time (3 runs; calibration cached), with the phases of each request" "$c"
    for i in 1 2 3; do /usr/bin/time -f "wall %e s" $c > "$out/ev.json"; python3 tools/phase.py "$out/ev.json"; done
    $kevo eval $task; } >> "$out/eval_wall.txt" 2>&1
done
rm -f "$out/ev.json"
grep -E "^wall|wall_s|req|vs ref" "$out/eval_wall.txt" | head -40

c="$kevo eval --json tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu"
{ hdr "repeatability: the same kernel measured in 5 separate runs" "$c"
  for i in 1 2 3 4 5; do $c > "$out/rep_$i.json" 2>/dev/null; done
  python3 - "$out" <<'PY'
import json, sys
runs = [json.load(open("%s/rep_%d.json" % (sys.argv[1], i))) for i in range(1, 6)]
for who in ("reference", "candidate"):
    rows = []
    for r in runs:   # the reference is timed inside the candidate's request, interleaved
        key = "ref_time" if who == "reference" else "time"
        rows.append([w[key]["median_s"] for w in r["candidates"][0]["workloads"]])
    for w in range(len(rows[0])):
        meds = [row[w] for row in rows]
        print("%-9s workload %d: medians (us) %s  max/min %.4f" % (who, w,
              " ".join("%.2f" % (m * 1e6) for m in meds), max(meds) / min(meds)))
PY
} > "$out/repeatability.txt" 2>&1
rm -f "$out"/rep_*.json
cat "$out/repeatability.txt"

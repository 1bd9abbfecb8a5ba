#!/usr/bin/env bash
# gpu-test.sh KEVO - the CUDA path on a real GPU (make gpu-test): the CUDA backend's own
# tests (launch refusals, timing, an illegal address last), then every CUDA line of the
# exploit corpus through `kevo eval` (a correct kernel, each cheat, an infinite loop, an
# illegal address, a trap, too much shared memory, ...), each of which must get its
# expected verdict, and a correct candidate evaluated after a hang and a crash; then a
# timed and profiled eval: CUPTI's clock and the worker's own counters where CUPTI is;
# then the TMA path: harness-encoded tensor maps, and zero maps where a pitch forbids them.
set -uo pipefail
kevo=${1:-build/kevo}
build=$(dirname "$kevo")
fail=0
echo "== gpu-test on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo '?'), $(date -u +%FT%TZ)"
for t in test_backend_cuda test_rtc test_sol; do
    echo "== $build/tests/$t"
    "$build/tests/$t" || fail=1
done
echo "== exploit corpus on the CUDA backend"
KEVO_BIN=$(readlink -f "$kevo") KEVO_EXPLOITS_CUDA=only "$build/tests/test_exploits" || fail=1
echo "== CUPTI: the clock and the in-worker counters (KEVO_CUPTI=0: events and ncu instead)"
root=$(cd "$(dirname "$0")/.." && pwd)
"$kevo" eval --json --profile "$root/tasks/level1/vector_add.cu" \
    "$root/tests/exploits/cuda/control_vector_add.cu" > /tmp/kevo-gpu-test-cupti.json || fail=1
python3 - /tmp/kevo-gpu-test-cupti.json <<'PY' || fail=1
import json, sys
c = json.load(open(sys.argv[1]))["candidates"][0]
clocks = {w["time"]["clock"] for w in c["workloads"]}
p = c.get("profile") or {}
print("verdict", c["verdict"], "clocks", sorted(clocks), "profile", p.get("tool"),
      p.get("diagnosis") or p.get("error"))
ok = c["verdict"] == "ok" and clocks <= {"cupti", "events"}
if clocks == {"cupti"}:   # CUPTI is there: the worker counts too
    ok = ok and p.get("tool") == "cupti" and len(p.get("kernels", [])) == 1
sys.exit(0 if ok else 1)
PY
echo "== TMA tensor maps: the bf16 GEMM exemplar (real maps) and its holdout (zero maps)"
"$kevo" eval --json --holdout "$root/tasks/level1/matmul_bf16.cu" \
    "$root/examples/seeds/matmul_bf16.cu" > /tmp/kevo-gpu-test-tma.json || fail=1
python3 - /tmp/kevo-gpu-test-tma.json <<'PY' || fail=1
import json, sys
c = json.load(open(sys.argv[1]))["candidates"][0]
h = c.get("holdout") or {}
print("verdict", c["verdict"], (c.get("message") or "")[:200], "holdout", h.get("verdict"))
sys.exit(0 if c["verdict"] == "ok" and h.get("verdict") == "ok" else 1)
PY
[ $fail = 0 ] && echo "gpu-test: all passed" || echo "gpu-test: FAILED"
exit $fail

#!/usr/bin/env bash
# gpu-test.sh KEVO - the CUDA path on a real GPU (make gpu-test): the CUDA backend's own
# tests (launch refusals, timing, an illegal address last), then every CUDA line of the
# exploit corpus through `kevo eval` (a correct kernel, each cheat, an infinite loop, an
# illegal address, a trap, too much shared memory, ...), each of which must get its
# expected verdict, and a correct candidate evaluated after a hang and a crash.
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
[ $fail = 0 ] && echo "gpu-test: all passed" || echo "gpu-test: FAILED"
exit $fail

#!/usr/bin/env bash
# first GPU smoke run
export LD_LIBRARY_PATH=$PWD/.deb/root/usr/lib/x86_64-linux-gnu
export KEVO_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
ls /usr/local/cuda/lib64/libnvrtc.so* ; ldd build/kevo | grep -E "not found|seccomp|jansson|crypto|nvrtc"
echo "== test_backend_cuda"; timeout 120 build/tests/test_backend_cuda 2>&1 | tail -25
echo "== test_rtc"; timeout 120 build/tests/test_rtc 2>&1 | tail -8
echo "== calibrate"; timeout 300 build/kevo calibrate --force 2>&1 | tail -20
echo "== eval softmax"; time timeout 300 build/kevo eval tasks/level1/softmax_rows.cu examples/softmax_rows_fast.cu 2>&1 | tail -20
echo "== exploits"
grep -P '\tcuda|/cuda/' tests/exploits/expected.tsv | while IFS=$'\t' read -r cand task want desc; do
  s=$(date +%s.%N)
  out=$(timeout 200 build/kevo eval --json --deadline 20 --time-cap 0.5 "$task" "$cand" 2>/tmp/err)
  got=$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["candidates"][0]["verdict"])' 2>/dev/null || echo "ERR:$(tail -c 200 /tmp/err)")
  e=$(awk -v a="$s" -v b="$(date +%s.%N)" "BEGIN{print b-a}")
  [ "$got" = "$want" ] && r=PASS || r=FAIL
  printf '%s %-45s want=%-16s got=%s (%.1fs)\n' $r "$cand" "$want" "$got" $e
done

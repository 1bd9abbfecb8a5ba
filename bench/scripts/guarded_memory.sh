#!/usr/bin/env bash
# guarded memory on the GPU: gpu-test (CUDA backend tests + the CUDA exploit corpus, the
# far-store cheats included), then eval wall time and timing medians before/after.
# Run on the device from the repository root with build-gpu/ holding kevo (this tree),
# kevo-old (the previous commit's binary), tests/ (test_backend_cuda, test_rtc, test_sol,
# test_exploits) and devlib/ (libcmocka, libseccomp); results land in $OUT.
set -u
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
out=/tmp/gout; rm -rf $out; mkdir -p $out
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $out/device.txt
date -u +%FT%TZ >> $out/device.txt
tools/gpu-test.sh build-gpu/kevo > $out/gpu-test.txt 2>&1
echo "gpu-test rc=$?" >> $out/gpu-test.txt
tail -5 $out/gpu-test.txt
# the far-store cheats with both binaries: what they got before guarded memory
for f in tests/exploits/cuda/far_*.cu; do
  for v in old new; do
    bin=build-gpu/kevo; [ $v = old ] && bin=build-gpu/kevo-old
    echo "$v $(basename $f): $($bin eval tasks/level1/vector_add.cu $f 2>&1 | grep -E "^$f" | cut -c1-220)" >> $out/far.txt
  done
done
cat $out/far.txt
# before/after: the same evals with the previous commit's binary (cuMemAlloc) and this one
# (guarded VMM blocks), alternated, 3 rounds
for r in 1 2 3; do
  for v in old new; do
    bin=build-gpu/kevo; [ $v = old ] && bin=build-gpu/kevo-old
    for pair in "tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu" \
                "tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu" \
                "tasks/level1/rmsnorm_f32.cu tests/exploits/cuda/control_rmsnorm_f32.cu" \
                "bench/tasks/scale_shift.cu bench/tasks/scale_shift_vec4.cu"; do
      set -- $pair
      name=$(basename $1 .cu)
      t0=$(date +%s.%N)
      $bin eval --json $1 $2 > $out/ba-$v-$name-$r.json 2> $out/ba-$v-$name-$r.err
      t1=$(date +%s.%N)
      echo "$v $name round $r wall $(python3 -c "print(round($t1 - $t0, 3))")" >> $out/wall.txt
    done
  done
done
cat $out/wall.txt
python3 bench/scripts/before_after.py $out > $out/summary.txt 2>&1
cat $out/summary.txt
cp $out/far.txt $out/gpu-test.txt $out/wall.txt $out/summary.txt $out/device.txt $OUT/
tar czf $OUT/raw.tar.gz -C $out .

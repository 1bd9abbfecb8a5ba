#!/usr/bin/env bash
# Session 10's device call (issue 13): 1. the coldstate probe (session10_cold_gpu.sh);
# 2. the launch latency of 6 separate workers (3 after 3 s idle, 3 at once) with the spin
# and the interquartile means; 3. the fidelity run and its table; 4. make gpu-test's script.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_DATA_DIR=$PWD
export KEVO_CACHE_DIR=/tmp/kevo-s10-cache
bash bench/scripts/session10_cold_gpu.sh > $OUT/cold.log 2>&1; tail -8 $OUT/cold.log
for i in 1 2 3 4 5 6; do
  [ $i -le 3 ] && sleep 3
  KEVO_VERBOSE=1 build-gpu/kevo eval --no-timing tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu 2>&1 |
    grep -o "launch latency.*" | sed "s/^/worker $i: /"
done | tee $OUT/latency.txt
OUT=$OUT/fid bash bench/ncu_fidelity.sh build-gpu/kevo > $OUT/fid.log 2>&1
python3 bench/ncu_fidelity.py $OUT/fid $OUT/fidelity.json > $OUT/fidelity.txt 2>&1
cat $OUT/fidelity.txt
bash tools/gpu-test.sh build-gpu/kevo > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$?" >> $OUT/gpu-test.txt
tail -3 $OUT/gpu-test.txt
cd $OUT && tar czf raw.tar.gz fid fid.log && rm -rf fid fid.log

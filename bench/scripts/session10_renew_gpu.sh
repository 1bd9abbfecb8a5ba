#!/usr/bin/env bash
# Session 10, the renewed cold start (issue 13; ran with renew/renew.patch of
# bench/results/2026-11-28-h200-session10 applied, not kept): the fidelity run with it (kevo) and without
# it (before: bench/scripts/kevo_norenew.sh, same binary, KEVO_COLD_RENEW=0), the wall time
# of an eval both ways, and make gpu-test's script.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_DATA_DIR=$PWD
export KEVO_CACHE_DIR=/tmp/kevo-s10r-cache
OUT=$OUT/fid bash bench/ncu_fidelity.sh build-gpu/kevo bench/scripts/kevo_norenew.sh > $OUT/fid.log 2>&1
python3 bench/ncu_fidelity.py $OUT/fid $OUT/fidelity.json > $OUT/fidelity.txt 2>&1
cat $OUT/fidelity.txt
SM="tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu"
VA="tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu"
for t in "$SM" "$VA"; do
  for k in build-gpu/kevo bench/scripts/kevo_norenew.sh build-gpu/kevo bench/scripts/kevo_norenew.sh; do
    s=$EPOCHREALTIME; $k eval $t > /dev/null 2>&1; e=$EPOCHREALTIME
    echo "eval wall $(awk "BEGIN{print $e - $s}") s: $k ${t%% *}"
  done
done | tee $OUT/wall.txt
bash tools/gpu-test.sh build-gpu/kevo > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$?" >> $OUT/gpu-test.txt
tail -3 $OUT/gpu-test.txt
cd $OUT && tar czf raw.tar.gz fid fid.log && rm -rf fid fid.log

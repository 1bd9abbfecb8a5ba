#!/usr/bin/env bash
# Session 9's device call (issue 13, the small-kernel offset): the isolated launch latency.
# 1. the fidelity run (kevo against ncu; "before" = the same samples with the back-to-back
#    latency that kevo added until now); 2. three separate calibrations, each measuring
#    both latencies (are they steady from one process to the next?); 3. make gpu-test.
# Output under $OUT: fidelity.json, fidelity.txt, latency.txt, gpu-test.txt, raw.tar.gz.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_DATA_DIR=$PWD
export KEVO_CACHE_DIR=/tmp/kevo-s9-cache
OUT=$OUT/fid bash bench/ncu_fidelity.sh build-gpu/kevo > $OUT/fid.log 2>&1
python3 bench/ncu_fidelity.py $OUT/fid $OUT/fidelity.json > $OUT/fidelity.txt 2>&1
cat $OUT/fidelity.txt
for i in 1 2 3; do
  KEVO_CACHE_DIR=/tmp/kevo-s9-lat-$i build-gpu/kevo calibrate --force --json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print("calibration %s: isolated %.3f us, back to back %.3f us" % (sys.argv[1], j["launch_gap_s"]*1e6, j.get("launch_gap_b2b_s",0)*1e6))' $i
done | tee $OUT/latency.txt
bash tools/gpu-test.sh build-gpu/kevo > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$?" >> $OUT/gpu-test.txt
tail -3 $OUT/gpu-test.txt
cd $OUT && tar czf raw.tar.gz fid fid.log && rm -rf fid fid.log
# 4. where softmax_fast parts from ncu (bench/scripts/softmax_gap_gpu.sh)
cd - > /dev/null && bash bench/scripts/softmax_gap_gpu.sh > $OUT/softmax_gap.txt 2>&1
cat $OUT/softmax_gap.txt
cd $OUT && tar czf sm.tar.gz sm && rm -rf sm

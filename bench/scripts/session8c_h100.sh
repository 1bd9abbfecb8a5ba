#!/usr/bin/env bash
# Session 8's final device call on the final build: make gpu-test (tools/gpu-test.sh), then
# the fidelity run (kevo against ncu; "before" = kevo with warm instruction caches).
# Output: gpu-test.txt, fidelity.json, fidelity.txt, raw.tar.gz under $OUT.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_DATA_DIR=$PWD
bash tools/gpu-test.sh build-gpu/kevo > $OUT/gpu-test.txt 2>&1; echo "gpu-test rc=$?" >> $OUT/gpu-test.txt
tail -4 $OUT/gpu-test.txt
export KEVO_CACHE_DIR=/tmp/kevo-s8c-cache
OUT=$OUT/fid bash bench/ncu_fidelity.sh build-gpu/kevo bench/scripts/kevo_warm_icache.sh > $OUT/fid.log 2>&1
python3 bench/ncu_fidelity.py $OUT/fid $OUT/fidelity.json > $OUT/fidelity.txt 2>&1
cat $OUT/fidelity.txt
cd $OUT && tar czf raw.tar.gz fid fid.log && rm -rf fid fid.log

#!/usr/bin/env bash
# Session 8's device call: the stall probe (raw counters behind the ratios), the counters
# against ncu (profile_agreement) and their spread, then the fidelity run (kevo with cold
# instruction caches against warm ones as "before", and ncu with its SM clock). Output in $OUT.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_CACHE_DIR=/tmp/kevo-s8-cache
build-gpu/kevo calibrate --json > $OUT/calibrate.json 2>&1
bash bench/scripts/stall_probe.sh build-gpu $OUT/stall > $OUT/stall.txt 2>&1
grep -E "^cupti|^ncucol" $OUT/stall.txt
OUT=$OUT/agree bash bench/profile_agreement.sh build-gpu/kevo > $OUT/agree.log 2>&1
python3 bench/profile_agreement.py $OUT/agree $OUT/profile-agreement.json > $OUT/profile-agreement.txt 2>&1
tail -40 $OUT/profile-agreement.txt
OUT=$OUT/spr REPEAT=2 bash bench/profile_spread.sh build-gpu/kevo > $OUT/spread.log 2>&1
python3 bench/profile_spread.py $OUT/spr $OUT/profile-spread.json > $OUT/profile-spread.txt 2>&1
OUT=$OUT/fid bash bench/ncu_fidelity.sh build-gpu/kevo bench/scripts/kevo_warm_icache.sh > $OUT/fid.log 2>&1
python3 bench/ncu_fidelity.py $OUT/fid $OUT/fidelity.json > $OUT/fidelity.txt 2>&1
cat $OUT/fidelity.txt
cd $OUT && tar czf raw.tar.gz fid fid.log stall agree agree.log spr spread.log calibrate.json && rm -rf fid stall agree spr

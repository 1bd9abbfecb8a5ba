#!/usr/bin/env bash
# One device session for issue 13: timing fidelity against ncu (CUPTI clock, with the
# events clock as the A/B "old"), then the counter agreement (CUPTI vs ncu). Raw output
# tarred into $OUT; the JSON results written by the .py scripts.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
K=build-gpu/kevo
OUT_ALL=$OUT
OUT=$OUT_ALL/fid bash bench/ncu_fidelity.sh $K bench/scripts/kevo_events.sh > $OUT_ALL/fid.log 2>&1
python3 bench/ncu_fidelity.py $OUT_ALL/fid $OUT_ALL/fidelity.json > $OUT_ALL/fidelity.txt 2>&1
cat $OUT_ALL/fidelity.txt
OUT=$OUT_ALL/agr bash bench/profile_agreement.sh $K > $OUT_ALL/agr.log 2>&1
python3 bench/profile_agreement.py $OUT_ALL/agr $OUT_ALL/agreement.json > $OUT_ALL/agreement.txt 2>&1
cat $OUT_ALL/agr.log $OUT_ALL/agreement.txt
cd $OUT_ALL && tar czf raw.tar.gz fid agr fid.log agr.log && rm -rf fid agr

#!/usr/bin/env bash
# The timing half of fidelity_h100.sh alone (CUPTI clock vs ncu, events as the A/B).
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
K=build-gpu/kevo
OUT_ALL=$OUT
OUT=$OUT_ALL/fid bash bench/ncu_fidelity.sh $K bench/scripts/kevo_events.sh > $OUT_ALL/fid.log 2>&1
python3 bench/ncu_fidelity.py $OUT_ALL/fid $OUT_ALL/fidelity.json > $OUT_ALL/fidelity.txt 2>&1
cat $OUT_ALL/fidelity.txt
python3 -c "import json; print('launch_gap_s', json.load(open('$OUT_ALL/fid/kevo-vadd_vec4.json'))['calibration'].get('launch_gap_s'))"
cd $OUT_ALL && tar czf raw.tar.gz fid fid.log && rm -rf fid

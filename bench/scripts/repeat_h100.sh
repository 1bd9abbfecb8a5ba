#!/usr/bin/env bash
# gpu-test with the CUPTI build, then where the run-to-run spread of a ~6 us kernel comes
# from: 8 separate evals of the vector add with the CUPTI clock and 8 with events, each
# printing the candidate's and the reference's median and min per workload.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
K=build-gpu/kevo
bash tools/gpu-test.sh $K > $OUT/gpu-test.txt 2>&1; tail -5 $OUT/gpu-test.txt
for clk in cupti events; do
  for i in 1 2 3 4 5 6 7 8; do
    if [ $clk = events ]; then export KEVO_CUPTI=0; else unset KEVO_CUPTI; fi
    $K eval --json tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu > $OUT/r.json 2>/dev/null
    python3 -c "
import json; c=json.load(open('$OUT/r.json'))['candidates'][0]
print('$clk', $i, ' '.join('%s:%.3f/%.3f ref %.3f/%.3f b%d' % (list(w['sizes'].values())[0], w['time']['median_s']*1e6, w['time']['min_s']*1e6, w['ref_time']['median_s']*1e6, w['ref_time']['min_s']*1e6, w['time']['batch']) for w in c['workloads'][1:]))"
  done
done | tee $OUT/repeat.txt

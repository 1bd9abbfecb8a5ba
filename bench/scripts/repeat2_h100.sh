#!/usr/bin/env bash
# 8 separate evals of the vector add with the CUPTI clock: the candidate's and the
# reference's median and min per small workload, and the launch latency each worker measured.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
K=build-gpu/kevo
for i in 1 2 3 4 5 6 7 8; do
  $K eval --json tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu > $OUT/r.json 2>/dev/null
  python3 -c "
import json; c=json.load(open('$OUT/r.json'))['candidates'][0]
print('cupti', $i, 'gap %.3f' % (c['workloads'][0]['time'].get('launch_gap_s', -1)*1e6), ' '.join('%s:%.3f/%.3f ref %.3f/%.3f b%d' % (list(w['sizes'].values())[0], w['time']['median_s']*1e6, w['time']['min_s']*1e6, w['ref_time']['median_s']*1e6, w['ref_time']['min_s']*1e6, w['time']['batch']) for w in c['workloads']))"
done | tee $OUT/repeat2.txt

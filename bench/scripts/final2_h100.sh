#!/usr/bin/env bash
# The session's last GPU check, on the build of the whole working tree: the CUDA path
# (gpu-test: backend tests, the exploit corpus, the CUPTI clock and counters), and the
# SwiGLU kernel that beat the DRAM floor with its output in L2 (now judged by T_floor).
export LD_LIBRARY_PATH=$PWD/build-gpu3/devlib:${LD_LIBRARY_PATH:-}
K=build-gpu3/kevo
bash tools/gpu-test.sh $K > $OUT/gpu-test.txt 2>&1; tail -4 $OUT/gpu-test.txt
$K eval --json tasks/level2/swiglu_bf16.cu examples/seeds/swiglu_bf16.cu > $OUT/swiglu.json 2> $OUT/swiglu.err
python3 -c "
import json; c=json.load(open('$OUT/swiglu.json'))['candidates'][0]; print('swiglu', c['verdict'], c['message'][:160])
for w in c['workloads']: t=w.get('time',{}); print(' ', w['sizes'], w['verdict'], '%.2f us' % (t.get('median_s',0)*1e6), 'sol %.3f' % w.get('sol_fraction',0), 'speedup %.2f' % w.get('speedup',0))"

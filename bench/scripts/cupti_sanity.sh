#!/usr/bin/env bash
# The first look at CUPTI in the worker on a GPU: where libcupti is, a timed eval (which
# clock timed it), an in-worker profile and the ncu fallback of the same, the CUDA
# backend's unit tests. Output in $OUT.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
K=build-gpu/kevo
{
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ
ls -la /usr/local/cuda/lib64/ | grep -i -E 'cupti|nvperf'; ls /usr/local/cuda/extras/CUPTI/lib64 2>&1 | head
for p in "tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu" "tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu"; do
  echo "== eval $p"; /usr/bin/time -f "%e s" $K eval --json $p > $OUT/eval.json 2> $OUT/eval.err; tail -3 $OUT/eval.err
  python3 -c "
import json; j=json.load(open('$OUT/eval.json')); c=j['candidates'][0]; print(c['verdict'], c['message'][:200])
for w in c.get('workloads',[]): t=w.get('time',{}); print(w.get('sizes'), t.get('clock'), t.get('batch'), round(t.get('median_s',0)*1e6,3), 'us', 'ref', w.get('ref_time',{}).get('clock'))"
done
echo "== profile (cupti)"; /usr/bin/time -f "%e s" $K eval --profile --no-timing tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu 2>&1 | tail -30
echo "== profile (KEVO_CUPTI=0: ncu)"; KEVO_CUPTI=0 /usr/bin/time -f "%e s" $K eval --profile --no-timing tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu 2>&1 | tail -30
$K eval --json --no-timing --profile tasks/level1/matmul_f32.cu examples/seeds/matmul_f32.cu > $OUT/prof-sgemm.json 2> $OUT/prof-sgemm.err; tail -5 $OUT/prof-sgemm.err
python3 -c "import json; print(json.dumps(json.load(open('$OUT/prof-sgemm.json'))['candidates'][0].get('profile'))[:1500])"
echo "== test_backend_cuda"; build-gpu/tests/test_backend_cuda 2>&1 | tail -15
} > $OUT/sanity.txt 2>&1
cat $OUT/sanity.txt | tail -120

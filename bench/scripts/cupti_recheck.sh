#!/usr/bin/env bash
# A last look after a clean-up of src/worker/cupti.c: a timed and profiled eval of two
# suite kernels (the clock, the counters, what they cost).
export LD_LIBRARY_PATH=$PWD/build-gpu3/devlib:${LD_LIBRARY_PATH:-}
for p in "tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu" "tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu"; do
  build-gpu3/kevo eval --profile $p 2>&1 | tail -8
done

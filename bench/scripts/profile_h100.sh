#!/usr/bin/env bash
export LD_LIBRARY_PATH=$PWD/build/devlib:${LD_LIBRARY_PATH:-}
{ echo "# kevo eval --profile on suite tasks (issue 13 item 3, ncu collector)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); date: $(date -u +%FT%TZ)"; echo "# command: build/kevo eval --profile TASK CAND (text), then --json for the first"; 
for p in "tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu" "tasks/level1/matmul_f32.cu examples/seeds/matmul_f32.cu" "tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu"; do
  echo; echo "## kevo eval --profile $p"; build/kevo eval --profile $p 2>&1
done; } > $OUT/profile.txt 2>&1
build/kevo eval --profile --json tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu > $OUT/profile-vector_add.json 2> $OUT/profile-vector_add.err
tail -40 $OUT/profile.txt

#!/usr/bin/env bash
# The repeats after the last trial (docs/harness.md) on CUDA: the same candidates evaluated
# by each binary given (e.g. a build before the repeats, 183941f, and one with them):
# verdicts, where a failure showed, and the seconds verification took. Written in session
# 11, which had no device time left to run it.
# usage: OUT=DIR bench/scripts/session11_gpu.sh build-gpu/kevo-old build-gpu/kevo
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_DATA_DIR=$PWD
export KEVO_CACHE_DIR=/tmp/kevo-s11-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for bin in "$@"; do
  b=$(basename "$bin")
  "$bin" eval --json tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu \
    tests/exploits/cuda/timed_phase_cheat.cu > $OUT/$b-vadd.json 2> $OUT/$b-vadd.err
  "$bin" eval --json tasks/level1/softmax_rows.cu tests/exploits/cuda/control_softmax_rows.cu \
    tests/exploits/cuda/race.cu > $OUT/$b-softmax.json 2> $OUT/$b-softmax.err
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    d = json.load(open(f))
    for c in [d["reference"]] + d["candidates"]:
        e = c.get("evidence") or {}
        print(os.path.basename(f), os.path.basename(c.get("path", "reference")), c["verdict"],
              {k: e[k] for k in ("workload", "trial", "repeat", "set") if k in e},
              "verify_s=%.3f" % c.get("phases_s", {}).get("verify", -1),
              "time_s=%.3f" % c.get("phases_s", {}).get("time", -1))
    print(os.path.basename(f), "wall", d["wall_s"])
PY

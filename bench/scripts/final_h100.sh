#!/usr/bin/env bash
# The closing measurement of issue 13's timing: 8 separate evals of the vector add (the
# calibrated launch latency shared through the calibration cache), then the full fidelity
# benchmark against ncu with its repeatability runs.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_CACHE_DIR=/tmp/kevo-final-cache
bash bench/scripts/repeat2_h100.sh
bash bench/scripts/fidelity_only_h100.sh

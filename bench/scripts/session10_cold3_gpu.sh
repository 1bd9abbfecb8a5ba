#!/usr/bin/env bash
# Session 10, call 6 (issue 13): memory given back to the driver (cuMemRelease) and taken
# again made softmax_fast as fast as after ncu's flush when the GPU then had time (under ncu,
# 61.6 us by the kernel's own clock) and slower when the kernel followed at once (70.1 us).
# Which part does it, and does a small block do it too? bench/probes/coldstate.cu variants
# *_wait sync and sleep 5 ms before the kernel is queued.
o=$OUT/cold4; mkdir -p $o
P=build-gpu/coldstate
for v in kevo kevo_wait release_wait small_release small_release_wait evict_release_wait kevo; do
  $P $v 20
done | tee $o/events.txt

#!/usr/bin/env bash
# Session 10, call 7 (issue 13): after call 6 (release_wait: the flush buffer's memory given
# back and new memory taken, then 5 ms: 61.8 us by the kernel's own clock, as after ncu's
# flush), which half does it: giving the memory back, taking new memory, or an unmap alone?
# And what the driver calls cost on the host.
o=$OUT/cold5; mkdir -p $o
P=build-gpu/coldstate
for v in kevo release_wait give_back_wait give_back take_wait remap_flush_wait kevo_wait kevo; do
  $P $v 20
done | tee $o/events.txt

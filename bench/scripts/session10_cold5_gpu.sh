#!/usr/bin/env bash
# Session 10, call 8 (issue 13): giving the flush buffer's memory back brings ncu's state
# once the driver's work behind it is done (call 7: 62.8 us after 5 ms, 69.7 us at once).
# Does a sync suffice, or how long must the GPU wait; and what does the whole cycle (give
# back, take new memory at the same address, sync) cost on the host?
o=$OUT/cold6; mkdir -p $o
P=build-gpu/coldstate
for v in kevo give_back_sync give_back_200us give_back_1ms give_back_wait release_sync release_wait kevo; do
  $P $v 20
done | tee $o/events.txt

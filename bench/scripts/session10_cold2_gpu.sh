#!/usr/bin/env bash
# Session 10, call 5 (issue 13): two more leads on softmax_fast 4096 x 8192's faster run after
# ncu's flush, with bench/probes/coldstate.cu: (1) memory given back to the driver and taken
# again right after the evict (does the driver invalidate L2 for it?); (2) the kernel's
# shared-memory carveout (does ncu's flush leave the SMs configured otherwise?).
o=$OUT/cold3; mkdir -p $o
P=build-gpu/coldstate
$P all 20 | tee $o/events.txt
for c in 0 50 100; do
  echo "carveout $c: $(COLDSTATE_CARVEOUT=$c $P kevo 30)"
done | tee $o/carveout.txt
N="ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:^softmax_clocked$"
for cc in none all; do
  for v in release release_discard; do
    COLDSTATE_NOBLOCK=1 timeout 120 $N --cache-control $cc --log-file $o/ncu-$cc-$v.csv $P $v 15 > $o/ncu-$cc-$v.out 2>&1
    echo "ncu cache-control $cc $v: $(grep -c gpu__time $o/ncu-$cc-$v.csv) rows; $(grep median $o/ncu-$cc-$v.out)"
  done
done | tee $o/ncu.txt

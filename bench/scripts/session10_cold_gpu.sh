#!/usr/bin/env bash
# Session 10 (issue 13): bench/probes/coldstate.cu on the device - is softmax_fast 4096 x 8192
# faster after ncu's cache control, or only timed shorter? Every variant of the state before
# the kernel, in one process (events around the kernel queued behind a blocker, and the
# kernel's own %globaltimer span); then under ncu, cache control none (the variant's own
# state) and all (ncu's flush), with ncu's gpu__time_duration beside the kernel's own clock
# (no blocker there: ncu serializes launches, and a blocker released by the host would hang).
o=$OUT/cold; mkdir -p $o
P=build-gpu/coldstate
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/device.txt
$P all 30 | tee $o/events.txt
N="ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:^softmax_clocked$"
for cc in none all; do
  for v in kevo discard_y none; do
    COLDSTATE_NOBLOCK=1 timeout 120 $N --cache-control $cc --log-file $o/ncu-$cc-$v.csv $P $v 15 > $o/ncu-$cc-$v.out 2>&1
    python3 - $o/ncu-$cc-$v.csv $cc $v "$(grep median $o/ncu-$cc-$v.out)" <<'PY'
import csv, io, statistics, sys
t = open(sys.argv[1]).read(); t = t[t.find('"ID"'):]
v = [float(r["Metric Value"].replace(",", "")) / (1e3 if r.get("Metric Unit", "ns") in ("ns", "nsecond") else 1e-3 if r.get("Metric Unit") in ("ms", "msecond") else 1)
     for r in csv.DictReader(io.StringIO(t)) if r["Metric Name"] == "gpu__time_duration.sum" and r["Grid Size"].startswith("(4096")]
print("ncu cache-control %-4s %-10s n=%d gpu__time_duration median %.2f us | the program: %s" % (sys.argv[2], sys.argv[3], len(v), statistics.median(v[2:]) if len(v) > 2 else -1, sys.argv[4]))
PY
  done
done | tee $o/ncu.txt

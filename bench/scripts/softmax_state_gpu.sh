#!/usr/bin/env bash
# As run in sessions 9-10, before the repeats after the last trial (session 11): its launch
# counts take verification as 6 launches per workload; it is now 6 plus 8-32 repeats.
# softmax_fast 4096 x 8192 on the timed launches of an ordinary eval, under ncu: DRAM
# bytes read and written by the kernel after kevo's own cold start (--cache-control none)
# and after ncu's cache flush (all), with its time in a separate run (one metric group per
# run, so no replay pass sees a state ncu's own save/restore left). Session 9, issue 13.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_CACHE_DIR=/tmp/kevo-st-cache
K=build-gpu/kevo
T=tasks/level1/softmax_rows.cu
C=examples/seeds/softmax_rows.cu
o=$OUT/st
mkdir -p $o
N="ncu --target-processes all --clock-control none --csv -k regex:^softmax_fast$ --launch-count 40"
for cc in none all; do
  for m in gpu__time_duration.sum dram__bytes_read.sum,dram__bytes_write.sum lts__t_sectors_op_read_lookup_miss.sum,lts__t_sectors_op_write.sum; do
    KEVO_CUPTI=0 $N --cache-control $cc --metrics $m --log-file $o/$cc-${m%%.*}.csv $K eval --trials 3 --time-cap 1.5 --deadline 300 $T $C > /dev/null 2>&1
  done
done
python3 - $o <<'PY'
import csv, glob, io, os, statistics, sys
o = sys.argv[1]
for f in sorted(glob.glob(o + "/*.csv")):
    t = open(f).read(); t = t[t.find('"ID"'):]
    by = {}
    for r in csv.DictReader(io.StringIO(t)):
        if r["Grid Size"].startswith("(4096"):
            by.setdefault((r["Metric Name"], r["Metric Unit"]), []).append(float(r["Metric Value"].replace(",", "")))
    for (m, u), v in by.items():
        # the first 6 launches are verification (3 trials x 2 runs), the rest timed
        print(os.path.basename(f), m, u, "n", len(v), "verify", "%.4g" % statistics.median(v[:6]),
              "timed", "%.4g" % statistics.median(v[6:]) if len(v) > 6 else "-", ["%.4g" % x for x in v[6:]])
PY

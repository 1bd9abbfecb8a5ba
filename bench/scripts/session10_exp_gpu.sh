#!/usr/bin/env bash
# Session 10's experiment call (issue 13), on the exp-s10 build (knobs KEVO_EXP_*):
# A. the isolated launch latency from one process to the next: cold (after a 3 s idle) and
#    hot, without and with a 50 ms spin before it, 21 and 101 samples;
# B. what follows the cold start (KEVO_EXP_COLD) on the latency-bound row kernels, with
#    ncu's figures on the same kernels in the same call.
export LD_LIBRARY_PATH=$PWD/build-gpu/devlib:${LD_LIBRARY_PATH:-}
export KEVO_CACHE_DIR=/tmp/kevo-s10-cache
K=build-gpu/kevo
o=$OUT/exp; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $o/device.txt
$K calibrate --json > $o/calibrate.json 2> $o/calibrate.err
VA="tasks/level1/vector_add.cu tests/exploits/cuda/control_vector_add.cu"
lat() {   # label, env...
  local l=$1; shift
  for i in 1 2 3 4 5 6; do
    [ $i -le 3 ] && sleep 3
    env "$@" KEVO_VERBOSE=1 $K eval --no-timing $VA 2>&1 | grep -o "launch latency.*" | sed "s/^/$l $i /"
  done
}
{
lat base KEVO_EXP_ISO_N=21
lat spin KEVO_EXP_ISO_N=21 KEVO_EXP_LAT_WARM_MS=50
lat spin101 KEVO_EXP_ISO_N=101 KEVO_EXP_LAT_WARM_MS=50
lat base101 KEVO_EXP_ISO_N=101
} > $o/latency.txt 2>&1
cat $o/latency.txt
SM="tasks/level1/softmax_rows.cu examples/seeds/softmax_rows.cu"
RMS="tasks/level1/rmsnorm_f32.cu tests/exploits/cuda/control_rmsnorm_f32.cu"
for v in base nodiscard sync reset limit tlb tlb64k warm warm2m twice base; do
  for r in 1 2; do
    KEVO_EXP_COLD=$([ $v = base ] || echo $v) $K eval --json $SM > $o/sm-$v-$r.json 2> $o/sm-$v-$r.err
  done
  KEVO_EXP_COLD=$([ $v = base ] || echo $v) $K eval --json $RMS > $o/rms-$v.json 2> $o/rms-$v.err
done
N="ncu --target-processes all --clock-control none --cache-control all --metrics gpu__time_duration.sum --csv"
KEVO_CUPTI=0 $N -k regex:^softmax_fast$ --log-file $o/ncu-sm.csv $K eval --no-timing --trials 10 $SM > /dev/null 2>&1
KEVO_CUPTI=0 $N -k regex:^rmsnorm_warp$ --log-file $o/ncu-rms.csv $K eval --no-timing --trials 10 $RMS > /dev/null 2>&1
python3 - $o <<'PY'
import csv, glob, io, json, os, statistics, sys
o = sys.argv[1]
def med(f):
    try:
        c = json.load(open(f))["candidates"][0]
        return ["%s %.2f" % (",".join("%s" % v for v in w["sizes"].values()), w["time"]["median_s"] * 1e6) for w in c["workloads"]]
    except Exception as e:
        return ["ERR %s %s" % (e, open(f.replace(".json", ".err")).read()[-300:])]
for f in sorted(glob.glob(o + "/sm-*.json"), key=os.path.getmtime) + sorted(glob.glob(o + "/rms-*.json"), key=os.path.getmtime):
    print(os.path.basename(f), med(f))
for n in ["ncu-sm", "ncu-rms"]:
    t = open(f"{o}/{n}.csv").read(); t = t[t.find('"ID"'):]
    g = {}
    for r in csv.DictReader(io.StringIO(t)):
        if r["Metric Name"] == "gpu__time_duration.sum":
            v = float(r["Metric Value"].replace(",", "")); u = r.get("Metric Unit", "")
            v = v / 1e3 if u in ("nsecond", "ns") else v * 1e3 if u in ("msecond", "ms") else v
            g.setdefault(r["Grid Size"], []).append(v)
    for k, v in g.items():
        print(n, k, len(v), "median %.2f" % statistics.median(v))
PY

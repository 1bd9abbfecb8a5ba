#!/usr/bin/env bash
# bench/scripts/mpi_gpu.sh KEVO [OUT] [MPI_ROOT] - kevo run --mpi on one GPU machine:
#   1. a 2-rank search on the GPU(s) (every rank a worker on device 0 unless GPUS is set)
#   2. the controller's overhead through MPI: mpi_scaling.py with rank 0 as a controller
#      only (it sees no GPU) and one rank evaluating, beside one worker without MPI
# MPI_ROOT: an Open MPI unpacked from the distribution's packages (dpkg -x of openmpi-bin,
# libopenmpi3, ... into MPI_ROOT), for a machine without one installed. GPUS: --gpus LIST
# for every rank (default: each rank one worker on device 0). TASK, SEED, BACKEND: another
# task (default tasks/level1/softmax_rows.cu, its seed, cuda).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kevo=$(cd "$(dirname "${1:?usage: mpi_gpu.sh KEVO [OUT] [MPI_ROOT]}")" && pwd)/$(basename "$1")
out=${2:-/dev/stdout}
if [ -n "${3:-}" ]; then
    m=$(cd "$3" && pwd)/usr
    export OPAL_PREFIX=$m PATH=$m/bin:$PATH
    export LD_LIBRARY_PATH=$m/lib/x86_64-linux-gnu:$m/lib/x86_64-linux-gnu/openmpi/lib:$m/lib/x86_64-linux-gnu/pmix2/lib:${LD_LIBRARY_PATH:-}
    export PMIX_MCA_mca_base_component_path=$m/lib/x86_64-linux-gnu/pmix2/lib/pmix
    export OMPI_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_pcompress_base_silence_warning=1
    mpirun=$m/bin/orterun
else
    mpirun=mpirun
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export KEVO_ARCHIVE=${KEVO_ARCHIVE:-/tmp/kevo-mpi-gpu.db} KEVO_CACHE_DIR=${KEVO_CACHE_DIR:-/tmp/kevo-cache}
mkdir -p "$(dirname "$out")" 2>/dev/null
task=${TASK:-$root/tasks/level1/softmax_rows.cu}
seed=${SEED:-$root/examples/seeds/softmax_rows.cu}
backend=${BACKEND:-cuda}
export MPIRUN=$mpirun
gpus=()
[ -n "${GPUS:-}" ] && gpus=(--gpus "$GPUS")
mpi=("$mpirun" --oversubscribe --enable-recovery --mca btl_vader_single_copy_mechanism none)
{
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
"$kevo" version
echo "== 1. mpirun -np 2 kevo run $(basename "$task") --mpi ${gpus[*]}"
"${mpi[@]}" -np 2 "$kevo" run "$task" --seed "$seed" --backend "$backend" --budget 24 \
    "${gpus[@]}" --mpi 2>&1
echo "rc=$?"
echo "== the archive: where each candidate ran"
python3 - "$KEVO_ARCHIVE" <<'PY'
import json, sqlite3, sys, collections
db = sqlite3.connect(sys.argv[1])
c = collections.Counter()
for (r,) in db.execute("SELECT result FROM evaluations"):
    by = json.loads(r).get("evaluated_by") or {}
    c[(by.get("rank"), by.get("device"), by.get("host"))] += 1
for k, n in sorted(c.items(), key=str):
    print("rank %s device %s host %s: %d results" % (k + (n,)))
PY
echo "== 2. controller overhead ($(basename "$task"), 24 evaluations per worker)"
python3 "$root/bench/scripts/mpi_scaling.py" "$kevo" --backend "$backend" --task "$task" \
    --seed "$seed" --ranks 1 --per-slot 24 --local 2>&1
python3 "$root/bench/scripts/mpi_scaling.py" "$kevo" --backend "$backend" --task "$task" \
    --seed "$seed" --ranks 2 --per-slot 24 --rank0-no-device 2>&1
} > "$out"
[ "$out" = /dev/stdout ] || tail -40 "$out"

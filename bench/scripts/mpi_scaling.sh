#!/usr/bin/env bash
# bench/scripts/mpi_scaling.sh [KEVO] [OUT] [extra options of mpi_scaling.py]
# `kevo run --mpi` on 1..8 ranks of this machine (CPU backend, bench/tasks/cpu_sleep.c:
# ~1 s evaluations that mostly sleep), and the same search with N local workers without
# MPI: steady-state evaluations per second, scaling against one rank, the workers' idle
# share (the controller overhead) and each request's pipe/MPI cost. Figures appended to
# OUT (default bench/results/<date>-cpu-mpi-scaling.txt); docs/cluster.md says what they
# mean. On a GPU machine: --backend cuda --task TASK --seed SEED (--gpus LIST per rank).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kevo=${1:-$root/build/kevo}
out=${2:-$root/bench/results/$(date +%F)-cpu-mpi-scaling.txt}
shift $(( $# < 2 ? $# : 2 ))
command -v mpirun >/dev/null || { echo "mpi_scaling.sh: no mpirun (openmpi-bin)" >&2; exit 1; }
"$kevo" version | grep -q '^mpi: Open MPI' || { echo "mpi_scaling.sh: $kevo is built without MPI" >&2; exit 1; }
exec python3 "$root/bench/scripts/mpi_scaling.py" "$kevo" --local --out "$out" "$@"

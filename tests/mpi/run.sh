#!/usr/bin/env bash
# tests/mpi/run.sh KEVO - `kevo run --mpi` on the CPU backend, under mpirun on this one
# machine (oversubscribed): the evaluations spread over the ranks and find the best a
# single-process run finds, a worker rank killed with SIGKILL is survived, and a
# controller killed with SIGKILL resumes. `make test` runs it when kevo is built with MPI;
# the checks are tests/mpi/mpi_test.py's.
set -euo pipefail
kevo=${1:?usage: tests/mpi/run.sh KEVO}
command -v mpirun >/dev/null || { echo "tests/mpi/run.sh: no mpirun (openmpi-bin)" >&2; exit 1; }
# AddressSanitizer builds: Open MPI's own allocations are not kevo's leaks
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
exec python3 "$(dirname "$0")/mpi_test.py" "$kevo"

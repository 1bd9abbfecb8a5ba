#!/usr/bin/env bash
# deps.sh check|install - make sure what kevo builds against is present.
# install: apt-get when root, otherwise print the exact command to run.
set -u
mode=${1:-check}
CUDA=${CUDA:-/usr/local/cuda}
pkgs=(build-essential libjansson-dev libcmocka-dev libseccomp-dev libssl-dev libsqlite3-dev libcurl4-openssl-dev pkg-config python3)
missing=()
have_header() { echo "#include <$1>" | ${CC:-cc} -E -x c - >/dev/null 2>&1; }
have_header jansson.h        || missing+=(libjansson-dev)
have_header cmocka.h 2>/dev/null || { printf '#include <stdarg.h>\n#include <stddef.h>\n#include <setjmp.h>\n#include <cmocka.h>\n' | ${CC:-cc} -E -x c - >/dev/null 2>&1 || missing+=(libcmocka-dev); }
have_header seccomp.h        || missing+=(libseccomp-dev)
have_header openssl/evp.h    || missing+=(libssl-dev)
have_header sqlite3.h        || missing+=(libsqlite3-dev)
have_header curl/curl.h      || missing+=(libcurl4-openssl-dev)
command -v ${CC:-cc} >/dev/null || missing+=(build-essential)
command -v python3 >/dev/null || missing+=(python3)      # tools/checksrc
cuda_ok=1
[ -f "$CUDA/include/nvrtc.h" ] && [ -e "$CUDA/lib64/libnvrtc.so" ] || cuda_ok=0

if [ ${#missing[@]} -gt 0 ]; then
    if [ "$mode" = install ]; then
        if [ "$(id -u)" = 0 ]; then
            echo "kevo: installing ${missing[*]}"
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null || {
                echo "kevo: apt-get install failed" >&2; exit 1; }
        else
            echo "kevo: missing packages; run:" >&2
            echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
            exit 1
        fi
    else
        echo "kevo: missing build dependencies: ${missing[*]} (run 'make deps' or 'make run')" >&2
        exit 1
    fi
fi
# optional: Open MPI for `kevo run --mpi` (docs/cluster.md); the build works without it
if [ "$mode" = install ] && ! command -v mpicc >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        echo "kevo: installing libopenmpi-dev openmpi-bin (optional: kevo run --mpi)"
        export DEBIAN_FRONTEND=noninteractive
        { apt-get update -qq && apt-get install -y -qq libopenmpi-dev openmpi-bin >/dev/null; } ||
            echo "kevo: Open MPI not installed; kevo builds without --mpi" >&2
    else
        echo "kevo: optional, for kevo run --mpi: sudo apt-get install -y libopenmpi-dev openmpi-bin" >&2
    fi
fi
if [ $cuda_ok = 0 ]; then
    echo "kevo: the CUDA toolkit (NVRTC) was not found at $CUDA." >&2
    echo "  Install CUDA 12.4+ from https://developer.nvidia.com/cuda-downloads" >&2
    echo "  (Debian/Ubuntu: the cuda-toolkit package of NVIDIA's apt repository), or set CUDA=/path." >&2
    exit 1
fi
exit 0

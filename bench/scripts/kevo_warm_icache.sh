#!/usr/bin/env bash
# kevo whose cold starts keep the SMs' instruction caches warm (the cold start before
# 2026-11-25, session 8), for an A/B in one session:
# bench/ncu_fidelity.sh KEVO bench/scripts/kevo_warm_icache.sh
KEVO_WARM_ICACHE=1 exec "${KEVO_WARM_BIN:-build-gpu/kevo}" "$@"

#!/usr/bin/env bash
# kevo timed with CUDA events instead of CUPTI's kernel timestamps (the clock before
# 2026-11-25), for an A/B in one session: bench/ncu_fidelity.sh KEVO bench/scripts/kevo_events.sh
KEVO_CUPTI=0 exec "${KEVO_EVENTS_BIN:-build-gpu/kevo}" "$@"

#!/usr/bin/env bash
# (Ran on the build with bench/results/2026-11-28-h200-session10/renew/renew.patch applied;
# kevo has no KEVO_COLD_RENEW: the renewal was not kept.)
# kevo with the cold start of before session 10 (evict + discard, no renewal of the flush
# buffer's memory): the "old" kevo of bench/ncu_fidelity.sh in session 10's comparison.
exec env KEVO_COLD_RENEW=0 "$(dirname "$0")/../../build-gpu/kevo" "$@"

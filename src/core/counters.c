/*
 * counters - the metric list of counters.h. The stall reasons are those Nsight Compute
 * lists for sm_90 (`ncu --query-metrics`): the profile keeps the largest few per kernel.
 */
#include "core/counters.h"

#define STALL(r) KEVO_CTR_STALL_PFX r KEVO_CTR_STALL_SFX

const char *const kevo_counters[] = {
    KEVO_CTR_TIME, KEVO_CTR_DRAM_PCT, KEVO_CTR_DRAM_RD, KEVO_CTR_DRAM_WR, KEVO_CTR_L2_HIT,
    KEVO_CTR_L1_HIT, KEVO_CTR_SM_PCT, KEVO_CTR_HMMA, KEVO_CTR_GMMA, KEVO_CTR_WARPS,
    KEVO_CTR_LOCAL_LD, KEVO_CTR_LOCAL_ST, KEVO_CTR_SM_HZ,
    STALL("barrier"), STALL("branch_resolving"), STALL("dispatch_stall"), STALL("drain"),
    STALL("gmma"), STALL("imc_miss"), STALL("lg_throttle"), STALL("long_scoreboard"),
    STALL("math_pipe_throttle"), STALL("membar"), STALL("mio_throttle"), STALL("misc"),
    STALL("no_instruction"), STALL("not_selected"), STALL("selected"),
    STALL("short_scoreboard"), STALL("sleeping"), STALL("tex_throttle"), STALL("wait"),
};
const int kevo_counters_count = (int)(sizeof kevo_counters / sizeof kevo_counters[0]);

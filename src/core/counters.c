/*
 * counters - the metric list of counters.h. The stall reasons are those Nsight Compute
 * lists for sm_90 (`ncu --query-metrics`): the profile keeps the largest few per kernel.
 * And the list a collection asks for: those, then KEVO_PROFILE_EXTRA's.
 */
#include "core/counters.h"

#include <string.h>

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

_Static_assert(sizeof kevo_counters / sizeof kevo_counters[0] <= 64,
               "kevo's counters fit a kevo_counter_list");

static int name_ok(const char *s, size_t n)
{
    if (n == 0 || n > KEVO_COUNTER_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.'))
            return 0;
    }
    return 1;
}

static int listed(const struct kevo_counter_list *l, const char *s, size_t n)
{
    for (int i = 0; i < l->n; i++) {
        if (strlen(l->name[i]) == n && !strncmp(l->name[i], s, n))
            return 1;
    }
    return 0;
}

int kevo_counters_list(struct kevo_counter_list *l, const char *extra)
{
    int n_extra = 0, left_out = 0;

    l->n = 0;
    for (int k = 0; k < kevo_counters_count; k++)
        l->name[l->n++] = kevo_counters[k];
    while (extra && *extra) {
        size_t len = strcspn(extra, ",");
        if (len && (!name_ok(extra, len) || n_extra == KEVO_COUNTERS_EXTRA_MAX))
            left_out++;
        else if (len && !listed(l, extra, len)) {
            memcpy(l->extra[n_extra], extra, len);
            l->extra[n_extra][len] = '\0';
            l->name[l->n++] = l->extra[n_extra++];
        }
        extra += len + (extra[len] == ',');
    }
    return left_out;
}

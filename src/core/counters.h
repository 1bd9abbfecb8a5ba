/*
 * counters - the hardware counters kevo collects for a profile (docs/eval-json.md
 * "profile"), by their perfworks names: what the worker asks CUPTI's range profiler for
 * and what the controller asks Nsight Compute's CLI for, so both collectors fill the same
 * per-launch {metric: value} maps that ctl/profile.c turns into a kernel's figures.
 */
#ifndef KEVO_COUNTERS_H
#define KEVO_COUNTERS_H

#define KEVO_CTR_TIME     "gpu__time_duration.sum"
#define KEVO_CTR_DRAM_PCT "dram__throughput.avg.pct_of_peak_sustained_elapsed"
#define KEVO_CTR_DRAM_RD  "dram__bytes_read.sum"
#define KEVO_CTR_DRAM_WR  "dram__bytes_write.sum"
#define KEVO_CTR_L2_HIT   "lts__t_sector_hit_rate.pct"
#define KEVO_CTR_L1_HIT   "l1tex__t_sector_hit_rate.pct"
#define KEVO_CTR_SM_PCT   "sm__throughput.avg.pct_of_peak_sustained_elapsed"
#define KEVO_CTR_HMMA     "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
#define KEVO_CTR_GMMA     "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
#define KEVO_CTR_WARPS    "sm__warps_active.avg.pct_of_peak_sustained_active"
#define KEVO_CTR_LOCAL_LD "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"
#define KEVO_CTR_LOCAL_ST "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"
/* the SM clock the kernel ran at (Hz): stall cycles per issue and shares of peak depend on it */
#define KEVO_CTR_SM_HZ    "sm__cycles_elapsed.avg.per_second"
/* warp stall reasons: KEVO_CTR_STALL_PFX <reason> KEVO_CTR_STALL_SFX, cycles per issue */
#define KEVO_CTR_STALL_PFX "smsp__average_warps_issue_stalled_"
#define KEVO_CTR_STALL_SFX "_per_issue_active.ratio"

/* Every metric of a profile, stall reasons spelled out (those of sm_90; a device that
 * lacks one leaves it out). */
extern const char *const kevo_counters[];
extern const int kevo_counters_count;

#define KEVO_COUNTERS_EXTRA_MAX 16   /* metrics of one's own choice, after kevo's */
#define KEVO_COUNTER_NAME_MAX 127    /* characters of one such name */

/* A collection's metric list: kevo's counters, then the extras (owned by the list). */
struct kevo_counter_list {
    const char *name[64 + KEVO_COUNTERS_EXTRA_MAX];
    int n;
    char extra[KEVO_COUNTERS_EXTRA_MAX][KEVO_COUNTER_NAME_MAX + 1];
};

/*
 * Fill l with kevo's counters, then the metrics of extra ("a,b,c", KEVO_PROFILE_EXTRA;
 * NULL or "" for none) that are spelled as perfworks names ([a-z0-9_.]+, at most
 * KEVO_COUNTER_NAME_MAX characters) and are not on the list yet, at most
 * KEVO_COUNTERS_EXTRA_MAX of them. Returns how many of extra's entries were left out.
 */
int kevo_counters_list(struct kevo_counter_list *l, const char *extra);

#endif

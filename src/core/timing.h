/*
 * timing - the statistics and the adaptive sampling loop of the timing protocol
 * (docs/harness.md "Timing").
 *
 * The loop knows nothing about devices: it calls a sample function per sample (one timed
 * batch of one "arm", i.e. the candidate or the reference) and decides when to stop. With
 * two arms the samples are interleaved A/B/A/B so clock and thermal drift hit both alike.
 * Stop rule: every arm has >= min_samples and either relative noise (p75-p25)/median <=
 * max_noise, or (with >= KEVO_TIMING_CI_MIN samples) the 95% confidence interval of the
 * median is within +-max_ci of it -- a kernel whose samples spread 3% still has a median
 * known to 0.3% after ~100 samples, and sampling on to the cap would only cost time; or
 * the wall-clock cap or max_samples is reached first (then `capped`).
 *
 * Quantiles interpolate linearly between order statistics (Hyndman-Fan type 7, as numpy's
 * default): q-quantile of sorted x[0..n-1] = x[k] + f*(x[k+1]-x[k]) with k+f = q*(n-1).
 * Thread-safe: no state beyond the caller's.
 */
#ifndef KEVO_TIMING_H
#define KEVO_TIMING_H

#include "kevo.h"

#define KEVO_TIMING_MAX_ARMS 2

struct kevo_stats {
    int count;
    double median, min, max, mean;
    double p20, p25, p75, p80;
    double iqm;                   /* interquartile mean: the mean of the middle half of the
                                     sorted values (ranks n/4 .. n - 1 - n/4); finer than the
                                     median when the values come in ticks of a coarse clock */
    double noise;                 /* (p75 - p25) / median; INFINITY if median is 0 and the
                                     IQR is not */
    double ci_lo, ci_hi;          /* distribution-free 95% confidence interval of the median
                                     (order statistics n/2 -+ 0.98 sqrt(n)) */
};

#define KEVO_TIMING_CI_MIN 30

/* q in [0,1] of n sorted values (n >= 1). */
double kevo_timing_quantile(const double *sorted, int n, double q);
/* Statistics of n values (any order; x is not modified). n == 0 gives zeros. */
KEVO_NODISCARD enum kevo_status kevo_timing_stats(const double *x, int n, struct kevo_stats *out);

struct kevo_timing_cfg {
    int n_arms;                   /* 1, or 2 for interleaved candidate/reference */
    int min_samples;              /* default 10 */
    int max_samples;              /* per arm; default 2000 */
    double max_noise;             /* default 0.01 */
    double max_ci;                /* half-width of the median's 95% CI over the median;
                                     default 0.005; 0 disables that way of stopping */
    double cap_s;                 /* wall-clock cap of the whole loop; default 2 s per arm */
    double (*now)(void *user);    /* seconds; NULL = kevo_now() (tests inject a clock) */
    void *now_user;
};
void kevo_timing_cfg_default(struct kevo_timing_cfg *c);

/*
 * Take sample i of arm `arm`: *out_seconds is the time of one call (the batch time divided
 * by the batch length), *out_clock_mhz the SM clock seen (0 if unknown). A non-OK status
 * stops the loop and is returned as it is.
 */
typedef enum kevo_status (*kevo_timing_sample_fn)(void *user, int arm, int i,
                                                  double *out_seconds, double *out_clock_mhz);

struct kevo_timing_result {
    struct kevo_stats arm[KEVO_TIMING_MAX_ARMS];
    double sm_clock_mhz[KEVO_TIMING_MAX_ARMS];  /* median of the non-zero clocks, else 0 */
    int capped;                   /* stopped by the cap or max_samples, not by the rule */
    double elapsed_s;
};

KEVO_NODISCARD enum kevo_status kevo_timing_run(const struct kevo_timing_cfg *cfg,
                                                kevo_timing_sample_fn fn, void *user,
                                                struct kevo_timing_result *out);

/* 1 when the stop rule holds for these statistics. */
int kevo_timing_converged(const struct kevo_stats *s, const struct kevo_timing_cfg *cfg);

/*
 * Batch length for a kernel whose single call takes est_s: 1 at >= 10 us; below, enough
 * calls that a batch lasts >= 100 us (at most 10000). est_s <= 0 gives 1.
 */
int kevo_timing_pick_batch(double est_s);

#endif

/*
 * timing - statistics and the adaptive sampling loop (timing.h). Samples are kept per arm
 * in arrays sized by max_samples; the stop rule is evaluated after each full round (one
 * sample of every arm), so interleaved arms always have equal counts.
 */
#include "core/timing.h"
#include "base/clock.h"
#include "base/mem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double clock_of(const struct kevo_timing_cfg *cfg)
{
    return cfg->now ? cfg->now(cfg->now_user) : kevo_now();
}

double kevo_timing_quantile(const double *sorted, int n, double q)
{
    if (n <= 0)
        return 0.0;
    if (q <= 0.0)
        return sorted[0];
    if (q >= 1.0)
        return sorted[n - 1];
    double pos = q * (double)(n - 1);
    int k = (int)pos;
    double f = pos - (double)k;
    if (k + 1 >= n)
        return sorted[n - 1];
    return sorted[k] + f * (sorted[k + 1] - sorted[k]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum kevo_status kevo_timing_stats(const double *x, int n, struct kevo_stats *out)
{
    double *s = NULL, sum = 0.0;

    memset(out, 0, sizeof *out);
    if (n <= 0)
        return KEVO_OK;
    s = kevo_reallocarray(NULL, (size_t)n, sizeof *s);
    if (!s)
        return KEVO_ERR_NOMEM;
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    for (int i = 0; i < n; i++)
        sum += s[i];
    out->count = n;
    out->min = s[0];
    out->max = s[n - 1];
    out->mean = sum / n;
    out->median = kevo_timing_quantile(s, n, 0.5);
    out->p20 = kevo_timing_quantile(s, n, 0.2);
    out->p25 = kevo_timing_quantile(s, n, 0.25);
    out->p75 = kevo_timing_quantile(s, n, 0.75);
    out->p80 = kevo_timing_quantile(s, n, 0.8);
    double mid = 0.0;
    for (int i = n / 4; i < n - n / 4; i++)
        mid += s[i];
    out->iqm = mid / (n - 2 * (n / 4));
    double iqr = out->p75 - out->p25;
    if (out->median > 0)
        out->noise = iqr / out->median;
    else
        out->noise = iqr == 0 ? 0.0 : INFINITY;
    /* ranks of a 95% interval for the median: the count below it is Binomial(n, 1/2) */
    double h = 0.98 * sqrt((double)n);
    int lo = (int)floor(n / 2.0 - h), hi = (int)ceil(n / 2.0 + h);
    out->ci_lo = s[lo < 0 ? 0 : lo];
    out->ci_hi = s[hi > n - 1 ? n - 1 : hi];
    kevo_free(s);
    return KEVO_OK;
}

void kevo_timing_cfg_default(struct kevo_timing_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->n_arms = 1;
    c->min_samples = 10;
    c->max_samples = 2000;
    c->max_noise = 0.01;
    c->max_ci = 0.005;
    c->cap_s = 2.0;
}

int kevo_timing_converged(const struct kevo_stats *s, const struct kevo_timing_cfg *cfg)
{
    if (s->count < cfg->min_samples)
        return 0;
    if (s->noise <= cfg->max_noise)
        return 1;
    return cfg->max_ci > 0 && s->count >= KEVO_TIMING_CI_MIN && s->median > 0 &&
           (s->ci_hi - s->ci_lo) / 2 <= cfg->max_ci * s->median;
}

int kevo_timing_pick_batch(double est_s)
{
    if (!(est_s > 0) || est_s >= 10e-6)
        return 1;
    double b = ceil(100e-6 / est_s - 1e-9);   /* 1e-4/1e-6 is 100.00000000000001 */
    return b > 10000 ? 10000 : (int)b;
}

/* Median of the non-zero clocks (0 when the backend reports none). */
static enum kevo_status median_clock(const double *c, int n, double *out)
{
    double *nz = NULL;
    int k = 0;
    struct kevo_stats st;
    enum kevo_status s;

    *out = 0.0;
    if (n <= 0)
        return KEVO_OK;
    nz = kevo_reallocarray(NULL, (size_t)n, sizeof *nz);
    if (!nz)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        if (c[i] > 0)
            nz[k++] = c[i];
    }
    s = kevo_timing_stats(nz, k, &st);
    if (!s)
        *out = st.median;
    kevo_free(nz);
    return s;
}

/* One round: a sample of every arm. */
static enum kevo_status take_round(const struct kevo_timing_cfg *cfg, kevo_timing_sample_fn fn,
                                   void *user, int i, double **smp, double **clk)
{
    for (int a = 0; a < cfg->n_arms; a++) {
        double sec = 0.0, mhz = 0.0;
        enum kevo_status st = fn(user, a, i, &sec, &mhz);
        if (st)
            return st;
        smp[a][i] = sec;
        clk[a][i] = mhz;
    }
    return KEVO_OK;
}

enum kevo_status kevo_timing_run(const struct kevo_timing_cfg *cfg, kevo_timing_sample_fn fn,
                                 void *user, struct kevo_timing_result *out)
{
    enum kevo_status st = KEVO_OK;
    double *smp[KEVO_TIMING_MAX_ARMS] = { 0 }, *clk[KEVO_TIMING_MAX_ARMS] = { 0 };
    int n = 0, done = 0;
    double t0;

    memset(out, 0, sizeof *out);
    if (cfg->n_arms < 1 || cfg->n_arms > KEVO_TIMING_MAX_ARMS || cfg->max_samples < 1)
        return KEVO_ERR_INVALID;
    for (int a = 0; a < cfg->n_arms; a++) {
        smp[a] = kevo_reallocarray(NULL, (size_t)cfg->max_samples, sizeof(double));
        clk[a] = kevo_reallocarray(NULL, (size_t)cfg->max_samples, sizeof(double));
        if (!smp[a] || !clk[a]) {
            st = KEVO_ERR_NOMEM;
            goto out;
        }
    }
    t0 = clock_of(cfg);
    while (!done) {
        st = take_round(cfg, fn, user, n, smp, clk);
        if (st)
            goto out;
        n++;
        int conv = 1;
        for (int a = 0; a < cfg->n_arms && conv; a++) {
            if (n < cfg->min_samples)
                conv = 0;
            else if ((st = kevo_timing_stats(smp[a], n, &out->arm[a])) != KEVO_OK)
                goto out;
            else
                conv = kevo_timing_converged(&out->arm[a], cfg);
        }
        out->elapsed_s = clock_of(cfg) - t0;
        if (conv)
            done = 1;
        else if (n >= cfg->max_samples || out->elapsed_s >= cfg->cap_s)
            done = out->capped = 1;
    }
    for (int a = 0; a < cfg->n_arms; a++) {
        st = kevo_timing_stats(smp[a], n, &out->arm[a]);
        if (!st)
            st = median_clock(clk[a], n, &out->sm_clock_mhz[a]);
        if (st)
            goto out;
    }
out:
    for (int a = 0; a < KEVO_TIMING_MAX_ARMS; a++) {
        kevo_free(smp[a]);
        kevo_free(clk[a]);
    }
    return st;
}

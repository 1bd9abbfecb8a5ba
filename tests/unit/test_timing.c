/*
 * test_timing - statistics (quantiles, noise), the adaptive stop rule, interleaving, the
 * wall-clock and sample caps, error propagation and batch sizing of src/timing.c. The
 * sample functions and the clock are fakes, so no device is needed.
 */
#include "testutil.h"

#include "base/clock.h"
#include "base/mem.h"
#include "core/timing.h"

#include <math.h>
#include <string.h>

/* cmocka 1.1 compares floats only as float; doubles need their own check. */
#define assert_near(a, b, eps) do { \
        double a_ = (a), b_ = (b); \
        if (!(a_ == b_ || fabs(a_ - b_) <= (eps))) \
            fail_msg("%s = %.17g, want %.17g (+-%g)", #a, a_, b_, (double)(eps)); \
    } while (0)

static void test_quantile(void **state)
{
    (void)state;
    const double x5[] = { 1, 2, 3, 4, 5 };
    const double x4[] = { 1, 2, 3, 4 };
    const double x1[] = { 7 };
    assert_near(kevo_timing_quantile(x5, 5, 0.5), 3.0, 1e-12);
    assert_near(kevo_timing_quantile(x5, 5, 0.25), 2.0, 1e-12);
    assert_near(kevo_timing_quantile(x5, 5, 0.2), 1.8, 1e-12);
    assert_near(kevo_timing_quantile(x5, 5, 0.8), 4.2, 1e-12);
    assert_near(kevo_timing_quantile(x5, 5, 0.0), 1.0, 1e-12);
    assert_near(kevo_timing_quantile(x5, 5, 1.0), 5.0, 1e-12);
    assert_near(kevo_timing_quantile(x4, 4, 0.5), 2.5, 1e-12);
    assert_near(kevo_timing_quantile(x1, 1, 0.3), 7.0, 1e-12);
}

static void test_stats(void **state)
{
    (void)state;
    const double x[] = { 5, 1, 4, 2, 3 };   /* unsorted on purpose */
    struct kevo_stats s;
    assert_int_equal(kevo_timing_stats(x, 5, &s), KEVO_OK);
    assert_int_equal(s.count, 5);
    assert_near(s.median, 3.0, 1e-12);
    assert_near(s.min, 1.0, 1e-12);
    assert_near(s.max, 5.0, 1e-12);
    assert_near(s.mean, 3.0, 1e-12);
    assert_near(s.p25, 2.0, 1e-12);
    assert_near(s.p75, 4.0, 1e-12);
    assert_near(s.noise, 2.0 / 3.0, 1e-12);
    assert_near(s.iqm, 3.0, 1e-12);  /* ranks 1..3 of 5: 2, 3, 4 */
    assert_near(x[0], 5.0, 0);       /* input untouched */

    /* Ticks of a coarse clock: the median sits on a tick, the interquartile mean between
     * them, and an outlier at either end does not move it. */
    const double t[] = { 1.0, 1.0, 1.0, 2.0, 1.0, 2.0, 2.0, 1.0, 100.0, -50.0, 2.0, 1.0 };
    assert_int_equal(kevo_timing_stats(t, 12, &s), KEVO_OK);
    assert_near(s.median, 1.0, 1e-12);
    assert_near(s.iqm, 8.0 / 6.0, 1e-12);   /* ranks 3..8: 1 1 1 1 2 2 */
    const double one[] = { 7.0 };
    assert_int_equal(kevo_timing_stats(one, 1, &s), KEVO_OK);
    assert_near(s.iqm, 7.0, 0);

    const double z[] = { 0, 0, 0 };
    assert_int_equal(kevo_timing_stats(z, 3, &s), KEVO_OK);
    assert_near(s.noise, 0.0, 0);
    const double z2[] = { 0, 0, 1, 1 };
    assert_int_equal(kevo_timing_stats(z2, 4, &s), KEVO_OK);
    assert_near(s.median, 0.5, 1e-12);
    assert_int_equal(kevo_timing_stats(x, 0, &s), KEVO_OK);
    assert_int_equal(s.count, 0);

    kevo_mem_fail_after(1);
    assert_int_equal(kevo_timing_stats(x, 5, &s), KEVO_ERR_NOMEM);
    kevo_mem_fail_after(0);
}

/* ---- fake samplers ---- */

struct fake {
    double t;                 /* fake clock */
    double tick;              /* clock advance per sample */
    int calls;
    int order[64];            /* arms in call order (first 64) */
    int fail_at;              /* sample index that fails; -1 never */
    int noisy;                /* alternate 1 ms / 2 ms */
    double clock_mhz;
};

static double fake_now(void *user) { return ((struct fake *)user)->t; }

static enum kevo_status fake_sample(void *user, int arm, int i, double *sec, double *mhz)
{
    struct fake *f = user;
    if (f->calls < 64)
        f->order[f->calls] = arm;
    f->calls++;
    f->t += f->tick;
    if (i == f->fail_at)
        return KEVO_ERR_DEVICE;
    if (f->noisy)
        *sec = (i & 1) ? 2e-3 : 1e-3;
    else
        *sec = arm ? 2e-3 : 1e-3;   /* the reference arm is twice as slow */
    *mhz = (i % 3 == 0) ? 0.0 : f->clock_mhz + i;   /* some samples report no clock */
    return KEVO_OK;
}

static void cfg_fake(struct kevo_timing_cfg *c, struct fake *f)
{
    kevo_timing_cfg_default(c);
    c->now = fake_now;
    c->now_user = f;
}

static void test_stop_when_quiet(void **state)
{
    (void)state;
    struct fake f = { .tick = 1e-3, .fail_at = -1, .clock_mhz = 1500 };
    struct kevo_timing_cfg c;
    struct kevo_timing_result r;
    cfg_fake(&c, &f);
    assert_int_equal(kevo_timing_run(&c, fake_sample, &f, &r), KEVO_OK);
    assert_int_equal(r.arm[0].count, 10);           /* the minimum, then the rule holds */
    assert_int_equal(f.calls, 10);
    assert_false(r.capped);
    assert_near(r.arm[0].median, 1e-3, 1e-15);
    assert_near(r.arm[0].noise, 0.0, 0);
    assert_true(r.sm_clock_mhz[0] > 1500 && r.sm_clock_mhz[0] < 1510);  /* zeros ignored */
    assert_near(r.elapsed_s, 10e-3, 1e-12);
}

static void test_cap_by_samples(void **state)
{
    (void)state;
    struct fake f = { .tick = 1e-6, .fail_at = -1, .noisy = 1 };
    struct kevo_timing_cfg c;
    struct kevo_timing_result r;
    cfg_fake(&c, &f);
    c.max_samples = 50;
    assert_int_equal(kevo_timing_run(&c, fake_sample, &f, &r), KEVO_OK);
    assert_true(r.capped);
    assert_int_equal(r.arm[0].count, 50);
    assert_true(r.arm[0].noise > 0.5);
    assert_true(r.sm_clock_mhz[0] > 0);   /* clock_mhz 0 + i: small but > 0 */
}

/* Samples spread uniformly over +-3% (noise ~3%, never under 1%): the median is still known
 * to +-0.5% after ~140 samples, and the loop stops there instead of running to the cap. */
static enum kevo_status spread_sample(void *user, int arm, int i, double *sec, double *mhz)
{
    struct fake *f = user;
    f->calls++;
    f->t += f->tick;
    uint64_t h = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
    double u = (double)(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    *sec = 1e-3 * (1.0 + 0.03 * u);
    *mhz = 0.0;
    (void)arm;
    return KEVO_OK;
}

static void test_stop_when_median_known(void **state)
{
    (void)state;
    struct fake f = { .tick = 1e-4, .fail_at = -1 };
    struct kevo_timing_cfg c;
    struct kevo_timing_result r;
    cfg_fake(&c, &f);
    assert_int_equal(kevo_timing_run(&c, spread_sample, &f, &r), KEVO_OK);
    assert_false(r.capped);
    assert_true(r.arm[0].noise > 0.01);
    assert_true(r.arm[0].count >= 60 && r.arm[0].count <= 400);
    assert_true((r.arm[0].ci_hi - r.arm[0].ci_lo) / 2 <= 0.005 * r.arm[0].median);
    assert_true(r.arm[0].ci_lo <= r.arm[0].median && r.arm[0].median <= r.arm[0].ci_hi);
    c.max_ci = 0;                          /* the CI rule off: runs to the sample cap */
    f.calls = 0;
    c.max_samples = 500;
    assert_int_equal(kevo_timing_run(&c, spread_sample, &f, &r), KEVO_OK);
    assert_true(r.capped);
    assert_int_equal(r.arm[0].count, 500);
}

static void test_cap_by_time(void **state)
{
    (void)state;
    struct fake f = { .tick = 0.1, .fail_at = -1, .noisy = 1 };
    struct kevo_timing_cfg c;
    struct kevo_timing_result r;
    cfg_fake(&c, &f);
    c.cap_s = 1.0;
    assert_int_equal(kevo_timing_run(&c, fake_sample, &f, &r), KEVO_OK);
    assert_true(r.capped);
    assert_true(r.arm[0].count >= 10 && r.arm[0].count <= 11);
    assert_true(r.elapsed_s >= 1.0);
}

static void test_interleaved(void **state)
{
    (void)state;
    struct fake f = { .tick = 1e-3, .fail_at = -1, .clock_mhz = 1000 };
    struct kevo_timing_cfg c;
    struct kevo_timing_result r;
    cfg_fake(&c, &f);
    c.n_arms = 2;
    assert_int_equal(kevo_timing_run(&c, fake_sample, &f, &r), KEVO_OK);
    assert_int_equal(r.arm[0].count, r.arm[1].count);
    assert_int_equal(f.calls, 2 * r.arm[0].count);
    for (int i = 0; i < 20; i++)
        assert_int_equal(f.order[i], i & 1);      /* A/B/A/B */
    assert_near(r.arm[0].median, 1e-3, 1e-15);
    assert_near(r.arm[1].median, 2e-3, 1e-15);
}

static void test_error_stops(void **state)
{
    (void)state;
    struct fake f = { .tick = 1e-3, .fail_at = 3 };
    struct kevo_timing_cfg c;
    struct kevo_timing_result r;
    cfg_fake(&c, &f);
    assert_int_equal(kevo_timing_run(&c, fake_sample, &f, &r), KEVO_ERR_DEVICE);
    assert_int_equal(f.calls, 4);

    c.n_arms = 3;
    assert_int_equal(kevo_timing_run(&c, fake_sample, &f, &r), KEVO_ERR_INVALID);
    c.n_arms = 1;
    kevo_mem_fail_after(1);
    assert_int_equal(kevo_timing_run(&c, fake_sample, &f, &r), KEVO_ERR_NOMEM);
    kevo_mem_fail_after(0);
}

static void test_real_clock(void **state)
{
    (void)state;
    double a = kevo_now(), b = kevo_now();   /* timing's clock when cfg.now is NULL */
    assert_true(a > 0 && b >= a);
}

static void test_pick_batch(void **state)
{
    (void)state;
    assert_int_equal(kevo_timing_pick_batch(1e-6), 100);
    assert_int_equal(kevo_timing_pick_batch(3e-6), 34);
    assert_int_equal(kevo_timing_pick_batch(10e-6), 1);
    assert_int_equal(kevo_timing_pick_batch(1e-3), 1);
    assert_int_equal(kevo_timing_pick_batch(0), 1);
    assert_int_equal(kevo_timing_pick_batch(-1), 1);
    assert_int_equal(kevo_timing_pick_batch(1e-12), 10000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_stop_when_quiet),
        cmocka_unit_test(test_cap_by_samples),
        cmocka_unit_test(test_stop_when_median_known),
        cmocka_unit_test(test_cap_by_time),
        cmocka_unit_test(test_interleaved),
        cmocka_unit_test(test_error_stops),
        cmocka_unit_test(test_real_clock),
        cmocka_unit_test(test_pick_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

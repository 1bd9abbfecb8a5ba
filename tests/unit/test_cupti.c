/*
 * test_cupti - the CUPTI module (src/worker/cupti.c) without a GPU: the span arithmetic
 * that turns kernel records into a sample's time (pass by pass, fills and evicts between
 * passes left out, the launch latency added once a pass, bad indices refused), the
 * latency as the median gap between back-to-back kernels, and a libcupti that cannot be loaded is a
 * message naming what was tried, never a crash. The GPU path is exercised by
 * tools/gpu-test.sh and bench/ncu_fidelity.sh on a device.
 */
#include "testutil.h"

#include "base/buf.h"
#include "worker/cupti.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Two passes of [fill-evict (2 harness kernels), plan k0, plan k1], as a batch of 2 records:
 * harness at 0-100 / 100-200, plan 210-300 / 305-400; then 400-500 / 500-600, 610-700 /
 * 700-790. */
static const struct kevo_cupti_kernel recs[] = {
    { 0, 100, 1 }, { 100, 200, 2 }, { 210, 300, 3 }, { 305, 400, 4 },
    { 400, 500, 5 }, { 500, 600, 6 }, { 610, 700, 7 }, { 700, 790, 8 },
};

static void test_spans(void **state)
{
    int first[2] = { 2, 6 }, last[2] = { 3, 7 };
    (void)state;

    /* (400 - 210) + (790 - 610) ns, plus the launch latency once per pass: the gap inside
     * a pass counts, the harness kernels never */
    assert_true(fabs(kevo_cupti_spans(recs, 8, first, last, 2, 0) - 370e-9) < 1e-15);
    assert_true(fabs(kevo_cupti_spans(recs, 8, first, last, 2, 1e-6) - (370e-9 + 2e-6)) < 1e-15);
    /* a pass without a plan kernel adds nothing, not even the latency */
    first[1] = -1;
    assert_true(fabs(kevo_cupti_spans(recs, 8, first, last, 2, 1e-6) - (190e-9 + 1e-6)) < 1e-15);
    /* indices past the records, or reversed, are refused */
    first[1] = 6;
    last[1] = 8;
    assert_true(kevo_cupti_spans(recs, 8, first, last, 2, 0) < 0);
    last[1] = 5;
    assert_true(kevo_cupti_spans(recs, 8, first, last, 2, 0) < 0);
    assert_true(kevo_cupti_spans(recs, 8, first, last, 0, 0) == 0);
}

/* A time going backwards (a record from another clock) is refused, not a negative sample. */
static void test_spans_backwards(void **state)
{
    struct kevo_cupti_kernel k[2] = { { 500, 600, 1 }, { 100, 200, 2 } };
    int first[1] = { 0 }, last[1] = { 1 };
    (void)state;

    assert_true(kevo_cupti_spans(k, 2, first, last, 1, 0) < 0);
}

/* The launch latency: the median idle gap between kernels run back to back. */
static void test_gap(void **state)
{
    (void)state;
    /* gaps before kernels 1..7: 0, 10, 5, 0, 0, 10, 0 ns -> median 0 */
    assert_true(kevo_cupti_gap(recs, 0, 8) == 0);
    /* (1, 4): the gaps before kernels 2 and 3: 10 and 5 -> 7.5 ns */
    assert_true(fabs(kevo_cupti_gap(recs, 1, 4) - 7.5e-9) < 1e-15);
    /* an overlap (a start before the previous end) is no negative gap */
    struct kevo_cupti_kernel o[3] = { { 0, 300, 0 }, { 250, 400, 1 }, { 420, 500, 2 } };
    assert_true(fabs(kevo_cupti_gap(o, 0, 3) - 10e-9) < 1e-15);
    assert_true(kevo_cupti_gap(recs, 3, 4) < 0);   /* no pair */
}

/* KEVO_CUPTI names the library; one that is not there is NOTFOUND with the path said. */
/* The isolated latency when plausible; else the back-to-back one; else none. */
static void test_pick_latency(void **state)
{
    (void)state;
    assert_true(kevo_cupti_pick_latency(1.15e-6, 0.96e-6) == 1.15e-6);
    assert_true(kevo_cupti_pick_latency(0.0, 0.96e-6) == 0.0);
    assert_true(kevo_cupti_pick_latency(-2e-7, 0.96e-6) == 0.96e-6);   /* events above it */
    assert_true(kevo_cupti_pick_latency(1e-3, 0.96e-6) == 0.96e-6);
    assert_true(kevo_cupti_pick_latency(NAN, 0.96e-6) == 0.96e-6);
    assert_true(kevo_cupti_pick_latency(1.15e-6, -1) < 0);
    assert_true(kevo_cupti_pick_latency(1.15e-6, 2e-4) < 0);
    assert_true(kevo_cupti_pick_latency(1.15e-6, NAN) < 0);
}

static void test_open_missing(void **state)
{
    struct kevo_buf err;
    struct kevo_cupti *c = (struct kevo_cupti *)&err;
    (void)state;

    kevo_buf_init(&err, 1024);
    setenv("KEVO_CUPTI", "/nonexistent/libcupti.so", 1);
    assert_int_equal(kevo_cupti_open(NULL, 0, &c, &err), KEVO_ERR_NOTFOUND);
    assert_null(c);
    assert_non_null(strstr(kevo_buf_str(&err), "/nonexistent/libcupti.so"));
    /* the outcome is kept: a second try answers the same without loading again */
    kevo_buf_reset(&err);
    assert_int_equal(kevo_cupti_open(NULL, 0, &c, &err), KEVO_ERR_NOTFOUND);
    assert_non_null(strstr(kevo_buf_str(&err), "libcupti"));
    kevo_cupti_close(NULL);   /* a no-op */
    kevo_buf_free(&err);
    unsetenv("KEVO_CUPTI");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spans),
        cmocka_unit_test(test_spans_backwards),
        cmocka_unit_test(test_gap),
        cmocka_unit_test(test_pick_latency),
        cmocka_unit_test(test_open_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_cupti - the CUPTI module (src/worker/cupti.c) without a GPU: the span arithmetic
 * that turns kernel records into a sample's time (pass by pass, fills and evicts between
 * passes left out, bad indices refused), and a libcupti that cannot be loaded is a
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

    /* (400 - 200) + (790 - 600) ns: from the end of the kernel before the plan (its
     * launch counts), gaps inside a pass too, the harness kernels never */
    assert_true(fabs(kevo_cupti_spans(recs, 8, first, last, 2) - 390e-9) < 1e-15);
    /* a pass without a plan kernel adds nothing */
    first[1] = -1;
    assert_true(fabs(kevo_cupti_spans(recs, 8, first, last, 2) - 200e-9) < 1e-15);
    /* no kernel before the plan: from its own start */
    first[0] = 0;
    assert_true(fabs(kevo_cupti_spans(recs, 8, first, last, 1) - 400e-9) < 1e-15);
    first[0] = 2;
    /* indices past the records, or reversed, are refused */
    first[1] = 6;
    last[1] = 8;
    assert_true(kevo_cupti_spans(recs, 8, first, last, 2) < 0);
    last[1] = 5;
    assert_true(kevo_cupti_spans(recs, 8, first, last, 2) < 0);
    assert_true(kevo_cupti_spans(recs, 8, first, last, 0) == 0);
}

/* A time going backwards (a record from another clock) is refused, not a negative sample. */
static void test_spans_backwards(void **state)
{
    struct kevo_cupti_kernel k[3] = { { 50, 300, 0 }, { 500, 600, 1 }, { 100, 200, 2 } };
    int first[1] = { 1 }, last[1] = { 2 };
    (void)state;

    assert_true(kevo_cupti_spans(k, 3, first, last, 1) < 0);
    /* a kernel before the plan that ends after the plan started (overlap): the plan's own
     * start bounds it */
    struct kevo_cupti_kernel o[2] = { { 0, 300, 0 }, { 250, 400, 1 } };
    first[0] = last[0] = 1;
    assert_true(fabs(kevo_cupti_spans(o, 2, first, last, 1) - 150e-9) < 1e-15);
}

/* KEVO_CUPTI names the library; one that is not there is NOTFOUND with the path said. */
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
        cmocka_unit_test(test_open_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

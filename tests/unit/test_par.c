/*
 * test_par - the chunked loops give exactly what a serial loop gives: every element
 * visited once, chunk boundaries aligned, and verify's parallel compare/generate agree
 * with a serial scan on arrays large enough to be split.
 */
#include "testutil.h"
#include "base/mem.h"
#include "base/par.h"
#include "core/verify.h"

#include <stdlib.h>
#include <string.h>

struct visit {
    unsigned char *seen;
    int64_t align;
    int bad_align;
};

static void mark(void *ctx, int c, int64_t lo, int64_t hi)
{
    struct visit *v = ctx;
    (void)c;
    if (lo % v->align)
        v->bad_align = 1;
    for (int64_t i = lo; i < hi; i++)
        v->seen[i]++;
}

static void test_covers_each_element_once(void **state)
{
    (void)state;
    int64_t sizes[] = {0, 1, 7, (1 << 20) - 1, (3 << 20) + 5, (9 << 20) + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int64_t n = sizes[k];
        struct visit v = {kevo_calloc((size_t)n + 1, 1), 2, 0};
        assert_non_null(v.seen);
        kevo_par_for(n, 2, mark, &v);
        for (int64_t i = 0; i < n; i++)
            assert_int_equal(v.seen[i], 1);
        assert_false(v.bad_align);
        kevo_free(v.seen);
    }
    assert_int_equal(kevo_par_chunks(10), 1);
}

/* A float array big enough to be split, with a few planted errors. */
static void test_compare_matches_serial_facts(void **state)
{
    (void)state;
    int64_t n = (int64_t)5 << 20;
    float *ref = kevo_malloc((size_t)n * sizeof *ref), *out = kevo_malloc((size_t)n * sizeof *out);
    assert_non_null(ref);
    assert_non_null(out);
    for (int64_t i = 0; i < n; i++)
        ref[i] = out[i] = (float)(i % 1000) * 0.5f + 1.0f;
    out[3 << 20] += 100.0f;          /* the worst, in a later chunk */
    out[1234567] += 1.0f;            /* the first bad one */
    out[(4 << 20) + 1] += 1.0f;
    struct kevo_cmp c;
    kevo_verify_compare(KEVO_F32, out, ref, n, 1e-4, 1e-5, &c);
    assert_false(c.pass);
    assert_int_equal(c.first_bad, 1234567);
    assert_int_equal(c.n_bad, 3);
    assert_int_equal(c.worst, 3 << 20);
    assert_true(c.max_abs > 99.0 && c.max_abs < 101.0);
    kevo_free(ref);
    kevo_free(out);
}

static void test_unwritten_over_chunks(void **state)
{
    (void)state;
    int64_t n = (int64_t)5 << 20;
    uint32_t *out = kevo_calloc((size_t)n, 4), *ref = kevo_calloc((size_t)n, 4);
    assert_non_null(out);
    assert_non_null(ref);
    uint32_t pa = kevo_verify_poison(KEVO_F32, 0);
    out[(3 << 20) + 7] = pa;          /* later chunk */
    out[1500000] = pa;                /* earlier chunk: the first */
    out[42] = pa;
    ref[42] = pa;                     /* the reference has it too: not unwritten */
    int64_t first = 0;
    assert_int_equal(kevo_verify_unwritten(KEVO_F32, out, ref, n, 0, &first), 2);
    assert_int_equal(first, 1500000);
    assert_int_equal(kevo_verify_unwritten(KEVO_F32, out, ref, n, 1, &first), 0);
    assert_int_equal(first, -1);
    kevo_free(out);
    kevo_free(ref);
}

static void test_generate_is_chunking_independent(void **state)
{
    (void)state;
    int64_t n = (int64_t)3 << 20;
    struct kevo_gen g;
    memset(&g, 0, sizeof g);
    g.kind = KEVO_INIT_NORMAL;
    g.dtype = KEVO_F32;
    g.a = 1.0;
    g.b = 2.0;
    float *big = kevo_malloc((size_t)n * sizeof *big), *small = kevo_malloc(1001 * sizeof *small);
    assert_non_null(big);
    assert_non_null(small);
    kevo_verify_generate(&g, 42, 3, big, n);     /* split into chunks */
    kevo_verify_generate(&g, 42, 3, small, 1001); /* one chunk */
    assert_memory_equal(big, small, 1001 * sizeof *small);
    kevo_free(big);
    kevo_free(small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_covers_each_element_once),
        cmocka_unit_test(test_compare_matches_serial_facts),
        cmocka_unit_test(test_generate_is_chunking_independent),
        cmocka_unit_test(test_unwritten_over_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

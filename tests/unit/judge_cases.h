/*
 * judge_cases - crafted outputs for the judge tests (test_verify, test_backend_cpu,
 * test_backend_cuda): every dtype, with the cases that exercise each rule.
 *
 * Header-only (static functions): include it in one test program.
 */
#ifndef KEVO_JUDGE_CASES_H
#define KEVO_JUDGE_CASES_H

#include "core/dtype_conv.h"
#include "core/verify.h"

#include <math.h>
#include <string.h>

static const enum kevo_dtype JC_DTYPES[] = {KEVO_F64, KEVO_F32, KEVO_F16, KEVO_BF16,
                                            KEVO_FP8E4M3, KEVO_FP8E5M2, KEVO_I64, KEVO_I32,
                                            KEVO_I16, KEVO_I8, KEVO_U8, KEVO_BOOL};
#define JC_N_DTYPES ((int)(sizeof JC_DTYPES / sizeof JC_DTYPES[0]))

enum jc_variant {
    JC_MIXED = 0,   /* a bad element at 1, small in-tolerance errors every 7th; past 10000
                       elements also NaN/Inf on either side (500-503), zeros (504), poison A
                       in run A (9000, 9001), poison B in run B (7000), B differs at 300 */
    JC_CONSTANT,    /* run A is 1 everywhere */
    JC_EXACT,       /* a = b = ref */
    JC_REF_FLAT,    /* ref is 2 everywhere, a = ref */
    JC_N_VARIANTS
};

/* Element i of an array of dt gets the raw bits v (little-endian). */
static void jc_put_bits(enum kevo_dtype dt, void *base, int64_t i, uint64_t v)
{
    size_t esz = kevo_dtype_size(dt);
    unsigned char *p = (unsigned char *)base + (size_t)i * esz;
    for (size_t k = 0; k < esz; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

/* The failures of JC_MIXED past 10000 elements. */
static void jc_mixed_extra(enum kevo_dtype dt, void *a, void *ref)
{
    kevo_dt_store(dt, a, 500, NAN);
    kevo_dt_store(dt, a, 501, INFINITY);
    kevo_dt_store(dt, ref, 502, NAN);
    kevo_dt_store(dt, a, 502, NAN);
    kevo_dt_store(dt, ref, 503, -INFINITY);
    kevo_dt_store(dt, a, 503, -INFINITY);
    kevo_dt_store(dt, a, 504, 0.0);
    kevo_dt_store(dt, ref, 504, 0.0);
    jc_put_bits(dt, a, 9000, kevo_verify_poison_elem(dt, 0));
    jc_put_bits(dt, a, 9001, kevo_verify_poison_elem(dt, 0));
}

/* Fill a (run A), b (run B) and ref (expected, in the clear) with n elements of dt. */
static void jc_craft(enum kevo_dtype dt, int64_t n, int variant, void *a, void *b, void *ref)
{
    const size_t bytes = (size_t)n * kevo_dtype_size(dt);
    struct kevo_gen g = {.kind = KEVO_INIT_RANDINT, .dtype = dt, .lo = -50, .hi = 50};

    if (kevo_dtype_is_float(dt))
        g = (struct kevo_gen){.kind = KEVO_INIT_NORMAL, .dtype = dt, .a = 0, .b = 3};
    else if (dt == KEVO_BOOL || dt == KEVO_U8)
        g.lo = 0, g.hi = dt == KEVO_BOOL ? 2 : 100;
    kevo_verify_generate(&g, 99, 3, ref, n);
    for (int64_t i = 0; variant == JC_REF_FLAT && i < n; i++)
        kevo_dt_store(dt, ref, i, 2.0);
    memcpy(a, ref, bytes);
    for (int64_t i = 0; variant == JC_CONSTANT && i < n; i++)
        kevo_dt_store(dt, a, i, 1.0);
    for (int64_t i = 0; variant == JC_MIXED && i < n; i += 7)   /* inside the tolerance */
        kevo_dt_store(dt, a, i, kevo_dt_load(dt, ref, i) * (1 + 1e-5));
    if (variant == JC_MIXED && n > 1)
        kevo_dt_store(dt, a, 1, kevo_dt_load(dt, ref, 1) * 1.5 + 1);
    if (variant == JC_MIXED && n > 10000)
        jc_mixed_extra(dt, a, ref);
    memcpy(b, a, bytes);
    if (variant == JC_MIXED && n > 10000) {
        kevo_dt_store(dt, b, 300, kevo_dt_load(dt, a, 300) + 2);
        jc_put_bits(dt, b, 7000, kevo_verify_poison_elem(dt, 1));
    }
}

/* The judge request of the tests (addresses left 0). */
static struct kevo_judge_req jc_req(enum kevo_dtype dt, int64_t n)
{
    return (struct kevo_judge_req){.dt = dt, .n = n, .ref_key = 0x0123456789ABCDEFull,
                                   .rtol = 1e-3, .atol = 1e-4,
                                   .pe_a = kevo_verify_poison_elem(dt, 0),
                                   .pe_b = kevo_verify_poison_elem(dt, 1)};
}

#endif

/*
 * test_verify - the correctness-protocol pieces of src/verify.c and src/dtype_conv.c:
 * fp16/bf16 conversions (exhaustive round trips and every tie), fp8, the counter-based
 * generator (reproducibility, independence per seed and stream, distribution moments),
 * INIT evaluation and its errors, poison patterns, guard checks, the tolerance rule (NaN,
 * Inf, L2), unwritten, nondeterminism and degenerate checks; the generator check, sealing,
 * and the judge (kevo_verify_judge: exactly the individual functions, for every dtype).
 */
#include "testutil.h"

#include "core/dtype_conv.h"
#include "judge_cases.h"
#include "base/mem.h"
#include "core/verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define assert_near(a, b, eps) do { \
        double a_ = (a), b_ = (b); \
        if (!(a_ == b_ || fabs(a_ - b_) <= (eps))) \
            fail_msg("%s = %.17g, want %.17g (+-%g)", #a, a_, b_, (double)(eps)); \
    } while (0)

/* ---- fp16 / bf16 / fp8 ---- */

static void test_f16_known(void **state)
{
    (void)state;
    assert_int_equal(kevo_f16_from_double(1.0), 0x3C00);
    assert_int_equal(kevo_f16_from_double(-2.0), 0xC000);
    assert_int_equal(kevo_f16_from_double(0.1), 0x2E66);
    assert_int_equal(kevo_f16_from_double(1.0 / 3.0), 0x3555);
    assert_int_equal(kevo_f16_from_double(65504.0), 0x7BFF);
    assert_int_equal(kevo_f16_from_double(65519.0), 0x7BFF);
    assert_int_equal(kevo_f16_from_double(65520.0), 0x7C00);      /* tie -> even -> Inf */
    assert_int_equal(kevo_f16_from_double(1e9), 0x7C00);
    assert_int_equal(kevo_f16_from_double(-INFINITY), 0xFC00);
    assert_int_equal(kevo_f16_from_double(ldexp(1, -24)), 0x0001);  /* min subnormal */
    assert_int_equal(kevo_f16_from_double(ldexp(1, -25)), 0x0000);  /* tie -> even 0 */
    assert_int_equal(kevo_f16_from_double(ldexp(3, -26)), 0x0001);
    assert_int_equal(kevo_f16_from_double(ldexp(1, -14)), 0x0400);  /* min normal */
    assert_int_equal(kevo_f16_from_double(-0.0), 0x8000);
    assert_int_equal(kevo_f16_from_double(1.0 + ldexp(1, -11)), 0x3C00);   /* tie: even */
    assert_int_equal(kevo_f16_from_double(1.0 + 3 * ldexp(1, -11)), 0x3C02);
    assert_int_equal(kevo_f16_from_double(NAN) & 0x7C00, 0x7C00);
    assert_true(isnan(kevo_f16_to_double(0x7E00)));
    assert_near(kevo_f16_to_double(0x7BFF), 65504.0, 0);
    assert_near(kevo_f16_to_double(0x0001), ldexp(1, -24), 0);
    assert_true(isinf(kevo_f16_to_double(0x7C00)));
}

/* Every non-NaN half round-trips, and every midpoint rounds to the even neighbour. */
static void test_f16_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        double d = kevo_f16_to_double((uint16_t)h);
        uint16_t back = kevo_f16_from_double(d);
        if (isnan(d)) {
            assert_true(isnan(kevo_f16_to_double(back)));
            assert_int_equal(back & 0x8000, h & 0x8000);
            continue;
        }
        assert_int_equal(back, h);
        uint32_t mag = h & 0x7FFF;
        if (mag >= 0x7BFF)
            continue;                      /* the next value up is Inf */
        double next = kevo_f16_to_double((uint16_t)(h + 1));
        double mid = (d + next) / 2;       /* exact in double */
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        assert_int_equal(kevo_f16_from_double(mid), want);
        /* Just off the midpoint rounds to the nearer one. */
        assert_int_equal(kevo_f16_from_double(mid + (next - d) / 1024), h + 1);
        assert_int_equal(kevo_f16_from_double(mid - (next - d) / 1024), h);
    }
}

static void test_bf16_known(void **state)
{
    (void)state;
    assert_int_equal(kevo_bf16_from_double(1.0), 0x3F80);
    assert_int_equal(kevo_bf16_from_double(1.0 / 3.0), 0x3EAB);
    assert_int_equal(kevo_bf16_from_double(M_PI), 0x4049);
    assert_int_equal(kevo_bf16_from_double(-1.5), 0xBFC0);
    assert_int_equal(kevo_bf16_from_double(3.3895313892515355e38), 0x7F7F);
    assert_int_equal(kevo_bf16_from_double(1e39), 0x7F80);
    assert_int_equal(kevo_bf16_from_double(ldexp(1, -133)), 0x0001);   /* min subnormal */
    assert_true(isnan(kevo_bf16_to_double(kevo_bf16_from_double(NAN))));
}

/* bf16 from a float by the usual bit trick (RNE), for cross-checking the generic path. */
static uint16_t bf16_ref(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static void test_bf16_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        double d = kevo_bf16_to_double((uint16_t)h);
        uint16_t back = kevo_bf16_from_double(d);
        if (isnan(d)) {
            assert_true(isnan(kevo_bf16_to_double(back)));
            continue;
        }
        assert_int_equal(back, h);
        uint32_t mag = h & 0x7FFF;
        if (mag >= 0x7F7F)
            continue;
        double next = kevo_bf16_to_double((uint16_t)(h + 1));
        double mid = (d + next) / 2;
        assert_int_equal(kevo_bf16_from_double(mid), (h & 1) ? h + 1 : h);
    }
    /* 2^22 float bit patterns spread over the whole range agree with the bit trick. */
    for (uint32_t k = 0; k < (1u << 22); k++) {
        uint32_t u = (uint32_t)kevo_verify_mix64(k);
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f) || isinf(f) || fabsf(f) > 3.38e38f)
            continue;
        assert_int_equal(kevo_bf16_from_double(f), bf16_ref(f));
    }
}

static void test_fp8(void **state)
{
    (void)state;
    assert_int_equal(kevo_e4m3_from_double(1.0), 0x38);
    assert_int_equal(kevo_e4m3_from_double(448.0), 0x7E);
    assert_int_equal(kevo_e4m3_from_double(460.0), 0x7E);        /* saturates, no NaN */
    assert_int_equal(kevo_e4m3_from_double(1e6), 0x7E);
    assert_int_equal(kevo_e4m3_from_double(-INFINITY), 0xFE);
    assert_int_equal(kevo_e4m3_from_double(NAN), 0x7F);
    assert_int_equal(kevo_e4m3_from_double(ldexp(1, -9)), 0x01);
    assert_int_equal(kevo_e5m2_from_double(1.0), 0x3C);
    assert_int_equal(kevo_e5m2_from_double(57344.0), 0x7B);
    assert_int_equal(kevo_e5m2_from_double(1e6), 0x7C);          /* Inf */
    assert_int_equal(kevo_e5m2_from_double(ldexp(1, -16)), 0x01);
    assert_true(isnan(kevo_e4m3_to_double(0xFF)));
    assert_near(kevo_e4m3_to_double(0x7E), 448.0, 0);
    assert_near(kevo_e4m3_to_double(0xFE), -448.0, 0);
    for (uint32_t b = 0; b < 256; b++) {
        double d4 = kevo_e4m3_to_double((uint8_t)b), d5 = kevo_e5m2_to_double((uint8_t)b);
        if (!isnan(d4))
            assert_int_equal(kevo_e4m3_from_double(d4), b);
        if (!isnan(d5))
            assert_int_equal(kevo_e5m2_from_double(d5), b);
    }
}

static void test_store_load(void **state)
{
    (void)state;
    int32_t i32[2];
    uint8_t b[3];
    int8_t i8[2];
    kevo_dt_store(KEVO_I32, i32, 0, 2.5);            /* llround: ties away from zero */
    kevo_dt_store(KEVO_I32, i32, 1, 1e12);           /* clamps */
    assert_int_equal(i32[0], 3);
    assert_int_equal(i32[1], INT32_MAX);
    kevo_dt_store(KEVO_BOOL, b, 0, 0.3);
    kevo_dt_store(KEVO_BOOL, b, 1, -0.7);
    kevo_dt_store_int(KEVO_BOOL, b, 2, 5);
    assert_int_equal(b[0], 0);
    assert_int_equal(b[1], 1);
    assert_int_equal(b[2], 1);
    kevo_dt_store_int(KEVO_I8, i8, 0, -1000);
    kevo_dt_store(KEVO_I8, i8, 1, NAN);
    assert_int_equal(i8[0], -128);
    assert_int_equal(i8[1], 0);
    assert_int_equal(kevo_dt_load_int(KEVO_I8, i8, 0), -128);
    uint16_t h = 0x3C00;
    assert_near(kevo_dt_load(KEVO_F16, &h, 0), 1.0, 0);
    assert_int_equal(kevo_dt_bits(KEVO_F16, &h, 0), 0x3C00);
}

/* ---- generator ---- */

static void test_rng_reproducible(void **state)
{
    (void)state;
    enum { N = 1000 };
    struct kevo_gen g = { .kind = KEVO_INIT_NORMAL, .dtype = KEVO_F32, .a = 0, .b = 1 };
    float a[N], b[N], c[N], d[N], p[10];
    kevo_verify_generate(&g, 42, 3, a, N);
    kevo_verify_generate(&g, 42, 3, b, N);
    kevo_verify_generate(&g, 43, 3, c, N);
    kevo_verify_generate(&g, 42, 4, d, N);
    kevo_verify_generate(&g, 42, 3, p, 10);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(a, p, sizeof p);          /* element i depends only on i */
    int same_c = 0, same_d = 0;
    for (int i = 0; i < N; i++) {
        same_c += a[i] == c[i];
        same_d += a[i] == d[i];
        assert_near(a[i], (float)kevo_verify_normal(42, 3, (uint64_t)i), 0);
    }
    assert_true(same_c < 5);
    assert_true(same_d < 5);
    assert_true(kevo_verify_derive(1, 2, 3) != kevo_verify_derive(1, 3, 2));
    assert_true(kevo_verify_derive(1, 2, 3) != kevo_verify_derive(2, 2, 3));
    assert_true(kevo_verify_draw(1, 0, 0) != kevo_verify_draw(1, 0, 1));
}

static void moments(const double *x, int n, double *mean, double *var, double *skew)
{
    double s = 0, s2 = 0, s3 = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) {
        double d = x[i] - *mean;
        s2 += d * d;
        s3 += d * d * d;
    }
    *var = s2 / n;
    *skew = (s3 / n) / pow(*var, 1.5);
}

static void test_rng_moments(void **state)
{
    (void)state;
    enum { N = 200000 };
    double *x = kevo_malloc(N * sizeof *x), mean, var, skew;
    assert_non_null(x);
    struct kevo_gen g = { .kind = KEVO_INIT_NORMAL, .dtype = KEVO_F64, .a = 3, .b = 2 };
    kevo_verify_generate(&g, 7, 0, x, N);
    moments(x, N, &mean, &var, &skew);
    assert_near(mean, 3.0, 0.03);
    assert_near(var, 4.0, 0.06);
    assert_near(skew, 0.0, 0.03);
    int within1 = 0;
    for (int i = 0; i < N; i++)
        within1 += fabs(x[i] - 3.0) < 2.0;
    assert_near((double)within1 / N, 0.6827, 0.005);

    g = (struct kevo_gen){ .kind = KEVO_INIT_UNIFORM, .dtype = KEVO_F64, .a = -1, .b = 5 };
    kevo_verify_generate(&g, 7, 1, x, N);
    moments(x, N, &mean, &var, &skew);
    assert_near(mean, 2.0, 0.03);
    assert_near(var, 3.0, 0.03);
    for (int i = 0; i < N; i++)
        assert_true(x[i] >= -1.0 && x[i] < 5.0);
    kevo_free(x);

    int32_t *r = kevo_malloc(N * sizeof *r);
    int hist[7] = { 0 };
    assert_non_null(r);
    g = (struct kevo_gen){ .kind = KEVO_INIT_RANDINT, .dtype = KEVO_I32, .lo = -3, .hi = 4 };
    kevo_verify_generate(&g, 9, 0, r, N);
    for (int i = 0; i < N; i++) {
        assert_in_range(r[i] + 3, 0, 6);
        hist[r[i] + 3]++;
    }
    for (int k = 0; k < 7; k++)
        assert_near((double)hist[k] / N, 1.0 / 7, 0.005);
    kevo_free(r);
}

static void test_rng_dtypes(void **state)
{
    (void)state;
    uint16_t h[64];
    uint8_t b[64];
    struct kevo_gen g = { .kind = KEVO_INIT_NORMAL, .dtype = KEVO_BF16, .a = 0, .b = 1 };
    kevo_verify_generate(&g, 5, 0, h, 64);
    for (int i = 0; i < 64; i++)
        assert_int_equal(h[i], kevo_bf16_from_double(kevo_verify_normal(5, 0, (uint64_t)i)));
    g = (struct kevo_gen){ .kind = KEVO_INIT_RANDINT, .dtype = KEVO_BOOL, .lo = 0, .hi = 2 };
    kevo_verify_generate(&g, 5, 0, b, 64);
    int ones = 0;
    for (int i = 0; i < 64; i++) {
        assert_true(b[i] == 0 || b[i] == 1);
        ones += b[i];
    }
    assert_true(ones > 10 && ones < 54);
}

static void test_gen_spec(void **state)
{
    (void)state;
    struct kevo_env env = { .n = 1, .names = { "N" }, .values = { 10 } };
    struct kevo_tensor_decl t = { .name = "x", .role = KEVO_ROLE_INPUT, .dtype = KEVO_I32,
                                  .init = KEVO_INIT_RANDINT, .init_a = "0", .init_b = "N-1",
                                  .line = 7 };
    struct kevo_gen g;
    char *msg = NULL;
    assert_int_equal(kevo_verify_gen_spec(&t, &env, &g, &msg), KEVO_OK);
    assert_int_equal(g.lo, 0);
    assert_int_equal(g.hi, 9);

    t.init_b = "0";
    assert_int_equal(kevo_verify_gen_spec(&t, &env, &g, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "line 7"));
    assert_non_null(strstr(msg, "input x"));
    assert_non_null(strstr(msg, "empty"));
    kevo_free(msg);
    msg = NULL;

    t.init_b = "M";            /* unknown name */
    assert_int_not_equal(kevo_verify_gen_spec(&t, &env, &g, &msg), KEVO_OK);
    assert_non_null(msg);
    kevo_free(msg);
    msg = NULL;

    t.dtype = KEVO_F32;
    t.init = KEVO_INIT_NORMAL;
    t.init_a = "0.5";
    t.init_b = "-1";
    assert_int_equal(kevo_verify_gen_spec(&t, &env, &g, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "STD"));
    kevo_free(msg);
    msg = NULL;

    t.init = KEVO_INIT_UNIFORM;
    t.init_a = "2";
    t.init_b = "1.5";
    assert_int_equal(kevo_verify_gen_spec(&t, &env, &g, &msg), KEVO_ERR_INVALID);
    kevo_free(msg);
    msg = NULL;
    t.init_b = "N";
    assert_int_equal(kevo_verify_gen_spec(&t, &env, &g, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "float literals"));
    kevo_free(msg);
    msg = NULL;

    t.init = KEVO_INIT_NONE;
    assert_int_equal(kevo_verify_gen_spec(&t, &env, &g, &msg), KEVO_OK);
    assert_int_equal(g.kind, KEVO_INIT_NORMAL);
    t.dtype = KEVO_BOOL;
    assert_int_equal(kevo_verify_gen_spec(&t, &env, &g, &msg), KEVO_OK);
    assert_int_equal(g.kind, KEVO_INIT_RANDINT);
    assert_int_equal(g.hi, 2);
    assert_null(msg);
}

/* ---- poison and guards ---- */

static void test_poison(void **state)
{
    (void)state;
    for (int dt = 0; dt < KEVO_DTYPE_COUNT; dt++) {
        size_t esz = kevo_dtype_size((enum kevo_dtype)dt);
        uint32_t pa = kevo_verify_poison((enum kevo_dtype)dt, 0);
        uint32_t pb = kevo_verify_poison((enum kevo_dtype)dt, 1);
        unsigned char bufa[16], bufb[16];
        for (int k = 0; k < 4; k++) {
            memcpy(bufa + 4 * k, &pa, 4);
            memcpy(bufb + 4 * k, &pb, 4);
        }
        int64_t n = (int64_t)(16 / esz);
        for (int64_t i = 1; i < n; i++) {    /* every element holds the same bits */
            assert_int_equal(kevo_dt_bits((enum kevo_dtype)dt, bufa, i),
                             kevo_dt_bits((enum kevo_dtype)dt, bufa, 0));
        }
        assert_int_not_equal(kevo_dt_bits((enum kevo_dtype)dt, bufa, 0),
                             kevo_dt_bits((enum kevo_dtype)dt, bufb, 0));
        if (kevo_dtype_is_float((enum kevo_dtype)dt)) {
            assert_true(isnan(kevo_dt_load((enum kevo_dtype)dt, bufa, 0)));
            assert_true(isnan(kevo_dt_load((enum kevo_dtype)dt, bufb, 0)));
        }
        /* The unwritten check finds every poisoned element of a fully poisoned buffer
         * when the reference holds ordinary values. */
        unsigned char ref[16] = { 0 };
        int64_t first;
        assert_int_equal(kevo_verify_unwritten((enum kevo_dtype)dt, bufa, ref, n, 0, &first), n);
        assert_int_equal(first, 0);
        assert_int_equal(kevo_verify_unwritten((enum kevo_dtype)dt, bufa, ref, n, 1, &first), 0);
        assert_int_equal(first, -1);
    }
    uint8_t bools[2] = { 0, 0 };
    memset(bools, (int)(kevo_verify_poison(KEVO_BOOL, 0) & 0xFF), 2);
    assert_true(bools[0] > 1);
    assert_true(kevo_verify_canary(1) != kevo_verify_canary(2));
}

static void test_guard(void **state)
{
    (void)state;
    unsigned char alloc[1024];
    uint32_t pat = 0xA1B2C3D4u;
    for (size_t j = 0; j < sizeof alloc; j += 4)
        memcpy(alloc + j, &pat, 4);
    assert_int_equal(kevo_verify_guard_check(alloc, 256, 0, pat), -1);
    /* A back guard starting at an odd offset (3 bytes of data before it). */
    assert_int_equal(kevo_verify_guard_check(alloc + 259, 300, 259, pat), -1);
    alloc[259 + 37] ^= 1;
    assert_int_equal(kevo_verify_guard_check(alloc + 259, 300, 259, pat), 37);
    assert_int_equal(kevo_verify_guard_check(alloc, 256, 0, pat ^ 0x100), 1);
}

/* ---- comparison ---- */

static void test_compare_float(void **state)
{
    (void)state;
    float ref[100], out[100];
    struct kevo_cmp c;
    for (int i = 0; i < 100; i++)
        ref[i] = out[i] = (float)(i - 50) * 0.25f;
    kevo_verify_compare(KEVO_F32, out, ref, 100, 1e-5, 1e-6, &c);
    assert_true(c.pass);
    assert_int_equal(c.n_bad, 0);
    assert_int_equal(c.first_bad, -1);
    assert_near(c.max_abs, 0, 0);

    out[60] = ref[60] * 1.01f;                  /* off by 1 % */
    kevo_verify_compare(KEVO_F32, out, ref, 100, 1e-3, 1e-5, &c);
    assert_false(c.pass);
    assert_int_equal(c.n_bad, 1);
    assert_int_equal(c.first_bad, 60);
    assert_near(c.got, ref[60] * 1.01f, 0);
    assert_near(c.want, 2.5, 0);
    assert_near(c.max_rel, 0.01, 1e-6);
    assert_near(c.max_abs, 0.025, 1e-6);
    out[60] = ref[60];

    out[3] = NAN;                                /* NaN where finite expected */
    kevo_verify_compare(KEVO_F32, out, ref, 100, 1e-3, 1e-3, &c);
    assert_false(c.pass);
    assert_int_equal(c.first_bad, 3);
    ref[3] = NAN;                                /* NaN expected, NaN given: a match */
    kevo_verify_compare(KEVO_F32, out, ref, 100, 1e-3, 1e-3, &c);
    assert_true(c.pass);
    out[3] = 0.0f;                               /* NaN expected, number given */
    kevo_verify_compare(KEVO_F32, out, ref, 100, 1e-3, 1e3, &c);
    assert_false(c.pass);
    ref[3] = INFINITY;
    out[3] = INFINITY;
    kevo_verify_compare(KEVO_F32, out, ref, 100, 1e-3, 1e-3, &c);
    assert_true(c.pass);
    out[3] = -INFINITY;
    kevo_verify_compare(KEVO_F32, out, ref, 100, 1e-3, 1e-3, &c);
    assert_false(c.pass);
    out[3] = 1e30f;                              /* huge atol cannot match Inf */
    kevo_verify_compare(KEVO_F32, out, ref, 100, 1e-3, 1e38, &c);
    assert_false(c.pass);
}

static void test_compare_l2(void **state)
{
    (void)state;
    double ref[64], out[64];
    struct kevo_cmp c;
    for (int i = 0; i < 64; i++) {
        ref[i] = 1.0;
        out[i] = 1.5;       /* within atol=1 elementwise, but 50 % off in L2 */
    }
    kevo_verify_compare(KEVO_F64, out, ref, 64, 1e-3, 1.0, &c);
    assert_int_equal(c.n_bad, 0);
    assert_true(c.l2_fail);
    assert_false(c.pass);
    assert_near(c.rel_l2, 0.5, 1e-12);
    assert_int_equal(c.worst, 0);
    for (int i = 0; i < 64; i++)
        ref[i] = 0.0;       /* ||ref|| = 0: only the elementwise rule applies */
    kevo_verify_compare(KEVO_F64, out, ref, 64, 1e-3, 2.0, &c);
    assert_true(c.pass);
}

static void test_compare_int_half(void **state)
{
    (void)state;
    int32_t a[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, b[8];
    struct kevo_cmp c;
    memcpy(b, a, sizeof a);
    kevo_verify_compare(KEVO_I32, b, a, 8, 1.0, 100.0, &c);   /* tolerances ignored */
    assert_true(c.pass);
    b[5] = 7;
    kevo_verify_compare(KEVO_I32, b, a, 8, 1.0, 100.0, &c);
    assert_false(c.pass);
    assert_int_equal(c.first_bad, 5);
    assert_near(c.got, 7, 0);
    assert_near(c.want, 6, 0);

    uint16_t h[4], hr[4];
    for (int i = 0; i < 4; i++) {
        hr[i] = kevo_f16_from_double(i + 1.0);
        h[i] = hr[i];
    }
    h[2] = (uint16_t)(hr[2] + 1);               /* one ulp of 3.0 = 2^-9 */
    kevo_verify_compare(KEVO_F16, h, hr, 4, 1e-3, 1e-3, &c);
    assert_true(c.pass);
    kevo_verify_compare(KEVO_F16, h, hr, 4, 1e-4, 1e-4, &c);
    assert_false(c.pass);
    assert_int_equal(c.first_bad, 2);
}

static void test_unwritten_nondet(void **state)
{
    (void)state;
    float out[32], ref[32], other[32];
    uint32_t pa = kevo_verify_poison(KEVO_F32, 0), pb = kevo_verify_poison(KEVO_F32, 1);
    int64_t first;
    for (int i = 0; i < 32; i++) {
        memcpy(&out[i], &pa, 4);
        ref[i] = (float)i;
    }
    for (int i = 0; i < 10; i++)
        out[i] = (float)i;
    assert_int_equal(kevo_verify_unwritten(KEVO_F32, out, ref, 32, 0, &first), 22);
    assert_int_equal(first, 10);
    memcpy(&ref[20], &pa, 4);                   /* the reference itself holds the bits */
    assert_int_equal(kevo_verify_unwritten(KEVO_F32, out, ref, 32, 0, &first), 21);

    memcpy(other, out, sizeof out);
    assert_int_equal(kevo_verify_first_diff(KEVO_F32, out, other, 32), -1);
    memcpy(&other[12], &pb, 4);
    assert_int_equal(kevo_verify_first_diff(KEVO_F32, out, other, 32), 12);
    other[12] = out[12];
    other[31] = -0.0f;                          /* bitwise, so -0 differs from poison */
    assert_int_equal(kevo_verify_first_diff(KEVO_F32, out, other, 32), 31);
}

static void test_degenerate(void **state)
{
    (void)state;
    float ref[16], out[16];
    for (int i = 0; i < 16; i++) {
        ref[i] = 1e-6f * (float)i;   /* tiny values: zeros would pass a 1e-5 atol */
        out[i] = 0.0f;
    }
    assert_true(kevo_verify_degenerate(KEVO_F32, out, ref, 16));
    for (int i = 0; i < 16; i++)
        out[i] = 3.0f;
    assert_true(kevo_verify_degenerate(KEVO_F32, out, ref, 16));
    out[5] = 3.5f;
    assert_false(kevo_verify_degenerate(KEVO_F32, out, ref, 16));
    for (int i = 0; i < 16; i++) {
        out[i] = 2.0f;
        ref[i] = 2.0f;               /* constant reference: a constant output is right */
    }
    assert_false(kevo_verify_degenerate(KEVO_F32, out, ref, 16));
    ref[3] = nextafterf(2.0f, 3.0f); /* rounding noise is not spread */
    assert_false(kevo_verify_degenerate(KEVO_F32, out, ref, 16));
    ref[3] = 2.5f;
    assert_false(kevo_verify_degenerate(KEVO_F32, out, ref, 4));   /* small: across trials */
    assert_true(kevo_verify_degenerate(KEVO_F32, out, ref, 5));
}

static void test_unravel_hash(void **state)
{
    (void)state;
    int64_t dims[3] = { 2, 3, 4 }, idx[3];
    kevo_verify_unravel(23, dims, 3, idx);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 2);
    assert_int_equal(idx[2], 3);
    kevo_verify_unravel(5, dims, 3, idx);
    assert_int_equal(idx[0], 0);
    assert_int_equal(idx[1], 1);
    assert_int_equal(idx[2], 1);
    assert_true(kevo_verify_hash("abc", 3) != kevo_verify_hash("abd", 3));
    assert_true(kevo_verify_hash("abc", 3) == kevo_verify_hash("abc", 3));
}

/* ---- the generator check, sealing and the judge ---- */

static void test_gen_check(void **state)
{
    const struct kevo_gen gs[] = {
        {.kind = KEVO_INIT_NORMAL, .dtype = KEVO_BF16, .a = 0, .b = 1},
        {.kind = KEVO_INIT_UNIFORM, .dtype = KEVO_F64, .a = -1, .b = 1},
        {.kind = KEVO_INIT_RANDINT, .dtype = KEVO_I16, .lo = -5, .hi = 5000},
    };
    const int64_t n = 300001;            /* several chunks, an odd tail */
    (void)state;
    for (size_t c = 0; c < sizeof gs / sizeof gs[0]; c++) {
        size_t esz = kevo_dtype_size(gs[c].dtype);
        unsigned char *x = kevo_malloc((size_t)n * esz);
        kevo_verify_generate(&gs[c], 11, 2, x, n);
        assert_int_equal(kevo_verify_gen_check(&gs[c], 11, 2, x, n), -1);
        assert_int_equal(kevo_verify_gen_check(&gs[c], 11, 2, x, 7), -1);   /* a prefix */
        const int64_t flips[] = {n - 1, 250000, 4097, 0};
        for (int f = 0; f < 4; f++) {
            x[(size_t)flips[f] * esz] ^= 1;
            assert_int_equal(kevo_verify_gen_check(&gs[c], 11, 2, x, n), flips[f]);
        }
        /* another stream is another tensor */
        assert_int_equal(kevo_verify_gen_check(&gs[c], 11, 3, x, n), 0);
        kevo_free(x);
    }
}

static void test_seal(void **state)
{
    const int64_t n = 100003;
    (void)state;
    assert_true(kevo_verify_seal_bits(0, 5) == 0);
    assert_true(kevo_verify_seal_bits(7, 5) != kevo_verify_seal_bits(7, 6));
    assert_true(kevo_verify_seal_bits(7, 5) != kevo_verify_seal_bits(8, 5));
    for (int d = 0; d < JC_N_DTYPES; d++) {
        enum kevo_dtype dt = JC_DTYPES[d];
        size_t bytes = (size_t)n * kevo_dtype_size(dt);
        unsigned char *x = kevo_malloc(bytes), *orig = kevo_malloc(bytes);
        int64_t same = 0;
        for (size_t i = 0; i < bytes; i++)
            x[i] = (unsigned char)(kevo_verify_mix64(i) >> 7);
        memcpy(orig, x, bytes);
        kevo_verify_seal(dt, x, n, 0);                        /* key 0: in the clear */
        assert_memory_equal(x, orig, bytes);
        kevo_verify_seal(dt, x, n, 0xFEEDull);
        for (int64_t i = 0; i < n; i++) {
            uint64_t m = kevo_verify_seal_bits(0xFEEDull, (uint64_t)i);
            uint64_t mask = kevo_dtype_size(dt) == 8 ? ~0ull
                                                     : (1ull << (8 * kevo_dtype_size(dt))) - 1;
            assert_true((kevo_dt_bits(dt, x, i) ^ kevo_dt_bits(dt, orig, i)) == (m & mask));
            same += kevo_dt_bits(dt, x, i) == kevo_dt_bits(dt, orig, i);
        }
        assert_true(same < n / 100);                          /* noise, not the answer */
        kevo_verify_seal(dt, x, n, 0xFEEDull);                /* an involution */
        assert_memory_equal(x, orig, bytes);
        kevo_free(x);
        kevo_free(orig);
    }
}

/* kevo_verify_judge is exactly the individual functions, field by field. */
static void judge_composes(enum kevo_dtype dt, int64_t n, int variant, int with_b)
{
    size_t bytes = (size_t)n * kevo_dtype_size(dt), hb = bytes ? bytes : 1;
    void *a = kevo_malloc(hb), *b = kevo_malloc(hb), *ref = kevo_malloc(hb);
    struct kevo_judge_req rq = jc_req(dt, n);
    struct kevo_judge_res r, rs;
    struct kevo_cmp c;
    int64_t first = 0, cnt;

    jc_craft(dt, n, variant, a, b, ref);
    kevo_verify_judge(&rq, a, with_b ? b : NULL, ref, &r);
    kevo_verify_compare(dt, a, ref, n, rq.rtol, rq.atol, &c);
    assert_memory_equal(&r.cmp, &c, sizeof c);
    cnt = kevo_verify_unwritten(dt, a, ref, n, 0, &first);
    assert_int_equal(r.unw_a, cnt);
    assert_int_equal(r.unw_a_first, first);
    cnt = with_b ? kevo_verify_unwritten(dt, b, ref, n, 1, &first) : 0;
    assert_int_equal(r.unw_b, cnt);
    assert_int_equal(r.unw_b_first, with_b ? first : -1);
    assert_int_equal(r.diff_first, with_b ? kevo_verify_first_diff(dt, a, b, n) : -1);
    assert_int_equal(r.a_constant && r.ref_spread, kevo_verify_degenerate(dt, a, ref, n));
    assert_int_equal(r.ref_spread, kevo_verify_spread(dt, ref, n));
    assert_int_equal(r.hash_a, n <= KEVO_VERIFY_SMALL ? kevo_verify_hash(a, bytes) : 0);
    assert_int_equal(r.hash_ref, n <= KEVO_VERIFY_SMALL ? kevo_verify_hash(ref, bytes) : 0);
    /* the same from a sealed reference, which stays sealed */
    uint64_t clear = kevo_verify_hash(ref, bytes);
    kevo_verify_seal(dt, ref, n, rq.ref_key);
    uint64_t sealed = kevo_verify_hash(ref, bytes);
    kevo_verify_judge_sealed(&rq, a, with_b ? b : NULL, ref, &rs);
    assert_memory_equal(&rs, &r, sizeof r);
    assert_int_equal(kevo_verify_hash(ref, bytes), sealed);
    kevo_verify_seal(dt, ref, n, rq.ref_key);
    assert_int_equal(kevo_verify_hash(ref, bytes), clear);
    kevo_free(a);
    kevo_free(b);
    kevo_free(ref);
}

static void test_judge_every_dtype(void **state)
{
    (void)state;
    for (int d = 0; d < JC_N_DTYPES; d++) {
        for (int v = 0; v < JC_N_VARIANTS; v++) {
            judge_composes(JC_DTYPES[d], 20011, v, 1);
            judge_composes(JC_DTYPES[d], 3, v, 1);
        }
        judge_composes(JC_DTYPES[d], 20011, JC_MIXED, 0);
        judge_composes(JC_DTYPES[d], 0, JC_EXACT, 1);
    }
}

/* What the crafted cases must give, by the protocol's rules. */
static void test_judge_rules(void **state)
{
    const int64_t n = 20011;
    void *a = kevo_malloc((size_t)n * 8), *b = kevo_malloc((size_t)n * 8);
    void *ref = kevo_malloc((size_t)n * 8);
    struct kevo_judge_req rq = jc_req(KEVO_F32, n);
    struct kevo_judge_res r;

    (void)state;
    jc_craft(KEVO_F32, n, JC_MIXED, a, b, ref);
    kevo_verify_judge(&rq, a, b, ref, &r);
    /* bad: [1] off, [500] NaN and [501] Inf where finite is expected, [9000] [9001] poison;
     * NaN where NaN is expected [502] and the same Inf [503] match */
    assert_int_equal(r.cmp.n_bad, 5);
    assert_int_equal(r.cmp.first_bad, 1);
    assert_int_equal(r.cmp.worst, 1);
    assert_true(r.cmp.got == kevo_dt_load(KEVO_F32, a, 1));
    assert_true(r.cmp.want == kevo_dt_load(KEVO_F32, ref, 1));
    assert_int_equal(r.unw_a, 2);
    assert_int_equal(r.unw_a_first, 9000);
    assert_int_equal(r.unw_b, 1);
    assert_int_equal(r.unw_b_first, 7000);
    assert_int_equal(r.diff_first, 300);
    assert_false(r.a_constant);
    assert_true(r.ref_spread);
    assert_false(r.cmp.pass);

    jc_craft(KEVO_I8, n, JC_CONSTANT, a, b, ref);             /* constant where ref varies */
    rq = jc_req(KEVO_I8, n);
    kevo_verify_judge(&rq, a, b, ref, &r);
    assert_true(r.a_constant && r.ref_spread);
    assert_int_equal(r.diff_first, -1);
    jc_craft(KEVO_BF16, n, JC_REF_FLAT, a, b, ref);           /* the reference is constant too */
    rq = jc_req(KEVO_BF16, n);
    kevo_verify_judge(&rq, a, b, ref, &r);
    assert_true(r.a_constant);
    assert_false(r.ref_spread);
    assert_true(r.cmp.pass);
    assert_int_equal(r.cmp.worst, 0);                         /* all equal: the first */
    jc_craft(KEVO_F16, 3, JC_EXACT, a, b, ref);               /* small: hashed, never constant */
    rq = jc_req(KEVO_F16, 3);
    kevo_verify_judge(&rq, a, b, ref, &r);
    assert_false(r.a_constant);
    assert_int_equal(r.hash_a, r.hash_ref);
    assert_int_equal(r.hash_a, kevo_verify_hash(ref, 6));
    kevo_free(a);
    kevo_free(b);
    kevo_free(ref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_known),
        cmocka_unit_test(test_f16_exhaustive),
        cmocka_unit_test(test_bf16_known),
        cmocka_unit_test(test_bf16_exhaustive),
        cmocka_unit_test(test_fp8),
        cmocka_unit_test(test_store_load),
        cmocka_unit_test(test_rng_reproducible),
        cmocka_unit_test(test_rng_moments),
        cmocka_unit_test(test_rng_dtypes),
        cmocka_unit_test(test_gen_spec),
        cmocka_unit_test(test_poison),
        cmocka_unit_test(test_guard),
        cmocka_unit_test(test_compare_float),
        cmocka_unit_test(test_compare_l2),
        cmocka_unit_test(test_compare_int_half),
        cmocka_unit_test(test_unwritten_nondet),
        cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_unravel_hash),
        cmocka_unit_test(test_gen_check),
        cmocka_unit_test(test_seal),
        cmocka_unit_test(test_judge_every_dtype),
        cmocka_unit_test(test_judge_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

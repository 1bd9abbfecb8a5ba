/*
 * verify - correctness-protocol building blocks (verify.h): seeds, the counter-based input
 * generator, poison/canary patterns, guard checks, tolerance comparison, unwritten,
 * nondeterminism and degenerate checks. No state, no device: eval.c drives these.
 */
#include "core/verify.h"
#include "base/par.h"
#include "core/dtype_conv.h"
#include "core/expr.h"
#include "base/mem.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define GOLDEN 0x9E3779B97F4A7C15ull

/* ---- seeds and random numbers ---- */

uint64_t kevo_verify_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

uint64_t kevo_verify_derive(uint64_t seed, uint64_t a, uint64_t b)
{
    /* Chain the mixes so (a, b) and (b, a) give unrelated seeds. */
    uint64_t h = kevo_verify_mix64(seed + GOLDEN);
    h = kevo_verify_mix64(h ^ (a + 1) * GOLDEN);
    return kevo_verify_mix64(h ^ (b + 1) * 0xD1B54A32D192ED03ull);
}

/* The key of one stream: a splitmix64 state from which draws are taken by counter. */
static uint64_t stream_key(uint64_t seed, uint64_t stream)
{
    return kevo_verify_mix64(seed ^ kevo_verify_mix64(stream + GOLDEN));
}

/* splitmix64's i-th output from state key, without walking the sequence. */
static uint64_t key_draw(uint64_t key, uint64_t i)
{
    return kevo_verify_mix64(key + (i + 1) * GOLDEN);
}
static double to01(uint64_t u) { return (double)(u >> 11) * 0x1.0p-53; }

uint64_t kevo_verify_draw(uint64_t seed, uint64_t stream, uint64_t i)
{
    return key_draw(stream_key(seed, stream), i);
}

double kevo_verify_uniform01(uint64_t seed, uint64_t stream, uint64_t i)
{
    return to01(kevo_verify_draw(seed, stream, i));
}

/* Box-Muller on the pair (2k, 2k+1): returns the cos (even) and sin (odd) normals. */
static void key_normal_pair(uint64_t key, uint64_t k, double *z0, double *z1)
{
    double u1 = to01(key_draw(key, 2 * k));
    double u2 = to01(key_draw(key, 2 * k + 1));
    double r = sqrt(-2.0 * log(1.0 - u1));   /* 1 - u1 in (0, 1]: log is finite */
    double th = 2.0 * M_PI * u2;
    *z0 = r * cos(th);
    *z1 = r * sin(th);
}

double kevo_verify_normal(uint64_t seed, uint64_t stream, uint64_t i)
{
    double z0, z1;
    key_normal_pair(stream_key(seed, stream), i / 2, &z0, &z1);
    return (i & 1) ? z1 : z0;
}

/* ---- INIT ---- */

static enum kevo_status gen_err(char **out_msg, const struct kevo_tensor_decl *t,
                                const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static enum kevo_status gen_err(char **out_msg, const struct kevo_tensor_decl *t,
                                const char *fmt, ...)
{
    char *what;
    va_list ap;
    va_start(ap, fmt);
    what = kevo_vstrdupf(fmt, ap);
    va_end(ap);
    if (out_msg)
        *out_msg = what ? kevo_strdupf("line %d: input %s: %s", t->line, t->name, what) : NULL;
    kevo_free(what);
    return KEVO_ERR_INVALID;
}

static enum kevo_status gen_float_args(const struct kevo_tensor_decl *t, struct kevo_gen *g,
                                       char **out_msg)
{
    if (!t->init_a || !t->init_b || kevo_expr_parse_double(t->init_a, &g->a) != 0 ||
        kevo_expr_parse_double(t->init_b, &g->b) != 0)
        return gen_err(out_msg, t, "INIT arguments must be float literals");
    if (!isfinite(g->a) || !isfinite(g->b))
        return gen_err(out_msg, t, "INIT arguments must be finite");
    if (g->kind == KEVO_INIT_NORMAL && g->b < 0)
        return gen_err(out_msg, t, "normal(MEAN,STD) needs STD >= 0, got %g", g->b);
    if (g->kind == KEVO_INIT_UNIFORM && g->a > g->b)
        return gen_err(out_msg, t, "uniform(LO,HI) needs LO <= HI, got %g > %g", g->a, g->b);
    return KEVO_OK;
}

static enum kevo_status gen_int_args(const struct kevo_tensor_decl *t, const struct kevo_env *env,
                                     struct kevo_gen *g, char **out_msg)
{
    enum kevo_status st;
    char *emsg = NULL;

    if (!t->init_a || !t->init_b)
        return gen_err(out_msg, t, "randint needs two bounds");
    st = kevo_env_eval(env, t->init_a, &g->lo, &emsg);
    if (!st)
        st = kevo_env_eval(env, t->init_b, &g->hi, &emsg);
    if (st) {
        (void)gen_err(out_msg, t, "randint bound: %s", emsg ? emsg : kevo_status_name(st));
        kevo_free(emsg);
        return st;
    }
    if (g->hi <= g->lo)
        return gen_err(out_msg, t, "randint(LO,HI) is empty: LO=%lld HI=%lld (HI is exclusive)",
                       (long long)g->lo, (long long)g->hi);
    return KEVO_OK;
}

enum kevo_status kevo_verify_gen_spec(const struct kevo_tensor_decl *t, const struct kevo_env *env,
                                      struct kevo_gen *out, char **out_msg)
{
    memset(out, 0, sizeof *out);
    if (out_msg)
        *out_msg = NULL;
    out->kind = t->init;
    out->dtype = t->dtype;
    switch (t->init) {
    case KEVO_INIT_NORMAL:
    case KEVO_INIT_UNIFORM:
        return gen_float_args(t, out, out_msg);
    case KEVO_INIT_RANDINT:
        return gen_int_args(t, env, out, out_msg);
    default:
        break;
    }
    /* No INIT: a default that gives every element a different-looking value. */
    if (kevo_dtype_is_float(t->dtype)) {
        out->kind = KEVO_INIT_NORMAL;
        out->a = 0.0;
        out->b = 1.0;
    } else {
        out->kind = KEVO_INIT_RANDINT;
        out->lo = 0;
        out->hi = t->dtype == KEVO_BOOL ? 2 : 100;
    }
    return KEVO_OK;
}

uint64_t kevo_verify_stream_key(uint64_t seed, uint64_t stream)
{
    return stream_key(seed, stream);
}

/*
 * Elements [lo, hi) of one input into dst, whose first element is element `org` of the
 * tensor; lo is even so normal pairs never straddle two calls. The arithmetic is written
 * one rounding per operation (no contraction: -std=c11 turns it off) because the device
 * copy in kernels/harness.cu must give the same bits.
 */
static void gen_range(const struct kevo_gen *g, uint64_t key, void *dst, int64_t org,
                      int64_t lo, int64_t hi)
{
    if (g->kind == KEVO_INIT_NORMAL) {
        for (int64_t i = lo; i < hi; i += 2) {
            double z0, z1;
            key_normal_pair(key, (uint64_t)i / 2, &z0, &z1);
            kevo_dt_store(g->dtype, dst, i - org, g->a + g->b * z0);
            if (i + 1 < hi)
                kevo_dt_store(g->dtype, dst, i + 1 - org, g->a + g->b * z1);
        }
    } else if (g->kind == KEVO_INIT_UNIFORM) {
        for (int64_t i = lo; i < hi; i++)
            kevo_dt_store(g->dtype, dst, i - org,
                          g->a + (g->b - g->a) * to01(key_draw(key, i)));
    } else {
        /* Lemire's multiply-shift maps a 64-bit draw onto [0, range) without a division;
         * the bias (range / 2^64) is far below anything a test could see. */
        uint64_t range = (uint64_t)g->hi - (uint64_t)g->lo;
        for (int64_t i = lo; i < hi; i++) {
            uint64_t off = (uint64_t)(((unsigned __int128)key_draw(key, i) * range) >> 64);
            kevo_dt_store_int(g->dtype, dst, i - org, (int64_t)((uint64_t)g->lo + off));
        }
    }
}

struct gen_job {
    const struct kevo_gen *g;
    uint64_t key;
    void *dst;                  /* generate: the tensor */
    const void *buf;            /* check: the tensor to check */
    int64_t first[KEVO_PAR_MAX];
};

static void gen_chunk(void *ctx, int c, int64_t lo, int64_t hi)
{
    const struct gen_job *j = ctx;
    (void)c;
    gen_range(j->g, j->key, j->dst, 0, lo, hi);
}

void kevo_verify_generate(const struct kevo_gen *g, uint64_t seed, uint64_t stream, void *dst,
                          int64_t n)
{
    struct gen_job j = {.g = g, .key = stream_key(seed, stream), .dst = dst};
    /* counter-based: element i depends only on (seed, stream, i), so chunks are independent */
    kevo_par_for(n, 2, gen_chunk, &j);
}

#define CHECK_BLOCK 2048        /* elements regenerated at a time (even: whole pairs) */

/* The first mismatch in [lo, hi): regenerate a block at a time into a stack buffer. */
static void check_chunk(void *ctx, int c, int64_t lo, int64_t hi)
{
    struct gen_job *j = ctx;
    uint64_t tmp[CHECK_BLOCK];
    enum kevo_dtype dt = j->g->dtype;
    size_t esz = kevo_dtype_size(dt);

    j->first[c] = -1;
    for (int64_t b = lo; b < hi; b += CHECK_BLOCK) {
        int64_t e = hi - b < CHECK_BLOCK ? hi : b + CHECK_BLOCK;
        const char *got = (const char *)j->buf + b * (int64_t)esz;
        gen_range(j->g, j->key, tmp, b, b, e);
        if (!memcmp(tmp, got, (size_t)(e - b) * esz))
            continue;
        for (int64_t i = b; i < e; i++) {
            if (kevo_dt_bits(dt, tmp, i - b) != kevo_dt_bits(dt, got, i - b)) {
                j->first[c] = i;
                return;
            }
        }
    }
}

int64_t kevo_verify_gen_check(const struct kevo_gen *g, uint64_t seed, uint64_t stream,
                              const void *buf, int64_t n)
{
    struct gen_job j = {.g = g, .key = stream_key(seed, stream), .buf = buf};

    kevo_par_for(n, 2, check_chunk, &j);
    for (int c = 0; c < kevo_par_chunks(n); c++) {
        if (j.first[c] >= 0)
            return j.first[c];
    }
    return -1;
}

/* ---- poison and canaries ---- */

/* Element patterns, replicated to 4 bytes by kevo_verify_poison. Float NaN payloads are
 * signalling-style (quiet bit clear where the format has one) so no arithmetic result or
 * canonical NaN (0x7FC00000, 0x7FFFFFFF, 0x7E00, ...) can equal them. */
static const uint32_t poison_a[KEVO_DTYPE_COUNT] = {
    [KEVO_F64] = 0x7FF4DEADu, [KEVO_F32] = 0x7FA5A5A5u, [KEVO_F16] = 0x7D5Au,
    [KEVO_BF16] = 0x7FA5u, [KEVO_FP8E4M3] = 0x7Fu, [KEVO_FP8E5M2] = 0x7Du,
    [KEVO_I64] = 0x5A5A5A5Bu, [KEVO_I32] = 0x5A5A5A5Bu, [KEVO_I16] = 0x5A5Bu,
    [KEVO_I8] = 0x5Bu, [KEVO_U8] = 0x5Bu, [KEVO_BOOL] = 0x5Bu,
};
static const uint32_t poison_b[KEVO_DTYPE_COUNT] = {
    [KEVO_F64] = 0xFFF1BEEFu, [KEVO_F32] = 0xFF9C3C3Du, [KEVO_F16] = 0xFCA5u,
    [KEVO_BF16] = 0xFF9Au, [KEVO_FP8E4M3] = 0xFFu, [KEVO_FP8E5M2] = 0xFEu,
    [KEVO_I64] = 0xC3C3C3C5u, [KEVO_I32] = 0xC3C3C3C5u, [KEVO_I16] = 0xC3C5u,
    [KEVO_I8] = 0xC5u, [KEVO_U8] = 0xC5u, [KEVO_BOOL] = 0xC5u,
};

uint32_t kevo_verify_poison(enum kevo_dtype dt, int which)
{
    uint32_t e;
    size_t sz;

    if ((unsigned)dt >= KEVO_DTYPE_COUNT)
        dt = KEVO_U8;
    e = which ? poison_b[dt] : poison_a[dt];
    sz = kevo_dtype_size(dt);
    if (sz == 1)
        return e * 0x01010101u;
    if (sz == 2)
        return e | (e << 16);
    return e;   /* 4 bytes; 8-byte elements repeat it twice (still a NaN for f64) */
}

uint64_t kevo_verify_poison_elem(enum kevo_dtype dt, int which)
{
    uint32_t p = kevo_verify_poison(dt, which);
    switch (kevo_dtype_size(dt)) {
    case 1: return p & 0xFFu;
    case 2: return p & 0xFFFFu;
    case 4: return p;
    default: return ((uint64_t)p << 32) | p;
    }
}

uint32_t kevo_verify_canary(uint64_t seed)
{
    /* Secret like the seed, so a kernel cannot restore a guard it overwrote. */
    return (uint32_t)kevo_verify_mix64(seed ^ 0xCA4A21E5C0FFEEull);
}

int64_t kevo_verify_guard_check(const void *g, size_t n, size_t phase, uint32_t pattern)
{
    const unsigned char *b = g;
    for (size_t j = 0; j < n; j++) {
        unsigned char want = (unsigned char)(pattern >> (8 * ((phase + j) & 3)));
        if (b[j] != want)
            return (int64_t)j;
    }
    return -1;
}

/* ---- comparison ---- */

/* Partial result of one chunk; merged in chunk order so the outcome equals a serial scan. */
struct cmp_part {
    struct kevo_cmp r;
    double sum_d2, sum_w2;
};

struct cmp_job {
    enum kevo_dtype dt;
    const void *out, *ref;
    double rtol, atol;
    struct cmp_part part[KEVO_PAR_MAX];
};

static void cmp_int(const struct cmp_job *j, int64_t lo, int64_t hi, struct kevo_cmp *r)
{
    for (int64_t i = lo; i < hi; i++) {
        int64_t o = kevo_dt_load_int(j->dt, j->out, i), w = kevo_dt_load_int(j->dt, j->ref, i);
        double d = fabs((double)o - (double)w);
        if (d > r->max_abs || r->worst < 0) {
            r->max_abs = d;
            r->worst = i;
        }
        if (o != w) {
            if (r->first_bad < 0)
                r->first_bad = i;
            r->n_bad++;
            if (w != 0 && d / fabs((double)w) > r->max_rel)
                r->max_rel = d / fabs((double)w);
        }
    }
}

/* One float pair: 1 if it fails the elementwise rule. Accumulates the L2 sums. */
static int cmp_float_one(double o, double w, double rtol, double atol, double *sum_d2,
                         double *sum_w2)
{
    if (isnan(w))
        return !isnan(o);                    /* NaN expected: only NaN matches */
    if (isinf(w))
        return o != w;                       /* Inf expected: the same Inf */
    if (!isfinite(o))
        return 1;                            /* non-finite where finite expected */
    double d = o - w;
    *sum_d2 += d * d;
    *sum_w2 += w * w;
    return !(fabs(d) <= atol + rtol * fabs(w));
}

static void cmp_float(const struct cmp_job *j, int64_t lo, int64_t hi, struct cmp_part *p)
{
    struct kevo_cmp *r = &p->r;
    for (int64_t i = lo; i < hi; i++) {
        double o = kevo_dt_load(j->dt, j->out, i), w = kevo_dt_load(j->dt, j->ref, i);
        if (cmp_float_one(o, w, j->rtol, j->atol, &p->sum_d2, &p->sum_w2)) {
            if (r->first_bad < 0)
                r->first_bad = i;
            r->n_bad++;
        }
        if (isfinite(o) && isfinite(w)) {
            double d = fabs(o - w);
            if (d > r->max_abs || r->worst < 0) {
                r->max_abs = d;
                r->worst = i;
            }
            if (w != 0.0 && d / fabs(w) > r->max_rel)
                r->max_rel = d / fabs(w);
        }
    }
}

static void cmp_chunk(void *ctx, int c, int64_t lo, int64_t hi)
{
    struct cmp_job *j = ctx;
    struct cmp_part *p = &j->part[c];
    memset(p, 0, sizeof *p);
    p->r.first_bad = -1;
    p->r.worst = -1;
    if (kevo_dtype_is_float(j->dt))
        cmp_float(j, lo, hi, p);
    else
        cmp_int(j, lo, hi, &p->r);
}

static void cmp_merge(struct kevo_cmp *res, const struct cmp_part *p, double *d2, double *w2)
{
    if (res->first_bad < 0)
        res->first_bad = p->r.first_bad;
    res->n_bad += p->r.n_bad;
    if (p->r.worst >= 0 && (res->worst < 0 || p->r.max_abs > res->max_abs)) {
        res->max_abs = p->r.max_abs;
        res->worst = p->r.worst;
    }
    if (p->r.max_rel > res->max_rel)
        res->max_rel = p->r.max_rel;
    *d2 += p->sum_d2;
    *w2 += p->sum_w2;
}

void kevo_verify_compare(enum kevo_dtype dt, const void *out, const void *ref, int64_t n,
                         double rtol, double atol, struct kevo_cmp *res)
{
    struct cmp_job j = {.dt = dt, .out = out, .ref = ref, .rtol = rtol, .atol = atol};
    double sum_d2 = 0.0, sum_w2 = 0.0;

    memset(res, 0, sizeof *res);
    res->n = n;
    res->first_bad = -1;
    res->worst = -1;
    kevo_par_for(n, 1, cmp_chunk, &j);
    for (int c = 0; c < kevo_par_chunks(n); c++)
        cmp_merge(res, &j.part[c], &sum_d2, &sum_w2);
    if (kevo_dtype_is_float(dt)) {
        res->ref_norm = sqrt(sum_w2);
        res->rel_l2 = res->ref_norm > 0 ? sqrt(sum_d2) / res->ref_norm : sqrt(sum_d2);
        res->l2_fail = res->ref_norm > 0 && !(res->rel_l2 <= rtol);
    }
    int64_t at = res->first_bad >= 0 ? res->first_bad : res->worst;
    if (at >= 0) {
        res->got = kevo_dt_load(dt, out, at);
        res->want = kevo_dt_load(dt, ref, at);
    }
    res->pass = res->n_bad == 0 && !res->l2_fail;
}

struct unw_job {
    enum kevo_dtype dt;
    const void *out, *ref;
    uint64_t pe;
    int64_t count[KEVO_PAR_MAX], first[KEVO_PAR_MAX];
};

static void unw_chunk(void *ctx, int c, int64_t lo, int64_t hi)
{
    struct unw_job *j = ctx;
    int64_t count = 0, first = -1;
    for (int64_t i = lo; i < hi; i++) {
        if (kevo_dt_bits(j->dt, j->out, i) == j->pe && kevo_dt_bits(j->dt, j->ref, i) != j->pe) {
            if (first < 0)
                first = i;
            count++;
        }
    }
    j->count[c] = count;
    j->first[c] = first;
}

int64_t kevo_verify_unwritten(enum kevo_dtype dt, const void *out, const void *ref, int64_t n,
                              int which, int64_t *first)
{
    return kevo_verify_unwritten_bits(dt, out, ref, n, kevo_verify_poison_elem(dt, which), first);
}

int64_t kevo_verify_unwritten_bits(enum kevo_dtype dt, const void *out, const void *ref,
                                   int64_t n, uint64_t pe, int64_t *first)
{
    struct unw_job j = {.dt = dt, .out = out, .ref = ref, .pe = pe};
    int64_t count = 0;

    *first = -1;
    kevo_par_for(n, 1, unw_chunk, &j);
    for (int c = 0; c < kevo_par_chunks(n); c++) {
        if (*first < 0)
            *first = j.first[c];
        count += j.count[c];
    }
    return count;
}

int64_t kevo_verify_first_diff(enum kevo_dtype dt, const void *a, const void *b, int64_t n)
{
    size_t esz = kevo_dtype_size(dt);
    if (memcmp(a, b, (size_t)n * esz) == 0)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        if (kevo_dt_bits(dt, a, i) != kevo_dt_bits(dt, b, i))
            return i;
    }
    return -1;
}

int kevo_verify_constant(enum kevo_dtype dt, const void *out, int64_t n)
{
    double v0 = n > 0 ? kevo_dt_load(dt, out, 0) : 0.0;
    for (int64_t i = 1; i < n; i++) {
        if (!(kevo_dt_load(dt, out, i) == v0))
            return 0;                          /* varies (or NaN: a mismatch anyway) */
    }
    return 1;
}

int kevo_verify_spread(enum kevo_dtype dt, const void *ref, int64_t n)
{
    double lo = INFINITY, hi = -INFINITY, amax = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double w = kevo_dt_load(dt, ref, i);
        if (!isfinite(w))
            continue;
        lo = w < lo ? w : lo;
        hi = w > hi ? w : hi;
        amax = fabs(w) > amax ? fabs(w) : amax;
    }
    return hi > lo && (hi - lo) > 1e-5 * amax;
}

int kevo_verify_degenerate(enum kevo_dtype dt, const void *out, const void *ref, int64_t n)
{
    return n > KEVO_VERIFY_SMALL && kevo_verify_constant(dt, out, n) &&
           kevo_verify_spread(dt, ref, n);
}

void kevo_verify_unravel(int64_t idx, const int64_t *dims, int ndim, int64_t *out)
{
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t n = dims[d] > 0 ? dims[d] : 1;
        out[d] = idx % n;
        idx /= n;
    }
}

uint64_t kevo_verify_hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

/* ---- sealing ---- */

/* Two mixes around a key-derived word: one splitmix64 step alone is a bijection, so a
 * single element whose value a candidate can guess (a zero of a ReLU) would give the key
 * back; this way it gives one equation in the 64-bit key, nothing to invert. */
uint64_t kevo_verify_seal_bits(uint64_t key, uint64_t i)
{
    if (!key)
        return 0;
    return kevo_verify_mix64(key_draw(key, i) ^ kevo_verify_mix64(key ^ 0x5EA15EA15EA15EA1ull));
}

/* Element i of base (esz bytes) XORed with m's low bytes. */
static void xor_elem(void *base, size_t esz, int64_t i, uint64_t m)
{
    unsigned char *p = (unsigned char *)base + i * (int64_t)esz;
    for (size_t k = 0; k < esz; k++)
        p[k] ^= (unsigned char)(m >> (8 * k));   /* little-endian, like the device */
}

struct seal_job {
    void *buf;
    size_t esz;
    uint64_t key;
};

static void seal_chunk(void *ctx, int c, int64_t lo, int64_t hi)
{
    const struct seal_job *j = ctx;
    (void)c;
    for (int64_t i = lo; i < hi; i++)
        xor_elem(j->buf, j->esz, i, kevo_verify_seal_bits(j->key, (uint64_t)i));
}

void kevo_verify_seal(enum kevo_dtype dt, void *buf, int64_t n, uint64_t key)
{
    struct seal_job j = {buf, kevo_dtype_size(dt), key};
    if (key)
        kevo_par_for(n, 1, seal_chunk, &j);
}

/* ---- the judge ---- */

void kevo_verify_judge(const struct kevo_judge_req *rq, const void *a, const void *b,
                       const void *ref, struct kevo_judge_res *res)
{
    enum kevo_dtype dt = rq->dt;
    int64_t n = rq->n;
    size_t bytes = (size_t)n * kevo_dtype_size(dt);

    memset(res, 0, sizeof *res);
    kevo_verify_compare(dt, a, ref, n, rq->rtol, rq->atol, &res->cmp);
    res->unw_a = kevo_verify_unwritten_bits(dt, a, ref, n, rq->pe_a, &res->unw_a_first);
    res->unw_b_first = -1;
    res->diff_first = -1;
    if (b) {
        res->unw_b = kevo_verify_unwritten_bits(dt, b, ref, n, rq->pe_b, &res->unw_b_first);
        res->diff_first = kevo_verify_first_diff(dt, a, b, n);
    }
    res->a_constant = n > KEVO_VERIFY_SMALL && kevo_verify_constant(dt, a, n);
    res->ref_spread = kevo_verify_spread(dt, ref, n);
    if (n <= KEVO_VERIFY_SMALL) {
        res->hash_a = kevo_verify_hash(a, bytes);
        res->hash_ref = kevo_verify_hash(ref, bytes);
    }
}

void kevo_verify_judge_sealed(const struct kevo_judge_req *rq, const void *a, const void *b,
                              void *ref, struct kevo_judge_res *res)
{
    kevo_verify_seal(rq->dt, ref, rq->n, rq->ref_key);        /* open ... */
    kevo_verify_judge(rq, a, b, ref, res);
    kevo_verify_seal(rq->dt, ref, rq->n, rq->ref_key);        /* ... and close again */
}

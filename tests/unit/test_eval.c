/*
 * test_eval - kevo_eval_run end to end on the fake backend (fake_backend.h): a correct
 * kernel earns ok, and each way of cheating or failing earns its verdict with evidence:
 * partial writes, writes past either end, input mutation, constant outputs, 1 % errors,
 * NaN, nondeterminism, stale cached results, shape hardcoding, behaving differently while
 * timed (wrong results, or no work), differences and input changes that start after the
 * trials (the repeats), launch errors, crashes, timeouts, compile and parse
 * errors, holdout failures and times below the speed-of-light floor. Also the request
 * decoder, the module cache, timing fields and that no device buffer leaks; a scratch the
 * device cannot hold (once, or again for timing), and, on the real CPU backend, a huge
 * scratch and every host allocation of an evaluation failed in turn.
 */
#include "testutil.h"

#include "worker/eval.h"
#include "worker/eval_cache.h"
#include "fake_backend.h"
#include "base/mem.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#define assert_near(a, b, eps) do { \
        double a_ = (a), b_ = (b); \
        if (!(a_ == b_ || fabs(a_ - b_) <= (eps))) \
            fail_msg("%s = %.17g, want %.17g (+-%g)", #a, a_, b_, (double)(eps)); \
    } while (0)

/* ---- tasks ---- */

static const char TASK_AXPY[] =
    "// kevo task axpy\n"
    "// kevo size N=1000\n"
    "// kevo size N=4099\n"
    "// kevo holdout N=77\n"
    "// kevo input x f32[N] normal(0,1)\n"
    "// kevo input y f32[N] uniform(-1,1)\n"
    "// kevo output z f32[N]\n"
    "// kevo scalar alpha f32 2.5\n"
    "// kevo bytes 12*N\n"
    "// kevo flops 2*N\n"
    "// kevo launch ref_axpy grid=cdiv(N,256) block=256 (x, y, z, alpha, N)\n"
    "extern \"C\" __global__ void ref_axpy(const float *x, const float *y, float *z,\n"
    "                                      float alpha, int n) {}\n";

/* z = 1000 + 0.01 x: a constant 1000 is within tolerance but ignores the inputs. */
static const char TASK_OFFSET[] =
    "// kevo task offset\n"
    "// kevo size N=1000\n"
    "// kevo input x f32[N] normal(0,1)\n"
    "// kevo output z f32[N]\n"
    "// kevo tol rtol=1e-4 atol=1e-5\n"
    "// kevo bytes 8*N\n"
    "// kevo launch ref_offset grid=4 block=256 (x, z, N)\n"
    "extern \"C\" __global__ void ref_offset(const float *x, float *z, int n) {}\n";

/* s = 5 + 1e-6 sum(x): one element; a constant 5 is within tolerance. */
static const char TASK_LOSS[] =
    "// kevo task loss\n"
    "// kevo size N=1000\n"
    "// kevo input x f32[N] normal(0,1)\n"
    "// kevo output s f32[1]\n"
    "// kevo tol rtol=1e-4 atol=1e-5\n"
    "// kevo bytes 4*N+4\n"
    "// kevo launch ref_loss grid=1 block=1 (x, s, N)\n"
    "extern \"C\" __global__ void ref_loss(const float *x, float *s, int n) {}\n";

/* axpy whose outputs may vary run to run within the tolerance (float atomics). */
static const char TASK_AXPY_ATOMICS[] =
    "// kevo task axpy_atomics\n"
    "// kevo size N=1000\n"
    "// kevo input x f32[N] normal(0,1)\n"
    "// kevo input y f32[N] uniform(-1,1)\n"
    "// kevo output z f32[N]\n"
    "// kevo scalar alpha f32 2.5\n"
    "// kevo atomics\n"
    "// kevo bytes 12*N\n"
    "// kevo launch ref_axpy grid=cdiv(N,256) block=256 (x, y, z, alpha, N)\n"
    "extern \"C\" __global__ void ref_axpy(const float *x, const float *y, float *z,\n"
    "                                      float alpha, int n) {}\n";

/* A candidate launching KERNEL like the reference. */
static char cand_buf[512];
static const char *cand(const char *kernel)
{
    snprintf(cand_buf, sizeof cand_buf,
             "// kevo launch %s grid=cdiv(N,256) block=256 (x, y, z, alpha, N)\n"
             "extern \"C\" __global__ void %s(const float *x, const float *y, float *z,\n"
             "                                  float alpha, int n) {}\n", kernel, kernel);
    return cand_buf;
}

/* ---- kernels ---- */

struct kstate {
    int calls;
    int after;                   /* misbehave after this many calls */
    float *saved;                /* stale: the first result */
    int (*bad)(const struct kevo_val *a, int n, void *u);   /* late: what it turns into */
};

#define ARGS const struct kevo_val *a, int n, void *u
#define AXPY_VARS                                   \
    const float *x = FAKE_PTR(a, 0, const float);   \
    const float *y = FAKE_PTR(a, 1, const float);   \
    float *z = FAKE_PTR(a, 2, float);               \
    float al = (float)FAKE_FLT(a, 3);               \
    int64_t N = FAKE_INT(a, 4);                     \
    (void)n;                                        \
    (void)u

static int k_axpy(ARGS)
{
    AXPY_VARS;
    for (int64_t i = 0; i < N; i++)
        z[i] = al * x[i] + y[i];
    return 0;
}

/* Writes garbage wherever it finds its output already written (not the NaN poison): a
 * batch whose passes saw the previous pass's output would end in garbage. */
static int k_batch_skip(ARGS)
{
    AXPY_VARS;
    for (int64_t i = 0; i < N; i++)
        z[i] = z[i] == z[i] ? x[i] - y[i] : al * x[i] + y[i];
    return 0;
}

static int k_partial(ARGS)
{
    AXPY_VARS;
    for (int64_t i = 0; i < N - 1; i++)
        z[i] = al * x[i] + y[i];
    return 0;
}

static int k_oob_back(ARGS)
{
    k_axpy(a, n, u);
    FAKE_PTR(a, 2, float)[FAKE_INT(a, 4)] = 0.0f;
    return 0;
}

static int k_oob_front(ARGS)
{
    k_axpy(a, n, u);
    FAKE_PTR(a, 2, float)[-1] = 0.0f;
    return 0;
}

static int k_mutate(ARGS)
{
    AXPY_VARS;
    k_axpy(a, n, u);
    ((float *)(uintptr_t)x)[3] = 0.0f;
    (void)y;
    (void)z;
    (void)al;
    (void)N;
    return 0;
}

static int k_off1(ARGS)
{
    AXPY_VARS;
    for (int64_t i = 0; i < N; i++)
        z[i] = (al * x[i] + y[i]) * 1.01f;
    return 0;
}

static int k_nan(ARGS)
{
    k_axpy(a, n, u);
    FAKE_PTR(a, 2, float)[5] = NAN;
    return 0;
}

static int k_nondet(ARGS)
{
    struct kstate *s = u;
    AXPY_VARS;
    for (int64_t i = 0; i < N; i++)
        z[i] = al * x[i] + y[i] + (s->calls & 1 ? 0.5f : 0.0f);
    s->calls++;
    return 0;
}

/* Every other call a last-bit wobble (a different summation order): within tolerance. */
static int k_wobble(ARGS)
{
    struct kstate *s = u;
    AXPY_VARS;
    for (int64_t i = 0; i < N; i++)
        z[i] = (al * x[i] + y[i]) * (s->calls & 1 ? 1.0f + 1e-7f : 1.0f);
    s->calls++;
    return 0;
}

/* Computes once, then replays what it computed first (same size only). */
static int k_stale(ARGS)
{
    struct kstate *s = u;
    AXPY_VARS;
    if (!s->saved) {
        s->saved = kevo_malloc((size_t)N * sizeof *z);
        for (int64_t i = 0; i < N; i++)
            s->saved[i] = al * x[i] + y[i];
    }
    memcpy(z, s->saved, (size_t)N * sizeof *z);
    return 0;
}

static int k_hardcoded(ARGS)
{
    AXPY_VARS;
    for (int64_t i = 0; i < N; i++)
        z[i] = al * x[i % 1000] + y[i];
    return 0;
}

/* Right for the two visible sizes only. */
static int k_visible_only(ARGS)
{
    AXPY_VARS;
    for (int64_t i = 0; i < N; i++)
        z[i] = al * x[i] + y[i] + (N == 1000 || N == 4099 ? 0.0f : 1.0f);
    return 0;
}

/* Honest for `after` calls (all of verification), then wrong or lazy. */
static int k_phase_wrong(ARGS)
{
    struct kstate *s = u;
    AXPY_VARS;
    s->calls++;
    for (int64_t i = 0; i < N; i++)
        z[i] = al * x[i] + y[i] + (s->calls > s->after ? 0.25f : 0.0f);
    return 0;
}

static int k_phase_lazy(ARGS)
{
    struct kstate *s = u;
    if (++s->calls > s->after)
        return 0;
    return k_axpy(a, n, u);
}

/* Right, but from call `after` on it stashes y (the repeats after the last trial reuse its
 * inputs), computes from the stash and overwrites y[0]: its outputs never change, only
 * the inputs do. */
static int k_late_mutate(ARGS)
{
    struct kstate *s = u;
    AXPY_VARS;
    if (++s->calls < s->after)
        return k_axpy(a, n, u);
    if (!s->saved) {
        s->saved = kevo_malloc((size_t)N * sizeof *s->saved);
        memcpy(s->saved, y, (size_t)N * sizeof *s->saved);
    }
    for (int64_t i = 0; i < N; i++)
        z[i] = al * x[i] + s->saved[i];
    ((float *)(uintptr_t)y)[0] += 1.0f;
    return 0;
}

/* Honest for `after` calls, then as ks.bad. */
static int k_late(ARGS)
{
    struct kstate *s = u;
    if (++s->calls <= s->after)
        return k_axpy(a, n, u);
    return s->bad(a, n, u);
}

static int k_crash(ARGS) { (void)a; (void)n; (void)u; return KEVO_ERR_DEVICE; }
static int k_hang(ARGS) { (void)a; (void)n; (void)u; return KEVO_ERR_TIMEOUT; }
static int k_refuse(ARGS) { (void)a; (void)n; (void)u; return KEVO_ERR_LAUNCH; }

static int k_ref_offset(ARGS)
{
    const float *x = FAKE_PTR(a, 0, const float);
    float *z = FAKE_PTR(a, 1, float);
    (void)n;
    (void)u;
    for (int64_t i = 0; i < FAKE_INT(a, 2); i++)
        z[i] = 1000.0f + 0.01f * x[i];
    return 0;
}

static int k_const1000(ARGS)
{
    float *z = FAKE_PTR(a, 1, float);
    (void)n;
    (void)u;
    for (int64_t i = 0; i < FAKE_INT(a, 2); i++)
        z[i] = 1000.0f;
    return 0;
}

static int k_ref_loss(ARGS)
{
    const float *x = FAKE_PTR(a, 0, const float);
    double s = 0;
    (void)n;
    (void)u;
    for (int64_t i = 0; i < FAKE_INT(a, 2); i++)
        s += x[i];
    FAKE_PTR(a, 1, float)[0] = (float)(5.0 + 1e-6 * s);
    return 0;
}

static int k_const5(ARGS)
{
    (void)n;
    (void)u;
    FAKE_PTR(a, 1, float)[0] = 5.0f;
    return 0;
}

/* ---- fixture ---- */

struct fx {
    struct fake f;
    struct kevo_backend b;
    struct kstate ks;
    struct kevo_eval_req req;
    json_t *res;
};

static int fx_setup(void **state)
{
    struct fx *x = kevo_calloc(1, sizeof *x);
    fake_open(&x->f, &x->b);
    fake_register(&x->f, "ref_axpy", k_axpy, NULL, 1e-3);
    fake_register(&x->f, "ref_offset", k_ref_offset, NULL, 1e-3);
    fake_register(&x->f, "ref_loss", k_ref_loss, NULL, 1e-3);
    fake_register(&x->f, "good", k_axpy, NULL, 5e-4);
    fake_register(&x->f, "partial", k_partial, NULL, 0);
    fake_register(&x->f, "oob_back", k_oob_back, NULL, 0);
    fake_register(&x->f, "oob_front", k_oob_front, NULL, 0);
    fake_register(&x->f, "mutate", k_mutate, NULL, 0);
    fake_register(&x->f, "off1", k_off1, NULL, 0);
    fake_register(&x->f, "nan", k_nan, NULL, 0);
    fake_register(&x->f, "nondet", k_nondet, &x->ks, 0);
    fake_register(&x->f, "stale", k_stale, &x->ks, 0);
    fake_register(&x->f, "wobble", k_wobble, &x->ks, 0);
    fake_register(&x->f, "hardcoded", k_hardcoded, NULL, 0);
    fake_register(&x->f, "visible_only", k_visible_only, NULL, 1e-3);
    fake_register(&x->f, "phase_wrong", k_phase_wrong, &x->ks, 1e-3);
    fake_register(&x->f, "phase_lazy", k_phase_lazy, &x->ks, 1e-3);
    fake_register(&x->f, "late_mutate", k_late_mutate, &x->ks, 1e-3);
    fake_register(&x->f, "late", k_late, &x->ks, 1e-3);
    fake_register(&x->f, "crash", k_crash, NULL, 0);
    fake_register(&x->f, "hang", k_hang, NULL, 0);
    fake_register(&x->f, "refuse", k_refuse, NULL, 0);
    fake_register(&x->f, "const1000", k_const1000, NULL, 0);
    fake_register(&x->f, "const5", k_const5, NULL, 0);
    fake_register(&x->f, "too_fast", k_axpy, NULL, 1e-12);
    fake_register(&x->f, "batch_skip", k_batch_skip, NULL, 1e-6);
    x->req.task_path = "axpy.cu";
    x->req.task_text = TASK_AXPY;
    x->req.cand_path = "cand.cu";
    x->req.seed = 0x1234567890ull;
    x->req.trials = 3;
    x->req.time_cap_s = 0.5;
    *state = x;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *x = *state;
    json_decref(x->res);
    kevo_eval_cache_clear(&x->b);
    assert_int_equal(x->f.n_modules, 0);      /* every module freed once */
    x->b.ops->destroy(x->b.ctx);
    kevo_free(x->ks.saved);
    kevo_free(x);
    return 0;
}

/* Evaluate x->req; checks the status and that every buffer was freed. */
static json_t *run(struct fx *x, enum kevo_status want)
{
    json_decref(x->res);
    x->res = NULL;
    enum kevo_status st = kevo_eval_run(&x->b, &x->req, &x->res);
    if (st != want)
        fail_msg("status %s, want %s; message: %s", kevo_status_name(st), kevo_status_name(want),
                 json_string_value(json_object_get(x->res, "message")));
    assert_non_null(x->res);
    assert_int_equal(x->f.n_a, 0);
    assert_int_equal(x->f.stray, 0);
    return x->res;
}

static const char *verdict(json_t *r) { return json_string_value(json_object_get(r, "verdict")); }
static json_t *evd(json_t *r) { return json_object_get(r, "evidence"); }
static const char *evs(json_t *r, const char *k)
{
    return json_string_value(json_object_get(evd(r), k));
}
static json_int_t evi(json_t *r, const char *k)
{
    return json_integer_value(json_object_get(evd(r), k));
}

static void assert_verdict(json_t *r, const char *want)
{
    const char *v = verdict(r);
    if (!v || strcmp(v, want))
        fail_msg("verdict %s, want %s; message: %s", v ? v : "(none)", want,
                 json_string_value(json_object_get(r, "message")));
}

/* ---- verdicts ---- */

static void test_reference_ok_timed(void **state)
{
    struct fx *x = *state;
    x->req.timing = 1;
    x->req.sol.bw_bytes_per_s = 1e9;
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    json_t *w = json_object_get(r, "workloads");
    assert_int_equal(json_array_size(w), 2);
    json_t *w1 = json_array_get(w, 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(w1, "sizes"), "N")),
                     4099);
    json_t *t = json_object_get(w1, "time");
    assert_near(json_real_value(json_object_get(t, "median_s")), 1e-3, 1e-12);
    assert_true(json_integer_value(json_object_get(t, "count")) >= 10);
    assert_false(json_is_true(json_object_get(t, "capped")));
    assert_int_equal(json_integer_value(json_object_get(t, "batch")), 1);
    assert_true(json_integer_value(json_object_get(t, "sets")) >= 2);
    assert_near(json_real_value(json_object_get(t, "sm_clock_mhz")), 1500, 0);
    assert_near(json_real_value(json_object_get(w1, "gbps")), 12.0 * 4099 / 1e-3 / 1e9, 1e-9);
    assert_near(json_real_value(json_object_get(w1, "t_sol_s")), 12.0 * 4099 / 1e9, 1e-15);
    assert_near(json_real_value(json_object_get(w1, "sol_fraction")), 12.0 * 4099 / 1e9 / 1e-3,
                1e-9);
    json_t *res = json_array_get(json_object_get(r, "resources"), 0);
    assert_string_equal(json_string_value(json_object_get(res, "kernel")), "ref_axpy");
    assert_int_equal(json_integer_value(json_object_get(res, "blocks_per_sm")), 8);
    assert_int_equal(json_integer_value(json_object_get(res, "block")), 256);
    assert_non_null(strstr(json_string_value(json_object_get(r, "compile_log")), "compiled"));
}

static void test_candidate_speedup(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("good");
    x->req.timing = 1;
    x->req.time_reference = 1;
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    json_t *w0 = json_array_get(json_object_get(r, "workloads"), 0);
    assert_near(json_real_value(json_object_get(w0, "speedup")), 2.0, 1e-9);
    assert_near(json_real_value(json_object_get(json_object_get(w0, "ref_time"), "median_s")),
                1e-3, 1e-12);
}

static void test_unwritten(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("partial");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "unwritten");
    assert_string_equal(evs(r, "output"), "z");
    assert_int_equal(evi(r, "count"), 1);
    assert_int_equal(evi(r, "index"), 999);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(evd(r), "multi_index"),
                                                       0)), 999);
    assert_int_equal(evi(r, "workload"), 0);
}

static void test_out_of_bounds(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("oob_back");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "out_of_bounds");
    assert_string_equal(evs(r, "tensor"), "z");
    assert_string_equal(evs(r, "side"), "back");
    assert_int_equal(evi(r, "offset"), 0);
    x->req.cand_text = cand("oob_front");
    r = run(x, KEVO_OK);
    assert_verdict(r, "out_of_bounds");
    assert_string_equal(evs(r, "side"), "front");
    assert_int_equal(evi(r, "offset"), -4);
}

static void test_input_mutated(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("mutate");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "input_mutated");
    assert_string_equal(evs(r, "tensor"), "x");
    assert_int_equal(evi(r, "index"), 3);
    assert_string_equal(evs(r, "run"), "run A");
}

static void test_mismatch_1pct(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("off1");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "mismatch");
    json_t *e = evd(r);
    double got = json_real_value(json_object_get(e, "got"));
    double want = json_real_value(json_object_get(e, "want"));
    assert_near(got / want, 1.01, 1e-5);
    assert_true(json_integer_value(json_object_get(e, "n_bad")) > 900);
    assert_int_equal(json_integer_value(json_object_get(e, "n")), 1000);
    assert_near(json_real_value(json_object_get(e, "rel_l2")), 0.01, 1e-4);
    assert_near(json_real_value(json_object_get(e, "max_rel")), 0.01, 1e-4);
    assert_near(json_real_value(json_object_get(e, "rtol")), 1e-4, 1e-12);
    assert_non_null(json_object_get(e, "multi_index"));
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")), "z["));
}

static void test_mismatch_nan(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("nan");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "mismatch");
    assert_int_equal(evi(r, "index"), 5);
    assert_string_equal(evs(r, "got"), "nan");
    assert_int_equal(evi(r, "n_bad"), 1);
}

static void test_nondeterministic(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("nondet");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "nondeterministic");
    assert_int_equal(evi(r, "index"), 0);
    double a = json_real_value(json_object_get(evd(r), "a"));
    double b = json_real_value(json_object_get(evd(r), "b"));
    assert_near(b - a, 0.5, 1e-5);
}

/* With atomics, run B is judged against the reference, not bit for bit against run A. */
static void test_atomics(void **state)
{
    struct fx *x = *state;
    x->req.task_text = TASK_AXPY_ATOMICS;
    x->req.cand_text = cand("wobble");
    assert_verdict(run(x, KEVO_OK), "ok");
    x->req.task_text = TASK_AXPY;                          /* the same kernel, bitwise */
    assert_verdict(run(x, KEVO_OK), "nondeterministic");
    x->req.task_text = TASK_AXPY_ATOMICS;
    x->req.cand_text = cand("nondet");                     /* run B off by 0.5 */
    x->ks.calls = 0;               /* the repeats' number varies: start it on run A */
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "mismatch");
    assert_string_equal(evs(r, "message"), "run B");
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")), "run B: z["));
}

static void test_stale(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("stale");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "mismatch");
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")), "workload 0"));
}

static void test_hardcoded_shape(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("hardcoded");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "mismatch");
    assert_int_equal(evi(r, "workload"), 1);
    assert_int_equal(evi(r, "index"), 1000);
    json_t *w = json_object_get(r, "workloads");
    assert_string_equal(json_string_value(json_object_get(json_array_get(w, 0), "verdict")),
                        "ok");
}

static void test_degenerate_constant(void **state)
{
    struct fx *x = *state;
    x->req.task_text = TASK_OFFSET;
    x->req.cand_text = "// kevo launch const1000 grid=4 block=256 (x, z, N)\n";
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "degenerate");
    assert_string_equal(evs(r, "output"), "z");
    assert_near(json_real_value(json_object_get(evd(r), "value")), 1000.0, 0);
}

static void test_degenerate_small(void **state)
{
    struct fx *x = *state;
    x->req.task_text = TASK_LOSS;
    x->req.cand_text = "// kevo launch const5 grid=1 block=1 (x, s, N)\n";
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "degenerate");
    assert_non_null(strstr(evs(r, "reason"), "never changed"));
    x->req.cand_text = NULL;                   /* the reference itself passes */
    r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
}

static void test_phase_detection(void **state)
{
    struct fx *x = *state;
    x->req.timing = 1;
    x->ks.after = 2 * (2 * 3 + 32);            /* 2 workloads x (3 trials x runs A+B + at
                                                  most 32 repeats) */
    x->req.cand_text = cand("phase_wrong");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "mismatch");
    assert_string_equal(evs(r, "message"), "timed run output differs");
    assert_non_null(json_object_get(evd(r), "set"));

    x->ks.calls = 0;
    x->req.cand_text = cand("phase_lazy");     /* skips the work once timed */
    r = run(x, KEVO_OK);
    assert_verdict(r, "mismatch");
    assert_string_equal(evs(r, "message"), "timed run output differs");
    assert_string_equal(evs(r, "got"), "nan");  /* the poison it left */
}

/* After the last trial the candidate runs 8 to 32 more times on its inputs, each run
 * judged against run A: a difference that starts after the trials is nondeterministic,
 * with the repeat in the evidence; an input changed by a repeat is caught after the last. */
static void test_repeats(void **state)
{
    struct fx *x = *state;
    x->ks.after = INT_MAX;                     /* honest: count the calls */
    x->req.cand_text = cand("phase_wrong");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    assert_in_range(x->ks.calls, 2 * (6 + 8), 2 * (6 + 32));
    json_int_t n = 0;
    for (size_t w = 0; w < 2; w++) {
        json_int_t rw = json_integer_value(
            json_object_get(json_array_get(json_object_get(r, "workloads"), w), "repeats"));
        assert_in_range(rw, 8, 32);
        n += rw;
    }
    assert_int_equal(x->ks.calls, 2 * 6 + n);   /* every run the harness made is counted */

    x->ks.calls = 0;
    x->ks.after = 6;                           /* wrong from the first repeat on */
    r = run(x, KEVO_OK);
    assert_verdict(r, "nondeterministic");
    assert_int_equal(evi(r, "repeat"), 1);
    assert_int_equal(evi(r, "trial"), 2);
    assert_int_equal(evi(r, "workload"), 0);
    assert_near(json_real_value(json_object_get(evd(r), "b")) -
                json_real_value(json_object_get(evd(r), "a")), 0.25, 1e-6);

    x->ks.calls = 0;
    x->ks.after = 7;                           /* stashes y at the first repeat */
    x->req.cand_text = cand("late_mutate");
    r = run(x, KEVO_OK);
    assert_verdict(r, "input_mutated");
    assert_string_equal(evs(r, "tensor"), "y");
    assert_string_equal(evs(r, "run"), "repeats");
    assert_int_equal(evi(r, "trial"), 2);
    assert_null(json_object_get(evd(r), "repeat"));
}

/* A failure in a repeat is reported as in a trial, naming the repeat. */
static void test_repeat_failures(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("late");
    x->ks.after = 6;                           /* the 3 trials' runs A and B */
    x->ks.bad = k_partial;
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "unwritten");
    assert_string_equal(evs(r, "run"), "repeat 1");
    assert_int_equal(evi(r, "repeat"), 1);

    x->ks.calls = 0;
    x->ks.bad = k_oob_back;
    r = run(x, KEVO_OK);
    assert_verdict(r, "out_of_bounds");
    assert_string_equal(evs(r, "run"), "repeat 1");

    x->ks.calls = 0;
    x->ks.after = 8;
    x->ks.bad = k_crash;
    r = run(x, KEVO_ERR_DEVICE);
    assert_verdict(r, "crash");
    assert_string_equal(evs(r, "phase"), "repeat 3");
    assert_int_equal(evi(r, "repeat"), 3);
    assert_int_equal(evi(r, "trial"), 2);
    x->f.pending = 0;

    x->ks.calls = 0;
    x->ks.after = 6;
    x->ks.bad = k_off1;                        /* with atomics: judged against the reference */
    x->req.task_text = TASK_AXPY_ATOMICS;
    r = run(x, KEVO_OK);
    assert_verdict(r, "mismatch");
    assert_string_equal(evs(r, "message"), "repeat 1");
}

static void test_launch_errors(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = "// kevo launch good grid=cdiv(N,256) block=2048 (x, y, z, alpha, N)\n";
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "launch_error");
    assert_non_null(strstr(evs(r, "message"), "2048"));
    x->req.cand_text = cand("refuse");
    r = run(x, KEVO_OK);
    assert_verdict(r, "launch_error");
    /* A plan that only goes wrong at the holdout size, where grid.x = N-77 is 0 (the
     * parser checks plans against the visible sizes only). */
    x->req.cand_text = "// kevo launch good grid=N-77 block=256 (x, y, z, alpha, N)\n";
    r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    x->req.holdout = 1;
    r = run(x, KEVO_OK);
    assert_verdict(r, "holdout_fail");
    assert_string_equal(evs(r, "inner"), "launch_error");
    assert_non_null(strstr(evs(r, "message"), "grid.x = 0"));
    assert_int_equal(evi(r, "workload"), 2);
}

static void test_crash_timeout(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("crash");
    json_t *r = run(x, KEVO_ERR_DEVICE);
    assert_verdict(r, "crash");
    assert_non_null(strstr(evs(r, "message"), "illegal address"));
    x->f.pending = 0;
    x->req.cand_text = cand("hang");
    r = run(x, KEVO_ERR_DEVICE);
    assert_verdict(r, "timeout");
    x->f.pending = 0;
    x->f.fail_copy = 1;                        /* the context dies outside a launch */
    x->req.cand_text = cand("good");
    r = run(x, KEVO_ERR_DEVICE);
    assert_verdict(r, "crash");
}

static void test_implausible(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("too_fast");
    x->req.timing = 1;
    x->req.sol.bw_bytes_per_s = 1e12;
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "implausible");
    assert_near(json_real_value(json_object_get(evd(r), "t_sol_s")), 12000.0 / 1e12, 1e-18);
    assert_near(json_real_value(json_object_get(evd(r), "margin")), 0.03, 1e-12);
    json_t *t = json_object_get(json_array_get(json_object_get(r, "workloads"), 0), "time");
    assert_int_equal(json_integer_value(json_object_get(t, "batch")), 10000);
    /* the calibration's own margin (a CPU's figures bound less tightly) is honoured */
    x->req.sol.margin = 1e9;
    r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
}

/* Every pass of a timed batch starts from poison, so a kernel cannot notice the
 * previous pass's output (and the fills' time is taken out of the batch's). */
static void test_batch_passes_start_from_poison(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("batch_skip");
    x->req.timing = 1;
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    json_t *t = json_object_get(json_array_get(json_object_get(r, "workloads"), 0), "time");
    assert_true(json_integer_value(json_object_get(t, "batch")) > 1);
    assert_near(json_real_value(json_object_get(t, "median_s")), 1e-6, 1e-9);
}

static void test_compile_and_parse_errors(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = "// kevo launch good grid=cdiv(N,256) block=256 (x, y, z, alpha, N)\n"
                       "#error nope\n";
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "compile_error");
    assert_non_null(strstr(json_string_value(json_object_get(r, "compile_log")), "#error"));
    assert_non_null(strstr(evs(r, "log"), "#error"));
    x->req.cand_text = cand("no_such_kernel");
    r = run(x, KEVO_OK);
    assert_verdict(r, "compile_error");
    assert_non_null(strstr(evs(r, "log"), "no_such_kernel"));
    x->req.cand_text = "// kevo launch good grid=cdiv(N,256) block=256 (x, y, w, alpha, N)\n";
    r = run(x, KEVO_OK);
    assert_verdict(r, "compile_error");
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")), "cand.cu:1"));

    x->req.cand_text = NULL;
    x->req.task_text = "// kevo task broken\n// kevo size N=\n";
    r = run(x, KEVO_ERR_PARSE);
    assert_null(json_object_get(r, "verdict"));
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")), "axpy.cu:2"));
}

static void test_holdout(void **state)
{
    struct fx *x = *state;
    x->req.cand_text = cand("visible_only");
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    x->req.holdout = 1;
    r = run(x, KEVO_OK);
    assert_verdict(r, "holdout_fail");
    assert_string_equal(evs(r, "inner"), "mismatch");
    assert_ptr_equal(strstr(json_string_value(json_object_get(r, "message")), "holdout failed: "),
                     json_string_value(json_object_get(r, "message")));
    json_t *w = json_object_get(r, "workloads");
    assert_int_equal(json_array_size(w), 1);
    assert_true(json_is_true(json_object_get(json_array_get(w, 0), "holdout")));
    assert_int_equal(evi(r, "workload"), 2);
}

static void test_params_and_cache(void **state)
{
    struct fx *x = *state;
    const int64_t p[1] = { 512 };
    x->req.cand_text = "// kevo param T 128 256 512\n"
                       "// kevo launch good grid=cdiv(N,T) block=T (x, y, z, alpha, N)\n";
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    assert_int_equal(x->f.last_define, 128);            /* the default */
    x->req.params = p;
    x->req.n_params = 1;
    r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    assert_int_equal(x->f.last_define, 512);
    int compiles = x->f.n_compiles;
    r = run(x, KEVO_OK);                                /* reference and candidate cached */
    assert_int_equal(x->f.n_compiles, compiles);
    assert_true(kevo_eval_cache_count() >= 2);
    x->req.n_params = 2;
    r = run(x, KEVO_ERR_INVALID);
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")), "params"));
}

/* The cache keeps the last CACHE_SLOTS modules and frees the ones it drops. */
static void test_cache_eviction(void **state)
{
    struct fx *x = *state;
    char text[256];
    for (int i = 0; i < 12; i++) {
        snprintf(text, sizeof text,
                 "// kevo launch good grid=cdiv(N,256) block=256 (x, y, z, alpha, N)\n"
                 "// variant %d\n", i);
        x->req.cand_text = text;
        assert_verdict(run(x, KEVO_OK), "ok");
    }
    assert_int_equal(kevo_eval_cache_count(), 8);
    assert_int_equal(x->f.n_modules, 8);
    assert_int_equal(x->f.n_compiles, 13);           /* the reference once, 12 candidates */
}

/* The fake backend with room for at most `scratch_room` live buffers of the scratch's
 * size (the only buffers that large): the device the candidate's scratch fills. */
static const struct kevo_backend_ops *tight_real;
static size_t scratch_size;
static int scratch_room, scratch_live;
static uint64_t scratch_addr[8];

static enum kevo_status tight_alloc(void *ctx, size_t bytes, uint64_t *out)
{
    if (bytes >= scratch_size && scratch_live >= scratch_room) {
        *out = 0;
        return KEVO_ERR_NOMEM;
    }
    enum kevo_status st = tight_real->alloc(ctx, bytes, out);
    if (!st && bytes >= scratch_size)
        scratch_addr[scratch_live++] = *out;
    return st;
}

static void tight_free(void *ctx, uint64_t addr)
{
    for (int i = 0; addr && i < scratch_live; i++) {
        if (scratch_addr[i] == addr)
            scratch_addr[i] = scratch_addr[--scratch_live];
    }
    tight_real->free(ctx, addr);
}

/* A scratch the device holds once but not twice leaves no room for a second timing set:
 * the candidate's launch_error, never kevo's failure. Room for two of them only means
 * fewer timing sets. */
static void test_scratch_fills_device(void **state)
{
    static struct kevo_backend_ops ops;   /* static: the teardown may still use it */
    struct fx *x = *state;

    tight_real = x->b.ops;
    ops = *x->b.ops;
    ops.alloc = tight_alloc;
    ops.free = tight_free;
    x->b.ops = &ops;
    scratch_size = 64 * 4099 * 4;       /* tmp at the larger workload */
    scratch_room = 1;
    scratch_live = 0;
    x->req.cand_text = "// kevo scratch tmp f32[N*64]\n"
                       "// kevo launch good grid=cdiv(N,256) block=256 (x, y, z, alpha, N)\n";
    x->req.timing = 1;
    x->req.time_cap_s = 0.01;
    json_t *r = run(x, KEVO_OK);
    assert_verdict(r, "launch_error");
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")),
                           "cannot allocate scratch tmp (1049344 bytes) a second time, "
                           "for timing"));
    assert_string_equal(evs(r, "scratch"), "tmp");
    scratch_room = 2;
    r = run(x, KEVO_OK);
    assert_verdict(r, "ok");
    json_t *w1 = json_array_get(json_object_get(r, "workloads"), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(w1, "time"), "sets")), 2);
    assert_int_equal(scratch_live, 0);
    kevo_eval_cache_clear(&x->b);       /* the modules were cached under these ops */
    x->b.ops = tight_real;
}

/* A broken reference is kevo's error while judging a candidate, a verdict when it is the
 * one being evaluated. */
static void test_broken_reference(void **state)
{
    struct fx *x = *state;
    fake_register(&x->f, "ref_axpy", k_refuse, NULL, 0);
    x->req.cand_text = cand("good");
    json_t *r = run(x, KEVO_ERR_INVALID);
    assert_non_null(strstr(json_string_value(json_object_get(r, "message")), "reference"));
    x->req.cand_text = NULL;
    r = run(x, KEVO_OK);
    assert_verdict(r, "launch_error");
}

/* Every allocation failure on the way ends in a clean status: nothing leaks, no device
 * buffer is left behind (valgrind checks the host side). */
static void test_alloc_failures(void **state)
{
    struct fx *x = *state;
    int n_ok = 0;
    x->req.cand_text = cand("good");
    x->req.timing = 1;
    x->req.time_cap_s = 0.01;
    for (long n = 1; n <= 400; n++) {
        kevo_eval_cache_clear(&x->b);
        json_decref(x->res);
        x->res = NULL;
        kevo_mem_fail_after(n);
        enum kevo_status st = kevo_eval_run(&x->b, &x->req, &x->res);
        kevo_mem_fail_after(0);
        assert_int_equal(x->f.n_a, 0);
        assert_int_equal(x->f.stray, 0);
        if (st == KEVO_OK) {
            assert_non_null(x->res);
            n_ok++;
        } else {
            assert_true(st == KEVO_ERR_NOMEM || st == KEVO_ERR_INVALID || st == KEVO_ERR_PARSE);
            assert_true(st == KEVO_ERR_NOMEM || x->res);
        }
    }
    assert_true(n_ok > 0);                 /* past the last allocation it succeeds */
}

/* ---- on the real CPU backend ---- */

static const char TASK_CPU_ADD[] =
    "// kevo task cpu_add\n"
    "// kevo size N=1000\n"
    "// kevo size N=4099\n"
    "// kevo input x f32[N] normal(1,2)\n"
    "// kevo input y f32[N] uniform(-1,3)\n"
    "// kevo output z f32[N]\n"
    "// kevo bytes 12*N\n"
    "// kevo call add_ref(x, y, z, N)\n"
    "void add_ref(const float *x, const float *y, float *z, int n)\n"
    "{ for (int i = 0; i < n; i++) z[i] = x[i] + y[i]; }\n";

/* The same with one visible workload (the allocation sweep runs it hundreds of times). */
static const char TASK_CPU_ADD_ONE[] =
    "// kevo task cpu_add\n"
    "// kevo size N=1000\n"
    "// kevo holdout N=4099\n"
    "// kevo input x f32[N] normal(1,2)\n"
    "// kevo input y f32[N] uniform(-1,3)\n"
    "// kevo output z f32[N]\n"
    "// kevo bytes 12*N\n"
    "// kevo call add_ref(x, y, z, N)\n"
    "void add_ref(const float *x, const float *y, float *z, int n)\n"
    "{ for (int i = 0; i < n; i++) z[i] = x[i] + y[i]; }\n";

/* A scratch of 400 GB: sizes fine (under the 1 TiB cap), more than any arena (64 GiB). */
static const char CAND_CPU_HUGE_SCRATCH[] =
    "// kevo scratch tmp f32[N*100000000]\n"
    "// kevo call add(x, y, z, N)\n"
    "void add(const float *x, const float *y, float *z, int n)\n"
    "{ for (int i = 0; i < n; i++) z[i] = x[i] + y[i]; }\n";

static const char CAND_CPU_ADD[] =
    "// kevo scratch tmp f32[N]\n"
    "// kevo call add(x, y, z, tmp, N)\n"
    "void add(const float *x, const float *y, float *z, float *tmp, int n)\n"
    "{ for (int i = 0; i < n; i++) { tmp[i] = x[i]; z[i] = tmp[i] + y[i]; } }\n";

/* The CPU backend with its alloc/free counted, so a test can see every buffer freed. */
static const struct kevo_backend_ops *cpu_real;
static int cpu_live;

static enum kevo_status cpu_counted_alloc(void *ctx, size_t bytes, uint64_t *out)
{
    enum kevo_status st = cpu_real->alloc(ctx, bytes, out);
    cpu_live += st == KEVO_OK;
    return st;
}

static void cpu_counted_free(void *ctx, uint64_t addr)
{
    cpu_live -= addr != 0;
    cpu_real->free(ctx, addr);
}

struct cpu_fx {
    struct kevo_backend b;
    struct kevo_backend_ops ops;
    struct kevo_eval_req req;
    json_t *res;
};

static int cpu_setup(void **state)
{
    struct cpu_fx *x = kevo_calloc(1, sizeof *x);
    struct kevo_buf err;

    kevo_buf_init(&err, 1 << 16);
    if (!x || kevo_backend_open_cpu(&x->b, &err) != KEVO_OK) {
        print_message("no CPU backend: %s\n", kevo_buf_str(&err));
        kevo_buf_free(&err);
        kevo_free(x);
        return -1;
    }
    kevo_buf_free(&err);
    cpu_real = x->b.ops;
    cpu_live = 0;
    x->ops = *x->b.ops;
    x->ops.alloc = cpu_counted_alloc;
    x->ops.free = cpu_counted_free;
    x->b.ops = &x->ops;
    x->req.task_path = "cpu_add.c";
    x->req.task_text = TASK_CPU_ADD;
    x->req.cand_path = "cand.c";
    x->req.seed = 0x2468ace0ull;
    x->req.trials = 3;
    *state = x;
    return 0;
}

static int cpu_teardown(void **state)
{
    struct cpu_fx *x = *state;

    json_decref(x->res);
    kevo_eval_cache_clear(&x->b);
    x->b.ops = cpu_real;
    kevo_backend_close(&x->b);
    kevo_free(x);
    return 0;
}

/* A scratch larger than the device is the candidate's launch_error, naming the scratch
 * and its size; the worker lives on, and the next candidate is evaluated as usual. */
static void test_cpu_huge_scratch(void **state)
{
    struct cpu_fx *x = *state;

    x->req.cand_text = CAND_CPU_HUGE_SCRATCH;
    assert_int_equal(kevo_eval_run(&x->b, &x->req, &x->res), KEVO_OK);
    assert_verdict(x->res, "launch_error");
    assert_string_equal(evs(x->res, "scratch"), "tmp");
    assert_true(evi(x->res, "bytes") == 400000000000ll);
    assert_non_null(strstr(json_string_value(json_object_get(x->res, "message")),
                           "cannot allocate scratch tmp"));
    assert_int_equal(cpu_live, 0);
    json_decref(x->res);
    x->req.cand_text = CAND_CPU_ADD;
    x->req.timing = 1;
    x->req.time_cap_s = 0.01;
    assert_int_equal(kevo_eval_run(&x->b, &x->req, &x->res), KEVO_OK);
    assert_verdict(x->res, "ok");
    assert_int_equal(cpu_live, 0);
}

/* Did the failure armed with kevo_mem_fail_after(n) fire? Not if one of the next n
 * allocations fails instead: the run then made fewer than n. */
static int injected_fired(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = kevo_malloc(1);
        if (!p)
            return 0;
        kevo_free(p);
    }
    return 1;
}

/* Fail each host allocation of x->req's evaluation in turn, jansson's included (the
 * compiled modules stay cached after the first success, as in a worker), until a run makes
 * fewer allocations than the one failed: every run ends in a clean out-of-memory status or
 * in verdict ok (the evaluated code is correct, so any other verdict would blame it for
 * kevo's failure), and no device buffer is left behind. Returns the failed runs. */
static int cpu_sweep(struct cpu_fx *x)
{
    enum kevo_status st = KEVO_ERR_NOMEM;
    int n_fail = 0, fired = 1;

    json_set_alloc_funcs(kevo_malloc, kevo_free);
    for (long n = 1; n <= 5000 && fired; n++) {
        json_decref(x->res);
        x->res = NULL;
        kevo_mem_fail_after(n);
        st = kevo_eval_run(&x->b, &x->req, &x->res);
        fired = injected_fired(n);
        kevo_mem_fail_after(0);
        assert_int_equal(cpu_live, 0);
        if (st == KEVO_OK) {
            assert_non_null(x->res);
            assert_verdict(x->res, "ok");
        } else if (st != KEVO_ERR_NOMEM) {
            json_set_alloc_funcs(malloc, free);
            fail_msg("allocation %ld: status %s, message %s", n, kevo_status_name(st),
                     json_string_value(json_object_get(x->res, "message")));
        }
        n_fail += st != KEVO_OK;
    }
    json_set_alloc_funcs(malloc, free);
    assert_false(fired);            /* the sweep got past the last allocation ... */
    assert_int_equal(st, KEVO_OK);  /* ... where the evaluation succeeds */
    return n_fail;
}

/* The sweep over a candidate's evaluation with timing, then over the reference's own
 * evaluation with a dump. make asan checks that no host memory leaks on the way. */
static void test_cpu_alloc_failures(void **state)
{
    struct cpu_fx *x = *state;
    char dir[64];

    x->req.task_text = TASK_CPU_ADD_ONE;
    x->req.cand_text = CAND_CPU_ADD;
    x->req.timing = 1;
    x->req.time_cap_s = 0.005;
    assert_true(cpu_sweep(x) > 50);     /* many allocations really were failed on the way */
    (void)test_scratch(dir, sizeof dir, "evaldump");
    assert_true(dir[0]);
    x->req.cand_text = NULL;
    x->req.timing = 0;
    x->req.dump_dir = dir;
    assert_true(cpu_sweep(x) > 20);
    assert_int_equal(test_scratch_remove(dir), 0);
}

/* ---- the request decoder ---- */

static void test_req_from_json(void **state)
{
    (void)state;
    struct kevo_eval_req q;
    char *msg = NULL;
    json_t *j = json_pack("{s:s, s:s, s:s, s:[i,i], s:s, s:i, s:i, s:b, s:f, s:i, s:i, s:f, "
                          "s:{s:f, s:{s:f, s:f}, s:f, s:f}}",
                          "task_path", "t.cu", "task_text", "T", "cand_text", "C",
                          "params", 3, 4, "seed", "18446744073709551615", "trials", 1,
                          "holdout", 1, "timing", 0, "time_cap_s", 1.5, "time_reference", 1,
                          "profile", 1, "profile_below_s", 4e-5,
                          "sol", "bw", 3e12, "peaks", "fp32", 6e13, "bf16", 9e14,
                          "launch_floor_s", 2e-6, "launch_gap_s", 1.2e-6);
    assert_int_equal(kevo_eval_req_from_json(j, &q, &msg), KEVO_OK);
    assert_null(msg);
    assert_string_equal(q.task_text, "T");
    assert_string_equal(q.cand_text, "C");
    assert_string_equal(q.cand_path, "candidate");
    assert_int_equal(q.n_params, 2);
    assert_int_equal(q.params[1], 4);
    assert_true(q.seed == UINT64_MAX);
    assert_int_equal(q.trials, 3);                     /* never below the protocol's floor */
    assert_int_equal(q.holdout, 1);
    assert_int_equal(q.timing, 0);
    assert_int_equal(q.time_reference, 1);
    assert_near(q.time_cap_s, 1.5, 0);
    assert_near(q.sol.bw_bytes_per_s, 3e12, 0);
    assert_near(q.sol.peak_flops[KEVO_UNIT_BF16], 9e14, 0);
    assert_near(q.sol.peak_flops[KEVO_UNIT_FP32], 6e13, 0);
    assert_near(q.sol.launch_floor_s, 2e-6, 0);
    assert_int_equal(q.profile, 1);
    assert_near(q.profile_below_s, 4e-5, 0);
    assert_near(q.sol.launch_gap_s, 1.2e-6, 0);
    json_decref(j);

    static const char *const bad[] = {
        "{\"seed\":\"1\"}",
        "{\"task_text\":\"T\"}",
        "{\"task_text\":\"T\",\"seed\":\"12a\"}",
        "{\"task_text\":\"T\",\"seed\":\"18446744073709551616\"}",
        "{\"task_text\":\"T\",\"seed\":\"1\",\"params\":[1.5]}",
        "{\"task_text\":\"T\",\"seed\":\"1\",\"trials\":1000}",
        "{\"task_text\":\"T\",\"seed\":\"1\",\"time_cap_s\":-1}",
        "{\"task_text\":\"T\",\"seed\":\"1\",\"sol\":{\"bw\":\"x\"}}",
        "{\"task_text\":\"T\",\"seed\":\"1\",\"cand_text\":5}",
        "{\"task_text\":\"T\",\"seed\":\"1\",\"profile\":\"yes\"}",
        "{\"task_text\":\"T\",\"seed\":\"1\",\"profile_below_s\":-1}",
        "{\"task_text\":\"T\",\"seed\":\"1\",\"sol\":{\"launch_gap_s\":\"x\"}}",
        "[1]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *b = json_loads(bad[i], 0, NULL);
        assert_non_null(b);
        assert_int_equal(kevo_eval_req_from_json(b, &q, &msg), KEVO_ERR_INVALID);
        assert_non_null(msg);
        kevo_free(msg);
        msg = NULL;
        json_decref(b);
    }
    j = json_pack("{s:s, s:I}", "task_text", "T", "seed", (json_int_t)77);
    assert_int_equal(kevo_eval_req_from_json(j, &q, &msg), KEVO_OK);
    assert_true(q.seed == 77);
    assert_int_equal(q.timing, 1);
    assert_int_equal(q.profile, 0);
    assert_null(q.cand_text);
    json_decref(j);
}

#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_reference_ok_timed),
        T(test_candidate_speedup),
        T(test_unwritten),
        T(test_out_of_bounds),
        T(test_input_mutated),
        T(test_mismatch_1pct),
        T(test_mismatch_nan),
        T(test_nondeterministic),
        T(test_atomics),
        T(test_stale),
        T(test_hardcoded_shape),
        T(test_degenerate_constant),
        T(test_degenerate_small),
        T(test_phase_detection),
        T(test_repeats),
        T(test_repeat_failures),
        T(test_launch_errors),
        T(test_crash_timeout),
        T(test_implausible),
        T(test_batch_passes_start_from_poison),
        T(test_compile_and_parse_errors),
        T(test_holdout),
        T(test_params_and_cache),
        T(test_cache_eviction),
        T(test_scratch_fills_device),
        T(test_broken_reference),
        T(test_alloc_failures),
        cmocka_unit_test_setup_teardown(test_cpu_huge_scratch, cpu_setup, cpu_teardown),
        cmocka_unit_test_setup_teardown(test_cpu_alloc_failures, cpu_setup, cpu_teardown),
        cmocka_unit_test(test_req_from_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

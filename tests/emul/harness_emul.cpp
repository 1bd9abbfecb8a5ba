/*
 * harness_emul - the verification kernels of kernels/harness.cu, compiled for the host
 * (cuda_host.h) and run against their oracle, src/verify.c, so that a machine without a
 * GPU (CI) checks their logic: the generator (every dtype and kind, bit for bit: on the
 * host even normal inputs must match, as log/cos/sin are the same glibc calls), the check
 * mode's smallest index, sealing, and the judge (per-thread rules, the block tree, then the
 * backend's own host merge, kevo_backend_cuda_judge_merge) on the crafted cases of
 * tests/unit/judge_cases.h. CUDA's math library and NVRTC's code generation are not
 * covered: test_backend_cuda does that on a GPU (make gpu-test).
 *
 * Build: make test builds it with $(CXX) -std=c++20 (std::barrier), -ffp-contract=off.
 */
#include "cuda_host.h"
#define KEVO_HARNESS_ON_HOST 1
#include "harness.cu"

extern "C" {
#include "worker/backend_cuda.h"
#include "core/dtype_conv.h"
#include "core/verify.h"
}
#include "judge_cases.h"

#include <cstdio>

static_assert(sizeof(kv_part) == sizeof(struct kevo_judge_part), "kv_part layout");

static int fails;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            fails++;                                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);               \
            printf(__VA_ARGS__);                                      \
            printf("\n");                                             \
        }                                                             \
    } while (0)

/* The check mode of kevo_harness_gen: the smallest differing index, or ~0. */
static unsigned long long emul_check(const kevo_gen &g, uint64_t key, const void *buf, int64_t n)
{
    unsigned long long first = ~0ull;
    launch(3, 64, [&] {
        kevo_harness_gen(nullptr, buf, &first, g.dtype, g.kind, g.a, g.b, g.lo, g.hi, key, n);
    });
    return first;
}

/* Device generator vs kevo_verify_generate, then the check mode on its output. */
static void gen_case(kevo_gen g, int64_t n)
{
    const size_t esz = kevo_dtype_size(g.dtype);
    std::vector<unsigned char> h(n * esz), d(n * esz);
    const uint64_t key = kevo_verify_stream_key(0x5EED, 7);
    int64_t bad = -1;

    kevo_verify_generate(&g, 0x5EED, 7, h.data(), n);
    launch(3, 64, [&] {
        kevo_harness_gen(d.data(), nullptr, nullptr, g.dtype, g.kind, g.a, g.b, g.lo, g.hi, key, n);
    });
    for (int64_t i = 0; i < n && bad < 0; i++)
        bad = kevo_dt_bits(g.dtype, d.data(), i) != kevo_dt_bits(g.dtype, h.data(), i) ? i : -1;
    CHECK(bad < 0, "gen %s kind %d (%g, %g | %lld, %lld): element %lld differs",
          kevo_dtype_name(g.dtype), (int)g.kind, g.a, g.b, (long long)g.lo, (long long)g.hi,
          (long long)bad);
    CHECK(emul_check(g, key, d.data(), n) == ~0ull, "check of an intact %s",
          kevo_dtype_name(g.dtype));
    for (int64_t f : {n - 1, n / 3, (int64_t)2}) {
        d[f * esz] ^= 1;
        CHECK(emul_check(g, key, d.data(), n) == (unsigned long long)f, "check of %s flip %lld",
              kevo_dtype_name(g.dtype), (long long)f);
    }
}

static void test_gen()
{
    const kevo_gen fl[] = {
        {KEVO_INIT_NORMAL, KEVO_F32, 0, 1, 0, 0},      {KEVO_INIT_NORMAL, KEVO_F32, 2, 0.5, 0, 0},
        {KEVO_INIT_NORMAL, KEVO_F32, 0, 3e4, 0, 0},    {KEVO_INIT_UNIFORM, KEVO_F32, -1, 1, 0, 0},
        {KEVO_INIT_UNIFORM, KEVO_F32, -1e6, 1e6, 0, 0},
        {KEVO_INIT_UNIFORM, KEVO_F32, -1e-6, 1e-6, 0, 0},
        {KEVO_INIT_RANDINT, KEVO_F32, 0, 0, -1000, 1000},
        {KEVO_INIT_RANDINT, KEVO_F32, 0, 0, -(1ll << 62), 1ll << 62},
    };
    const kevo_gen in[] = {
        {KEVO_INIT_RANDINT, KEVO_I32, 0, 0, -1000, 1000},
        {KEVO_INIT_RANDINT, KEVO_I32, 0, 0, INT64_MIN / 2, INT64_MAX / 2},
        {KEVO_INIT_UNIFORM, KEVO_I32, -300.5, 300.5, 0, 0},
        {KEVO_INIT_NORMAL, KEVO_I32, 0, 100, 0, 0},
    };
    for (int d = 0; d < JC_N_DTYPES; d++) {
        const bool f = kevo_dtype_is_float(JC_DTYPES[d]);
        const kevo_gen *set = f ? fl : in;
        const size_t cnt = f ? sizeof fl / sizeof fl[0] : sizeof in / sizeof in[0];
        for (size_t c = 0; c < cnt; c++) {
            kevo_gen g = set[c];
            g.dtype = JC_DTYPES[d];
            gen_case(g, 10001);
        }
    }
}

static void test_seal()
{
    const int64_t n = 1001;
    for (int d = 0; d < JC_N_DTYPES; d++) {
        const kevo_dtype dt = JC_DTYPES[d];
        const int esz = (int)kevo_dtype_size(dt);
        std::vector<unsigned char> h(n * esz), dv;
        for (size_t i = 0; i < h.size(); i++)
            h[i] = (unsigned char)(kevo_verify_mix64(i) >> 13);
        dv = h;
        kevo_verify_seal(dt, h.data(), n, 0xC0FFEEull);
        launch(2, 64, [&] { kevo_harness_seal(dv.data(), esz, 0xC0FFEEull, n); });
        CHECK(h == dv, "seal %s", kevo_dtype_name(dt));
    }
}

static bool same_double(double x, double y)
{
    return (x == y && std::signbit(x) == std::signbit(y)) || (std::isnan(x) && std::isnan(y));
}

/* The device judge of one crafted case (kernel, then the backend's merge) vs the host. */
static void judge_case(kevo_dtype dt, int64_t n, int variant, bool with_b)
{
    const size_t bytes = n * kevo_dtype_size(dt) + 1;
    std::vector<unsigned char> a(bytes), b(bytes), ref(bytes), sealed;
    kevo_judge_req rq = jc_req(dt, n);
    kevo_judge_res want, got;

    jc_craft(dt, n, variant, a.data(), b.data(), ref.data());
    kevo_verify_judge(&rq, a.data(), with_b ? b.data() : nullptr, ref.data(), &want);
    sealed = ref;
    kevo_verify_seal(dt, sealed.data(), n, rq.ref_key);
    int64_t g = (n + 4095) / 4096;   /* backend_cuda.c: JUDGE_PER_BLOCK, JUDGE_MAX_BLOCKS */
    g = g < 1 ? 1 : g > 1024 ? 1024 : g;
    const int64_t chunk = (n + g - 1) / g;
    std::vector<kv_part> parts(g);
    launch((unsigned)g, KV_THREADS, [&] {
        kevo_harness_judge(a.data(), with_b ? b.data() : nullptr, sealed.data(), parts.data(), dt,
                          n, rq.ref_key, rq.rtol, rq.atol, rq.pe_a, rq.pe_b, chunk);
    });
    std::vector<kevo_judge_part> hp(g);
    memcpy(hp.data(), parts.data(), g * sizeof(kv_part));
    kevo_backend_cuda_judge_merge(&rq, hp.data(), g, &got);
    /* judge_values' part: got/want at the reported index, hashes of small outputs */
    const int64_t at = got.cmp.first_bad >= 0 ? got.cmp.first_bad : got.cmp.worst;
    if (at >= 0) {
        got.cmp.got = kevo_dt_load(dt, a.data(), at);
        got.cmp.want = kevo_dt_load(dt, ref.data(), at);
    }
    if (n <= KEVO_VERIFY_SMALL) {
        got.hash_a = kevo_verify_hash(a.data(), n * kevo_dtype_size(dt));
        got.hash_ref = kevo_verify_hash(ref.data(), n * kevo_dtype_size(dt));
    }
    const kevo_cmp &G = got.cmp, &W = want.cmp;
    const char *nm = kevo_dtype_name(dt);
    CHECK(G.n == W.n && G.n_bad == W.n_bad && G.first_bad == W.first_bad && G.worst == W.worst,
          "%s n=%lld variant %d: n_bad %lld/%lld first %lld/%lld worst %lld/%lld", nm,
          (long long)n, variant, (long long)G.n_bad, (long long)W.n_bad, (long long)G.first_bad,
          (long long)W.first_bad, (long long)G.worst, (long long)W.worst);
    CHECK(same_double(G.got, W.got) && same_double(G.want, W.want) &&
              same_double(G.max_abs, W.max_abs) && same_double(G.max_rel, W.max_rel),
          "%s n=%lld variant %d: got/want/max_abs/max_rel", nm, (long long)n, variant);
    CHECK(std::fabs(G.rel_l2 - W.rel_l2) <= 1e-12 * std::fabs(W.rel_l2) &&
              std::fabs(G.ref_norm - W.ref_norm) <= 1e-12 * std::fabs(W.ref_norm),
          "%s n=%lld variant %d: rel_l2 %.17g/%.17g", nm, (long long)n, variant, G.rel_l2,
          W.rel_l2);
    CHECK(G.l2_fail == W.l2_fail && G.pass == W.pass, "%s variant %d: l2_fail/pass", nm, variant);
    CHECK(got.unw_a == want.unw_a && got.unw_a_first == want.unw_a_first &&
              got.unw_b == want.unw_b && got.unw_b_first == want.unw_b_first &&
              got.diff_first == want.diff_first,
          "%s n=%lld variant %d: unwritten/diff", nm, (long long)n, variant);
    CHECK(got.a_constant == want.a_constant && got.ref_spread == want.ref_spread &&
              got.hash_a == want.hash_a && got.hash_ref == want.hash_ref,
          "%s n=%lld variant %d: constant/spread/hashes", nm, (long long)n, variant);
}

static void test_judge()
{
    for (int d = 0; d < JC_N_DTYPES; d++) {
        for (int v = 0; v < JC_N_VARIANTS; v++)
            judge_case(JC_DTYPES[d], 20011, v, true);
        judge_case(JC_DTYPES[d], 20011, JC_MIXED, false);
        judge_case(JC_DTYPES[d], 3, JC_MIXED, true);
        judge_case(JC_DTYPES[d], 1, JC_EXACT, true);
        judge_case(JC_DTYPES[d], 0, JC_EXACT, true);
    }
    judge_case(KEVO_F32, 300001, JC_MIXED, true);   /* 74 blocks */
}

int main()
{
    test_gen();
    test_seal();
    test_judge();
    printf("harness_emul: %s (%d failure%s)\n", fails ? "FAILED" : "all checks passed", fails,
           fails == 1 ? "" : "s");
    return fails != 0;
}

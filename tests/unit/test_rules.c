/*
 * test_rules - the static launch rules both `kevo check` and the evaluator apply
 * (core/rules.h): an integer argument against its parameter's declared type under every
 * workload (C by range, CUDA by size), a candidate's param combinations, tensors to
 * pointers, CUDA's grid, block and shared-memory limits, the 1 TiB tensor cap; types kevo
 * does not know are not judged; messages name the file and line; out of memory is clean.
 */
#include "testutil.h"

#include "base/mem.h"
#include "core/rules.h"
#include "core/task.h"

#include <string.h>

#define CPU_TASK "// kevo task t\n"                                           \
                 "// kevo size N=1000\n"                                      \
                 "// kevo holdout N=4000000\n"                                \
                 "// kevo input x f32[N] normal(0,1)\n"                       \
                 "// kevo output z f32[N]\n"                                  \
                 "// kevo scalar big i64 5000000000\n"                        \
                 "// kevo bytes 8*N\n"                                        \
                 "// kevo call ref(x, z, N)\n"                                \
                 "void ref(const float *x, float *z, int n) {}\n"

#define CUDA_TASK "// kevo task t\n"                                          \
                  "// kevo size N=1000\n"                                     \
                  "// kevo input x f32[N] normal(0,1)\n"                      \
                  "// kevo output z f32[N]\n"                                 \
                  "// kevo bytes 8*N\n"                                       \
                  "// kevo launch ref grid=4 block=256 (x, z, N)\n"           \
                  "extern \"C\" __global__ void ref(const float *x, float *z, int n) {}\n"

/* kevo_rules_check of cand (NULL: the task itself) against task; NULL when it passes,
 * else the message (caller frees). */
static char *check(const char *path, const char *task_text, const char *cand_text)
{
    struct kevo_task *t = NULL, *c = NULL;
    char *msg = NULL;
    const char *cpath = strstr(path, ".cu") ? "cand.cu" : "cand.c";

    if (kevo_task_parse(path, task_text, strlen(task_text), &t, &msg) != KEVO_OK)
        fail_msg("task: %s", msg);
    if (cand_text &&
        kevo_candidate_parse(t, cpath, cand_text, strlen(cand_text), &c, &msg) != KEVO_OK)
        fail_msg("candidate: %s", msg);
    enum kevo_status st = kevo_rules_check(t, c, &msg);
    kevo_task_free(c);
    kevo_task_free(t);
    assert_true(st == KEVO_OK || st == KEVO_ERR_INVALID);
    assert_true((st == KEVO_OK) == (msg == NULL));
    return msg;
}

static void expect_ok(const char *path, const char *task, const char *cand)
{
    char *m = check(path, task, cand);
    if (m)
        fail_msg("refused: %s", m);
}

static void expect_bad(const char *path, const char *task, const char *cand, const char *want)
{
    char *m = check(path, task, cand);
    if (!m || !strstr(m, want))
        fail_msg("got '%s', want '%s'", m ? m : "(ok)", want);
    kevo_free(m);
}

/* The case of issue 12: N*10000000 passed to an int, with file and line. */
static void test_cpu_int_width(void **state)
{
    (void)state;
    expect_bad("t.c", CPU_TASK, "// kevo call vadd(x, z, N*10000000)\n"
                                "void vadd(const float *x, float *z, int n) {}\n",
               "cand.c:1: error: call of 'vadd': argument 3 (N*10000000 = 10000000000) does "
               "not fit parameter 3 of 'vadd', 'int' (-2147483648..2147483647) for the workload "
               "at line 2 of t.c");
    /* the same value fits a long, a size_t, an int64_t; N alone fits an int */
    expect_ok("t.c", CPU_TASK, "// kevo call vadd(x, z, N*10000000)\n"
                               "void vadd(const float *x, float *z, long n) {}\n");
    expect_ok("t.c", CPU_TASK, "#include <stddef.h>\n// kevo call vadd(x, z, N*10000000)\n"
                               "void vadd(const float *x, float *z, const size_t n) {}\n");
    expect_ok("t.c", CPU_TASK, "#include <stdint.h>\n// kevo call vadd(x, z, N*10000000)\n"
                               "void vadd(const float *x, float *z, int64_t n) {}\n");
    expect_ok("t.c", CPU_TASK, "// kevo call vadd(x, z, N)\n"
                               "void vadd(const float *x, float *z, int n) {}\n");
    /* an integer scalar is checked too; a float parameter takes any integer in C */
    expect_bad("t.c", CPU_TASK, "// kevo call vadd(x, z, big)\n"
                                "void vadd(const float *x, float *z, unsigned n) {}\n",
               "argument 3 (big = 5000000000) does not fit parameter 3 of 'vadd', 'unsigned' "
               "(0..4294967295)");
    expect_ok("t.c", CPU_TASK, "// kevo call vadd(x, z, N*10000000)\n"
                               "void vadd(const float *x, float *z, double n) {}\n");
}

/* C types by their range; what kevo cannot read is left to the backend. */
static void test_cpu_types(void **state)
{
    (void)state;
    expect_bad("t.c", CPU_TASK, "// kevo call f(x, z, N-1001)\n"
                                "void f(const float *x, float *z, unsigned int n) {}\n",
               "argument 3 (N-1001 = -1) does not fit parameter 3 of 'f', 'unsigned int' "
               "(0..4294967295)");
    expect_bad("t.c", CPU_TASK, "// kevo call f(x, z, N/500)\n"
                                "void f(const float *x, float *z, _Bool b) {}\n",
               "(N/500 = 2) does not fit parameter 3 of 'f', '_Bool' (0..1)");
    expect_bad("t.c", CPU_TASK, "// kevo call f(x, z, N/5)\n"
                                "void f(const float *x, float *z, signed char c) {}\n",
               "(N/5 = 200) does not fit parameter 3 of 'f', 'signed char' (-128..127)");
    /* plain char: the compiler picks its signedness, so either range is accepted */
    expect_ok("t.c", CPU_TASK, "// kevo call f(x, z, N/5)\n"
                               "void f(const float *x, float *z, char c) {}\n");
    expect_bad("t.c", CPU_TASK, "// kevo call f(x, z, N*70)\n"
                                "void f(const float *x, float *z, unsigned short s) {}\n",
               "(N*70 = 70000) does not fit parameter 3 of 'f', 'unsigned short' (0..65535)");
    expect_ok("t.c", CPU_TASK, "// kevo call f(x, z, N*4000000)\n"
                               "void f(const float *x, float *z, long long unsigned int n) {}\n");
    /* a typedef of the file's own is not judged (the CPU backend knows its width) */
    expect_ok("t.c", CPU_TASK, "typedef short idx;\n// kevo call f(x, z, N*10000000)\n"
                               "void f(const float *x, float *z, idx n) {}\n");
    /* count and pointers */
    expect_bad("t.c", CPU_TASK, "// kevo call f(x, z)\n"
                                "void f(const float *x, float *z, int n) {}\n",
               "cand.c:1: error: call of 'f': the launch passes 2 arguments, 'f' takes 3 "
               "(line 2)");
    expect_bad("t.c", CPU_TASK, "// kevo call f(x, N, z)\n"
                                "void f(const float *x, float *z, int n) {}\n",
               "argument 2 ('N', not a tensor) goes to parameter 2 of 'f', 'float *', which is "
               "a pointer");
    expect_bad("t.c", CPU_TASK, "// kevo call f(x, z, x)\n"
                                "void f(const float *x, float *z, int n) {}\n",
               "argument 3 (tensor x) goes to parameter 3 of 'f', 'int', which is not a "
               "pointer");
    /* a function kevo cannot find (made by a macro) is left to the backend */
    expect_ok("t.c", CPU_TASK, "#define MAKE(n) void n(const float *x, float *z, short k) {}\n"
                               "// kevo call g(x, z, N*10000000)\nMAKE(g)\n");
}

/* A task is checked at its holdouts too; a candidate at the visible sizes only. */
static void test_task_and_holdout(void **state)
{
    (void)state;
    expect_ok("t.c", CPU_TASK, NULL);
    expect_bad("t.c", "// kevo task t\n// kevo size N=100\n// kevo holdout N=1000\n"
                      "// kevo input x f32[N] normal(0,1)\n// kevo output z f32[N]\n"
                      "// kevo bytes 8*N\n// kevo call ref(x, z, N*N)\n"
                      "void ref(const float *x, float *z, unsigned short n) {}\n", NULL,
               "t.c:7: error: call of 'ref': argument 3 (N*N = 1000000) does not fit "
               "parameter 3 of 'ref', 'unsigned short' (0..65535) for the workload at line 3");
    /* N*1000 overflows an int only at the holdout (4e9): no message may reveal it */
    expect_ok("t.c", CPU_TASK, "// kevo call f(x, z, N*1000)\n"
                               "void f(const float *x, float *z, int n) {}\n");
}

/* Every param combination a candidate is checked with, named in the message. */
static void test_params(void **state)
{
    (void)state;
    expect_bad("t.c", CPU_TASK, "// kevo param B 1 64 10000000\n// kevo call f(x, z, N*B)\n"
                                "void f(const float *x, float *z, int n) {}\n",
               "for the workload at line 2 of t.c with B=10000000");
    expect_ok("t.c", CPU_TASK, "// kevo param B 1 64 1000\n// kevo call f(x, z, N*B)\n"
                               "void f(const float *x, float *z, int n) {}\n");
}

/* CUDA: integers by their parameter's size as signed values (as the backend passes them),
 * and the grid, block and shared-memory limits of every GPU. */
static void test_cuda(void **state)
{
    (void)state;
    expect_bad("t.cu", CUDA_TASK, "// kevo launch k grid=4 block=256 (x, z, N*10000000)\n"
               "extern \"C\" __global__ void k(const float *x, float *z, int n) {}\n",
               "cand.cu:1: error: launch of 'k': argument 3 (N*10000000 = 10000000000) does not "
               "fit parameter 3 of 'k', 'int' (-2147483648..2147483647, by its size as a signed "
               "value) for the workload at line 2 of t.cu");
    expect_bad("t.cu", CUDA_TASK, "// kevo launch k grid=4 block=256 (x, z, N*3000000)\n"
               "extern \"C\" __global__ void k(const float *x, float *z, unsigned n) {}\n",
               "(N*3000000 = 3000000000) does not fit parameter 3 of 'k', 'unsigned'");
    expect_ok("t.cu", CUDA_TASK, "// kevo launch k grid=4 block=256 (x, z, N*10000000)\n"
              "extern \"C\" __global__ void k(const float *__restrict__ x, float *z, "
              "long long n) {}\n");
    expect_bad("t.cu", CUDA_TASK, "// kevo launch k grid=4 block=2048 (x, z, N)\n"
               "extern \"C\" __global__ void k(const float *x, float *z, int n) {}\n",
               "cand.cu:1: error: launch of 'k': block.x = 2048 is outside 1..1024");
    expect_bad("t.cu", CUDA_TASK, "// kevo launch k grid=4 block=(32,16,4) (x, z, N)\n"
               "extern \"C\" __global__ void k(const float *x, float *z, int n) {}\n",
               "2048 threads per block; a GPU runs at most 1024");
    expect_bad("t.cu", CUDA_TASK, "// kevo launch k grid=(1,N*70) block=32 (x, z, N)\n"
               "extern \"C\" __global__ void k(const float *x, float *z, int n) {}\n",
               "grid.y = 70000 is outside 1..65535");
    expect_bad("t.cu", CUDA_TASK, "// kevo launch k grid=4 block=256 smem=N*300 (x, z, N)\n"
               "extern \"C\" __global__ void k(const float *x, float *z, int n) {}\n",
               "smem = 300000 bytes; a block can have at most 232448 bytes");
    expect_ok("t.cu", CUDA_TASK, "// kevo launch k grid=(N*1000,65535) block=(8,8,16) "
              "smem=232448 (x, z, N)\n"
              "extern \"C\" __global__ void k(const float *x, float *z, int n) {}\n");
    /* a kernel kevo cannot find still gets the grid and block rules */
    expect_bad("t.cu", CUDA_TASK, "// kevo launch k grid=4 block=1025 (x, z, N)\n"
               "template <int B> __global__ void kt(const float *x, float *z, int n) {}\n",
               "block.x = 1025 is outside 1..1024");
}

#define TMA_TASK "// kevo task g\n"                                         \
                 "// kevo size M=256 N=512 K=1024\n"                          \
                 "// kevo holdout M=100 N=77 K=1037\n"                        \
                 "// kevo input a bf16[M,K] uniform(-1,1)\n"                  \
                 "// kevo input b bf16[K,N] uniform(-1,1)\n"                  \
                 "// kevo output c bf16[M,N]\n"                               \
                 "// kevo bytes 2*M*K\n"                                      \
                 "// kevo launch ref grid=4 block=256 (a, b, c, M, N, K)\n"   \
                 "extern \"C\" __global__ void ref(const void *a, const void *b, void *c, " \
                 "int m, int n, int k) {}\n"
#define TMA_KERNEL "struct __align__(64) tm_t { unsigned long long v[16]; };\n"             \
                   "extern \"C\" __global__ void g(void *c, const __grid_constant__ tm_t ta, " \
                   "int m) {}\n"

/* `// kevo tmap`: the rules of the TMA unit checked with file and line, the map's own
 * parameter type, and the description the harness encodes (innermost first, byte pitches). */
static void test_tmap(void **state)
{
    (void)state;
    expect_ok("t.cu", TMA_TASK, "// kevo tmap ta a box=[128, 64] swizzle=128\n"
              "// kevo launch g grid=1 block=128 (c, ta, M)\n" TMA_KERNEL);
    expect_ok("t.cu", TMA_TASK, "// kevo param BM 64 128\n"
              "// kevo tmap ta a box=[BM, 8] shape=[M*K/8, 8]\n"
              "// kevo launch g grid=1 block=128 (c, ta, M)\n" TMA_KERNEL);
    expect_bad("t.cu", TMA_TASK, "// kevo tmap ta b box=[64, 128] swizzle=128\n"
               "// kevo launch g grid=1 block=128 (c, ta, M)\n" TMA_KERNEL,
               "cand.cu:2: error: launch of 'g': tensor map 'ta' (line 1): the box's inner row "
               "is 256 bytes, more than its 128-byte swizzle");
    expect_bad("t.cu", TMA_TASK, "// kevo tmap ta a box=[16, 4]\n"
               "// kevo launch g grid=1 block=128 (c, ta, M)\n" TMA_KERNEL,
               "inner row is 8 bytes; the TMA unit moves multiples of 16");
    expect_bad("t.cu", TMA_TASK, "// kevo tmap ta a box=[16, 8] shape=[M, K/2]\n"
               "// kevo launch g grid=1 block=128 (c, ta, M)\n" TMA_KERNEL,
               "shape has 131072 elements, 'a' 262144");
    /* nine maps in one launch: more than the harness encodes */
    expect_bad("t.cu", TMA_TASK, "// kevo tmap t1 a box=[8, 8]\n// kevo tmap t2 a box=[8, 8]\n"
               "// kevo tmap t3 a box=[8, 8]\n// kevo tmap t4 a box=[8, 8]\n"
               "// kevo tmap t5 a box=[8, 8]\n// kevo tmap t6 a box=[8, 8]\n"
               "// kevo tmap t7 a box=[8, 8]\n// kevo tmap t8 a box=[8, 8]\n"
               "// kevo tmap t9 a box=[8, 8]\n"
               "// kevo launch g9 grid=1 block=1 (t1, t2, t3, t4, t5, t6, t7, t8, t9)\n"
               "struct __align__(64) tm_t { unsigned long long v[16]; };\n"
               "extern \"C\" __global__ void g9(tm_t a, tm_t b, tm_t c, tm_t d, tm_t e, tm_t f, "
               "tm_t g, tm_t h, tm_t i) {}\n",
               "cand.cu:10: error: launch of 'g9': more than 8 tensor maps in one launch "
               "(argument 9)");
    /* the map goes to its own 128-byte struct, not to a pointer */
    expect_bad("t.cu", TMA_TASK, "// kevo tmap ta a box=[128, 64]\n"
               "// kevo launch g grid=1 block=128 (c, ta, M)\n"
               "extern \"C\" __global__ void g(void *c, const void *ta, int m) {}\n",
               "argument 2 (tensor map ta) goes to parameter 2 of 'g'");
}

/* Wrong tmap lines are refused by the parser, with their line. */
static void test_tmap_parse(void **state)
{
    static const struct {
        const char *cand, *want;
    } bad[] = {
        { "// kevo tmap ta x box=[8, 8]\n", "'x' is not a tensor of the task" },
        { "// kevo tmap ta a box=[8]\n", "box has 1 entries but 'a' has 2 dimensions" },
        { "// kevo tmap ta a box=[8, 8] swizzle=16\n", "expected swizzle=none, 32, 64 or 128" },
        { "// kevo tmap ta a box=[8, 8] shape=[M*K]\n", "shape has 1 entries, box 2" },
        { "// kevo tmap ta a\n", "expected 'tmap NAME TENSOR box=" },
        { "// kevo tmap ta a swizzle=128\n", "tmap needs box=" },
        { "// kevo tmap ta a box=[8, 8] box=[8, 8]\n", "'box=' given twice" },
        { "// kevo tmap ta a box=[1,2,3,4,5,6]\n", "a tensor map has 1 to 5 dimensions" },
        { "// kevo tmap M a box=[8, 8]\n", "clashes with the task's size 'M'" },
        { "// kevo tmap ta a box=[Q, 8]\n", "Q" },
        { "// kevo tmap ta a box=[2*M, 64]\n", "box entry 1 of tensor map 'ta' is 512; it "
          "must be between 1 and 256" },
    };
    struct kevo_task *t = NULL, *c = NULL;
    char *msg = NULL, buf[512];

    (void)state;
    assert_int_equal(kevo_task_parse("t.cu", TMA_TASK, strlen(TMA_TASK), &t, &msg), KEVO_OK);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(buf, sizeof buf, "%s// kevo launch g grid=1 block=128 (c, ta, M)\n%s",
                 bad[i].cand, TMA_KERNEL);
        assert_int_not_equal(kevo_candidate_parse(t, "c.cu", buf, strlen(buf), &c, &msg),
                             KEVO_OK);
        if (!msg || !strstr(msg, bad[i].want) || !strstr(msg, "c.cu:1:"))
            fail_msg("case %zu: got '%s', want '%s'", i, msg ? msg : "(none)", bad[i].want);
        kevo_free(msg);
        msg = NULL;
    }
    /* a task may not declare one, nor may a C candidate */
    static const char task2[] = "// kevo task u\n// kevo size N=8\n"
                                "// kevo input x f32[N] normal(0,1)\n// kevo output z f32[N]\n"
                                "// kevo bytes 8*N\n// kevo tmap tx x box=[8]\n"
                                "// kevo launch r grid=1 block=1 (x, z)\n";
    assert_int_not_equal(kevo_task_parse("u.cu", task2, strlen(task2), &c, &msg), KEVO_OK);
    assert_non_null(strstr(msg, "only allowed in a candidate"));
    kevo_free(msg);
    kevo_task_free(t);
    assert_int_equal(kevo_task_parse("t.c", CPU_TASK, strlen(CPU_TASK), &t, &msg), KEVO_OK);
    snprintf(buf, sizeof buf, "// kevo tmap tx x box=[8]\n// kevo call f(x, z, N)\n"
             "void f(const float *x, float *z, int n) {}\n");
    assert_int_not_equal(kevo_candidate_parse(t, "c.c", buf, strlen(buf), &c, &msg), KEVO_OK);
    assert_non_null(strstr(msg, "'tmap' is for CUDA"));
    kevo_free(msg);
    kevo_task_free(t);
}

/* The description kevo_rules_tmap gives the encoder: innermost first, pitches in bytes;
 * a pitch the TMA unit cannot take (the holdout's K = 1037 bf16) is a zero map, no error. */
static void test_tmap_spec(void **state)
{
    static const char cand[] = "// kevo tmap ta a box=[128, 64] swizzle=128\n"
                               "// kevo tmap tv c box=[2, 4, 8] shape=[M, N/8, 8]\n"
                               "// kevo launch g grid=1 block=128 (c, ta, M)\n" TMA_KERNEL;
    struct kevo_task *t = NULL, *c = NULL;
    struct kevo_tmap_spec sp;
    struct kevo_env env;
    char *msg = NULL, why[512];

    (void)state;
    assert_int_equal(kevo_task_parse("t.cu", TMA_TASK, strlen(TMA_TASK), &t, &msg), KEVO_OK);
    assert_int_equal(kevo_candidate_parse(t, "c.cu", cand, strlen(cand), &c, &msg), KEVO_OK);
    assert_int_equal(c->n_tmaps, 2);
    assert_int_equal(c->launches[0].args[1].kind, KEVO_ARG_TMAP);
    assert_int_equal(kevo_task_env(t, 0, c, NULL, &env, &msg), KEVO_OK);
    assert_int_equal(kevo_rules_tmap(t, c, 0, &env, &sp, why, sizeof why), 0);
    assert_int_equal(sp.rank, 2);
    assert_int_equal(sp.dtype, KEVO_BF16);
    assert_int_equal(sp.swizzle, 128);
    assert_int_equal(sp.dims[0], 1024);   /* K */
    assert_int_equal(sp.dims[1], 256);    /* M */
    assert_int_equal(sp.strides[0], 2048);
    assert_int_equal(sp.box[0], 64);
    assert_int_equal(sp.box[1], 128);
    assert_int_equal(kevo_rules_tmap(t, c, 1, &env, &sp, why, sizeof why), 0);
    assert_int_equal(sp.rank, 3);
    assert_int_equal(sp.dims[0], 8);
    assert_int_equal(sp.dims[1], 64);
    assert_int_equal(sp.dims[2], 256);
    assert_int_equal(sp.strides[0], 16);
    assert_int_equal(sp.strides[1], 1024);
    assert_int_equal(kevo_task_env(t, 1, c, NULL, &env, &msg), KEVO_OK);   /* the holdout */
    assert_int_equal(kevo_rules_tmap(t, c, 0, &env, &sp, why, sizeof why), 0);
    assert_int_equal(sp.rank, 0);
    kevo_task_free(c);
    kevo_task_free(t);
}

/* A scratch above the 1 TiB kevo allocates for one tensor, with its line. */
static void test_tensor_cap(void **state)
{
    (void)state;
    expect_bad("t.c", CPU_TASK, "// kevo scratch tmp f32[N*1000000000]\n"
                                "// kevo call f(x, z, tmp, N)\n"
                                "void f(const float *x, float *z, float *tmp, int n) {}\n",
               "cand.c:1: error: 'tmp' has 1000000000000 elements of 4 bytes, more than the "
               "1 TiB kevo allocates for one tensor");
    expect_ok("t.c", CPU_TASK, "// kevo scratch tmp f32[N*100000000]\n"
                               "// kevo call f(x, z, tmp, N)\n"
                               "void f(const float *x, float *z, float *tmp, int n) {}\n");
}

/* kevo_rules_launch under one environment, as the evaluator calls it. */
static void test_launch_one_env(void **state)
{
    static const char cand[] = "// kevo call f(x, z, N*3000000)\n"
                               "void f(const float *x, float *z, int n) {}\n";
    struct kevo_task *t = NULL, *c = NULL;
    struct kevo_cproto *protos = NULL;
    struct kevo_env env;
    char *msg = NULL, why[512];

    (void)state;
    assert_int_equal(kevo_task_parse("t.c", CPU_TASK, strlen(CPU_TASK), &t, &msg), KEVO_OK);
    assert_int_equal(kevo_candidate_parse(t, "c.c", cand, strlen(cand), &c, &msg), KEVO_OK);
    assert_int_equal(kevo_rules_protos(c, &protos), KEVO_OK);
    assert_int_equal(protos[0].n_params, 3);
    assert_int_equal(kevo_task_env(t, 0, c, NULL, &env, &msg), KEVO_OK);
    assert_int_equal(kevo_rules_launch(t, c, 0, &protos[0], &env, why, sizeof why), 1);
    assert_non_null(strstr(why, "N*3000000 = 3000000000"));
    env.values[0] = 100;    /* a smaller N: fits */
    assert_int_equal(kevo_rules_launch(t, c, 0, &protos[0], &env, why, sizeof why), 0);
    assert_int_equal(kevo_rules_launch(t, c, 0, NULL, &env, why, sizeof why), 0);
    kevo_rules_protos_free(protos, c->n_launches);
    kevo_task_free(c);
    kevo_task_free(t);
}

/* Every allocation failure of a check is a clean KEVO_ERR_NOMEM. */
static void test_alloc_failures(void **state)
{
    static const char cand[] = "// kevo param B 1 2 3\n// kevo call f(x, z, N*B)\n"
                               "void f(const float *x, float *z, int n) {}\n";
    struct kevo_task *t = NULL, *c = NULL;
    char *msg = NULL;
    int done = 0;

    (void)state;
    assert_int_equal(kevo_task_parse("t.c", CPU_TASK, strlen(CPU_TASK), &t, &msg), KEVO_OK);
    assert_int_equal(kevo_candidate_parse(t, "c.c", cand, strlen(cand), &c, &msg), KEVO_OK);
    for (long n = 1; n < 500 && !done; n++) {
        kevo_mem_fail_after(n);
        enum kevo_status st = kevo_rules_check(t, c, &msg);
        kevo_mem_fail_after(0);
        assert_true(st == KEVO_OK || st == KEVO_ERR_NOMEM);
        assert_null(msg);
        done = st == KEVO_OK;
    }
    assert_true(done);
    kevo_task_free(c);
    kevo_task_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_int_width),
        cmocka_unit_test(test_cpu_types),
        cmocka_unit_test(test_task_and_holdout),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_cuda),
        cmocka_unit_test(test_tensor_cap),
        cmocka_unit_test(test_tmap),
        cmocka_unit_test(test_tmap_parse),
        cmocka_unit_test(test_tmap_spec),
        cmocka_unit_test(test_launch_one_env),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

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
        cmocka_unit_test(test_launch_one_env),
        cmocka_unit_test(test_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

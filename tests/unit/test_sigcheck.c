/*
 * test_sigcheck - launch lines against the kernel's parameter list (src/sigcheck.c):
 * argument count, pointer vs value, a tensor's dtype vs a float pointee; what kevo cannot
 * read (templates) is left to the worker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/mem.h"
#include "ctl/sigcheck.h"
#include "core/task.h"

#include <string.h>

#define HEAD "// kevo task t\n// kevo size N=64\n// kevo input x f32[N] normal(0,1)\n" \
             "// kevo input i i32[N] randint(0,N)\n// kevo output y f32[N]\n"        \
             "// kevo scalar a f32 2.0\n// kevo bytes 8*N\n"

/* NULL when the launch matches, else the message (caller frees). */
static char *check(const char *text)
{
    struct kevo_task *t = NULL;
    char *msg = NULL;
    if (kevo_task_parse("t.cu", text, strlen(text), &t, &msg) != KEVO_OK)
        fail_msg("parse: %s", msg);
    enum kevo_status st = kevo_sig_check(t, NULL, &msg);
    kevo_task_free(t);
    assert_true(st == KEVO_OK || st == KEVO_ERR_INVALID);
    assert_true((st == KEVO_OK) == (msg == NULL));
    return msg;
}

static void expect_bad(const char *text, const char *want)
{
    char *m = check(text);
    if (!m || !strstr(m, want))
        fail_msg("got '%s', want '%s'", m ? m : "(ok)", want);
    kevo_free(m);
}

static void test_matching_launches(void **state)
{
    (void)state;
    /* qualifiers, restrict, vector and integer reinterpretation, comments with decoys */
    assert_null(check(HEAD "// kevo launch k grid=1 block=64 (x, i, y, a, N)\n"
                      "/* void k(int a); */\n"
                      "extern \"C\" __global__ void k(const float *__restrict__ x, "
                      "const int *i, float4 *y, float a, long long n) {}\n"));
    assert_null(check(HEAD "// kevo launch k grid=1 block=64 (x, i, y, a, N)\n"
                      "extern \"C\" __global__ void k(const void *x, const unsigned *i, "
                      "uint4 *y, double a, int n) {}\n"));
    /* a template kernel is not found: the worker checks it at launch */
    assert_null(check(HEAD "// kevo launch k grid=1 block=64 (x, y)\n"
                      "template <int B> __global__ void kt(const float *x, float *y) {}\n"
                      "#define k kt<4>\n"));
}

static void test_mismatches(void **state)
{
    (void)state;
    expect_bad(HEAD "// kevo launch k grid=1 block=64 (x, y, N)\n"
                    "extern \"C\" __global__ void k(const float *x, float *y) {}\n",
               "t.cu:8: error: launch of 'k' does not match its parameters (line 9): the "
               "launch passes 3 arguments, 'k' takes 2");
    expect_bad(HEAD "// kevo launch k grid=1 block=64 (x, N, y)\n"
                    "extern \"C\" __global__ void k(const float *x, float *y, int n) {}\n",
               "argument 2 ('N', not a tensor) goes to parameter 2 of 'k', 'float *', "
               "which is a pointer");
    expect_bad(HEAD "// kevo launch k grid=1 block=64 (x, y, y)\n"
                    "extern \"C\" __global__ void k(const float *x, float *y, int n) {}\n",
               "argument 3 (tensor y) goes to parameter 3 of 'k', 'int', which is not a "
               "pointer");
    expect_bad(HEAD "// kevo launch k grid=1 block=64 (x, y)\n"
                    "#include <cuda_fp16.h>\n"
                    "extern \"C\" __global__ void k(const __half *x, float *y) {}\n",
               "argument 1 (tensor x, f32) goes to parameter 1 of 'k', 'const __half *', "
               "which points to another type");
    expect_bad(HEAD "// kevo launch k grid=1 block=64 (i, y)\n"
                    "extern \"C\" __global__ void k(const float *i, float *y) {}\n",
               "argument 1 (tensor i, i32)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matching_launches),
        cmocka_unit_test(test_mismatches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

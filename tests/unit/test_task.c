/*
 * test_task - task and candidate files (src/core/task.h): the docs/task-format.md examples, every
 * error class with its exact line and column, workload environments with params,
 * candidate rules, tolerances, flags, file loading, and every allocation-failure point.
 */
#include "testutil.h"

#include "base/mem.h"
#include "core/task.h"

#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---- */

static struct kevo_task *parse_ok(const char *path, const char *text)
{
    struct kevo_task *t = NULL;
    char *msg = NULL;
    enum kevo_status st = kevo_task_parse(path, text, strlen(text), &t, &msg);
    if (st)
        fail_msg("%s: status %d: %s", path, st, msg ? msg : "(no message)");
    assert_null(msg);
    assert_non_null(t);
    return t;
}

static struct kevo_task *cand_ok(const struct kevo_task *task, const char *path, const char *text)
{
    struct kevo_task *c = NULL;
    char *msg = NULL;
    enum kevo_status st = kevo_candidate_parse(task, path, text, strlen(text), &c, &msg);
    if (st)
        fail_msg("%s: status %d: %s", path, st, msg ? msg : "(no message)");
    assert_non_null(c);
    return c;
}

/* The message must be exactly "PATH:LINE:COL: error: " followed by text containing `has`. */
static void check_msg(const char *msg, const char *path, int line, int col, const char *has)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s:%d:%d: error: ", path, line, col);
    if (!msg || strncmp(msg, prefix, strlen(prefix)) || !strstr(msg + strlen(prefix), has))
        fail_msg("got  '%s'\nwant '%s...%s...'", msg ? msg : "(null)", prefix, has);
}

static void parse_bad(const char *path, const char *text, enum kevo_status want, int line,
                      int col, const char *has)
{
    struct kevo_task *t = (struct kevo_task *)1;
    char *msg = NULL;
    enum kevo_status st = kevo_task_parse(path, text, strlen(text), &t, &msg);
    if (st != want)
        fail_msg("status %d (want %d): %s", st, want, msg ? msg : "(null)");
    assert_null(t);
    check_msg(msg, path, line, col, has);
    kevo_free(msg);
}

static void cand_bad(const struct kevo_task *task, const char *path, const char *text,
                     enum kevo_status want, int line, int col, const char *has)
{
    struct kevo_task *c = (struct kevo_task *)1;
    char *msg = NULL;
    enum kevo_status st = kevo_candidate_parse(task, path, text, strlen(text), &c, &msg);
    if (st != want)
        fail_msg("status %d (want %d): %s", st, want, msg ? msg : "(null)");
    assert_null(c);
    check_msg(msg, path, line, col, has);
    kevo_free(msg);
}

/* ---- fixtures ---- */

static const char *softmax_cu =
    "// kevo task   softmax_rows\n"
    "// kevo doc    Softmax over the last axis of an M x N float32 matrix.\n"
    "// kevo tags   softmax reduction\n"
    "// kevo size   M=4096 N=8192\n"
    "// kevo size   M=128 N=50257\n"
    "// kevo holdout M=7 N=100003\n"
    "// kevo input  x f32[M,N] normal(0,4)\n"
    "// kevo output y f32[M,N]\n"
    "// kevo bytes  8*M*N\n"
    "// kevo flops  5*M*N\n"
    "// kevo torch  torch.softmax(x, dim=-1)\n"
    "// kevo launch softmax_ref grid=M block=256 smem=1024 (x, y, N)\n"
    "extern \"C\" __global__ void softmax_ref(const float *x, float *y, int n) { }\n";

static const char *softmax_cand =
    "// kevo param  THREADS 128 256 512 1024\n"
    "// kevo launch softmax_fast grid=M block=THREADS (x, y, N)\n"
    "extern \"C\" __global__ void softmax_fast(const float *x, float *y, int n) { }\n";

/* A C task, CRLF line endings, directives in unusual order and spacing. */
static const char *saxpy_c =
    "#include <stdint.h>\r\n"
    "  //\tkevo   call saxpy(n, a, x, y, out)\r\n"
    "// kevo input x f64[n] uniform(-1, 1)\r\n"
    "// kevo input y f64[n] uniform(-1.5,2.5e0)\r\n"
    "// kevo input idx i32[n] randint(0, n)\r\n"
    "// kevo output out f64[n]\r\n"
    "// kevo scalar a f64 -2.5\r\n"
    "// kevo scalar k u8 255\r\n"
    "// kevo task saxpy_2\r\n"
    "// kevo bytes 8*3*n + 4*n\r\n"
    "// kevo size n=1000\r\n"
    "// kevo size n=cdiv(7, 2)\r\n";

/* ---- valid files ---- */

static void test_softmax_example(void **state)
{
    struct kevo_task *t = parse_ok("softmax.cu", softmax_cu);
    const struct kevo_launch *L;
    (void)state;
    assert_int_equal(t->lang, KEVO_LANG_CUDA);
    assert_int_equal(t->is_candidate, 0);
    assert_string_equal(t->path, "softmax.cu");
    assert_string_equal(t->name, "softmax_rows");
    assert_string_equal(t->doc, "Softmax over the last axis of an M x N float32 matrix.");
    assert_int_equal(t->n_tags, 2);
    assert_string_equal(t->tags[1], "reduction");
    assert_int_equal(t->n_workloads, 3);
    assert_int_equal(t->workloads[0].n, 2);
    assert_string_equal(t->workloads[0].names[1], "N");
    assert_string_equal(t->workloads[1].exprs[1], "50257");
    assert_int_equal(t->workloads[1].holdout, 0);
    assert_int_equal(t->workloads[2].holdout, 1);
    assert_int_equal(t->workloads[2].line, 6);
    assert_int_equal(t->n_tensors, 2);
    assert_string_equal(t->tensors[0].name, "x");
    assert_int_equal(t->tensors[0].role, KEVO_ROLE_INPUT);
    assert_int_equal(t->tensors[0].dtype, KEVO_F32);
    assert_int_equal(t->tensors[0].ndim, 2);
    assert_string_equal(t->tensors[0].shape[1], "N");
    assert_int_equal(t->tensors[0].init, KEVO_INIT_NORMAL);
    assert_string_equal(t->tensors[0].init_a, "0");
    assert_string_equal(t->tensors[0].init_b, "4");
    assert_int_equal(t->tensors[1].role, KEVO_ROLE_OUTPUT);
    assert_int_equal(t->tensors[1].init, KEVO_INIT_NONE);
    assert_int_equal(t->tensors[1].line, 8);
    assert_string_equal(t->bytes, "8*M*N");
    assert_string_equal(t->flops, "5*M*N");
    assert_int_equal(t->flops_unit, KEVO_UNIT_FP32);
    assert_string_equal(t->torch, "torch.softmax(x, dim=-1)");
    assert_int_equal(t->n_launches, 1);
    L = &t->launches[0];
    assert_string_equal(L->kernel, "softmax_ref");
    assert_string_equal(L->grid[0], "M");
    assert_string_equal(L->grid[1], "1");
    assert_string_equal(L->grid[2], "1");
    assert_string_equal(L->block[0], "256");
    assert_string_equal(L->smem, "1024");
    assert_int_equal(L->line, 12);
    assert_int_equal(L->n_args, 3);
    assert_int_equal(L->args[0].kind, KEVO_ARG_TENSOR);
    assert_int_equal(L->args[0].index, 0);
    assert_int_equal(L->args[1].kind, KEVO_ARG_TENSOR);
    assert_int_equal(L->args[1].index, 1);
    assert_int_equal(L->args[2].kind, KEVO_ARG_EXPR);
    assert_int_equal(L->args[2].index, -1);
    assert_string_equal(L->args[2].text, "N");
    assert_int_equal(L->args[0].col, 56);
    assert_int_equal(L->args[2].col, 62);
    assert_int_equal(t->n_params, 0);
    assert_int_equal(t->source_len, strlen(softmax_cu));
    assert_memory_equal(t->source, softmax_cu, t->source_len);
    kevo_task_free(t);
}

static void test_c_task_crlf(void **state)
{
    struct kevo_task *t = parse_ok("saxpy.c", saxpy_c);
    const struct kevo_launch *L = &t->launches[0];
    (void)state;
    assert_int_equal(t->lang, KEVO_LANG_C);
    assert_string_equal(t->name, "saxpy_2");
    assert_null(t->doc);
    assert_null(t->flops);
    assert_string_equal(L->kernel, "saxpy");
    assert_int_equal(L->n_args, 5);
    assert_int_equal(L->args[0].kind, KEVO_ARG_EXPR);
    assert_int_equal(L->args[1].kind, KEVO_ARG_SCALAR);
    assert_int_equal(L->args[1].index, 0);
    assert_int_equal(L->args[4].kind, KEVO_ARG_TENSOR);
    assert_int_equal(L->args[4].index, 3);
    assert_string_equal(L->grid[0], "1");     /* filled for C too, never NULL */
    assert_string_equal(L->smem, "0");
    assert_int_equal(t->tensors[0].init, KEVO_INIT_UNIFORM);
    assert_string_equal(t->tensors[1].init_b, "2.5e0");   /* no CR kept */
    assert_int_equal(t->tensors[2].init, KEVO_INIT_RANDINT);
    assert_string_equal(t->tensors[2].init_b, "n");
    assert_int_equal(t->scalars[0].dtype, KEVO_F64);
    assert_true(t->scalars[0].value == -2.5);
    assert_int_equal(t->scalars[1].ivalue, 255);
    assert_true(t->scalars[1].value == 255.0);
    kevo_task_free(t);
}

static void test_directive_detection(void **state)
{
    /* only `//`, blanks, `kevo`, blank/end is a directive; the rest is source */
    const char *text =
        "//kevo task nope\n"
        "/// kevo task nope\n"
        "// kevox task nope\n"
        "/* kevo task nope */\n"
        "x = 1; // kevo task nope\n"
        "// kevo task yes\n"
        "\t // \t kevo\ttags a-b c_1\n"
        "// kevo size M=2\n"
        "// kevo output y i32[M]\n"
        "// kevo bytes 4*M\n"
        "// kevo launch k grid=(M, 2) block=(32,4,1) ()\n"
        "// kevo\n";
    struct kevo_task *t = NULL;
    char *msg = NULL;
    (void)state;
    /* the last line is a directive without a keyword */
    assert_int_equal(kevo_task_parse("d.cu", text, strlen(text), &t, &msg), KEVO_ERR_PARSE);
    check_msg(msg, "d.cu", 12, 8, "expected a keyword after '// kevo'");
    kevo_free(msg);
    t = parse_ok("d.cu", "// kevo task yes\n"
                         "\t // \t kevo\ttags a-b c_1\n"
                         "// kevo size M=2\n"
                         "// kevo output y i32[M]\n"
                         "// kevo bytes 4*M\n"
                         "// kevo launch k grid=(M, 2) block=(32,4,1) ()\n"
                         "//kevo task nope\n");
    assert_string_equal(t->name, "yes");
    assert_string_equal(t->tags[0], "a-b");
    assert_string_equal(t->launches[0].grid[0], "M");
    assert_string_equal(t->launches[0].grid[1], "2");
    assert_string_equal(t->launches[0].grid[2], "1");
    assert_string_equal(t->launches[0].block[1], "4");
    assert_int_equal(t->launches[0].n_args, 0);
    kevo_task_free(t);
}

static void test_shapes_and_exprs(void **state)
{
    struct kevo_task *t = parse_ok("s.cu",
        "// kevo task s\n"
        "// kevo size M=4096 N=cdiv(M, 2) K=max(N - 1, 1)\n"
        "// kevo input  a bf16[M, K] uniform(-1,1)\n"
        "// kevo input  m bool[M] randint(0, 2)\n"
        "// kevo output c f16[(M + 1) / 2, min(N, 64), 1]\n"
        "// kevo output loss f32[]\n"
        "// kevo scratch w f32[cdiv(M,256)]\n"
        "// kevo bytes  2*M*K + M + 2*cdiv(M,2)*min(N,64) + 4\n"
        "// kevo flops  2 * M * N * K on bf16\n"
        "// kevo launch k1 grid=(cdiv(N, 32), cdiv(M, 32)) block=(32, 8) smem=2*32*33 "
        "(a, m, c, w, M * 2, K)\n"
        "// kevo launch k2 grid=1 block=1 (w, loss)\n");
    (void)state;
    assert_int_equal(t->tensors[2].ndim, 3);
    assert_string_equal(t->tensors[2].shape[0], "(M + 1) / 2");
    assert_int_equal(t->tensors[3].ndim, 0);
    assert_int_equal(t->tensors[4].role, KEVO_ROLE_SCRATCH);
    assert_string_equal(t->flops, "2 * M * N * K");
    assert_int_equal(t->flops_unit, KEVO_UNIT_BF16);
    assert_string_equal(t->launches[0].grid[1], "cdiv(M, 32)");
    assert_string_equal(t->launches[0].smem, "2*32*33");
    assert_string_equal(t->launches[0].args[4].text, "M * 2");
    assert_int_equal(t->n_launches, 2);
    kevo_task_free(t);
}

/* ---- environments ---- */

static void test_env_workloads(void **state)
{
    struct kevo_task *t = parse_ok("softmax.cu", softmax_cu);
    struct kevo_env env;
    int64_t v;
    char *msg = NULL;
    (void)state;
    assert_int_equal(kevo_task_env(t, 0, NULL, NULL, &env, &msg), KEVO_OK);
    assert_null(msg);
    assert_int_equal(env.n, 2);
    assert_string_equal(env.names[0], "M");
    assert_int_equal(env.values[0], 4096);
    assert_int_equal(env.values[1], 8192);
    assert_int_equal(kevo_tensor_numel(&t->tensors[0], &env, &v, &msg), KEVO_OK);
    assert_int_equal(v, 4096LL * 8192);
    assert_int_equal(kevo_env_eval(&env, t->bytes, &v, &msg), KEVO_OK);
    assert_int_equal(v, 8LL * 4096 * 8192);
    assert_int_equal(kevo_task_env(t, 2, NULL, NULL, &env, &msg), KEVO_OK);   /* holdout */
    assert_int_equal(env.values[1], 100003);
    assert_int_equal(kevo_env_eval(&env, "cdiv(N, 256)", &v, NULL), KEVO_OK);
    assert_int_equal(v, 391);
    assert_int_equal(kevo_env_eval(&env, "M*K", &v, &msg), KEVO_ERR_PARSE);
    assert_string_equal(msg, "in 'M*K' at column 3: unknown name 'K'");
    kevo_free(msg);
    assert_int_equal(kevo_env_eval(&env, "M/(N-N)", &v, &msg), KEVO_ERR_INVALID);
    assert_string_equal(msg, "in 'M/(N-N)' at column 2: division by zero");
    kevo_free(msg);
    /* errors */
    assert_int_equal(kevo_task_env(t, 3, NULL, NULL, &env, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "no workload 3"));
    assert_int_equal(env.n, 0);
    kevo_free(msg);
    kevo_task_free(t);
}

static void test_env_earlier_names(void **state)
{
    struct kevo_task *t = parse_ok("e.cu",
        "// kevo task e\n"
        "// kevo size M=4096 N=cdiv(M, 3) K=M*N\n"
        "// kevo size K=5 N=2 M=3\n"
        "// kevo output y f32[K]\n"
        "// kevo bytes 4*K\n"
        "// kevo launch k grid=K block=1 (y)\n");
    struct kevo_env env;
    (void)state;
    assert_int_equal(kevo_task_env(t, 0, NULL, NULL, &env, NULL), KEVO_OK);
    assert_int_equal(env.values[1], 1366);
    assert_int_equal(env.values[2], 4096LL * 1366);
    assert_int_equal(kevo_task_env(t, 1, NULL, NULL, &env, NULL), KEVO_OK);
    assert_string_equal(env.names[0], "K");   /* in the order of its own line */
    assert_int_equal(env.values[0], 5);
    kevo_task_free(t);
}

/* A hand-built task (as a test double elsewhere might build one) still gets a message. */
static void test_env_runtime_error(void **state)
{
    struct kevo_task *t = parse_ok("softmax.cu", softmax_cu);
    struct kevo_task *c = cand_ok(t, "c.cu", softmax_cand);
    struct kevo_env env;
    int64_t vals[1] = { 4611686018427387904LL }, n;
    char *msg = NULL;
    struct kevo_tensor_decl d = { .name = "big", .ndim = 2, .shape = { "M", "THREADS" } };
    (void)state;
    assert_int_equal(kevo_task_env(t, 1, c, vals, &env, &msg), KEVO_OK);
    assert_int_equal(env.n, 3);
    assert_string_equal(env.names[2], "THREADS");
    assert_int_equal(kevo_tensor_numel(&d, &env, &n, &msg), KEVO_ERR_OVERFLOW);
    assert_int_equal(n, 0);
    assert_string_equal(msg, "the element count of 'big' overflows 64 bits");
    kevo_free(msg);
    vals[0] = 0;
    assert_int_equal(kevo_task_env(t, 1, c, vals, &env, NULL), KEVO_OK);
    assert_int_equal(kevo_tensor_numel(&d, &env, &n, &msg), KEVO_ERR_INVALID);
    assert_string_equal(msg, "dimension 2 of 'big' is 0; shape dimensions must be positive");
    kevo_free(msg);
    kevo_task_free(c);
    kevo_task_free(t);
}

/* ---- candidates ---- */

static void test_candidate(void **state)
{
    struct kevo_task *t = parse_ok("softmax.cu", softmax_cu);
    struct kevo_task *c = cand_ok(t, "cand.cu",
        "// kevo doc   two-pass\n"
        "// kevo param THREADS 256 128 512\n"
        "// kevo param VEC 4 1 2\n"
        "// kevo scratch partial f32[M, cdiv(N, THREADS * VEC)]\n"
        "// kevo flags -use_fast_math -maxrregcount=64 -ftz=true\n"
        "// kevo launch pass1 grid=(cdiv(N, THREADS*VEC), M) block=THREADS smem=THREADS*4 "
        "(x, partial, N)\n"
        "// kevo launch pass2 grid=M block=THREADS (x, partial, y, N, VEC)\n");
    struct kevo_env env;
    int64_t vals[2] = { 512, 2 }, n;
    const struct kevo_launch *L;
    (void)state;
    assert_int_equal(c->is_candidate, 1);
    assert_null(c->name);
    assert_string_equal(c->doc, "two-pass");
    assert_int_equal(c->n_params, 2);
    assert_int_equal(c->params[0].n_values, 3);
    assert_int_equal(c->params[0].values[0], 256);   /* the default */
    assert_int_equal(c->n_flags, 3);
    assert_string_equal(c->flags[1], "-maxrregcount=64");
    assert_int_equal(c->n_tensors, 1);
    assert_int_equal(c->n_workloads, 0);
    L = &c->launches[1];
    assert_int_equal(L->args[0].kind, KEVO_ARG_TENSOR);
    assert_int_equal(L->args[0].index, 0);
    assert_int_equal(L->args[1].kind, KEVO_ARG_TENSOR);
    assert_int_equal(L->args[1].index, t->n_tensors + 0);   /* candidate scratch 0 */
    assert_int_equal(L->args[2].index, 1);
    assert_int_equal(L->args[4].kind, KEVO_ARG_EXPR);
    assert_int_equal(kevo_task_env(t, 0, c, NULL, &env, NULL), KEVO_OK);
    assert_int_equal(env.n, 4);
    assert_int_equal(env.values[2], 256);
    assert_int_equal(env.values[3], 4);
    assert_int_equal(kevo_tensor_numel(&c->tensors[0], &env, &n, NULL), KEVO_OK);
    assert_int_equal(n, 4096 * 8);
    assert_int_equal(kevo_task_env(t, 0, c, vals, &env, NULL), KEVO_OK);
    assert_int_equal(kevo_tensor_numel(&c->tensors[0], &env, &n, NULL), KEVO_OK);
    assert_int_equal(n, 4096 * 8);
    kevo_task_free(c);
    /* the docs/task-format.md candidate */
    c = cand_ok(t, "c.cu", softmax_cand);
    assert_string_equal(c->launches[0].block[0], "THREADS");
    kevo_task_free(c);
    kevo_task_free(t);
}

static void test_candidate_errors(void **state)
{
    struct kevo_task *t = parse_ok("softmax.cu", softmax_cu);
    struct kevo_task *ct = parse_ok("saxpy.c", saxpy_c);
    (void)state;
    cand_bad(t, "c.cu", "// kevo size M=1 N=2\n", KEVO_ERR_INVALID, 1, 9,
             "a candidate may not declare 'size'");
    cand_bad(t, "c.cu", "// kevo launch k grid=1 block=1 ()\n// kevo input z f32[M] normal(0,1)\n",
             KEVO_ERR_INVALID, 2, 9, "a candidate may not declare 'input'");
    cand_bad(t, "c.cu", "// kevo tol rtol=1 atol=1\n", KEVO_ERR_INVALID, 1, 9,
             "a candidate may not declare 'tol'");
    cand_bad(t, "c.cu", "// kevo scratch x f32[M]\n", KEVO_ERR_INVALID, 1, 17,
             "tensor 'x' clashes with the task's tensor 'x' (line 7 of softmax.cu)");
    cand_bad(t, "c.cu", "// kevo param N 1 2\n", KEVO_ERR_INVALID, 1, 15,
             "param 'N' clashes with the task's size 'N' (line 4 of softmax.cu)");
    cand_bad(t, "c.cu", "// kevo param T 1 2\n// kevo param T 3\n", KEVO_ERR_INVALID, 2, 15,
             "param 'T' declared twice (first at line 1)");
    cand_bad(t, "c.cu", "// kevo param T 1 2 1\n", KEVO_ERR_INVALID, 1, 21,
             "value 1 listed twice for param 'T'");
    cand_bad(t, "c.cu", "// kevo param T\n", KEVO_ERR_PARSE, 1, 16, "at least one value");
    cand_bad(t, "c.cu", "// kevo param T 1.5\n", KEVO_ERR_PARSE, 1, 18,
             "expected an integer value");
    cand_bad(t, "c.c", "// kevo call f(x)\n", KEVO_ERR_INVALID, 1, 1,
             "the candidate is C (.c) but the task softmax.cu is CUDA (.cu)");
    cand_bad(ct, "c.c", "// kevo launch k grid=1 block=1 (x)\n", KEVO_ERR_INVALID, 1, 9,
             "'launch' is for CUDA (.cu) files");
    cand_bad(t, "c.cu", "// kevo flags -O3\n", KEVO_ERR_INVALID, 1, 15,
             "flag '-O3' is not allowed for CUDA");
    cand_bad(ct, "c.c", "// kevo flags -O3 -use_fast_math\n", KEVO_ERR_INVALID, 1, 19,
             "flag '-use_fast_math' is not allowed for C");
    cand_bad(t, "c.cu", "// kevo doc nothing to run\n", KEVO_ERR_PARSE, 1, 1,
             "no 'launch' directive (a candidate needs at least one");
    cand_bad(t, "c.cu", "// kevo launch k grid=cdiv(M, B) block=B (x, y)\n", KEVO_ERR_PARSE, 1,
             31, "unknown name 'B' (expected a size name: M N)");
    cand_bad(t, "c.cu", "// kevo param B 32\n// kevo launch k grid=M block=B (x, y, junk)\n",
             KEVO_ERR_PARSE, 2, 40, "unknown argument 'junk' (expected a tensor, a scalar, "
             "or an integer expression over the size or param names: M N B)");
    /* every param combination is evaluated: only V=2^61 with THREADS=4 overflows */
    cand_bad(t, "c.cu",
             "// kevo param THREADS 1 4\n"
             "// kevo param V 1 2305843009213693952\n"
             "// kevo launch k grid=cdiv(M, THREADS) block=THREADS (x, y, V*THREADS)\n",
             KEVO_ERR_OVERFLOW, 3, 62, "expression overflows 64 bits in argument 3 of 'k' for "
             "the workload at line 4 of softmax.cu with THREADS=4 V=2305843009213693952");
    /* ranges: a block of 2^62 threads is refused */
    cand_bad(t, "c.cu",
             "// kevo param V 1 4611686018427387904\n"
             "// kevo launch k grid=M block=V (x, y)\n",
             KEVO_ERR_INVALID, 2, 31, "block must be between 1 and 4294967295, got "
             "4611686018427387904 for the workload at line 4 of softmax.cu with "
             "V=4611686018427387904");
    cand_bad(t, "c.cu",
             "// kevo param THREADS 256 2048\n"
             "// kevo scratch s f32[M - THREADS]\n"
             "// kevo launch k grid=1 block=1 (s)\n",
             KEVO_ERR_INVALID, 2, 23, "dimension 1 of 's' is -128; shape dimensions must "
             "be positive for the workload at line 5 of softmax.cu with THREADS=256");
    kevo_task_free(ct);
    kevo_task_free(t);
}

/* Held-out sizes are never revealed through a candidate's error messages. */
static void test_candidate_holdout_hidden(void **state)
{
    struct kevo_task *t = parse_ok("softmax.cu", softmax_cu);
    struct kevo_task *c;
    (void)state;
    /* M - 8 <= 0 only for the holdout M=7: not checked at parse time */
    c = cand_ok(t, "c.cu", "// kevo scratch s f32[M - 8]\n// kevo launch k grid=1 block=1 (s)\n");
    kevo_task_free(c);
    kevo_task_free(t);
}

static void test_candidate_many_combos(void **state)
{
    struct kevo_task *t = parse_ok("softmax.cu", softmax_cu);
    char text[8192];
    size_t o = 0;
    struct kevo_task *c;
    (void)state;
    /* 8 params x 8 values: 16M combinations, checked one param at a time instead */
    for (int i = 0; i < 8; i++) {
        o += (size_t)snprintf(text + o, sizeof text - o, "// kevo param P%d", i);
        for (int j = 1; j <= 8; j++)
            o += (size_t)snprintf(text + o, sizeof text - o, " %d", j);
        o += (size_t)snprintf(text + o, sizeof text - o, "\n");
    }
    snprintf(text + o, sizeof text - o,
             "// kevo launch k grid=P0*P1*P2*P3 block=P4*P5*P6*P7 (x, y)\n");
    c = cand_ok(t, "c.cu", text);
    assert_int_equal(c->n_params, 8);
    kevo_task_free(c);
    /* one-at-a-time still finds a value that fails on its own */
    snprintf(text + o, sizeof text - o,
             "// kevo param Z 1 0\n// kevo launch k grid=P0*P1*P2*P3 block=Z (x, y)\n");
    cand_bad(t, "c.cu", text, KEVO_ERR_INVALID, 10, 41, "block must be between 1 and");
    kevo_task_free(t);
}

/* ---- task errors, each with its line and column ---- */

#define HEAD "// kevo task t\n// kevo size M=64 N=32\n"          /* lines 1-2 */
#define TAIL "// kevo bytes 8*M*N\n// kevo launch k grid=M block=N (x, y)\n"
#define TAIL_Y "// kevo bytes 8*M*N\n// kevo launch k grid=M block=N (y)\n"
#define BODY "// kevo input x f32[M,N] normal(0,1)\n// kevo output y f32[M,N]\n" TAIL

static void test_errors_keywords_and_names(void **state)
{
    (void)state;
    parse_bad("t.cu", HEAD "// kevo inptu x f32[M,N] normal(0,1)\n", KEVO_ERR_PARSE, 3, 9,
              "unknown keyword 'inptu' (expected one of task doc tags size");
    parse_bad("t.cu", HEAD "// kevo input  x f33[M,N] normal(0,1)\n", KEVO_ERR_PARSE, 3, 18,
              "expected dtype (one of f64 f32 f16 bf16 fp8e4m3 fp8e5m2 i64 i32 i16 i8 u8 bool),"
              " got 'f33'");
    parse_bad("t.cu", HEAD "// kevo input x f32[M,N] normal(0,1)\n// kevo output y f32[M]\n"
              "// kevo input x f32[M] normal(0,1)\n" TAIL, KEVO_ERR_INVALID, 5, 15,
              "tensor 'x' declared twice (first at line 3)");
    parse_bad("t.cu", HEAD "// kevo scalar M f32 1.0\n", KEVO_ERR_INVALID, 3, 16,
              "scalar 'M' clashes with the size 'M' declared at line 2");
    parse_bad("t.cu", "// kevo output M f32[4]\n" HEAD, KEVO_ERR_INVALID, 3, 14,
              "size 'M' clashes with the tensor 'M' declared at line 1");
    parse_bad("t.cu", HEAD "// kevo output 2y f32[M]\n", KEVO_ERR_PARSE, 3, 16,
              "expected tensor name (letters, digits, '_'), got '2y'");
    parse_bad("t.cu", HEAD "// kevo output max f32[M]\n", KEVO_ERR_PARSE, 3, 16,
              "'max' is a function of expressions and cannot name a tensor");
    parse_bad("t.cu", "// kevo task Softmax\n", KEVO_ERR_PARSE, 1, 14,
              "expected 'task NAME' with NAME of [a-z0-9_]+, got 'Softmax'");
    parse_bad("t.cu", "// kevo task a b\n", KEVO_ERR_PARSE, 1, 14, "got 'a b'");
    parse_bad("t.cu", HEAD "// kevo task u\n", KEVO_ERR_INVALID, 3, 9,
              "'task' declared twice (first at line 1)");
    parse_bad("t.cu", HEAD "// kevo param P 1\n", KEVO_ERR_INVALID, 3, 9,
              "'param' is only allowed in a candidate file");
    parse_bad("t.cu", HEAD "// kevo flags -use_fast_math\n", KEVO_ERR_INVALID, 3, 9,
              "'flags' is only allowed in a candidate file");
    parse_bad("t.cu", HEAD "// kevo tags Elementwise\n", KEVO_ERR_PARSE, 3, 14,
              "expected a tag of [a-z0-9_-]+, got 'Elementwise'");
    parse_bad("t.py", HEAD, KEVO_ERR_INVALID, 1, 1,
              "unknown file extension (expected .cu for CUDA or .c for C)");
    parse_bad("dir.cu/t", HEAD, KEVO_ERR_INVALID, 1, 1, "unknown file extension");
}

static void test_errors_missing(void **state)
{
    (void)state;
    parse_bad("t.cu", "// kevo size M=1\n", KEVO_ERR_PARSE, 1, 1, "no 'task' directive");
    parse_bad("t.cu", "// kevo task t\n// kevo holdout M=1\n", KEVO_ERR_PARSE, 1, 1,
              "no 'size' directive");
    parse_bad("t.cu", HEAD "// kevo input x f32[M,N] normal(0,1)\n" TAIL, KEVO_ERR_PARSE, 1, 1,
              "no 'output' directive");
    parse_bad("t.cu", HEAD "// kevo output y f32[M]\n// kevo launch k grid=1 block=1 (y)\n",
              KEVO_ERR_PARSE, 1, 1, "no 'bytes' directive");
    parse_bad("t.cu", HEAD "// kevo output y f32[M]\n// kevo bytes 1\n", KEVO_ERR_PARSE, 1, 1,
              "no 'launch' directive (a task needs at least one");
    parse_bad("t.c", HEAD "// kevo output y f32[M]\n// kevo bytes 1\n", KEVO_ERR_PARSE, 1, 1,
              "no 'call' directive");
    parse_bad("t.cu", "", KEVO_ERR_PARSE, 1, 1, "no 'task' directive");
}

static void test_errors_sizes(void **state)
{
    (void)state;
    parse_bad("t.cu", HEAD "// kevo size M=1 K=2\n" BODY, KEVO_ERR_INVALID, 3, 18,
              "size name 'K' is not declared on the first size line (line 2: M N)");
    parse_bad("t.cu", "// kevo holdout M=1 K=2\n" HEAD BODY,
              KEVO_ERR_INVALID, 1, 21, "size name 'K' is not declared on the first size line");
    parse_bad("t.cu", HEAD "// kevo size N=1\n" BODY, KEVO_ERR_INVALID,
              3, 9, "size 'M' is missing (every size line assigns M N, as the first one at "
              "line 2 does)");
    parse_bad("t.cu", HEAD "// kevo size M=1 M=2\n", KEVO_ERR_INVALID, 3, 18,
              "size 'M' assigned twice on this line");
    parse_bad("t.cu", "// kevo size M=N N=2\n", KEVO_ERR_PARSE, 1, 16,
              "unknown name 'N' (a size may only use the names assigned before it on its line)");
    parse_bad("t.cu", "// kevo size M=4 N\n", KEVO_ERR_PARSE, 1, 18, "expected NAME=EXPR, got 'N'");
    parse_bad("t.cu", "// kevo size M=\n", KEVO_ERR_PARSE, 1, 16,
              "expected an expression, got end of expression");
    parse_bad("t.cu", "// kevo size\n", KEVO_ERR_PARSE, 1, 13, "expected NAME=EXPR after 'size'");
    parse_bad("t.cu", "// kevo size M=2 N=M*(3\n", KEVO_ERR_PARSE, 1, 24, "expected ')'");
    parse_bad("t.cu", "// kevo task t\n// kevo size M=9223372036854775807 N=M+1\n" BODY,
              KEVO_ERR_OVERFLOW, 2, 39,
              "size 'N': expression overflows 64 bits");
}

static void test_errors_tensors(void **state)
{
    (void)state;
    parse_bad("t.cu", HEAD "// kevo input x f32[M,N]\n", KEVO_ERR_PARSE, 3, 25,
              "input 'x' needs an INIT (normal(MEAN,STD), uniform(LO,HI) or randint(LO,HI))");
    parse_bad("t.cu", HEAD "// kevo output y f32[M] normal(0,1)\n", KEVO_ERR_PARSE, 3, 25,
              "an output or scratch tensor takes no INIT, got 'normal(0,1)'");
    parse_bad("t.cu", HEAD "// kevo input x i32[M] normal(0,1)\n", KEVO_ERR_INVALID, 3, 24,
              "normal needs a float dtype; 'x' is i32 (use randint(LO,HI))");
    parse_bad("t.cu", HEAD "// kevo input x f16[M] randint(0,4)\n", KEVO_ERR_INVALID, 3, 24,
              "randint needs an integer or bool dtype; 'x' is f16 (use normal or uniform)");
    parse_bad("t.cu", HEAD "// kevo input x f32[M] gauss(0,1)\n", KEVO_ERR_PARSE, 3, 24,
              "expected INIT (normal(MEAN,STD), uniform(LO,HI) or randint(LO,HI)), "
              "got 'gauss(0,1)'");
    parse_bad("t.cu", HEAD "// kevo input x f32[M] normal(0,1,2)\n", KEVO_ERR_PARSE, 3, 24,
              "expected two arguments");
    parse_bad("t.cu", HEAD "// kevo input x f32[M] normal(0,abc)\n", KEVO_ERR_PARSE, 3, 33,
              "expected a float literal, got 'abc'");
    parse_bad("t.cu", HEAD "// kevo input x f32[M] normal(0,0)\n", KEVO_ERR_INVALID, 3, 33,
              "normal needs STD > 0, got 0");
    parse_bad("t.cu", HEAD "// kevo input x f32[M] uniform(1, 1)\n", KEVO_ERR_INVALID, 3, 32,
              "uniform needs LO < HI, got 1 and 1");
    parse_bad("t.cu", HEAD "// kevo input x f16[M] uniform(0, 1e6)\n", KEVO_ERR_INVALID, 3, 32,
              "values beyond the range of f16");
    parse_bad("t.cu", HEAD "// kevo input x f32 normal(0,1)\n", KEVO_ERR_PARSE, 3, 20,
              "expected '[' after the dtype (e.g. f32[M,N])");
    parse_bad("t.cu", HEAD "// kevo input x f32[M,N normal(0,1)\n", KEVO_ERR_PARSE, 3, 36,
              "expected ']' at the end of the shape");
    parse_bad("t.cu", HEAD "// kevo output y f32[1,1,1,1,1,1,1,1,1]\n", KEVO_ERR_PARSE, 3, 18,
              "a shape has at most 8 dimensions");
    parse_bad("t.cu", HEAD "// kevo output y f32[M,,N]\n", KEVO_ERR_PARSE, 3, 24,
              "expected an expression, got end of expression");
    parse_bad("t.cu", HEAD "// kevo output y f32[M,K]\n" TAIL_Y, KEVO_ERR_PARSE, 3, 24,
              "unknown name 'K' (expected a size name: M N)");
    parse_bad("t.cu", HEAD "// kevo input x f32[M] normal(0,1)\n// kevo output y f32[x]\n" TAIL,
              KEVO_ERR_PARSE, 4, 22, "unknown name 'x'");
    parse_bad("t.cu", HEAD "// kevo output\n", KEVO_ERR_PARSE, 3, 15,
              "expected 'output NAME DTYPE[SHAPE]'");
}

static void test_errors_randint(void **state)
{
    (void)state;
    parse_bad("t.cu", HEAD "// kevo input x u8[M] randint(0, 300)\n// kevo output y f32[M]\n" TAIL,
              KEVO_ERR_INVALID, 3, 34, "randint HI 300 is outside u8 (0..255, HI exclusive)");
    parse_bad("t.cu", HEAD "// kevo input x i8[M] randint(-129, 0)\n// kevo output y f32[M]\n" TAIL,
              KEVO_ERR_INVALID, 3, 31, "randint LO -129 is outside i8 (-128..127)");
    /* an empty range only under the second workload (N=1): names that workload */
    parse_bad("t.cu", "// kevo task t\n// kevo size M=64 N=32\n// kevo size M=8 N=1\n"
              "// kevo input x i32[M] randint(1, N)\n// kevo output y f32[M]\n" TAIL,
              KEVO_ERR_INVALID, 4, 35, "randint needs LO < HI (HI is exclusive), got 1 and 1 "
              "for the workload at line 3");
    parse_bad("t.cu", HEAD "// kevo input x i32[M] randint(0, K)\n// kevo output y f32[M]\n" TAIL,
              KEVO_ERR_PARSE, 3, 35, "unknown name 'K'");
    struct kevo_task *t = parse_ok("t.cu", HEAD "// kevo input x u8[M] randint(0, 256)\n"
                                   "// kevo input b bool[M] randint(0, 2)\n"
                                   "// kevo output y f32[M]\n" TAIL);
    kevo_task_free(t);
}

static void test_errors_scalars_tols(void **state)
{
    (void)state;
    parse_bad("t.cu", HEAD "// kevo scalar k u8 300\n", KEVO_ERR_INVALID, 3, 21,
              "300 does not fit in u8 (0..255)");
    parse_bad("t.cu", HEAD "// kevo scalar k i32 1.5\n", KEVO_ERR_PARSE, 3, 23,
              "expected an integer for i32: expected an operator or the end of the "
              "expression, got '.'");
    parse_bad("t.cu", HEAD "// kevo scalar e f32 1e-5x\n", KEVO_ERR_PARSE, 3, 22,
              "expected a float literal for f32, got '1e-5x'");
    parse_bad("t.cu", HEAD "// kevo scalar e f16 70000\n", KEVO_ERR_INVALID, 3, 22,
              "70000 does not fit in f16 (max 65504)");
    parse_bad("t.cu", HEAD "// kevo scalar e f32\n", KEVO_ERR_PARSE, 3, 21,
              "expected 'scalar NAME DTYPE VALUE'");
    parse_bad("t.cu", HEAD "// kevo tol rtol=1e-3\n", KEVO_ERR_PARSE, 3, 22,
              "tol needs both rtol=X and atol=Y (missing atol)");
    parse_bad("t.cu", HEAD "// kevo tol y rtol=1e-3 atol=-1\n", KEVO_ERR_INVALID, 3, 30,
              "a tolerance must be >= 0, got -1");
    parse_bad("t.cu", HEAD "// kevo tol y rtol=1e-3 btol=1\n", KEVO_ERR_PARSE, 3, 25,
              "expected rtol=X or atol=Y, got 'btol=1'");
    parse_bad("t.cu", HEAD "// kevo tol y rtol=1 rtol=2 atol=0\n", KEVO_ERR_PARSE, 3, 22,
              "rtol given twice");
    parse_bad("t.cu", HEAD "// kevo tol rtol=1 atol=0\n// kevo tol atol=1 rtol=0\n",
              KEVO_ERR_INVALID, 4, 9, "tol for all outputs declared twice (first at line 3)");
    parse_bad("t.cu", HEAD "// kevo tol y rtol=1 atol=0\n// kevo tol y atol=1 rtol=0\n",
              KEVO_ERR_INVALID, 4, 13, "tol for 'y' declared twice (first at line 3)");
    parse_bad("t.cu", HEAD "// kevo input x f32[M,N] normal(0,1)\n// kevo output y f32[M]\n"
              "// kevo tol x rtol=1 atol=0\n" TAIL, KEVO_ERR_INVALID, 5, 13,
              "tol names 'x', which is not an output (outputs: y)");
}

static void test_errors_bytes_flops(void **state)
{
    (void)state;
    parse_bad("t.cu", "// kevo task t\n"
              "// kevo size M=4611686018427387904\n"
              "// kevo input x u8[M] randint(0, 2)\n"
              "// kevo output y u8[M]\n"
              "// kevo bytes 8*M\n"
              "// kevo launch k grid=1 block=1 (x, y)\n",
              KEVO_ERR_OVERFLOW, 5, 16,
              "expression overflows 64 bits in 'bytes' for the workload at line 2");
    parse_bad("t.cu", HEAD "// kevo output y f32[M]\n// kevo bytes M-64\n"
              "// kevo launch k grid=1 block=1 (y)\n", KEVO_ERR_INVALID, 4, 15,
              "bytes must be positive, got 0 for the workload at line 2");
    parse_bad("t.cu", HEAD "// kevo output y f32[M]\n// kevo bytes 1\n// kevo flops -M\n"
              "// kevo launch k grid=1 block=1 (y)\n", KEVO_ERR_INVALID, 5, 15,
              "flops must be >= 0, got -64");
    parse_bad("t.cu", HEAD "// kevo flops 2*M on fp33\n", KEVO_ERR_PARSE, 3, 22,
              "expected unit (one of fp32 fp64 tf32 fp16 bf16 fp8), got 'fp33'");
    parse_bad("t.cu", HEAD "// kevo flops 2*M on\n", KEVO_ERR_PARSE, 3, 21,
              "expected a unit after 'on'");
    parse_bad("t.cu", HEAD "// kevo bytes 1\n// kevo bytes 2\n", KEVO_ERR_INVALID, 4, 9,
              "'bytes' declared twice (first at line 3)");
    parse_bad("t.cu", HEAD "// kevo bytes\n", KEVO_ERR_PARSE, 3, 14, "expected 'bytes EXPR'");
    parse_bad("t.cu", HEAD "// kevo torch\n", KEVO_ERR_PARSE, 3, 14, "expected 'torch EXPR'");
    parse_bad("t.cu", HEAD "// kevo bytes M/0\n", KEVO_ERR_INVALID, 3, 16, "division by zero");
}

/* torch lines join into one Python block; atomics is a flag without arguments. */
static void test_torch_block_and_atomics(void **state)
{
    (void)state;
    struct kevo_task *t = parse_ok("t.cu", HEAD BODY "// kevo torch  h = x * 2\n"
                                   "// kevo atomics\n// kevo torch  h + 1\n");
    assert_string_equal(t->torch, "h = x * 2\nh + 1");
    assert_int_equal(t->atomics, 1);
    kevo_task_free(t);
    t = parse_ok("t.cu", HEAD BODY);
    assert_null(t->torch);
    assert_int_equal(t->atomics, 0);
    kevo_task_free(t);
    parse_bad("t.cu", HEAD BODY "// kevo atomics yes\n", KEVO_ERR_PARSE, 7, 17,
              "expected 'atomics' with no arguments");
    parse_bad("t.cu", HEAD BODY "// kevo atomics\n// kevo atomics\n", KEVO_ERR_INVALID, 8, 9,
              "'atomics' declared twice (first at line 7)");
}

/* notes NAME...: the playbook notes a task asks its prompts to carry (ctl/playbook.h). */
static void test_notes(void **state)
{
    (void)state;
    struct kevo_task *t = parse_ok("t.cu", HEAD BODY "// kevo notes wgmma-and-tma\n"
                                   "// kevo notes row_reductions x2\n");
    assert_int_equal(t->n_notes, 3);
    assert_string_equal(t->notes[0], "wgmma-and-tma");
    assert_string_equal(t->notes[2], "x2");
    assert_int_equal(t->n_tags, 0);
    kevo_task_free(t);
    parse_bad("t.cu", HEAD BODY "// kevo notes\n", KEVO_ERR_PARSE, 7, 14,
              "expected 'notes NAME...'");
    parse_bad("t.cu", HEAD BODY "// kevo notes ok Wgmma.md\n", KEVO_ERR_PARSE, 7, 18,
              "expected a note name of [a-z0-9_-]+, got 'Wgmma.md'");
    t = parse_ok("softmax.cu", softmax_cu);
    cand_bad(t, "c.cu", "// kevo notes wgmma-and-tma\n", KEVO_ERR_INVALID, 1, 9,
             "a candidate may not declare 'notes'");
    kevo_task_free(t);
}

/* The parser's directive rule, as the text-rewriting modules see it. */
static void test_directive_rule(void **state)
{
    const char *kw;
    size_t n;
    (void)state;
    const char *l = "  //\tkevo  size N=1";
    assert_true(kevo_task_directive(l, strlen(l), &kw, &n));
    assert_int_equal(n, 4);
    assert_memory_equal(kw, "size", 4);
    l = "// kevo atomics\r";
    assert_true(kevo_task_directive(l, strlen(l), &kw, &n));
    assert_int_equal(n, 7);
    l = "// kevo";
    assert_true(kevo_task_directive(l, strlen(l), &kw, &n));
    assert_int_equal(n, 0);
    const char *not[] = { "//kevo size N=1", "/// kevo size", "// kevox size", "/* kevo size */",
                          "x // kevo size", "// see kevo docs" };
    for (size_t i = 0; i < sizeof not / sizeof *not; i++)
        assert_false(kevo_task_directive(not[i], strlen(not[i]), &kw, &n));
}

static void test_errors_shapes_under_workloads(void **state)
{
    (void)state;
    parse_bad("t.cu", HEAD "// kevo size M=0 N=1\n// kevo output y f32[M, N]\n" TAIL_Y,
              KEVO_ERR_INVALID, 4, 22, "dimension 1 of 'y' is 0; shape dimensions must be "
              "positive for the workload at line 3");
    parse_bad("t.cu", "// kevo task t\n// kevo size M=4294967296 N=4294967296\n"
              "// kevo output y u8[M, N]\n" TAIL_Y, KEVO_ERR_OVERFLOW, 3, 18,
              "the element count of 'y' overflows 64 bits for the workload at line 2");
    parse_bad("t.cu", "// kevo task t\n// kevo size M=4294967296 N=1073741824\n"
              "// kevo output y f64[M, N]\n" TAIL_Y, KEVO_ERR_OVERFLOW, 3, 18,
              "'y' has 4611686018427387904 elements of 8 bytes: its size overflows 64 bits");
    parse_bad("t.cu", HEAD "// kevo holdout M=2 N=0\n// kevo output y f32[M/N]\n" TAIL_Y,
              KEVO_ERR_INVALID, 4, 23, "division by zero in the shape of 'y' for the workload "
              "at line 3");
}

static void test_errors_launch(void **state)
{
    char text[4096];
    size_t o;
    (void)state;
#define OUT HEAD "// kevo input x f32[M,N] normal(0,1)\n// kevo output y f32[M,N]\n" \
            "// kevo bytes 1\n"
    parse_bad("t.c", OUT "// kevo launch k grid=1 block=1 (x)\n", KEVO_ERR_INVALID, 6, 9,
              "'launch' is for CUDA (.cu) files; a C file uses 'call FUNCTION(ARG, ...)'");
    parse_bad("t.cu", OUT "// kevo call f(x)\n", KEVO_ERR_INVALID, 6, 9,
              "'call' is for C (.c) files");
    parse_bad("t.cu", OUT "// kevo launch k block=1 (x)\n", KEVO_ERR_PARSE, 6, 9,
              "launch needs grid=G");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 (x)\n", KEVO_ERR_PARSE, 6, 9,
              "launch needs block=B");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 block=1\n", KEVO_ERR_PARSE, 6, 32,
              "expected the argument list '(ARG, ...)' at the end of the launch line");
    parse_bad("t.cu", OUT "// kevo launch k gird=1 block=1 (x)\n", KEVO_ERR_PARSE, 6, 18,
              "expected grid=G, block=B, smem=S or the argument list '(ARG, ...)', got 'gird=1'");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 grid=2 block=1 (x)\n", KEVO_ERR_PARSE, 6, 25,
              "'grid=' given twice");
    parse_bad("t.cu", OUT "// kevo launch k grid=(1,2,3,4) block=1 (x)\n", KEVO_ERR_PARSE, 6, 23,
              "grid takes at most 3 components (x,y,z)");
    parse_bad("t.cu", OUT "// kevo launch k grid=(1,,3) block=1 (x)\n", KEVO_ERR_PARSE, 6, 26,
              "expected an expression");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 block=1 (x) y\n", KEVO_ERR_PARSE, 6, 37,
              "unexpected 'y' after the argument list");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 block=1 (x,, y)\n", KEVO_ERR_PARSE, 6, 36,
              "expected an argument (a tensor, a scalar or an integer expression), got nothing");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 block=1 (x, z)\n", KEVO_ERR_PARSE, 6, 37,
              "unknown argument 'z' (expected a tensor, a scalar, or an integer expression over "
              "the size names: M N)");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 block=1 (x, M+K)\n", KEVO_ERR_PARSE, 6, 39,
              "unknown name 'K'");
    parse_bad("t.cu", OUT "// kevo launch 9k grid=1 block=1 (x)\n", KEVO_ERR_PARSE, 6, 16,
              "expected a kernel name, got '9k'");
    parse_bad("t.cu", OUT "// kevo launch k grid=M-64 block=1 (x)\n", KEVO_ERR_INVALID, 6, 23,
              "grid must be between 1 and 4294967295, got 0 for the workload at line 2");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 block=(32, M*M*M*M*M*M) (x)\n",
              KEVO_ERR_INVALID, 6, 36, "block must be between 1 and 4294967295, got");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 block=1 smem=-1 (x)\n", KEVO_ERR_INVALID, 6,
              38, "smem must be between 0 and 4294967295, got -1");
    parse_bad("t.cu", OUT "// kevo launch k grid=1 block=1 (x, N/(M-64))\n", KEVO_ERR_INVALID, 6,
              38, "division by zero in argument 2 of 'k' for the workload at line 2");
    parse_bad("t.c", OUT "// kevo call f x\n", KEVO_ERR_PARSE, 6, 16,
              "expected 'call FUNCTION(ARG, ...)'");
    parse_bad("t.c", OUT "// kevo call f(x\n", KEVO_ERR_PARSE, 6, 17,
              "expected ')' at the end of the argument list");
    /* 64 arguments are fine, 65 are not */
    o = (size_t)snprintf(text, sizeof text, "%s// kevo launch k grid=1 block=1 (x", OUT);
    for (int i = 1; i < 64; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, ", %d", i);
    snprintf(text + o, sizeof text - o, ")\n");
    kevo_task_free(parse_ok("t.cu", text));
    snprintf(text + o, sizeof text - o, ", 64)\n");
    parse_bad("t.cu", text, KEVO_ERR_TOOBIG, 6, 33, "too many arguments (at most 64)");
#undef OUT
}

static void test_errors_bytes_in_file(void **state)
{
    static const char nul[] = "// kevo task t\n// kevo si\0ze M=1\n";
    struct kevo_task *t = NULL;
    char *msg = NULL;
    size_t big = ((size_t)16 << 20) + 1;
    char *huge;
    (void)state;
    assert_int_equal(kevo_task_parse("n.cu", nul, sizeof nul - 1, &t, &msg), KEVO_ERR_PARSE);
    check_msg(msg, "n.cu", 2, 11, "NUL byte in the file");
    kevo_free(msg);
    huge = kevo_malloc(big);
    assert_non_null(huge);
    memset(huge, ' ', big);
    assert_int_equal(kevo_task_parse("h.cu", huge, big, &t, &msg), KEVO_ERR_TOOBIG);
    check_msg(msg, "h.cu", 1, 1, "file is larger than 16 MiB");
    kevo_free(msg);
    kevo_free(huge);
    /* control bytes in a token are escaped in the message */
    parse_bad("t.cu", "// kevo \x1b\x01task t\n", KEVO_ERR_PARSE, 1, 9,
              "unknown keyword '\\x1b\\x01task'");
}

/* ---- tolerances, flags, dtypes ---- */

static void test_tolerances(void **state)
{
    struct kevo_task *t = parse_ok("t.cu", HEAD
        "// kevo output y f32[M]\n// kevo output z bf16[M]\n// kevo output w i32[M]\n"
        "// kevo tol z rtol=0.5 atol=0.25\n"
        "// kevo bytes 1\n// kevo launch k grid=1 block=1 (y, z, w)\n");
    struct kevo_task *u = parse_ok("t.cu", HEAD
        "// kevo output y f32[M]\n// kevo output z bf16[M]\n"
        "// kevo tol atol=0 rtol=3e-2\n// kevo tol z rtol=0.5 atol=0.25\n"
        "// kevo bytes 1\n// kevo launch k grid=1 block=1 (y, z)\n");
    static const struct { enum kevo_dtype dt; double r, a; } defaults[] = {
        { KEVO_F64, 1e-7, 1e-9 }, { KEVO_F32, 1e-4, 1e-5 }, { KEVO_F16, 1e-2, 1e-3 },
        { KEVO_BF16, 2e-2, 1e-2 }, { KEVO_FP8E4M3, 1.25e-1, 1e-1 },
        { KEVO_FP8E5M2, 1.25e-1, 1e-1 }, { KEVO_I64, 0, 0 }, { KEVO_I32, 0, 0 },
        { KEVO_I16, 0, 0 }, { KEVO_I8, 0, 0 }, { KEVO_U8, 0, 0 }, { KEVO_BOOL, 0, 0 },
    };
    double r, a;
    (void)state;
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) {
        kevo_task_tol(t, "y", defaults[i].dt, &r, &a);
        assert_true(r == defaults[i].r && a == defaults[i].a);
    }
    kevo_task_tol(t, "z", KEVO_BF16, &r, &a);        /* per-output line */
    assert_true(r == 0.5 && a == 0.25);
    kevo_task_tol(u, "y", KEVO_F32, &r, &a);         /* all-outputs line beats the default */
    assert_true(r == 3e-2 && a == 0);
    kevo_task_tol(u, "z", KEVO_BF16, &r, &a);        /* per-output beats all-outputs */
    assert_true(r == 0.5 && a == 0.25);
    assert_int_equal(t->n_tols, 1);
    assert_string_equal(t->tols[0].name, "z");
    assert_null(u->tols[0].name);
    kevo_task_free(t);
    kevo_task_free(u);
}

static void test_flags(void **state)
{
    static const char *cuda_ok[] = { "-use_fast_math", "-ftz=true", "-ftz=false",
        "-prec-div=false", "-prec-sqrt=true", "-fmad=false", "-maxrregcount=16",
        "-maxrregcount=255", "-maxrregcount=128", "-lineinfo", "-restrict",
        "-extra-device-vectorization" };
    static const char *cuda_no[] = { "-O3", "-maxrregcount=15", "-maxrregcount=256",
        "-maxrregcount=064", "-maxrregcount=", "-maxrregcount=1e2", "-ftz=1", "--use_fast_math",
        "-use_fast_math ", "-I/etc", "-Xptxas", "" };
    static const char *c_ok[] = { "-O1", "-O2", "-O3", "-Ofast", "-march=native",
        "-mtune=native", "-ffast-math", "-funroll-loops", "-fopenmp", "-fno-math-errno",
        "-fno-trapping-math", "-fomit-frame-pointer" };
    static const char *c_no[] = { "-O4", "-use_fast_math", "-fplugin=x.so", "-o", "-B/tmp",
        "-march=skylake", "-Wl,-rpath" };
    (void)state;
    for (size_t i = 0; i < sizeof cuda_ok / sizeof *cuda_ok; i++)
        assert_true(kevo_flag_allowed(KEVO_LANG_CUDA, cuda_ok[i]));
    for (size_t i = 0; i < sizeof cuda_no / sizeof *cuda_no; i++)
        if (kevo_flag_allowed(KEVO_LANG_CUDA, cuda_no[i]))
            fail_msg("CUDA flag '%s' allowed", cuda_no[i]);
    for (size_t i = 0; i < sizeof c_ok / sizeof *c_ok; i++)
        assert_true(kevo_flag_allowed(KEVO_LANG_C, c_ok[i]));
    for (size_t i = 0; i < sizeof c_no / sizeof *c_no; i++)
        if (kevo_flag_allowed(KEVO_LANG_C, c_no[i]))
            fail_msg("C flag '%s' allowed", c_no[i]);
    assert_false(kevo_flag_allowed(KEVO_LANG_C, NULL));
}

static void test_dtypes_units(void **state)
{
    static const char *names[] = { "f64", "f32", "f16", "bf16", "fp8e4m3", "fp8e5m2", "i64",
                                   "i32", "i16", "i8", "u8", "bool" };
    static const size_t sizes[] = { 8, 4, 2, 2, 1, 1, 8, 4, 2, 1, 1, 1 };
    enum kevo_dtype dt;
    (void)state;
    for (int i = 0; i < KEVO_DTYPE_COUNT; i++) {
        assert_string_equal(kevo_dtype_name((enum kevo_dtype)i), names[i]);
        assert_int_equal(kevo_dtype_size((enum kevo_dtype)i), sizes[i]);
        assert_int_equal(kevo_dtype_is_float((enum kevo_dtype)i), i <= KEVO_FP8E5M2);
        assert_int_equal(kevo_dtype_parse(names[i], strlen(names[i]), &dt), 0);
        assert_int_equal(dt, i);
    }
    assert_int_equal(kevo_dtype_parse("f32x", 3, &dt), 0);   /* length-bounded */
    assert_int_equal(dt, KEVO_F32);
    assert_int_equal(kevo_dtype_parse("f3", 2, &dt), -1);
    assert_string_equal(kevo_dtype_name(KEVO_DTYPE_COUNT), "unknown");
    assert_int_equal(kevo_dtype_size(KEVO_DTYPE_COUNT), 0);
    assert_string_equal(kevo_unit_name(KEVO_UNIT_TF32), "tf32");
    assert_string_equal(kevo_unit_name(KEVO_UNIT_FP8), "fp8");
    assert_string_equal(kevo_unit_name(KEVO_UNIT_COUNT), "unknown");
}

/* ---- files ---- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static void test_load(void **state)
{
    char dir[] = "/tmp/kevo_test_task_XXXXXX", path[128], cpath[128];
    struct kevo_task *t = NULL, *c = NULL;
    char *msg = NULL;
    int fd;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/softmax.cu", dir);
    snprintf(cpath, sizeof cpath, "%s/cand.cu", dir);
    write_file(path, softmax_cu);
    write_file(cpath, softmax_cand);
    assert_int_equal(kevo_task_load(path, &t, &msg), KEVO_OK);
    assert_string_equal(t->path, path);
    assert_int_equal(kevo_candidate_load(t, cpath, &c, &msg), KEVO_OK);
    assert_int_equal(c->n_params, 1);
    kevo_task_free(c);
    /* errors name the file */
    snprintf(cpath, sizeof cpath, "%s/missing.cu", dir);
    assert_int_equal(kevo_candidate_load(t, cpath, &c, &msg), KEVO_ERR_IO);
    assert_null(c);
    assert_non_null(strstr(msg, cpath));
    assert_non_null(strstr(msg, ": error: cannot open: No such file or directory"));
    kevo_free(msg);
    assert_int_equal(kevo_task_load(dir, &c, &msg), KEVO_ERR_IO);
    assert_non_null(strstr(msg, "cannot read: Is a directory"));
    kevo_free(msg);
    kevo_task_free(t);
    /* bigger than 16 MiB: refused before reading */
    snprintf(cpath, sizeof cpath, "%s/big.cu", dir);
    fd = open(cpath, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, ((off_t)16 << 20) + 1), 0);
    close(fd);
    assert_int_equal(kevo_task_load(cpath, &t, &msg), KEVO_ERR_TOOBIG);
    assert_null(t);
    assert_non_null(strstr(msg, "big.cu: error: file is larger than 16 MiB"));
    kevo_free(msg);
    /* a parse error in a loaded file carries the path */
    write_file(path, "// kevo task Bad\n");
    assert_int_equal(kevo_task_load(path, &t, &msg), KEVO_ERR_PARSE);
    check_msg(msg, path, 1, 14, "expected 'task NAME'");
    kevo_free(msg);
    unlink(path);
    unlink(cpath);
    snprintf(cpath, sizeof cpath, "%s/cand.cu", dir);
    unlink(cpath);
    assert_int_equal(rmdir(dir), 0);
}

static void test_null_args(void **state)
{
    struct kevo_task *c = (struct kevo_task *)1;
    char *msg = NULL;
    (void)state;
    kevo_task_free(NULL);
    assert_int_equal(kevo_candidate_parse(NULL, "c.cu", "", 0, &c, &msg), KEVO_ERR_INVALID);
    assert_null(c);
    assert_non_null(msg);
    kevo_free(msg);
    /* NULL out_msg is allowed */
    assert_int_equal(kevo_task_parse("t.cu", "x", 1, &c, NULL), KEVO_ERR_PARSE);
    assert_null(c);
}

/* ---- allocation failures ---- */

enum which { PARSE_TASK, PARSE_CAND, PARSE_BAD_TASK, PARSE_BAD_CAND, ENV_MSGS };

/* Run one operation with the nth allocation failing; KEVO_OK, or what it returned. */
static enum kevo_status run_once(enum which w, const struct kevo_task *task)
{
    struct kevo_task *t = NULL;
    struct kevo_env env;
    char *msg = NULL;
    int64_t v;
    enum kevo_status st = KEVO_OK;
    static const char *bad_cand = "// kevo param B 1 2\n// kevo scratch s f32[B]\n"
                                  "// kevo launch k grid=M block=B (x, s, junk)\n";
    static const char *good_cand = "// kevo doc a\n// kevo doc b\n"
                                   "// kevo param T 1 2\n// kevo scratch s f32[M*T]\n"
                                   "// kevo flags -use_fast_math\n"
                                   "// kevo launch k grid=(M,2) block=T (x, s, y, N)\n";
    static const char *bad_task = HEAD "// kevo output y f32[M]\n// kevo bytes 8*M*N\n"
                                  "// kevo size M=9223372036854775807 N=2\n"
                                  "// kevo launch k grid=M block=N (y)\n";

    switch (w) {
    case PARSE_TASK:
        st = kevo_task_parse("softmax.cu", softmax_cu, strlen(softmax_cu), &t, &msg);
        break;
    case PARSE_CAND:
        st = kevo_candidate_parse(task, "c.cu", good_cand, strlen(good_cand), &t, &msg);
        break;
    case PARSE_BAD_TASK:
        st = kevo_task_parse("t.cu", bad_task, strlen(bad_task), &t, &msg);
        break;
    case PARSE_BAD_CAND:
        st = kevo_candidate_parse(task, "c.cu", bad_cand, strlen(bad_cand), &t, &msg);
        break;
    case ENV_MSGS:
        st = kevo_task_env(task, 1, NULL, NULL, &env, &msg);
        if (!st) {
            kevo_free(msg);
            msg = NULL;
            st = kevo_env_eval(&env, "M*Q", &v, &msg);
        }
        break;
    }
    if (st == KEVO_OK && w != ENV_MSGS)
        assert_non_null(t);
    else
        assert_null(t);
    if (st && st != KEVO_ERR_NOMEM)
        assert_non_null(msg);
    kevo_task_free(t);
    kevo_free(msg);
    return st;
}

/* Fail allocation 1, 2, 3, ... until the operation no longer fails for lack of memory:
 * every failure point must report KEVO_ERR_NOMEM and leak nothing (valgrind/ASan). */
static void fail_every_allocation(enum which w, const struct kevo_task *task,
                                  enum kevo_status final, long min_points)
{
    long n;
    enum kevo_status st = KEVO_ERR_NOMEM;
    for (n = 1; st == KEVO_ERR_NOMEM && n < 100000; n++) {
        kevo_mem_fail_after(n);
        st = run_once(w, task);
        kevo_mem_fail_after(0);
    }
    if (st != final)
        fail_msg("case %d: after %ld failure points got status %d, want %d", w, n, st, final);
    if (n - 2 < min_points)
        fail_msg("case %d: only %ld allocation failure points", w, n - 2);
}

static void test_allocation_failures(void **state)
{
    struct kevo_task *t = parse_ok("softmax.cu", softmax_cu);
    (void)state;
    fail_every_allocation(PARSE_TASK, NULL, KEVO_OK, 40);
    fail_every_allocation(PARSE_CAND, t, KEVO_OK, 20);
    fail_every_allocation(PARSE_BAD_TASK, NULL, KEVO_ERR_OVERFLOW, 20);
    fail_every_allocation(PARSE_BAD_CAND, t, KEVO_ERR_PARSE, 10);
    fail_every_allocation(ENV_MSGS, t, KEVO_ERR_PARSE, 1);
    kevo_task_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_example),
        cmocka_unit_test(test_c_task_crlf),
        cmocka_unit_test(test_directive_detection),
        cmocka_unit_test(test_shapes_and_exprs),
        cmocka_unit_test(test_env_workloads),
        cmocka_unit_test(test_env_earlier_names),
        cmocka_unit_test(test_env_runtime_error),
        cmocka_unit_test(test_candidate),
        cmocka_unit_test(test_candidate_errors),
        cmocka_unit_test(test_candidate_holdout_hidden),
        cmocka_unit_test(test_candidate_many_combos),
        cmocka_unit_test(test_errors_keywords_and_names),
        cmocka_unit_test(test_errors_missing),
        cmocka_unit_test(test_errors_sizes),
        cmocka_unit_test(test_errors_tensors),
        cmocka_unit_test(test_errors_randint),
        cmocka_unit_test(test_errors_scalars_tols),
        cmocka_unit_test(test_errors_bytes_flops),
        cmocka_unit_test(test_torch_block_and_atomics),
        cmocka_unit_test(test_notes),
        cmocka_unit_test(test_directive_rule),
        cmocka_unit_test(test_errors_shapes_under_workloads),
        cmocka_unit_test(test_errors_launch),
        cmocka_unit_test(test_errors_bytes_in_file),
        cmocka_unit_test(test_tolerances),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_dtypes_units),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_null_args),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

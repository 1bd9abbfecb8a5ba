/*
 * test_backend_cpu - the CPU backend: prototype finding, compiling, argument conversion,
 * the shared arena, the verification ops (verify.c run on the arena in place), and the
 * sandboxed runner under faults and hostile candidates.
 * Every test opens its own backend (an arena and a spawner process) and closes it.
 */
#include "testutil.h"

#include "worker/backend.h"
#include "worker/backend_cpu.h"
#include "worker/backend_cpu_shim.h"
#include "base/buf.h"
#include "base/clock.h"
#include "judge_cases.h"
#include "base/mem.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct fx {
    struct kevo_backend b;
    struct kevo_buf err, log;
    char dir[64];             /* scratch dir for files candidates try to create */
};

static int setup(void **state)
{
    struct fx *f = kevo_calloc(1, sizeof *f);
    if (!f)
        return -1;
    kevo_buf_init(&f->err, 1 << 16);
    kevo_buf_init(&f->log, 1 << 20);
    snprintf(f->dir, sizeof f->dir, "/tmp/kevo-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    if (kevo_backend_open_cpu(&f->b, &f->err) != KEVO_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char cmd[128];
    kevo_backend_close(&f->b);
    assert_null(f->b.ops);
    kevo_buf_free(&f->err);
    kevo_buf_free(&f->log);
    snprintf(cmd, sizeof cmd, "%s", f->dir);
    rmdir(cmd);
    kevo_free(f);
    return 0;
}

static struct kevo_val P(uint64_t p)
{
    return (struct kevo_val){ .kind = KEVO_VAL_PTR, .ptr = p };
}

static struct kevo_val I(int64_t i)
{
    return (struct kevo_val){ .kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = i };
}

static struct kevo_val F(double d)
{
    return (struct kevo_val){ .kind = KEVO_VAL_FLOAT, .dtype = KEVO_F64, .f = d };
}

/* Compile src with one entry; returns the module's status, the module in *m. */
static enum kevo_status compile_n(struct fx *f, const char *path, const char *src,
                                  const char *const *entries, int n, struct kevo_module **m)
{
    struct kevo_compile_req req = { .path = path, .source = src, .source_len = strlen(src),
                                    .n_entries = n, .entries = entries };
    kevo_buf_reset(&f->log);
    return f->b.ops->compile(f->b.ctx, &req, m, &f->log);
}

static struct kevo_module *compile1(struct fx *f, const char *src, const char *entry)
{
    struct kevo_module *m = NULL;
    const char *e[1] = { entry };
    enum kevo_status st = compile_n(f, "tests/cand.c", src, e, 1, &m);
    if (st != KEVO_OK)
        fprintf(stderr, "compile failed: %s\n", kevo_buf_str(&f->log));
    assert_int_equal(st, KEVO_OK);
    assert_non_null(m);
    return m;
}

/* One call of entry 0: launch + sync; the first failing status. */
static enum kevo_status run1(struct fx *f, struct kevo_module *m, const struct kevo_val *args,
                             int n)
{
    struct kevo_call c;
    memset(&c, 0, sizeof c);
    c.entry = 0;
    c.n_args = n;
    memcpy(c.args, args, sizeof *args * (size_t)n);
    kevo_buf_reset(&f->err);
    enum kevo_status st = f->b.ops->launch(f->b.ctx, m, &c, 1, &f->err);
    if (st)
        return st;
    return f->b.ops->sync(f->b.ctx, &f->err);
}

static uint64_t dalloc(struct fx *f, size_t n)
{
    uint64_t a = 0;
    assert_int_equal(f->b.ops->alloc(f->b.ctx, n, &a), KEVO_OK);
    assert_true(a != 0);
    return a;
}

static int64_t read_i64(struct fx *f, uint64_t a)
{
    int64_t v = 0;
    assert_int_equal(f->b.ops->download(f->b.ctx, &v, a, sizeof v), KEVO_OK);
    return v;
}

/* A module that adds one to *p: proves the backend still works after a fault. */
static void assert_backend_works(struct fx *f)
{
    struct kevo_module *m = compile1(f, "void inc(long *p) { *p += 1; }\n", "inc");
    uint64_t a = dalloc(f, 8);
    int64_t v = 41;
    assert_int_equal(f->b.ops->upload(f->b.ctx, a, &v, sizeof v), KEVO_OK);
    struct kevo_val arg = P(a);
    assert_int_equal(run1(f, m, &arg, 1), KEVO_OK);
    assert_int_equal(read_i64(f, a), 42);
    f->b.ops->free(f->b.ctx, a);
    f->b.ops->module_free(f->b.ctx, m);
}

/* ---- prototypes ---- */

static void find(const char *src, const char *name, enum kevo_status want,
                 struct kevo_cproto *p)
{
    struct kevo_buf msg;
    kevo_buf_init(&msg, 1024);
    assert_int_equal(kevo_cproto_find(src, strlen(src), name, p, &msg), want);
    kevo_buf_free(&msg);
}

static void test_proto_find(void **state)
{
    (void)state;
    struct kevo_cproto p;
    const char *src =
        "#include <stddef.h>\n"
        "/* void f(int decoy); */\n"
        "// void f(char decoy);\n"
        "#define f_macro(x) f(x)\n"
        "static const char *s = \"void f(double decoy) {\";\n"
        "typedef float real;\n"
        "void f(const float *restrict x, float y[], real alpha, unsigned long,\n"
        "       float m[][4], void (*cb)(int), struct s *sp, size_t);\n"
        "void f(const float *restrict x, float y[], real alpha, unsigned long n,\n"
        "       float m[][4], void (*cb)(int), struct s *sp, size_t k)\n"
        "{\n    int f = 0; (void)f;\n}\n"
        "int g(void) { return 0; }\n"
        "int h() { return 0; }\n"
        "void v(int n, ...) { }\n"
        "int use(void) { return g(); }\n";

    find(src, "f", KEVO_OK, &p);
    assert_int_equal(p.n_params, 8);
    assert_int_equal(p.line, 9);   // the definition wins over the declaration on line 7
    assert_string_equal(p.types[0], "const float *restrict");
    assert_string_equal(p.types[1], "float *");
    assert_string_equal(p.types[2], "real");
    assert_string_equal(p.types[3], "unsigned long");
    assert_string_equal(p.types[4], "float (*)[4]");
    assert_string_equal(p.types[5], "void (*)(int)");
    assert_string_equal(p.types[6], "struct s *");
    assert_string_equal(p.types[7], "size_t");
    kevo_cproto_clear(&p);

    find(src, "g", KEVO_OK, &p);
    assert_int_equal(p.n_params, 0);
    kevo_cproto_clear(&p);
    find(src, "h", KEVO_OK, &p);
    assert_int_equal(p.n_params, 0);
    kevo_cproto_clear(&p);
    find(src, "v", KEVO_ERR_UNSUPPORTED, &p);
    find(src, "decoy", KEVO_ERR_NOTFOUND, &p);
    find(src, "f_macro", KEVO_ERR_NOTFOUND, &p);
    find(src, "s", KEVO_ERR_NOTFOUND, &p);
}

static void test_arg_check(void **state)
{
    (void)state;
    struct kevo_shim_param i32 = { KEVO_SHIM_CLS_INT, 4, 1, 0 };
    struct kevo_shim_param u32 = { KEVO_SHIM_CLS_INT, 4, 0, 0 };
    struct kevo_shim_param u64 = { KEVO_SHIM_CLS_INT, 8, 0, 0 };
    struct kevo_shim_param i8 = { KEVO_SHIM_CLS_INT, 1, 1, 0 };
    struct kevo_shim_param b = { KEVO_SHIM_CLS_INT, 1, 0, 1 };
    struct kevo_shim_param fl = { KEVO_SHIM_CLS_REAL, 4, 1, 0 };
    struct kevo_shim_param ptr = { KEVO_SHIM_CLS_PTR, 8, 0, 0 };
    struct kevo_shim_param rec = { 12, 8, 0, 0 };
    struct kevo_val v;

    v = I(2147483647);
    assert_int_equal(kevo_cpu_arg_check(&i32, &v), KEVO_ARG_FITS);
    v = I(2147483648LL);
    assert_int_equal(kevo_cpu_arg_check(&i32, &v), KEVO_ARG_RANGE);
    v = I(-2147483648LL);
    assert_int_equal(kevo_cpu_arg_check(&i32, &v), KEVO_ARG_FITS);
    v = I(4294967295LL);
    assert_int_equal(kevo_cpu_arg_check(&u32, &v), KEVO_ARG_FITS);
    v = I(-1);
    assert_int_equal(kevo_cpu_arg_check(&u32, &v), KEVO_ARG_RANGE);
    assert_int_equal(kevo_cpu_arg_check(&u64, &v), KEVO_ARG_RANGE);
    v = I(-128);
    assert_int_equal(kevo_cpu_arg_check(&i8, &v), KEVO_ARG_FITS);
    v = I(128);
    assert_int_equal(kevo_cpu_arg_check(&i8, &v), KEVO_ARG_RANGE);
    v = I(2);
    assert_int_equal(kevo_cpu_arg_check(&b, &v), KEVO_ARG_RANGE);
    v = I(1);
    assert_int_equal(kevo_cpu_arg_check(&b, &v), KEVO_ARG_FITS);
    v = F(-0.5);   // truncates to 0: C defines it
    assert_int_equal(kevo_cpu_arg_check(&u32, &v), KEVO_ARG_FITS);
    v = F(4294967296.0);
    assert_int_equal(kevo_cpu_arg_check(&u32, &v), KEVO_ARG_RANGE);
    v = F(2147483647.9);
    assert_int_equal(kevo_cpu_arg_check(&i32, &v), KEVO_ARG_FITS);
    v = F(0.0 / 0.0);
    assert_int_equal(kevo_cpu_arg_check(&i32, &v), KEVO_ARG_RANGE);
    v = F(1e300);
    assert_int_equal(kevo_cpu_arg_check(&fl, &v), KEVO_ARG_FITS);
    assert_int_equal(kevo_cpu_arg_check(&ptr, &v), KEVO_ARG_NEED_PTR);
    v = P(4096);
    assert_int_equal(kevo_cpu_arg_check(&ptr, &v), KEVO_ARG_FITS);
    assert_int_equal(kevo_cpu_arg_check(&i32, &v), KEVO_ARG_NOT_PTR);
    assert_int_equal(kevo_cpu_arg_check(&rec, &v), KEVO_ARG_BAD_TYPE);
}

/* ---- compiling ---- */

static void test_compile_ok(void **state)
{
    struct fx *f = *state;
    struct kevo_func_info fi;
    struct kevo_module *m = compile1(f, "void saxpy(const float *x, float *y, int n, float a)\n"
                                        "{ for (int i = 0; i < n; i++) y[i] += a * x[i]; }\n",
                                     "saxpy");
    assert_int_equal(f->b.ops->func_info(f->b.ctx, m, 0, &fi), KEVO_OK);
    assert_int_equal(fi.n_params, 4);
    assert_int_equal(fi.param_size[0], 0);
    assert_int_equal(f->b.ops->func_info(f->b.ctx, m, 1, &fi), KEVO_ERR_NOTFOUND);
    assert_null(f->b.ops->occupancy);
    f->b.ops->module_free(f->b.ctx, m);
    f->b.ops->module_free(f->b.ctx, NULL);
}

static void test_compile_error(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = NULL;
    const char *e[1] = { "bad" };
    const char *src = "// kevo call bad(x)\n\nvoid bad(float *x)\n{\n"
                      "    x[0] = undeclared_name;\n}\n";

    assert_int_equal(compile_n(f, "tasks/my_task.c", src, e, 1, &m), KEVO_ERR_COMPILE);
    assert_null(m);
    const char *log = kevo_buf_str(&f->log);
    assert_non_null(strstr(log, "tasks/my_task.c:5:"));   // the user's path and line
    assert_non_null(strstr(log, "undeclared_name"));
    assert_null(strstr(log, "kevo-cc-"));                 // no temp path
}

static void test_compile_params_and_flags(void **state)
{
    struct fx *f = *state;
    const char *names[1] = { "WIDTH" };
    const int64_t values[1] = { 7 };
    const char *flags[2] = { "-O1", "-ffast-math" };
    const char *e[1] = { "width" };
    const char *src = "void width(long *o) { *o = WIDTH; }\n";
    struct kevo_compile_req req = { .path = "w.c", .source = src, .source_len = strlen(src),
                                    .n_defines = 1, .define_names = names,
                                    .define_values = values, .n_flags = 2, .flags = flags,
                                    .n_entries = 1, .entries = e };
    struct kevo_module *m = NULL;

    assert_int_equal(f->b.ops->compile(f->b.ctx, &req, &m, &f->log), KEVO_OK);
    uint64_t a = dalloc(f, 8);
    struct kevo_val arg = P(a);
    assert_int_equal(run1(f, m, &arg, 1), KEVO_OK);
    assert_int_equal(read_i64(f, a), 7);
    f->b.ops->module_free(f->b.ctx, m);

    // a bad define name is the caller's mistake, not a compile error
    const char *bad[1] = { "1X" };
    req.define_names = bad;
    assert_int_equal(f->b.ops->compile(f->b.ctx, &req, &m, &f->log), KEVO_ERR_INVALID);
}

static void test_compile_entry_problems(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = NULL;
    const char *nope[1] = { "nope" };
    const char *var[1] = { "var" };
    const char *st[1] = { "bystruct" };
    const char *undef[1] = { "only_declared" };

    assert_int_equal(compile_n(f, "a/cand.c", "void f(void) {}\n", nope, 1, &m),
                     KEVO_ERR_COMPILE);
    assert_non_null(strstr(kevo_buf_str(&f->log), "function 'nope' not found in a/cand.c"));
    assert_int_equal(compile_n(f, "a/cand.c", "void var(int n, ...) {}\n", var, 1, &m),
                     KEVO_ERR_COMPILE);
    assert_non_null(strstr(kevo_buf_str(&f->log), "variadic"));
    assert_int_equal(compile_n(f, "a/cand.c", "struct s { int a; };\nvoid bystruct(struct s v)"
                                              " { (void)v; }\n", st, 1, &m),
                     KEVO_ERR_COMPILE);
    assert_non_null(strstr(kevo_buf_str(&f->log),
                           "parameter 1 of bystruct() has type struct s, which cannot be passed"));
    assert_int_equal(compile_n(f, "a/cand.c", "void only_declared(int n);\n", undef, 1, &m),
                     KEVO_ERR_COMPILE);   // link error, not a load failure later
    assert_non_null(strstr(kevo_buf_str(&f->log), "only_declared"));
    assert_null(m);
}

static void test_compile_check(void **state)
{
    (void)state;
    struct kevo_buf log;
    const char *e[1] = { "f" };
    const char *ok = "int f(int x) { return x + 1; }\n";
    const char *bad = "int f(int x) { return x + ; }\n";
    struct kevo_compile_req req = { .path = "c.c", .source = ok, .source_len = strlen(ok),
                                    .n_entries = 1, .entries = e };

    kevo_buf_init(&log, 1 << 16);
    assert_int_equal(kevo_cpu_compile_check(&req, &log), KEVO_OK);
    req.source = bad;
    req.source_len = strlen(bad);
    assert_int_equal(kevo_cpu_compile_check(&req, &log), KEVO_ERR_COMPILE);
    assert_non_null(strstr(kevo_buf_str(&log), "c.c:1:"));
    kevo_buf_free(&log);
}

/* ---- calling ---- */

static const char saxpy_src[] =
    "void axpb(const float *x, float *y, int n, float alpha, long m)\n"
    "{\n    for (int i = 0; i < n; i++)\n        y[i] = alpha * x[i] + (float)m;\n}\n";

static void test_call_conversions(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f, saxpy_src, "axpb");
    float x[100], y[100];
    uint64_t dx = dalloc(f, sizeof x), dy = dalloc(f, sizeof y);

    for (int i = 0; i < 100; i++)
        x[i] = (float)i;
    assert_int_equal(f->b.ops->upload(f->b.ctx, dx, x, sizeof x), KEVO_OK);
    assert_int_equal(f->b.ops->fill32(f->b.ctx, dy, 0x7fc00000u, sizeof y), KEVO_OK);
    // alpha given as an integer, m as a float: converted as a C call would
    struct kevo_val a[5] = { P(dx), P(dy), I(100), I(2), F(3.0) };
    assert_int_equal(run1(f, m, a, 5), KEVO_OK);
    assert_int_equal(f->b.ops->download(f->b.ctx, y, dy, sizeof y), KEVO_OK);
    for (int i = 0; i < 100; i++)
        assert_true(y[i] == 2.0f * (float)i + 3.0f);
    // n = 10: only the first 10 change
    struct kevo_val b[5] = { P(dx), P(dy), I(10), F(0.5), I(-1) };
    assert_int_equal(run1(f, m, b, 5), KEVO_OK);
    assert_int_equal(f->b.ops->download(f->b.ctx, y, dy, sizeof y), KEVO_OK);
    assert_true(y[4] == 1.0f && y[10] == 23.0f);
}

static void expect_launch_error(struct fx *f, struct kevo_module *m, const struct kevo_val *a,
                                int n, const char *text)
{
    assert_int_equal(run1(f, m, a, n), KEVO_ERR_LAUNCH);
    if (!strstr(kevo_buf_str(&f->err), text))
        fprintf(stderr, "message: %s\n", kevo_buf_str(&f->err));
    assert_non_null(strstr(kevo_buf_str(&f->err), text));
}

static void test_call_bad_args(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f, saxpy_src, "axpb");
    uint64_t d = dalloc(f, 4096);

    struct kevo_val big[5] = { P(d), P(d), I(4294967296LL), F(1), I(0) };
    expect_launch_error(f, m, big, 5,
                        "argument 3 (value 4294967296) does not fit parameter type 'int'");
    struct kevo_val huge[5] = { P(d), P(d), F(1e300), F(1), I(0) };
    expect_launch_error(f, m, huge, 5, "argument 3 (value 1e+300) does not fit");
    struct kevo_val scalar_ptr[5] = { P(d), I(5), I(1), F(1), I(0) };
    expect_launch_error(f, m, scalar_ptr, 5, "argument 2 (value 5) is not a tensor");
    struct kevo_val tensor_int[5] = { P(d), P(d), P(d), F(1), I(0) };
    expect_launch_error(f, m, tensor_int, 5, "argument 3 (a tensor) is a tensor");
    struct kevo_val few[3] = { P(d), P(d), I(1) };
    expect_launch_error(f, m, few, 3, "'axpb' takes 5 arguments; call 0 passes 3");
    struct kevo_val ok[5] = { P(d), P(d), I(4), F(1), I(0) };
    assert_int_equal(run1(f, m, ok, 5), KEVO_OK);   // refusals do not hurt the module

    struct kevo_call c;
    memset(&c, 0, sizeof c);
    c.entry = 3;
    assert_int_equal(f->b.ops->launch(f->b.ctx, m, &c, 1, &f->err), KEVO_ERR_LAUNCH);
    f->b.ops->module_free(f->b.ctx, m);

    m = compile1(f, "#include <stdbool.h>\nvoid u(unsigned u, bool b, unsigned char c)"
                    " { (void)u; (void)b; (void)c; }\n", "u");
    struct kevo_val neg[3] = { I(-1), I(0), I(0) };
    expect_launch_error(f, m, neg, 3,
                        "argument 1 (value -1) does not fit parameter type 'unsigned'");
    struct kevo_val two[3] = { I(1), I(2), I(0) };
    expect_launch_error(f, m, two, 3, "argument 2 (value 2) does not fit parameter type 'bool'");
    struct kevo_val wide[3] = { I(1), I(1), I(256) };
    expect_launch_error(f, m, wide, 3, "parameter type 'unsigned char'");
    struct kevo_val fine[3] = { I(4294967295LL), I(1), I(255) };
    assert_int_equal(run1(f, m, fine, 3), KEVO_OK);
}

static void test_multi_entry_plan(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = NULL;
    const char *e[2] = { "twice", "plus" };
    const char *src = "void plus(long *p, int k) { *p += k; }\n"
                      "void twice(long *p) { *p *= 2; }\n";
    struct kevo_call c[3];
    struct kevo_func_info fi;
    uint64_t a = dalloc(f, 8);
    int64_t v = 1;

    assert_int_equal(compile_n(f, "m.c", src, e, 2, &m), KEVO_OK);
    assert_int_equal(f->b.ops->func_info(f->b.ctx, m, 1, &fi), KEVO_OK);
    assert_int_equal(fi.n_params, 2);
    memset(c, 0, sizeof c);
    c[0].entry = 1;   // plus(p, 3), twice(p), plus(p, -1): order matters
    c[0].n_args = 2;
    c[0].args[0] = P(a);
    c[0].args[1] = I(3);
    c[1].entry = 0;
    c[1].n_args = 1;
    c[1].args[0] = P(a);
    c[2] = c[0];
    c[2].args[1] = I(-1);
    assert_int_equal(f->b.ops->upload(f->b.ctx, a, &v, sizeof v), KEVO_OK);
    assert_int_equal(f->b.ops->launch(f->b.ctx, m, c, 3, &f->err), KEVO_OK);
    assert_int_equal(f->b.ops->sync(f->b.ctx, &f->err), KEVO_OK);
    assert_int_equal(read_i64(f, a), (1 + 3) * 2 - 1);
}

static void test_stream_order(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f,
        "#include <time.h>\n"
        "void slow(long *p) {\n"
        "    struct timespec t = { 0, 100 * 1000 * 1000 };\n"
        "    nanosleep(&t, 0); *p = 7;\n"
        "}\n", "slow");
    uint64_t a = dalloc(f, 8);
    struct kevo_call c;
    struct timespec ms1500 = { 1, 500 * 1000 * 1000 };

    memset(&c, 0, sizeof c);
    c.n_args = 1;
    c.args[0] = P(a);
    // a download right after a launch sees the launch's result, like a stream
    assert_int_equal(f->b.ops->launch(f->b.ctx, m, &c, 1, &f->err), KEVO_OK);
    assert_int_equal(read_i64(f, a), 7);
    assert_int_equal(f->b.ops->sync(f->b.ctx, &f->err), KEVO_OK);
    // a sync long after the run finished is not a timeout
    kevo_backend_cpu_set_deadline(&f->b, 1.0);
    assert_int_equal(f->b.ops->fill32(f->b.ctx, a, 0, 8), KEVO_OK);
    assert_int_equal(f->b.ops->launch(f->b.ctx, m, &c, 1, &f->err), KEVO_OK);
    nanosleep(&ms1500, NULL);
    assert_int_equal(f->b.ops->sync(f->b.ctx, &f->err), KEVO_OK);
    assert_int_equal(read_i64(f, a), 7);
}

static void test_fault_found_by_memory_op(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f,
        "void crash(long *p) { (void)p; *(volatile int *)16 = 1; }\n",
        "crash");
    uint64_t a = dalloc(f, 8);
    struct kevo_call c;
    int64_t v;

    memset(&c, 0, sizeof c);
    c.n_args = 1;
    c.args[0] = P(a);
    assert_int_equal(f->b.ops->launch(f->b.ctx, m, &c, 1, &f->err), KEVO_OK);
    assert_int_equal(f->b.ops->download(f->b.ctx, &v, a, 8), KEVO_ERR_DEVICE);
    assert_int_equal(f->b.ops->download(f->b.ctx, &v, a, 8), KEVO_OK);   // reported once
    assert_int_equal(f->b.ops->sync(f->b.ctx, &f->err), KEVO_ERR_DEVICE);  // and to sync
    assert_non_null(strstr(kevo_buf_str(&f->err), "SIGSEGV during 'crash'"));
    kevo_buf_reset(&f->err);
    assert_int_equal(f->b.ops->sync(f->b.ctx, &f->err), KEVO_OK);
    assert_backend_works(f);
}

/* Fail the Nth allocation of compile + launch + sync for every N: clean errors, no crash. */
static void test_alloc_failures(void **state)
{
    struct fx *f = *state;
    const char *e[1] = { "inc" };
    const char *src = "void inc(long *p) { *p += 1; }\n";
    uint64_t a = dalloc(f, 8);
    int completed = 0;
    long n;

    for (n = 1; n < 400 && !completed; n++) {
        struct kevo_module *m = NULL;
        struct kevo_val arg = P(a);
        kevo_mem_fail_after(n);
        enum kevo_status st = compile_n(f, "inc.c", src, e, 1, &m);
        if (st == KEVO_OK) {
            st = run1(f, m, &arg, 1);
            completed = st == KEVO_OK;
        }
        kevo_mem_fail_after(0);
        assert_true(st == KEVO_OK || st == KEVO_ERR_NOMEM || st == KEVO_ERR_DEVICE);
        assert_true(st == KEVO_OK || m == NULL || st != KEVO_ERR_COMPILE);
        if (m)
            f->b.ops->module_free(f->b.ctx, m);
        assert_int_equal(f->b.ops->sync(f->b.ctx, &f->err), KEVO_OK);   // nothing left over
    }
    assert_true(completed);
    assert_true(n > 20);   // many allocations really were failed on the way
    assert_backend_works(f);
}

/* ---- arena ---- */

static void test_alloc(void **state)
{
    struct fx *f = *state;
    enum { N = 500 };
    static uint64_t a[N];
    static size_t sz[N];
    uint64_t x, y, big;
    const uint64_t gap = (uint64_t)1 << 35, page = (uint64_t)sysconf(_SC_PAGESIZE);

    f->b.ops->free(f->b.ctx, 0);   // no-op
    for (int i = 0; i < N; i++) {
        sz[i] = 1 + (size_t)((i * 7919) % 20000);
        a[i] = dalloc(f, sz[i]);
        assert_int_equal(a[i] % 256, 0);
        // guarded: the data ends where its pages end, so one byte more faults
        assert_int_equal((a[i] + (sz[i] + 255) / 256 * 256) % page, 0);
    }
    for (int i = 1; i < N; i++)   // first fit: ascending, a 32 GiB gap between neighbours
        assert_true(a[i] >= a[i - 1] + sz[i - 1] + gap);
    // freed space is reused: the same size comes back at the same place
    x = a[100];
    f->b.ops->free(f->b.ctx, x);
    y = dalloc(f, sz[100]);
    assert_true(y == x);
    for (int i = 0; i < N; i += 2)
        f->b.ops->free(f->b.ctx, a[i]);
    for (int i = 1; i < N; i += 2)
        f->b.ops->free(f->b.ctx, a[i]);
    // everything coalesced: a large block fits at the very start again
    big = dalloc(f, (size_t)1 << 30);
    assert_true(big < a[0] && big >= a[0] - page);

    // upload / download / fill32 and their bounds
    char buf[1000], back[1000];
    for (int i = 0; i < 1000; i++)
        buf[i] = (char)i;
    assert_int_equal(f->b.ops->upload(f->b.ctx, big + 3, buf, sizeof buf), KEVO_OK);
    assert_int_equal(f->b.ops->download(f->b.ctx, back, big + 3, sizeof back), KEVO_OK);
    assert_memory_equal(buf, back, sizeof buf);
    assert_int_equal(f->b.ops->fill32(f->b.ctx, big + 1, 0xdeadbeefu, 10), KEVO_OK);
    assert_int_equal(f->b.ops->download(f->b.ctx, back, big + 1, 12), KEVO_OK);
    uint32_t w;
    memcpy(&w, back + 4, 4);
    assert_int_equal(w, 0xdeadbeefu);
    assert_int_equal((unsigned char)back[8], 0xef);
    assert_int_equal((unsigned char)back[10], (unsigned char)buf[8]);   // past n: untouched
    assert_int_equal(f->b.ops->upload(f->b.ctx, 4096, buf, 8), KEVO_ERR_INVALID);
    assert_int_equal(f->b.ops->download(f->b.ctx, back, big - (1 << 20), 8), KEVO_ERR_INVALID);
    assert_int_equal(f->b.ops->alloc(f->b.ctx, (size_t)1 << 50, &x), KEVO_ERR_NOMEM);
    f->b.ops->free(f->b.ctx, big);
}

/* ---- faults ---- */

static void test_timeout(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f,
        "void spin(long *p) { for (;;) *(volatile long *)p += 1; }\n", "spin");
    uint64_t a = dalloc(f, 8);
    struct kevo_val arg = P(a);
    double t0;

    kevo_backend_cpu_set_deadline(&f->b, 1.0);
    t0 = kevo_now();
    assert_int_equal(run1(f, m, &arg, 1), KEVO_ERR_TIMEOUT);
    assert_true(kevo_now() - t0 < 2.5);
    assert_non_null(strstr(kevo_buf_str(&f->err), "deadline of 1 s passed during 'spin'"));
    assert_int_equal(run1(f, m, &arg, 1), KEVO_ERR_DEVICE);
    assert_non_null(strstr(kevo_buf_str(&f->err), "runner is gone"));
    assert_backend_works(f);
}

static void expect_crash(struct fx *f, const char *src, const char *entry, const char *text)
{
    struct kevo_module *m = compile1(f, src, entry);
    uint64_t a = dalloc(f, 64);
    struct kevo_val arg = P(a);
    assert_int_equal(run1(f, m, &arg, 1), KEVO_ERR_DEVICE);
    if (!strstr(kevo_buf_str(&f->err), text))
        fprintf(stderr, "message: %s\n", kevo_buf_str(&f->err));
    assert_non_null(strstr(kevo_buf_str(&f->err), text));
    f->b.ops->module_free(f->b.ctx, m);
    f->b.ops->free(f->b.ctx, a);
    assert_backend_works(f);
}

static void test_segfault(void **state)
{
    expect_crash(*state, "void crash(int *p) { (void)p; *(volatile int *)16 = 1; }\n", "crash",
                 "runner killed by SIGSEGV during 'crash'");
}

#if defined(__SANITIZE_ADDRESS__)
#define EXIT0_TEXT "candidate called exit("   /* ASan's exit-time leak check changes the code */
#else
#define EXIT0_TEXT "candidate called exit(0) during 'quit'"
#endif

static void test_exit(void **state)
{
    expect_crash(*state, "#include <stdlib.h>\nvoid quit(int *p) { (void)p; exit(0); }\n",
                 "quit", EXIT0_TEXT);
}

static void test_abort(void **state)
{
    expect_crash(*state, "#include <stdlib.h>\nvoid ab(int *p) { (void)p; abort(); }\n", "ab",
                 "runner killed by SIGABRT during 'ab'");
}

/* The address space runs out before memory does (each block costs a gap): NOMEM, and
 * freeing gives it all back. */
static void test_alloc_space(void **state)
{
    struct fx *f = *state;
    static uint64_t a[8192];
    int n = 0;

    while (n < 8192 && f->b.ops->alloc(f->b.ctx, 4096, &a[n]) == KEVO_OK)
        n++;
    assert_true(n >= 30 && n < 8192);   // CPU_SPACE_MIN / gap at least
    for (int i = 0; i < n; i++)
        f->b.ops->free(f->b.ctx, a[i]);
    for (int i = 0; i < n; i++)
        assert_int_equal(f->b.ops->alloc(f->b.ctx, 4096, &a[i]), KEVO_OK);
    for (int i = 0; i < n; i++)
        f->b.ops->free(f->b.ctx, a[i]);
    assert_backend_works(f);
}

/*
 * Guarded memory: a runner can reach only the blocks of the plan it runs. A store into
 * another live block (the harness's buffers), into the gap after its own, or a load far
 * before it faults, and ops.fault gives the address and whether it was a store.
 */
static void test_guarded_memory(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f, "void poke(long *p, long off, long load)\n"
                                        "{ if (load) p[0] = ((volatile long *)p)[off];\n"
                                        "  else p[off] = 7; }\n", "poke");
    uint64_t a = dalloc(f, 4096), other = dalloc(f, 4096), addr = 0;
    struct kevo_val args[3] = { P(a), I(0), I(0) };
    int write = -1;

    assert_int_equal(run1(f, m, args, 3), KEVO_OK);   // its own block: fine
    assert_int_equal(read_i64(f, a), 7);
    assert_int_equal(f->b.ops->fault(f->b.ctx, &addr, &write), 0);
    const int64_t offs[3] = { (int64_t)(other - a) / 8, 512, -(1L << 20) };
    for (int i = 0; i < 3; i++) {
        args[1] = I(offs[i]);
        args[2] = I(i == 2);
        assert_int_equal(run1(f, m, args, 3), KEVO_ERR_DEVICE);
        assert_non_null(strstr(kevo_buf_str(&f->err), "SIGSEGV during 'poke'"));
        assert_int_equal(f->b.ops->fault(f->b.ctx, &addr, &write), 1);
        assert_true(addr == a + (uint64_t)(offs[i] * 8));
        assert_int_equal(write, i == 2 ? 0 : 1);
        f->b.ops->module_free(f->b.ctx, m);
        m = compile1(f, "void poke(long *p, long off, long load)\n"
                        "{ if (load) p[0] = ((volatile long *)p)[off];\n"
                        "  else p[off] = 7; }\n", "poke");
    }
    assert_int_equal(read_i64(f, other), 0);   // the other block was never written
    f->b.ops->module_free(f->b.ctx, m);
    f->b.ops->free(f->b.ctx, a);
    f->b.ops->free(f->b.ctx, other);
    assert_backend_works(f);
}

/* Where the system refuses a 32 TiB arena (strict overcommit), a smaller one with smaller
 * gaps (space / 64) still guards: neighbours a gap apart, a store into another block still
 * faults and is located. A malformed KEVO_CPU_ARENA_SPACE is refused by name. */
static void setup_small_arena(struct fx *f, const char *space)
{
    kevo_backend_close(&f->b);
    setenv("KEVO_CPU_ARENA_SPACE", space, 1);
    kevo_buf_reset(&f->err);
    enum kevo_status st = kevo_backend_open_cpu(&f->b, &f->err);
    unsetenv("KEVO_CPU_ARENA_SPACE");
    if (strcmp(space, "1073741824") != 0) {
        assert_int_equal(st, KEVO_ERR_INVALID);
        assert_non_null(strstr(kevo_buf_str(&f->err), "KEVO_CPU_ARENA_SPACE"));
        assert_int_equal(kevo_backend_open_cpu(&f->b, &f->err), KEVO_OK);   /* for teardown */
        return;
    }
    assert_int_equal(st, KEVO_OK);
}

static void test_small_arena(void **state)
{
    struct fx *f = *state;
    const uint64_t gap = ((uint64_t)1 << 30) / 64;

    setup_small_arena(f, "12x");
    setup_small_arena(f, "4096");
    setup_small_arena(f, "1073741824");
    struct kevo_module *m = compile1(f, "void poke(long *p, long off) { p[off] = 7; }\n", "poke");
    uint64_t a = dalloc(f, 4096), other = dalloc(f, 4096), addr = 0;
    struct kevo_val args[2] = { P(a), I((int64_t)(other - a) / 8) };
    int write = -1;
    assert_true(other >= a + 4096 + gap);
    assert_int_equal(run1(f, m, args, 2), KEVO_ERR_DEVICE);
    assert_int_equal(f->b.ops->fault(f->b.ctx, &addr, &write), 1);
    assert_true(addr == other);
    assert_int_equal(read_i64(f, other), 0);
    f->b.ops->module_free(f->b.ctx, m);
    f->b.ops->free(f->b.ctx, a);
    f->b.ops->free(f->b.ctx, other);
    /* a 512 MiB cap at most: half the space */
    assert_int_equal(f->b.ops->alloc(f->b.ctx, (size_t)600 << 20, &addr), KEVO_ERR_NOMEM);
    assert_backend_works(f);
}

static void test_wild_writes(void **state)
{
    // 16 MiB below a block at the start of the arena: inside the guard reservation
    expect_crash(*state, "void under(char *p) { p[-(16L << 20)] = 1; }\n", "under",
                 "SIGSEGV during 'under'");
    expect_crash(*state, "void wild(char *p) { (void)p; *(volatile char *)0x1000 = 1; }\n",
                 "wild", "SIGSEGV during 'wild'");
}

static void test_constructor_crash(void **state)
{
    expect_crash(*state, "__attribute__((constructor)) static void c(void)\n"
                         "{ *(volatile int *)8 = 0; }\n"
                         "void fine(int *p) { *p = 1; }\n", "fine",
                 "SIGSEGV while loading the module");
}

static void test_x32_syscall_killed(void **state)
{
    // the x32 ABI would bypass an x86_64-only filter; it must kill the runner instead
    expect_crash(*state, "#include <unistd.h>\n#include <sys/syscall.h>\n"
                         "void x32(long *p) { *p = syscall(0x40000000L | SYS_socket, 1, 1, 0); }\n",
                 "x32", "runner killed by SIGSYS during 'x32'");
}

/* ---- the sandbox ---- */

static void test_no_network(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f,
        "#include <errno.h>\n#include <netinet/in.h>\n#include <sys/socket.h>\n"
        "#include <unistd.h>\n"
        "void net(long *out) {\n"
        "    int s = socket(AF_INET, SOCK_STREAM, 0);\n"
        "    out[0] = s >= 0; out[1] = errno;\n"
        "    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(80),\n"
        "                             .sin_addr.s_addr = htonl(0x7f000001) };\n"
        "    out[2] = connect(s >= 0 ? s : 3, (struct sockaddr *)&a, sizeof a) == 0;\n"
        "}\n", "net");
    uint64_t a = dalloc(f, 64);
    struct kevo_val arg = P(a);

    assert_int_equal(run1(f, m, &arg, 1), KEVO_OK);
    assert_int_equal(read_i64(f, a), 0);          // socket() refused
    assert_int_equal(read_i64(f, a + 8), EPERM);
    assert_int_equal(read_i64(f, a + 16), 0);     // connect() refused
}

static void test_no_file_writes(void **state)
{
    struct fx *f = *state;
    char src[1024], path[128], path2[128];
    struct stat sb;

    snprintf(path, sizeof path, "%s/x", f->dir);
    snprintf(path2, sizeof path2, "%s/y", f->dir);
    snprintf(src, sizeof src,
             "#include <errno.h>\n#include <stdio.h>\n#include <fcntl.h>\n#include <unistd.h>\n"
             "void w(long *out) {\n"
             "    FILE *fp = fopen(\"%s\", \"w\");\n"
             "    out[0] = fp != NULL; out[1] = errno;\n"
             "    out[2] = open(\"%s\", O_RDONLY | O_CREAT, 0600) >= 0;\n"
             "    int r = open(\"/proc/self/status\", O_RDONLY);\n"
             "    out[3] = r >= 0;\n"   // reading stays allowed
             "    out[4] = unlink(\"%s\") == 0 || errno != EPERM;\n"
             "}\n", path, path2, f->dir);
    struct kevo_module *m = compile1(f, src, "w");
    uint64_t a = dalloc(f, 64);
    struct kevo_val arg = P(a);

    assert_int_equal(run1(f, m, &arg, 1), KEVO_OK);
    assert_int_equal(read_i64(f, a), 0);
    assert_int_equal(read_i64(f, a + 8), EPERM);
    assert_int_equal(read_i64(f, a + 16), 0);
    assert_int_equal(read_i64(f, a + 24), 1);
    assert_int_equal(read_i64(f, a + 32), 0);
    assert_int_equal(stat(path, &sb), -1);
    assert_int_equal(stat(path2, &sb), -1);
}

static void test_constructor_sandboxed(void **state)
{
    struct fx *f = *state;
    char src[1024], path[128];
    struct stat sb;

    snprintf(path, sizeof path, "%s/ctor", f->dir);
    snprintf(src, sizeof src,
             "#include <errno.h>\n#include <stdio.h>\n"
             "static long opened = -1, err;\n"
             "__attribute__((constructor)) static void early(void) {\n"
             "    FILE *fp = fopen(\"%s\", \"w\");\n"
             "    opened = fp != NULL; err = errno;\n"
             "}\n"
             "void report(long *out) { out[0] = opened; out[1] = err; }\n", path);
    struct kevo_module *m = compile1(f, src, "report");
    uint64_t a = dalloc(f, 16);
    struct kevo_val arg = P(a);

    assert_int_equal(run1(f, m, &arg, 1), KEVO_OK);
    assert_int_equal(read_i64(f, a), 0);
    assert_int_equal(read_i64(f, a + 8), EPERM);
    assert_int_equal(stat(path, &sb), -1);
}

static void test_no_reach_into_worker(void **state)
{
    struct fx *f = *state;
    char src[2048];

    // the secret is in the worker's environment before the backend opens
    setenv("KEVO_TEST_SECRET", "hunter2", 1);
    kevo_backend_close(&f->b);
    assert_int_equal(kevo_backend_open_cpu(&f->b, &f->err), KEVO_OK);
    snprintf(src, sizeof src,
             "#include <errno.h>\n#include <fcntl.h>\n#include <signal.h>\n#include <stdio.h>\n"
             "#include <stdlib.h>\n#include <unistd.h>\n"
             "void spy(long *out) {\n"
             "    char p[64];\n"
             "    snprintf(p, sizeof p, \"/proc/%%d/mem\", (int)getppid());\n"
             "    out[0] = open(p, O_RDONLY) >= 0;\n"
             "    out[1] = kill(getppid(), 0) == 0;\n"
             "    out[2] = getenv(\"KEVO_TEST_SECRET\") != NULL;\n"
             "    out[3] = kill(getpid(), 0) == 0;\n"   // itself: allowed
             "}\n");
    struct kevo_module *m = compile1(f, src, "spy");
    uint64_t a = dalloc(f, 32);
    struct kevo_val arg = P(a);

    unsetenv("KEVO_TEST_SECRET");
    assert_int_equal(run1(f, m, &arg, 1), KEVO_OK);
    assert_int_equal(read_i64(f, a), 0);        // the worker's memory is out of reach
    assert_int_equal(read_i64(f, a + 8), 0);    // no signals to the worker
    assert_int_equal(read_i64(f, a + 16), 0);   // environment scrubbed
    assert_int_equal(read_i64(f, a + 24), 1);
}

static void test_openmp(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f,
        "#include <omp.h>\n"
        "void sum(long *out, long n) {\n"
        "    long s = 0; int th = 0;\n"
        "    #pragma omp parallel for reduction(+:s) reduction(max:th)\n"
        "    for (long i = 0; i < n; i++) { s += i; th = omp_get_num_threads(); }\n"
        "    out[0] = s; out[1] = th;\n"
        "}\n", "sum");
    uint64_t a = dalloc(f, 16);
    struct kevo_val args[2] = { P(a), I(1000000) };

    assert_int_equal(run1(f, m, args, 2), KEVO_OK);
    assert_int_equal(read_i64(f, a), 1000000LL * 999999LL / 2);
    assert_true(read_i64(f, a + 8) >= 1);
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1)
        assert_true(read_i64(f, a + 8) > 1);   // threads really ran in the sandbox
}

static void test_time(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f,
        "#include <time.h>\n"
        "void busy(long *count, long usec) {\n"   // spin for usec microseconds
        "    struct timespec a, b;\n"
        "    clock_gettime(CLOCK_MONOTONIC, &a);\n"
        "    do clock_gettime(CLOCK_MONOTONIC, &b);\n"
        "    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < usec);\n"
        "    *count += 1;\n"
        "}\n", "busy");
    uint64_t a = dalloc(f, 8);
    struct kevo_call c;
    struct kevo_sample s;

    memset(&c, 0, sizeof c);
    c.n_args = 2;
    c.args[0] = P(a);
    c.args[1] = I(20000);
    assert_int_equal(f->b.ops->time(f->b.ctx, m, &c, 1, 3, 1, &s, &f->err), KEVO_OK);
    assert_true(s.seconds >= 0.060 && s.seconds < 0.5);
    assert_true(s.sm_clock_mhz == 0);
    assert_int_equal(read_i64(f, a), 3);   // batch = 3 passes
    assert_int_equal(f->b.ops->time(f->b.ctx, m, &c, 1, 0, 0, &s, &f->err), KEVO_ERR_INVALID);
    c.args[1] = I(1 << 30);
    c.args[1].kind = KEVO_VAL_PTR;
    assert_int_equal(f->b.ops->time(f->b.ctx, m, &c, 1, 1, 0, &s, &f->err), KEVO_ERR_LAUNCH);
}

/* Opening a plan's blocks touches each of their pages in the runner (so a timed run does
 * not rebuild page tables an mprotect just changed), and leaves every byte as it was: runs
 * that alternate between two sets of blocks (rotating timing sets re-open each time) read
 * and keep exactly what was uploaded, over many pages. */
static void test_open_keeps_contents(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f, "void sum(const long *x, long n, long *out)\n"
                                        "{ long s = 0; for (long i = 0; i < n; i++) s += x[i];"
                                        " *out = s; }\n", "sum");
    const long n = 3 * 4096 / 8 + 5;   /* four pages, the last one partly */
    uint64_t x[2], out[2];
    long *v = calloc((size_t)n, sizeof *v), *back = calloc((size_t)n, sizeof *back);

    assert_non_null(v);
    assert_non_null(back);
    for (int k = 0; k < 2; k++) {
        x[k] = dalloc(f, (size_t)n * 8);
        out[k] = dalloc(f, 8);
        for (long i = 0; i < n; i++)
            v[i] = (k + 1) * 1000003L * (i + 1);
        assert_int_equal(f->b.ops->upload(f->b.ctx, x[k], v, (size_t)n * 8), KEVO_OK);
    }
    for (int r = 0; r < 6; r++) {
        int k = r % 2;
        struct kevo_val args[3] = { P(x[k]), I(n), P(out[k]) };
        assert_int_equal(run1(f, m, args, 3), KEVO_OK);
        assert_int_equal(read_i64(f, out[k]), (k + 1) * 1000003L * n * (n + 1) / 2);
    }
    for (int k = 0; k < 2; k++) {
        assert_int_equal(f->b.ops->download(f->b.ctx, back, x[k], (size_t)n * 8), KEVO_OK);
        for (long i = 0; i < n; i++)
            assert_true(back[i] == (k + 1) * 1000003L * (i + 1));
        f->b.ops->free(f->b.ctx, x[k]);
        f->b.ops->free(f->b.ctx, out[k]);
    }
    free(v);
    free(back);
    f->b.ops->module_free(f->b.ctx, m);
}

/* Fill calls run in plan order inside every pass of a batch (the harness re-poisons the
 * outputs between the passes of a timed batch with them). */
static void test_fill_calls(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f, "void inc(long *p) { *p += 1; }\n", "inc");
    uint64_t a = dalloc(f, 8), g = dalloc(f, 64);
    struct kevo_call c[2];
    struct kevo_sample s;
    unsigned char bytes[7];

    memset(c, 0, sizeof c);
    c[0] = kevo_call_fill(a, 8, 0);
    c[1].n_args = 1;
    c[1].args[0] = P(a);
    // [fill 0, inc] x 3 leaves 1: each pass starts from the fill
    assert_int_equal(f->b.ops->time(f->b.ctx, m, c, 2, 3, 0, &s, &f->err), KEVO_OK);
    assert_int_equal(read_i64(f, a), 1);
    // [inc] x 3 after that: 4
    assert_int_equal(f->b.ops->time(f->b.ctx, m, c + 1, 1, 3, 0, &s, &f->err), KEVO_OK);
    assert_int_equal(read_i64(f, a), 4);
    // a fill alone, with a tail of 3 bytes: the pattern's bytes in little-endian order
    c[0] = kevo_call_fill(g, 7, 0x44332211u);
    assert_int_equal(f->b.ops->launch(f->b.ctx, m, c, 1, &f->err), KEVO_OK);
    assert_int_equal(f->b.ops->sync(f->b.ctx, &f->err), KEVO_OK);
    assert_int_equal(f->b.ops->download(f->b.ctx, bytes, g, 7), KEVO_OK);
    assert_memory_equal(bytes, "\x11\x22\x33\x44\x11\x22\x33", 7);
    // outside device memory: refused before anything runs
    c[0] = kevo_call_fill(4096, 8, 0);
    assert_int_equal(f->b.ops->launch(f->b.ctx, m, c, 1, &f->err), KEVO_ERR_INVALID);
}

static void test_background_thread_frozen(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f,
        "#include <pthread.h>\n"
        "static void *loop(void *p)\n"
        "{ for (;;) __atomic_add_fetch((long *)p, 1, __ATOMIC_RELAXED); return 0; }\n"
        "void start(long *counter) {\n"
        "    static int started; pthread_t t;\n"
        "    if (!started) { started = 1; pthread_create(&t, 0, loop, counter); }\n"
        "    long from = __atomic_load_n(counter, __ATOMIC_RELAXED);\n"
        "    while (__atomic_load_n(counter, __ATOMIC_RELAXED) < from + 1000) ;\n"
        "}\n", "start");
    uint64_t a = dalloc(f, 8);
    struct kevo_val arg = P(a);
    struct timespec ms50 = { 0, 50 * 1000 * 1000 };
    int64_t c1, c2, c3;

    assert_int_equal(run1(f, m, &arg, 1), KEVO_OK);
    c1 = read_i64(f, a);
    nanosleep(&ms50, NULL);
    c2 = read_i64(f, a);
    assert_true(c1 >= 1000);
    assert_true(c1 == c2);   // stopped between calls
    assert_int_equal(run1(f, m, &arg, 1), KEVO_OK);
    c3 = read_i64(f, a);
    assert_true(c3 >= c2 + 1000);   // only frozen: it ran again during the next call
}

/* ---- verification ops: verify.c's functions on arena memory ---- */

static void test_verify_ops(void **state)
{
    struct fx *f = *state;
    const int64_t n = 20011;
    const struct kevo_gen g = {.kind = KEVO_INIT_NORMAL, .dtype = KEVO_F16, .a = 1, .b = 2};
    int64_t first = 0;

    for (int d = 0; d < JC_N_DTYPES; d++) {
        enum kevo_dtype dt = JC_DTYPES[d];
        size_t bytes = (size_t)n * kevo_dtype_size(dt);
        void *a = kevo_malloc(bytes), *b = kevo_malloc(bytes), *ref = kevo_malloc(bytes);
        void *back = kevo_malloc(bytes);
        struct kevo_judge_req rq = jc_req(dt, n);
        struct kevo_judge_res want, got;
        struct kevo_gen gd = {.kind = KEVO_INIT_RANDINT, .dtype = dt, .lo = -9, .hi = 99};

        jc_craft(dt, n, JC_MIXED, a, b, ref);
        kevo_verify_judge(&rq, a, b, ref, &want);
        rq.a = dalloc(f, bytes);
        rq.b = dalloc(f, bytes);
        rq.ref = dalloc(f, bytes);
        assert_int_equal(f->b.ops->upload(f->b.ctx, rq.a, a, bytes), KEVO_OK);
        assert_int_equal(f->b.ops->upload(f->b.ctx, rq.b, b, bytes), KEVO_OK);
        assert_int_equal(f->b.ops->upload(f->b.ctx, rq.ref, ref, bytes), KEVO_OK);
        /* seal in place: the host's bits, then the judge of the sealed reference */
        assert_int_equal(f->b.ops->seal(f->b.ctx, rq.ref, dt, n, rq.ref_key, &f->err), KEVO_OK);
        assert_int_equal(f->b.ops->download(f->b.ctx, back, rq.ref, bytes), KEVO_OK);
        kevo_verify_seal(dt, ref, n, rq.ref_key);
        assert_memory_equal(back, ref, bytes);
        assert_int_equal(f->b.ops->judge(f->b.ctx, &rq, &got, &f->err), KEVO_OK);
        assert_memory_equal(&got, &want, sizeof got);
        assert_int_equal(f->b.ops->download(f->b.ctx, back, rq.ref, bytes), KEVO_OK);
        assert_memory_equal(back, ref, bytes);                 /* sealed again */
        /* gen and gen_check */
        kevo_verify_generate(&gd, 5, 1, a, n);
        assert_int_equal(f->b.ops->gen(f->b.ctx, rq.a, &gd, 5, 1, n, &f->err), KEVO_OK);
        assert_int_equal(f->b.ops->download(f->b.ctx, back, rq.a, bytes), KEVO_OK);
        assert_memory_equal(back, a, bytes);
        assert_int_equal(f->b.ops->gen_check(f->b.ctx, rq.a, &gd, 5, 1, n, &first, &f->err),
                         KEVO_OK);
        assert_int_equal(first, -1);
        assert_int_equal(f->b.ops->gen_check(f->b.ctx, rq.a, &gd, 5, 2, n, &first, &f->err),
                         KEVO_OK);
        assert_true(first >= 0 && first < 10);                 /* another stream */
        /* copy */
        assert_int_equal(f->b.ops->copy(f->b.ctx, rq.b, rq.a, bytes), KEVO_OK);
        assert_int_equal(f->b.ops->download(f->b.ctx, back, rq.b, bytes), KEVO_OK);
        assert_memory_equal(back, a, bytes);
        f->b.ops->free(f->b.ctx, rq.a);
        f->b.ops->free(f->b.ctx, rq.b);
        f->b.ops->free(f->b.ctx, rq.ref);
        kevo_free(a);
        kevo_free(b);
        kevo_free(ref);
        kevo_free(back);
    }
    /* outside device memory: refused with a reason */
    int16_t host[4];
    kevo_buf_reset(&f->err);
    assert_int_equal(f->b.ops->gen(f->b.ctx, (uint64_t)(uintptr_t)host, &g, 1, 1, 4, &f->err),
                     KEVO_ERR_INVALID);
    assert_non_null(strstr(kevo_buf_str(&f->err), "outside device memory"));
}

/* A fault of the last launch is reported by the verification op that waits for it. */
static void test_verify_op_after_fault(void **state)
{
    struct fx *f = *state;
    struct kevo_module *m = compile1(f,
        "void crash(long *p) { (void)p; *(volatile int *)16 = 1; }\n", "crash");
    const struct kevo_gen g = {.kind = KEVO_INIT_UNIFORM, .dtype = KEVO_F32, .a = 0, .b = 1};
    uint64_t a = dalloc(f, 64);
    struct kevo_call c;

    memset(&c, 0, sizeof c);
    c.n_args = 1;
    c.args[0] = P(a);
    assert_int_equal(f->b.ops->launch(f->b.ctx, m, &c, 1, &f->err), KEVO_OK);
    kevo_buf_reset(&f->err);
    assert_int_equal(f->b.ops->gen(f->b.ctx, a, &g, 1, 1, 16, &f->err), KEVO_ERR_DEVICE);
    assert_non_null(strstr(kevo_buf_str(&f->err), "SIGSEGV"));
    f->b.ops->free(f->b.ctx, a);
    f->b.ops->module_free(f->b.ctx, m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proto_find),
        cmocka_unit_test(test_arg_check),
        cmocka_unit_test(test_compile_check),
        cmocka_unit_test_setup_teardown(test_compile_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_params_and_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_entry_problems, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_conversions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_entry_plan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fill_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_found_by_memory_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_space, setup, teardown),
        cmocka_unit_test_setup_teardown(test_guarded_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_small_arena, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_segfault, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wild_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_constructor_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_x32_syscall_killed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_network, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_file_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_constructor_sandboxed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_reach_into_worker, setup, teardown),
        cmocka_unit_test_setup_teardown(test_openmp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_keeps_contents, setup, teardown),
        cmocka_unit_test_setup_teardown(test_background_thread_frozen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_op_after_fault, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_cli - the kevo command as a user meets it (docs/cli.md): exit statuses (0 completed,
 * 1 kevo failed, 2 bad usage), `check` naming file, line and column of a malformed task
 * and failing a file that does not compile, `eval --json` printing a document whose
 * verdicts and timings are there, and `calibrate` on the CPU. Runs the binary in $KEVO_BIN
 * (make test sets it); skipped without it.
 */
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char out_text[1 << 20], err_text[1 << 16];

/* Run `kevo ARGS...` (NULL-terminated), capturing stdout and stderr; the exit status. */
static int kevo(const char *a0, ...)
{
    const char *bin = getenv("KEVO_BIN");
    char *argv[32];
    int n = 0, st = -1;
    FILE *fo = tmpfile(), *fe = tmpfile();
    va_list ap;

    assert_non_null(fo);
    assert_non_null(fe);
    argv[n++] = (char *)bin;
    va_start(ap, a0);
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fileno(fo), 1);
        dup2(fileno(fe), 2);
        execv(bin, argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    size_t k;
    rewind(fo);
    k = fread(out_text, 1, sizeof out_text - 1, fo);
    out_text[k] = '\0';
    rewind(fe);
    k = fread(err_text, 1, sizeof err_text - 1, fe);
    err_text[k] = '\0';
    fclose(fo);
    fclose(fe);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

#define NEED_BIN() do { if (!getenv("KEVO_BIN")) skip(); } while (0)

static void test_usage_is_2(void **state)
{
    (void)state;
    NEED_BIN();
    assert_int_equal(kevo(NULL), 2);
    assert_int_equal(kevo("frobnicate", NULL), 2);
    assert_int_equal(kevo("eval", NULL), 2);
    assert_int_equal(kevo("eval", "--trials", "2", "tasks/cpu/cpu_saxpy.c", NULL), 2);
    assert_int_equal(kevo("eval", "--backend", "tpu", "tasks/cpu/cpu_saxpy.c", NULL), 2);
    assert_int_equal(kevo("version", NULL), 0);
    assert_non_null(strstr(out_text, "kevo "));
}

static void test_check_names_file_line_column(void **state)
{
    (void)state;
    NEED_BIN();
    write_file("build/cli_bad.c", "// kevo task   bad\n"
                                  "// kevo size   N=10\n"
                                  "// kevo input  x f33[N] normal(0,1)\n");
    assert_int_equal(kevo("check", "build/cli_bad.c", NULL), 1);
    assert_non_null(strstr(err_text, "build/cli_bad.c:3:"));
    assert_non_null(strstr(err_text, "f33"));
    assert_non_null(strstr(out_text, "FAIL build/cli_bad.c"));
    /* parses, but the reference does not compile: still a failure of check, with the log */
    write_file("build/cli_nocompile.c", "// kevo task   nocompile\n"
                                        "// kevo size   N=10\n"
                                        "// kevo input  x f32[N] normal(0,1)\n"
                                        "// kevo output y f32[N]\n"
                                        "// kevo bytes  8*N\n"
                                        "// kevo call   f(x, y, N)\n"
                                        "void f(const float *x, float *y, int n) { oops }\n");
    assert_int_equal(kevo("check", "build/cli_nocompile.c", NULL), 1);
    assert_non_null(strstr(err_text, "does not compile"));
    assert_non_null(strstr(err_text, "oops"));
    assert_int_equal(kevo("check", "build/no_such_task.cu", NULL), 1);
    assert_non_null(strstr(err_text, "build/no_such_task.cu"));
    assert_int_equal(kevo("check", "tasks/cpu/", NULL), 0);
}

/* kevo run/runs/export: bad input is a message naming what and where, and no run. */
static void test_run_bad_input(void **state)
{
    (void)state;
    NEED_BIN();
    const char *db = "build/cli_runs.db";
    unlink(db);
    write_file("build/cli_bad_config.json", "{\"models\": [\"openai:x\",\n");
    assert_int_equal(kevo("run", "tests/search/landscape.c", "--archive", db, "--config",
                          "build/cli_bad_config.json", NULL), 2);
    assert_non_null(strstr(err_text, "build/cli_bad_config.json:"));
    assert_int_equal(kevo("run", "tests/search/landscape.c", "--archive", db, "--model",
                          "gpt-5", NULL), 1);
    assert_non_null(strstr(err_text, "--model gpt-5:"));
    assert_int_equal(kevo("run", "tests/search/landscape.c", "--archive", db, "--seed",
                          "build/no_such_seed.c", NULL), 1);
    assert_non_null(strstr(err_text, "build/no_such_seed.c: error: cannot open"));
    /* none of these created a run */
    assert_int_equal(kevo("runs", "--archive", db, NULL), 0);
    assert_null(strstr(out_text, "landscape"));
    assert_int_equal(kevo("runs", "7", "--archive", db, NULL), 1);
    assert_non_null(strstr(err_text, db));
    assert_int_equal(kevo("export", "7", "--out", "build/cli_export", "--archive", db, NULL), 1);
    assert_non_null(strstr(err_text, "run 7"));
    assert_int_equal(kevo("export", "7", NULL), 2);
}

/* kevo run --replay: a finished run replays identically; misuse is named. */
static void test_run_replay(void **state)
{
    (void)state;
    NEED_BIN();
    const char *db = "build/cli_replay.db";
    unlink(db);
    assert_int_equal(kevo("run", "tests/search/landscape.c", "--seed",
                          "tests/search/landscape_seed.c", "--backend", "cpu", "--budget", "4",
                          "--time-cap", "0.05", "--archive", db, NULL), 0);
    assert_int_equal(kevo("run", "--replay", "1", "--archive", db, NULL), 0);
    assert_non_null(strstr(out_text, "replay of run 1: identical"));
    assert_int_equal(kevo("run", "--replay", "1", "tests/search/landscape.c", NULL), 2);
    assert_non_null(strstr(err_text, "--replay takes the run's own task"));
    assert_int_equal(kevo("run", "--replay", "0", NULL), 2);
    assert_int_equal(kevo("run", "--replay", "99", "--archive", db, NULL), 1);
    assert_non_null(strstr(err_text, "--replay 99: build/cli_replay.db: no run 99"));
}

/* The bad tasks issue 3 names: each fails check with its place and its reason (an unknown
 * dtype is the f33 above). */
static void test_check_bad_tasks(void **state)
{
    (void)state;
    NEED_BIN();
    /* the launch passes a size where the kernel takes a tensor */
    write_file("build/cli_shape.cu", "// kevo task   shape\n// kevo size   N=1024\n"
                                     "// kevo input  x f32[N] normal(0,1)\n"
                                     "// kevo output y f32[N]\n// kevo bytes  8*N\n"
                                     "// kevo launch k grid=4 block=256 (x, N, y)\n"
                                     "extern \"C\" __global__ void k(const float *x, float *y,"
                                     " int n) {}\n");
    assert_int_equal(kevo("check", "build/cli_shape.cu", NULL), 1);
    assert_non_null(strstr(err_text, "build/cli_shape.cu:6: error: launch of 'k' does not "
                                     "match its parameters"));
    assert_non_null(strstr(err_text, "argument 2 ('N', not a tensor)"));
    /* a bytes expression that overflows 64 bits */
    write_file("build/cli_overflow.cu", "// kevo task   overflow\n// kevo size   N=4294967296\n"
                                        "// kevo input  x f32[N] normal(0,1)\n"
                                        "// kevo output y f32[N]\n// kevo bytes  N*N*8\n"
                                        "// kevo launch k grid=4 block=256 (x, y, N)\n"
                                        "extern \"C\" __global__ void k(const float *x, float *y,"
                                        " long long n) {}\n");
    assert_int_equal(kevo("check", "build/cli_overflow.cu", NULL), 1);
    assert_non_null(strstr(err_text, "build/cli_overflow.cu:5:"));
    assert_non_null(strstr(err_text, "overflows 64 bits"));
}

static void test_eval_bad_task_is_1(void **state)
{
    (void)state;
    NEED_BIN();
    assert_int_equal(kevo("eval", "build/cli_bad.c", NULL), 1);
    assert_non_null(strstr(err_text, "build/cli_bad.c:3:"));
    assert_int_equal(kevo("eval", "--backend", "cpu", "tasks/level1/vector_add.cu", NULL), 1);
    assert_non_null(strstr(err_text, "CUDA backend"));
}

/* A candidate that does not even parse is a verdict, and the run still completes (0). */
static void test_eval_json_document(void **state)
{
    (void)state;
    NEED_BIN();
    write_file("build/cli_cand.c", "// kevo launch f grid=1 block=1 (x)\nvoid f(void) {}\n");
    int rc = kevo("eval", "--json", "--time-cap", "0.2", "tasks/cpu/cpu_saxpy.c",
                  "tests/exploits/cpu/control_saxpy.c", "build/cli_cand.c", NULL);
    if (rc != 0)
        fail_msg("exit %d; stderr: %s", rc, err_text);
    json_error_t e;
    json_t *d = json_loads(out_text, 0, &e);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "backend")), "cpu");
    json_t *ref = json_object_get(d, "reference"), *c = json_object_get(d, "candidates");
    assert_string_equal(json_string_value(json_object_get(ref, "verdict")), "ok");
    assert_int_equal(json_array_size(c), 2);
    json_t *good = json_array_get(c, 0), *bad = json_array_get(c, 1);
    assert_string_equal(json_string_value(json_object_get(good, "verdict")), "ok");
    json_t *w0 = json_array_get(json_object_get(good, "workloads"), 0);
    assert_true(json_number_value(json_object_get(json_object_get(w0, "time"), "median_s")) > 0);
    assert_true(json_number_value(json_object_get(json_object_get(w0, "ref_time"), "median_s")) > 0);
    assert_true(json_number_value(json_object_get(w0, "speedup")) > 0);
    assert_string_equal(json_string_value(json_object_get(bad, "verdict")), "compile_error");
    assert_non_null(strstr(json_string_value(json_object_get(bad, "message")), "build/cli_cand.c:1"));
    json_decref(d);
}

static void test_calibrate_cpu(void **state)
{
    (void)state;
    NEED_BIN();
    assert_int_equal(kevo("calibrate", "--backend", "cpu", "--json", NULL), 0);
    json_t *d = json_loads(out_text, 0, NULL);
    assert_non_null(d);
    assert_true(json_number_value(json_object_get(json_object_get(d, "bandwidth"),
                                                  "best_bytes_per_s")) > 1e8);
    json_decref(d);
    assert_int_equal(kevo("calibrate", "--backend", "cpu", NULL), 0);
    assert_non_null(strstr(out_text, "bandwidth"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_is_2),
        cmocka_unit_test(test_check_names_file_line_column),
        cmocka_unit_test(test_check_bad_tasks),
        cmocka_unit_test(test_run_bad_input),
        cmocka_unit_test(test_run_replay),
        cmocka_unit_test(test_eval_bad_task_is_1),
        cmocka_unit_test(test_eval_json_document),
        cmocka_unit_test(test_calibrate_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_cli - the kevo command as a user meets it (docs/cli.md): exit statuses (0 completed,
 * 1 kevo failed, 2 bad usage), `check` naming file, line and column of a malformed task
 * and failing a file that does not compile or a launch eval would refuse, `eval` exiting 1
 * when the task's own reference fails, `eval --json` printing a document whose
 * verdicts and timings are there, `calibrate` on the CPU, every numeric option
 * range-checked, `run` stopped by SIGTERM or SIGHUP as by Ctrl-C and resumed, and a done
 * run's resume refused; `--help` of every command, `runs ID --candidates` and `show` on a
 * small CPU run, a candidate that does not compile named by its id with its log, and
 * `eval`'s evidence printed once. Runs the binary in $KEVO_BIN (make test sets it);
 * skipped without it.
 */
#include "testutil.h"

#include "kevo.h"
#include "ctl/show.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char out_text[1 << 20], err_text[1 << 16];

/* Run `kevo ARGS...` (NULL-terminated), capturing stdout and stderr; the exit status. */
static int kevo(const char *a0, ...)
{
    char *argv[32];
    int n = 0;
    va_list ap;

    argv[n++] = getenv("KEVO_BIN");
    va_start(ap, a0);
    for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    return test_run(argv, out_text, sizeof out_text, err_text, sizeof err_text);
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

/* Every integer (and real) option is range-checked: a value out of range, malformed or
 * too large for 64 bits is a usage error (2) naming the option, the value and the range,
 * before anything runs; no value wraps (issue 12: --budget 3000000000 ran as -2147483648). */
static void test_option_ranges(void **state)
{
    static const struct {
        const char *args[6];
        const char *said;
    } bad[] = {
        { { "run", "T.c", "--budget", "3000000000" },
          "--budget 3000000000: out of range (allowed: an integer from 1 to 1000000000)" },
        { { "run", "T.c", "--budget", "12x" }, "--budget 12x: not an integer" },
        { { "run", "T.c", "--budget", "0" }, "--budget 0: out of range" },
        { { "run", "T.c", "--budget" }, "--budget needs a value (allowed: an integer from 1" },
        { { "run", "T.c", "--stagnation", "-3" }, "--stagnation -3: out of range" },
        { { "run", "T.c", "--islands", "17" },
          "--islands 17: out of range (allowed: an integer from 1 to 16)" },
        { { "run", "T.c", "--rng-seed", "99999999999999999999" },
          "--rng-seed 99999999999999999999: out of range" },
        { { "run", "T.c", "--gpus", "0,4294967296" }, "--gpus 4294967296: out of range" },
        { { "run", "T.c", "--gpus", "0,x" }, "--gpus x: not an integer" },
        { { "run", "T.c", "--llm-concurrency", "33" },
          "--llm-concurrency 33: out of range (allowed: an integer from 1 to 32)" },
        { { "run", "T.c", "--time", "inf" },
          "--time inf: out of range (allowed: a number above 0" },
        { { "run", "T.c", "--target", "1.5" }, "--target 1.5: out of range" },
        { { "run", "T.c", "--cost-cap", "nan" }, "--cost-cap nan: not a number" },
        { { "run", "--resume", " 1" }, "--resume  1: not an integer" },
        { { "run", "--replay", "+1" }, "--replay +1: not an integer" },
        { { "eval", "T.c", "--device", "1025" },
          "--device 1025: out of range (allowed: an integer from 0 to 1024)" },
        { { "eval", "T.c", "--trials", "4294967299" }, "--trials 4294967299: out of range" },
        { { "eval", "T.c", "--deadline", "1e400" }, "--deadline 1e400: out of range" },
        { { "calibrate", "--device", "0x1" }, "--device 0x1: not an integer" },
        { { "runs", "0" }, "run id 0: out of range (allowed: an integer from 1 to" },
        { { "export", "18446744073709551617", "--out", "d" },
          "run id 18446744073709551617: out of range" },
        { { "llm", "pending", "1.5" }, "run id 1.5: not an integer" },
        { { "llm", "answer", "f", "--llm-concurrency", "0" }, "--llm-concurrency 0: out of range" },
    };
    char tmp[256], db[300], cfg[300];
    (void)state;
    NEED_BIN();
    test_scratch(tmp, sizeof tmp, "cli-ranges");
    assert_true(tmp[0] != '\0');
    snprintf(db, sizeof db, "%s/r.db", tmp);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *const *a = bad[i].args;
        int rc = kevo(a[0], a[1], a[2], a[3], a[4], a[5], NULL);
        if (rc != 2 || !strstr(err_text, bad[i].said))
            fail_msg("kevo %s %s %s %s: exit %d, wanted 2 and \"%s\"; stderr: %.300s", a[0],
                     a[1], a[2] ? a[2] : "", a[3] ? a[3] : "", rc, bad[i].said, err_text);
    }
    /* refused before anything ran: no archive was made */
    assert_int_equal(kevo("run", "tests/search/landscape.c", "--budget", "3000000000",
                          "--archive", db, NULL), 2);
    assert_int_not_equal(access(db, F_OK), 0);
    /* the config file's numbers hold the same ranges */
    snprintf(cfg, sizeof cfg, "%s/config.json", tmp);
    write_file(cfg, "{\"llm_concurrency\": 1000}");
    assert_int_equal(kevo("run", "tests/search/landscape.c", "--config", cfg, "--archive", db,
                          NULL), 2);
    assert_non_null(strstr(err_text, "llm_concurrency: not an integer from 0 (the default) to 32"));
    assert_int_not_equal(access(db, F_OK), 0);
    assert_int_equal(test_scratch_remove(tmp), 0);
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
    /* finished: a resume without a larger --budget is refused and changes nothing (no
     * second session, no second gate), so the run still replays */
    assert_int_equal(kevo("run", "--resume", "1", "--archive", db, NULL), 1);
    assert_non_null(strstr(err_text, "run 1 is done: stopped by budget after 4 evaluations; "
                                     "it goes on only with a larger --budget (more than 4)"));
    assert_null(strstr(err_text, "--resume 1 goes on"));
    assert_int_equal(kevo("run", "--resume", "1", "--budget", "4", "--archive", db, NULL), 1);
    assert_non_null(strstr(err_text, "--budget 4 is not more"));
    assert_int_equal(kevo("run", "--replay", "1", "--archive", db, NULL), 0);
    assert_non_null(strstr(out_text, "replay of run 1: identical"));
    assert_int_equal(kevo("run", "--replay", "1", "tests/search/landscape.c", NULL), 2);
    assert_non_null(strstr(err_text, "--replay takes the run's own task"));
    assert_int_equal(kevo("run", "--replay", "0", NULL), 2);
    assert_int_equal(kevo("run", "--replay", "99", "--archive", db, NULL), 1);
    assert_non_null(strstr(err_text, "--replay 99: build/cli_replay.db: no run 99"));
}

/* `kevo run` on the landscape task into db with budget, started in the background (its
 * output to dir/run.log); its pid. */
static pid_t start_run(const char *dir, const char *db, const char *budget)
{
    char log[400];
    const char *bin = getenv("KEVO_BIN");

    snprintf(log, sizeof log, "%s/run.log", dir);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(bin, bin, "run", "tests/search/landscape.c", "--seed",
              "tests/search/landscape_seed.c", "--backend", "cpu", "--budget", budget,
              "--stagnation", budget, "--time-cap", "0.05", "--archive", db, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* `kevo runs ID --json` of db, parsed (json_decref it). */
static json_t *runs_doc(const char *db, const char *id)
{
    assert_int_equal(kevo("runs", id, "--archive", db, "--json", NULL), 0);
    json_t *d = json_loads(out_text, 0, NULL);
    assert_non_null(d);
    return d;
}

/* Evaluations of run 1 of db stored so far (0 while the archive or the run is not there). */
static int64_t evaluated(const char *db)
{
    char *js = NULL, *msg = NULL;
    int64_t n = 0;

    if (access(db, F_OK) == 0 && kevo_runs_json(db, 1, &js, &msg) == KEVO_OK) {
        json_t *d = json_loads(js, 0, NULL);
        n = json_integer_value(json_object_get(d, "evaluated"));
        json_decref(d);
    }
    kevo_free(js);
    kevo_free(msg);
    return n;
}

/* Send sig to every child of pid (its workers), as `pkill kevo` or a job scheduler would;
 * how many. Any thread of pid may have started one, so each thread's list is read. */
static int signal_children(pid_t pid, int sig)
{
    char path[128];
    struct dirent *t;
    int n = 0;

    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    while (d && (t = readdir(d)) != NULL) {
        long child;
        snprintf(path, sizeof path, "/proc/%d/task/%.20s/children", (int)pid, t->d_name);
        FILE *f = t->d_name[0] != '.' ? fopen(path, "r") : NULL;
        while (f && fscanf(f, "%ld", &child) == 1)
            n += kill((pid_t)child, sig) == 0;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

/* Candidates of db with a verdict that blames the evaluation's process, not the code. */
static int crashes(const char *db)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    int n = -1;

    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(s, "SELECT count(*) FROM candidates WHERE verdict IN ('crash',"
                              " 'timeout')", -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(s);
    return n;
}

/* SIGTERM and SIGHUP stop a run as Ctrl-C does: at the next result, exit status 0 after the
 * summary, the run recorded `stopped` (reason "interrupted", never left `running`), and
 * `kevo run --resume` takes it to its budget. The SIGTERM reaches the workers too (as from
 * `pkill kevo`): they leave the stop to the controller, so no evaluation in flight ends
 * as a false crash. */
static void test_run_stop_signals(void **state)
{
    static const int sigs[] = { SIGTERM, SIGHUP };
    char tmp[256], db[300], budget[32];
    (void)state;
    NEED_BIN();
    test_scratch(tmp, sizeof tmp, "cli-signals");
    assert_true(tmp[0] != '\0');
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        int st = 0;
        int64_t n = 0;
        snprintf(db, sizeof db, "%s/sig%d.db", tmp, sigs[k]);
        pid_t pid = start_run(tmp, db, "1000");
        for (int i = 0; i < 1200 && (n = evaluated(db)) < 3; i++) {
            struct timespec t = { 0, 50 * 1000 * 1000 };
            nanosleep(&t, NULL);
        }
        assert_true(n >= 3);
        kill(pid, sigs[k]);
        if (sigs[k] == SIGTERM)
            assert_true(signal_children(pid, SIGTERM) >= 1);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("signal %d: kevo run ended with status 0x%x", sigs[k], st);
        json_t *d = runs_doc(db, "1");
        assert_string_equal(json_string_value(json_object_get(d, "status")), "stopped");
        assert_string_equal(json_string_value(json_object_get(json_object_get(d, "report"),
                                                              "reason")), "interrupted");
        n = json_integer_value(json_object_get(d, "evaluated"));
        assert_true(n >= 3 && n < 1000);
        assert_int_equal(crashes(db), 0);
        json_decref(d);
        if (sigs[k] != SIGTERM)
            continue;
        /* resumed: on to a budget a few evaluations further, nothing redone */
        snprintf(budget, sizeof budget, "%lld", (long long)n + 3);
        assert_int_equal(kevo("run", "--resume", "1", "--budget", budget, "--archive", db,
                              NULL), 0);
        assert_non_null(strstr(out_text, "(resumed)"));
        d = runs_doc(db, "1");
        assert_string_equal(json_string_value(json_object_get(d, "status")), "done");
        assert_int_equal(json_integer_value(json_object_get(d, "evaluated")), n + 3);
        json_decref(d);
    }
    assert_int_equal(test_scratch_remove(tmp), 0);
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

/* check refuses what eval would refuse before running (core/rules.h), with file and line:
 * an argument too wide for its int parameter at the task's sizes, CPU and CUDA. A legal
 * candidate still passes. */
static void test_check_launch_rules(void **state)
{
    (void)state;
    NEED_BIN();
    write_file("build/cli_wide.c", "// kevo call vadd(x, y, z, N*10000000)\n"
                                   "void vadd(const float *x, const float *y, float *z, int n)\n"
                                   "{ for (int i = 0; i < n; i++) z[i] = x[i] + y[i]; }\n");
    assert_int_equal(kevo("check", "--task", "tasks/cpu/cpu_vector_add.c", "build/cli_wide.c",
                          NULL), 1);
    assert_non_null(strstr(err_text, "build/cli_wide.c:1: error: call of 'vadd': argument 4 "
                                     "(N*10000000 = 41943040000000) does not fit parameter 4 "
                                     "of 'vadd', 'int'"));
    write_file("build/cli_fine.c", "// kevo call vadd(x, y, z, N)\n"
                                   "void vadd(const float *x, const float *y, float *z, int n)\n"
                                   "{ for (int i = 0; i < n; i++) z[i] = x[i] + y[i]; }\n");
    if (kevo("check", "--task", "tasks/cpu/cpu_vector_add.c", "build/cli_fine.c", NULL) != 0)
        fail_msg("a legal candidate was refused: %s", err_text);
    write_file("build/cli_wide.cu", "// kevo launch vadd grid=cdiv(N,256) block=256 "
                                    "(x, y, z, N*10000000)\n"
                                    "extern \"C\" __global__ void vadd(const float *x, "
                                    "const float *y, float *z, int n) {}\n");
    assert_int_equal(kevo("check", "--task", "tasks/level1/vector_add.cu", "build/cli_wide.cu",
                          NULL), 1);
    assert_non_null(strstr(err_text, "build/cli_wide.cu:1: error: launch of 'vadd': argument 4 "
                                     "(N*10000000 = "));
    assert_non_null(strstr(err_text, "does not fit parameter 4 of 'vadd', 'int'"));
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

/* A task whose own reference fails (crashes, does not compile) is exit status 1: the
 * report (or the document) is still printed, stderr says the reference failed and why,
 * and no candidate is judged against it. */
static void test_eval_reference_fails_is_1(void **state)
{
    (void)state;
    NEED_BIN();
    assert_int_equal(kevo("eval", "--no-timing", "tests/fixtures/ref_crash.c", NULL), 1);
    assert_non_null(strstr(out_text, "reference: crash"));
    assert_non_null(strstr(err_text, "the task's reference failed: crash -- "));
    write_file("build/cli_ref_cand.c", "// kevo call copy(x, z, N)\n"
                                       "void copy(const float *x, float *z, int n)\n"
                                       "{ for (int i = 0; i < n; i++) z[i] = x[i]; }\n");
    assert_int_equal(kevo("eval", "--json", "--no-timing", "tests/fixtures/ref_compile_error.c",
                          "build/cli_ref_cand.c", NULL), 1);
    assert_non_null(strstr(err_text, "the task's reference failed: compile_error -- "));
    assert_non_null(strstr(err_text, "does not compile"));
    json_t *d = json_loads(out_text, 0, NULL);
    assert_non_null(d);
    json_t *ref = json_object_get(d, "reference");
    assert_string_equal(json_string_value(json_object_get(ref, "verdict")), "compile_error");
    assert_non_null(strstr(json_string_value(json_object_get(ref, "compile_log")),
                           "undeclared_name"));
    assert_int_equal(json_array_size(json_object_get(d, "candidates")), 0);
    json_decref(d);
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

/* ---- a CLI you can explore (issue 12) ---- */

/* How many times needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* kevo COMMAND --help (and -h, and kevo help COMMAND): that command's usage on stdout,
 * exit 0, nothing on stderr; whatever else the command line says. */
static void test_help_every_command(void **state)
{
    static const char *const cmds[] = { "check", "eval", "bench", "calibrate", "run", "runs",
                                        "show", "export", "models", "llm", "version", "help" };
    char want[64];
    (void)state;
    NEED_BIN();
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        snprintf(want, sizeof want, "usage: kevo %s", cmds[i]);
        for (int h = 0; h < 2; h++) {
            int rc = kevo(cmds[i], h ? "-h" : "--help", NULL);
            if (rc != 0 || !strstr(out_text, want) || err_text[0])
                fail_msg("kevo %s %s: exit %d; stdout: %.200s; stderr: %.200s", cmds[i],
                         h ? "-h" : "--help", rc, out_text, err_text);
        }
        assert_int_equal(kevo("help", cmds[i], NULL), 0);
        assert_non_null(strstr(out_text, want));
    }
    /* with arguments around it, and a subcommand's */
    assert_int_equal(kevo("run", "tasks/cpu/cpu_saxpy.c", "--budget", "3", "--help", NULL), 0);
    assert_non_null(strstr(out_text, "--seed CAND"));
    assert_non_null(strstr(out_text, "--time-cap SECONDS"));
    assert_int_equal(kevo("runs", "--help", NULL), 0);
    assert_non_null(strstr(out_text, "--candidates"));
    assert_int_equal(kevo("llm", "answer", "-h", NULL), 0);
    assert_non_null(strstr(out_text, "kevo llm answer FILE"));
    assert_int_equal(kevo("models", "check", "--help", NULL), 0);
    assert_non_null(strstr(out_text, "usage: kevo models check"));
    /* the list names the new command; an unknown one is still bad usage */
    assert_int_equal(kevo("help", NULL), 0);
    assert_non_null(strstr(out_text, "show CAND"));
    assert_int_equal(kevo("help", "frobnicate", NULL), 2);
    assert_int_equal(kevo("frobnicate", "--help", NULL), 2);
}

/* A small CPU run with a seed that does not compile: the run names it by id with its log's
 * first lines, the summary labels its geomean and gives each workload, and `runs
 * --candidates` and `show` read every candidate back. */
static void test_runs_candidates_and_show(void **state)
{
    char tmp[256], db[300], bad[300];
    json_t *d, *c;
    (void)state;
    NEED_BIN();
    test_scratch(tmp, sizeof tmp, "cli-show");
    assert_true(tmp[0] != '\0');
    snprintf(db, sizeof db, "%s/r.db", tmp);
    snprintf(bad, sizeof bad, "%s/bad_seed.c", tmp);
    write_file(bad, "// kevo call   landscape(x, y, N)\n"
                    "void landscape(const float *x, float *y, int n)\n"
                    "{\n"
                    "    for (int i = 0; i < n; i++)\n"
                    "        y[i] = 2.0f * x[i] + 1.0f oops;\n"
                    "}\n");
    int rc = kevo("run", "tests/search/landscape.c", "--seed", "tests/search/landscape_seed.c",
                  "--seed", bad, "--backend", "cpu", "--budget", "4", "--time-cap", "0.05",
                  "--archive", db, NULL);
    if (rc != 0)
        fail_msg("kevo run: exit %d; stderr: %s", rc, err_text);
    /* the candidate by its id, with the compiler's own words; no scratch path */
    assert_non_null(strstr(out_text, "cand 2 (seed): compile_error   candidate 2 does not compile"));
    assert_non_null(strstr(out_text, "    cand2.c:5:34: error: expected ';' before 'oops'"));
    assert_null(strstr(out_text, "run1/"));
    assert_null(strstr(err_text, "device fault"));
    /* the best's geomean labelled, each workload's figures under it */
    assert_non_null(strstr(out_text, "geomean over 2 workloads: "));
    assert_non_null(strstr(out_text, "  workload 0 [N=200000]"));
    assert_non_null(strstr(out_text, "  workload 1 [N=50000]"));
    int beaten = !strstr(out_text, "no candidate beat the reference: the best takes");

    /* every candidate, as JSON and as a table */
    assert_int_equal(kevo("runs", "1", "--candidates", "--json", "--archive", db, NULL), 0);
    d = json_loads(out_text, 0, NULL);
    assert_non_null(d);
    assert_int_equal(json_array_size(json_object_get(d, "reference")), 2);
    assert_int_equal(json_array_size(json_object_get(d, "candidates")), 4);
    c = json_array_get(json_object_get(d, "candidates"), 0);
    assert_string_equal(json_string_value(json_object_get(c, "op")), "seed");
    assert_string_equal(json_string_value(json_object_get(c, "verdict")), "ok");
    assert_int_equal(json_array_size(json_object_get(c, "parents")), 0);
    json_t *w1 = json_array_get(json_object_get(c, "workloads"), 1);
    assert_int_equal(json_integer_value(json_object_get(w1, "index")), 1);
    assert_true(json_number_value(json_object_get(w1, "time_s")) > 0);
    assert_true(json_number_value(json_object_get(w1, "sol_fraction")) > 0);
    assert_true(json_number_value(json_object_get(w1, "speedup")) > 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(w1, "sizes"), "N")),
                     50000);
    /* the best's verdict on the reference matches what the summary said */
    double best = 0;
    size_t i;
    json_array_foreach(json_object_get(d, "candidates"), i, c)
        if (json_number_value(json_object_get(c, "speedup")) > best)
            best = json_number_value(json_object_get(c, "speedup"));
    assert_int_equal(beaten, best >= 1);
    c = json_array_get(json_object_get(d, "candidates"), 1);
    assert_string_equal(json_string_value(json_object_get(c, "verdict")), "compile_error");
    assert_string_equal(json_string_value(json_object_get(c, "message")),
                        "candidate 2 does not compile");
    c = json_array_get(json_object_get(d, "candidates"), 2);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(c, "parents"), 0)), 1);
    json_decref(d);
    assert_int_equal(kevo("runs", "1", "--candidates", "--archive", db, NULL), 0);
    assert_non_null(strstr(out_text, "w0 time"));
    assert_non_null(strstr(out_text, "w1 time"));
    assert_non_null(strstr(out_text, "reference: w0 [N=200000]"));
    assert_non_null(strstr(out_text, "compile_error"));
    assert_non_null(strstr(out_text, "candidate 2 does not compile"));
    assert_int_equal(kevo("runs", "--candidates", "--archive", db, NULL), 2);
    assert_int_equal(kevo("runs", "9", "--candidates", "--archive", db, NULL), 1);

    /* one candidate: its message, log and source; by either name */
    assert_int_equal(kevo("show", "2", "--archive", db, NULL), 0);
    assert_non_null(strstr(out_text, "candidate 2 of run 1 (cpu_landscape): compile_error"));
    assert_non_null(strstr(out_text, "message: candidate 2 does not compile"));
    assert_non_null(strstr(out_text, "compile log:\ncand2.c: In function 'landscape':"));
    assert_non_null(strstr(out_text, "    5          y[i] = 2.0f * x[i] + 1.0f oops;"));
    assert_int_equal(count_of(out_text, "expected ';' before 'oops'"), 1);
    assert_null(strstr(out_text, "evidence:"));   /* the log is not printed twice */
    assert_int_equal(kevo("show", "cand1", "--json", "--archive", db, NULL), 0);
    d = json_loads(out_text, 0, NULL);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "verdict")), "ok");
    assert_int_equal(json_integer_value(json_object_get(d, "run")), 1);
    assert_non_null(strstr(json_string_value(json_object_get(d, "source")), "landscape_sink"));
    assert_true(json_is_object(json_object_get(d, "params")));
    assert_int_equal(json_array_size(json_object_get(d, "workloads")), 2);
    json_decref(d);
    assert_int_equal(kevo("show", "cand1", "--archive", db, NULL), 0);
    assert_non_null(strstr(out_text, "geomean over 2 workloads: "));
    assert_non_null(strstr(out_text, "source:\n"));
    assert_int_equal(kevo("show", "99", "--archive", db, NULL), 1);
    assert_non_null(strstr(err_text, "no candidate 99"));
    assert_int_equal(kevo("show", "seven", "--archive", db, NULL), 2);
    assert_int_equal(kevo("show", "--archive", db, NULL), 2);
    assert_int_equal(test_scratch_remove(tmp), 0);
}

/* Commands that read what runs left refuse a missing archive instead of creating one. */
static void test_missing_archive(void **state)
{
    (void)state;
    NEED_BIN();
    char dir[] = "/tmp/kevo-noarch-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/typo.db", dir);
    const char *cmds[][6] = { { "runs", "--archive", path, NULL },
                              { "runs", "1", "--archive", path, NULL },
                              { "show", "1", "--archive", path, NULL },
                              { "export", "1", "--archive", path, "--out", dir } };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        assert_int_equal(kevo(cmds[i][0], cmds[i][1], cmds[i][2], cmds[i][3], cmds[i][4],
                              cmds[i][5], NULL), 1);
        assert_non_null(strstr(err_text, "no such archive"));
        assert_int_equal(access(path, F_OK), -1);
    }
    assert_int_equal(rmdir(dir), 0);
}

/* The words for a candidate (ctl/show.h), on results of this kevo and of older ones whose
 * scratch names had the run's directory in them. */
static void test_show_names(void **state)
{
    (void)state;
    json_t *r = json_pack("{s:s, s:s, s:s}", "verdict", "compile_error", "message",
                          "run7/cand64.cu does not compile", "compile_log",
                          "run7/cand64.cu(3): error: x\n\n  ^\nrun7/cand64.cu(9): error: y\n"
                          "z\n");
    char *m = kevo_show_message(64, r);
    assert_string_equal(m, "candidate 64 does not compile");
    kevo_free(m);
    int more = -1;
    json_t *head = kevo_show_log_head(r, 2, &more);
    assert_int_equal(json_array_size(head), 2);
    assert_string_equal(json_string_value(json_array_get(head, 0)), "cand64.cu(3): error: x");
    assert_string_equal(json_string_value(json_array_get(head, 1)), "  ^");
    assert_int_equal(more, 2);
    json_decref(head);
    json_object_set_new(r, "verdict", json_string("crash"));
    json_object_set_new(r, "message", json_string("the device failed while loading "
                                                  "run7/cand64.cu; rerun7/cand1 stays"));
    m = kevo_show_message(64, r);
    assert_string_equal(m, "the device failed while loading cand64.cu; rerun7/cand1 stays");
    kevo_free(m);
    json_decref(r);
}

/* kevo eval's report says each piece of evidence once, and the compile log once. */
static void test_eval_evidence_once(void **state)
{
    (void)state;
    NEED_BIN();
    int rc = kevo("eval", "--time-cap", "0.05", "tasks/cpu/cpu_vector_add.c",
                  "tests/exploits/cpu/partial_write.c", "tests/exploits/cpu/compile_error.c",
                  NULL);
    if (rc != 0)
        fail_msg("exit %d; stderr: %s", rc, err_text);
    assert_non_null(strstr(out_text, "partial_write.c: unwritten"));
    assert_int_equal(count_of(out_text, "evidence: {\"output\":\"z\""), 1);
    assert_non_null(strstr(out_text, "compile_error.c: compile_error"));
    assert_int_equal(count_of(out_text, "compile log:"), 1);
    assert_int_equal(count_of(out_text, "expected ';' before 'struct'"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_is_2),
        cmocka_unit_test(test_check_names_file_line_column),
        cmocka_unit_test(test_check_bad_tasks),
        cmocka_unit_test(test_option_ranges),
        cmocka_unit_test(test_run_bad_input),
        cmocka_unit_test(test_run_replay),
        cmocka_unit_test(test_run_stop_signals),
        cmocka_unit_test(test_check_launch_rules),
        cmocka_unit_test(test_eval_bad_task_is_1),
        cmocka_unit_test(test_eval_reference_fails_is_1),
        cmocka_unit_test(test_eval_json_document),
        cmocka_unit_test(test_calibrate_cpu),
        cmocka_unit_test(test_help_every_command),
        cmocka_unit_test(test_runs_candidates_and_show),
        cmocka_unit_test(test_eval_evidence_once),
        cmocka_unit_test(test_show_names),
        cmocka_unit_test(test_missing_archive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_pool - the worker pool against a fake worker: this very program, which serves the
 * wire protocol when started as `test_pool __worker ...` (exactly how the pool starts
 * `kevo __worker ...`). The fake answers ops that misbehave on purpose: hang, exit, crash,
 * reply and then exit, leave a grandchild behind. Env FAKE_WORKER_MUTE=1 makes it never
 * answer at all (not even the first ping); FAKE_WORKER_REAL=1 runs the real
 * kevo_worker_main instead, to check that it accepts exactly what the pool passes. Its
 * `eval` and `calibrate` ops, chosen by cand_path, test evalreq's typed results on top.
 */
#include "testutil.h"

#include "base/mem.h"
#include "ctl/evalreq.h"
#include "ctl/pool.h"
#include "base/clock.h"
#include "core/wire.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake worker ---- */

static void hang_forever(void)
{
    for (;;)
        pause();
}

static int fake_reply(int fd, json_t *id, json_t *result, int exiting)
{
    json_t *r = json_pack("{s:O, s:s, s:o}", "id", id, "status", "ok", "result", result);
    if (exiting)
        json_object_set_new(r, "exiting", json_true());
    enum kevo_status st = kevo_wire_send(fd, r);
    json_decref(r);
    return st == KEVO_OK ? 0 : -1;
}

/* A child in the worker's process group that outlives nothing: the pool must kill it. */
static pid_t spawn_sleeper(int fd_in, int fd_out)
{
    pid_t pid = fork();
    if (pid == 0) {
        close(fd_in);
        close(fd_out);
        struct timespec ts = { 1000, 0 };
        nanosleep(&ts, NULL);
        _exit(0);
    }
    return pid;
}

static int fake_serve_one(int fd_in, int fd_out, int device, json_t *req)
{
    const char *op = json_string_value(json_object_get(req, "op"));
    json_t *id = json_object_get(req, "id");

    if (!op)
        return -1;
    if (strcmp(op, "ping") == 0 || strcmp(op, "echo") == 0)
        return fake_reply(fd_out, id, json_pack("{s:b, s:i, s:i, s:O?}", "pong", 1,
                                                "pid", (int)getpid(), "device", device,
                                                "data", json_object_get(req, "data")), 0);
    if (strcmp(op, "sleep") == 0)
        hang_forever();
    if (strcmp(op, "die") == 0)
        _exit(7);
    if (strcmp(op, "segv") == 0) {
        struct rlimit no_core = { 0, 0 };
        setrlimit(RLIMIT_CORE, &no_core);
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
    if (strcmp(op, "reply_then_exit") == 0 || strcmp(op, "reply_then_exit_quiet") == 0) {
        int flag = strcmp(op, "reply_then_exit") == 0;
        fake_reply(fd_out, id, json_pack("{s:s, s:s}", "verdict", "crash", "message",
                                         "illegal address"), flag);
        _exit(KEVO_WORKER_EXIT_DEVICE);
    }
    if (strcmp(op, "eval") == 0) {   /* cand_path says how to answer */
        const char *how = json_string_value(json_object_get(req, "cand_path"));
        if (!how)
            return -1;
        if (strcmp(how, "hang") == 0)
            hang_forever();
        if (strcmp(how, "die") == 0)
            _exit(7);
        if (strcmp(how, "ok") == 0)
            return fake_reply(fd_out, id, json_pack("{s:s, s:s, s:{}, s:[{s:i, s:s, s:{s:f}}]}",
                                                    "verdict", "ok", "message", "", "evidence",
                                                    "workloads", "index", 2, "verdict", "ok",
                                                    "time", "median_s", 2e-6), 0);
        if (strcmp(how, "unknown") == 0)
            return fake_reply(fd_out, id, json_pack("{s:s}", "verdict", "fast"), 0);
        return fake_reply(fd_out, id, json_pack("{s:s}", "message", "no verdict"), 0);
    }
    if (strcmp(op, "calibrate") == 0)
        _exit(7);   /* a worker that dies calibrating: the pool's crash in its place */
    if (strcmp(op, "spawn_sleeper") == 0) {
        pid_t s = spawn_sleeper(fd_in, fd_out);
        fake_reply(fd_out, id, json_pack("{s:i}", "sleeper", (int)s), 0);
        hang_forever();
    }
    return -1;
}

static int fake_worker(int argc, char **argv)
{
    int fd_in = 3, fd_out = 4, device = -1;
    json_t *req = NULL;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--device") == 0)
            device = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--fd-in") == 0)
            fd_in = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--fd-out") == 0)
            fd_out = (int)strtol(argv[i + 1], NULL, 10);
    }
    if (getenv("FAKE_WORKER_MUTE"))
        hang_forever();
    if (getenv("FAKE_WORKER_REAL"))
        return kevo_worker_main(argc, argv);
    while (kevo_wire_recv(fd_in, &req) == KEVO_OK) {
        if (fake_serve_one(fd_in, fd_out, device, req))
            return 9;
        json_decref(req);
    }
    return 0;
}

/* ---- helpers ---- */

static struct kevo_pool *open_pool(int n, const int *devices)
{
    struct kevo_pool_opts o = { 0 };
    struct kevo_pool *p = NULL;
    char *msg = NULL;

    o.exe = NULL;   /* /proc/self/exe: this test program */
    o.backend = "cpu";
    o.n_devices = n;
    o.devices = devices;
    o.start_timeout_s = 10;
    enum kevo_status st = kevo_pool_open(&o, &p, &msg);
    if (st)
        fail_msg("kevo_pool_open: %s: %s", kevo_status_name(st), msg ? msg : "?");
    assert_null(msg);
    return p;
}

static json_t *call(struct kevo_pool *p, int slot, const char *op, double deadline)
{
    json_t *req = json_pack("{s:s, s:s}", "op", op, "data", "payload");
    json_t *reply = NULL;

    assert_int_equal(kevo_pool_call(p, slot, req, deadline, &reply), KEVO_OK);
    assert_non_null(reply);
    assert_null(json_object_get(req, "id"));   /* the caller's request is not modified */
    json_decref(req);
    assert_string_equal(json_string_value(json_object_get(reply, "status")), "ok");
    return reply;
}

static json_t *result(json_t *reply)
{
    return json_object_get(reply, "result");
}

static const char *rstr(json_t *reply, const char *key)
{
    const char *s = json_string_value(json_object_get(result(reply), key));
    return s ? s : "";
}

static int rint_(json_t *reply, const char *key)
{
    return (int)json_integer_value(json_object_get(result(reply), key));
}

static void expect_echo(struct kevo_pool *p, int slot, int device)
{
    json_t *r = call(p, slot, "echo", 5);
    assert_true(json_is_true(json_object_get(result(r), "pong")));
    assert_string_equal(rstr(r, "data"), "payload");
    assert_int_equal(rint_(r, "device"), device);
    json_decref(r);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static int worker_pid(struct kevo_pool *p, int slot)
{
    json_t *r = call(p, slot, "ping", 5);
    int pid = rint_(r, "pid");
    json_decref(r);
    return pid;
}

/* ---- tests ---- */

static void test_ping(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool *p = open_pool(1, &dev);

    assert_int_equal(kevo_pool_size(p), 1);
    json_t *r = call(p, 0, "ping", 5);
    assert_true(json_is_integer(json_object_get(r, "id")));
    assert_true(rint_(r, "pid") > 0);
    json_decref(r);
    expect_echo(p, 0, 0);
    assert_int_equal(kevo_pool_restarts(p), 0);
    kevo_pool_free(p);
}

static void test_timeout_kills_and_restarts(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool *p = open_pool(1, &dev);
    int before = worker_pid(p, 0);

    double t0 = kevo_now();
    json_t *r = call(p, 0, "sleep", 0.3);
    double took = kevo_now() - t0;
    assert_true(took >= 0.3);
    assert_true(took < 0.6);   /* kill, reap, re-exec and ping included; ~0.31 s idle */
    assert_string_equal(rstr(r, "verdict"), "timeout");
    assert_non_null(strstr(rstr(r, "message"), "no reply within 0.3 s"));
    assert_non_null(strstr(rstr(r, "message"), "killed and restarted"));
    json_decref(r);
    assert_int_equal(kevo_pool_restarts(p), 1);
    assert_true(kill(before, 0) < 0 && errno == ESRCH);   /* killed and reaped */
    assert_int_not_equal(worker_pid(p, 0), before);
    expect_echo(p, 0, 0);
    kevo_pool_free(p);
}

static void test_exit_is_a_crash(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool *p = open_pool(1, &dev);
    int fds = count_fds();

    json_t *r = call(p, 0, "die", 5);
    assert_string_equal(rstr(r, "verdict"), "crash");
    assert_non_null(strstr(rstr(r, "message"), "worker exited with status 7"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(result(r), "evidence"),
                                                        "exit_status")), 7);
    json_decref(r);
    assert_int_equal(kevo_pool_restarts(p), 1);
    expect_echo(p, 0, 0);
    for (int i = 0; i < 5; i++)
        json_decref(call(p, 0, "die", 5));
    assert_int_equal(kevo_pool_restarts(p), 6);
    assert_int_equal(count_fds(), fds);   /* restarts leak no descriptors */
    kevo_pool_free(p);
}

static void test_signal_is_a_crash(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool *p = open_pool(1, &dev);

    json_t *r = call(p, 0, "segv", 5);
    assert_string_equal(rstr(r, "verdict"), "crash");
    assert_non_null(strstr(rstr(r, "message"), "signal 11 (SIGSEGV)"));
    json_decref(r);
    assert_int_equal(kevo_pool_restarts(p), 1);
    expect_echo(p, 0, 0);
    kevo_pool_free(p);
}

/* Device-fault path: the real reply comes back as is; the next call gets a fresh worker. */
static void test_reply_then_exit(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool *p = open_pool(1, &dev);
    int first = worker_pid(p, 0);

    json_t *r = call(p, 0, "reply_then_exit", 5);
    assert_string_equal(rstr(r, "verdict"), "crash");
    assert_string_equal(rstr(r, "message"), "illegal address");   /* the worker's own */
    json_decref(r);
    expect_echo(p, 0, 0);
    assert_int_equal(kevo_pool_restarts(p), 1);
    assert_int_not_equal(worker_pid(p, 0), first);

    /* Without the "exiting" flag the exit is found before the next send. */
    r = call(p, 0, "reply_then_exit_quiet", 5);
    assert_string_equal(rstr(r, "message"), "illegal address");
    json_decref(r);
    struct timespec ts = { 0, 200 * 1000000L };
    nanosleep(&ts, NULL);
    expect_echo(p, 0, 0);
    assert_int_equal(kevo_pool_restarts(p), 2);
    kevo_pool_free(p);
}

/* The timeout kill reaches what the worker started (its process group). */
static void test_kill_reaches_grandchildren(void **state)
{
    (void)state;
    int dev = 0, ws = 0;
    /* Orphans re-parent to us, so the grandchild's fate can be read with waitpid. */
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    struct kevo_pool *p = open_pool(1, &dev);

    json_t *r = call(p, 0, "spawn_sleeper", 5);
    pid_t sleeper = (pid_t)rint_(r, "sleeper");
    json_decref(r);
    assert_true(sleeper > 0);
    assert_int_equal(kill(sleeper, 0), 0);
    r = call(p, 0, "echo", 0.3);   /* the worker hangs after spawning */
    assert_string_equal(rstr(r, "verdict"), "timeout");
    json_decref(r);
    pid_t got = 0;
    for (int i = 0; i < 200 && got == 0; i++) {
        got = waitpid(sleeper, &ws, WNOHANG);
        if (got == 0) {
            struct timespec ts = { 0, 10 * 1000000L };
            nanosleep(&ts, NULL);
        }
    }
    assert_int_equal(got, sleeper);
    assert_true(WIFSIGNALED(ws));
    assert_int_equal(WTERMSIG(ws), SIGKILL);
    expect_echo(p, 0, 0);
    kevo_pool_free(p);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

static void test_two_devices_are_independent(void **state)
{
    (void)state;
    int devs[2] = { 0, 1 };
    struct kevo_pool *p = open_pool(2, devs);

    assert_int_equal(kevo_pool_size(p), 2);
    int a = worker_pid(p, 0), b = worker_pid(p, 1);
    assert_int_not_equal(a, b);
    expect_echo(p, 0, 0);
    expect_echo(p, 1, 1);
    json_t *r = call(p, 0, "sleep", 0.2);
    assert_string_equal(rstr(r, "verdict"), "timeout");
    json_decref(r);
    assert_int_equal(worker_pid(p, 1), b);   /* slot 1 untouched */
    assert_int_not_equal(worker_pid(p, 0), a);
    assert_int_equal(kevo_pool_restarts(p), 1);
    kevo_pool_free(p);
}

static void test_missing_exe(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool_opts o = { 0 };
    struct kevo_pool *p = (struct kevo_pool *)&o;   /* must be cleared */
    char *msg = NULL;

    o.exe = "/nonexistent/kevo";
    o.backend = "cpu";
    o.n_devices = 1;
    o.devices = &dev;
    assert_int_equal(kevo_pool_open(&o, &p, &msg), KEVO_ERR_WORKER);
    assert_null(p);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "cannot execute /nonexistent/kevo"));
    assert_non_null(strstr(msg, "No such file"));
    kevo_free(msg);
}

/* An exe that runs but is not a worker: it exits without answering the first ping. */
static void test_exe_that_is_not_a_worker(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool_opts o = { 0 };
    struct kevo_pool *p = NULL;
    char *msg = NULL;

    o.exe = "/bin/true";
    o.backend = "cpu";
    o.n_devices = 1;
    o.devices = &dev;
    assert_int_equal(kevo_pool_open(&o, &p, &msg), KEVO_ERR_WORKER);
    assert_null(p);
    assert_non_null(strstr(msg, "did not answer ping"));
    assert_non_null(strstr(msg, "exited with status 0"));
    kevo_free(msg);
}

static void test_mute_worker_start_timeout(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool_opts o = { 0 };
    struct kevo_pool *p = NULL;
    char *msg = NULL;

    o.backend = "cpu";
    o.n_devices = 1;
    o.devices = &dev;
    o.start_timeout_s = 0.3;
    setenv("FAKE_WORKER_MUTE", "1", 1);
    double t0 = kevo_now();
    enum kevo_status st = kevo_pool_open(&o, &p, &msg);
    unsetenv("FAKE_WORKER_MUTE");
    assert_int_equal(st, KEVO_ERR_WORKER);
    assert_true(kevo_now() - t0 < 1.0);
    assert_non_null(strstr(msg, "did not answer ping within 0.3 s"));
    kevo_free(msg);
}

/* The real worker behind the real pool: the pool's argv and fds are what it expects. */
static void test_real_worker(void **state)
{
    (void)state;
    int dev = 0;
    json_t *req = json_pack("{s:s}", "op", "bogus"), *reply = NULL;

    setenv("FAKE_WORKER_REAL", "1", 1);
    struct kevo_pool *p = open_pool(1, &dev);
    unsetenv("FAKE_WORKER_REAL");
    json_t *r = call(p, 0, "ping", 5);
    assert_true(json_is_true(json_object_get(result(r), "pong")));
    assert_null(json_object_get(result(r), "device"));   /* the real one, not the fake */
    json_decref(r);
    assert_int_equal(kevo_pool_call(p, 0, req, 5, &reply), KEVO_OK);
    assert_string_equal(json_string_value(json_object_get(reply, "status")), "invalid argument");
    assert_non_null(strstr(json_string_value(json_object_get(reply, "message")), "bogus"));
    json_decref(reply);
    json_decref(req);
    assert_int_equal(kevo_pool_restarts(p), 0);
    kevo_pool_free(p);
}

/* Out of memory at each allocation of kevo_pool_open: a clean error, no half-open pool. */
static void test_open_out_of_memory(void **state)
{
    (void)state;
    int dev = 0, saw_nomem = 0;
    struct kevo_pool_opts o = { 0 };

    o.backend = "cpu";
    o.n_devices = 1;
    o.devices = &dev;
    for (long n = 1; n <= 8; n++) {
        struct kevo_pool *p = NULL;
        char *msg = NULL;
        int fds = count_fds();
        kevo_mem_fail_after(n);
        enum kevo_status st = kevo_pool_open(&o, &p, &msg);
        kevo_mem_fail_after(0);
        assert_true(st == KEVO_OK || st == KEVO_ERR_NOMEM);
        assert_true((st == KEVO_OK) == (p != NULL));
        saw_nomem |= st == KEVO_ERR_NOMEM;
        kevo_pool_free(p);
        kevo_free(msg);
        assert_int_equal(count_fds(), fds);
    }
    assert_true(saw_nomem);
}

/* Out of memory inside a call: an error for that call only; the slot keeps working. */
static void test_call_out_of_memory(void **state)
{
    (void)state;
    int dev = 0, saw_nomem = 0;
    struct kevo_pool *p = open_pool(1, &dev);
    json_t *req = json_pack("{s:s}", "op", "echo");

    for (long n = 1; n <= 4; n++) {
        json_t *reply = NULL;
        kevo_mem_fail_after(n);
        enum kevo_status st = kevo_pool_call(p, 0, req, 5, &reply);
        kevo_mem_fail_after(0);
        assert_true(st == KEVO_OK || st == KEVO_ERR_NOMEM);
        assert_true((st == KEVO_OK) == (reply != NULL));
        saw_nomem |= st == KEVO_ERR_NOMEM;
        json_decref(reply);
        expect_echo(p, 0, 0);
    }
    assert_true(saw_nomem);
    json_decref(req);
    kevo_pool_free(p);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool_opts o = { 0 };
    struct kevo_pool *p = NULL;
    char *msg = NULL;
    json_t *reply = NULL, *req = json_pack("{s:s}", "op", "ping");

    assert_int_equal(kevo_pool_open(&o, &p, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "device"));
    kevo_free(msg);
    o.n_devices = 1;
    o.devices = &dev;
    assert_int_equal(kevo_pool_open(&o, &p, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "backend"));
    kevo_free(msg);

    p = open_pool(1, &dev);
    assert_int_equal(kevo_pool_call(p, 1, req, 5, &reply), KEVO_ERR_INVALID);
    assert_int_equal(kevo_pool_call(p, -1, req, 5, &reply), KEVO_ERR_INVALID);
    assert_int_equal(kevo_pool_call(p, 0, NULL, 5, &reply), KEVO_ERR_INVALID);
    assert_null(reply);
    json_decref(req);
    kevo_pool_free(p);
    kevo_pool_free(NULL);
    assert_int_equal(kevo_pool_size(NULL), 0);
}

/* evalreq's typed result: what the worker judged, what the pool synthesized, and a reply
 * that is no eval result (the worker's fault, never a verdict). */
static void test_evalreq_typed(void **state)
{
    (void)state;
    int dev = 0;
    struct kevo_pool *p = open_pool(1, &dev);
    struct kevo_eval_call c = { .task_path = "t.c", .task_text = "task", .cand_text = "cand",
                                .trials = 3 };
    struct kevo_result r;
    json_t *calib = NULL;
    char *msg = NULL;

    c.cand_path = "ok";
    assert_int_equal(kevo_evalreq_call_result(p, 0, &c, 5, &r, &msg), KEVO_OK);
    assert_int_equal(r.verdict, KEVO_VERDICT_OK);
    assert_non_null(kevo_result_wl_at(&r, 2));
    assert_true(kevo_result_wl_at(&r, 2)->time.median_s == 2e-6);
    assert_true(r.request_s > 0);                      /* added by evalreq */
    kevo_result_clear(&r);
    c.cand_path = "hang";
    assert_int_equal(kevo_evalreq_call_result(p, 0, &c, 0.3, &r, &msg), KEVO_OK);
    assert_int_equal(r.verdict, KEVO_VERDICT_TIMEOUT);
    assert_true(json_real_value(json_object_get(r.evidence, "deadline_s")) == 0.3);
    kevo_result_clear(&r);
    c.cand_path = "die";
    assert_int_equal(kevo_evalreq_call_result(p, 0, &c, 5, &r, &msg), KEVO_OK);
    assert_int_equal(r.verdict, KEVO_VERDICT_CRASH);
    assert_int_equal(json_integer_value(json_object_get(r.evidence, "exit_status")), 7);
    kevo_result_clear(&r);
    c.cand_path = "unknown";
    assert_int_equal(kevo_evalreq_call_result(p, 0, &c, 5, &r, &msg), KEVO_ERR_WORKER);
    assert_non_null(strstr(msg, "unknown verdict \"fast\""));
    assert_null(r.doc);
    kevo_free(msg);
    msg = NULL;
    c.cand_path = "none";
    assert_int_equal(kevo_evalreq_call_result(p, 0, &c, 5, &r, &msg), KEVO_ERR_WORKER);
    assert_non_null(strstr(msg, "verdict: missing"));
    kevo_free(msg);
    msg = NULL;
    /* a candidate jansson cannot carry never reaches the worker: its own compile_error */
    c.cand_text = "\xff";
    assert_int_equal(kevo_evalreq_call_result(p, 0, &c, 5, &r, &msg), KEVO_OK);
    assert_int_equal(r.verdict, KEVO_VERDICT_COMPILE_ERROR);
    assert_int_equal(r.n_wl, 0);
    assert_string_equal(json_string_value(json_object_get(r.evidence, "message")),
                        "not valid UTF-8");
    kevo_result_clear(&r);
    /* a calibration answered by the pool's crash is a failure, not a calibration */
    assert_int_equal(kevo_evalreq_calibrate(p, 0, "cpu", 0, 5, &calib, &msg), KEVO_ERR_WORKER);
    assert_null(calib);
    assert_non_null(strstr(msg, "worker exited with status 7"));
    kevo_free(msg);
    kevo_pool_free(p);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "__worker") == 0)
        return fake_worker(argc - 1, argv + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ping),
        cmocka_unit_test(test_timeout_kills_and_restarts),
        cmocka_unit_test(test_exit_is_a_crash),
        cmocka_unit_test(test_signal_is_a_crash),
        cmocka_unit_test(test_reply_then_exit),
        cmocka_unit_test(test_kill_reaches_grandchildren),
        cmocka_unit_test(test_two_devices_are_independent),
        cmocka_unit_test(test_missing_exe),
        cmocka_unit_test(test_exe_that_is_not_a_worker),
        cmocka_unit_test(test_mute_worker_start_timeout),
        cmocka_unit_test(test_real_worker),
        cmocka_unit_test(test_open_out_of_memory),
        cmocka_unit_test(test_call_out_of_memory),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_evalreq_typed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

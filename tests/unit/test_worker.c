/*
 * test_worker - the wire protocol (framing, limits, deadlines, SIGPIPE) and the request
 * dispatch of kevo_worker_main, run in a forked child over pipes. Nothing here needs a
 * backend: the ops tested (ping, unknown op, bad JSON, bad compile fields) answer before
 * one is opened.
 */
#include "testutil.h"

#include "base/mem.h"
#include "base/clock.h"
#include "core/wire.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---- */

static void write_raw(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        assert_true(w > 0);
        c += w;
        n -= (size_t)w;
    }
}

static void write_header(int fd, uint32_t len)
{
    unsigned char h[4] = { (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                           (unsigned char)(len >> 8), (unsigned char)len };
    write_raw(fd, h, 4);
}

/* Write `bytes` to a fresh pipe, close the write end, and try to receive from it. */
static enum kevo_status recv_bytes(const void *bytes, size_t n, json_t **out)
{
    int fds[2];
    enum kevo_status st;

    assert_int_equal(pipe(fds), 0);
    if (n)
        write_raw(fds[1], bytes, n);
    close(fds[1]);
    st = kevo_wire_recv(fds[0], out);
    close(fds[0]);
    return st;
}

struct writer_arg {
    int fd;
    json_t *msg;
    enum kevo_status st;
};

static void *writer_main(void *p)
{
    struct writer_arg *a = p;
    a->st = kevo_wire_send(a->fd, a->msg);
    return NULL;
}

/* ---- framing ---- */

static void test_round_trip_large(void **state)
{
    (void)state;
    size_t n = 8u << 20;
    char *big = kevo_malloc(n + 1);
    int fds[2];
    pthread_t th;
    json_t *got = NULL;

    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('a' + i % 26);
    big[n] = '\0';
    json_t *msg = json_pack("{s:s, s:i, s:[i,i]}", "data", big, "n", 42, "v", 1, 2);
    assert_int_equal(pipe(fds), 0);
    struct writer_arg wa = { fds[1], msg, KEVO_ERR_INVALID };
    /* A pipe holds 64 KiB: the writer blocks until the reader drains it, in pieces. */
    assert_int_equal(pthread_create(&th, NULL, writer_main, &wa), 0);
    assert_int_equal(kevo_wire_recv(fds[0], &got), KEVO_OK);
    pthread_join(th, NULL);
    assert_int_equal(wa.st, KEVO_OK);
    assert_true(json_equal(msg, got));
    assert_int_equal(json_string_length(json_object_get(got, "data")), n);
    json_decref(got);
    json_decref(msg);
    kevo_free(big);
    close(fds[0]);
    close(fds[1]);
}

static void test_back_to_back_messages(void **state)
{
    (void)state;
    int fds[2];
    json_t *a = json_pack("{s:i}", "i", 1), *b = json_pack("{s:s}", "s", "two");
    json_t *ga = NULL, *gb = NULL;

    assert_int_equal(pipe(fds), 0);
    assert_int_equal(kevo_wire_send(fds[1], a), KEVO_OK);
    assert_int_equal(kevo_wire_send(fds[1], b), KEVO_OK);
    assert_int_equal(kevo_wire_recv(fds[0], &ga), KEVO_OK);
    assert_int_equal(kevo_wire_recv_until(fds[0], kevo_now() + 1, &gb), KEVO_OK);
    assert_true(json_equal(a, ga));
    assert_true(json_equal(b, gb));
    json_decref(a);
    json_decref(b);
    json_decref(ga);
    json_decref(gb);
    close(fds[0]);
    close(fds[1]);
}

static void test_bad_lengths_do_not_allocate(void **state)
{
    (void)state;
    json_t *out = (json_t *)&out;   /* must be cleared */
    unsigned char zero[4] = { 0, 0, 0, 0 };
    unsigned char huge[4] = { 0xff, 0xff, 0xff, 0xff };
    uint32_t over = KEVO_WIRE_MAX + 1;
    unsigned char just_over[4] = { (unsigned char)(over >> 24), (unsigned char)(over >> 16),
                                   (unsigned char)(over >> 8), (unsigned char)over };
    long before = kevo_mem_count();

    assert_int_equal(recv_bytes(zero, 4, &out), KEVO_ERR_PARSE);
    assert_null(out);
    assert_int_equal(recv_bytes(huge, 4, &out), KEVO_ERR_PARSE);
    assert_null(out);
    assert_int_equal(recv_bytes(just_over, 4, &out), KEVO_ERR_PARSE);
    assert_null(out);
    assert_int_equal(kevo_mem_count(), before);
}

static void test_truncated_and_eof(void **state)
{
    (void)state;
    json_t *out = NULL;
    char partial[4 + 10];

    /* clean EOF, EOF inside the header, EOF inside the body */
    assert_int_equal(recv_bytes(NULL, 0, &out), KEVO_ERR_IO);
    assert_int_equal(recv_bytes("\0\0", 2, &out), KEVO_ERR_IO);
    partial[0] = 0;
    partial[1] = 0;
    partial[2] = 0;
    partial[3] = 100;   /* promises 100 bytes, delivers 10 */
    memcpy(partial + 4, "{\"a\":1234}", 10);
    assert_int_equal(recv_bytes(partial, sizeof partial, &out), KEVO_ERR_IO);
    assert_null(out);
}

static void test_garbage_json(void **state)
{
    (void)state;
    json_t *out = NULL;
    const char *bodies[] = { "{nope", "[1,2]", "\"str\"", "{\"a\":1,\"a\":2}", "{} {}" };
    char frame[64];

    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        size_t n = strlen(bodies[i]);
        frame[0] = frame[1] = frame[2] = 0;
        frame[3] = (char)n;
        memcpy(frame + 4, bodies[i], n);
        assert_int_equal(recv_bytes(frame, 4 + n, &out), KEVO_ERR_PARSE);
        assert_null(out);
    }
}

static void test_send_rejects(void **state)
{
    (void)state;
    int fds[2];
    json_t *arr = json_array();
    json_t *nan = json_object();

    assert_int_equal(pipe(fds), 0);
    assert_int_equal(kevo_wire_send(fds[1], NULL), KEVO_ERR_INVALID);
    assert_int_equal(kevo_wire_send(fds[1], arr), KEVO_ERR_INVALID);
    /* a string with invalid UTF-8 can only be made with the nocheck constructor */
    json_object_set_new(nan, "s", json_stringn_nocheck("\xff\xfe", 2));
    assert_int_equal(kevo_wire_send(fds[1], nan), KEVO_ERR_INVALID);
    json_decref(arr);
    json_decref(nan);
    close(fds[0]);
    close(fds[1]);
}

static void test_send_too_big(void **state)
{
    (void)state;
    size_t n = KEVO_WIRE_MAX;   /* plus quotes and braces: over the limit */
    char *big = kevo_malloc(n);
    int fds[2];

    assert_non_null(big);
    memset(big, 'x', n);
    json_t *msg = json_object();
    json_object_set_new(msg, "d", json_stringn(big, n));
    kevo_free(big);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(kevo_wire_send(fds[1], msg), KEVO_ERR_TOOBIG);
    json_decref(msg);
    close(fds[0]);
    close(fds[1]);
}

/* With SIGPIPE at its default (fatal) action, a write to a closed pipe is only an error. */
static void test_send_to_closed_pipe(void **state)
{
    (void)state;
    int fds[2];
    json_t *msg = json_pack("{s:s}", "x", "y");
    sigset_t pending;
    struct sigaction sa, old;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &sa, &old);
    assert_int_equal(pipe(fds), 0);
    close(fds[0]);
    assert_int_equal(kevo_wire_send(fds[1], msg), KEVO_ERR_IO);
    sigpending(&pending);
    assert_false(sigismember(&pending, SIGPIPE));   /* taken back, never delivered later */
    sigaction(SIGPIPE, &old, NULL);
    json_decref(msg);
    close(fds[1]);
}

/* ---- deadlines ---- */

static void test_recv_until_times_out(void **state)
{
    (void)state;
    int fds[2];
    json_t *out = NULL;

    assert_int_equal(pipe(fds), 0);
    double t0 = kevo_now();
    assert_int_equal(kevo_wire_recv_until(fds[0], t0 + 0.2, &out), KEVO_ERR_TIMEOUT);
    double late = kevo_now() - (t0 + 0.2);
    assert_true(late >= 0);
    assert_true(late < 0.015);   /* poll() sleeps in whole ms */
    assert_null(out);
    /* a deadline already past: no wait at all */
    t0 = kevo_now();
    assert_int_equal(kevo_wire_recv_until(fds[0], t0 - 1, &out), KEVO_ERR_TIMEOUT);
    assert_true(kevo_now() - t0 < 0.005);
    close(fds[0]);
    close(fds[1]);
}

struct slow_arg {
    int fd;
};

/* Writes one message in three pieces with pauses: recv must assemble it. */
static void *slow_writer(void *p)
{
    struct slow_arg *a = p;
    const char body[] = "{\"slow\":true}";
    unsigned char h[4] = { 0, 0, 0, (unsigned char)(sizeof body - 1) };
    struct timespec ts = { 0, 30 * 1000000L };

    write_raw(a->fd, h, 2);
    nanosleep(&ts, NULL);
    write_raw(a->fd, h + 2, 2);
    write_raw(a->fd, body, 5);
    nanosleep(&ts, NULL);
    write_raw(a->fd, body + 5, sizeof body - 1 - 5);
    return NULL;
}

static void test_recv_until_partial_pieces(void **state)
{
    (void)state;
    int fds[2];
    pthread_t th;
    json_t *out = NULL;

    assert_int_equal(pipe(fds), 0);
    struct slow_arg a = { fds[1] };
    assert_int_equal(pthread_create(&th, NULL, slow_writer, &a), 0);
    assert_int_equal(kevo_wire_recv_until(fds[0], kevo_now() + 2, &out), KEVO_OK);
    pthread_join(th, NULL);
    assert_true(json_is_true(json_object_get(out, "slow")));
    json_decref(out);
    close(fds[0]);
    close(fds[1]);
}

/* The deadline holds even when the message stops arriving halfway. */
static void test_recv_until_stalls_mid_message(void **state)
{
    (void)state;
    int fds[2];
    json_t *out = NULL;

    assert_int_equal(pipe(fds), 0);
    write_header(fds[1], 50);
    write_raw(fds[1], "{\"a\":", 5);
    double t0 = kevo_now();
    assert_int_equal(kevo_wire_recv_until(fds[0], t0 + 0.1, &out), KEVO_ERR_TIMEOUT);
    assert_true(kevo_now() - t0 < 0.11);
    assert_null(out);
    close(fds[0]);
    close(fds[1]);
}

/* ---- kevo_worker_main in a child ---- */

struct child {
    pid_t pid;
    int to;     /* requests */
    int from;   /* replies */
};

static void child_start(struct child *c, const char *const *extra, int n_extra)
{
    int req[2], rep[2];

    assert_int_equal(pipe(req), 0);
    assert_int_equal(pipe(rep), 0);
    fflush(stdout);   /* the child must not flush our buffered output a second time */
    fflush(stderr);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        char in[16], out[16];
        char *argv[16];
        int n = 0;
        close(req[1]);
        close(rep[0]);
        snprintf(in, sizeof in, "%d", req[0]);
        snprintf(out, sizeof out, "%d", rep[1]);
        argv[n++] = (char *)"__worker";
        for (int i = 0; i < n_extra; i++)
            argv[n++] = (char *)extra[i];
        argv[n++] = (char *)"--fd-in";
        argv[n++] = in;
        argv[n++] = (char *)"--fd-out";
        argv[n++] = out;
        argv[n] = NULL;
        _exit(kevo_worker_main(n, argv));
    }
    close(req[0]);
    close(rep[1]);
    c->to = req[1];
    c->from = rep[0];
}

static int child_wait(struct child *c)
{
    int ws = 0;
    close(c->to);
    close(c->from);
    assert_int_equal(waitpid(c->pid, &ws, 0), c->pid);
    assert_true(WIFEXITED(ws));
    return WEXITSTATUS(ws);
}

static json_t *child_call(struct child *c, json_t *req)
{
    json_t *reply = NULL;
    assert_int_equal(kevo_wire_send(c->to, req), KEVO_OK);
    json_decref(req);
    assert_int_equal(kevo_wire_recv_until(c->from, kevo_now() + 5, &reply), KEVO_OK);
    return reply;
}

static const char *sfield(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static void test_worker_dispatch(void **state)
{
    (void)state;
    static const char *const args[] = { "--backend", "cpu", "--device", "0" };
    struct child c;
    json_t *r;

    child_start(&c, args, 4);
    r = child_call(&c, json_pack("{s:i, s:s}", "id", 7, "op", "ping"));
    assert_int_equal(json_integer_value(json_object_get(r, "id")), 7);
    assert_string_equal(sfield(r, "status"), "ok");
    assert_true(json_is_true(json_object_get(json_object_get(r, "result"), "pong")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "result"), "pid")),
                     c.pid);
    json_decref(r);

    r = child_call(&c, json_pack("{s:s, s:s}", "id", "abc", "op", "nosuchop"));
    assert_string_equal(sfield(r, "id"), "abc");   /* the id comes back whatever its type */
    assert_string_equal(sfield(r, "status"), "invalid argument");
    assert_non_null(strstr(sfield(r, "message"), "nosuchop"));
    assert_null(json_object_get(r, "result"));
    json_decref(r);

    r = child_call(&c, json_pack("{s:i}", "id", 8));
    assert_string_equal(sfield(r, "status"), "invalid argument");
    assert_non_null(strstr(sfield(r, "message"), "op"));
    json_decref(r);

    /* not JSON at all: answered with id null, and the worker keeps serving */
    write_header(c.to, 6);
    write_raw(c.to, "{oops}", 6);
    assert_int_equal(kevo_wire_recv_until(c.from, kevo_now() + 5, &r), KEVO_OK);
    assert_true(json_is_null(json_object_get(r, "id")));
    assert_string_equal(sfield(r, "status"), "parse error");
    assert_non_null(strstr(sfield(r, "message"), "JSON"));
    json_decref(r);

    /* compile without its fields: refused before any backend is needed */
    r = child_call(&c, json_pack("{s:i, s:s, s:s}", "id", 9, "op", "compile", "path", "x.cu"));
    assert_string_equal(sfield(r, "status"), "invalid argument");
    assert_non_null(strstr(sfield(r, "message"), "\"text\""));
    json_decref(r);

    /* a real compile on the CPU backend: the candidate with its param as a -D define */
    static const char task[] = "// kevo task   t\n// kevo size   N=8\n"
                               "// kevo input  x f32[N] normal(0,1)\n// kevo output y f32[N]\n"
                               "// kevo bytes  8*N\n// kevo call   f(x, y, N)\n"
                               "void f(const float *x, float *y, int n)\n"
                               "{ for (int i = 0; i < n; i++) y[i] = x[i]; }\n";
    static const char cand[] = "// kevo param  K 2 4\n// kevo call   g(x, y, N)\n"
                               "#if K != 4\n#error K should be 4\n#endif\n"
                               "void g(const float *x, float *y, int n)\n"
                               "{ for (int i = 0; i < n; i++) y[i] = K * x[i]; }\n";
    r = child_call(&c, json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:[i]}", "id", 11, "op",
                                 "compile", "path", "t.c", "text", task, "cand_path", "g.c",
                                 "cand_text", cand, "params", 4));
    assert_string_equal(sfield(r, "status"), "ok");
    json_t *res = json_object_get(r, "result");
    assert_true(json_is_true(json_object_get(res, "ok")));
    assert_string_equal(sfield(json_array_get(json_object_get(res, "kernels"), 0), "name"), "g");
    json_decref(r);
    /* the default K=2 trips the #error: a compile error is data, with the log */
    r = child_call(&c, json_pack("{s:i, s:s, s:s, s:s, s:s, s:s}", "id", 12, "op", "compile",
                                 "path", "t.c", "text", task, "cand_path", "g.c", "cand_text",
                                 cand));
    assert_string_equal(sfield(r, "status"), "ok");
    res = json_object_get(r, "result");
    assert_true(json_is_false(json_object_get(res, "ok")));
    assert_non_null(strstr(sfield(res, "log"), "K should be 4"));
    json_decref(r);

    r = child_call(&c, json_pack("{s:i, s:s}", "id", 10, "op", "ping"));
    assert_string_equal(sfield(r, "status"), "ok");
    json_decref(r);
    assert_int_equal(child_wait(&c), 0);   /* request pipe closed: a clean exit */
}

/* A compile-only worker (`kevo check`): no backend, the check op with the compiler of
 * each language; anything needing a device is refused with the reason. */
static void test_worker_check_without_backend(void **state)
{
    (void)state;
    static const char *const args[] = { "--backend", "none" };
    static const char task[] = "// kevo task   t\n// kevo size   N=8\n"
                               "// kevo input  x f32[N] normal(0,1)\n// kevo output y f32[N]\n"
                               "// kevo bytes  8*N\n// kevo call   f(x, y, N)\n"
                               "void f(const float *x, float *y, int n)\n"
                               "{ for (int i = 0; i < n; i++) y[i] = x[i]; }\n";
    static const char bad[] = "// kevo call   g(x, y, N)\n"
                              "void g(const float *x, float *y, int n) { oops; }\n";
    static const char cu_task[] = "// kevo task   t\n// kevo size   N=8\n"
                                  "// kevo input  x f32[N] normal(0,1)\n"
                                  "// kevo output y f32[N]\n// kevo bytes  8*N\n"
                                  "// kevo launch f grid=1 block=32 (x, y, N)\n"
                                  "extern \"C\" __global__ void f(const float *x, float *y, int n)\n"
                                  "{ int i = threadIdx.x; if (i < n) y[i] = x[i]; }\n";
    struct child c;
    json_t *r, *res;

    child_start(&c, args, 2);
    r = child_call(&c, json_pack("{s:i, s:s, s:s, s:s}", "id", 1, "op", "check", "path", "t.c",
                                 "text", task));
    assert_string_equal(sfield(r, "status"), "ok");
    assert_true(json_is_true(json_object_get(json_object_get(r, "result"), "ok")));
    json_decref(r);
    r = child_call(&c, json_pack("{s:i, s:s, s:s, s:s, s:s, s:s}", "id", 2, "op", "check",
                                 "path", "t.c", "text", task, "cand_path", "g.c", "cand_text",
                                 bad));
    assert_string_equal(sfield(r, "status"), "ok");   /* a compile error is data */
    res = json_object_get(r, "result");
    assert_true(json_is_false(json_object_get(res, "ok")));
    assert_non_null(strstr(sfield(res, "log"), "oops"));
    json_decref(r);
    r = child_call(&c, json_pack("{s:i, s:s, s:s, s:s, s:s}", "id", 3, "op", "check", "path",
                                 "t.cu", "text", cu_task, "arch", "sm_90a"));   /* NVRTC, no GPU */
    assert_string_equal(sfield(r, "status"), "ok");
    assert_true(json_is_true(json_object_get(json_object_get(r, "result"), "ok")));
    json_decref(r);
    r = child_call(&c, json_pack("{s:i, s:s, s:s, s:s, s:s}", "id", 4, "op", "compile", "path",
                                 "t.c", "text", task, "cand_path", "g.c"));
    assert_string_not_equal(sfield(r, "status"), "ok");   /* needs a backend it has not */
    assert_non_null(strstr(sfield(r, "message"), "no backend"));
    json_decref(r);
    assert_int_equal(child_wait(&c), 0);
}

/* A length the worker cannot skip ends it: the stream has lost its place. */
static void test_worker_exits_on_bad_frame(void **state)
{
    (void)state;
    static const char *const args[] = { "--backend", "cuda" };
    struct child c;

    child_start(&c, args, 2);
    write_header(c.to, KEVO_WIRE_MAX + 1);
    int rc = child_wait(&c);
    assert_int_not_equal(rc, 0);
    assert_int_not_equal(rc, KEVO_WORKER_EXIT_DEVICE);
}

static void test_worker_bad_options(void **state)
{
    (void)state;
    static const char *const bad_backend[] = { "--backend", "gpu" };
    static const char *const bad_device[] = { "--backend", "cpu", "--device", "x1" };
    static const char *const unknown[] = { "--backend", "cpu", "--frobnicate", "1" };
    struct child c;

    child_start(&c, bad_backend, 2);
    assert_int_equal(child_wait(&c), 2);
    child_start(&c, bad_device, 4);
    assert_int_equal(child_wait(&c), 2);
    child_start(&c, unknown, 4);
    assert_int_equal(child_wait(&c), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_large),
        cmocka_unit_test(test_back_to_back_messages),
        cmocka_unit_test(test_bad_lengths_do_not_allocate),
        cmocka_unit_test(test_truncated_and_eof),
        cmocka_unit_test(test_garbage_json),
        cmocka_unit_test(test_send_rejects),
        cmocka_unit_test(test_send_too_big),
        cmocka_unit_test(test_send_to_closed_pipe),
        cmocka_unit_test(test_recv_until_times_out),
        cmocka_unit_test(test_recv_until_partial_pieces),
        cmocka_unit_test(test_recv_until_stalls_mid_message),
        cmocka_unit_test(test_worker_dispatch),
        cmocka_unit_test(test_worker_check_without_backend),
        cmocka_unit_test(test_worker_exits_on_bad_frame),
        cmocka_unit_test(test_worker_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_mcp - `kevo mcp` driven over pipes as an MCP client drives it (docs/agents.md), and
 * `kevo prompt`:
 * - the protocol: initialize (the client's version echoed, another answered with one the
 *   server speaks), a notification answered by nothing, ping, tools/list (every tool with
 *   an input and an output schema), resources; malformed lines (not JSON, a batch, a bad
 *   id, no "jsonrpc", an unknown method, unknown tools, bad or unknown arguments) get
 *   JSON-RPC errors and the server goes on answering;
 * - paths: a file outside the working directory, one reached through "..", through a
 *   symlink, and an export directory outside the tree are refused (a tool error);
 * - the trail: eval of a correct CPU candidate is ok with a speedup per workload, an
 *   improved text naming it as parent is recorded with that parent, the same text again
 *   is recorded once, a candidate that stores past its output is out_of_bounds, one that
 *   does not parse is compile_error; runs and show find them all (op agent); prompt
 *   builds an improve prompt from a candidate's id without the held-out sizes; export
 *   passes the held-out gate and writes the files; after the session the runs are
 *   `stopped` in `kevo runs`, and `kevo run --resume` goes on from the agent's candidates;
 * - background runs: run_start, run_status, run_stop;
 * - `kevo prompt`: the prompt of a candidate and its eval result, bad ops refused.
 * Runs the binary in $KEVO_BIN (make test sets it) from the repository's root; skipped
 * without it.
 */
#include "testutil.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EVAL_WAIT_S 600.0          /* one evaluation on a busy 2-core machine, at most */

struct srv {
    pid_t pid;
    int to, from;                  /* its stdin, its stdout */
    char buf[1 << 20];
    size_t len;
    int next_id;
};

static char scratch[256], db[320];

#define NEED_BIN() do { if (!getenv("KEVO_BIN")) skip(); } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* `kevo mcp --archive DB --allow SCRATCH` with its stdio on pipes, stderr kept. */
static void srv_start(struct srv *s)
{
    int in[2], out[2];
    const char *bin = getenv("KEVO_BIN");

    memset(s, 0, sizeof *s);
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(bin, bin, "mcp", "--archive", db, "--allow", scratch, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    s->to = in[1];
    s->from = out[0];
    s->next_id = 100;
}

static void srv_send(struct srv *s, const char *line)
{
    size_t n = strlen(line);
    assert_int_equal(write(s->to, line, n), (ssize_t)n);
    assert_int_equal(write(s->to, "\n", 1), 1);
}

/* The next line the server writes, parsed; fails the test past wait_s. */
static json_t *srv_recv(struct srv *s, double wait_s)
{
    double until = now_s() + wait_s;

    for (;;) {
        char *nl = memchr(s->buf, '\n', s->len);
        if (nl) {
            json_error_t e;
            json_t *msg = json_loadb(s->buf, (size_t)(nl - s->buf), 0, &e);
            if (!msg)
                fail_msg("not JSON from the server: %.*s", (int)(nl - s->buf), s->buf);
            s->len -= (size_t)(nl + 1 - s->buf);
            memmove(s->buf, nl + 1, s->len);
            return msg;
        }
        struct pollfd p = { .fd = s->from, .events = POLLIN };
        int left = (int)((until - now_s()) * 1000);
        if (left <= 0 || poll(&p, 1, left) <= 0)
            fail_msg("no answer from kevo mcp within %.0f s", wait_s);
        ssize_t n = read(s->from, s->buf + s->len, sizeof s->buf - 1 - s->len);
        if (n <= 0)
            fail_msg("kevo mcp closed its stdout");
        s->len += (size_t)n;
    }
}

/* A request (params taken, may be NULL); its response. */
static json_t *rpc(struct srv *s, const char *method, json_t *params, double wait_s)
{
    int id = s->next_id++;
    json_t *req = json_pack("{s:s, s:i, s:s}", "jsonrpc", "2.0", "id", id, "method", method);
    char *t;

    if (params)
        json_object_set_new(req, "params", params);
    t = json_dumps(req, JSON_COMPACT);
    srv_send(s, t);
    free(t);
    json_decref(req);
    json_t *r = srv_recv(s, wait_s);
    assert_int_equal(json_integer_value(json_object_get(r, "id")), id);
    return r;
}

/* A tool call's result object (owned by the returned response, *resp). */
static json_t *tool(struct srv *s, const char *name, json_t *args, json_t **resp)
{
    *resp = rpc(s, "tools/call", json_pack("{s:s, s:o}", "name", name, "arguments", args),
                EVAL_WAIT_S);
    json_t *res = json_object_get(*resp, "result");
    if (!res)
        fail_msg("%s: no result: %s", name, json_dumps(*resp, JSON_COMPACT));
    return res;
}

static const char *text_of(json_t *res)
{
    return json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0),
                                             "text"));
}

/* The structured result of a tool call that did not fail. */
static json_t *ok_tool(struct srv *s, const char *name, json_t *args, json_t **resp)
{
    json_t *res = tool(s, name, args, resp);
    if (json_is_true(json_object_get(res, "isError")))
        fail_msg("%s failed: %s", name, text_of(res));
    assert_non_null(json_object_get(res, "structuredContent"));
    return json_object_get(res, "structuredContent");
}

/* The error code of a response that must be an error. */
static int err_code(json_t *r)
{
    json_t *e = json_object_get(r, "error");
    if (!e)
        fail_msg("expected an error: %s", json_dumps(r, JSON_COMPACT));
    return (int)json_integer_value(json_object_get(e, "code"));
}

static int srv_stop(struct srv *s)
{
    int st = 0;

    close(s->to);
    assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
    close(s->from);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void initialize(struct srv *s, const char *version)
{
    json_t *r = rpc(s, "initialize", json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion",
                                               version, "capabilities", "clientInfo", "name",
                                               "test_mcp", "version", "1"), 30);
    json_t *res = json_object_get(r, "result");
    const char *v = json_string_value(json_object_get(res, "protocolVersion"));

    assert_non_null(v);
    if (!strcmp(version, "2025-06-18"))
        assert_string_equal(v, "2025-06-18");
    else
        assert_true(!strcmp(v, "2025-11-25") || !strcmp(v, "2025-06-18"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(res, "serverInfo"),
                                                          "name")), "kevo");
    assert_non_null(json_object_get(json_object_get(res, "capabilities"), "tools"));
    json_decref(r);
    srv_send(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

/* ---- kevo, run as a command ---- */

static char out_text[1 << 20];

/* `kevo ARGS...` (NULL-terminated) with stdout captured; its exit status. */
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
    return test_run(argv, out_text, sizeof out_text, NULL, 0);
}

/* ---- the protocol ---- */

static void test_protocol(void **state)
{
    struct srv s;
    json_t *r;
    size_t i;
    json_t *t;

    (void)state;
    NEED_BIN();
    srv_start(&s);
    initialize(&s, "2025-06-18");
    r = rpc(&s, "ping", NULL, 30);   /* the notification got no answer: this is ping's */
    assert_true(json_is_object(json_object_get(r, "result")));
    json_decref(r);

    r = rpc(&s, "tools/list", json_object(), 30);
    json_t *tools = json_object_get(json_object_get(r, "result"), "tools");
    assert_int_equal(json_array_size(tools), 9);
    json_array_foreach(tools, i, t) {
        assert_string_equal(json_string_value(json_object_get(json_object_get(t, "inputSchema"),
                                                              "type")), "object");
        assert_string_equal(json_string_value(json_object_get(json_object_get(t, "outputSchema"),
                                                              "type")), "object");
        assert_non_null(json_string_value(json_object_get(t, "description")));
    }
    json_decref(r);

    r = rpc(&s, "resources/read", json_pack("{s:s}", "uri", "kevo://docs/agents"), 30);
    assert_non_null(strstr(json_string_value(json_object_get(json_array_get(json_object_get(
        json_object_get(r, "result"), "contents"), 0), "text")), "The agent brief"));
    json_decref(r);
    r = rpc(&s, "resources/read", json_pack("{s:s}", "uri", "kevo://playbook/../../../etc/passwd"), 30);
    assert_int_equal(err_code(r), -32002);
    json_decref(r);
    r = rpc(&s, "resources/list", NULL, 30);
    assert_true(json_array_size(json_object_get(json_object_get(r, "result"), "resources")) > 6);
    json_decref(r);

    /* malformed: an error each, and the server goes on */
    static const struct { const char *line; int code; } bad[] = {
        { "this is not json", -32700 },
        { "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600 },
        { "{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"method\":\"ping\"}", -32600 },
        { "{\"id\":7,\"method\":\"ping\"}", -32600 },
        { "{\"jsonrpc\":\"2.0\",\"id\":8}", -32600 },
        { "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"no/such/method\"}", -32601 },
        { "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}", -32602 },
        { "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{\"name\":\"eval\",\"arguments\":\"x\"}}", -32602 },
        { "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{\"name\":\"eval\",\"arguments\":{\"task\":\"tasks/cpu/cpu_saxpy.c\",\"trials\":\"three\"}}}", -32602 },
        { "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\",\"params\":{\"name\":\"show\",\"arguments\":{\"candidate\":1,\"colour\":2}}}", -32602 },
        { "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\",\"params\":{\"name\":\"runs\",\"arguments\":{\"candidates\":true}}}", -32602 },
        { "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"initialize\",\"params\":{}}", -32602 },
        { "{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"ping\",\"params\":[1]}", -32602 },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        srv_send(&s, bad[k].line);
        r = srv_recv(&s, 30);
        if (err_code(r) != bad[k].code)
            fail_msg("%s: code %d, expected %d", bad[k].line, err_code(r), bad[k].code);
        json_decref(r);
    }
    srv_send(&s, "");   /* blank lines are nothing */
    r = rpc(&s, "ping", NULL, 30);
    assert_true(json_is_object(json_object_get(r, "result")));
    json_decref(r);
    assert_int_equal(srv_stop(&s), 0);

    srv_start(&s);   /* a version it does not speak: answered with one it does */
    initialize(&s, "1999-01-01");
    assert_int_equal(srv_stop(&s), 0);
}

/* ---- paths ---- */

static void refused(struct srv *s, const char *name, json_t *args)
{
    json_t *resp, *res = tool(s, name, args, &resp);

    assert_true(json_is_true(json_object_get(res, "isError")));
    if (strncmp(text_of(res), "refused", 7) != 0)
        fail_msg("%s: %s", name, text_of(res));
    assert_null(json_object_get(res, "structuredContent"));
    json_decref(resp);
}

static void test_paths(void **state)
{
    struct srv s;
    char link[400], out[400];

    (void)state;
    NEED_BIN();
    snprintf(link, sizeof link, "%s/hosts.c", scratch);
    assert_int_equal(symlink("/etc/hosts", link), 0);
    srv_start(&s);
    initialize(&s, "2025-06-18");
    refused(&s, "check", json_pack("{s:s}", "task", "/etc/passwd"));
    refused(&s, "check", json_pack("{s:s}", "task", "tasks/../../../../../../etc/passwd"));
    refused(&s, "check", json_pack("{s:s}", "task", link));   /* allowed dir, link out */
    refused(&s, "eval", json_pack("{s:s, s:s}", "task", "tasks/cpu/cpu_saxpy.c", "candidate",
                                  "/etc/hostname"));
    snprintf(out, sizeof out, "/etc/kevo-test-%d/out", (int)getpid());
    refused(&s, "export", json_pack("{s:i, s:s}", "run", 1, "out", out));
    assert_int_equal(srv_stop(&s), 0);
    unlink(link);
}

/* ---- the trail ---- */

struct trail {
    int64_t run, seed, tweak, oob, oob_run;
};

/* The seed (ok), an edit of it naming it as parent, the seed again (recorded once). */
static void eval_softmax(struct srv *s, struct trail *t)
{
    json_t *resp, *o, *w;
    size_t i;

    o = ok_tool(s, "eval", json_pack("{s:s, s:s, s:f}", "task", "tasks/cpu/cpu_softmax_rows.c",
                                     "candidate", "examples/seeds/cpu_softmax_rows.c",
                                     "time_cap_s", 0.05), &resp);
    assert_string_equal(json_string_value(json_object_get(o, "verdict")), "ok");
    t->seed = json_integer_value(json_object_get(o, "candidate"));
    t->run = json_integer_value(json_object_get(o, "run"));
    assert_true(t->seed > 0 && t->run > 0);
    assert_int_equal(json_array_size(json_object_get(o, "workloads")), 2);
    json_array_foreach(json_object_get(o, "workloads"), i, w)
        assert_true(json_number_value(json_object_get(w, "speedup")) > 0);
    assert_true(json_number_value(json_object_get(json_object_get(o, "summary"), "sol_fraction")) > 0);
    json_decref(resp);

    char *text = NULL;
    FILE *f = fopen("examples/seeds/cpu_softmax_rows.c", "r");
    assert_non_null(f);
    text = calloc(1, 1 << 16);
    size_t n = fread(text, 1, (1 << 16) - 64, f);
    fclose(f);
    snprintf(text + n, 64, "/* an agent's edit */\n");
    o = ok_tool(s, "eval", json_pack("{s:s, s:s, s:I, s:f}", "task", "tasks/cpu/cpu_softmax_rows.c",
                                     "candidate_text", text, "parent", (json_int_t)t->seed,
                                     "time_cap_s", 0.05), &resp);
    t->tweak = json_integer_value(json_object_get(o, "candidate"));
    assert_true(t->tweak > t->seed);
    assert_int_equal(json_integer_value(json_object_get(o, "run")), t->run);
    assert_int_equal(json_integer_value(json_object_get(o, "parent")), t->seed);
    json_decref(resp);
    free(text);

    o = ok_tool(s, "eval", json_pack("{s:s, s:s, s:f}", "task", "tasks/cpu/cpu_softmax_rows.c",
                                     "candidate", "examples/seeds/cpu_softmax_rows.c",
                                     "time_cap_s", 0.05), &resp);
    assert_true(json_is_true(json_object_get(o, "duplicate")));
    assert_int_equal(json_integer_value(json_object_get(o, "candidate")), t->seed);
    json_decref(resp);
}

/* The store past the end (out_of_bounds) and a text that does not parse. */
static void eval_bad(struct srv *s, struct trail *t)
{
    json_t *resp, *o;

    o = ok_tool(s, "eval", json_pack("{s:s, s:s, s:f}", "task", "tasks/cpu/cpu_vector_add.c",
                                     "candidate", "tests/exploits/cpu/write_past_end.c",
                                     "time_cap_s", 0.05), &resp);
    assert_string_equal(json_string_value(json_object_get(o, "verdict")), "out_of_bounds");
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "evidence"),
                                                          "tensor")), "z");
    t->oob = json_integer_value(json_object_get(o, "candidate"));
    t->oob_run = json_integer_value(json_object_get(o, "run"));
    assert_true(t->oob_run != t->run);
    json_decref(resp);

    o = ok_tool(s, "eval", json_pack("{s:s, s:s}", "task", "tasks/cpu/cpu_vector_add.c",
                                     "candidate_text", "// kevo call  vadd(x, y, nope, N)\n"),
                &resp);
    assert_string_equal(json_string_value(json_object_get(o, "verdict")), "compile_error");
    assert_int_equal(json_integer_value(json_object_get(o, "run")), t->oob_run);
    json_decref(resp);
}

/* runs and show find the agent's candidates; prompt and export work from their ids. */
static void read_trail(struct srv *s, const struct trail *t)
{
    json_t *resp, *o, *e;
    size_t i;
    int seen = 0;
    char out[400], path[500];

    o = ok_tool(s, "runs", json_object(), &resp);
    json_array_foreach(json_object_get(o, "runs"), i, e)
        seen += json_integer_value(json_object_get(e, "id")) == t->run ||
                json_integer_value(json_object_get(e, "id")) == t->oob_run;
    assert_int_equal(seen, 2);
    json_decref(resp);
    o = ok_tool(s, "runs", json_pack("{s:I, s:b}", "run", (json_int_t)t->run, "candidates", 1), &resp);
    assert_int_equal(json_array_size(json_object_get(o, "candidates")), 2);
    json_array_foreach(json_object_get(o, "candidates"), i, e)
        assert_string_equal(json_string_value(json_object_get(e, "op")), "agent");
    json_decref(resp);
    o = ok_tool(s, "show", json_pack("{s:I}", "candidate", (json_int_t)t->oob), &resp);
    assert_string_equal(json_string_value(json_object_get(o, "verdict")), "out_of_bounds");
    json_decref(resp);
    o = ok_tool(s, "show", json_pack("{s:I}", "candidate", (json_int_t)t->tweak), &resp);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "parents"), 0)), t->seed);
    assert_non_null(strstr(json_string_value(json_object_get(o, "source")), "an agent's edit"));
    json_decref(resp);

    o = ok_tool(s, "prompt", json_pack("{s:s, s:I}", "op", "improve", "candidate_id",
                                       (json_int_t)t->seed), &resp);
    const char *user = json_string_value(json_object_get(o, "user"));
    assert_non_null(strstr(user, "Verdict: ok"));
    assert_non_null(strstr(user, "softmax_rows_fast"));
    assert_null(strstr(user, "10007"));   /* the held-out size stays secret */
    assert_true(json_is_true(json_object_get(o, "evaluated")));
    json_decref(resp);

    snprintf(out, sizeof out, "%s/export", scratch);
    o = ok_tool(s, "export", json_pack("{s:I, s:s}", "run", (json_int_t)t->run, "out", out), &resp);
    assert_true(json_integer_value(json_object_get(o, "candidate")) > 0);
    snprintf(path, sizeof path, "%s/cpu_softmax_rows.c", out);
    assert_int_equal(access(path, F_OK), 0);
    json_decref(resp);
}

/* After the session: the runs are stopped in `kevo runs`, and a search resumes one. */
static void after_session(const struct trail *t)
{
    char id[32];
    json_t *doc, *e;
    size_t i;
    int searched = 0;

    assert_int_equal(kevo("runs", "--archive", db, "--json", NULL), 0);
    assert_non_null(strstr(out_text, "\"stopped\""));
    snprintf(id, sizeof id, "%lld", (long long)t->run);
    assert_int_equal(kevo("run", "--resume", id, "--budget", "6", "--time-cap", "0.05",
                          "--archive", db, NULL), 0);
    assert_int_equal(kevo("runs", id, "--candidates", "--archive", db, "--json", NULL), 0);
    doc = json_loads(out_text, 0, NULL);
    assert_non_null(doc);
    json_array_foreach(json_object_get(doc, "candidates"), i, e) {
        int64_t p = json_integer_value(json_array_get(json_object_get(e, "parents"), 0));
        searched += strcmp(json_string_value(json_object_get(e, "op")), "agent") != 0 &&
                    (p == t->seed || p == t->tweak);
    }
    assert_true(searched > 0);   /* the search's operators started from the agent's work */
    json_decref(doc);
}

static void test_trail(void **state)
{
    struct srv s;
    struct trail t;

    (void)state;
    NEED_BIN();
    memset(&t, 0, sizeof t);
    srv_start(&s);
    initialize(&s, "2025-06-18");
    eval_softmax(&s, &t);
    eval_bad(&s, &t);
    read_trail(&s, &t);
    assert_int_equal(srv_stop(&s), 0);
    after_session(&t);
}

/* ---- background runs ---- */

static void test_background_run(void **state)
{
    struct srv s;
    json_t *resp, *o;

    (void)state;
    NEED_BIN();
    srv_start(&s);
    initialize(&s, "2025-06-18");
    o = ok_tool(&s, "run_start", json_pack("{s:s, s:i, s:f}", "task", "tasks/cpu/cpu_saxpy.c",
                                           "budget", 200, "time_cap_s", 0.05), &resp);
    int64_t run = json_integer_value(json_object_get(o, "run"));
    assert_true(run > 0);
    json_decref(resp);
    o = ok_tool(&s, "run_status", json_pack("{s:I}", "run", (json_int_t)run), &resp);
    assert_int_equal(json_integer_value(json_object_get(o, "run")), run);
    assert_true(json_is_object(json_object_get(o, "process")));
    json_decref(resp);
    o = ok_tool(&s, "run_stop", json_pack("{s:I}", "run", (json_int_t)run), &resp);
    assert_false(json_is_true(json_object_get(json_object_get(o, "process"), "running")));
    const char *st = json_string_value(json_object_get(o, "status"));
    assert_true(!strcmp(st, "stopped") || !strcmp(st, "done"));
    json_decref(resp);
    json_t *res = tool(&s, "run_stop", json_pack("{s:i}", "run", 999999), &resp);
    assert_true(json_is_true(json_object_get(res, "isError")));   /* not this session's */
    json_decref(resp);
    assert_int_equal(srv_stop(&s), 0);
}

/* ---- kevo prompt ---- */

static void test_prompt_cli(void **state)
{
    char cal[400], ev[400];
    json_t *doc;
    FILE *f;

    (void)state;
    NEED_BIN();
    snprintf(cal, sizeof cal, "%s/calib.json", scratch);
    snprintf(ev, sizeof ev, "%s/eval.json", scratch);
    f = fopen(cal, "w");
    fputs("{\"device\": {\"name\": \"test-device-x\", \"arch\": \"cpu\", \"sms\": 2},"
          " \"bandwidth\": {\"best_bytes_per_s\": 1e10}, \"launch_floor_s\": 1e-6}", f);
    fclose(f);
    f = fopen(ev, "w");
    fputs("{\"verdict\": \"mismatch\", \"message\": \"y[3] is off\", \"evidence\":"
          " {\"output\": \"y\", \"index\": 3}, \"workloads\": []}", f);
    fclose(f);
    assert_int_equal(kevo("prompt", "tasks/cpu/cpu_softmax_rows.c",
                          "examples/seeds/cpu_softmax_rows.c", "--op", "fix", "--eval-json", ev,
                          "--calibration", cal, "--json", NULL), 0);
    doc = json_loads(out_text, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "op")), "fix");
    const char *user = json_string_value(json_object_get(doc, "user"));
    assert_non_null(strstr(user, "Verdict: mismatch - y[3] is off"));
    assert_null(strstr(user, "10007"));
    assert_non_null(strstr(json_string_value(json_object_get(doc, "system")), "kevo"));
    json_decref(doc);
    assert_int_equal(kevo("prompt", "tasks/cpu/cpu_softmax_rows.c", "--op", "generate",
                          "--calibration", cal, NULL), 0);
    assert_non_null(strstr(out_text, "test-device-x"));
    assert_non_null(strstr(out_text, "=== user (prompts/generate.md) ==="));
    assert_int_equal(kevo("prompt", "tasks/cpu/cpu_softmax_rows.c", "--op", "bogus", NULL), 2);
    assert_int_equal(kevo("prompt", "tasks/cpu/cpu_softmax_rows.c", "--op", "fix", NULL), 2);
    assert_int_equal(kevo("prompt", "tasks/cpu/no_such_task.c", NULL), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_trail),
        cmocka_unit_test(test_background_run),
        cmocka_unit_test(test_prompt_cli),
    };
    int rc;

    signal(SIGPIPE, SIG_IGN);   /* a server that died shows as a failed write, not a kill */
    test_scratch(scratch, sizeof scratch, "mcp");
    if (!scratch[0])
        return 1;
    snprintf(db, sizeof db, "%s/archive.db", scratch);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    test_scratch_remove(scratch);
    return rc;
}

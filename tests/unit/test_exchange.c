/*
 * test_exchange - LLM calls across an air gap (docs/llm.md "Air-gapped clusters",
 * src/ctl/exchange.c): an offline run on the CPU backend records the calls it wanted;
 * `kevo llm pending` lists them (prompts, model spec, settings; no key), `kevo llm answer`
 * makes them against a fake provider (real HTTP on loopback, tests/unit/fake_provider.h)
 * with the run's settings, `kevo llm import` stores the replies, and `kevo run --resume`
 * turns them into evaluated candidates before recording what it wants next; twice, so a
 * fix of the first cycle's failure is asked and used in the second. Also: bad import lines
 * named with their numbers and fields (nothing stored), failed and used replies skipped,
 * a done run resumed only with a larger budget, the cost cap of answer, the schema's
 * migration from version 3, and the archives under bench/results opening. Needs KEVO_BIN
 * (the worker and the CLI) for the runs; the archive-only tests run without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "testutil.h"

#include "fake_provider.h"

#include "ctl/archive.h"
#include "kevo.h"

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>

#define TASK "tests/search/slow_ref.c"
#define SECRET "sk-kevo-test-SECRET-exchange-0a1b2c"

static char dir[256];
static const char *kevo_bin;
static char prices[300];

/* ---- the fake model (as test_llm_run.c's: it answers by what the prompt asks) ---- */

static const char GEN[] =
    "Here is a first version.\n```c\n// kevo call fast_affine(x, y, N)\n"
    "void fast_affine(const float *x, float *y, int n)\n{\n"
    "    for (int i = 0; i < n; i++)\n        y[i] = 2.0f * x[i] + 1.0f\n}\n```\n";
static const char FIX[] =
    "The statement lacks its semicolon.\n<<<<<<< SEARCH\n        y[i] = 2.0f * x[i] + 1.0f\n"
    "=======\n        y[i] = 2.0f * x[i] + 1.0f;\n>>>>>>> REPLACE\n";
static const char IMPROVE[] =
    "Unrolled by four.\n```c\n// kevo call fast_affine4(x, y, N)\n"
    "void fast_affine4(const float *restrict x, float *restrict y, int n)\n{\n"
    "    int i = 0;\n    for (; i + 4 <= n; i += 4) {\n"
    "        y[i] = 2.0f * x[i] + 1.0f;\n        y[i + 1] = 2.0f * x[i + 1] + 1.0f;\n"
    "        y[i + 2] = 2.0f * x[i + 2] + 1.0f;\n        y[i + 3] = 2.0f * x[i + 3] + 1.0f;\n"
    "    }\n    for (; i < n; i++)\n        y[i] = 2.0f * x[i] + 1.0f;\n}\n```\n";
static const char PLAN[] = "Remove the repeated computation; one pass over x.";

static pthread_mutex_t body_mu = PTHREAD_MUTEX_INITIALIZER;
static char *bodies[256];
static int n_bodies;
static char last_req[1 << 16];

/* An OpenAI chat completion whose content is text: 1000 tokens in, 100 out. */
static const char *completion(const char *text)
{
    json_t *r = json_pack("{s:s, s:[{s:i, s:{s:s, s:s}, s:s}], s:{s:i, s:i}}", "id", "c",
                          "choices", "index", 0, "message", "role", "assistant", "content", text,
                          "finish_reason", "stop", "usage", "prompt_tokens", 1000,
                          "completion_tokens", 100);
    char *s = json_dumps(r, JSON_COMPACT);
    json_decref(r);
    pthread_mutex_lock(&body_mu);
    if (n_bodies < 256)
        bodies[n_bodies++] = s;
    pthread_mutex_unlock(&body_mu);
    return s;
}

static const char *respond(void *user, const char *req)
{
    (void)user;
    pthread_mutex_lock(&body_mu);
    snprintf(last_req, sizeof last_req, "%.65000s", req);
    pthread_mutex_unlock(&body_mu);
    if (strstr(req, "Write a first fast implementation"))
        return completion(GEN);
    if (strstr(req, "This candidate fails. Fix it"))
        return completion(FIX);
    if (strstr(req, "Make this candidate faster") || strstr(req, "Implement exactly this strategy"))
        return completion(IMPROVE);
    if (strstr(req, "choose ONE optimization strategy"))
        return completion(PLAN);
    return completion("I would rather not.");
}

/* ---- helpers ---- */

static int setup(void **state)
{
    (void)state;
    kevo_bin = test_scratch(dir, sizeof dir, "exchange");
    if (!dir[0])
        return -1;
    snprintf(prices, sizeof prices, "%s/prices.json", dir);
    FILE *f = fopen(prices, "w");
    if (!f)
        return -1;
    fputs("{\"fake\": {\"in\": 1.0, \"out\": 10.0}}\n", f);   /* a call: 0.001 + 0.001 */
    fclose(f);
    setenv("OPENAI_API_KEY", SECRET, 1);   /* sent to the fake; never written anywhere */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < n_bodies; i++)
        free(bodies[i]);
    return test_scratch_remove(dir);
}

/* One number from an SQL query on db (-1 when no row). */
static double q1(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    double v = -1;
    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(s, sql, -1, &q, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(s));
    if (sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_double(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(s);
    return v;
}

static void exec_sql(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                     SQLITE_OK);
    if (sqlite3_exec(s, sql, NULL, NULL, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(s));
    sqlite3_close(s);
}

/* The whole file (free it); NULL when it cannot be read. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    size_t n = 0;
    if (!f)
        return NULL;
    FILE *m = open_memstream(&b, &n);
    int c;
    while ((c = fgetc(f)) != EOF)
        fputc(c, m);
    fclose(m);
    fclose(f);
    return b;
}

/* No file kevo wrote holds the key: the archive (and its WAL), pending and answer files. */
static void no_secret(const char *path)
{
    char *t = slurp(path);
    size_t n = 0;
    if (!t)
        return;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = (size_t)ftell(f);
    fclose(f);
    if (memmem(t, n, SECRET, strlen(SECRET)))
        fail_msg("the key is in %s", path);
    free(t);
}

static int lines_of(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    return n;
}

/* kevo_run for a run of TASK (resume 0) or a resumed one; the report. */
static json_t *run(const char *db, int64_t resume, int64_t budget, const char *model,
                   enum kevo_status want, char **msg)
{
    struct kevo_run_opts o;
    const char *models[1] = { model };
    char *out = NULL;
    int64_t id = 0;

    kevo_run_opts_default(&o);
    o.archive = db;
    o.eval.backend = KEVO_BACKEND_CPU;
    o.eval.time_cap_s = 0.05;
    o.budget = budget;
    o.prices = prices;
    o.resume = resume;
    if (!resume) {
        o.n_models = 1;
        o.models = models;
        o.llm_concurrency = 3;
        o.offline = 1;
    }
    enum kevo_status st = kevo_run(resume ? NULL : TASK, &o, NULL, NULL, NULL, &id, &out, msg);
    if (st != want)
        fail_msg("kevo_run: %s (status %d, wanted %d)", *msg ? *msg : "?", st, want);
    json_t *r = out ? json_loads(out, 0, NULL) : NULL;
    kevo_free(out);
    return r;
}

static void cli(const char *args)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "'%s' %s", kevo_bin, args);
    int rc = system(cmd);
    if (rc != 0)
        fail_msg("%s: exit status %d", cmd, rc);
}

/* ---- the air-gapped cycle ---- */

/* pending, answer (the CLI, against the fake), import (the library): the replies stored;
 * the number of calls answered. */
static int cycle(const char *db, int64_t run_id, struct fake *f, int k)
{
    char pend[600], ans[600], args[1600], *jsonl = NULL, *msg = NULL;
    int n = 0, req0 = f->n_req;
    struct kevo_exchange_stats s;

    snprintf(pend, sizeof pend, "%s/pending%d.jsonl", dir, k);
    snprintf(ans, sizeof ans, "%s/answers%d.jsonl", dir, k);
    assert_int_equal(kevo_exchange_pending(db, run_id, &jsonl, &n, &msg), KEVO_OK);
    assert_true(n >= 1);
    assert_int_equal(lines_of(jsonl), n);
    snprintf(args, sizeof args, "llm pending %lld --archive '%s' --out '%s'", (long long)run_id,
             db, pend);
    cli(args);
    char *file = slurp(pend);
    assert_string_equal(file, jsonl);   /* the CLI wrote what the library gives */
    /* each line: the call, its operator, the model's spec and settings, both prompts */
    const char *p = jsonl;
    for (int i = 0; i < n; i++) {
        const char *nl = strchr(p, '\n');
        json_t *o = json_loadb(p, (size_t)(nl - p), 0, NULL);
        assert_non_null(o);
        assert_non_null(json_string_value(json_object_get(o, "call")));
        assert_non_null(strstr(json_string_value(json_object_get(o, "op")), "llm_"));
        assert_non_null(strstr(json_string_value(json_object_get(o, "model")), "openai:fake@"));
        assert_true(json_integer_value(json_object_get(json_object_get(o, "settings"),
                                                       "max_output")) > 0);
        assert_non_null(strstr(json_string_value(json_object_get(o, "system")), "kevo"));
        assert_true(strlen(json_string_value(json_object_get(o, "prompt"))) > 100);
        json_decref(o);
        p = nl + 1;
    }
    print_message("[ pending  ] cycle %d: %d call(s)\n", k, n);
    no_secret(pend);
    free(file);
    kevo_free(jsonl);
    kevo_free(msg);
    /* answered where the network is: the CLI, against the fake */
    snprintf(args, sizeof args, "llm answer '%s' --out '%s' --prices '%s' --llm-concurrency 2"
             " --model 'openai:fake@http://127.0.0.1:%d/v1'", pend, ans, prices, f->port);
    cli(args);
    assert_int_equal(f->n_req - req0, n);   /* one request a call */
    /* asked with the run's settings: its output limit, as the pending line said */
    assert_non_null(strstr(last_req, "32000"));
    no_secret(ans);
    char *answers = slurp(ans);
    assert_int_equal(lines_of(answers), n);
    assert_non_null(strstr(answers, "\"status\":\"ok\""));
    assert_non_null(strstr(answers, "\"usage\":{\"in\":1000,\"out\":100"));
    assert_int_equal(kevo_exchange_import(db, ans, answers, strlen(answers), &s, &msg), KEVO_OK);
    assert_int_equal(s.n_ok, n);
    assert_int_equal(s.n_failed + s.n_skipped, 0);
    free(answers);
    kevo_free(msg);
    /* answered: nothing waits any more */
    assert_int_equal(kevo_exchange_pending(db, run_id, &jsonl, &n, &msg), KEVO_OK);
    assert_int_equal(n, 0);
    kevo_free(jsonl);
    kevo_free(msg);
    return s.n_ok;
}

static void test_air_gapped_cycle(void **state)
{
    char db[512], model[128], sql[600], *msg = NULL;
    (void)state;
    if (!kevo_bin)
        skip();
    struct fake *f = fake_start(NULL, 0);
    f->respond = respond;
    snprintf(db, sizeof db, "%s/airgap.db", dir);
    snprintf(model, sizeof model, "openai:fake@http://127.0.0.1:%d/v1", f->port);

    /* 1. offline: the model is never called; the calls it wanted are recorded */
    json_t *r = run(db, 0, 4, model, KEVO_OK, &msg);
    int64_t id = json_integer_value(json_object_get(r, "run"));
    json_decref(r);
    assert_int_equal(f->n_req, 0);
    assert_true(q1(db, "SELECT count(*) FROM llm_calls WHERE status = 'not_cached'") >= 2);

    /* 2. pending, answer, import; resume: the replies become candidates, evaluated */
    int answered = cycle(db, id, f, 1);
    r = run(db, id, 12, NULL, KEVO_OK, &msg);
    json_decref(r);
    assert_int_equal(f->n_req, answered);   /* the resumed session is offline too */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls l JOIN candidates c ON"
             " c.id = l.cand_id WHERE l.run_id = %lld AND l.status = 'imported' AND"
             " l.answers IS NOT NULL AND l.step IS NOT NULL AND c.state = 'done' AND"
             " c.op LIKE 'llm_%%'", (long long)id);
    double used = q1(db, sql);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls l JOIN candidates c ON"
             " c.id = l.cand_id WHERE l.status = 'imported' AND c.verdict = 'ok' AND"
             " c.op IN ('llm_improve', 'llm_plan')");
    double ok = q1(db, sql);
    print_message("[ resume   ] %d replies imported: %.0f candidates evaluated, %.0f ok\n",
                  answered, used, ok);
    assert_true(used >= 2);   /* generate (does not compile) and improve */
    assert_true(ok >= 1);
    assert_true(q1(db, "SELECT count(*) FROM candidates WHERE op = 'llm_generate' AND"
                       " verdict = 'compile_error'") == 1);
    /* each imported reply used once, and priced as the run prices its model */
    assert_true(q1(db, "SELECT count(*) FROM llm_imports i WHERE NOT EXISTS (SELECT 1 FROM"
                       " llm_calls l WHERE l.answers = i.call_id)") == 0);
    assert_true(q1(db, "SELECT count(*) - count(DISTINCT answers) FROM llm_calls"
                       " WHERE answers IS NOT NULL") == 0);
    assert_true(fabs(q1(db, "SELECT max(cost) FROM llm_calls WHERE status LIKE 'imported%'") -
                     0.002) < 1e-9);

    /* 3. the next cycle: what the resumed session wanted (the fix of generate's failure,
     * the plan's code, ...) answered and used in turn */
    double before = q1(db, "SELECT max(id) FROM llm_calls");
    answered = cycle(db, id, f, 2);
    r = run(db, id, 20, NULL, KEVO_OK, &msg);
    int64_t evals = json_integer_value(json_object_get(r, "evaluations"));
    assert_true(evals > 12);
    json_decref(r);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls WHERE id > %.0f AND"
             " status LIKE 'imported%%'", before);
    print_message("[ cycle 2  ] %d replies imported, %.0f used; llm_fix ok: %.0f\n", answered,
                  q1(db, sql), q1(db, "SELECT count(*) FROM candidates WHERE op = 'llm_fix'"
                                      " AND verdict = 'ok'"));
    assert_true(q1(db, sql) == answered);
    assert_true(q1(db, "SELECT count(*) FROM llm_calls WHERE status LIKE 'imported%'"
                       " AND op = 'llm_plan_code'") >= 1);   /* the plan's second call */

    /* 4. done: resumed only with a budget above what it made (its own is 4) */
    r = run(db, id, 0, NULL, KEVO_ERR_INVALID, &msg);
    assert_null(r);
    print_message("[ done     ] %s\n", msg);
    assert_non_null(strstr(msg, "is done"));
    assert_non_null(strstr(msg, "larger --budget"));
    kevo_free(msg);
    msg = NULL;
    r = run(db, id, evals, NULL, KEVO_ERR_INVALID, &msg);   /* not larger */
    kevo_free(msg);
    msg = NULL;
    r = run(db, id, evals + 2, NULL, KEVO_OK, &msg);
    assert_true(json_integer_value(json_object_get(r, "evaluations")) > evals);
    json_decref(r);

    /* several sessions: a replay is still refused */
    struct kevo_run_opts o;
    char *out = NULL;
    kevo_run_opts_default(&o);
    o.archive = db;
    o.replay = id;
    assert_int_equal(kevo_run(NULL, &o, NULL, NULL, NULL, NULL, &out, &msg), KEVO_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "several sessions"));
    kevo_free(msg);
    kevo_free(out);
    fake_stop(f);
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", db);
    no_secret(db);
    no_secret(wal);
}

/* ---- import: what it refuses, skips and replaces ---- */

/* A run with three calls that wait (ids 1..3; 1 and 2 ask the same prompt), one made (4),
 * in a fresh archive; the prompt hashes are aaa..., aaa..., bbb..., ccc.... */
static void pending_archive(const char *db, struct kevo_archive **out)
{
    struct kevo_archive *a = NULL;
    int64_t run = 0, id = 0;
    assert_int_equal(kevo_archive_open(db, &a, NULL), KEVO_OK);
    assert_int_equal(kevo_archive_run_create(a, "t", NULL, "task", 4, "{}", &run), KEVO_OK);
    for (int i = 0; i < 4; i++) {
        struct kevo_llm_call_rec r = {
            .run_id = run, .model = "openai:m@http://127.0.0.1:1/v1", .op = "llm_improve",
            .prompt = i == 2 ? "[system]\nS\n[user]\nP2" : "[system]\nSYS\n[user]\nPROMPT",
            .status = i < 3 ? "not_cached" : "ok", .reply = i < 3 ? NULL : "R",
            .spec = "openai:m@http://127.0.0.1:1/v1?max_output=100", .system_len = i == 2 ? 1 : 3,
        };
        memset(r.prompt_hash, i <= 1 ? 'a' : 'a' + i - 1, 64);   /* 1 and 2: the same prompt */
        assert_int_equal(kevo_archive_llm_add(a, &r, &id), KEVO_OK);
    }
    *out = a;
}

static void test_import_lines(void **state)
{
    char db[512], *msg = NULL, *jsonl = NULL, text[4096];
    struct kevo_archive *a = NULL;
    struct kevo_llm_wanted *w = NULL;
    struct kevo_exchange_stats s;
    int n = 0;
    (void)state;
    snprintf(db, sizeof db, "%s/import.db", dir);
    pending_archive(db, &a);
    /* calls 1 and 2 asked the same prompt: one reply serves both, the newer is listed */
    assert_int_equal(kevo_archive_llm_pending(a, 1, &w, &n), KEVO_OK);
    assert_int_equal(n, 2);
    assert_true(w[0].id == 2 && w[1].id == 3);
    assert_string_equal(w[0].system, "SYS");
    assert_string_equal(w[0].user, "PROMPT");
    assert_string_equal(w[1].system, "S");
    kevo_archive_llm_wanted_free(w, n);
    assert_int_equal(kevo_exchange_pending(db, 1, &jsonl, &n, &msg), KEVO_OK);
    assert_non_null(strstr(jsonl, "\"call\":\"2-aaaaaaaaaaaa\""));
    assert_non_null(strstr(jsonl, "\"settings\":{\"max_output\":100}"));   /* from the spec */
    kevo_free(jsonl);
    assert_int_equal(kevo_exchange_pending(db, 9, &jsonl, &n, &msg), KEVO_ERR_NOTFOUND);
    assert_non_null(strstr(msg, "run 9"));
    kevo_free(msg);

    /* garbage: every bad line named with its field; nothing stored */
    snprintf(text, sizeof text,
             "{\"call\": \"2-aaaaaaaaaaaa\", \"reply\": \"fine\"}\n"
             "not json\n"
             "[1, 2]\n"
             "{\"reply\": \"x\"}\n"
             "{\"call\": 3, \"reply\": \"x\"}\n"
             "{\"call\": \"9-aaaaaaaaaaaa\", \"reply\": \"x\"}\n"
             "{\"call\": \"3-ffffffffffff\", \"reply\": \"x\"}\n"
             "\n"
             "{\"call\": \"3-bbbbbbbbbbbb\", \"reply\": 5}\n"
             "{\"call\": \"3-bbbbbbbbbbbb\", \"reply\": \"x\", \"usage\": {\"in\": -1}}\n"
             "{\"call\": \"4-cccccccccccc\", \"reply\": \"x\"}\n"
             "{\"call\": \"2-aaaaaaaaaaaa\", \"reply\": \"again\"}\n"
             "{\"call\": \"3-bbbbbbbbbbbb\"}\n");
    assert_int_equal(kevo_exchange_import(db, "bad.jsonl", text, strlen(text), &s, &msg),
                     KEVO_ERR_PARSE);
    print_message("[ import   ] %s\n", msg);
    static const char *const want[] = {
        "bad.jsonl:2: not JSON", "bad.jsonl:3: not a JSON object", "bad.jsonl:4: call: missing",
        "bad.jsonl:5: call: not a call id", "bad.jsonl:6: call: 9-aaaaaaaaaaaa is not a call of",
        "bad.jsonl:7: call: 3-ffffffffffff is not a call of", "bad.jsonl:9: reply: not a string",
        "bad.jsonl:10: usage.in:", "bad.jsonl:11: call: 4-cccccccccccc does not wait",
        "bad.jsonl:12: call: 2-aaaaaaaaaaaa is answered twice", "bad.jsonl:13: reply: missing",
        "nothing was imported",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(msg, want[i]))
            fail_msg("'%s' not in the message", want[i]);
    assert_null(strstr(msg, "bad.jsonl:1:"));
    assert_null(strstr(msg, "bad.jsonl:8:"));
    kevo_free(msg);
    assert_true(q1(db, "SELECT count(*) FROM llm_imports") == 0);

    /* good lines: a hand-written reply, and a failed call (skipped: it stays pending) */
    snprintf(text, sizeof text, "{\"call\": \"2-aaaaaaaaaaaa\", \"reply\": \"by hand\"}\r\n"
             "{\"call\": \"3-bbbbbbbbbbbb\", \"status\": \"http_500\", \"error\": \"x\"}\n");
    assert_int_equal(kevo_exchange_import(db, "ok.jsonl", text, strlen(text), &s, &msg), KEVO_OK);
    assert_true(s.n_ok == 1 && s.n_failed == 1 && s.n_calls == 2);
    assert_int_equal(kevo_archive_llm_pending(a, 1, &w, &n), KEVO_OK);
    assert_true(n == 1 && w[0].id == 3);
    kevo_archive_llm_wanted_free(w, n);
    /* imported again before any session used it: replaced */
    snprintf(text, sizeof text, "{\"call\": \"2-aaaaaaaaaaaa\", \"reply\": \"better\","
             " \"usage\": {\"in\": 7, \"out\": 3, \"cached_in\": 2}, \"model\": \"x\"}\n");
    assert_int_equal(kevo_exchange_import(db, "ok2.jsonl", text, strlen(text), &s, &msg), KEVO_OK);
    assert_int_equal(kevo_archive_llm_imported(a, 1, &w, &n), KEVO_OK);
    assert_true(n == 1 && w[0].id == 2 && !strcmp(w[0].reply, "better") && w[0].tokens_in == 7 &&
                w[0].tokens_cached_in == 2);
    kevo_archive_llm_wanted_free(w, n);
    /* a session used it: importing it again is skipped, and it is the cache's answer */
    struct kevo_llm_call_rec used = { .run_id = 1, .model = "m", .op = "llm_improve",
                                      .prompt = "p", .reply = "better", .status = "imported",
                                      .answers = 2 };
    int64_t uid = 0;
    memset(used.prompt_hash, 'a', 64);
    assert_int_equal(kevo_archive_llm_add(a, &used, &uid), KEVO_OK);
    assert_int_equal(kevo_exchange_import(db, "ok2.jsonl", text, strlen(text), &s, &msg), KEVO_OK);
    assert_true(s.n_ok == 0 && s.n_skipped == 1);
    assert_int_equal(kevo_archive_llm_imported(a, 1, &w, &n), KEVO_OK);
    assert_int_equal(n, 0);
    char *reply = NULL;
    assert_int_equal(kevo_archive_llm_cached(a, used.prompt_hash, &reply), KEVO_OK);
    assert_string_equal(reply, "better");
    kevo_free(reply);
    kevo_archive_close(a);
}

/* ---- answer: bad lines, the cost cap ---- */

static void collect(void *user, const char *line)
{
    json_array_append_new(user, json_string(line));
}

static void test_answer(void **state)
{
    struct kevo_exchange_opts o;
    struct kevo_exchange_stats s;
    char text[2048], *msg = NULL;
    json_t *out = json_array();
    (void)state;
    struct fake *f = fake_start(NULL, 0);
    char local[2][128];
    const char *locals[2] = { local[0], local[1] };
    f->respond = respond;
    snprintf(local[0], sizeof local[0], "openai:fake@http://127.0.0.1:%d/v1", f->port);
    snprintf(local[1], sizeof local[1], "openai:unpriced@http://127.0.0.1:%d/v1", f->port);
    kevo_exchange_opts_default(&o);
    o.prices = prices;
    o.models = locals;
    o.n_models = 2;
    /* a bad line: no call at all */
    snprintf(text, sizeof text, "{\"call\": \"1-000000000000\", \"model\": "
             "\"openai:fake@http://127.0.0.1:%d/v1\", \"prompt\": \"Make this candidate faster\"}\n"
             "{\"call\": \"2-aaaaaaaaaaaa\", \"model\": \"nope:x\", \"prompt\": \"p\"}\n"
             "{\"call\": \"3-000000000000\", \"model\": \"openai:fake\"}\n", f->port);
    assert_int_equal(kevo_exchange_answer("p.jsonl", text, strlen(text), &o, collect, out, &s,
                                          &msg), KEVO_ERR_PARSE);
    assert_non_null(strstr(msg, "p.jsonl:2: model:"));
    assert_non_null(strstr(msg, "p.jsonl:3: prompt: missing"));
    assert_null(strstr(msg, "p.jsonl:1:"));
    assert_int_equal(f->n_req, 0);
    kevo_free(msg);
    /* the settings asked with: temperature and output limit where the spec sets none */
    snprintf(text, sizeof text, "{\"call\": \"1-000000000000\", \"model\": "
             "\"openai:fake@http://127.0.0.1:%d/v1\", \"settings\": {\"max_output\": 8192, "
             "\"temperature\": 0.5}, \"system\": \"S\", \"prompt\": \"Make this candidate "
             "faster\"}\n", f->port);
    assert_int_equal(kevo_exchange_answer("p.jsonl", text, strlen(text), &o, collect, out, &s,
                                          &msg), KEVO_OK);
    assert_true(s.n_ok == 1 && fabs(s.spent - 0.002) < 1e-9);
    assert_non_null(strstr(last_req, "8192"));
    assert_non_null(strstr(last_req, "\"temperature\":0.5"));
    json_t *line = json_loads(json_string_value(json_array_get(out, 0)), 0, NULL);
    assert_string_equal(json_string_value(json_object_get(line, "reply")), IMPROVE);
    json_decref(line);
    /* a cap below one call's reserve: the call is left out, not made */
    o.cost_cap = 0.01;
    assert_int_equal(kevo_exchange_answer("p.jsonl", text, strlen(text), &o, collect, out, &s,
                                          &msg), KEVO_OK);
    assert_true(s.n_ok == 0 && s.n_skipped == 1);
    assert_non_null(strstr(json_string_value(json_array_get(out, 1)), "\"status\":\"cost_cap\""));
    assert_int_equal(f->n_req, 1);
    /* a cap and a model without a price: refused before any call */
    snprintf(text, sizeof text, "{\"call\": \"1-000000000000\", \"model\": "
             "\"openai:unpriced@http://127.0.0.1:%d/v1\", \"prompt\": \"p\"}\n", f->port);
    assert_int_equal(kevo_exchange_answer("p.jsonl", text, strlen(text), &o, collect, out, &s,
                                          &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "'unpriced' has no price"));
    kevo_free(msg);
    fake_stop(f);
    json_decref(out);
}

/* ---- answer: where a call goes, and with which key ---- */

#define AWS_SECRET "aws-kevo-test-SECRET-9f8e7d"
#define LOCAL_KEY "local-kevo-test-key-5c4b3a"

static int evil_saw_secret;

/* A server a pending file was edited to name: notes whether a request carried a key. */
static const char *evil_respond(void *user, const char *req)
{
    (void)user;
    if (strstr(req, SECRET) || strstr(req, AWS_SECRET) || strstr(req, LOCAL_KEY))
        evil_saw_secret = 1;
    return completion("stolen");
}

static void test_answer_where(void **state)
{
    struct kevo_exchange_opts o;
    struct kevo_exchange_stats s;
    char text[2048], local[128], other[] = "openai:gpt-5", *msg = NULL;
    const char *locals[2] = { local, other };
    json_t *out = json_array();
    (void)state;
    struct fake *evil = fake_start(NULL, 0), *mine = fake_start(NULL, 0);
    evil->respond = evil_respond;
    mine->respond = respond;
    setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET, 1);
    setenv("KEVO_TEST_LOCAL_KEY", LOCAL_KEY, 1);
    kevo_exchange_opts_default(&o);
    o.prices = prices;
    /* a line edited in transit: its URL and key variable are the attacker's */
    snprintf(text, sizeof text,
             "{\"call\": \"1-000000000000\", \"model\": \"openai:fake@http://127.0.0.1:%d/v1"
             "#AWS_SECRET_ACCESS_KEY?max_output=777\", \"prompt\": \"Make this candidate "
             "faster\"}\n"
             "{\"call\": \"2-000000000000\", \"model\": \"openai:fake@http://127.0.0.1:%d/v1\","
             " \"prompt\": \"Make this candidate faster\"}\n"
             "{\"call\": \"3-000000000000\", \"model\": \"openai:fake#AWS_SECRET_ACCESS_KEY\","
             " \"prompt\": \"Make this candidate faster\"}\n", evil->port, evil->port);
    /* no model of this machine given: a line naming a URL or a key variable is refused */
    assert_int_equal(kevo_exchange_answer("p.jsonl", text, strlen(text), &o, collect, out, &s,
                                          &msg), KEVO_ERR_PARSE);
    print_message("[ answer   ] %s\n", msg);
    for (int line = 1; line <= 3; line++) {
        char want[128];
        snprintf(want, sizeof want, "p.jsonl:%d: call %d-000000000000: model openai:fake: the "
                 "line names a base URL or key variable", line, line);
        if (!strstr(msg, want))
            fail_msg("'%s' not in the message", want);
    }
    assert_non_null(strstr(msg, "--model SPEC"));
    kevo_free(msg);
    /* models given, none with the line's name: refused, named */
    o.models = locals + 1;
    o.n_models = 1;
    assert_int_equal(kevo_exchange_answer("p.jsonl", text, strlen(text), &o, collect, out, &s,
                                          &msg), KEVO_ERR_PARSE);
    assert_non_null(strstr(msg, "p.jsonl:1: call 1-000000000000: model openai:fake is not "
                                "among the models given with --model/--config"));
    kevo_free(msg);
    assert_int_equal(evil->n_req, 0);
    /* this machine's model of that name: asked at its URL, with its key variable, with the
     * line's settings; the line's URL and key variable are not used */
    snprintf(local, sizeof local, "openai:fake@http://127.0.0.1:%d/v1#KEVO_TEST_LOCAL_KEY",
             mine->port);
    o.models = locals;
    o.n_models = 2;
    assert_int_equal(kevo_exchange_answer("p.jsonl", text, strlen(text), &o, collect, out, &s,
                                          &msg), KEVO_OK);
    assert_true(s.n_calls == 3 && s.n_ok == 3);
    assert_int_equal(evil->n_req, 0);
    assert_false(evil_saw_secret);
    assert_int_equal(mine->n_req, 3);
    assert_non_null(strstr(mine->last, "Bearer " LOCAL_KEY));
    assert_null(strstr(mine->last, AWS_SECRET));
    assert_null(strstr(mine->last, SECRET));
    int asked_777 = 0;   /* line 1's "?" settings (the requests come in any order) */
    for (int i = 0; i < 3; i++)
        asked_777 += mine->bodies[i] && strstr(mine->bodies[i], ":777") != NULL;
    assert_int_equal(asked_777, 1);
    for (size_t i = 0; i < json_array_size(out); i++) {
        const char *l = json_string_value(json_array_get(out, i));
        assert_null(strstr(l, AWS_SECRET));
        assert_null(strstr(l, LOCAL_KEY));
    }
    /* a bad --model: said, no call */
    locals[1] = "nope:x";
    assert_int_equal(kevo_exchange_answer("p.jsonl", text, strlen(text), &o, collect, out, &s,
                                          &msg), KEVO_ERR_PARSE);
    assert_non_null(strstr(msg, "--model nope:x"));
    kevo_free(msg);
    assert_int_equal(mine->n_req, 3);
    fake_stop(evil);
    fake_stop(mine);
    json_decref(out);
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("KEVO_TEST_LOCAL_KEY");
}

/* ---- import: the caps on counts, replies and files ---- */

static void test_import_caps(void **state)
{
    char db[512], path[600], err_path[700], *msg = NULL;
    struct kevo_archive *a = NULL;
    struct kevo_exchange_stats s;
    size_t big = ((size_t)4 << 20) + 1, cap = big + 4096;
    char *text = malloc(cap);
    (void)state;
    assert_non_null(text);
    snprintf(db, sizeof db, "%s/caps.db", dir);
    pending_archive(db, &a);
    /* a count over 10^9 (sums of such overflow int64), a reply over the live cap */
    int n = snprintf(text, cap, "{\"call\": \"2-aaaaaaaaaaaa\", \"reply\": \"r\", \"usage\":"
                     " {\"in\": 1000000000, \"out\": 9223372036854775807, \"reasoning\":"
                     " 1000000001}}\n{\"call\": \"3-bbbbbbbbbbbb\", \"reply\": \"");
    memset(text + n, 'x', big);
    snprintf(text + n + big, cap - (size_t)n - big, "\"}\n");
    assert_int_equal(kevo_exchange_import(db, "big.jsonl", text, strlen(text), &s, &msg),
                     KEVO_ERR_PARSE);
    print_message("[ import   ] %s\n", msg);
    assert_non_null(strstr(msg, "big.jsonl:1: usage.out: 9223372036854775807 tokens, more "
                                "than one call can use"));
    assert_non_null(strstr(msg, "big.jsonl:1: usage.reasoning: 1000000001 tokens"));
    assert_null(strstr(msg, "usage.in"));
    assert_non_null(strstr(msg, "big.jsonl:2: reply: 4194305 bytes, more than a live call"));
    kevo_free(msg);
    assert_true(q1(db, "SELECT count(*) FROM llm_imports") == 0);
    free(text);
    kevo_archive_close(a);
    /* a file over 256 MiB: refused by its size, before it is read */
    if (!kevo_bin)
        return;
    snprintf(path, sizeof path, "%s/huge.jsonl", dir);
    snprintf(err_path, sizeof err_path, "%s.err", path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(truncate(path, ((off_t)256 << 20) + 1), 0);   /* sparse */
    char *cmd = NULL;
    assert_true(asprintf(&cmd, "'%s' llm import '%s' --archive '%s' 2> '%s'", kevo_bin, path, db,
                         err_path) > 0);
    assert_int_not_equal(system(cmd), 0);
    free(cmd);
    char *err = slurp(err_path);
    assert_non_null(err);
    assert_non_null(strstr(err, "more than kevo llm reads from one file (256 MiB)"));
    free(err);
    unlink(path);
}

/* ---- the schema ---- */

/* A schema-3 archive with an offline call migrates on open; the call is pending, its
 * prompt not split (schema 3 did not say where), its model spec the recorded model. */
static void test_migrate_v3(void **state)
{
    char db[512], *jsonl = NULL, *msg = NULL, sql[4096];
    struct kevo_archive *a = NULL;
    int n = 0;
    (void)state;
    snprintf(db, sizeof db, "%s/v3.db", dir);
    for (int v = 0; v < 3; v++)
        exec_sql(db, kevo_archive_test_migration(v));
    snprintf(sql, sizeof sql, "PRAGMA application_id = 1262835279;"
             "PRAGMA user_version = 3;"
             "INSERT INTO sources VALUES ('h', 'x', 1);"
             "INSERT INTO runs(id, task_name, task_hash, config_json, status, started, updated)"
             " VALUES (1, 't', 'h', '{}', 'done', 0, 0);"
             "INSERT INTO llm_calls(run_id, model, op, prompt_hash, prompt, tokens_in,"
             " tokens_out, cost, latency_s, status, created, submitted) VALUES (1,"
             " 'openai:m@http://h/v1', 'llm_fix', 'abcdef0123456789', '[system]\nS\n[user]\nU',"
             " 0, 0, 0, 0, 'not_cached', 0, 1);");
    exec_sql(db, sql);
    assert_int_equal(kevo_archive_open(db, &a, NULL), KEVO_OK);
    kevo_archive_close(a);
    assert_true(q1(db, "PRAGMA user_version") == KEVO_ARCHIVE_SCHEMA);
    assert_int_equal(kevo_exchange_pending(db, 1, &jsonl, &n, &msg), KEVO_OK);
    assert_int_equal(n, 1);
    assert_non_null(strstr(jsonl, "\"call\":\"1-abcdef012345\""));
    assert_non_null(strstr(jsonl, "\"model\":\"openai:m@http://h/v1\""));
    assert_non_null(strstr(jsonl, "\"system\":null"));
    assert_non_null(strstr(jsonl, "\"prompt\":\"[system]\\nS\\n[user]\\nU\""));
    kevo_free(jsonl);
}

/* The archives recorded under bench/results (schemas 1 and 3) open and migrate. */
static void test_bench_archives_open(void **state)
{
    static const char *const runs[] = { "2026-11-22-h100-search", "2026-11-22-h100-search-pair",
                                        "2026-11-22-h100-replay",
                                        "2026-11-22-h100-llm-scripted" };
    (void)state;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char db[600], cmd[1400], *jsonl = NULL, *msg = NULL;
        int n = -1;
        snprintf(db, sizeof db, "%s/bench%zu.db", dir, i);
        snprintf(cmd, sizeof cmd, "cp bench/results/%s/archive.db '%s'", runs[i], db);
        assert_int_equal(system(cmd), 0);
        if (kevo_exchange_pending(db, 1, &jsonl, &n, &msg) != KEVO_OK)
            fail_msg("%s: %s", runs[i], msg);
        assert_int_equal(n, 0);
        assert_true(q1(db, "PRAGMA user_version") == KEVO_ARCHIVE_SCHEMA);
        kevo_free(jsonl);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_v3),
        cmocka_unit_test(test_bench_archives_open),
        cmocka_unit_test(test_import_lines),
        cmocka_unit_test(test_answer),
        cmocka_unit_test(test_answer_where),
        cmocka_unit_test(test_import_caps),
        cmocka_unit_test(test_air_gapped_cycle),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

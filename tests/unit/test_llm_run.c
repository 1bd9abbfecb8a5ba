/*
 * test_llm_run - kevo run with LLM operators on the CPU backend, driven by a fake provider
 * (real HTTP on loopback, tests/unit/fake_provider.h) that answers by what the prompt asks:
 * generate gets a first implementation that does not compile, fix gets the SEARCH/REPLACE
 * edit that repairs it, improve gets a whole faster file, a plan gets a strategy. The run
 * must go generate -> fix -> improve and beat the (slow) reference; every call is recorded
 * with its tokens and cost; the cost cap stops new calls; and a session that may not use
 * the network is answered from the archive's response cache; and `--replay` of the run,
 * with the network off, gives the same archive rows, or names where a changed prompt
 * template makes it diverge. Needs KEVO_BIN (the worker).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "fake_provider.h"

#include "ctl/archive.h"
#include "kevo.h"

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>

#define TASK "tests/search/slow_ref.c"
#define SECRET "sk-kevo-test-SECRET-9f8e7d6c5b4a"
static char f_last_auth[65536];

static char dir[256];
static const char *kevo_bin;
static char prices[300];

/* ---- the fake model ---- */

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
static const char CROSS[] = "I would rather not combine these.";

static pthread_mutex_t body_mu = PTHREAD_MUTEX_INITIALIZER;
static char *bodies[256];
static int n_bodies;

/* An OpenAI chat completion whose content is text, with fixed usage: 1000 tokens in (200
 * of them from the provider's cache), 100 out (30 of them reasoning). */
static const char *completion(const char *text)
{
    json_t *r = json_pack("{s:s, s:[{s:i, s:{s:s, s:s}, s:s}], s:{s:i, s:i, s:{s:i}, s:{s:i}}}",
                          "id", "c", "choices", "index", 0, "message", "role", "assistant",
                          "content", text, "finish_reason", "stop", "usage", "prompt_tokens",
                          1000, "completion_tokens", 100, "prompt_tokens_details",
                          "cached_tokens", 200, "completion_tokens_details",
                          "reasoning_tokens", 30);
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
    snprintf(f_last_auth, sizeof f_last_auth, "%.60000s", req);
    pthread_mutex_unlock(&body_mu);
    if (strstr(req, "Write a first fast implementation"))
        return completion(GEN);
    if (strstr(req, "This candidate fails. Fix it"))
        return completion(FIX);
    if (strstr(req, "Make this candidate faster") || strstr(req, "Implement exactly this strategy"))
        return completion(IMPROVE);
    if (strstr(req, "choose ONE optimization strategy"))
        return completion(PLAN);
    return completion(CROSS);
}

/* A model that answers everything with the same text whose directives do not parse. */
static const char BAD_DIRECTIVES[] =
    "```c\n// kevo launch k grid=1 block=1 (x, y)\nvoid k(const float *x, float *y) {}\n```\n";

static const char *respond_same(void *user, const char *req)
{
    (void)user;
    (void)req;
    return completion(BAD_DIRECTIVES);
}

/* ---- set-up ---- */

static int setup(void **state)
{
    (void)state;
    kevo_bin = getenv("KEVO_BIN");
    if (!kevo_bin)
        return 0;
    snprintf(dir, sizeof dir, "/tmp/kevo-test-llm-run-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    setenv("KEVO_WORKER_EXE", kevo_bin, 1);
    snprintf(prices, sizeof prices, "%s/prices.json", dir);
    FILE *f = fopen(prices, "w");
    if (!f)
        return -1;
    fputs("{\"fake\": {\"in\": 1.0, \"out\": 10.0}}\n", f);   /* a call: 0.001 + 0.001 */
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    char cmd[512];
    (void)state;
    for (int i = 0; i < n_bodies; i++)
        free(bodies[i]);
    if (!kevo_bin)
        return 0;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) ? -1 : 0;
}

static void opts(struct kevo_run_opts *o, char *archive, const char **models, char *model,
                 int port)
{
    kevo_run_opts_default(o);
    snprintf(archive, 512, "%s/llm.db", dir);
    snprintf(model, 128, "openai:fake@http://127.0.0.1:%d/v1", port);
    models[0] = model;
    o->archive = archive;
    o->eval.backend = KEVO_BACKEND_CPU;
    o->eval.time_cap_s = 0.05;
    o->n_models = 1;
    o->models = models;
    o->llm_concurrency = 1;
    o->prices = prices;
}

static json_t *events_json;   /* every event of the last run, as strings */

static void on_event(void *user, const char *e)
{
    (void)user;
    if (events_json)
        json_array_append_new(events_json, json_string(e));
}

static json_t *run(const struct kevo_run_opts *o)
{
    char *out = NULL, *msg = NULL;
    int64_t id = 0;
    if (kevo_run(TASK, o, on_event, NULL, NULL, &id, &out, &msg) != KEVO_OK)
        fail_msg("kevo_run: %s", msg ? msg : "?");
    json_t *r = json_loads(out, 0, NULL);
    kevo_free(out);
    kevo_free(msg);
    assert_non_null(r);
    return r;
}

/* count(*) and sum over an SQL query on the archive (one row, one or two columns). */
static double q1(const char *db, const char *sql, int col)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    double v = -1;
    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(s, sql, -1, &q, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(s));
    if (sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_double(q, col);
    sqlite3_finalize(q);
    sqlite3_close(s);
    return v;
}

/* The events of the last run that are LLM calls (an "llm" event with tokens), checked:
 * each names model and its op, and has a status, the four token counts, a cost (JSON null
 * when priced is 0) and a latency; the others ("duplicate", "given_up", ...) are not calls
 * and have no tokens. A new array of the calls' events. */
static json_t *call_events(const char *model, int priced)
{
    json_t *out = json_array(), *s;
    size_t i;
    json_array_foreach(events_json, i, s) {
        json_t *e = json_loads(json_string_value(s), 0, NULL), *t = json_object_get(e, "tokens");
        assert_non_null(e);
        if (strcmp(json_string_value(json_object_get(e, "event")), "llm") || !t) {
            json_decref(e);
            continue;
        }
        assert_string_equal(json_string_value(json_object_get(e, "model")), model);
        assert_non_null(strstr(json_string_value(json_object_get(e, "op")), "llm_"));
        assert_true(json_is_string(json_object_get(e, "status")));
        assert_true(json_is_integer(json_object_get(t, "in")) &&
                    json_is_integer(json_object_get(t, "cached_in")) &&
                    json_is_integer(json_object_get(t, "out")) &&
                    json_is_integer(json_object_get(t, "reasoning")));
        assert_true(priced ? json_is_number(json_object_get(e, "cost"))
                           : json_is_null(json_object_get(e, "cost")));
        assert_true(json_is_number(json_object_get(e, "latency_s")));
        json_array_append_new(out, e);
    }
    return out;
}

/* `kevo runs ID --json`, parsed. */
static json_t *runs_doc(const char *archive, int64_t id)
{
    char *js = NULL, *msg = NULL;
    assert_int_equal(kevo_runs_json(archive, id, &js, &msg), KEVO_OK);
    json_t *doc = json_loads(js, 0, NULL);
    assert_non_null(doc);
    kevo_free(js);
    kevo_free(msg);
    return doc;
}

/* The key appears nowhere kevo writes: the archive file (and its WAL), the report, the
 * events. */
static void no_secret_in(const char *db, json_t *report)
{
    const char *suffix[] = { "", "-wal" };
    for (int i = 0; i < 2; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s%s", db, suffix[i]);
        FILE *fp = fopen(path, "rb");
        if (!fp)
            continue;
        static char buf[1 << 20];
        size_t n, keep = 0, k = strlen(SECRET);
        while ((n = fread(buf + keep, 1, sizeof buf - keep, fp)) > 0) {
            n += keep;
            if (memmem(buf, n, SECRET, k))
                fail_msg("the key is in %s", path);
            keep = n < k ? n : k - 1;
            memmove(buf, buf + n - keep, keep);
        }
        fclose(fp);
    }
    char *rep = json_dumps(report, 0), *ev = json_dumps(events_json, 0);
    assert_null(strstr(rep, SECRET));
    assert_null(strstr(ev, SECRET));
    free(rep);
    free(ev);
    json_decref(events_json);
    events_json = NULL;
}

/* The rows of run id that a replay must reproduce, one line each, in order: candidates
 * (ids as positions in the run), then LLM calls (a replay's "replay: " prefix dropped). */
static char *rows_of(const char *db, int64_t run)
{
    static const char *const q[] = {
        "SELECT c.key || ' ' || c.op || ' ' || c.state || ' ' || c.verdict || ' ' ||"
        " quote(c.score) || ' ' || quote(c.sol_fraction) || ' ' || quote(c.speedup) || ' ' ||"
        " c.island || ' ' || c.cell || ' ' || coalesce(c.step, 0) || ' ' ||"
        " coalesce((SELECT count(*) FROM candidates p WHERE p.run_id = c.run_id AND"
        "  p.id <= c.parent1), 0) FROM candidates c WHERE c.run_id = ?1 ORDER BY c.id",
        "SELECT l.prompt_hash || ' ' || l.op || ' ' || l.model || ' ' || coalesce(l.step, 0) ||"
        " ' ' || l.tokens_in || ' ' || l.tokens_out || ' ' || replace(l.status, 'replay: ', '')"
        " || ' ' || coalesce(length(l.reply), -1) || ' ' || coalesce(l.reply, '') FROM llm_calls l"
        " WHERE l.run_id = ?1 ORDER BY l.id",
    };
    sqlite3 *s = NULL;
    size_t cap = 1 << 20, len = 0;
    char *out = calloc(1, cap);
    assert_non_null(out);
    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    for (int k = 0; k < 2; k++) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(s, q[k], -1, &st, NULL) != SQLITE_OK)
            fail_msg("%s", sqlite3_errmsg(s));
        sqlite3_bind_int64(st, 1, run);
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *t = (const char *)sqlite3_column_text(st, 0);
            len += (size_t)snprintf(out + len, cap - len, "%s\n", t ? t : "?");
            assert_true(len < cap);
        }
        sqlite3_finalize(st);
        len += (size_t)snprintf(out + len, cap - len, "--\n");
    }
    sqlite3_close(s);
    return out;
}

/* A copy of db at to, changed by sql (what kevo would never write). */
static void forge(const char *db, const char *to, const char *sql)
{
    char cmd[1400];
    sqlite3 *s = NULL;
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", db, to);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(sqlite3_open_v2(to, &s, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    if (sqlite3_exec(s, sql, NULL, NULL, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(s));
    sqlite3_close(s);
}

/* The replay (its report rep) reproduced run `of` row by row, and said so; must_have,
 * when set, is in the rows. Their length. */
static size_t assert_same_rows(const char *db, int64_t of, json_t *rep, const char *must_have)
{
    assert_true(json_is_true(json_object_get(json_object_get(rep, "replay"), "identical")));
    char *a = rows_of(db, of), *b = rows_of(db, json_integer_value(json_object_get(rep, "run")));
    assert_string_equal(a, b);
    if (must_have)
        assert_non_null(strstr(a, must_have));
    size_t n = strlen(a);
    free(a);
    free(b);
    return n;
}

static json_t *replay(const char *archive, int64_t of, const char *prompts, enum kevo_status want,
                      char **msg)
{
    struct kevo_run_opts o;
    char *out = NULL;
    int64_t id = 0;
    kevo_run_opts_default(&o);
    o.archive = archive;
    o.replay = of;
    o.prompts_dir = prompts;
    assert_int_equal(kevo_run(NULL, &o, NULL, NULL, NULL, &id, &out, msg), want);
    json_t *r = out ? json_loads(out, 0, NULL) : NULL;
    kevo_free(out);
    return r;
}

/* A fake model answering with fn, and the options of a run against it into dir/db. */
static struct fake *fake_run(fake_respond_fn fn, struct kevo_run_opts *o, char *archive,
                             const char **models, char *model, const char *db)
{
    struct fake *f = fake_start(NULL, 0);
    f->respond = fn;
    opts(o, archive, models, model, f->port);
    snprintf(archive, 512, "%s/%s", dir, db);
    return f;
}

/* ---- the tests ---- */

/* Every call of the run (report r) was one event with what the fake's usage said: a call
 * over the network 1000 tokens in (200 cached), 100 out (30 reasoning), 0.002; one from
 * the cache none, at no cost; and `kevo runs ID --json` and the report count the same per
 * model. */
static void events_ok(const char *archive, const char *model, json_t *r)
{
    int64_t run = json_integer_value(json_object_get(r, "run"));
    json_t *calls = call_events(model, 1), *e;
    size_t i;
    int made = 0, with_id = 0;
    char sql[300];

    snprintf(sql, sizeof sql, "SELECT count(*), count(cand_id) FROM llm_calls WHERE run_id = %lld",
             (long long)run);
    assert_int_equal(json_array_size(calls), (size_t)q1(archive, sql, 0));   /* one per call */
    json_array_foreach(calls, i, e) {
        json_t *t = json_object_get(e, "tokens");
        const char *st = json_string_value(json_object_get(e, "status"));
        int net = !strcmp(st, "ok") || !strcmp(st, "unusable") || !strcmp(st, "unused");
        made += net;
        assert_true(net || !strncmp(st, "cached", 6));
        assert_int_equal(json_integer_value(json_object_get(t, "in")), net ? 1000 : 0);
        assert_int_equal(json_integer_value(json_object_get(t, "cached_in")), net ? 200 : 0);
        assert_int_equal(json_integer_value(json_object_get(t, "out")), net ? 100 : 0);
        assert_int_equal(json_integer_value(json_object_get(t, "reasoning")), net ? 30 : 0);
        assert_true(fabs(json_number_value(json_object_get(e, "cost")) - (net ? 0.002 : 0)) <
                    1e-12);
        assert_true((!strcmp(st, "unusable") || !strcmp(st, "unused")) ==
                    json_is_string(json_object_get(e, "message")));
        with_id += json_is_integer(json_object_get(e, "id"));
    }
    assert_true(made >= 3);
    assert_int_equal(with_id, (int)q1(archive, sql, 1));   /* the candidates they became */
    json_decref(calls);
    /* per model, in `kevo runs ID --json` and in the report alike */
    json_t *doc = runs_doc(archive, run), *m = json_array_get(json_object_get(doc, "llm_models"), 0);
    json_t *t = json_object_get(m, "tokens");
    assert_int_equal(json_array_size(json_object_get(doc, "llm_models")), 1);
    assert_string_equal(json_string_value(json_object_get(m, "model")), model);
    assert_int_equal(json_integer_value(json_object_get(m, "n_calls")), (int)q1(archive, sql, 0));
    assert_int_equal(json_integer_value(json_object_get(t, "in")), 1000 * made);
    assert_int_equal(json_integer_value(json_object_get(t, "cached_in")), 200 * made);
    assert_int_equal(json_integer_value(json_object_get(t, "out")), 100 * made);
    assert_int_equal(json_integer_value(json_object_get(t, "reasoning")), 30 * made);
    assert_true(fabs(json_number_value(json_object_get(m, "cost")) - 0.002 * made) < 1e-9);
    assert_true(json_integer_value(json_object_get(m, "candidates")) >= 2);
    assert_true(json_integer_value(json_object_get(m, "ok")) >= 1);
    print_message("[ models   ] %d calls (%d made), %d candidates, %d ok, %d improved\n",
                  (int)json_integer_value(json_object_get(m, "n_calls")), made,
                  (int)json_integer_value(json_object_get(m, "candidates")),
                  (int)json_integer_value(json_object_get(m, "ok")),
                  (int)json_integer_value(json_object_get(m, "improved")));
    assert_true(json_equal(m, json_array_get(json_object_get(r, "llm_models"), 0)));
    json_decref(doc);
}

static void test_generate_fix_improve(void **state)
{
    struct kevo_run_opts o;
    char archive[512], model[128], sql[512];
    const char *models[1];
    (void)state;
    if (!kevo_bin)
        skip();
    struct fake *f = fake_run(respond, &o, archive, models, model, "llm.db");
    o.budget = 14;
    setenv("OPENAI_API_KEY", SECRET, 1);   /* sent to the fake; never stored or shown */
    events_json = json_array();
    json_t *r = run(&o);
    fake_stop(f);
    assert_non_null(strstr(f_last_auth, SECRET));   /* the provider did get it */
    events_ok(archive, model, r);
    no_secret_in(archive, r);
    if (getenv("KEVO_TEST_DEBUG")) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "sqlite3 '%s' \"select id, op, status, cand_id from llm_calls; "
                 "select id, op, verdict, parent1 from candidates\"", archive);
        if (system(cmd)) {
        }
    }
    /* the reference (seed), then the model's candidates: generate fails to compile, fix
     * repairs it, improve (or plan) gives a whole faster file */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM candidates WHERE op = 'llm_generate' AND "
             "verdict = 'compile_error'");
    assert_true(q1(archive, sql, 0) >= 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM candidates WHERE op = 'llm_fix' AND "
             "verdict = 'ok'");
    assert_true(q1(archive, sql, 0) >= 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM candidates WHERE op IN ('llm_improve', "
             "'llm_plan') AND verdict = 'ok'");
    assert_true(q1(archive, sql, 0) >= 1);
    /* better than the reference, by far */
    double sp = json_real_value(json_object_get(json_object_get(r, "best"), "speedup"));
    print_message("[ llm run  ] best %s, %.1fx the reference\n",
                  json_string_value(json_object_get(json_object_get(r, "best"), "op")), sp);
    assert_true(sp > 3.0);
    /* every call recorded with its tokens and its cost (a prompt asked again in the run
     * is answered from the cache: no tokens, no cost) */
    double calls = q1(archive, "SELECT count(*) FROM llm_calls WHERE status NOT LIKE 'cached%'", 0);
    double cost = q1(archive, "SELECT sum(cost) FROM llm_calls", 0);
    double toks = q1(archive, "SELECT sum(tokens_in) FROM llm_calls", 0);
    assert_true(calls >= 3);
    assert_true(toks == 1000 * calls);
    assert_true(cost > 0.002 * calls - 1e-9 && cost < 0.002 * calls + 1e-9);
    /* the prompts carry no holdout size (N=1001) */
    assert_true(q1(archive, "SELECT count(*) FROM llm_calls WHERE instr(prompt, 'N=1001') > 0",
                   0) == 0);
    int64_t first = json_integer_value(json_object_get(r, "run"));
    json_decref(r);

    /* the run replayed: no network (the fake is gone), no workers; the same rows */
    char *msg = NULL;
    unsetenv("KEVO_WORKER_EXE");   /* a replay starts none */
    r = replay(archive, first, NULL, KEVO_OK, &msg);
    setenv("KEVO_WORKER_EXE", kevo_bin, 1);
    assert_non_null(r);
    json_t *rp = json_object_get(r, "replay");
    print_message("[ replay   ] run %lld as run %lld: %s, %d steps\n", (long long)first,
                  (long long)json_integer_value(json_object_get(r, "run")),
                  json_is_true(json_object_get(rp, "identical")) ? "identical" : "differs",
                  (int)json_integer_value(json_object_get(rp, "steps")));
    assert_true(json_integer_value(json_object_get(rp, "steps")) >= 14);
    assert_true(assert_same_rows(archive, first, r, NULL) > 1000);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls WHERE run_id = %d AND (cost <> 0 "
             "OR status NOT LIKE 'replay: %%')",
             (int)json_integer_value(json_object_get(r, "run")));
    assert_true(q1(archive, sql, 0) == 0);   /* nothing spent, every call marked */
    json_decref(r);

    /* a changed prompt template: the replay asks what the original never did, and says so */
    char pdir[400], cmd[1200];
    snprintf(pdir, sizeof pdir, "%s/prompts", dir);
    snprintf(cmd, sizeof cmd, "cp -r '%s/prompts' '%s' && sed -i 's/Make this candidate "
             "faster/Make this candidate much faster/' '%s/improve.md'", KEVO_SOURCE_DIR, dir,
             pdir);
    assert_int_equal(system(cmd), 0);
    r = replay(archive, first, pdir, KEVO_ERR_DIVERGED, &msg);
    assert_non_null(msg);
    print_message("[ replay   ] changed template: %s\n", msg);
    assert_non_null(strstr(msg, "diverged"));
    assert_non_null(strstr(msg, "asked the model another prompt (llm_improve"));
    kevo_free(msg);
    msg = NULL;
    json_decref(r);
    /* a run that cannot be replayed says why */
    r = replay(archive, 999, NULL, KEVO_ERR_NOTFOUND, &msg);
    assert_non_null(strstr(msg, "--replay 999"));
    kevo_free(msg);
    json_decref(r);
    /* forged originals (copies): a call it never made; calls recorded without their order */
    char forged[600], sql2[300];
    snprintf(forged, sizeof forged, "%s.forged", archive);
    snprintf(sql2, sizeof sql2, "DELETE FROM llm_calls WHERE run_id = %lld AND submitted = "
             "(SELECT max(submitted) FROM llm_calls WHERE run_id = %lld)", (long long)first,
             (long long)first);
    forge(archive, forged, sql2);
    r = replay(forged, first, NULL, KEVO_ERR_DIVERGED, &msg);
    print_message("[ replay   ] forged: %s\n", msg);
    assert_non_null(strstr(msg, "was made where the original made none"));
    kevo_free(msg);
    json_decref(r);
    snprintf(sql2, sizeof sql2, "UPDATE llm_calls SET submitted = NULL WHERE run_id = %lld",
             (long long)first);
    forge(archive, forged, sql2);
    r = replay(forged, first, NULL, KEVO_ERR_UNSUPPORTED, &msg);
    assert_non_null(strstr(msg, "recorded without their order"));
    kevo_free(msg);
    json_decref(r);

    /* offline, the network unused: the generate prompt (task, device, notes) was answered
     * before, so it comes from the cache; the rest cannot be asked */
    opts(&o, archive, models, model, 1);   /* port 1: nothing listens there */
    o.offline = 1;
    o.budget = 6;
    o.llm_concurrency = 3;   /* refusals and cached replies interleave */
    r = run(&o);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls WHERE status = 'cached' AND "
             "run_id = %d", (int)json_integer_value(json_object_get(r, "run")));
    assert_true(q1(archive, sql, 0) >= 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls WHERE status IN ('network', "
             "'timeout') AND run_id = %d", (int)json_integer_value(json_object_get(r, "run")));
    assert_true(q1(archive, sql, 0) == 0);
    /* the offline run replayed too: its refusals are recorded, and replayed as refusals */
    int64_t off = json_integer_value(json_object_get(r, "run"));
    json_decref(r);
    r = replay(archive, off, NULL, KEVO_OK, &msg);
    assert_same_rows(archive, off, r, "not_cached");
    json_decref(r);
}

static void test_cost_cap(void **state)
{
    struct kevo_run_opts o;
    char archive[512], model[128], sql[300];
    const char *models[1];
    (void)state;
    if (!kevo_bin)
        skip();
    struct fake *f = fake_run(respond, &o, archive, models, model, "cap.db");
    o.budget = 40;
    /* a call holds ~0.087 in reserve (its spec's 8192 tokens out, a token per prompt byte)
     * and costs 0.002: calls go one at a time, and stop once 0.1 - spent is below a
     * reserve */
    snprintf(model, 128, "openai:fake@http://127.0.0.1:%d/v1?max_output=8192", f->port);
    o.cost_cap = 0.1;
    events_json = json_array();
    json_t *r = run(&o);
    fake_stop(f);
    double cost = q1(archive, "SELECT sum(cost) FROM llm_calls", 0);
    print_message("[ cost cap ] %.3f spent of 0.1, %s\n", cost, json_string_value(json_object_get(r, "reason")));
    assert_true(cost <= 0.1);
    char *ev = json_dumps(events_json, 0);
    assert_non_null(strstr(ev, "cost_cap"));   /* the cap stopped the LLM operators */
    free(ev);
    json_decref(events_json);
    events_json = NULL;
    assert_true(cost > 0.1 - 0.095);   /* it took a reserve's worth of room to stop them */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls");
    assert_true(q1(archive, sql, 0) >= 1);
    /* replayed: the cap decides as it did (the run's own prices, not today's table) */
    char *msg = NULL;
    int64_t of = json_integer_value(json_object_get(r, "run"));
    json_decref(r);
    r = replay(archive, of, NULL, KEVO_OK, &msg);
    assert_same_rows(archive, of, r, NULL);
    kevo_free(msg);
    json_decref(r);
    /* a cap with a model that has no price refuses to start, naming it */
    char *out = NULL;
    msg = NULL;
    opts(&o, archive, models, model, 1);
    snprintf(model, 128, "openai:unpriced@http://127.0.0.1:1/v1");
    o.cost_cap = 1.0;
    assert_int_not_equal(kevo_run(TASK, &o, NULL, NULL, NULL, NULL, &out, &msg), KEVO_OK);
    assert_non_null(strstr(msg, "'unpriced' has no price"));
    kevo_free(msg);
    kevo_free(out);
}

/* The same unusable answer again and again: recorded once; a prompt that got nothing new
 * is not asked again, and calls pause until an evaluation brings something new: the run
 * ends by its budgets instead of asking forever (nothing evaluated, no budget spent). */
static void test_same_answer_does_not_loop(void **state)
{
    struct kevo_run_opts o;
    char archive[512], model[128];
    const char *models[1];
    (void)state;
    if (!kevo_bin)
        skip();
    struct fake *f = fake_run(respond_same, &o, archive, models, model, "same.db");
    o.budget = 50;
    json_t *r = run(&o);
    fake_stop(f);
    double calls = q1(archive, "SELECT count(*) FROM llm_calls", 0);
    double cands = q1(archive, "SELECT count(*) FROM candidates WHERE op LIKE 'llm%'", 0);
    print_message("[ same     ] %s after %.0f LLM calls, %.0f LLM candidate(s)\n",
                  json_string_value(json_object_get(r, "reason")), calls, cands);
    assert_true(cands == 1);
    /* a prompt whose answer brought nothing new is not asked again */
    double repeats = q1(archive, "SELECT count(*) - count(DISTINCT prompt_hash) FROM llm_calls",
                        0);
    assert_true(repeats <= 1);   /* the second ask of the first prompt shows it repeats */
    /* at most LLM_IDLE_MAX calls with nothing new per evaluation that came in */
    double evals = json_integer_value(json_object_get(r, "evaluations"));
    print_message("[ same     ] %.0f evaluations, %.0f repeated prompts\n", evals, repeats);
    assert_true(calls <= 3 * (evals + 1));
    json_decref(r);
}

/* A provider that keeps refusing (400, not retried): given up on after 5 failed calls in
 * a row; the run goes on with the other operators to its end. */
static void test_failing_provider_given_up(void **state)
{
    static const struct step bad[] = { { 400, NULL, "{\"error\":{\"message\":\"bad\"}}", 0, 0,
                                         0 } };
    struct kevo_run_opts o;
    char archive[512], model[128];
    const char *models[1];
    (void)state;
    if (!kevo_bin)
        skip();
    struct fake *f = fake_start(bad, 1);
    f->pass_check = 1;   /* the model works when checked, then refuses every call */
    opts(&o, archive, models, model, f->port);
    snprintf(archive, 512, "%s/failing.db", dir);
    o.budget = 30;
    o.llm_concurrency = 2;
    events_json = json_array();
    json_t *r = run(&o);
    fake_stop(f);
    double calls_n = q1(archive, "SELECT count(*) FROM llm_calls", 0);
    print_message("[ failing  ] %s after %.0f failed calls\n",
                  json_string_value(json_object_get(r, "reason")), calls_n);
    assert_true(calls_n >= 5 && calls_n <= 6);   /* 5 in a row, and one still in flight */
    char *ev = json_dumps(events_json, 0);
    assert_non_null(strstr(ev, "given_up"));
    free(ev);
    json_t *calls, *e;
    size_t i;
    int given_up = 0;
    json_array_foreach(events_json, i, e) {   /* not a call: the model and op it gave up on */
        json_t *g = json_loads(json_string_value(e), 0, NULL);
        const char *st = json_string_value(json_object_get(g, "status"));
        if (st && !strcmp(st, "given_up")) {
            assert_string_equal(json_string_value(json_object_get(g, "model")), model);
            assert_non_null(json_string_value(json_object_get(g, "op")));
            assert_null(json_object_get(g, "tokens"));
            given_up++;
        }
        json_decref(g);
    }
    assert_int_equal(given_up, 1);
    /* each failed call is one event: its status, the provider's message, no tokens */
    calls = call_events(model, 1);
    assert_int_equal(json_array_size(calls), (size_t)calls_n);
    json_array_foreach(calls, i, e) {
        assert_string_equal(json_string_value(json_object_get(e, "status")), "http_400");
        assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "bad"));
        assert_int_equal(json_integer_value(json_object_get(json_object_get(e, "tokens"), "in")),
                         0);
        assert_true(json_number_value(json_object_get(e, "cost")) == 0);
    }
    json_decref(calls);
    json_decref(events_json);
    events_json = NULL;
    assert_string_not_equal(json_string_value(json_object_get(r, "reason")), "?");
    json_decref(r);
}

/* A model the price table lacks has no price: what its calls cost is unknown, null in
 * every event, in `kevo runs ID --json` and in the report, never 0, and the run's
 * "prices_used" leaves it out. One the table prices at 0 (a local model) cost 0. */
static void test_unpriced_model(void **state)
{
    struct kevo_run_opts o;
    char archive[512], model[128], zero[300];
    const char *models[1];
    (void)state;
    if (!kevo_bin)
        skip();
    snprintf(zero, sizeof zero, "%s/zero-prices.json", dir);
    FILE *fp = fopen(zero, "w");
    assert_non_null(fp);
    fputs("{\"free\": {\"in\": 0, \"out\": 0}}\n", fp);
    fclose(fp);
    for (int priced = 0; priced < 2; priced++) {
        struct fake *f = fake_run(respond, &o, archive, models, model,
                                  priced ? "zero.db" : "unpriced.db");
        snprintf(model, 128, "openai:free@http://127.0.0.1:%d/v1", f->port);
        o.budget = 6;
        if (priced)
            o.prices = zero;
        events_json = json_array();
        json_t *r = run(&o);
        fake_stop(f);
        json_t *calls = call_events(model, priced);
        assert_true(json_array_size(calls) >= 1);
        json_decref(calls);
        json_decref(events_json);
        events_json = NULL;
        json_t *doc = runs_doc(archive, json_integer_value(json_object_get(r, "run")));
        json_t *m = json_array_get(json_object_get(doc, "llm_models"), 0);
        json_t *rm = json_array_get(json_object_get(r, "llm_models"), 0);
        json_t *t = json_object_get(m, "tokens");
        print_message("[ unpriced ] %s: %d calls, %d tokens in, cost %s\n", priced ? "at 0" :
                      "no price", (int)json_integer_value(json_object_get(m, "n_calls")),
                      (int)json_integer_value(json_object_get(t, "in")),
                      json_is_null(json_object_get(m, "cost")) ? "null" : "a number");
        assert_true(json_integer_value(json_object_get(t, "in")) >= 1000);
        assert_int_equal(json_integer_value(json_object_get(t, "cached_in")) * 5,
                         json_integer_value(json_object_get(t, "in")));
        assert_true(priced ? json_number_value(json_object_get(m, "cost")) == 0
                           : json_is_null(json_object_get(m, "cost")));
        assert_true(json_equal(json_object_get(m, "cost"), json_object_get(rm, "cost")));
        json_t *pu = json_object_get(json_object_get(doc, "config"), "prices_used");
        assert_true(json_is_object(pu));
        assert_true(priced == (json_object_get(pu, "free") != NULL));
        json_decref(doc);
        json_decref(r);
    }
}

/* Calls in flight together come back in whatever order their threads finish; the
 * replay matches each with the original's call of the same place in the session. */
static void test_replay_concurrent(void **state)
{
    struct kevo_run_opts o;
    char archive[512], model[128], *msg = NULL;
    const char *models[1];
    (void)state;
    if (!kevo_bin)
        skip();
    for (int k = 0; k < 2; k++) {
        char db[32];
        snprintf(db, sizeof db, "conc%d.db", k);
        struct fake *f = fake_run(respond, &o, archive, models, model, db);
        o.budget = 12;
        o.llm_concurrency = 4;
        json_t *r = run(&o);
        fake_stop(f);
        int64_t of = json_integer_value(json_object_get(r, "run"));
        json_decref(r);
        r = replay(archive, of, NULL, KEVO_OK, &msg);
        json_t *rp = json_object_get(r, "replay");
        print_message("[ conc     ] %d LLM calls, 4 in flight: %s\n",
                      (int)json_integer_value(json_object_get(rp, "llm_calls")),
                      json_is_true(json_object_get(rp, "identical")) ? "identical" : "differs");
        assert_same_rows(archive, of, r, NULL);
        json_decref(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_answer_does_not_loop),
        cmocka_unit_test(test_replay_concurrent),
        cmocka_unit_test(test_failing_provider_given_up),
        cmocka_unit_test(test_generate_fix_improve),
        cmocka_unit_test(test_cost_cap),
        cmocka_unit_test(test_unpriced_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * test_models - `kevo models check` and the check `kevo run` makes before its first LLM
 * call (src/ctl/models.c, docs/llm.md "Checking models"), against fake providers on
 * loopback (fake_provider.h): good OpenAI-compatible and Anthropic models pass; a refused
 * key fails with "401: the key in $X was refused", and the key is in no document, output,
 * event or archive; a missing key is said without a request; 404, 400, an unreachable
 * server, a reply of the wrong shape and a cut-off reply each get their diagnosis; the
 * CLI's exit statuses; a run whose only model is refused does not start, and a run with
 * one good and one refused model uses the good one (and replays identically). The run
 * tests need KEVO_BIN (the worker); KEVO_TEST_KEEP=1 keeps their archives in /tmp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "testutil.h"

#include "fake_provider.h"

#include "kevo.h"

#include <jansson.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define SECRET "sk-kevo-models-SECRET-0a1b2c3d4e"
#define TASK "tests/search/slow_ref.c"

static char dir[256];
static const char *kevo_bin;

/* ---- replies ---- */

static const struct step oai_ok[] = { { 200, NULL, "{\"choices\":[{\"index\":0,\"message\":"
    "{\"role\":\"assistant\",\"content\":\"OK\"},\"finish_reason\":\"stop\"}],\"usage\":"
    "{\"prompt_tokens\":12,\"completion_tokens\":1}}", 0, 0, 0 } };
static const struct step anth_ok[] = { { 200, NULL, "{\"type\":\"message\",\"content\":"
    "[{\"type\":\"text\",\"text\":\"OK\"}],\"stop_reason\":\"end_turn\",\"usage\":"
    "{\"input_tokens\":12,\"output_tokens\":1}}", 0, 0, 0 } };
/* the server quotes the key it refused, as some do */
static const struct step refused[] = { { 401, NULL, "{\"error\":{\"message\":\"Incorrect API "
    "key provided: " SECRET "\"}}", 0, 0, 0 } };
static const struct step not_found[] = { { 404, NULL, "{\"error\":{\"message\":\"The model "
    "does not exist\"}}", 0, 0, 0 } };
static const struct step bad_param[] = { { 400, NULL, "{\"error\":{\"message\":\"Unknown "
    "parameter: 'frobnicate'.\"}}", 0, 0, 0 } };
static const struct step not_json[] = { { 200, NULL, "<html>a proxy's login page</html>", 0,
                                          0, 0 } };
static const struct step cut[] = { { 200, NULL, "{\"choices\":[{\"index\":0,\"message\":"
    "{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"length\"}],\"usage\":"
    "{\"prompt_tokens\":12,\"completion_tokens\":16,\"completion_tokens_details\":"
    "{\"reasoning_tokens\":16}}}", 0, 0, 0 } };

/* ---- helpers ---- */

static int setup(void **state)
{
    (void)state;
    kevo_bin = test_scratch(dir, sizeof dir, "models");
    return dir[0] ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return test_scratch_remove(dir);
}

/* The check document of specs (NULL-terminated), parsed; the key is nowhere in it. */
static json_t *check(const char *prices, const char *s0, ...)
{
    const char *specs[8];
    int n = 0;
    char *out = NULL, *msg = NULL;
    va_list ap;

    va_start(ap, s0);
    for (const char *s = s0; s && n < 8; s = va_arg(ap, const char *))
        specs[n++] = s;
    va_end(ap);
    if (kevo_models_check_json(specs, n, prices, &out, &msg) != KEVO_OK)
        fail_msg("kevo_models_check_json: %s", msg ? msg : "?");
    assert_null(strstr(out, SECRET));
    json_t *doc = json_loads(out, 0, NULL);
    assert_non_null(doc);
    kevo_free(out);
    return doc;
}

static json_t *entry(json_t *doc, size_t i)
{
    return json_array_get(json_object_get(doc, "models"), i);
}

static const char *str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static void spec_at(char *out, size_t n, const char *api, const char *name, int port,
                    const char *key_env)
{
    snprintf(out, n, "%s:%s@http://127.0.0.1:%d/v1%s%s", api, name, port, key_env ? "#" : "",
             key_env ? key_env : "");
}

/* The one model of doc failed at stage with a diagnosis starting with want. */
static void assert_fails(json_t *doc, const char *stage, const char *want)
{
    json_t *m = entry(doc, 0);
    print_message("[ diagnose ] %s\n", str(m, "diagnosis"));
    assert_false(json_is_true(json_object_get(doc, "ok")));
    assert_false(json_is_true(json_object_get(m, "ok")));
    assert_string_equal(str(m, "stage"), stage);
    assert_true(strncmp(str(m, "diagnosis"), want, strlen(want)) == 0);
    assert_null(strchr(str(m, "diagnosis"), '\n'));
}

/* ---- the check ---- */

static void test_good_models(void **state)
{
    char a[160], b[160], prices[400];
    (void)state;
    struct fake *fo = fake_start(oai_ok, 1), *fa = fake_start(anth_ok, 1);
    spec_at(a, sizeof a, "openai", "fake-gpt", fo->port, "KEVO_TEST_KEY");
    spec_at(b, sizeof b, "anthropic", "fake-claude", fa->port, "KEVO_TEST_NO_KEY");
    snprintf(prices, sizeof prices, "%s/prices.json", dir);
    FILE *f = fopen(prices, "w");
    assert_non_null(f);
    fputs("{\"fake-gpt\": {\"in\": 1.0, \"out\": 2.0}}\n", f);
    fclose(f);
    setenv("KEVO_TEST_KEY", SECRET, 1);
    json_t *doc = check(prices, a, b, NULL);
    assert_true(json_is_true(json_object_get(doc, "ok")));
    json_t *m = entry(doc, 0);
    assert_true(json_is_true(json_object_get(m, "ok")));
    assert_string_equal(str(m, "model"), a);
    assert_string_equal(str(m, "key"), "env");           /* found, and only that is said */
    assert_true(json_is_true(json_object_get(m, "price_known")));
    assert_true(json_is_null(json_object_get(m, "stage")));
    assert_null(json_object_get(m, "diagnosis"));
    /* the request: the check's prompt, a small output limit, the key sent */
    assert_non_null(strstr(fo->last, KEVO_MODELS_CHECK_SYSTEM));
    assert_non_null(strstr(fo->last, "\":16"));
    assert_non_null(strstr(fo->last, SECRET));
    m = entry(doc, 1);
    assert_true(json_is_true(json_object_get(m, "ok")));
    assert_string_equal(str(m, "key"), "none");          /* a local server needs none */
    assert_false(json_is_true(json_object_get(m, "price_known")));
    assert_non_null(strstr(fa->last, "POST /v1/messages"));
    json_decref(doc);
    fake_stop(fo);
    fake_stop(fa);
}

static void test_refused_key(void **state)
{
    char a[160];
    (void)state;
    struct fake *f = fake_start(refused, 1);
    spec_at(a, sizeof a, "openai", "fake-gpt", f->port, "KEVO_TEST_KEY");
    setenv("KEVO_TEST_KEY", SECRET, 1);
    json_t *doc = check(NULL, a, NULL);
    assert_fails(doc, "key", "401: the key in $KEVO_TEST_KEY was refused");
    assert_int_equal(json_integer_value(json_object_get(entry(doc, 0), "http_status")), 401);
    assert_int_equal(f->n_req, 1);                      /* a 401 is not asked again */
    json_decref(doc);
    fake_stop(f);
}

/* No key where the provider requires one: said without a request (the provider's own URL
 * is never reached); a key file that others may read is refused, and said so. */
static void test_no_key(void **state)
{
    char home[300], keys[400];
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    (void)state;
    snprintf(home, sizeof home, "%s/home", dir);
    mkdir(home, 0700);
    setenv("HOME", home, 1);   /* no default key file */
    unsetenv("KEVO_KEY_FILE");
    unsetenv("OPENAI_API_KEY");
    unsetenv("ANTHROPIC_API_KEY");
    json_t *doc = check(NULL, "openai:gpt-5", NULL);
    assert_fails(doc, "key", "no key: set $OPENAI_API_KEY or add OPENAI_API_KEY=... to the "
                 "key file");
    assert_string_equal(str(entry(doc, 0), "status"), "no_key");
    assert_int_equal(json_integer_value(json_object_get(entry(doc, 0), "http_status")), 0);
    json_decref(doc);
    snprintf(keys, sizeof keys, "%s/keys", dir);
    FILE *f = fopen(keys, "w");
    assert_non_null(f);
    fputs("ANTHROPIC_API_KEY=" SECRET "\n", f);
    fclose(f);
    chmod(keys, 0644);
    setenv("KEVO_KEY_FILE", keys, 1);
    doc = check(NULL, "anthropic:claude-sonnet-4-5", NULL);
    assert_fails(doc, "key", "no key: key file");
    assert_non_null(strstr(str(entry(doc, 0), "diagnosis"), "0644"));
    json_decref(doc);
    chmod(keys, 0600);   /* the key file accepted: the key is found there */
    struct fake *fk = fake_start(refused, 1);
    char a[160];
    spec_at(a, sizeof a, "anthropic", "fake-claude", fk->port, "ANTHROPIC_API_KEY");
    doc = check(NULL, a, NULL);
    assert_string_equal(str(entry(doc, 0), "key"), "file");
    assert_fails(doc, "key", "401: the key ANTHROPIC_API_KEY from the key file was refused");
    json_decref(doc);
    fake_stop(fk);
    unsetenv("KEVO_KEY_FILE");
    if (old_home)
        setenv("HOME", old_home, 1);
    free(old_home);
}

static void test_diagnoses(void **state)
{
    char a[160];
    (void)state;
    struct fake *f = fake_start(not_found, 1);
    spec_at(a, sizeof a, "openai", "no-such-model", f->port, NULL);
    json_t *doc = check(NULL, a, NULL);
    assert_fails(doc, "http", "404: model 'no-such-model' or URL http://127.0.0.1:");
    assert_non_null(strstr(str(entry(doc, 0), "diagnosis"), "The model does not exist"));
    json_decref(doc);
    fake_stop(f);

    f = fake_start(bad_param, 1);
    spec_at(a, sizeof a, "openai", "fussy", f->port, NULL);
    doc = check(NULL, a, NULL);
    assert_fails(doc, "settings", "400: the request was refused: Unknown parameter");
    json_decref(doc);
    fake_stop(f);

    f = fake_start(not_json, 1);
    spec_at(a, sizeof a, "openai", "proxied", f->port, NULL);
    doc = check(NULL, a, NULL);
    assert_fails(doc, "reply", "bad_reply: not JSON");
    json_decref(doc);
    fake_stop(f);

    /* the output limit cut a reasoning model before it wrote: it got through, it passes */
    f = fake_start(cut, 1);
    spec_at(a, sizeof a, "openai", "thinker", f->port, NULL);
    doc = check(NULL, a, NULL);
    json_t *m = entry(doc, 0);
    print_message("[ diagnose ] cut off: %s, %s\n", str(m, "status"), str(m, "note"));
    assert_true(json_is_true(json_object_get(m, "ok")));
    assert_string_equal(str(m, "status"), "truncated");
    assert_non_null(strstr(str(m, "note"), "the request got through"));
    json_decref(doc);
    fake_stop(f);

    doc = check(NULL, "openai:x@http://127.0.0.1:1/v1", "nonsense", NULL);   /* nothing there */
    m = entry(doc, 0);
    print_message("[ diagnose ] %s\n", str(m, "diagnosis"));
    assert_string_equal(str(m, "stage"), "network");
    assert_true(strncmp(str(m, "diagnosis"), "network: cannot reach http://127.0.0.1:1/v1", 43)
                == 0);
    m = entry(doc, 1);
    assert_string_equal(str(m, "stage"), "spec");
    assert_true(strncmp(str(m, "diagnosis"), "bad model spec: ", 16) == 0);
    json_decref(doc);

    /* nothing to check, a price table that does not parse: no check at all */
    char *out = NULL, *msg = NULL;
    const char *one[] = { "openai:x@http://127.0.0.1:1/v1" };
    assert_int_equal(kevo_models_check_json(one, 0, NULL, &out, &msg), KEVO_ERR_INVALID);
    assert_null(out);
    kevo_free(msg);
    msg = NULL;
    assert_int_equal(kevo_models_check_json(one, 1, "/nonexistent/prices.json", &out, &msg),
                     KEVO_ERR_PARSE);
    assert_non_null(strstr(msg, "/nonexistent/prices.json"));
    kevo_free(msg);
}

/* ---- the command ---- */

static char out_text[1 << 16], err_text[1 << 16];

/* `kevo models ARGS...` (NULL-terminated): its exit status, its output in out_text and
 * err_text, neither holding the key. */
static int kevo_models(const char *a0, ...)
{
    char *argv[16];
    int n = 0;
    va_list ap;

    argv[n++] = (char *)kevo_bin;
    argv[n++] = "models";
    va_start(ap, a0);
    for (const char *a = a0; a && n < 15; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    int st = test_run(argv, out_text, sizeof out_text, err_text, sizeof err_text);
    assert_null(strstr(out_text, SECRET));
    assert_null(strstr(err_text, SECRET));
    return st;
}

static void test_cli(void **state)
{
    char good[160], bad[160], cfg[400], text[600];
    (void)state;
    if (!kevo_bin)
        skip();
    struct fake *fg = fake_start(oai_ok, 1), *fb = fake_start(refused, 1);
    spec_at(good, sizeof good, "openai", "fake-gpt", fg->port, "KEVO_TEST_KEY");
    spec_at(bad, sizeof bad, "openai", "fake-gpt", fb->port, "KEVO_TEST_KEY");
    setenv("KEVO_TEST_KEY", SECRET, 1);
    assert_int_equal(kevo_models("check", "--model", good, NULL), 0);
    print_message("[ cli      ] %s", out_text);
    snprintf(text, sizeof text, "ok   %s  ", good);
    assert_non_null(strstr(out_text, text));
    assert_int_equal(kevo_models("check", "--model", good, "--model", bad, NULL), 1);
    print_message("[ cli      ] %s", out_text);
    snprintf(text, sizeof text, "FAIL %s  401: the key in $KEVO_TEST_KEY was refused", bad);
    assert_non_null(strstr(out_text, text));
    assert_non_null(strstr(out_text, "2 model(s) checked, 1 failed"));
    assert_int_equal(kevo_models("check", "--model", bad, "--json", NULL), 1);
    json_t *doc = json_loads(out_text, 0, NULL);
    assert_false(json_is_true(json_object_get(doc, "ok")));
    json_decref(doc);
    /* the models of the config file, as kevo run would use them */
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "{\"models\": [\"%s\"]}\n", good);
    fclose(f);
    assert_int_equal(kevo_models("check", "--config", cfg, NULL), 0);
    assert_non_null(strstr(out_text, "1 model(s) checked, 0 failed"));
    /* bad usage: no model anywhere (a home without a config file), no subcommand, ... */
    char home[300], *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    snprintf(home, sizeof home, "%s/empty-home", dir);
    mkdir(home, 0700);
    setenv("HOME", home, 1);
    unsetenv("KEVO_CONFIG");
    assert_int_equal(kevo_models("check", NULL), 2);
    assert_non_null(strstr(err_text, "needs a model"));
    assert_int_equal(kevo_models(NULL), 2);
    assert_int_equal(kevo_models("frob", NULL), 2);
    assert_int_equal(kevo_models("check", "--bogus", NULL), 2);
    if (old_home)
        setenv("HOME", old_home, 1);
    free(old_home);
    fake_stop(fg);
    fake_stop(fb);
}

/* ---- the run's check ---- */

static json_t *events;

static void on_event(void *user, const char *e)
{
    (void)user;
    json_array_append_new(events, json_string(e));
}

/* The events of kind, one a line (free it). */
static char *events_of(const char *kind)
{
    size_t i, len = 0;
    json_t *e;
    char want[64], *all = calloc(1, 1);

    snprintf(want, sizeof want, "\"event\":\"%s\"", kind);
    json_array_foreach(events, i, e) {
        const char *s = json_string_value(e);
        if (!strstr(s, want))
            continue;
        all = realloc(all, len + strlen(s) + 2);
        assert_non_null(all);
        memcpy(all + len, s, strlen(s));
        len += strlen(s);
        all[len++] = '\n';
        all[len] = '\0';
    }
    return all;
}

static void no_secret_in_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    static char buf[1 << 22];
    if (!fp)
        return;
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    if (memmem(buf, n, SECRET, strlen(SECRET)))
        fail_msg("the key is in %s", path);
}

static void run_opts(struct kevo_run_opts *o, char *archive, const char *db)
{
    kevo_run_opts_default(o);
    snprintf(archive, 400, "%s/%s", dir, db);
    o->archive = archive;
    o->eval.backend = KEVO_BACKEND_CPU;
    o->eval.time_cap_s = 0.05;
    o->llm_concurrency = 1;
    o->budget = 6;
}

static void test_run_refused(void **state)
{
    struct kevo_run_opts o;
    char archive[400], bad[160], *out = NULL, *msg = NULL;
    const char *models[1];
    int64_t id = -1;
    (void)state;
    if (!kevo_bin)
        skip();
    struct fake *f = fake_start(refused, 1);
    spec_at(bad, sizeof bad, "openai", "fake-gpt", f->port, "KEVO_TEST_KEY");
    setenv("KEVO_TEST_KEY", SECRET, 1);
    run_opts(&o, archive, "refused.db");
    models[0] = bad;
    o.models = models;
    o.n_models = 1;
    events = json_array();
    enum kevo_status st = kevo_run(TASK, &o, on_event, NULL, NULL, &id, &out, &msg);
    fake_stop(f);
    print_message("[ run      ] refused: %s\n", msg ? msg : "?");
    assert_int_equal(st, KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "no LLM model works"));
    assert_non_null(strstr(msg, "401: the key in $KEVO_TEST_KEY was refused"));
    assert_null(strstr(msg, SECRET));
    assert_null(out);
    assert_int_equal(id, 0);   /* before the run existed: nothing evaluated, nothing recorded */
    char *ev = events_of("llm_check"), *all = json_dumps(events, 0);
    assert_non_null(strstr(ev, "\"ok\":false"));
    assert_null(strstr(all, "\"event\":\"start\""));
    assert_null(strstr(all, "\"event\":\"eval\""));
    assert_null(strstr(all, SECRET));
    free(ev);
    free(all);
    json_decref(events);
    kevo_free(msg);
    char *runs = NULL;
    assert_int_equal(kevo_runs_json(archive, 0, &runs, &msg), KEVO_OK);
    assert_null(strstr(runs, "slow_ref"));
    kevo_free(runs);
    kevo_free(msg);
    no_secret_in_file(archive);
}

/* count(*) of a query on the archive. */
static int q1(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    int v = -1;
    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(s, sql, -1, &q, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(s));
    if (sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(s);
    return v;
}

static const char *answer_anything(void *user, const char *req)
{
    (void)user;
    (void)req;
    return "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
           "\"No code today.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":"
           "100,\"completion_tokens\":10}}";
}

static void test_run_good_and_refused(void **state)
{
    struct kevo_run_opts o;
    char archive[400], good[160], bad[160], sql[600], *out = NULL, *msg = NULL;
    const char *models[2];
    int64_t id = 0;
    (void)state;
    if (!kevo_bin)
        skip();
    struct fake *fg = fake_start(NULL, 0), *fb = fake_start(refused, 1);
    fg->respond = answer_anything;
    spec_at(good, sizeof good, "openai", "good-gpt", fg->port, "KEVO_TEST_KEY");
    spec_at(bad, sizeof bad, "openai", "bad-gpt", fb->port, "KEVO_TEST_KEY");
    setenv("KEVO_TEST_KEY", SECRET, 1);
    run_opts(&o, archive, "mixed.db");
    models[0] = bad;
    models[1] = good;
    o.models = models;
    o.n_models = 2;
    events = json_array();
    if (kevo_run(TASK, &o, on_event, NULL, NULL, &id, &out, &msg) != KEVO_OK)
        fail_msg("kevo_run: %s", msg ? msg : "?");
    int bad_asked = fb->n_req;
    fake_stop(fg);
    fake_stop(fb);
    assert_int_equal(bad_asked, 1);   /* the check, and nothing after it */
    char *ev = events_of("llm_check");
    print_message("[ run      ] checks:\n%s", ev);
    assert_non_null(strstr(ev, "\"ok\":false"));
    assert_non_null(strstr(ev, "401: the key in $KEVO_TEST_KEY was refused"));
    assert_non_null(strstr(ev, "\"ok\":true"));
    free(ev);
    char *all = json_dumps(events, 0);
    assert_null(strstr(all, SECRET));
    assert_null(strstr(out, SECRET));
    free(all);
    json_decref(events);
    /* every call of the run went to the good model; the run's config names it alone */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls WHERE run_id = %lld",
             (long long)id);
    int calls = q1(archive, sql);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM llm_calls WHERE run_id = %lld AND "
             "model LIKE '%%good-gpt%%'", (long long)id);
    print_message("[ run      ] %d LLM calls, all to the good model\n", calls);
    assert_true(calls >= 1);
    assert_int_equal(q1(archive, sql), calls);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id = %lld AND instr(config_json, "
             "'bad-gpt') = 0 AND instr(config_json, 'good-gpt') > 0", (long long)id);
    assert_int_equal(q1(archive, sql), 1);
    kevo_free(out);
    kevo_free(msg);
    out = msg = NULL;
    /* replayed (no network, no check): the same session, the same model */
    struct kevo_run_opts r;
    int64_t rid = 0;
    kevo_run_opts_default(&r);
    r.archive = archive;
    r.replay = id;
    if (kevo_run(NULL, &r, NULL, NULL, NULL, &rid, &out, &msg) != KEVO_OK)
        fail_msg("replay: %s", msg ? msg : "?");
    json_t *rep = json_loads(out, 0, NULL);
    assert_true(json_is_true(json_object_get(json_object_get(rep, "replay"), "identical")));
    json_decref(rep);
    kevo_free(out);
    kevo_free(msg);
    no_secret_in_file(archive);
    snprintf(sql, sizeof sql, "%s-wal", archive);
    no_secret_in_file(sql);
}

int main(void)
{
    /* the fakes are on loopback: no proxy in between */
    static const char *const proxies[] = { "http_proxy", "HTTP_PROXY", "https_proxy",
                                           "HTTPS_PROXY", "all_proxy", "ALL_PROXY" };
    for (size_t i = 0; i < sizeof proxies / sizeof proxies[0]; i++)
        unsetenv(proxies[i]);
    unsetenv("KEVO_TEST_NO_KEY");
    unsetenv("KEVO_KEY_FILE");
    unsetenv("KEVO_PRICES");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_models),
        cmocka_unit_test(test_refused_key),
        cmocka_unit_test(test_no_key),
        cmocka_unit_test(test_diagnoses),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_run_refused),
        cmocka_unit_test(test_run_good_and_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

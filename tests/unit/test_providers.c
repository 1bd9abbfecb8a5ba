/*
 * test_providers - kevo against the providers it speaks to, as they behave (docs/llm.md):
 * three loopback fakes (fake_provider.h) that answer the way the real services do, and
 * one `kevo run` on the CPU backend that uses all three at once.
 *
 *   gpt-5 (OpenAI's reasoning models): 400 with OpenAI's own words to `max_tokens` and to
 *     a temperature other than 1; otherwise a completion with a reasoning model's usage
 *     (reasoning_tokens, cached_tokens). Served through a base URL, so the client sends
 *     max_tokens first and must heal: one refused request per parameter, remembered.
 *   claude-opus-4-7 (the Messages API): 400 "`temperature` is deprecated for this model.",
 *     400 to budget thinking ({"type": "enabled"}); with adaptive thinking a `thinking`
 *     block holding a draft in a code block, then the `text` block with the candidate.
 *   qwen3-8b behind llama.cpp (`--reasoning-format none`): <think> with a draft in a code
 *     block, then the candidate; every third call cut by the output limit while thinking
 *     (finish_reason "length").
 *
 * Each fake takes only its own key (401 otherwise). The run must evaluate candidates of
 * all three models, never a draft from thinking text (the drafts are larger than the
 * candidates and carry a marker that would land in the archive's sources), record the cut
 * reply as `truncated`, price each reply from its usage, and write no key anywhere; `kevo
 * runs ID` shows the tokens per model ("llm_models": in, cached, out, reasoning). Also:
 * budget thinking against Opus 4.7 is left out after one 400, as docs/llm.md says; every
 * config block of docs/llm.md (```json kevo-config) parses through the CLI without a
 * network, and between them they cover every provider the page names.
 *
 * Covered elsewhere, not repeated here: `kevo models check` passing good models and
 * failing a refused key with its reason (test_models.c); the air-gapped cycle, offline
 * run, pending, answer, import and resume (test_exchange.c). The run tests need KEVO_BIN
 * (the worker and the CLI); KEVO_TEST_KEEP=1 keeps their files in /tmp.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "testutil.h"

#include "fake_provider.h"

#include "ctl/llm.h"
#include "kevo.h"

#include <jansson.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define TASK KEVO_SOURCE_DIR "/tests/search/slow_ref.c"
#define DRAFT "kevo_thinking_draft_5d1c"    /* in every draft; never in the archive */
#define SEEN_MAX 256
#define KEEP_MAX 2048

static char dir[256];
static const char *kevo_bin;
static char archive[400];        /* test_run_three's, for the tests after it */
static int64_t run_id;
static json_t *report;           /* its report */

/* ---- the three providers ---- */

/* One request a fake received, in order of arrival. */
struct seen {
    int check;                   /* kevo's model check (models.h), not a call of the run */
    int status;                  /* what it was answered */
    char what[24];               /* "max_tokens", "temperature", "thinking", "key", "ok",
                                    "truncated" */
};

struct prov {
    const char *name;            /* the model id, as in its spec and the price table */
    const char *tag;             /* in the names of its candidates' functions */
    const char *key_env, *key;   /* the only key it takes, from this variable */
    struct fake *f;
    struct seen seen[SEEN_MAX];
    int n_seen, n_run;           /* requests; of them, the run's */
    int n_drafts;                /* replies that held a draft in their thinking */
    int n_bad_body;              /* the run's answered requests that lacked what they must
                                    carry (max_completion_tokens and reasoning_effort;
                                    adaptive thinking; ...) */
};

enum { P_OPENAI, P_ANTHROPIC, P_LOCAL, P_COUNT };

static struct prov provs[P_COUNT] = {
    { "gpt-5", "gpt5", "KEVO_TP_OPENAI_KEY", "sk-proj-kevo-tp-OPENAI-7f3a91c2", NULL, { { 0 } },
      0, 0, 0, 0 },
    { "claude-opus-4-7", "opus", "KEVO_TP_ANTHROPIC_KEY", "sk-ant-api03-kevo-tp-ANTH-4be2d870",
      NULL, { { 0 } }, 0, 0, 0, 0 },
    { "qwen3-8b", "qwen", "KEVO_TP_LOCAL_KEY", "llama-kevo-tp-LOCAL-0c55e1f9", NULL, { { 0 } },
      0, 0, 0, 0 },
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char *kept[KEEP_MAX];     /* reply bodies: the fake sends them after the callback */
static int n_kept;

/* s, kept until the program ends (a reply body must outlive the callback). */
static const char *keep(char *s)
{
    if (!s)
        abort();
    pthread_mutex_lock(&mu);
    if (n_kept < KEEP_MAX)
        kept[n_kept++] = s;
    pthread_mutex_unlock(&mu);
    return s;
}

static const char *keep_json(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return keep(s);
}

/* What request req was answered (*status) and the reply: the request in p's log. */
static const char *said(struct prov *p, int check, int *status, int code, const char *what,
                        const char *body)
{
    pthread_mutex_lock(&mu);
    if (p->n_seen < SEEN_MAX) {
        struct seen *s = &p->seen[p->n_seen++];
        s->check = check;
        s->status = code;
        snprintf(s->what, sizeof s->what, "%s", what);
    }
    p->n_run += !check;
    pthread_mutex_unlock(&mu);
    *status = code;
    return body;
}

/* j's text, or "" when j is not a string. */
static const char *str_or(json_t *j)
{
    return json_is_string(j) ? json_string_value(j) : "";
}

/* The request's JSON body (NULL when it has none). */
static json_t *body_of(const char *req)
{
    const char *b = strstr(req, "\r\n\r\n");
    return b ? json_loads(b + 4, 0, NULL) : NULL;
}

/* Does the request carry the header line "name: value" (name in any case)? */
static int has_header(const char *req, const char *name, const char *value)
{
    char want[256];
    const char *end = strstr(req, "\r\n\r\n");
    snprintf(want, sizeof want, "\r\n%s: %s\r\n", name, value);
    const char *at = strcasestr(req, want);
    return at && end && at < end && strstr(at, value) == at + strlen(name) + 4;
}

/* One more of the run's requests of p lacked what it must carry. */
static void bad_body(struct prov *p)
{
    pthread_mutex_lock(&mu);
    p->n_bad_body++;
    pthread_mutex_unlock(&mu);
}

/* The run's request number of p (from 0), taken now. */
static int run_index(struct prov *p)
{
    pthread_mutex_lock(&mu);
    int n = p->n_run;
    pthread_mutex_unlock(&mu);
    return n;
}

/* A draft a model writes while thinking: a whole, correct file with a call line, larger
 * than the candidates (reply.c takes the largest block with a directive), named DRAFT:
 * were the thinking ever read as the answer, this is the candidate that would be
 * evaluated, and DRAFT would be in the archive's sources. */
static const char DRAFT_BLOCK[] =
    "```c\n// kevo call " DRAFT "(x, y, N)\n"
    "void " DRAFT "(const float *restrict x, float *restrict y, int n)\n{\n"
    "    int i = 0;\n    for (; i + 4 <= n; i += 4) {\n"
    "        y[i] = 2.0f * x[i] + 1.0f;\n        y[i + 1] = 2.0f * x[i + 1] + 1.0f;\n"
    "        y[i + 2] = 2.0f * x[i + 2] + 1.0f;\n        y[i + 3] = 2.0f * x[i + 3] + 1.0f;\n"
    "    }\n    for (; i < n; i++)\n        y[i] = 2.0f * x[i] + 1.0f;\n}\n```\n";

/* The answer to what the prompt asks: a strategy for a plan, else a whole file doing the
 * task in one pass (correct, ~30x the reference) whose function is named by the model's
 * tag and n, so no two answers are the same text. Caller frees. */
static char *answer_to(const char *req, const char *tag, int n)
{
    char *s = NULL;
    int rc;

    if (strstr(req, "choose ONE optimization strategy"))
        rc = asprintf(&s, "Compute each element once (%s %d): one pass over x.", tag, n);
    else
        rc = asprintf(&s, "One pass over x, each element computed once.\n\n```c\n"
                      "// kevo call fast_%s_%d(x, y, N)\n"
                      "void fast_%s_%d(const float *restrict x, float *restrict y, int n)\n{\n"
                      "    for (int i = 0; i < n; i++)\n        y[i] = 2.0f * x[i] + 1.0f;\n}\n"
                      "```\n", tag, n, tag, n);
    if (rc < 0)
        abort();
    return s;
}

/* OpenAI's gpt-5 behind a base URL: its refusals word for word, then a reasoning model's
 * completion. */
static const char *reply_openai(void *user, const char *req, int *status)
{
    struct prov *p = user;
    int check = strstr(req, KEVO_MODELS_CHECK_SYSTEM) != NULL, n = run_index(p);
    char auth[128];
    json_t *b = body_of(req), *t = json_object_get(b, "temperature");
    const char *body = NULL;

    snprintf(auth, sizeof auth, "Bearer %s", p->key);
    if (!has_header(req, "Authorization", auth)) {
        body = said(p, check, status, 401, "key", "{\"error\":{\"message\":\"Incorrect API key "
                    "provided.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":"
                    "\"invalid_api_key\"}}");
    } else if (json_object_get(b, "max_tokens")) {
        body = said(p, check, status, 400, "max_tokens", "{\"error\":{\"message\":\"Unsupported "
                    "parameter: 'max_tokens' is not supported with this model. Use "
                    "'max_completion_tokens' instead.\",\"type\":\"invalid_request_error\","
                    "\"param\":\"max_tokens\",\"code\":\"unsupported_parameter\"}}");
    } else if (t && json_number_value(t) != 1.0) {
        char msg[200];
        snprintf(msg, sizeof msg, "Unsupported value: 'temperature' does not support %g with "
                 "this model. Only the default (1) value is supported.", json_number_value(t));
        body = said(p, check, status, 400, "temperature",
                    keep_json(json_pack("{s:{s:s, s:s, s:s, s:s}}", "error", "message", msg,
                                        "type", "invalid_request_error", "param", "temperature",
                                        "code", "unsupported_value")));
    } else {
        char *text = check ? strdup("OK") : answer_to(req, p->tag, n);
        if (!check && (!json_object_get(b, "max_completion_tokens") ||
                       strcmp(str_or(json_object_get(b, "reasoning_effort")), "high")))
            bad_body(p);
        json_t *r = json_pack("{s:s, s:s, s:i, s:s, s:[{s:i, s:{s:s, s:s, s:n}, s:s}],"
                              " s:{s:i, s:i, s:i, s:{s:i}, s:{s:i}}}",
                              "id", "chatcmpl-kevo", "object", "chat.completion", "created",
                              1767225600, "model", "gpt-5-2025-08-07", "choices", "index", 0,
                              "message", "role", "assistant", "content", text, "refusal",
                              "finish_reason", "stop", "usage", "prompt_tokens", 1200,
                              "completion_tokens", 900, "total_tokens", 2100,
                              "prompt_tokens_details", "cached_tokens", 1024,
                              "completion_tokens_details", "reasoning_tokens", 640);
        free(text);
        body = said(p, check, status, 200, "ok", keep_json(r));
    }
    json_decref(b);
    return body;
}

/* Anthropic's claude-opus-4-7: no temperature, adaptive thinking only; with thinking, a
 * thinking block (a draft in it) before the text block. */
static const char *reply_anthropic(void *user, const char *req, int *status)
{
    struct prov *p = user;
    int check = strstr(req, KEVO_MODELS_CHECK_SYSTEM) != NULL, n = run_index(p);
    json_t *b = body_of(req);
    const char *type = json_string_value(json_object_get(json_object_get(b, "thinking"), "type"));
    const char *body = NULL;

    if (!has_header(req, "x-api-key", p->key) || !has_header(req, "anthropic-version",
                                                             "2023-06-01")) {
        body = said(p, check, status, 401, "key", "{\"type\":\"error\",\"error\":{\"type\":"
                    "\"authentication_error\",\"message\":\"invalid x-api-key\"}}");
    } else if (json_object_get(b, "temperature")) {
        body = said(p, check, status, 400, "temperature", "{\"type\":\"error\",\"error\":"
                    "{\"type\":\"invalid_request_error\",\"message\":\"`temperature` is "
                    "deprecated for this model.\"},\"request_id\":\"req_011CabJ9ACVfYuqhf5QD\"}");
    } else if (type && strcmp(type, "adaptive") != 0) {
        body = said(p, check, status, 400, "thinking", "{\"type\":\"error\",\"error\":{\"type\":"
                    "\"invalid_request_error\",\"message\":\"\\\"thinking.type.enabled\\\" is not "
                    "supported for this model. Use \\\"thinking.type.adaptive\\\" and "
                    "\\\"output_config.effort\\\" to control thinking behavior.\"}}");
    } else {
        char *text = check ? strdup("OK") : answer_to(req, p->tag, n), *think = NULL;
        json_t *content = json_array();
        if (!check && !type)
            bad_body(p);   /* the spec asks for adaptive thinking */
        if (type && asprintf(&think, "The reference computes each element 32 times. A first "
                             "idea:\n%sUnrolling is not needed; one plain pass is enough.",
                             check ? "" : DRAFT_BLOCK) < 0)
            abort();
        if (think)
            json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "thinking",
                                                     "thinking", think, "signature",
                                                     "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzL"));
        json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
        json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:n, s:{s:i, s:i, s:i, s:i}}",
                              "id", "msg_01kevo", "type", "message", "role", "assistant",
                              "model", "claude-opus-4-7", "content", content, "stop_reason",
                              "end_turn", "stop_sequence", "usage", "input_tokens", 150,
                              "cache_creation_input_tokens", 50, "cache_read_input_tokens",
                              1000, "output_tokens", 700);
        pthread_mutex_lock(&mu);
        p->n_drafts += think && !check;
        pthread_mutex_unlock(&mu);
        free(text);
        free(think);
        body = said(p, check, status, 200, "ok", keep_json(r));
    }
    json_decref(b);
    return body;
}

/* Qwen3 behind llama.cpp without a reasoning parser: <think> (a draft in it) inline
 * before the answer; the run's calls 0, 3, 6, ... run out of output while thinking. */
static const char *reply_local(void *user, const char *req, int *status)
{
    struct prov *p = user;
    int check = strstr(req, KEVO_MODELS_CHECK_SYSTEM) != NULL, n = run_index(p);
    int cut = !check && n % 3 == 0;
    char auth[128], *content = NULL, *answer = NULL;
    json_t *b = body_of(req);
    json_int_t max = json_integer_value(json_object_get(b, "max_tokens"));

    snprintf(auth, sizeof auth, "Bearer %s", p->key);
    if (!has_header(req, "Authorization", auth)) {
        json_decref(b);
        return said(p, check, status, 401, "key", "{\"error\":{\"code\":401,\"message\":"
                    "\"Invalid API Key\",\"type\":\"authentication_error\"}}");
    }
    if (!check && (max <= 0 || json_object_get(b, "max_completion_tokens")))
        bad_body(p);   /* a server that imitates OpenAI gets max_tokens */
    answer = check ? strdup("OK") : answer_to(req, p->tag, n);
    if (asprintf(&content, "<think>\nThe reference repeats each element 32 times. Maybe:\n%s%s",
                 check ? "" : DRAFT_BLOCK, cut ? "Now the tail, and then I should check whether"
                 : "Wait, the plain loop is enough.\n</think>\n\n") < 0)
        abort();
    if (!cut) {
        char *whole = NULL;
        if (asprintf(&whole, "%s%s", content, answer) < 0)
            abort();
        free(content);
        content = whole;
    }
    json_t *r = json_pack("{s:[{s:s, s:i, s:{s:s, s:s}}], s:i, s:s, s:s, s:s,"
                          " s:{s:I, s:i, s:I, s:{s:i}}, s:s}",
                          "choices", "finish_reason", cut ? "length" : "stop", "index", 0,
                          "message", "role", "assistant", "content", content, "created",
                          1767225800, "model", "Qwen3-8B-Q4_K_M.gguf", "system_fingerprint",
                          "b6000-0f3cb3fc8", "object", "chat.completion", "usage",
                          "completion_tokens", (json_int_t)(cut ? max : 310), "prompt_tokens",
                          95, "total_tokens", (json_int_t)(cut ? max + 95 : 405),
                          "prompt_tokens_details", "cached_tokens", 64, "id",
                          "chatcmpl-fwL9J1dyR2kq8Xb4");
    pthread_mutex_lock(&mu);
    p->n_drafts += !check;
    pthread_mutex_unlock(&mu);
    free(content);
    free(answer);
    json_decref(b);
    return said(p, check, status, 200, cut ? "truncated" : "ok", keep_json(r));
}

static const fake_reply_fn replies[P_COUNT] = { reply_openai, reply_anthropic, reply_local };

/* ---- helpers ---- */


static int setup(void **state)
{
    (void)state;
    kevo_bin = test_scratch(dir, sizeof dir, "providers");
    return dir[0] ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < n_kept; i++)
        free(kept[i]);
    json_decref(report);
    return test_scratch_remove(dir);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *t = NULL;
    long n;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    t = calloc(1, (size_t)n + 1);
    assert_non_null(t);
    assert_int_equal(fread(t, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    if (len)
        *len = (size_t)n;
    return t;
}

static char out_text[1 << 20], err_text[1 << 16];

/* kevo with argv (argv[0] is set here) and environment envp (NULL: this one): its exit
 * status, its output in out_text and err_text. */
static int kevo_cli(char **argv, char **envp)
{
    int st = -1;
    FILE *fo = tmpfile(), *fe = tmpfile();

    assert_non_null(fo);
    assert_non_null(fe);
    argv[0] = (char *)kevo_bin;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fileno(fo), 1);
        dup2(fileno(fe), 2);
        if (envp)
            execve(kevo_bin, argv, envp);
        else
            execv(kevo_bin, argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    rewind(fo);
    out_text[fread(out_text, 1, sizeof out_text - 1, fo)] = '\0';
    rewind(fe);
    err_text[fread(err_text, 1, sizeof err_text - 1, fe)] = '\0';
    fclose(fo);
    fclose(fe);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* One number from an SQL query on the archive. */
static double q1(const char *db, const char *fmt, ...)
{
    char sql[2048];
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    double v = -1;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    if (sqlite3_prepare_v2(s, sql, -1, &q, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(s));
    if (sqlite3_step(q) == SQLITE_ROW)
        v = sqlite3_column_double(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(s);
    return v;
}

/* text (len bytes) holds none of the keys nor the draft marker; what says where. */
static void clean(const char *text, size_t len, const char *what)
{
    for (int i = 0; i < P_COUNT; i++)
        if (memmem(text, len, provs[i].key, strlen(provs[i].key)))
            fail_msg("the key of %s is in %s", provs[i].name, what);
    if (memmem(text, len, DRAFT, strlen(DRAFT)))
        fail_msg("a draft from thinking text is in %s", what);
}

static void clean_file(const char *path)
{
    size_t len = 0;
    char *t = slurp(path, &len);
    if (t)
        clean(t, len, path);
    free(t);
}

/* ---- the run with all three ---- */

static json_t *events;

static void on_event(void *user, const char *e)
{
    (void)user;
    json_array_append_new(events, json_string(e));
}

/* The run's requests of p that were answered with code: their indices among the run's
 * requests, written into at (room for n); their count. */
static int run_requests(const struct prov *p, int code, const char *what, int *at, int n)
{
    int k = 0, idx = 0;
    for (int i = 0; i < p->n_seen; i++) {
        const struct seen *s = &p->seen[i];
        if (s->check)
            continue;
        if (s->status == code && (!what || strcmp(s->what, what) == 0)) {
            if (k < n)
                at[k] = idx;
            k++;
        }
        idx++;
    }
    return k;
}

/* The check's requests of p, as "STATUS what" joined by ", ". */
static void check_requests(const struct prov *p, char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < p->n_seen; i++)
        if (p->seen[i].check)
            len += (size_t)snprintf(out + len, len < n ? n - len : 0, "%s%d %s",
                                    len ? ", " : "", p->seen[i].status, p->seen[i].what);
}

/* What the fakes received: each refusal healed with one more request, remembered. */
static void assert_healed(void)
{
    char chk[256];
    int at[SEEN_MAX];
    const struct prov *o = &provs[P_OPENAI], *a = &provs[P_ANTHROPIC], *l = &provs[P_LOCAL];

    /* the run's check (its own client) learns it too: one refusal per parameter */
    check_requests(o, chk, sizeof chk);
    assert_string_equal(chk, "400 max_tokens, 400 temperature, 200 ok");
    check_requests(a, chk, sizeof chk);
    assert_string_equal(chk, "400 temperature, 200 ok");
    check_requests(l, chk, sizeof chk);
    assert_string_equal(chk, "200 ok");
    /* the run's client (one call at a time): max_tokens is refused on the first request,
     * temperature on the second, never again; every later request goes out right */
    assert_int_equal(run_requests(o, 400, "max_tokens", at, SEEN_MAX), 1);
    assert_int_equal(at[0], 0);
    assert_int_equal(run_requests(o, 400, "temperature", at, SEEN_MAX), 1);
    assert_int_equal(at[0], 1);
    assert_int_equal(run_requests(o, 400, NULL, at, SEEN_MAX), 2);
    assert_true(run_requests(o, 200, NULL, at, SEEN_MAX) >= 1);
    assert_int_equal(run_requests(a, 400, "temperature", at, SEEN_MAX), 1);
    assert_int_equal(at[0], 0);
    assert_int_equal(run_requests(a, 400, NULL, at, SEEN_MAX), 1);
    assert_int_equal(run_requests(l, 400, NULL, at, SEEN_MAX), 0);
    for (int i = 0; i < P_COUNT; i++) {
        assert_int_equal(run_requests(&provs[i], 401, NULL, at, SEEN_MAX), 0);
        assert_int_equal(provs[i].n_bad_body, 0);
    }
    /* the drafts were sent: they were there to be mistaken for candidates */
    assert_true(a->n_drafts >= 1);
    assert_true(l->n_drafts >= 1);
}

/* Candidates of each model were evaluated: the model's calls point at done candidates
 * whose sources are that model's answers. */
static void assert_each_model_evaluated(void)
{
    for (int i = 0; i < P_COUNT; i++) {
        double n = q1(archive, "SELECT count(*) FROM llm_calls l JOIN candidates c ON c.id ="
                      " l.cand_id JOIN sources s ON s.hash = c.source_hash WHERE l.run_id = %lld"
                      " AND l.model LIKE '%%:%s@%%' AND l.status = 'ok' AND c.state = 'done' AND"
                      " c.verdict = 'ok' AND instr(CAST(s.text AS TEXT), 'fast_%s_') > 0",
                      (long long)run_id, provs[i].name, provs[i].tag);
        print_message("[ providers ] %-16s %.0f evaluated candidate(s), %.0f call(s)\n",
                      provs[i].name, n, q1(archive, "SELECT count(*) FROM llm_calls WHERE "
                                           "run_id = %lld AND model LIKE '%%:%s@%%'",
                                           (long long)run_id, provs[i].name));
        if (n < 1)
            fail_msg("no evaluated candidate of %s", provs[i].name);
    }
}

/* Usage read as each API says it, and priced (the prices file of test_run_three). */
static void assert_usage(void)
{
    long long id = (long long)run_id;
    /* gpt-5: prompt 1200 of which 1024 cached, 900 out of which 640 reasoning; priced
     * 1.25 in, 0.125 cached in, 10 out per million */
    assert_true(q1(archive, "SELECT count(*) FROM llm_calls WHERE run_id = %lld AND model LIKE"
                   " 'openai:gpt-5@%%' AND status = 'ok' AND NOT (tokens_in = 1200 AND"
                   " tokens_cached_in = 1024 AND tokens_out = 900 AND tokens_reasoning = 640"
                   " AND abs(cost - 0.009348) < 1e-9)", id) == 0);
    /* claude-opus-4-7: input 150 + cache writes 50 + cache reads 1000; 700 out (its
     * thinking included, unsaid); 5 in, 0.5 cached in, 25 out */
    assert_true(q1(archive, "SELECT count(*) FROM llm_calls WHERE run_id = %lld AND model LIKE"
                   " 'anthropic:claude-opus-4-7@%%' AND status = 'ok' AND NOT (tokens_in = 1200"
                   " AND tokens_cached_in = 1000 AND tokens_out = 700 AND tokens_reasoning = 0"
                   " AND abs(cost - 0.019) < 1e-9)", id) == 0);
    /* the cut replies: truncated, no text, no candidate, their tokens kept (the whole
     * output limit spent thinking) */
    double cut = q1(archive, "SELECT count(*) FROM llm_calls WHERE run_id = %lld AND model LIKE"
                    " 'openai:qwen3-8b@%%' AND status = 'truncated'", id);
    print_message("[ providers ] %.0f truncated repl(ies) of qwen3-8b\n", cut);
    assert_true(cut >= 1);
    assert_true(q1(archive, "SELECT count(*) FROM llm_calls WHERE run_id = %lld AND status ="
                   " 'truncated' AND (model NOT LIKE 'openai:qwen3-8b@%%' OR reply IS NOT NULL"
                   " OR coalesce(cand_id, 0) <> 0 OR tokens_out <> %d)", id,
                   KEVO_LLM_MAX_OUTPUT) == 0);
    /* nothing else failed: every call is ok, truncated, or came too late for the budget */
    assert_true(q1(archive, "SELECT count(*) FROM llm_calls WHERE run_id = %lld AND status NOT"
                   " IN ('ok', 'truncated') AND status NOT LIKE 'unused%%'", id) == 0);
}

/*
 * A run with gpt-5 (asked with a temperature and reasoning_effort=high), claude-opus-4-7
 * (a temperature and adaptive thinking) and a local qwen3-8b, each behind its fake, one
 * call at a time (so the heals are in a known order).
 */
static void test_run_three(void **state)
{
    struct kevo_run_opts o;
    char specs[P_COUNT][300], prices[400], *out = NULL, *msg = NULL;
    const char *models[P_COUNT];
    (void)state;
    if (!kevo_bin)
        skip();
    for (int i = 0; i < P_COUNT; i++) {
        provs[i].f = fake_start(NULL, 0);
        provs[i].f->reply = replies[i];
        provs[i].f->respond_user = &provs[i];
        setenv(provs[i].key_env, provs[i].key, 1);
    }
    snprintf(specs[P_OPENAI], sizeof specs[0], "openai:gpt-5@http://127.0.0.1:%d/v1#%s?"
             "temperature=0.7&reasoning_effort=high", provs[P_OPENAI].f->port,
             provs[P_OPENAI].key_env);
    snprintf(specs[P_ANTHROPIC], sizeof specs[0], "anthropic:claude-opus-4-7@http://127.0.0.1:%d"
             "/v1#%s?temperature=0.7&extra={\"thinking\":{\"type\":\"adaptive\"}}",
             provs[P_ANTHROPIC].f->port, provs[P_ANTHROPIC].key_env);
    snprintf(specs[P_LOCAL], sizeof specs[0], "openai:qwen3-8b@http://127.0.0.1:%d/v1#%s*2",
             provs[P_LOCAL].f->port, provs[P_LOCAL].key_env);
    for (int i = 0; i < P_COUNT; i++)
        models[i] = specs[i];
    snprintf(prices, sizeof prices, "%s/prices.json", dir);
    write_file(prices, "{\"gpt-5\": {\"in\": 1.25, \"out\": 10.0, \"cached_in\": 0.125},"
               " \"claude-opus-4-7\": {\"in\": 5.0, \"out\": 25.0, \"cached_in\": 0.5},"
               " \"qwen3-8b\": {\"in\": 0, \"out\": 0}}\n");
    snprintf(archive, sizeof archive, "%s/three.db", dir);
    kevo_run_opts_default(&o);
    o.archive = archive;
    o.eval.backend = KEVO_BACKEND_CPU;
    o.eval.time_cap_s = 0.05;
    o.models = models;
    o.n_models = P_COUNT;
    o.llm_concurrency = 1;
    o.prices = prices;
    o.budget = 24;
    events = json_array();
    if (kevo_run(TASK, &o, on_event, NULL, NULL, &run_id, &out, &msg) != KEVO_OK)
        fail_msg("kevo_run: %s", msg ? msg : "?");
    for (int i = 0; i < P_COUNT; i++)
        fake_stop(provs[i].f);
    json_t *rep = json_loads(out, 0, NULL);
    assert_non_null(rep);
    print_message("[ providers ] run %lld: %s after %lld evaluations\n", (long long)run_id,
                  json_string_value(json_object_get(rep, "reason")),
                  (long long)json_integer_value(json_object_get(rep, "evaluations")));
    /* every model passed the run's check */
    size_t i;
    json_t *e;
    int n_checked = 0;
    json_array_foreach(events, i, e) {
        json_t *ev = json_loads(json_string_value(e), 0, NULL);
        if (!strcmp(str_or(json_object_get(ev, "event")), "llm_check")) {
            n_checked++;
            if (!json_is_true(json_object_get(ev, "ok")))
                fail_msg("check failed: %s", json_string_value(e));
        }
        json_decref(ev);
    }
    assert_int_equal(n_checked, P_COUNT);
    assert_healed();
    /* no draft from thinking text anywhere: not a source, not a reply, not a prompt */
    if (q1(archive, "SELECT count(*) FROM sources WHERE instr(CAST(text AS TEXT), '" DRAFT
           "') > 0") != 0)
        fail_msg("a draft from thinking text was evaluated: it is in the archive's sources");
    if (q1(archive, "SELECT count(*) FROM llm_calls WHERE instr(coalesce(reply, ''), '" DRAFT
           "') > 0 OR instr(prompt, '" DRAFT "') > 0") != 0)
        fail_msg("a draft from thinking text is in a recorded reply or prompt");
    assert_each_model_evaluated();
    assert_usage();
    /* no key (and no draft) in anything kevo wrote: the archive, its WAL, the report,
     * the events */
    char path[600], *ev = json_dumps(events, 0);
    clean_file(archive);
    snprintf(path, sizeof path, "%s-wal", archive);
    clean_file(path);
    clean(out, strlen(out), "the report");
    clean(ev, strlen(ev), "the events");
    free(ev);
    json_decref(events);
    events = NULL;
    report = rep;
    kevo_free(out);
    kevo_free(msg);
}

/* ---- kevo runs ID: tokens per model ---- */

/* The sum of column over the run's calls of model p. */
static long long model_sum(const struct prov *p, const char *column)
{
    return (long long)q1(archive, "SELECT coalesce(sum(%s), 0) FROM llm_calls WHERE run_id = %lld"
                         " AND model LIKE '%%:%s@%%'", column, (long long)run_id, p->name);
}

/* The entry of llm_models (what each model of the run did) for p; fails when none. */
static json_t *model_entry(json_t *per, const struct prov *p, const char *where)
{
    json_t *m = NULL, *x;
    size_t k;

    if (!json_is_array(per))
        fail_msg("%s has no \"llm_models\" array", where);
    json_array_foreach(per, k, x)
        if (strstr(str_or(json_object_get(x, "model")), p->name))
            m = x;
    if (!m)
        fail_msg("%s: llm_models has no entry for %s", where, p->name);
    return m;
}

/* llm_models of a report or of `kevo runs ID --json`: per model, its calls and the
 * tokens of all of them (cut replies included) as llm_calls has them; where says whose. */
static void assert_llm_models(json_t *per, const char *where)
{
    static const char *const cols[] = { "tokens_in", "tokens_cached_in", "tokens_out",
                                        "tokens_reasoning" };
    static const char *const keys[] = { "in", "cached_in", "out", "reasoning" };

    for (int i = 0; i < P_COUNT; i++) {
        json_t *m = model_entry(per, &provs[i], where), *t = json_object_get(m, "tokens");
        for (int k = 0; k < 4; k++) {
            long long want = model_sum(&provs[i], cols[k]);
            if (json_integer_value(json_object_get(t, keys[k])) != want)
                fail_msg("%s: %s: tokens.%s is %lld, its calls say %lld", where, provs[i].name,
                         keys[k], (long long)json_integer_value(json_object_get(t, keys[k])),
                         want);
        }
        assert_true(json_integer_value(json_object_get(t, "in")) > 0);
        assert_true(json_integer_value(json_object_get(t, "out")) > 0);
        assert_int_equal(json_integer_value(json_object_get(m, "n_calls")),
                         model_sum(&provs[i], "1"));
        assert_true(json_integer_value(json_object_get(m, "ok")) >= 1);
    }
    /* gpt-5 spent reasoning tokens; qwen3-8b's cut calls are counted as such */
    json_t *o = model_entry(per, &provs[P_OPENAI], where);
    assert_true(json_integer_value(json_object_get(json_object_get(o, "tokens"), "reasoning")) > 0);
    json_t *l = model_entry(per, &provs[P_LOCAL], where);
    assert_true(json_integer_value(json_object_get(json_object_get(l, "calls"), "truncated")) >= 1);
}

/*
 * `kevo runs ID` shows the tokens per model: "llm_models" in its JSON (and in the run's
 * report) has, for each model, the tokens of its calls as the archive has them; the text
 * view has a line per model with its tokens in/cached/out/reasoning. No key in either.
 */
static void test_runs_tokens_per_model(void **state)
{
    char id[32], tok[P_COUNT][128];
    char *argv[8] = { NULL, "runs", id, "--archive", archive, "--json", NULL };
    (void)state;
    if (!kevo_bin || !report)   /* test_run_three did not get to its end */
        skip();
    assert_llm_models(json_object_get(report, "llm_models"), "the run's report");
    snprintf(id, sizeof id, "%lld", (long long)run_id);
    assert_int_equal(kevo_cli(argv, NULL), 0);
    clean(out_text, strlen(out_text), "kevo runs --json");
    json_t *doc = json_loads(out_text, 0, NULL);
    assert_non_null(doc);
    assert_llm_models(json_object_get(doc, "llm_models"), "kevo runs ID --json");
    json_decref(doc);
    for (int i = 0; i < P_COUNT; i++)
        snprintf(tok[i], sizeof tok[i], " %lld/%lld/%lld/%lld ",
                 model_sum(&provs[i], "tokens_in"), model_sum(&provs[i], "tokens_cached_in"),
                 model_sum(&provs[i], "tokens_out"), model_sum(&provs[i], "tokens_reasoning"));
    argv[5] = NULL;   /* the text view */
    assert_int_equal(kevo_cli(argv, NULL), 0);
    clean(out_text, strlen(out_text), "kevo runs");
    for (int i = 0; i < P_COUNT; i++) {
        const char *line = strstr(out_text, provs[i].name);
        const char *eol = line ? strchr(line, '\n') : NULL;
        const char *at = line ? strstr(line, tok[i]) : NULL;
        if (!at || (eol && at > eol))
            fail_msg("kevo runs %s: no line for %s with its tokens (%s):\n%s", id,
                     provs[i].name, tok[i], out_text);
    }
    const char *table = strstr(out_text, "LLM models:");
    print_message("[ runs      ] %s", table ? table : out_text);
}

/* ---- budget thinking against Opus 4.7 ---- */

/*
 * `thinking=N` sends budget thinking, which Claude Opus 4.7 refuses (400: only adaptive
 * thinking): the client leaves `thinking` out after one refused request, says so once in
 * `adapted`, and sends the next call without it; the model then answers without thinking
 * (docs/llm.md: ask it for adaptive thinking through `extra`).
 */
static void test_opus_budget_thinking(void **state)
{
    struct prov p = { "claude-opus-4-7", "opus", "KEVO_TP_ANTHROPIC_KEY",
                      "sk-ant-api03-kevo-tp-ANTH-4be2d870", NULL, { { 0 } }, 0, 0, 0, 0 };
    struct kevo_llm_model m;
    struct kevo_llm *c = NULL;
    struct kevo_llm_req r = { "You write kernels.", "Make it faster." };
    char spec[300], *msg = NULL, chk[256];
    (void)state;
    p.f = fake_start(NULL, 0);
    p.f->reply = reply_anthropic;
    p.f->respond_user = &p;
    setenv(p.key_env, p.key, 1);
    snprintf(spec, sizeof spec, "anthropic:claude-opus-4-7@http://127.0.0.1:%d/v1#%s?"
             "thinking=2048", p.f->port, p.key_env);
    assert_int_equal(kevo_llm_model_parse(spec, &m, &msg), KEVO_OK);
    assert_int_equal(kevo_llm_new(1, NULL, &c), KEVO_OK);
    for (int k = 0; k < 2; k++) {
        struct kevo_llm_reply rp;
        memset(&rp, 0, sizeof rp);
        assert_int_equal(kevo_llm_complete(c, &m, &r, &rp), KEVO_OK);
        assert_string_equal(rp.status, "ok");
        assert_non_null(strstr(rp.text, "fast_opus_"));
        if (k == 0)
            assert_string_equal(rp.adapted ? rp.adapted : "", "thinking left out");
        else
            assert_null(rp.adapted);
        kevo_llm_reply_clear(&rp);
    }
    kevo_llm_free(c);
    kevo_llm_model_clear(&m);
    fake_stop(p.f);
    /* one refusal, then each call right the first time */
    size_t len = 0;
    chk[0] = '\0';
    for (int i = 0; i < p.n_seen; i++)
        len += (size_t)snprintf(chk + len, sizeof chk - len, "%s%d %s", i ? ", " : "",
                                p.seen[i].status, p.seen[i].what);
    assert_string_equal(chk, "400 thinking, 200 ok, 200 ok");
    assert_int_equal(p.n_drafts, 0);   /* no thinking asked, none sent */
}

/* ---- the provider configs of docs/llm.md ---- */

/* The members a config file may have (cli/common.c cli_load_config). */
static int config_member(const char *k)
{
    static const char *const known[] = { "models", "llm_concurrency", "cost_cap", "prices",
                                         "prompts", "archive" };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(k, known[i]))
            return 1;
    return 0;
}

/* What the configs of docs/llm.md must cover between them: one per provider. */
enum { C_OPENAI, C_ANTHROPIC, C_VLLM, C_SGLANG, C_LLAMACPP, C_OLLAMA, C_OPENROUTER, C_COUNT };
static const char *const cover_names[C_COUNT] = { "an OpenAI reasoning model", "Anthropic",
    "vLLM (port 8000)", "SGLang (port 30000)", "llama.cpp (port 8080)", "Ollama (port 11434)",
    "OpenRouter" };

/* Which provider model spec m is, by its URL (-1: none of them). */
static int covers(const struct kevo_llm_model *m)
{
    if (m->api == KEVO_LLM_ANTHROPIC)
        return strcmp(m->base_url, "https://api.anthropic.com/v1") ? -1 : C_ANTHROPIC;
    if (!strcmp(m->base_url, "https://api.openai.com/v1"))
        return m->reasoning_effort ? C_OPENAI : -1;
    static const char *const at[] = { ":8000/v1", ":30000/v1", ":8080/v1", ":11434/v1",
                                      "https://openrouter.ai/api/v1" };
    for (int k = 0; k < 5; k++) {
        size_t n = strlen(m->base_url), w = strlen(at[k]);
        if (n >= w && !strcmp(m->base_url + n - w, at[k]))
            return C_VLLM + k;
    }
    return -1;
}

/* One config block (its text) written to a file and read by `kevo models check`, in an
 * environment with no key and a key file that does not exist: every model is parsed as
 * kevo run parses it (objects turned into specs by the CLI) and stops at the key, before
 * any request (a refused key file stops even a local server's call). Marks what the
 * config's models cover. */
static void check_config(const char *text, int n, int *covered)
{
    char cfg[400], prices[400], home[400], env_home[420], env_keys[460], env_path[] =
        "PATH=/usr/bin:/bin";
    char *envp[] = { env_path, env_home, env_keys, NULL };
    char *argv[] = { NULL, "models", "check", "--config", cfg, "--prices", prices, "--json",
                     NULL };
    json_error_t jerr;
    const char *k;
    json_t *v, *m;
    size_t i;

    snprintf(cfg, sizeof cfg, "%s/config-%d.json", dir, n);
    snprintf(prices, sizeof prices, "%s/no-prices.json", dir);
    snprintf(home, sizeof home, "%s/home", dir);
    snprintf(env_home, sizeof env_home, "HOME=%s", home);
    snprintf(env_keys, sizeof env_keys, "KEVO_KEY_FILE=%s/no-such-key-file", dir);
    mkdir(home, 0700);
    write_file(prices, "{}\n");
    write_file(cfg, text);
    json_t *c = json_loads(text, 0, &jerr);
    if (!json_is_object(c))
        fail_msg("docs/llm.md config %d: %d: %s\n%s", n, jerr.line, jerr.text, text);
    json_object_foreach(c, k, v)
        if (!config_member(k))
            fail_msg("docs/llm.md config %d: unknown member \"%s\"", n, k);
    size_t n_models = json_array_size(json_object_get(c, "models"));
    assert_true(n_models >= 1);
    int rc = kevo_cli(argv, envp);
    json_t *doc = json_loads(out_text, 0, NULL);
    if (rc != 1 || !doc || json_array_size(json_object_get(doc, "models")) != n_models)
        fail_msg("docs/llm.md config %d: kevo models check exited %d:\n%s%s", n, rc, out_text,
                 err_text);
    json_array_foreach(json_object_get(doc, "models"), i, m) {
        const char *spec = json_string_value(json_object_get(m, "model")), *stage =
            json_string_value(json_object_get(m, "stage"));
        struct kevo_llm_model lm;
        char *why = NULL;
        print_message("[ docs      ] config %d: %s\n", n, spec);
        if (!stage || strcmp(stage, "key") != 0)
            fail_msg("docs/llm.md config %d: %s: %s", n, spec,
                     json_string_value(json_object_get(m, "diagnosis")));
        /* the same spec, parsed here: what it covers, and whose key it would send */
        if (kevo_llm_model_parse(spec, &lm, &why) != KEVO_OK)
            fail_msg("%s: %s", spec, why);
        int what = covers(&lm);
        if (what >= 0)
            covered[what]++;
        /* a third party never gets the OpenAI key by default */
        if (lm.api == KEVO_LLM_OPENAI && strcmp(lm.base_url, "https://api.openai.com/v1") &&
            !strcmp(lm.key_env, "OPENAI_API_KEY"))
            fail_msg("docs/llm.md config %d: %s would send $OPENAI_API_KEY to %s: name its own "
                     "key variable", n, spec, lm.base_url);
        kevo_llm_model_clear(&lm);
        kevo_free(why);
    }
    json_decref(doc);
    json_decref(c);
}

/* Every ```json kevo-config block of docs/llm.md is a config file kevo reads, and they
 * cover every provider the page names. */
static void test_docs_configs(void **state)
{
    int covered[C_COUNT] = { 0 }, n = 0;
    char *doc = slurp(KEVO_SOURCE_DIR "/docs/llm.md", NULL), *p;
    (void)state;
    if (!kevo_bin)
        skip();
    assert_non_null(doc);
    for (p = strstr(doc, "\n```json kevo-config\n"); p; p = strstr(p, "\n```json kevo-config\n")) {
        char *start = p + strlen("\n```json kevo-config\n"), *end = strstr(start, "\n```");
        assert_non_null(end);
        char *text = strndup(start, (size_t)(end - start) + 1);
        check_config(text, n++, covered);
        free(text);
        p = end;
    }
    free(doc);
    print_message("[ docs      ] %d config block(s)\n", n);
    for (int k = 0; k < C_COUNT; k++)
        if (!covered[k])
            fail_msg("docs/llm.md has no kevo-config block for %s", cover_names[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docs_configs),
        cmocka_unit_test(test_opus_budget_thinking),
        cmocka_unit_test(test_run_three),
        cmocka_unit_test(test_runs_tokens_per_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/*
 * test_llm - the LLM client (src/llm.c) against a fake provider: real HTTP on loopback.
 *
 * The fake is a thread listening on 127.0.0.1:0 that answers each connection from a
 * script (request i gets step i, the last step repeats): a status, extra headers and a
 * body, a 10 MB body, an echo of the request, a delay, or silence. It records the last
 * request and how many requests it was answering at once. Every reply's error and every
 * log line is kept; the last test checks that the key appears in none of them.
 * Timeouts are small: the whole program runs in about 15 s (7 of them waiting for
 * curl's stall detection).
 *
 * Conformance: tests/fixtures/llm/ holds request and response bodies as the providers
 * document them (README.md there lists them). The fake serves the responses (reasoning
 * usage, thinking blocks, cut replies, <think> in content, the 400s that refuse a
 * parameter), and each request the client sends is held to its family's fixture: OpenAI's
 * own URL gets max_completion_tokens and no temperature, an OpenAI-compatible server
 * max_tokens, Anthropic max_tokens, no temperature, and thinking when set.
 */
#include "testutil.h"

#include "ctl/llm.h"
#include "ctl/llm_int.h"
#include "base/clock.h"
#include "base/mem.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SECRET "sk-test-S3CRET-0123456789abcdefXYZ"

/* ---- what the client said: every error and log line, scanned for the key at the end ---- */

static pthread_mutex_t notes_mu = PTHREAD_MUTEX_INITIALIZER;
static char *notes[1024];
static int n_notes;

static void note(const char *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&notes_mu);
    if (n_notes < (int)(sizeof notes / sizeof notes[0]))
        notes[n_notes++] = strdup(s);
    pthread_mutex_unlock(&notes_mu);
}

static void on_log(enum kevo_log_level lvl, const char *msg, void *user)
{
    note(msg);
}


#include "fake_provider.h"

/* ---- client helpers ---- */

static const char openai_ok[] =
    "{\"id\":\"c1\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
    "\"content\":\"hello kernel\"},\"finish_reason\":\"stop\"}],"
    "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3}}";
static const char anthropic_ok[] =
    "{\"id\":\"m1\",\"type\":\"message\",\"content\":[{\"type\":\"text\",\"text\":\"hello \"},"
    "{\"type\":\"thinking\",\"thinking\":\"hmm\"},{\"type\":\"text\",\"text\":\"kernel\"}],"
    "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":12,\"output_tokens\":3}}";

static struct kevo_llm_limits small_limits(void)
{
    struct kevo_llm_limits l;
    kevo_llm_limits_default(&l);
    l.connect_timeout_s = 1;
    l.total_timeout_s = 5;
    l.max_attempts = 3;
    l.max_wait_s = 2;
    l.backoff_s = 0.05;
    l.max_reply_bytes = (size_t)1 << 20;
    return l;
}

static struct kevo_llm *client(const struct kevo_llm_limits *l, int max_concurrent)
{
    struct kevo_llm *c = NULL;
    assert_int_equal(kevo_llm_new(max_concurrent, l, &c), KEVO_OK);
    assert_non_null(c);
    return c;
}

/* The model "test-model" at the fake's port, with settings ("?..." or "" for none). */
static void model_with(struct kevo_llm_model *m, enum kevo_llm_api api, int port,
                       const char *settings)
{
    char spec[512];
    char *msg = NULL;
    snprintf(spec, sizeof spec, "%s:test-model@http://127.0.0.1:%d/v1/%s",
             api == KEVO_LLM_OPENAI ? "openai" : "anthropic", port, settings);
    assert_int_equal(kevo_llm_model_parse(spec, m, &msg), KEVO_OK);
    assert_null(msg);
}

static void model_at(struct kevo_llm_model *m, enum kevo_llm_api api, int port)
{
    model_with(m, api, port, "");
}

static const struct kevo_llm_req req_default = {
    .system = "You write CUDA kernels.", .prompt = "Make it faster.",
};

/* One call of model m; its error and text go to the notes. */
static void call_model(struct kevo_llm *c, const struct kevo_llm_model *m,
                       const struct kevo_llm_req *r, struct kevo_llm_reply *out)
{
    assert_int_equal(kevo_llm_complete(c, m, r ? r : &req_default, out), KEVO_OK);
    note(out->error);
    note(out->text);
    note(out->adapted);
}

/* One call of the model at the fake, with settings. */
static void call_with(struct kevo_llm *c, enum kevo_llm_api api, const struct fake *f,
                      const char *settings, const struct kevo_llm_req *r,
                      struct kevo_llm_reply *out)
{
    struct kevo_llm_model m;
    model_with(&m, api, f->port, settings);
    call_model(c, &m, r, out);
    kevo_llm_model_clear(&m);
}

static void call(struct kevo_llm *c, enum kevo_llm_api api, const struct fake *f,
                 const struct kevo_llm_req *r, struct kevo_llm_reply *out)
{
    call_with(c, api, f, "", r, out);
}

/* ---- the fixtures (tests/fixtures/llm/) ---- */

static char *fixture_texts[64];
static int n_fixture_texts;

/* The text of fixture name, kept until the program ends (a step's body borrows it). */
static const char *fixture(const char *name)
{
    char path[512];
    FILE *fp;
    long n;
    char *t;

    snprintf(path, sizeof path, "%s/tests/fixtures/llm/%s", KEVO_SOURCE_DIR, name);
    fp = fopen(path, "rb");
    if (!fp)
        fail_msg("fixture %s: %s", path, strerror(errno));
    fseek(fp, 0, SEEK_END);
    n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    t = calloc(1, (size_t)n + 1);
    assert_non_null(t);
    assert_int_equal(fread(t, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    assert_true(n_fixture_texts < (int)(sizeof fixture_texts / sizeof fixture_texts[0]));
    fixture_texts[n_fixture_texts++] = t;
    return t;
}

/* The request body got is, as JSON, exactly fixture name: the same members and values. */
static void assert_body(const char *got, const char *name)
{
    json_t *g = json_loads(got, 0, NULL), *want = json_loads(fixture(name), 0, NULL);
    assert_non_null(want);
    if (!g || !json_equal(g, want))
        fail_msg("request body differs from %s:\n  sent: %s\n  want: %s", name, got,
                 fixture(name));
    json_decref(g);
    json_decref(want);
}

/* Run steps against a fresh fake with limits l; reply in *out. */
static void run_steps(enum kevo_llm_api api, const struct step *steps, int n,
                      const struct kevo_llm_limits *l, struct kevo_llm_reply *out)
{
    struct fake *f = fake_start(steps, n);
    struct kevo_llm_limits def = small_limits();
    struct kevo_llm *c = client(l ? l : &def, 2);
    call(c, api, f, NULL, out);
    kevo_llm_free(c);
    fake_stop(f);
}

/* The JSON body of the recorded request. */
static json_t *req_body(const struct fake *f)
{
    const char *b = strstr(f->last, "\r\n\r\n");
    assert_non_null(b);
    json_t *j = json_loads(b + 4, 0, NULL);
    assert_non_null(j);
    return j;
}

static const char *jstr(json_t *o, const char *path0, const char *path1)
{
    json_t *v = json_object_get(o, path0);
    if (path1)
        v = json_object_get(v, path1);
    return json_string_value(v);
}

/* ---- success: text, tokens and what the server received ---- */

static void test_openai_ok(void **state)
{
    struct step s[] = { { 200, NULL, openai_ok, 0, 0, 0 } };
    struct fake *f = fake_start(s, 1);
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm *c = client(&l, 2);
    struct kevo_llm_reply r;

    call(c, KEVO_LLM_OPENAI, f, NULL, &r);
    assert_string_equal(r.status, "ok");
    assert_string_equal(r.text, "hello kernel");
    assert_int_equal(r.tokens_in, 12);
    assert_int_equal(r.tokens_out, 3);
    assert_int_equal(r.http_status, 200);
    assert_int_equal(r.attempts, 1);
    assert_null(r.error);
    assert_true(r.latency_s > 0 && r.latency_s < 2);

    assert_non_null(strstr(f->last, "POST /v1/chat/completions HTTP/1.1\r\n"));
    assert_non_null(strstr(f->last, "\r\nAuthorization: Bearer " SECRET "\r\n"));
    assert_non_null(strstr(f->last, "\r\nContent-Type: application/json\r\n"));
    assert_null(strcasestr(f->last, "x-api-key"));
    /* an OpenAI-compatible server, default settings: max_tokens, no temperature */
    assert_body(fake_body(f, 0), "openai_compat_request.json");
    kevo_llm_reply_clear(&r);

    /* every setting: the output limit, temperature, reasoning_effort, extra's members */
    call_with(c, KEVO_LLM_OPENAI, f, "?max_output=4096&temperature=0.2&reasoning_effort=high"
              "&extra={\"top_p\":0.95,\"seed\":7}", NULL, &r);
    assert_string_equal(r.status, "ok");
    assert_body(fake_body(f, 1), "openai_settings_request.json");
    kevo_llm_reply_clear(&r);

    /* no system prompt: no system message */
    struct kevo_llm_req bare = { NULL, "just this" };
    call(c, KEVO_LLM_OPENAI, f, &bare, &r);
    assert_string_equal(r.status, "ok");
    json_t *b = req_body(f);
    assert_int_equal(json_array_size(json_object_get(b, "messages")), 1);
    assert_string_equal(jstr(json_array_get(json_object_get(b, "messages"), 0), "role", NULL),
                        "user");
    assert_null(json_object_get(b, "temperature"));
    json_decref(b);
    kevo_llm_reply_clear(&r);
    kevo_llm_free(c);
    fake_stop(f);
}

static void test_anthropic_ok(void **state)
{
    struct step s[] = { { 200, NULL, anthropic_ok, 0, 0, 0 } };
    struct fake *f = fake_start(s, 1);
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm *c = client(&l, 2);
    struct kevo_llm_reply r;

    call(c, KEVO_LLM_ANTHROPIC, f, NULL, &r);
    assert_string_equal(r.status, "ok");
    assert_string_equal(r.text, "hello kernel");    /* text parts joined, thinking left out */
    assert_int_equal(r.tokens_in, 12);
    assert_int_equal(r.tokens_out, 3);
    assert_int_equal(r.attempts, 1);

    assert_non_null(strstr(f->last, "POST /v1/messages HTTP/1.1\r\n"));
    assert_non_null(strstr(f->last, "\r\nx-api-key: " SECRET "\r\n"));
    assert_non_null(strstr(f->last, "\r\nanthropic-version: 2023-06-01\r\n"));
    assert_null(strcasestr(f->last, "Authorization:"));
    /* default settings: max_tokens (the API requires it), no temperature */
    assert_body(fake_body(f, 0), "anthropic_request.json");
    kevo_llm_reply_clear(&r);

    /* extended thinking: its budget below the output limit */
    call_with(c, KEVO_LLM_ANTHROPIC, f, "?thinking=16000", NULL, &r);
    assert_body(fake_body(f, 1), "anthropic_thinking_request.json");
    kevo_llm_reply_clear(&r);

    /* a temperature when set; no system prompt: no "system" */
    struct kevo_llm_req bare = { NULL, "just this" };
    call_with(c, KEVO_LLM_ANTHROPIC, f, "?temperature=0&max_output=100", &bare, &r);
    json_t *b = req_body(f);
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 100);
    assert_true(json_is_real(json_object_get(b, "temperature")));
    assert_true(json_real_value(json_object_get(b, "temperature")) == 0.0);
    assert_null(json_object_get(b, "system"));
    json_decref(b);
    kevo_llm_reply_clear(&r);
    kevo_llm_free(c);
    fake_stop(f);
}

/* ---- retries ---- */

static void check_retry_after(enum kevo_llm_api api)
{
    struct step s[] = {
        { 429, "Retry-After: 1\r\n", "{\"error\":{\"message\":\"slow down\"}}", 0, 0, 0 },
        { 200, NULL, api == KEVO_LLM_OPENAI ? openai_ok : anthropic_ok, 0, 0, 0 },
    };
    struct kevo_llm_reply r;

    run_steps(api, s, 2, NULL, &r);
    assert_string_equal(r.status, "ok");
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.http_status, 200);
    assert_true(r.latency_s >= 1.0);       /* Retry-After, not the 0.05 s backoff */
    assert_true(r.latency_s < 2.5);
    kevo_llm_reply_clear(&r);
}

static void test_retry_after(void **state)
{
    check_retry_after(KEVO_LLM_OPENAI);
    check_retry_after(KEVO_LLM_ANTHROPIC);
}

/* A Retry-After longer than the wait budget is cut to what is left of it. */
static void test_retry_after_capped(void **state)
{
    struct step s[] = {
        { 429, "Retry-After: 30\r\n", "", 0, 0, 0 },
        { 200, NULL, openai_ok, 0, 0, 0 },
    };
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm_reply r;

    l.max_wait_s = 0.3;
    run_steps(KEVO_LLM_OPENAI, s, 2, &l, &r);
    assert_string_equal(r.status, "ok");
    assert_int_equal(r.attempts, 2);
    assert_true(r.latency_s >= 0.3 && r.latency_s < 1.5);
    kevo_llm_reply_clear(&r);
}

static void test_500_then_ok(void **state)
{
    for (int api = 0; api < 2; api++) {
        struct step s[] = {
            { 500, NULL, "oops", 0, 0, 0 },
            { 200, NULL, api == KEVO_LLM_OPENAI ? openai_ok : anthropic_ok, 0, 0, 0 },
        };
        struct kevo_llm_reply r;
        run_steps((enum kevo_llm_api)api, s, 2, NULL, &r);
        assert_string_equal(r.status, "ok");
        assert_string_equal(r.text, "hello kernel");
        assert_int_equal(r.attempts, 2);
        assert_null(r.error);
        kevo_llm_reply_clear(&r);
    }
}

static void test_500_forever(void **state)
{
    for (int api = 0; api < 2; api++) {
        struct step s[] = { { 503, NULL, "{\"error\":{\"message\":\"overloaded\"}}", 0, 0, 0 } };
        struct kevo_llm_limits l = small_limits();
        struct kevo_llm_reply r;

        l.max_attempts = 50;
        l.max_wait_s = 0.5;
        l.backoff_s = 0.1;
        run_steps((enum kevo_llm_api)api, s, 1, &l, &r);
        assert_string_equal(r.status, "http_503");
        assert_int_equal(r.http_status, 503);
        assert_null(r.text);
        assert_true(r.attempts >= 2 && r.attempts < 50);
        assert_true(r.latency_s >= 0.5 && r.latency_s < 0.5 + 1.0);
        assert_non_null(strstr(r.error, "gave up after"));
        assert_non_null(strstr(r.error, "overloaded"));   /* the API's own message */
        kevo_llm_reply_clear(&r);
    }
}

/* A 4xx other than 429 is final; the API's message is kept, the key it echoes is not. */
static void test_401_not_retried(void **state)
{
    struct step s[] = {
        { 401, NULL, "{\"error\":{\"message\":\"Incorrect API key provided: " SECRET "\"}}",
          0, 0, 0 },
    };
    struct kevo_llm_reply r;

    run_steps(KEVO_LLM_OPENAI, s, 1, NULL, &r);
    assert_string_equal(r.status, "http_401");
    assert_int_equal(r.attempts, 1);
    assert_non_null(strstr(r.error, "Incorrect API key provided: [key]"));
    assert_null(strstr(r.error, SECRET));
    kevo_llm_reply_clear(&r);
}

/* ---- stalls and network failures ---- */

static void test_stall(void **state)
{
    struct step s[] = { { 0, NULL, NULL, 0, 0, 0 } };
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm_reply r;

    /* total timeout, retried once */
    l.total_timeout_s = 1;
    l.max_attempts = 2;
    run_steps(KEVO_LLM_OPENAI, s, 1, &l, &r);
    assert_string_equal(r.status, "timeout");
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.http_status, 0);
    assert_true(r.latency_s >= 2.0 && r.latency_s < 2.0 + 1.5);
    kevo_llm_reply_clear(&r);

    /* the stall limit ends it long before the total timeout (curl averages the speed
     * over its last 5 s, and the request's bytes count: about 1 + 5 s here) */
    l.max_attempts = 1;
    l.total_timeout_s = 30;
    l.stall_timeout_s = 1;
    run_steps(KEVO_LLM_ANTHROPIC, s, 1, &l, &r);
    assert_string_equal(r.status, "timeout");
    assert_int_equal(r.attempts, 1);
    assert_true(r.latency_s >= 1.0 && r.latency_s < 1.0 + 5.0 + 2.5);
    kevo_llm_reply_clear(&r);
}

static void test_connection_refused(void **state)
{
    int port;
    int fd = listen_any(&port);      /* bound, never listening, then closed: refused */
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm *c = client(&l, 1);
    struct kevo_llm_model m;
    struct kevo_llm_reply r;

    close(fd);
    model_at(&m, KEVO_LLM_ANTHROPIC, port);
    assert_int_equal(kevo_llm_complete(c, &m, &req_default, &r), KEVO_OK);
    note(r.error);
    assert_string_equal(r.status, "network");
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.http_status, 0);
    assert_null(r.text);
    assert_non_null(r.error);
    assert_true(r.latency_s < 2);
    kevo_llm_reply_clear(&r);
    kevo_llm_model_clear(&m);
    kevo_llm_free(c);
}

/* ---- replies that are not the API's ---- */

static void test_truncated_json(void **state)
{
    for (int api = 0; api < 2; api++) {
        struct step s[] = { { 200, NULL, "{\"choices\":[{\"message\":{\"content\":\"hel", 0, 0,
                              0 } };
        struct kevo_llm_reply r;
        run_steps((enum kevo_llm_api)api, s, 1, NULL, &r);
        assert_string_equal(r.status, "bad_reply");
        assert_int_equal(r.attempts, 1);
        assert_int_equal(r.http_status, 200);
        assert_null(r.text);
        assert_non_null(strstr(r.error, "not JSON"));
        assert_non_null(strstr(r.error, "{\"choices\":[{\"message\":{\"content\":\"hel"));
        kevo_llm_reply_clear(&r);
    }
}

static void test_no_content(void **state)
{
    static const struct { enum kevo_llm_api api; const char *body, *status, *why; } cases[] = {
        { KEVO_LLM_OPENAI, "{\"id\":\"x\"}", "bad_reply", "no content" },
        { KEVO_LLM_OPENAI, "{\"choices\":[]}", "bad_reply", "no content" },
        { KEVO_LLM_OPENAI, "[1,2]", "bad_reply", "no content" },
        { KEVO_LLM_OPENAI, "{\"choices\":[{\"message\":{\"content\":null,"
          "\"refusal\":\"I cannot help\"}}]}", "refused", "I cannot help" },
        { KEVO_LLM_OPENAI, "{\"choices\":[{\"message\":{\"content\":\"\"},"
          "\"finish_reason\":\"length\"}]}", "truncated", "output limit (length)" },
        { KEVO_LLM_OPENAI, "{\"choices\":[{\"message\":{\"content\":\"\"},"
          "\"finish_reason\":\"stop\"}]}", "refused", "stop" },
        { KEVO_LLM_ANTHROPIC, "{\"id\":\"x\"}", "bad_reply", "no content" },
        { KEVO_LLM_ANTHROPIC, "{\"content\":[],\"stop_reason\":\"refusal\","
          "\"usage\":{\"input_tokens\":5}}", "refused", "refusal" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct step s[] = { { 200, NULL, cases[i].body, 0, 0, 0 } };
        struct kevo_llm_reply r;
        run_steps(cases[i].api, s, 1, NULL, &r);
        assert_string_equal(r.status, cases[i].status);
        assert_null(r.text);
        assert_non_null(strstr(r.error, cases[i].why));
        assert_int_equal(r.attempts, 1);
        kevo_llm_reply_clear(&r);
    }
}

/* The excerpt in a bad_reply error: printable ASCII only, at most 200 characters. */
static void test_excerpt_sanitised(void **state)
{
    static char body[1200];
    struct step s[] = { { 200, NULL, body, 0, 0, 0 } };
    struct kevo_llm_reply r;

    for (size_t i = 0; i < sizeof body - 1; i++)
        body[i] = (char)(i % 7 == 0 ? '\n' : i % 11 == 0 ? '\033' : i % 13 == 0 ? 0xc3 : 'a');
    body[sizeof body - 1] = '\0';
    run_steps(KEVO_LLM_OPENAI, s, 1, NULL, &r);
    assert_string_equal(r.status, "bad_reply");
    for (const char *p = r.error; *p; p++)
        assert_true(*p >= 0x20 && *p < 0x7f);
    const char *ex = strstr(r.error, "reply: '");
    assert_non_null(ex);
    ex += 8;
    const char *end = strrchr(ex, '\'');
    assert_non_null(end);
    assert_true(end - ex <= 200);
    kevo_llm_reply_clear(&r);
}

/* A server (or proxy) that echoes the request, key header and all, in a bad reply. */
/* Providers quote part of a refused key (OpenAI: "sk-test-****...XYZ"): no run of 6 or
 * more of its characters survives. */
static void test_partly_echoed_key_redacted(void **state)
{
    struct step s[] = {
        { 401, NULL, "{\"error\":{\"message\":\"Incorrect API key provided: sk-test-S3C"
                     "*************def"
                     "XYZ. You can find your API key at https://platform.openai.com\"}}",
          0, 0, 0 },
    };
    struct kevo_llm_reply r;

    (void)state;
    run_steps(KEVO_LLM_OPENAI, s, 1, NULL, &r);
    assert_string_equal(r.status, "http_401");
    assert_null(strstr(r.error, "sk-test-S3C"));
    assert_non_null(strstr(r.error, "[key]"));
    assert_non_null(strstr(r.error, "You can find your API key"));   /* the rest is kept */
    kevo_llm_reply_clear(&r);
}

static void test_echoed_key_redacted(void **state)
{
    for (int api = 0; api < 2; api++) {
        struct step s[] = { { 200, NULL, NULL, 0, 1, 0 } };
        struct kevo_llm_reply r;
        run_steps((enum kevo_llm_api)api, s, 1, NULL, &r);
        assert_string_equal(r.status, "bad_reply");
        assert_null(strstr(r.error, SECRET));
        assert_null(strstr(r.error, "S3CRET"));   /* not even a piece of it */
        kevo_llm_reply_clear(&r);
    }
}

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void test_too_large(void **state)
{
    /* libcurl's first start (TLS library and all) is not part of what is measured */
    kevo_llm_free(client(NULL, 1));
    for (int api = 0; api < 2; api++) {
        struct step s[] = { { 200, NULL, NULL, (size_t)10 << 20, 0, 0 } };
        struct kevo_llm_reply r;
        long rss0 = max_rss_kb();
        run_steps((enum kevo_llm_api)api, s, 1, NULL, &r);   /* cap: 1 MiB */
        assert_string_equal(r.status, "too_large");
        assert_int_equal(r.attempts, 1);
        assert_null(r.text);
        assert_non_null(strstr(r.error, "larger than 1048576 bytes"));
        /* the 10 MB were never held: the peak grew by well under their size (not under
         * ASan, whose quarantine keeps freed blocks) */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
        assert_true(max_rss_kb() - rss0 < 5 * 1024);
#else
        (void)rss0;
#endif
        kevo_llm_reply_clear(&r);
    }
}

/* ---- concurrency ---- */

struct worker_arg {
    struct kevo_llm *c;
    const struct fake *f;
    struct kevo_llm_reply r;
};

static void *worker(void *p)
{
    struct worker_arg *w = p;
    struct kevo_llm_model m;
    model_at(&m, KEVO_LLM_OPENAI, w->f->port);
    if (kevo_llm_complete(w->c, &m, &req_default, &w->r) != KEVO_OK)
        snprintf(w->r.status, sizeof w->r.status, "error");
    kevo_llm_model_clear(&m);
    return NULL;
}

static void test_concurrency_limit(void **state)
{
    struct step s[] = { { 200, NULL, openai_ok, 0, 0, 0.3 } };
    struct fake *f = fake_start(s, 1);
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm *c = client(&l, 2);
    struct worker_arg w[6];
    pthread_t t[6];
    double t0 = kevo_now();

    for (int i = 0; i < 6; i++) {
        w[i].c = c;
        w[i].f = f;
        assert_int_equal(pthread_create(&t[i], NULL, worker, &w[i]), 0);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 6; i++) {
        assert_string_equal(w[i].r.status, "ok");
        assert_int_equal(w[i].r.attempts, 1);
        kevo_llm_reply_clear(&w[i].r);
    }
    assert_int_equal(f->n_req, 6);
    assert_int_equal(f->max_active, 2);
    assert_true(kevo_now() - t0 >= 0.9 - 0.05);   /* three rounds of two */
    kevo_llm_free(c);
    fake_stop(f);
}

/* ---- conformance: what each family is sent, and reads back ---- */

/* OpenAI's own URL: max_completion_tokens, no temperature unless set (the body is built
 * without a request: the fake cannot stand at api.openai.com). */
static void test_openai_native_body(void **state)
{
    struct kevo_llm_model m;
    json_t *b;
    char *text;

    assert_int_equal(kevo_llm_model_parse("openai:gpt-5", &m, NULL), KEVO_OK);
    b = kevo_llm_body(&m, &req_default);
    assert_non_null(b);
    text = json_dumps(b, JSON_COMPACT);
    assert_body(text, "openai_native_request.json");
    free(text);
    json_decref(b);
    kevo_llm_model_clear(&m);

    assert_int_equal(kevo_llm_model_parse("openai:o3?temperature=1&reasoning_effort=low"
                                          "&max_output=64000", &m, NULL), KEVO_OK);
    b = kevo_llm_body(&m, &req_default);
    assert_int_equal(json_integer_value(json_object_get(b, "max_completion_tokens")), 64000);
    assert_null(json_object_get(b, "max_tokens"));
    assert_true(json_real_value(json_object_get(b, "temperature")) == 1.0);
    assert_string_equal(jstr(b, "reasoning_effort", NULL), "low");
    json_decref(b);
    kevo_llm_model_clear(&m);

    /* extra's members go in last, over kevo's own */
    assert_int_equal(kevo_llm_model_parse("openai:x@http://h/v1?extra=%7B%22max_tokens%22%3A5"
                                          "%2C%22stop%22%3A%5B%22a%26b%22%5D%7D", &m, NULL),
                     KEVO_OK);
    b = kevo_llm_body(&m, &req_default);
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 5);
    assert_string_equal(json_string_value(json_array_get(json_object_get(b, "stop"), 0)), "a&b");
    json_decref(b);
    kevo_llm_model_clear(&m);
}

/* A reasoning model's usage: cached input, reasoning output. */
static void test_usage_openai_reasoning(void **state)
{
    struct step s[] = { { 200, NULL, fixture("openai_reasoning_response.json"), 0, 0, 0 } };
    struct kevo_llm_reply r;

    run_steps(KEVO_LLM_OPENAI, s, 1, NULL, &r);
    assert_string_equal(r.status, "ok");
    assert_non_null(strstr(r.text, "grid-stride"));
    assert_int_equal(r.tokens_in, 1200);
    assert_int_equal(r.tokens_cached_in, 1024);
    assert_int_equal(r.tokens_out, 900);
    assert_int_equal(r.tokens_reasoning, 640);
    assert_null(r.adapted);
    kevo_llm_reply_clear(&r);
}

/* Anthropic: thinking and redacted_thinking blocks are not the answer; the input counts
 * what was read from and written to the cache. */
static void test_anthropic_thinking_blocks(void **state)
{
    struct step s[] = { { 200, NULL, fixture("anthropic_thinking_response.json"), 0, 0, 0 } };
    struct kevo_llm_reply r;

    run_steps(KEVO_LLM_ANTHROPIC, s, 1, NULL, &r);
    assert_string_equal(r.status, "ok");
    assert_true(strncmp(r.text, "Vectorised:", 11) == 0);
    assert_null(strstr(r.text, "draft"));
    assert_null(strstr(r.text, "EmwK"));
    assert_int_equal(r.tokens_in, 150 + 50 + 1000);
    assert_int_equal(r.tokens_cached_in, 1000);
    assert_int_equal(r.tokens_out, 700);
    assert_int_equal(r.tokens_reasoning, 0);    /* Anthropic does not say */
    kevo_llm_reply_clear(&r);
}

/* vLLM's reasoning parser: reasoning_content is never the answer. */
static void test_vllm_reasoning_content(void **state)
{
    struct step s[] = { { 200, NULL, fixture("vllm_reasoning_response.json"), 0, 0, 0 } };
    struct kevo_llm_reply r;

    run_steps(KEVO_LLM_OPENAI, s, 1, NULL, &r);
    assert_string_equal(r.status, "ok");
    assert_non_null(strstr(r.text, "Fixed:"));
    assert_null(strstr(r.text, "wrong"));
    assert_int_equal(r.tokens_in, 210);
    assert_int_equal(r.tokens_cached_in, 0);      /* prompt_tokens_details: null */
    assert_int_equal(r.tokens_out, 1200);
    kevo_llm_reply_clear(&r);
}

/* <think> in content (no reasoning parser): closed, opened in the prompt, never closed. */
static void test_think_stripped(void **state)
{
    static const struct { const char *body, *status, *has, *lacks; } cases[] = {
        { NULL, "ok", "void k(float *x, int n)", "draft" },   /* llamacpp_think_response */
        { NULL, "ok", "Here it is:", "draft" },              /* llamacpp_open_think_response */
        { "{\"choices\":[{\"message\":{\"content\":\"<think>\\nsketch ```cuda\\n__global__ void "
          "draft() {}\\n``` still going\"},\"finish_reason\":\"length\"}],"
          "\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":64}}", "truncated", NULL, NULL },
        { "{\"choices\":[{\"message\":{\"content\":\"  <think>a</think>\\n<think></think>\\n"
          "answer\"},\"finish_reason\":\"stop\"}]}", "ok", "answer", "think" },
        { "{\"choices\":[{\"message\":{\"content\":\"<think>only thoughts, never closed\"},"
          "\"finish_reason\":\"stop\"}]}", "refused", NULL, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *body = cases[i].body ? cases[i].body
                           : fixture(i == 0 ? "llamacpp_think_response.json"
                                            : "llamacpp_open_think_response.json");
        struct step s[] = { { 200, NULL, body, 0, 0, 0 } };
        struct kevo_llm_reply r;
        run_steps(KEVO_LLM_OPENAI, s, 1, NULL, &r);
        if (strcmp(r.status, cases[i].status) != 0)
            fail_msg("case %zu: status %s, want %s", i, r.status, cases[i].status);
        if (cases[i].has)
            assert_non_null(strstr(r.text, cases[i].has));
        if (cases[i].lacks)
            assert_null(strstr(r.text, cases[i].lacks));
        if (i == 0) {
            assert_int_equal(r.tokens_cached_in, 64);
            assert_null(strstr(r.text, "</think>"));
        }
        kevo_llm_reply_clear(&r);
    }
}

/* Cut by the output limit: "truncated" with the tokens spent, no text, whatever it wrote. */
static void test_truncated(void **state)
{
    static const struct {
        enum kevo_llm_api api;
        const char *file, *stop;
        int64_t out, reasoning;
    } cases[] = {
        { KEVO_LLM_OPENAI, "openai_length_response.json", "length", 32000, 32000 },
        { KEVO_LLM_ANTHROPIC, "anthropic_max_tokens_response.json", "max_tokens", 32000, 0 },
        { KEVO_LLM_OPENAI, "ollama_length_response.json", "length", 32000, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct step s[] = { { 200, NULL, fixture(cases[i].file), 0, 0, 0 } };
        struct kevo_llm_reply r;
        run_steps(cases[i].api, s, 1, NULL, &r);
        assert_string_equal(r.status, "truncated");
        assert_null(r.text);
        assert_int_equal(r.attempts, 1);          /* never asked again unchanged */
        assert_int_equal(r.tokens_out, cases[i].out);
        assert_int_equal(r.tokens_reasoning, cases[i].reasoning);
        assert_true(r.tokens_in > 0);
        assert_non_null(strstr(r.error, cases[i].stop));
        assert_non_null(strstr(r.error, "32000 output tokens"));
        assert_non_null(strstr(r.error, "max_output"));
        kevo_llm_reply_clear(&r);
    }
}

/* ---- self-healing: a 400 that refuses a parameter ---- */

/* A fresh fake and client; the model's calls of script s with settings. Two calls: the
 * first learns, the second (same client) must send the healed request at once. */
struct heal {
    struct fake *f;
    struct kevo_llm *c;
    struct kevo_llm_reply r1, r2;
};

static void heal_run(struct heal *h, enum kevo_llm_api api, const struct step *s, int n,
                     const char *settings)
{
    struct kevo_llm_limits l = small_limits();
    h->f = fake_start(s, n);
    h->c = client(&l, 2);
    call_with(h->c, api, h->f, settings, NULL, &h->r1);
    call_with(h->c, api, h->f, settings, NULL, &h->r2);
}

static void heal_done(struct heal *h)
{
    kevo_llm_reply_clear(&h->r1);
    kevo_llm_reply_clear(&h->r2);
    kevo_llm_free(h->c);
    fake_stop(h->f);
}

/* Each 400 wording healed with exactly one more request, remembered for the next call
 * (but a context-length refusal, which is about its request's prompt). */
static void test_heal_one_retry(void **state)
{
    static const struct {
        enum kevo_llm_api api;
        const char *settings, *refusal, *member, *adapted, *healed_member;
        json_int_t healed_value;
    } cases[] = {
        { KEVO_LLM_OPENAI, "", "openai_400_max_tokens.json", "max_tokens",
          "max_tokens sent as max_completion_tokens", "max_completion_tokens", 32000 },
        { KEVO_LLM_OPENAI, "?temperature=0.7", "openai_400_temperature.json", "temperature",
          "temperature left out", "max_tokens", 32000 },
        { KEVO_LLM_OPENAI, "", "openai_400_max_output.json", "max_tokens",
          "max_tokens lowered to 16384", "max_tokens", 16384 },
        { KEVO_LLM_OPENAI, "", "vllm_400_context.json", "max_tokens",
          "max_tokens left out", NULL, 0 },
        { KEVO_LLM_ANTHROPIC, "?temperature=0.7", "anthropic_400_temperature.json",
          "temperature", "temperature left out", "max_tokens", 32000 },
        { KEVO_LLM_ANTHROPIC, "", "anthropic_400_max_tokens.json", "max_tokens",
          "max_tokens lowered to 8192", "max_tokens", 8192 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *ok = cases[i].api == KEVO_LLM_OPENAI ? openai_ok : anthropic_ok;
        struct step s[] = { { 400, NULL, fixture(cases[i].refusal), 0, 0, 0 },
                            { 200, NULL, ok, 0, 0, 0 } };
        struct heal h;
        json_t *b0, *b1, *b2;

        heal_run(&h, cases[i].api, s, 2, cases[i].settings);
        if (strcmp(h.r1.status, "ok") != 0)
            fail_msg("case %zu (%s): %s: %s", i, cases[i].refusal, h.r1.status,
                     h.r1.error ? h.r1.error : "");
        assert_int_equal(h.r1.attempts, 2);
        assert_non_null(h.r1.adapted);
        assert_string_equal(h.r1.adapted, cases[i].adapted);
        /* remembered: the next call sends the healed request at once, and says nothing */
        assert_string_equal(h.r2.status, "ok");
        assert_int_equal(h.r2.attempts, 1);
        assert_null(h.r2.adapted);
        assert_int_equal(h.f->n_req, 3);
        b0 = json_loads(fake_body(h.f, 0), 0, NULL);
        b1 = json_loads(fake_body(h.f, 1), 0, NULL);
        b2 = json_loads(fake_body(h.f, 2), 0, NULL);
        assert_non_null(json_object_get(b0, cases[i].member));
        if (strcmp(cases[i].member, cases[i].healed_member ? cases[i].healed_member : "") != 0)
            assert_null(json_object_get(b1, cases[i].member));
        if (cases[i].healed_member)
            assert_int_equal(json_integer_value(json_object_get(b1, cases[i].healed_member)),
                             cases[i].healed_value);
        else
            assert_null(json_object_get(b1, "max_completion_tokens"));
        if (strcmp(cases[i].refusal, "vllm_400_context.json") == 0)
            /* a fact about that prompt, not the model: the next call keeps its limit */
            assert_non_null(json_object_get(b2, cases[i].member));
        else
            assert_true(json_equal(b1, b2));
        json_decref(b0);
        json_decref(b1);
        json_decref(b2);
        heal_done(&h);
    }
}

/* The legacy settings at an OpenAI reasoning model: both 400s, one after the other, each
 * healed once; the request ends as the fixture says. */
static void test_heal_both(void **state)
{
    struct step s[] = { { 400, NULL, fixture("openai_400_max_tokens.json"), 0, 0, 0 },
                        { 400, NULL, fixture("openai_400_temperature.json"), 0, 0, 0 },
                        { 200, NULL, openai_ok, 0, 0, 0 } };
    struct heal h;

    heal_run(&h, KEVO_LLM_OPENAI, s, 3, "?temperature=0.7&max_output=8192");
    assert_string_equal(h.r1.status, "ok");
    assert_int_equal(h.r1.attempts, 3);
    assert_string_equal(h.r1.adapted,
                        "max_tokens sent as max_completion_tokens; temperature left out");
    assert_body(fake_body(h.f, 2), "openai_healed_request.json");
    assert_int_equal(h.r2.attempts, 1);
    assert_null(h.r2.adapted);
    assert_body(fake_body(h.f, 3), "openai_healed_request.json");
    heal_done(&h);
}

/* A model that still fails is reported with the provider's own words. */
static void test_heal_still_fails(void **state)
{
    static const char other[] = "{\"error\":{\"message\":\"Invalid 'messages[1].content': "
                                "string too long.\",\"type\":\"invalid_request_error\","
                                "\"param\":\"messages[1].content\"}}";
    struct step healed_then[] = { { 400, NULL, fixture("anthropic_400_temperature.json"), 0, 0,
                                    0 },
                                  { 400, NULL, other, 0, 0, 0 } };
    struct step again[] = { { 400, NULL, fixture("openai_400_temperature.json"), 0, 0, 0 } };
    struct step plain[] = { { 400, NULL, other, 0, 0, 0 } };
    struct kevo_llm_reply r;
    struct heal h;

    /* healed once, then a refusal that names nothing to change: final, its words kept */
    heal_run(&h, KEVO_LLM_ANTHROPIC, healed_then, 2, "?temperature=0.5");
    assert_string_equal(h.r1.status, "http_400");
    assert_int_equal(h.r1.attempts, 2);
    assert_non_null(strstr(h.r1.error, "string too long"));
    assert_non_null(strstr(h.r1.error, "after adapting the request: temperature left out"));
    assert_int_equal(h.r2.attempts, 1);     /* the change is kept all the same */
    assert_null(strstr(fake_body(h.f, 2), "temperature"));
    heal_done(&h);

    /* the same refusal after the change: not healed twice */
    heal_run(&h, KEVO_LLM_OPENAI, again, 1, "?temperature=0.7");
    assert_string_equal(h.r1.status, "http_400");
    assert_int_equal(h.r1.attempts, 2);
    assert_non_null(strstr(h.r1.error, "Only the default (1) value is supported"));
    assert_int_equal(h.r2.attempts, 1);
    heal_done(&h);

    /* a 400 about something else: one attempt, the provider's message */
    run_steps(KEVO_LLM_OPENAI, plain, 1, NULL, &r);
    assert_string_equal(r.status, "http_400");
    assert_int_equal(r.attempts, 1);
    assert_null(r.adapted);
    assert_non_null(strstr(r.error, "Invalid 'messages[1].content': string too long."));
    kevo_llm_reply_clear(&r);
}

/* What is learnt for one model is not applied to another. */
static void test_heal_per_model(void **state)
{
    struct step s[] = { { 400, NULL, fixture("openai_400_temperature.json"), 0, 0, 0 },
                        { 200, NULL, openai_ok, 0, 0, 0 } };
    struct kevo_llm_limits l = small_limits();
    struct fake *f = fake_start(s, 2);
    struct kevo_llm *c = client(&l, 1);
    struct kevo_llm_model a, b;
    struct kevo_llm_reply r;
    char spec[128];

    model_with(&a, KEVO_LLM_OPENAI, f->port, "?temperature=0.7");
    snprintf(spec, sizeof spec, "openai:other@http://127.0.0.1:%d/v1?temperature=0.7", f->port);
    assert_int_equal(kevo_llm_model_parse(spec, &b, NULL), KEVO_OK);
    call_model(c, &a, NULL, &r);
    assert_string_equal(r.adapted, "temperature left out");
    kevo_llm_reply_clear(&r);
    call_model(c, &b, NULL, &r);
    assert_non_null(strstr(fake_body(f, 2), "\"temperature\""));
    kevo_llm_reply_clear(&r);
    kevo_llm_model_clear(&a);
    kevo_llm_model_clear(&b);
    kevo_llm_free(c);
    fake_stop(f);
}

/* ---- model specs ---- */

static void test_spec_good(void **state)
{
    static const struct {
        const char *spec, *name, *base, *key_env;
        enum kevo_llm_api api;
        double weight;
    } cases[] = {
        { "openai:gpt-5", "gpt-5", "https://api.openai.com/v1", "OPENAI_API_KEY",
          KEVO_LLM_OPENAI, 1 },
        { "anthropic:claude-sonnet-4-5*2", "claude-sonnet-4-5", "https://api.anthropic.com/v1",
          "ANTHROPIC_API_KEY", KEVO_LLM_ANTHROPIC, 2 },
        { "openai:llama3@http://localhost:8080/v1/", "llama3", "http://localhost:8080/v1",
          "OPENAI_API_KEY", KEVO_LLM_OPENAI, 1 },
        { "openai:qwen/qwen3-coder@https://openrouter.ai/api/v1#OPENROUTER_API_KEY*0.5",
          "qwen/qwen3-coder", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY",
          KEVO_LLM_OPENAI, 0.5 },
        { "openai:qwen2.5-coder:7b@http://127.0.0.1:11434/v1", "qwen2.5-coder:7b",
          "http://127.0.0.1:11434/v1", "OPENAI_API_KEY", KEVO_LLM_OPENAI, 1 },
        { "anthropic:claude-3@20240229@https://proxy.example/v1", "claude-3@20240229",
          "https://proxy.example/v1", "ANTHROPIC_API_KEY", KEVO_LLM_ANTHROPIC, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kevo_llm_model m;
        char *msg = NULL;
        assert_int_equal(kevo_llm_model_parse(cases[i].spec, &m, &msg), KEVO_OK);
        assert_null(msg);
        assert_int_equal(m.api, cases[i].api);
        assert_string_equal(m.name, cases[i].name);
        assert_string_equal(m.base_url, cases[i].base);
        assert_string_equal(m.key_env, cases[i].key_env);
        assert_true(m.weight == cases[i].weight);
        assert_true(m.price_in == 0 && m.price_out == 0);
        kevo_llm_model_clear(&m);
        kevo_llm_model_clear(&m);       /* twice: harmless */
    }
}

/* Settings after '?': parsed into the model, values %-decoded. */
static void test_spec_settings(void **state)
{
    struct kevo_llm_model m;
    char *msg = NULL;

    assert_int_equal(kevo_llm_model_parse("openai:o3@https://h.example/v1#K*2?max_output=64000"
                                          "&temperature=0.25&reasoning_effort=high"
                                          "&extra={\"top_p\":0.9,\"x\":\"a*b#c@d?e\"}",
                                          &m, &msg), KEVO_OK);
    assert_null(msg);
    assert_string_equal(m.name, "o3");
    assert_string_equal(m.base_url, "https://h.example/v1");
    assert_string_equal(m.key_env, "K");
    assert_true(m.weight == 2);
    assert_int_equal(m.max_output, 64000);
    assert_int_equal(m.has_temperature, 1);
    assert_true(m.temperature == 0.25);
    assert_string_equal(m.reasoning_effort, "high");
    assert_int_equal(m.thinking, 0);
    assert_string_equal(m.extra, "{\"top_p\":0.9,\"x\":\"a*b#c@d?e\"}");
    kevo_llm_model_clear(&m);

    assert_int_equal(kevo_llm_model_parse("anthropic:claude-opus-4-1?thinking=16000"
                                          "&max_output=40000&temperature=1", &m, NULL), KEVO_OK);
    assert_int_equal(m.thinking, 16000);
    assert_int_equal(m.max_output, 40000);
    assert_null(m.reasoning_effort);
    assert_null(m.extra);
    kevo_llm_model_clear(&m);

    /* none given: nothing set (the caller's defaults apply) */
    assert_int_equal(kevo_llm_model_parse("openai:gpt-5", &m, NULL), KEVO_OK);
    assert_int_equal(m.max_output, 0);
    assert_int_equal(m.has_temperature, 0);
    assert_null(m.reasoning_effort);
    kevo_llm_model_clear(&m);

    /* %-escapes: '&' and '%' in a value */
    assert_int_equal(kevo_llm_model_parse("openai:m@http://h/v1?extra=%7B%22s%22:%22a%26b%25%22%7D",
                                          &m, NULL), KEVO_OK);
    assert_string_equal(m.extra, "{\"s\":\"a&b%\"}");
    kevo_llm_model_clear(&m);
}

static void test_spec_bad(void **state)
{
    static const struct { const char *spec, *says; } cases[] = {
        { "", "no ':'" },
        { "gpt-5", "no ':'" },
        { "google:gemini", "unknown provider" },
        { "openai:", "model id is empty" },
        { "openai:gpt 5", "spaces" },
        { "openai:gpt@localhost:8080/v1", "http:// or https://" },
        { "openai:gpt@http://", "no host" },
        { "openai:gpt@http:///v1", "no host" },
        { "openai:gpt*0", "positive number" },
        { "openai:gpt*-1", "positive number" },
        { "openai:gpt*two", "positive number" },
        { "openai:gpt*", "positive number" },
        { "openai:gpt#1KEY", "environment variable" },
        { "openai:gpt#", "environment variable" },
        { "openai:gpt?", "an empty setting" },
        { "openai:gpt?max_output=1&&temperature=1", "an empty setting" },
        { "openai:gpt?max_output", "setting 'max_output' has no '=VALUE'" },
        { "openai:gpt?max_output=0", "setting 'max_output' must be a whole number" },
        { "openai:gpt?max_output=12k", "setting 'max_output' must be a whole number" },
        { "openai:gpt?max_output=99999999", "setting 'max_output' must be a whole number" },
        { "openai:gpt?temperature=hot", "setting 'temperature' must be a number from 0 to 2" },
        { "openai:gpt?temperature=2.5", "setting 'temperature' must be a number from 0 to 2" },
        { "openai:gpt?temperature=nan", "setting 'temperature' must be a number from 0 to 2" },
        { "openai:gpt?reasoning_effort=HIGH", "setting 'reasoning_effort' must be a word" },
        { "openai:gpt?reasoning_effort=", "setting 'reasoning_effort' must be a word" },
        { "anthropic:c?reasoning_effort=high", "setting 'reasoning_effort' is OpenAI's" },
        { "openai:gpt?thinking=2000", "setting 'thinking' is Anthropic's" },
        { "anthropic:c?thinking=100", "setting 'thinking' must be a whole number of tokens from "
                                      "1024" },
        { "anthropic:c?thinking=32000", "setting 'thinking' must be below the output limit "
                                        "(32000" },
        { "anthropic:c?thinking=8000&max_output=8000", "below the output limit (8000" },
        { "openai:gpt?extra=[1]", "setting 'extra' is not a JSON object" },
        { "openai:gpt?extra={\"a\":", "setting 'extra' is not a JSON object" },
        { "openai:gpt?extra={\"messages\":[]}", "setting 'extra' may not set model, messages" },
        { "openai:gpt?extra={\"stream\":true}", "setting 'extra' may not set model, messages" },
        { "openai:gpt?top_p=0.9", "setting 'top_p' is not a setting (known: max_output, "
                                  "temperature" },
        { "openai:gpt?temperature=1&temperature=0", "setting 'temperature' is given twice" },
        { "openai:gpt?extra=%7", "setting 'extra' has a bad %-escape" },
        { "openai:gpt?extra=%00", "setting 'extra' has a bad %-escape" },
        { "openai:gpt*x?temperature=1", "positive number" },   /* the parts first */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kevo_llm_model m;
        char *msg = NULL;
        assert_int_equal(kevo_llm_model_parse(cases[i].spec, &m, &msg), KEVO_ERR_PARSE);
        assert_non_null(msg);
        if (!strstr(msg, cases[i].says) || !strstr(msg, "expected PROVIDER:MODEL"))
            fail_msg("spec '%s': message '%s' lacks '%s'", cases[i].spec, msg, cases[i].says);
        assert_null(m.name);
        kevo_llm_model_clear(&m);
        kevo_free(msg);
    }
    struct kevo_llm_model m;
    assert_int_equal(kevo_llm_model_parse("gpt", &m, NULL), KEVO_ERR_PARSE);  /* msg optional */
}

/* ---- the config file's model objects (cli/common.c) ---- */

/* `kevo run TASK --config FILE` with models; the output (stdout and stderr) in out. */
static int kevo_run_config(const char *models_json, char *out, size_t n)
{
    char dir[64] = "/tmp/kevo-llm-cfg-XXXXXX", cfg[128], cmd[1024];
    const char *bin = getenv("KEVO_BIN");
    FILE *fp;
    size_t len;
    int rc;

    assert_non_null(mkdtemp(dir));
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    fp = fopen(cfg, "w");
    assert_non_null(fp);
    fprintf(fp, "{\"models\": %s}\n", models_json);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "'%s' run '%s/tasks/cpu/cpu_saxpy.c' --config '%s' "
             "--archive '%s/a.db' 2>&1", bin, KEVO_SOURCE_DIR, cfg, dir);
    fp = popen(cmd, "r");
    assert_non_null(fp);
    len = fread(out, 1, n - 1, fp);
    out[len] = '\0';
    rc = pclose(fp);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    note(out);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A model object becomes the spec with its settings after '?' (values %-escaped where
 * the syntax needs it); a bad setting in it fails the command, naming it. */
static void test_config_models(void **state)
{
    static char out[8192];

    if (!getenv("KEVO_BIN"))
        skip();
    /* parsed in order up to the bad setting: every setting before it was converted and
     * accepted, and the message shows the spec they became */
    assert_int_equal(kevo_run_config("[{\"spec\": \"openai:m@http://127.0.0.1:1/v1\", "
                                     "\"max_output\": 64000, \"temperature\": 0.2, "
                                     "\"reasoning_effort\": \"high\", \"extra\": {\"stop\": "
                                     "[\"a&b c\"]}, \"thinking\": 2000}]", out, sizeof out), 1);
    if (!strstr(out, "model spec 'openai:m@http://127.0.0.1:1/v1?max_output=64000&"
                "temperature=0.2&reasoning_effort=high&extra={\"stop\":[\"a%26b%20c\"]}&"
                "thinking=2000': setting 'thinking' is Anthropic's"))
        fail_msg("unexpected output: %s", out);
    /* a string and an object side by side; an object's own '?' settings are kept */
    assert_int_equal(kevo_run_config("[\"openai:a@http://127.0.0.1:1/v1\", {\"spec\": "
                                     "\"anthropic:b@http://127.0.0.1:1/v1?thinking=1024\", "
                                     "\"temperature\": \"warm\"}]", out, sizeof out), 1);
    if (!strstr(out, "'anthropic:b@http://127.0.0.1:1/v1?thinking=1024&temperature=warm': "
                "setting 'temperature' must be a number from 0 to 2"))
        fail_msg("unexpected output: %s", out);
    /* an object without a spec is a usage error */
    assert_int_equal(kevo_run_config("[{\"max_output\": 100}]", out, sizeof out), 2);
    assert_non_null(strstr(out, "models[0]: a model object needs \"spec\""));
}

/* ---- keys ---- */

struct keydir {
    char dir[64];
    char path[128];
};

static void keydir_make(struct keydir *k, const char *text, mode_t mode)
{
    snprintf(k->dir, sizeof k->dir, "/tmp/kevo-llm-XXXXXX");
    assert_non_null(mkdtemp(k->dir));
    snprintf(k->path, sizeof k->path, "%s/keys", k->dir);
    FILE *fp = fopen(k->path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    assert_int_equal(chmod(k->path, mode), 0);
}

static void keydir_rm(struct keydir *k)
{
    unlink(k->path);
    rmdir(k->dir);
}

static void test_key_env(void **state)
{
    struct kevo_llm_model m;
    char *why = NULL, *key;

    assert_int_equal(kevo_llm_model_parse("openai:x@http://h/v1#KEVO_TEST_KEY", &m, NULL),
                     KEVO_OK);
    setenv("KEVO_TEST_KEY", "k-from-env", 1);
    key = kevo_llm_key(&m, &why);
    assert_string_equal(key, "k-from-env");
    assert_null(why);
    kevo_free(key);

    /* a key that would break its header line is not sent */
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm *c = client(&l, 1);
    struct kevo_llm_reply r;
    setenv("KEVO_TEST_KEY", "k1\r\nX-Evil: 1", 1);
    assert_int_equal(kevo_llm_complete(c, &m, &req_default, &r), KEVO_OK);
    note(r.error);
    assert_string_equal(r.status, "no_key");
    assert_int_equal(r.attempts, 0);
    assert_non_null(strstr(r.error, "control characters"));
    kevo_llm_reply_clear(&r);
    kevo_llm_free(c);

    unsetenv("KEVO_TEST_KEY");
    setenv("KEVO_KEY_FILE", "/nonexistent/kevo/keys", 1);
    key = kevo_llm_key(&m, &why);          /* a named key file that is missing: said so */
    assert_null(key);
    assert_non_null(why);
    assert_non_null(strstr(why, "/nonexistent/kevo/keys"));
    note(why);
    kevo_free(why);
    unsetenv("KEVO_KEY_FILE");
    kevo_llm_model_clear(&m);
}

static void test_key_file(void **state)
{
    struct keydir k;
    struct kevo_llm_model m;
    char *why = NULL, *key;

    keydir_make(&k, "# kevo keys\nOTHER=nope\n  KEVO_TEST_KEY = " SECRET "  \r\n", 0600);
    setenv("KEVO_KEY_FILE", k.path, 1);
    unsetenv("KEVO_TEST_KEY");
    assert_int_equal(kevo_llm_model_parse("openai:x#KEVO_TEST_KEY", &m, NULL), KEVO_OK);
    key = kevo_llm_key(&m, &why);
    assert_string_equal(key, SECRET);
    assert_null(why);
    kevo_free(key);

    /* readable by group and others: refused with a message that says what to do */
    assert_int_equal(chmod(k.path, 0644), 0);
    key = kevo_llm_key(&m, &why);
    assert_null(key);
    assert_non_null(why);
    assert_non_null(strstr(why, "0644"));
    assert_non_null(strstr(why, "chmod 600"));
    note(why);
    kevo_free(why);

    /* and a call through it is "no_key", no request made */
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm *c = client(&l, 1);
    struct kevo_llm_reply r;
    assert_int_equal(kevo_llm_complete(c, &m, &req_default, &r), KEVO_OK);
    note(r.error);
    assert_string_equal(r.status, "no_key");
    assert_int_equal(r.attempts, 0);
    assert_non_null(strstr(r.error, "chmod 600"));
    kevo_llm_reply_clear(&r);

    /* a name not in the file, at the provider's own URL: no key, said how to give one */
    assert_int_equal(chmod(k.path, 0600), 0);
    kevo_llm_model_clear(&m);
    assert_int_equal(kevo_llm_model_parse("anthropic:x#KEVO_MISSING_KEY", &m, NULL), KEVO_OK);
    assert_int_equal(kevo_llm_complete(c, &m, &req_default, &r), KEVO_OK);
    note(r.error);
    assert_string_equal(r.status, "no_key");
    assert_non_null(strstr(r.error, "KEVO_MISSING_KEY"));
    kevo_llm_reply_clear(&r);
    kevo_llm_free(c);
    kevo_llm_model_clear(&m);
    unsetenv("KEVO_KEY_FILE");
    keydir_rm(&k);
}

/* A local server needs no key: the call goes out without an auth header. */
static void test_local_without_key(void **state)
{
    struct step s[] = { { 200, NULL, openai_ok, 0, 0, 0 } };
    struct fake *f = fake_start(s, 1);
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm *c = client(&l, 1);
    struct kevo_llm_model m;
    struct kevo_llm_reply r;
    char spec[128], *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;

    setenv("HOME", "/nonexistent", 1);       /* no default key file either */
    snprintf(spec, sizeof spec, "openai:m@http://127.0.0.1:%d/v1#KEVO_UNSET_KEY", f->port);
    assert_int_equal(kevo_llm_model_parse(spec, &m, NULL), KEVO_OK);
    assert_int_equal(kevo_llm_complete(c, &m, &req_default, &r), KEVO_OK);
    assert_string_equal(r.status, "ok");
    assert_null(strcasestr(f->last, "Authorization:"));
    if (home)
        setenv("HOME", home, 1);
    free(home);
    kevo_llm_reply_clear(&r);
    kevo_llm_model_clear(&m);
    kevo_llm_free(c);
    fake_stop(f);
}

/* ---- arguments and allocation failures ---- */

static void test_bad_arguments(void **state)
{
    struct kevo_llm_limits l = small_limits();
    struct kevo_llm *c = NULL;
    struct kevo_llm_model m;
    struct kevo_llm_reply r;
    struct kevo_llm_req no_prompt = { NULL, NULL };

    assert_int_equal(kevo_llm_new(0, &l, &c), KEVO_ERR_INVALID);
    assert_null(c);
    l.max_attempts = 0;
    assert_int_equal(kevo_llm_new(1, &l, &c), KEVO_ERR_INVALID);
    l = small_limits();
    l.total_timeout_s = 0;
    assert_int_equal(kevo_llm_new(1, &l, &c), KEVO_ERR_INVALID);
    assert_int_equal(kevo_llm_new(4, NULL, &c), KEVO_OK);     /* NULL: the defaults */
    assert_int_equal(kevo_llm_model_parse("openai:x@http://127.0.0.1:9/v1", &m, NULL), KEVO_OK);
    assert_int_equal(kevo_llm_complete(c, &m, &no_prompt, &r), KEVO_ERR_INVALID);
    assert_null(r.error);
    kevo_llm_model_clear(&m);
    kevo_llm_free(c);
    kevo_llm_free(NULL);
    kevo_llm_reply_clear(NULL);
    kevo_llm_model_clear(NULL);
}

/* Fail each allocation in turn: every call returns ok or NOMEM with an empty reply. */
static void test_out_of_memory(void **state)
{
    struct step s[] = { { 500, NULL, "{\"error\":{\"message\":\"x\"}}", 0, 0, 0 },
                        { 200, NULL, openai_ok, 0, 0, 0 } };
    struct kevo_llm_limits l = small_limits();
    int n_ok = 0;

    l.backoff_s = 0;
    for (long n = 1; n < 40; n++) {
        struct fake *f = fake_start(s, 2);
        struct kevo_llm *c = client(&l, 1);
        struct kevo_llm_model m;
        struct kevo_llm_reply r;
        model_at(&m, KEVO_LLM_OPENAI, f->port);
        kevo_mem_fail_after(n);
        enum kevo_status st = kevo_llm_complete(c, &m, &req_default, &r);
        kevo_mem_fail_after(0);
        if (st == KEVO_OK) {
            assert_string_equal(r.status, "ok");
            n_ok++;
        } else {
            assert_int_equal(st, KEVO_ERR_NOMEM);
            assert_null(r.text);
            assert_null(r.error);
        }
        kevo_llm_reply_clear(&r);
        kevo_llm_model_clear(&m);
        kevo_llm_free(c);
        fake_stop(f);
    }
    assert_true(n_ok > 0);      /* late enough, nothing fails */
}

/* ---- the key, never said ---- */

static void test_key_never_said(void **state)
{
    assert_true(n_notes > 20);
    for (int i = 0; i < n_notes; i++) {
        if (strstr(notes[i], SECRET) || strstr(notes[i], "S3CRET"))
            fail_msg("the key appears in: %s", notes[i]);
        free(notes[i]);
    }
    n_notes = 0;
}

int main(void)
{
    setenv("OPENAI_API_KEY", SECRET, 1);
    setenv("ANTHROPIC_API_KEY", SECRET, 1);
    unsetenv("KEVO_KEY_FILE");
    /* the fake is on loopback: no proxy in between */
    static const char *const proxies[] = { "http_proxy", "HTTP_PROXY", "https_proxy",
                                           "HTTPS_PROXY", "all_proxy", "ALL_PROXY" };
    for (size_t i = 0; i < sizeof proxies / sizeof proxies[0]; i++)
        unsetenv(proxies[i]);
    kevo_log_set(on_log, NULL, KEVO_LOG_DEBUG);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_openai_ok),
        cmocka_unit_test(test_anthropic_ok),
        cmocka_unit_test(test_retry_after),
        cmocka_unit_test(test_retry_after_capped),
        cmocka_unit_test(test_500_then_ok),
        cmocka_unit_test(test_500_forever),
        cmocka_unit_test(test_401_not_retried),
        cmocka_unit_test(test_stall),
        cmocka_unit_test(test_connection_refused),
        cmocka_unit_test(test_truncated_json),
        cmocka_unit_test(test_no_content),
        cmocka_unit_test(test_excerpt_sanitised),
        cmocka_unit_test(test_echoed_key_redacted),
        cmocka_unit_test(test_partly_echoed_key_redacted),
        cmocka_unit_test(test_concurrency_limit),
        cmocka_unit_test(test_openai_native_body),
        cmocka_unit_test(test_usage_openai_reasoning),
        cmocka_unit_test(test_anthropic_thinking_blocks),
        cmocka_unit_test(test_vllm_reasoning_content),
        cmocka_unit_test(test_think_stripped),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_heal_one_retry),
        cmocka_unit_test(test_heal_both),
        cmocka_unit_test(test_heal_still_fails),
        cmocka_unit_test(test_heal_per_model),
        cmocka_unit_test(test_spec_good),
        cmocka_unit_test(test_spec_settings),
        cmocka_unit_test(test_spec_bad),
        cmocka_unit_test(test_config_models),
        cmocka_unit_test(test_key_env),
        cmocka_unit_test(test_key_file),
        cmocka_unit_test(test_local_without_key),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_key_never_said),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (int i = 0; i < n_fixture_texts; i++)
        free(fixture_texts[i]);
    return rc;
}

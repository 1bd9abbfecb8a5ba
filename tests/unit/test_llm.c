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
 */
#include "testutil.h"

#include "ctl/llm.h"
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

static void model_at(struct kevo_llm_model *m, enum kevo_llm_api api, int port)
{
    char spec[128];
    char *msg = NULL;
    snprintf(spec, sizeof spec, "%s:test-model@http://127.0.0.1:%d/v1/",
             api == KEVO_LLM_OPENAI ? "openai" : "anthropic", port);
    assert_int_equal(kevo_llm_model_parse(spec, m, &msg), KEVO_OK);
    assert_null(msg);
}

static const struct kevo_llm_req req_default = {
    .system = "You write CUDA kernels.", .prompt = "Make it faster.", .temperature = 0.5,
    .max_tokens = 100,
};

/* One call of the model at the fake; its error goes to the notes. */
static void call(struct kevo_llm *c, enum kevo_llm_api api, const struct fake *f,
                 const struct kevo_llm_req *r, struct kevo_llm_reply *out)
{
    struct kevo_llm_model m;
    model_at(&m, api, f->port);
    assert_int_equal(kevo_llm_complete(c, &m, r ? r : &req_default, out), KEVO_OK);
    note(out->error);
    note(out->text);
    kevo_llm_model_clear(&m);
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
    json_t *b = req_body(f);
    assert_string_equal(jstr(b, "model", NULL), "test-model");
    json_t *msgs = json_object_get(b, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    assert_string_equal(jstr(json_array_get(msgs, 0), "role", NULL), "system");
    assert_string_equal(jstr(json_array_get(msgs, 0), "content", NULL), req_default.system);
    assert_string_equal(jstr(json_array_get(msgs, 1), "role", NULL), "user");
    assert_string_equal(jstr(json_array_get(msgs, 1), "content", NULL), req_default.prompt);
    assert_true(json_real_value(json_object_get(b, "temperature")) == 0.5);
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 100);
    json_decref(b);
    kevo_llm_reply_clear(&r);

    /* no system prompt, no temperature (< 0), no max_tokens (0): none of them sent */
    struct kevo_llm_req bare = { NULL, "just this", -1, 0 };
    call(c, KEVO_LLM_OPENAI, f, &bare, &r);
    assert_string_equal(r.status, "ok");
    b = req_body(f);
    assert_int_equal(json_array_size(json_object_get(b, "messages")), 1);
    assert_null(json_object_get(b, "temperature"));
    assert_null(json_object_get(b, "max_tokens"));
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
    json_t *b = req_body(f);
    assert_string_equal(jstr(b, "model", NULL), "test-model");
    assert_string_equal(jstr(b, "system", NULL), req_default.system);
    json_t *msgs = json_object_get(b, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    assert_string_equal(jstr(json_array_get(msgs, 0), "role", NULL), "user");
    assert_string_equal(jstr(json_array_get(msgs, 0), "content", NULL), req_default.prompt);
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 100);
    assert_true(json_real_value(json_object_get(b, "temperature")) == 0.5);
    json_decref(b);
    kevo_llm_reply_clear(&r);

    /* Anthropic needs max_tokens: 0 sends the default */
    struct kevo_llm_req bare = { NULL, "just this", 0.0, 0 };
    call(c, KEVO_LLM_ANTHROPIC, f, &bare, &r);
    b = req_body(f);
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 8192);
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
          "\"finish_reason\":\"length\"}]}", "refused", "length" },
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
    struct kevo_llm_req no_prompt = { NULL, NULL, 0, 0 };

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
        cmocka_unit_test(test_concurrency_limit),
        cmocka_unit_test(test_spec_good),
        cmocka_unit_test(test_spec_bad),
        cmocka_unit_test(test_key_env),
        cmocka_unit_test(test_key_file),
        cmocka_unit_test(test_local_without_key),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_key_never_said),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

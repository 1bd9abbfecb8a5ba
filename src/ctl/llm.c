/*
 * llm - chat completions over libcurl + jansson (see llm.h, docs/llm.md).
 *
 * A call is: look up the key, build the URL, body and headers once, then up to
 * max_attempts attempts. Each attempt takes one of max_concurrent slots (an easy handle
 * kept for connection reuse), so backoff sleeps never hold a slot. Every outcome of an
 * attempt becomes a reply status; only our own failures (out of memory) are errors.
 *
 * The body comes from the model's settings, then the changes the client keeps for that
 * model (struct adapt, guarded by the client's mutex): a 400 that refuses a parameter
 * (heal_rule reads OpenAI's, Anthropic's and vLLM's wordings) adds one and the body is
 * built again and sent at once. Replies are read as the providers send them: the stop
 * reason tells "truncated" apart, reasoning (thinking blocks, reasoning_content,
 * <think> in content) never reaches the text, and every usage count is kept.
 *
 * Secrets: the key lives in the call's key string and header list only; both are wiped
 * before they are freed. Every error string passes through set_error, which removes the
 * key even when a server echoes it back in its reply.
 */
#include "ctl/llm.h"
#include "ctl/llm_int.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define OPENAI_BASE      KEVO_LLM_OPENAI_BASE
#define ANTHROPIC_BASE   KEVO_LLM_ANTHROPIC_BASE
#define ANTHROPIC_VER    "2023-06-01"
#define EXCERPT_MAX      KEVO_LLM_EXCERPT_MAX
#define KEY_FILE_MAX     (64 * 1024)     /* a key file is a few lines */
#define ADAPT_MAX        64              /* request changes a client keeps (a run has few
                                            models, each needing two or three at most) */
#define HEAL_MAX         4               /* changed requests sent within one call */
#define JSON_OUT         (JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15))

enum adapt_kind { ADAPT_DROP = 0, ADAPT_RENAME, ADAPT_LIMIT };

/* A change of a model's requests that a provider's 400 asked for, kept for the client's
 * lifetime (the run): the next call of the model is right the first time. */
#define REDACT_MIN 6                     /* key characters in a row that are masked */

struct adapt {
    char *model;                         /* "api:name@base_url" (owned in the table) */
    enum adapt_kind kind;
    char param[48];                      /* the body's member */
    char to[48];                         /* RENAME: its new name */
    json_int_t limit;                    /* LIMIT: the most it may be */
    int once;                            /* for this call only: what the refusal says of
                                            one request (its prompt), not of the model */
};

struct kevo_llm {
    struct kevo_llm_limits lim;
    int max_concurrent;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in_flight;                       /* attempts holding a slot (guarded by mu) */
    CURL **idle;                         /* handles of free slots, n_idle of them (mu) */
    int n_idle;
    atomic_uint_fast64_t rng;            /* jitter state (splitmix64 counter) */
    struct adapt adapts[ADAPT_MAX];      /* what providers refused, in the order learned (mu) */
    int n_adapts;
};

/* ---- small helpers ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

/* curl_global_init is not thread-safe and must run once per process. */
static void curl_init_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void sleep_s(double s)
{
    struct timespec ts;
    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A uniform double in [0, 1): splitmix64 over a shared counter, safe across threads. */
static double rng_unit(struct kevo_llm *c)
{
    uint64_t z = atomic_fetch_add(&c->rng, 0x9e3779b97f4a7c15ull) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* Wipe a secret before its memory goes back to the allocator. */
static void free_secret(char *s)
{
    if (!s)
        return;
    explicit_bzero(s, strlen(s));
    kevo_free(s);
}

/* s with every occurrence of key replaced by "[key]"; a copy of s when key is empty. */
/* The length of the longest run of s[0..] that occurs in key (at most n). */
static size_t key_run(const char *s, const char *key, size_t n)
{
    size_t best = 0;

    for (const char *k = key; *k; k++) {
        size_t l = 0;
        while (l < n && s[l] && k[l] && s[l] == k[l])
            l++;
        best = l > best ? l : best;
    }
    return best;
}

/* s with every run of REDACT_MIN or more characters taken from key replaced by "[key]":
 * a provider that quotes part of a refused key ("sk-12345***6789") shows none of it. */
static char *redact(const char *s, const char *key)
{
    struct kevo_buf b;
    size_t klen = key ? strlen(key) : 0;

    if (klen < REDACT_MIN)
        return kevo_strdup(s);
    kevo_buf_init(&b, 0);
    for (const char *p = s; *p;) {
        size_t run = key_run(p, key, klen);
        enum kevo_status st = run >= REDACT_MIN ? kevo_buf_adds(&b, "[key]")
                                                : kevo_buf_add(&b, p, 1);
        if (st) {
            kevo_buf_free(&b);
            return NULL;
        }
        p += run >= REDACT_MIN ? run : 1;
    }
    return kevo_buf_take(&b);
}

/* The reply's error: formatted, the key removed, on one printable line. */
static enum kevo_status set_error(struct kevo_llm_reply *out, const char *key, const char *fmt,
                                  ...) __attribute__((format(printf, 3, 4)));
static enum kevo_status set_error(struct kevo_llm_reply *out, const char *key, const char *fmt,
                                  ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    for (char *p = line; *p; p++) {
        if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
            *p = ' ';
    }
    kevo_free(out->error);
    out->error = redact(line, key);
    explicit_bzero(line, sizeof line);
    return out->error ? KEVO_OK : KEVO_ERR_NOMEM;
}

static void set_status(struct kevo_llm_reply *out, const char *status)
{
    snprintf(out->status, sizeof out->status, "%s", status);
}

/* ---- keys ---- */

/* $KEVO_KEY_FILE, else ~/.config/kevo/keys; *explicit says which (a missing explicit
 * file is worth a message, a missing default one is not). */
static char *key_file_path(int *explicit)
{
    const char *p = getenv("KEVO_KEY_FILE"), *home = getenv("HOME");
    *explicit = p && *p;
    if (*explicit)
        return kevo_strdup(p);
    if (!home || !*home)
        return NULL;
    return kevo_strdupf("%s/.config/kevo/keys", home);
}

/* The whole key file, after checking what kind of file it is and who may read it. */
static char *key_file_read(const char *path, int explicit, char **why)
{
    struct stat sb;
    char *text = NULL;
    ssize_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        if (explicit || errno != ENOENT)
            *why = kevo_strdupf("key file %s: %s", path, strerror(errno));
        return NULL;
    }
    /* fstat on the open file, so the file checked is the file read */
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > KEY_FILE_MAX) {
        *why = kevo_strdupf("key file %s: not a regular file of at most %d bytes", path,
                            KEY_FILE_MAX);
    } else if (sb.st_mode & (S_IRWXG | S_IRWXO)) {
        *why = kevo_strdupf("key file %s has mode %04o: it must not be accessible by group or "
                            "others; refusing it (run: chmod 600 %s)", path,
                            (unsigned)(sb.st_mode & 07777), path);
    } else {
        text = kevo_malloc((size_t)sb.st_size + 1);
        n = text ? read(fd, text, (size_t)sb.st_size) : 0;
        if (n < 0) {
            *why = kevo_strdupf("key file %s: %s", path, strerror(errno));
            kevo_free(text);
            text = NULL;
        } else if (text) {
            text[n] = '\0';
        }
    }
    close(fd);
    return text;
}

static char *trim(char *s)
{
    char *e;
    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

/* The value of the line "name=VALUE" in text (which is modified); NULL if none. */
static char *key_file_find(char *text, const char *name)
{
    char *line = text, *next, *eq;
    for (; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        if (strcmp(trim(line), name) == 0 && *trim(eq + 1))
            return kevo_strdup(trim(eq + 1));
    }
    return NULL;
}

char *kevo_llm_key(const struct kevo_llm_model *m, char **why)
{
    char *path = NULL, *text = NULL, *key = NULL, *msg = NULL;
    const char *env;
    int explicit = 0;

    if (why)
        *why = NULL;
    if (!m || !m->key_env || !*m->key_env)
        return NULL;
    env = getenv(m->key_env);
    if (env && *env)
        return kevo_strdup(env);
    path = key_file_path(&explicit);
    if (path)
        text = key_file_read(path, explicit, &msg);
    if (text)
        key = key_file_find(text, m->key_env);
    free_secret(text);
    kevo_free(path);
    if (why)
        *why = msg;
    else
        kevo_free(msg);
    return key;
}

/* ---- the client and its slots ---- */

void kevo_llm_limits_default(struct kevo_llm_limits *l)
{
    l->connect_timeout_s = 10;
    l->total_timeout_s = 900;   /* 32K output tokens at 40 tokens/s, with room */
    l->max_attempts = 5;
    l->max_wait_s = 120;
    l->backoff_s = 1;
    l->max_reply_bytes = (size_t)4 << 20;
    l->stall_timeout_s = 0;
}

static int limits_ok(const struct kevo_llm_limits *l)
{
    return l->connect_timeout_s > 0 && l->total_timeout_s > 0 && l->max_attempts >= 1 &&
           l->max_wait_s >= 0 && l->backoff_s >= 0 && l->max_reply_bytes > 0 &&
           l->stall_timeout_s >= 0 && isfinite(l->total_timeout_s) && isfinite(l->max_wait_s);
}

enum kevo_status kevo_llm_new(int max_concurrent, const struct kevo_llm_limits *lim,
                              struct kevo_llm **out)
{
    struct kevo_llm *c = NULL;

    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK)
        return KEVO_ERR_SYSTEM;
    if (max_concurrent < 1)
        return KEVO_ERR_INVALID;
    c = kevo_calloc(1, sizeof *c);
    if (!c)
        return KEVO_ERR_NOMEM;
    if (lim)
        c->lim = *lim;
    else
        kevo_llm_limits_default(&c->lim);
    if (!limits_ok(&c->lim)) {
        kevo_free(c);
        return KEVO_ERR_INVALID;
    }
    c->idle = kevo_calloc((size_t)max_concurrent, sizeof *c->idle);
    if (!c->idle) {
        kevo_free(c);
        return KEVO_ERR_NOMEM;
    }
    c->max_concurrent = max_concurrent;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    atomic_init(&c->rng, (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)c ^
                         ((uint64_t)getpid() << 32));
    *out = c;
    return KEVO_OK;
}

void kevo_llm_free(struct kevo_llm *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n_idle; i++)
        curl_easy_cleanup(c->idle[i]);
    for (int i = 0; i < c->n_adapts; i++)
        kevo_free(c->adapts[i].model);
    kevo_free(c->idle);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    kevo_free(c);
}

/* Wait for a free slot; its handle (kept from an earlier attempt, so a kept-alive
 * connection is reused) or a new one. NULL only when curl cannot make a handle. */
static CURL *slot_acquire(struct kevo_llm *c)
{
    CURL *h = NULL;

    pthread_mutex_lock(&c->mu);
    while (c->in_flight >= c->max_concurrent)
        pthread_cond_wait(&c->cv, &c->mu);
    c->in_flight++;
    if (c->n_idle > 0)
        h = c->idle[--c->n_idle];
    pthread_mutex_unlock(&c->mu);
    if (!h)
        h = curl_easy_init();
    if (!h) {
        pthread_mutex_lock(&c->mu);
        c->in_flight--;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    return h;
}

static void slot_release(struct kevo_llm *c, CURL *h)
{
    pthread_mutex_lock(&c->mu);
    /* at most max_concurrent handles exist, so idle never overflows */
    c->idle[c->n_idle++] = h;
    c->in_flight--;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* ---- requests ---- */

/* What stays the same over a call's attempts (the body changes only when a provider
 * refuses a parameter: call_body). */
struct call {
    const struct kevo_llm_model *m;
    const struct kevo_llm_req *r;
    char *mkey;                          /* "api:name@base_url": whose adaptations apply */
    char *key;                           /* secret: free_secret */
    char *url;
    json_t *sent;                        /* the body as sent */
    char *body;                          /* its text (jansson's allocation) */
    struct curl_slist *headers;          /* holds the key: headers_free */
    struct adapt once;                   /* an adaptation of this call only (once.once 0:
                                            none) */
};

static json_t *msg_obj(const char *role, const char *content)
{
    return json_pack("{s:s, s:s}", "role", role, "content", content);
}

/* The output limit's member: OpenAI's own API takes max_completion_tokens (its reasoning
 * models refuse max_tokens), the servers that imitate it know max_tokens, and so does
 * Anthropic's. */
static const char *limit_name(const struct kevo_llm_model *m)
{
    return m->api == KEVO_LLM_OPENAI && strcmp(m->base_url, OPENAI_BASE) == 0
           ? "max_completion_tokens" : "max_tokens";
}

json_t *kevo_llm_body(const struct kevo_llm_model *m, const struct kevo_llm_req *r)
{
    json_t *doc = json_object(), *msgs = json_array(), *extra = NULL;
    int bad = !doc || !msgs;

    bad |= json_object_set_new(doc, "model", json_string(m->name));
    if (m->api == KEVO_LLM_OPENAI && r->system)
        bad |= json_array_append_new(msgs, msg_obj("system", r->system));
    else if (r->system)
        bad |= json_object_set_new(doc, "system", json_string(r->system));
    bad |= json_array_append_new(msgs, msg_obj("user", r->prompt));
    bad |= json_object_set(doc, "messages", msgs);
    bad |= json_object_set_new(doc, limit_name(m), json_integer(m->max_output > 0
                                                                ? m->max_output
                                                                : KEVO_LLM_MAX_OUTPUT));
    if (m->has_temperature)
        bad |= json_object_set_new(doc, "temperature", json_real(m->temperature));
    if (m->reasoning_effort)
        bad |= json_object_set_new(doc, "reasoning_effort", json_string(m->reasoning_effort));
    if (m->thinking)
        bad |= json_object_set_new(doc, "thinking", json_pack("{s:s, s:i}", "type", "enabled",
                                                              "budget_tokens", m->thinking));
    if (m->extra) {
        extra = json_loads(m->extra, 0, NULL);   /* checked by kevo_llm_model_parse */
        bad |= json_object_update(doc, extra);
    }
    json_decref(extra);
    json_decref(msgs);
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* Change a on doc; 1 when doc changed. A limit only ever lowers the value. */
static int adapt_apply(const struct adapt *a, json_t *doc)
{
    json_t *v = json_object_get(doc, a->param);

    if (!v)
        return 0;
    if (a->kind == ADAPT_LIMIT) {
        if (!json_is_integer(v) || json_integer_value(v) <= a->limit)
            return 0;
        return json_object_set_new(doc, a->param, json_integer(a->limit)) == 0;
    }
    if (a->kind == ADAPT_RENAME && json_object_set(doc, a->to, v) != 0)
        return 0;
    return json_object_del(doc, a->param) == 0;
}

/* k's body: the model's request with every change the client keeps for the model. */
static enum kevo_status call_body(struct kevo_llm *c, struct call *k)
{
    json_t *doc = kevo_llm_body(k->m, k->r);

    if (!doc)
        return KEVO_ERR_NOMEM;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_adapts; i++) {
        if (strcmp(c->adapts[i].model, k->mkey) == 0)
            adapt_apply(&c->adapts[i], doc);
    }
    pthread_mutex_unlock(&c->mu);
    if (k->once.once)
        adapt_apply(&k->once, doc);
    free_secret(k->body);
    json_decref(k->sent);
    k->sent = doc;
    k->body = json_dumps(doc, JSON_OUT);
    return k->body ? KEVO_OK : KEVO_ERR_NOMEM;
}

static void headers_free(struct curl_slist *h)
{
    for (struct curl_slist *p = h; p; p = p->next)
        explicit_bzero(p->data, strlen(p->data));
    curl_slist_free_all(h);
}

/* The request's headers, the key's among them; NULL when out of memory. */
static struct curl_slist *headers_build(enum kevo_llm_api api, const char *key)
{
    const char *lines[5] = {
        "Content-Type: application/json",
        "Accept: application/json",
        "Expect:",                       /* no 100-continue round trip on large bodies */
        api == KEVO_LLM_ANTHROPIC ? "anthropic-version: " ANTHROPIC_VER : NULL,
        NULL,
    };
    struct curl_slist *h = NULL, *n;
    char *auth = NULL;

    if (key) {
        auth = kevo_strdupf(api == KEVO_LLM_OPENAI ? "Authorization: Bearer %s" : "x-api-key: %s",
                            key);
        if (!auth)
            return NULL;
        lines[4] = auth;
    }
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (!lines[i])
            continue;
        n = curl_slist_append(h, lines[i]);
        if (!n) {
            headers_free(h);
            h = NULL;
            break;
        }
        h = n;
    }
    free_secret(auth);
    return h;
}

/* A key is required where the provider itself answers; elsewhere (a local server) it
 * is sent when there is one. */
static int key_required(const struct kevo_llm_model *m)
{
    const char *own = m->api == KEVO_LLM_OPENAI ? OPENAI_BASE : ANTHROPIC_BASE;
    return strcmp(m->base_url, own) == 0;
}

static enum kevo_status call_key(struct call *k, struct kevo_llm_reply *out)
{
    enum kevo_status st = KEVO_OK;
    char *why = NULL;

    k->key = kevo_llm_key(k->m, &why);
    if (why) {
        set_status(out, "no_key");
        st = set_error(out, NULL, "%s", why);
    } else if (k->key && !kevo_llm_is_token(k->key)) {
        /* a line break in a key would end its header and start another */
        set_status(out, "no_key");
        st = set_error(out, k->key, "the key in %s (or the key file) has spaces or control "
                       "characters; refusing to send it", k->m->key_env);
    } else if (!k->key && key_required(k->m)) {
        set_status(out, "no_key");
        st = set_error(out, NULL, "no API key for %s: set %s, or put a line %s=... in the "
                       "key file ($KEVO_KEY_FILE or ~/.config/kevo/keys, mode 600)",
                       k->m->base_url, k->m->key_env, k->m->key_env);
    }
    kevo_free(why);
    return st;
}

/* Everything a call's attempts share; out->status set ("no_key") when no attempt is made. */
static enum kevo_status call_prepare(struct kevo_llm *c, const struct kevo_llm_model *m,
                                     const struct kevo_llm_req *r, struct call *k,
                                     struct kevo_llm_reply *out)
{
    enum kevo_status st;

    k->m = m;
    k->r = r;
    st = call_key(k, out);
    if (st || out->status[0])
        return st;
    k->mkey = kevo_strdupf("%s:%s@%s", m->api == KEVO_LLM_OPENAI ? "openai" : "anthropic",
                           m->name, m->base_url);
    k->url = kevo_strdupf("%s/%s", m->base_url,
                          m->api == KEVO_LLM_OPENAI ? "chat/completions" : "messages");
    k->headers = headers_build(m->api, k->key);
    if (!k->mkey || !k->url || !k->headers)
        return KEVO_ERR_NOMEM;
    return call_body(c, k);
}

static void call_free(struct call *k)
{
    free_secret(k->key);
    kevo_free(k->mkey);
    kevo_free(k->url);
    json_decref(k->sent);
    free_secret(k->body);    /* the prompt is not secret, but cheap to wipe */
    headers_free(k->headers);
    memset(k, 0, sizeof *k);
}

/* ---- one attempt ---- */

struct attempt {
    struct kevo_buf body;                /* the reply, capped at max_reply_bytes */
    size_t cap;
    int too_large, nomem;                /* set by on_data */
    CURLcode cc;
    long http;
    double retry_after;                  /* seconds; 0: none */
    char errbuf[CURL_ERROR_SIZE];
};

/* Returning less than asked makes curl stop with CURLE_WRITE_ERROR: past the cap the
 * rest of the reply is never stored. */
static size_t on_data(char *p, size_t size, size_t n, void *user)
{
    struct attempt *a = user;
    size_t len = size * n;

    if (len > a->cap - a->body.len) {
        a->too_large = 1;
        return 0;
    }
    if (kevo_buf_add(&a->body, p, len)) {
        a->nomem = 1;
        return 0;
    }
    return len;
}

static long ms(double s)
{
    double v = ceil(s * 1000.0);
    return v > (double)LONG_MAX / 2 ? LONG_MAX / 2 : (long)v;
}

static void attempt_setopts(CURL *h, const struct kevo_llm_limits *l, const struct call *k,
                            struct attempt *a)
{
    double stall = l->stall_timeout_s > 0 ? l->stall_timeout_s : l->total_timeout_s;

    curl_easy_setopt(h, CURLOPT_URL, k->url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);           /* threads: no SIGALRM */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, k->headers);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, k->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(k->body));
    curl_easy_setopt(h, CURLOPT_USERAGENT, "kevo");
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");    /* the cap counts decoded bytes */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms(l->connect_timeout_s));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms(l->total_timeout_s));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)ceil(stall));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->errbuf);
}

/* Send the request once; the outcome is in *a (no status here: the caller judges). */
static enum kevo_status attempt_run(struct kevo_llm *c, const struct call *k, struct attempt *a)
{
    curl_off_t ra = -1;
    CURL *h;

    memset(a, 0, sizeof *a);
    kevo_buf_init(&a->body, c->lim.max_reply_bytes);
    a->cap = c->lim.max_reply_bytes;
    h = slot_acquire(c);
    if (!h)
        return KEVO_ERR_NOMEM;
    curl_easy_reset(h);       /* options only: connections stay cached */
    attempt_setopts(h, &c->lim, k, a);
    a->cc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->http);
    if (curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &ra) == CURLE_OK && ra > 0)
        a->retry_after = (double)ra;
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);   /* a is about to go away */
    slot_release(c, h);
    if (a->nomem || a->cc == CURLE_OUT_OF_MEMORY)
        return KEVO_ERR_NOMEM;
    return KEVO_OK;
}

/* Text of a content value: a string, or the text parts of an array of {type, text}
 * (Anthropic always; some OpenAI-compatible servers) joined. NULL only out of memory. */
static char *content_text(json_t *content)
{
    struct kevo_buf b;
    size_t i;
    json_t *part;

    if (json_is_string(content))
        return kevo_strdup(json_string_value(content));
    kevo_buf_init(&b, 0);
    json_array_foreach(content, i, part) {
        const char *t = json_string_value(json_object_get(part, "text"));
        const char *type = json_string_value(json_object_get(part, "type"));
        if (t && (!type || strcmp(type, "text") == 0) && kevo_buf_adds(&b, t)) {
            kevo_buf_free(&b);
            return NULL;
        }
    }
    return kevo_buf_take(&b);
}

/* A count of usage u (a JSON object or NULL); 0 when absent or not a count. */
static int64_t count_of(json_t *u, const char *name)
{
    json_t *v = json_object_get(u, name);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (int64_t)json_integer_value(v) : 0;
}

/*
 * Every count of the reply's usage into out. OpenAI's prompt_tokens holds the cached ones
 * (prompt_tokens_details.cached_tokens; DeepSeek says prompt_cache_hit_tokens) and its
 * completion_tokens the reasoning ones (completion_tokens_details.reasoning_tokens).
 * Anthropic's input_tokens leaves out what was read from or written to its cache, and
 * its output_tokens holds the thinking without saying how much of it.
 */
static void usage_read(enum kevo_llm_api api, json_t *root, struct kevo_llm_reply *out)
{
    json_t *u = json_object_get(root, "usage");

    if (api == KEVO_LLM_ANTHROPIC) {
        out->tokens_cached_in = count_of(u, "cache_read_input_tokens");
        out->tokens_in = count_of(u, "input_tokens") + count_of(u, "cache_creation_input_tokens") +
                         out->tokens_cached_in;
        out->tokens_out = count_of(u, "output_tokens");
        return;
    }
    out->tokens_in = count_of(u, "prompt_tokens");
    out->tokens_cached_in = count_of(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
    if (!out->tokens_cached_in)
        out->tokens_cached_in = count_of(u, "prompt_cache_hit_tokens");
    out->tokens_out = count_of(u, "completion_tokens");
    out->tokens_reasoning = count_of(json_object_get(u, "completion_tokens_details"),
                                     "reasoning_tokens");
}

/* What a 2xx reply of the API's shape says besides its text. */
struct said {
    json_t *content;                     /* json null: the model declined or wrote nothing */
    const char *stop;                    /* finish_reason or stop_reason; may be NULL */
    const char *refusal;                 /* OpenAI's refusal text; may be NULL */
};

/* The content node and stop reason of a 2xx reply; 0 when it does not have the API's
 * shape. Reasoning the server parsed out (reasoning_content, reasoning, thinking blocks)
 * is never content. */
static int reply_content(enum kevo_llm_api api, json_t *root, struct said *s)
{
    json_t *ch, *msg;

    memset(s, 0, sizeof *s);
    if (api == KEVO_LLM_ANTHROPIC) {
        s->stop = json_string_value(json_object_get(root, "stop_reason"));
        s->content = json_object_get(root, "content");
        return json_is_array(s->content);
    }
    ch = json_array_get(json_object_get(root, "choices"), 0);
    msg = json_object_get(ch, "message");
    if (!json_is_object(msg))
        return 0;
    s->refusal = json_string_value(json_object_get(msg, "refusal"));
    s->stop = json_string_value(json_object_get(ch, "finish_reason"));
    s->content = json_object_get(msg, "content");
    if (!s->content || json_is_null(s->content)) {
        s->content = json_null();   /* a declined answer: "content": null beside a refusal */
        return 1;
    }
    return json_is_string(s->content) || json_is_array(s->content);
}

/* The length of s's blanks at its start. */
static size_t leading_blanks(const char *s)
{
    return strspn(s, " \t\r\n");
}

/*
 * text without the reasoning a server left in it (in place). Reasoning models served
 * without a reasoning parser write <think>...</think> before the answer; a chat template
 * that opens the block in the prompt leaves only the closing tag; a reply cut while
 * thinking has no closing tag. So: everything up to a </think> with no <think> before
 * it, then each leading <think>...</think> block, and a leading <think> that is never
 * closed takes the rest with it.
 */
static void strip_think(char *text)
{
    char *open = strstr(text, "<think>"), *close = strstr(text, "</think>"), *p;

    if (close && (!open || open > close))
        memmove(text, close + 8, strlen(close + 8) + 1);
    for (p = text + leading_blanks(text); strncmp(p, "<think>", 7) == 0; p = text + leading_blanks(text)) {
        close = strstr(p + 7, "</think>");
        if (!close) {
            text[0] = '\0';
            return;
        }
        memmove(text, close + 8, strlen(close + 8) + 1);
    }
}

/* A stop for want of room: OpenAI and the servers imitating it say "length", Anthropic
 * "max_tokens" (or "model_context_window_exceeded" when the context ran out first). */
static int is_cut(const char *stop)
{
    return stop && (strcmp(stop, "length") == 0 || strcmp(stop, "max_tokens") == 0 ||
                    strcmp(stop, "model_context_window_exceeded") == 0);
}

static enum kevo_status bad_reply(struct kevo_llm_reply *out, const struct call *k,
                                  const char *what, const struct kevo_buf *body)
{
    char ex[EXCERPT_MAX + 1];
    char *clean = redact(kevo_buf_str(body), k->key);   /* before cutting: no key prefix */

    if (!clean)
        return KEVO_ERR_NOMEM;
    kevo_llm_excerpt(clean, strlen(clean), ex);
    kevo_free(clean);
    set_status(out, "bad_reply");
    return set_error(out, k->key, "%s from %s: %s; reply: '%s'", what, k->url,
                     k->m->api == KEVO_LLM_OPENAI ? "not a chat completion" : "not a message",
                     ex);
}

/* The text and usage of a reply of the API's shape into out: "ok", "truncated" (the
 * output limit stopped it: never usable, whatever it wrote) or "refused" (no text). */
static enum kevo_status judge_text(const struct call *k, json_t *root, const struct said *s,
                                   struct kevo_llm_reply *out)
{
    char *text = NULL;

    if (!json_is_null(s->content)) {
        text = content_text(s->content);
        if (!text)
            return KEVO_ERR_NOMEM;
        strip_think(text);
    }
    usage_read(k->m->api, root, out);
    if (!is_cut(s->stop) && text && *text) {
        set_status(out, "ok");
        out->text = text;
        return KEVO_OK;
    }
    kevo_free(text);
    if (is_cut(s->stop)) {
        set_status(out, "truncated");
        return set_error(out, k->key, "%s stopped at its output limit (%s) after %lld output "
                         "tokens, %lld of them reasoning: nothing usable; give it a larger "
                         "max_output", k->m->name, s->stop, (long long)out->tokens_out,
                         (long long)out->tokens_reasoning);
    }
    set_status(out, "refused");
    return set_error(out, k->key, "%s returned no text (%s)", k->m->name,
                     s->refusal ? s->refusal : s->stop ? s->stop : "empty content");
}

/* A 2xx reply. */
static enum kevo_status judge_ok(const struct call *k, const struct attempt *a,
                                 struct kevo_llm_reply *out)
{
    json_t *root = json_loadb(a->body.data ? a->body.data : "", a->body.len, 0, NULL);
    struct said s;
    enum kevo_status st;

    if (json_is_object(root) && reply_content(k->m->api, root, &s))
        st = judge_text(k, root, &s, out);
    else
        st = bad_reply(out, k, root ? "no content" : "not JSON", &a->body);
    json_decref(root);
    return st;
}

/* The API's own message in an error body (borrowed from root): {"error":{"message"}}
 * (OpenAI, Anthropic, newer vLLM) or {"message"} (older vLLM, SGLang); NULL if none. */
static const char *error_message(json_t *root)
{
    const char *msg = json_string_value(json_object_get(json_object_get(root, "error"),
                                                        "message"));
    return msg ? msg : json_string_value(json_object_get(root, "message"));
}

/* A non-2xx reply: the API's own message when it sent one, else an excerpt of the body. */
static enum kevo_status judge_http(const struct call *k, const struct attempt *a,
                                   struct kevo_llm_reply *out)
{
    json_t *root = json_loadb(a->body.data ? a->body.data : "", a->body.len, 0, NULL);
    const char *msg = error_message(root);
    char *clean = redact(msg ? msg : kevo_buf_str(&a->body), k->key);
    char ex[EXCERPT_MAX + 1];
    enum kevo_status st = KEVO_ERR_NOMEM;

    json_decref(root);
    if (clean) {
        kevo_llm_excerpt(clean, strlen(clean), ex);
        snprintf(out->status, sizeof out->status, "http_%ld", a->http);
        st = set_error(out, k->key, "HTTP %ld from %s: %s", a->http, k->url, ex);
    }
    kevo_free(clean);
    return st;
}

/* Transport failures: curl's own message names what went wrong (never a header). */
static enum kevo_status judge_curl(const struct call *k, const struct attempt *a,
                                   struct kevo_llm_reply *out, int *retry)
{
    const char *detail = a->errbuf[0] ? a->errbuf : curl_easy_strerror(a->cc);

    if (a->too_large) {
        set_status(out, "too_large");
        return set_error(out, k->key, "reply from %s larger than %zu bytes: cut off", k->url,
                         a->cap);
    }
    if (a->cc == CURLE_OPERATION_TIMEDOUT) {
        set_status(out, "timeout");
        *retry = 1;
        return set_error(out, k->key, "timeout: %s", detail);
    }
    /* a bad URL or certificate will not get better by asking again */
    *retry = a->cc != CURLE_URL_MALFORMAT && a->cc != CURLE_UNSUPPORTED_PROTOCOL &&
             a->cc != CURLE_PEER_FAILED_VERIFICATION && a->cc != CURLE_SSL_CACERT_BADFILE &&
             a->cc != CURLE_NOT_BUILT_IN;
    set_status(out, "network");
    return set_error(out, k->key, "%s: %s", k->url, detail);
}

/* The attempt's outcome as out's status; *retry when asking again may help. */
static enum kevo_status attempt_judge(const struct call *k, const struct attempt *a,
                                      struct kevo_llm_reply *out, int *retry)
{
    *retry = 0;
    out->http_status = a->cc == CURLE_OK ? (int)a->http : 0;
    if (a->cc != CURLE_OK)
        return judge_curl(k, a, out, retry);
    if (a->http >= 200 && a->http < 300)
        return judge_ok(k, a, out);
    *retry = a->http == 429 || a->http >= 500;
    return judge_http(k, a, out);
}

/* ---- self-healing: a parameter the model refuses ---- */

/* How providers say they refuse a parameter (matched without case): OpenAI "Unsupported
 * parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'
 * instead.", "Unsupported value: 'temperature' does not support 0.7 with this model. Only
 * the default (1) value is supported."; Anthropic "`temperature` is deprecated for this
 * model.", "`temperature` and `top_p` cannot both be specified for this model", "`temperature`
 * may only be set to 1 when thinking is enabled", "...: Extra inputs are not permitted";
 * other servers "unrecognized", "unknown", "not allowed". */
static const char *const refusal_words[] = {
    "unsupported", "not supported", "does not support", "deprecated", "not permitted",
    "not allowed", "cannot both", "only the default", "may only be set", "unrecognized",
    "unknown", "extra inputs",
};

/* Members without which there is no request: never left out. */
static int is_core_member(const char *name)
{
    return !strcmp(name, "model") || !strcmp(name, "messages") || !strcmp(name, "system") ||
           !strcmp(name, "stream");
}

static int is_name_char(char ch)
{
    return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9');
}

/* Where name first stands in msg as a word of its own ("max_tokens" is not in
 * "max_completion_tokens"); NULL if nowhere. */
static const char *word_in(const char *msg, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(msg, name); p && n; p = strstr(p + 1, name)) {
        if ((p == msg || !is_name_char(p[-1])) && !is_name_char(p[n]))
            return p;
    }
    return NULL;
}

/* The member of sent a refusal names: its "param" when that is one, else the one msg
 * names first (borrowed from sent or param); NULL if none. */
static const char *refused_member(json_t *sent, const char *param, const char *msg)
{
    const char *key, *best = NULL, *at = NULL, *p;
    json_t *v;

    if (param && json_object_get(sent, param) && !is_core_member(param))
        return param;
    json_object_foreach(sent, key, v) {
        p = is_core_member(key) ? NULL : word_in(msg, key);
        if (p && (!at || p < at)) {
            at = p;
            best = key;
        }
    }
    return best;
}

/* The most output a refusal allows: Anthropic "max_tokens: 32000 > 8192, which is the
 * maximum allowed number of output tokens for ...", OpenAI "max_tokens is too large:
 * 32000. This model supports at most 16384 completion tokens"; 0 when it says none. */
static json_int_t limit_in(const char *msg)
{
    const char *p = strstr(msg, "max_tokens: ");
    char *end = NULL;
    long long want, most;

    if (p) {
        want = strtoll(p + 12, &end, 10);
        if (end != p + 12 && strncmp(end, " > ", 3) == 0) {
            most = strtoll(end + 3, NULL, 10);
            if (most > 0 && most < want)
                return most;
        }
    }
    p = strstr(msg, "supports at most ");
    most = p ? strtoll(p + 17, NULL, 10) : 0;
    return most > 0 ? most : 0;
}

/* What to do about the refused member name: rename the output limit to the other name,
 * or leave the member out (never Anthropic's max_tokens, which it requires). 0: nothing. */
static int refusal_rule(const struct call *k, const char *name, const char *msg,
                        struct adapt *a)
{
    if (strlen(name) >= sizeof a->param)
        return 0;
    snprintf(a->param, sizeof a->param, "%s", name);
    a->kind = ADAPT_DROP;
    if (strcmp(name, "max_tokens") == 0 && k->m->api == KEVO_LLM_ANTHROPIC)
        return 0;
    if (strcmp(name, "max_tokens") == 0 && word_in(msg, "max_completion_tokens"))
        a->kind = ADAPT_RENAME;
    if (strcmp(name, "max_completion_tokens") == 0)
        a->kind = ADAPT_RENAME;
    if (a->kind == ADAPT_RENAME)
        snprintf(a->to, sizeof a->to, "%s",
                 strcmp(name, "max_tokens") == 0 ? "max_completion_tokens" : "max_tokens");
    return 1;
}

/* The change a 400's body asks of k's request into *a: 1, or 0 when it names nothing
 * kevo may change (a is then empty). */
static int heal_rule(const struct call *k, const struct attempt *at, struct adapt *a)
{
    json_t *root = json_loadb(at->body.data ? at->body.data : "", at->body.len, 0, NULL);
    const char *msg = error_message(root), *name = NULL;
    const char *param = json_string_value(json_object_get(json_object_get(root, "error"),
                                                          "param"));
    const char *lim = json_object_get(k->sent, "max_completion_tokens") ? "max_completion_tokens"
                                                                         : "max_tokens";
    json_int_t most;
    int found = 0;

    memset(a, 0, sizeof *a);
    if (!msg)
        msg = kevo_buf_str(&at->body);
    most = limit_in(msg);
    if (most && json_object_get(k->sent, lim)) {
        a->kind = ADAPT_LIMIT;
        a->limit = most;
        snprintf(a->param, sizeof a->param, "%s", lim);
        found = json_integer_value(json_object_get(k->sent, lim)) > most;
    } else if (k->m->api == KEVO_LLM_OPENAI && strcasestr(msg, "maximum context length") &&
               json_object_get(k->sent, lim)) {
        /* vLLM, SGLang: the limit and this prompt do not fit the context; without a limit
         * the server takes what is left of it. A fact about this request, not the model:
         * later calls keep their limit (and the cost cap's reserve stays true) */
        a->kind = ADAPT_DROP;
        a->once = 1;
        snprintf(a->param, sizeof a->param, "%s", lim);
        found = 1;
    } else {
        for (size_t i = 0; !name && i < sizeof refusal_words / sizeof refusal_words[0]; i++) {
            if (strcasestr(msg, refusal_words[i]))
                name = refused_member(k->sent, param, msg);
        }
        found = name && refusal_rule(k, name, msg, a);
    }
    json_decref(root);
    if (!found)
        memset(a, 0, sizeof *a);
    return found;
}

/* a (for k's model) into the client's table unless it is there: 1 when this call learned
 * it, 0 when another call did first or the table is full, -1 out of memory. */
static int adapt_keep(struct kevo_llm *c, const struct call *k, const struct adapt *a)
{
    int r = 1;

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_adapts && r == 1; i++) {
        const struct adapt *x = &c->adapts[i];
        if (!strcmp(x->model, k->mkey) && x->kind == a->kind && !strcmp(x->param, a->param) &&
            (x->kind != ADAPT_LIMIT || x->limit <= a->limit))
            r = 0;
    }
    if (r == 1 && c->n_adapts < ADAPT_MAX) {
        c->adapts[c->n_adapts] = *a;
        c->adapts[c->n_adapts].model = kevo_strdup(k->mkey);
        if (c->adapts[c->n_adapts].model)
            c->n_adapts++;
        else
            r = -1;
    } else if (r == 1) {
        r = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return r;
}

/* What a does, for a person, on one printable line: "temperature left out". */
static void adapt_say(const struct adapt *a, char *what, size_t n)
{
    if (a->kind == ADAPT_DROP)
        snprintf(what, n, "%s left out", a->param);
    else if (a->kind == ADAPT_RENAME)
        snprintf(what, n, "%s sent as %s", a->param, a->to);
    else
        snprintf(what, n, "%s lowered to %lld", a->param, (long long)a->limit);
    for (char *p = what; *p; p++) {
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            *p = ' ';
    }
}

/* What a does, "; "-joined onto out->adapted. */
static enum kevo_status adapted_add(struct kevo_llm_reply *out, const struct adapt *a)
{
    char what[160];
    char *s;

    adapt_say(a, what, sizeof what);
    s = out->adapted ? kevo_strdupf("%s; %s", out->adapted, what) : kevo_strdup(what);
    if (!s)
        return KEVO_ERR_NOMEM;
    kevo_free(out->adapted);
    out->adapted = s;
    return KEVO_OK;
}

/* A 400 (or 422) that refuses a parameter: k's request changed, for this call and (kept
 * by the client) every later one of the model; *again when a changed request is ready. */
static enum kevo_status call_heal(struct kevo_llm *c, struct call *k, const struct attempt *at,
                                  struct kevo_llm_reply *out, int *again)
{
    struct adapt a;
    char *before = NULL, what[160];
    enum kevo_status st;
    int learned;

    *again = 0;
    if (!heal_rule(k, at, &a))
        return KEVO_OK;
    if (a.once && k->once.once)   /* this call was changed once already */
        return KEVO_OK;
    if (a.once)
        k->once = a;
    learned = a.once ? 1 : adapt_keep(c, k, &a);
    if (learned < 0)
        return KEVO_ERR_NOMEM;
    before = kevo_strdup(k->body);
    if (!before)
        return KEVO_ERR_NOMEM;
    st = call_body(c, k);
    *again = !st && strcmp(before, k->body) != 0;
    kevo_free(before);
    if (st || !learned || !*again)
        return st;
    adapt_say(&a, what, sizeof what);
    KEVO_INFO("llm: %s refused a parameter (HTTP %ld): %s, in %s", k->m->name, at->http, what,
              a.once ? "this call" : "this call and every later one");
    return adapted_add(out, &a);
}

/* ---- the call ---- */

/* The sleep before attempt i+1: backoff_s * 2^(i-1), +-50% jitter, at least Retry-After,
 * at most what is left of the wait budget. < 0: the budget is spent, give up. */
static double backoff_wait(struct kevo_llm *c, int i, double retry_after, double left)
{
    double w = c->lim.backoff_s * ldexp(1.0, i - 1 > 60 ? 60 : i - 1) * (0.5 + rng_unit(c));

    if (retry_after > w)
        w = retry_after;
    if (w <= 0)
        return 0;
    if (left <= 0)
        return -1;
    return w < left ? w : left;
}

/* Forget a failed attempt's outcome before the next one. */
static void reply_reset(struct kevo_llm_reply *out)
{
    kevo_free(out->text);
    kevo_free(out->error);
    out->text = out->error = NULL;
    out->tokens_in = out->tokens_out = out->tokens_cached_in = out->tokens_reasoning = 0;
    out->status[0] = '\0';
}

/* Attempts until one is final: transient failures are retried up to max_attempts with
 * backoff; a refused parameter changes the request, which goes at once, outside that
 * count (at most HEAL_MAX times: each change must be new). */
static enum kevo_status call_run(struct kevo_llm *c, struct call *k, struct kevo_llm_reply *out)
{
    enum kevo_status st = KEVO_OK;
    struct attempt a;
    double waited = 0, w;
    int retry = 0, tries = 0, heals = 0, again = 0;

    for (;;) {
        reply_reset(out);
        out->attempts++;
        tries++;
        st = attempt_run(c, k, &a);
        if (!st)
            st = attempt_judge(k, &a, out, &retry);
        again = 0;
        if (!st && a.cc == CURLE_OK && (a.http == 400 || a.http == 422) && heals < HEAL_MAX)
            st = call_heal(c, k, &a, out, &again);
        kevo_buf_free(&a.body);
        if (!st && again) {
            heals++;
            tries--;
            continue;
        }
        if (st || !retry || tries >= c->lim.max_attempts)
            break;
        w = backoff_wait(c, tries, a.retry_after, c->lim.max_wait_s - waited);
        if (w < 0)
            break;
        KEVO_INFO("llm: %s attempt %d of %d: %s; again in %.2f s", k->m->name, tries,
                  c->lim.max_attempts, out->status, w);
        sleep_s(w);
        waited += w;
    }
    if (!st && tries > 1 && strcmp(out->status, "ok") != 0)
        st = set_error(out, k->key, "gave up after %d attempts (%.1f s of backoff): %s",
                       out->attempts, waited, out->error ? out->error : out->status);
    if (!st && out->adapted && strcmp(out->status, "ok") != 0)
        st = set_error(out, k->key, "%s (after adapting the request: %s)",
                       out->error ? out->error : out->status, out->adapted);
    return st;
}

enum kevo_status kevo_llm_complete(struct kevo_llm *c, const struct kevo_llm_model *m,
                                   const struct kevo_llm_req *r, struct kevo_llm_reply *out)
{
    enum kevo_status st = KEVO_ERR_INVALID;
    struct call k;
    double t0 = kevo_now();

    memset(out, 0, sizeof *out);
    memset(&k, 0, sizeof k);
    if (!c || !m || !r || !r->prompt || !m->name || !m->base_url)
        goto out;
    st = call_prepare(c, m, r, &k, out);
    if (st || out->status[0])
        goto out;
    st = call_run(c, &k, out);
out:
    out->latency_s = kevo_now() - t0;
    if (st)
        kevo_llm_reply_clear(out);
    else if (strcmp(out->status, "ok") != 0)
        KEVO_WARN("llm: %s: %s: %s", m->name, out->status, out->error ? out->error : "");
    call_free(&k);
    return st;
}

void kevo_llm_reply_clear(struct kevo_llm_reply *r)
{
    if (!r)
        return;
    kevo_free(r->text);
    kevo_free(r->error);
    kevo_free(r->adapted);
    memset(r, 0, sizeof *r);
}

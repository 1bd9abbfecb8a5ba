/*
 * llm - chat completions over libcurl + jansson (see llm.h, docs/llm.md).
 *
 * A call is: look up the key, build the URL, body and headers once, then up to
 * max_attempts attempts. Each attempt takes one of max_concurrent slots (an easy handle
 * kept for connection reuse), so backoff sleeps never hold a slot. Every outcome of an
 * attempt becomes a reply status; only our own failures (out of memory) are errors.
 *
 * Secrets: the key lives in the call's key string and header list only; both are wiped
 * before they are freed. Every error string passes through set_error, which removes the
 * key even when a server echoes it back in its reply.
 */
#include "ctl/llm.h"
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

#define OPENAI_BASE      "https://api.openai.com/v1"
#define ANTHROPIC_BASE   "https://api.anthropic.com/v1"
#define ANTHROPIC_VER    "2023-06-01"
#define ANTHROPIC_MAXTOK 8192
#define EXCERPT_MAX      200             /* printable characters of a reply in a message */
#define KEY_FILE_MAX     (64 * 1024)     /* a key file is a few lines */

struct kevo_llm {
    struct kevo_llm_limits lim;
    int max_concurrent;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in_flight;                       /* attempts holding a slot (guarded by mu) */
    CURL **idle;                         /* handles of free slots, n_idle of them (mu) */
    int n_idle;
    atomic_uint_fast64_t rng;            /* jitter state (splitmix64 counter) */
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
static char *redact(const char *s, const char *key)
{
    struct kevo_buf b;
    size_t klen = key ? strlen(key) : 0;
    const char *p = s, *hit;

    if (!klen)
        return kevo_strdup(s);
    kevo_buf_init(&b, 0);
    for (hit = strstr(p, key); hit; hit = strstr(p, key)) {
        if (kevo_buf_add(&b, p, (size_t)(hit - p)) || kevo_buf_adds(&b, "[key]"))
            goto fail;
        p = hit + klen;
    }
    if (kevo_buf_adds(&b, p))
        goto fail;
    return kevo_buf_take(&b);
fail:
    kevo_buf_free(&b);
    return NULL;
}

/* Up to EXCERPT_MAX printable ASCII characters of s (n bytes) into out; the rest become
 * spaces, so a reply cannot put control sequences or lines into a message. */
static void excerpt(const char *s, size_t n, char out[EXCERPT_MAX + 1])
{
    size_t i = 0;
    for (; i < n && i < EXCERPT_MAX; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
    }
    out[i] = '\0';
    if (n > EXCERPT_MAX && EXCERPT_MAX >= 3)
        memcpy(out + EXCERPT_MAX - 3, "...", 3);
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

/* ---- model specs ---- */

static int is_env_name(const char *s)
{
    if (!*s || !(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
        return 0;
    for (; *s; s++) {
        if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9')))
            return 0;
    }
    return 1;
}

/* Model ids and URLs are printable and have no spaces. */
static int is_token(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++) {
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    }
    return 1;
}

static enum kevo_status spec_error(const char *spec, const char *what, char **msg)
{
    char ex[EXCERPT_MAX + 1];
    excerpt(spec, strlen(spec), ex);
    if (!msg)
        return KEVO_ERR_PARSE;
    struct kevo_buf b;
    kevo_buf_init(&b, 0);
    if (kevo_buf_addf(&b, "model spec '%s': %s (expected "
                      "PROVIDER:MODEL[@BASE_URL][#KEY_ENV][*WEIGHT], PROVIDER openai or "
                      "anthropic)", ex, what)) {
        kevo_buf_free(&b);
        return KEVO_ERR_NOMEM;
    }
    *msg = kevo_buf_take(&b);
    return *msg ? KEVO_ERR_PARSE : KEVO_ERR_NOMEM;
}

/* Cut "*WEIGHT" off the end of s. */
static const char *spec_weight(char *s, double *w)
{
    char *star = strrchr(s, '*'), *end = NULL;
    *w = 1.0;
    if (!star)
        return NULL;
    errno = 0;
    *w = strtod(star + 1, &end);
    if (end == star + 1 || *end || errno || !isfinite(*w) || *w <= 0)
        return "the weight after '*' must be a positive number";
    *star = '\0';
    return NULL;
}

/* Cut "#KEY_ENV" off the end of s into *env (borrowed from s). */
static const char *spec_key_env(char *s, const char **env)
{
    char *hash = strrchr(s, '#');
    *env = NULL;
    if (!hash)
        return NULL;
    if (!is_env_name(hash + 1))
        return "the name after '#' must be an environment variable name";
    *hash = '\0';
    *env = hash + 1;
    return NULL;
}

/* The '@' that starts the base URL: a model id may hold '@' (Vertex-style versions). */
static char *spec_find_base(char *rest)
{
    char *a = strstr(rest, "@http://"), *b = strstr(rest, "@https://");
    if (a && b)
        return a < b ? a : b;
    return a ? a : b;
}

/* Split "PROVIDER:MODEL[@BASE]" (s is modified) and check each part. */
static const char *spec_split(char *s, enum kevo_llm_api *api, char **model, char **base)
{
    char *colon = strchr(s, ':'), *at;
    if (!colon)
        return "no ':' after the provider";
    *colon = '\0';
    if (strcmp(s, "openai") == 0)
        *api = KEVO_LLM_OPENAI;
    else if (strcmp(s, "anthropic") == 0)
        *api = KEVO_LLM_ANTHROPIC;
    else
        return "unknown provider";
    *model = colon + 1;
    *base = NULL;
    at = spec_find_base(*model);
    if (at) {
        *at = '\0';
        *base = at + 1;
    } else if (strchr(*model, '@')) {
        return "the base URL after '@' must start with http:// or https://";
    }
    if (!is_token(*model))
        return "the model id is empty or has spaces or control characters";
    if (*base) {
        /* spec_find_base found "http://" or "https://": the host follows "://" */
        const char *host = strstr(*base, "://") + 3;
        size_t n = strlen(*base);
        if (!is_token(*base) || !*host || *host == '/')
            return "the base URL has no host, or has spaces or control characters";
        while ((*base)[n - 1] == '/')      /* stops at the host's first character */
            (*base)[--n] = '\0';
    }
    return NULL;
}

enum kevo_status kevo_llm_model_parse(const char *spec, struct kevo_llm_model *out, char **msg)
{
    enum kevo_status st = KEVO_OK;
    char *s = NULL, *model = NULL, *base = NULL;
    const char *why = NULL, *env = NULL;
    double w = 1.0;

    memset(out, 0, sizeof *out);
    if (msg)
        *msg = NULL;
    if (!spec)
        return KEVO_ERR_INVALID;
    s = kevo_strdup(spec);
    if (!s)
        return KEVO_ERR_NOMEM;
    why = spec_weight(s, &w);
    if (!why)
        why = spec_key_env(s, &env);
    if (!why)
        why = spec_split(s, &out->api, &model, &base);
    if (why) {
        st = spec_error(spec, why, msg);
        goto out;
    }
    out->weight = w;
    out->name = kevo_strdup(model);
    out->base_url = kevo_strdup(base ? base
                                     : out->api == KEVO_LLM_OPENAI ? OPENAI_BASE : ANTHROPIC_BASE);
    out->key_env = kevo_strdup(env ? env
                                   : out->api == KEVO_LLM_OPENAI ? "OPENAI_API_KEY"
                                                                 : "ANTHROPIC_API_KEY");
    if (!out->name || !out->base_url || !out->key_env)
        st = KEVO_ERR_NOMEM;
out:
    if (st)
        kevo_llm_model_clear(out);
    kevo_free(s);
    return st;
}

void kevo_llm_model_clear(struct kevo_llm_model *m)
{
    if (!m)
        return;
    kevo_free(m->name);
    kevo_free(m->base_url);
    kevo_free(m->key_env);
    memset(m, 0, sizeof *m);
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
    l->total_timeout_s = 300;
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

/* What stays the same over a call's attempts. */
struct call {
    const struct kevo_llm_model *m;
    char *key;                           /* secret: free_secret */
    char *url;
    char *body;                          /* JSON (jansson's allocation) */
    struct curl_slist *headers;          /* holds the key: headers_free */
};

static json_t *msg_obj(const char *role, const char *content)
{
    return json_pack("{s:s, s:s}", "role", role, "content", content);
}

/* The request body of either API as JSON text; NULL when out of memory. */
static char *body_build(const struct kevo_llm_model *m, const struct kevo_llm_req *r)
{
    json_t *doc = json_object(), *msgs = json_array();
    char *text = NULL;
    int bad = !doc || !msgs;

    bad |= json_object_set_new(doc, "model", json_string(m->name));
    if (m->api == KEVO_LLM_OPENAI && r->system)
        bad |= json_array_append_new(msgs, msg_obj("system", r->system));
    else if (r->system)
        bad |= json_object_set_new(doc, "system", json_string(r->system));
    bad |= json_array_append_new(msgs, msg_obj("user", r->prompt));
    bad |= json_object_set(doc, "messages", msgs);
    if (r->temperature >= 0)
        bad |= json_object_set_new(doc, "temperature", json_real(r->temperature));
    if (r->max_tokens > 0 || m->api == KEVO_LLM_ANTHROPIC)
        bad |= json_object_set_new(doc, "max_tokens",
                                   json_integer(r->max_tokens > 0 ? r->max_tokens
                                                                  : ANTHROPIC_MAXTOK));
    if (!bad)
        text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(msgs);
    json_decref(doc);
    return text;
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
    } else if (k->key && !is_token(k->key)) {
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
static enum kevo_status call_prepare(const struct kevo_llm_model *m,
                                     const struct kevo_llm_req *r, struct call *k,
                                     struct kevo_llm_reply *out)
{
    enum kevo_status st;

    k->m = m;
    st = call_key(k, out);
    if (st || out->status[0])
        return st;
    k->url = kevo_strdupf("%s/%s", m->base_url,
                          m->api == KEVO_LLM_OPENAI ? "chat/completions" : "messages");
    k->body = body_build(m, r);
    k->headers = headers_build(m->api, k->key);
    if (!k->url || !k->body || !k->headers)
        return KEVO_ERR_NOMEM;
    return KEVO_OK;
}

static void call_free(struct call *k)
{
    free_secret(k->key);
    kevo_free(k->url);
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

static int64_t usage_int(json_t *root, const char *name)
{
    json_t *v = json_object_get(json_object_get(root, "usage"), name);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* The content node of a 2xx reply (json null: the model declined), *why a reason the
 * API gave for stopping; NULL when the reply does not have the API's shape. */
static json_t *reply_content(enum kevo_llm_api api, json_t *root, const char **why)
{
    json_t *ch, *msg, *content;

    *why = NULL;
    if (api == KEVO_LLM_ANTHROPIC) {
        *why = json_string_value(json_object_get(root, "stop_reason"));
        content = json_object_get(root, "content");
        return json_is_array(content) ? content : NULL;
    }
    ch = json_array_get(json_object_get(root, "choices"), 0);
    msg = json_object_get(ch, "message");
    if (!json_is_object(msg))
        return NULL;
    *why = json_string_value(json_object_get(msg, "refusal"));
    if (!*why)
        *why = json_string_value(json_object_get(ch, "finish_reason"));
    content = json_object_get(msg, "content");
    if (!content || json_is_null(content))
        return json_null();     /* a declined answer: "content": null beside a refusal */
    return json_is_string(content) || json_is_array(content) ? content : NULL;
}

static enum kevo_status bad_reply(struct kevo_llm_reply *out, const struct call *k,
                                  const char *what, const struct kevo_buf *body)
{
    char ex[EXCERPT_MAX + 1];
    char *clean = redact(kevo_buf_str(body), k->key);   /* before cutting: no key prefix */

    if (!clean)
        return KEVO_ERR_NOMEM;
    excerpt(clean, strlen(clean), ex);
    kevo_free(clean);
    set_status(out, "bad_reply");
    return set_error(out, k->key, "%s from %s: %s; reply: '%s'", what, k->url,
                     k->m->api == KEVO_LLM_OPENAI ? "not a chat completion" : "not a message",
                     ex);
}

/* The text and usage of a reply of the API's shape into out: "ok" or "refused". */
static enum kevo_status judge_text(const struct call *k, json_t *root, json_t *content,
                                   const char *why, struct kevo_llm_reply *out)
{
    int openai = k->m->api == KEVO_LLM_OPENAI;
    char *text = NULL;

    if (!json_is_null(content)) {
        text = content_text(content);
        if (!text)
            return KEVO_ERR_NOMEM;
    }
    out->tokens_in = usage_int(root, openai ? "prompt_tokens" : "input_tokens");
    out->tokens_out = usage_int(root, openai ? "completion_tokens" : "output_tokens");
    if (text && *text) {
        set_status(out, "ok");
        out->text = text;
        return KEVO_OK;
    }
    kevo_free(text);
    set_status(out, "refused");
    return set_error(out, k->key, "%s returned no text (%s)", k->m->name,
                     why ? why : "empty content");
}

/* A 2xx reply. */
static enum kevo_status judge_ok(const struct call *k, const struct attempt *a,
                                 struct kevo_llm_reply *out)
{
    json_t *root = json_loadb(a->body.data ? a->body.data : "", a->body.len, 0, NULL);
    json_t *content = NULL;
    const char *why = NULL;
    enum kevo_status st;

    if (json_is_object(root))
        content = reply_content(k->m->api, root, &why);
    if (!content)
        st = bad_reply(out, k, root ? "no content" : "not JSON", &a->body);
    else
        st = judge_text(k, root, content, why, out);
    json_decref(root);
    return st;
}

/* A non-2xx reply: the API's own message when it sent one ({"error":{"message"}} in both
 * APIs), else an excerpt of the body. */
static enum kevo_status judge_http(const struct call *k, const struct attempt *a,
                                   struct kevo_llm_reply *out)
{
    json_t *root = json_loadb(a->body.data ? a->body.data : "", a->body.len, 0, NULL);
    const char *msg = json_string_value(json_object_get(json_object_get(root, "error"),
                                                        "message"));
    char *clean = redact(msg ? msg : kevo_buf_str(&a->body), k->key);
    char ex[EXCERPT_MAX + 1];
    enum kevo_status st = KEVO_ERR_NOMEM;

    json_decref(root);
    if (clean) {
        excerpt(clean, strlen(clean), ex);
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
    out->tokens_in = out->tokens_out = 0;
    out->status[0] = '\0';
}

static enum kevo_status call_run(struct kevo_llm *c, const struct call *k,
                                 struct kevo_llm_reply *out)
{
    enum kevo_status st = KEVO_OK;
    struct attempt a;
    double waited = 0, w;
    int retry = 0;

    for (int i = 1; i <= c->lim.max_attempts; i++) {
        reply_reset(out);
        out->attempts = i;
        st = attempt_run(c, k, &a);
        if (!st)
            st = attempt_judge(k, &a, out, &retry);
        kevo_buf_free(&a.body);
        if (st || !retry || i == c->lim.max_attempts)
            break;
        w = backoff_wait(c, i, a.retry_after, c->lim.max_wait_s - waited);
        if (w < 0)
            break;
        KEVO_INFO("llm: %s attempt %d of %d: %s; again in %.2f s", k->m->name, i,
                  c->lim.max_attempts, out->status, w);
        sleep_s(w);
        waited += w;
    }
    if (!st && out->attempts > 1 && strcmp(out->status, "ok") != 0)
        st = set_error(out, k->key, "gave up after %d attempts (%.1f s of backoff): %s",
                       out->attempts, waited, out->error ? out->error : out->status);
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
    st = call_prepare(m, r, &k, out);
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
    memset(r, 0, sizeof *r);
}

/*
 * llm_spec - model specs: "PROVIDER:MODEL[@BASE_URL][#KEY_ENV][*WEIGHT][?SETTINGS]" into a
 * struct kevo_llm_model (llm.h, docs/llm.md "Model specs" and "Model settings").
 *
 * The settings come first off the text (everything after the first '?'), so a JSON value
 * of "extra" may hold '*', '#' or '@'; then the weight and the key variable off the end,
 * then the provider, the model id and the base URL. Every part is checked; a spec that
 * does not parse leaves no half-filled model behind. Pure functions: thread-safe.
 */
#include "ctl/llm.h"
#include "ctl/llm_int.h"
#include "base/buf.h"
#include "base/mem.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SETTING_INT_MAX  10000000       /* output and thinking tokens: 10^7 is plenty */
#define THINKING_MIN     1024           /* Anthropic's smallest budget */
#define EFFORT_MAX       16             /* "minimal", "medium", "xhigh", ... */
#define SETTINGS_KNOWN   "max_output, temperature, reasoning_effort, thinking, extra"

static const char nomem[] = "out of memory";   /* a "why" that is KEVO_ERR_NOMEM */

/* ---- shared helpers (llm_int.h) ---- */

int kevo_llm_is_token(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++) {
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    }
    return 1;
}

void kevo_llm_excerpt(const char *s, size_t n, char out[KEVO_LLM_EXCERPT_MAX + 1])
{
    size_t i = 0;
    for (; i < n && i < KEVO_LLM_EXCERPT_MAX; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
    }
    out[i] = '\0';
    if (n > KEVO_LLM_EXCERPT_MAX && KEVO_LLM_EXCERPT_MAX >= 3)
        memcpy(out + KEVO_LLM_EXCERPT_MAX - 3, "...", 3);
}

/* ---- the parts before the settings ---- */

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

static enum kevo_status spec_error(const char *spec, const char *what, char **msg)
{
    char ex[KEVO_LLM_EXCERPT_MAX + 1];
    struct kevo_buf b;

    if (!msg)
        return KEVO_ERR_PARSE;
    kevo_llm_excerpt(spec, strlen(spec), ex);
    kevo_buf_init(&b, 0);
    if (kevo_buf_addf(&b, "model spec '%s': %s (expected "
                      "PROVIDER:MODEL[@BASE_URL][#KEY_ENV][*WEIGHT][?SETTINGS], PROVIDER openai "
                      "or anthropic)", ex, what)) {
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
    if (!kevo_llm_is_token(*model))
        return "the model id is empty or has spaces or control characters";
    if (*base) {
        /* spec_find_base found "http://" or "https://": the host follows "://" */
        const char *host = strstr(*base, "://") + 3;
        size_t n = strlen(*base);
        if (!kevo_llm_is_token(*base) || !*host || *host == '/')
            return "the base URL has no host, or has spaces or control characters";
        while ((*base)[n - 1] == '/')      /* stops at the host's first character */
            (*base)[--n] = '\0';
    }
    return NULL;
}

/* ---- settings: NAME=VALUE joined by '&' ---- */

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* s with its %XX escapes decoded, in place; 0 on a bad escape (or %00). */
static int pct_decode(char *s)
{
    char *w = s;
    for (const char *p = s; *p; p++) {
        int hi, lo;
        if (*p != '%') {
            *w++ = *p;
            continue;
        }
        hi = hex_val(p[1]);
        lo = hi < 0 ? -1 : hex_val(p[2]);
        if (lo < 0 || hi * 16 + lo == 0)
            return 0;
        *w++ = (char)(hi * 16 + lo);
        p += 2;
    }
    *w = '\0';
    return 1;
}

/* A whole decimal integer in [lo, hi]. */
static int int_in(const char *v, long lo, long hi, int *out)
{
    char *end = NULL;
    long x;
    errno = 0;
    x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi)
        return 0;
    *out = (int)x;
    return 1;
}

/* A JSON object that may be merged into a request body: compact text into *out. */
static const char *extra_parse(const char *v, char **out)
{
    json_t *j = json_loads(v, 0, NULL);
    static const char *const owned[] = { "model", "messages", "system", "stream" };
    const char *why = NULL;

    if (!json_is_object(j))
        why = "is not a JSON object";
    for (size_t i = 0; !why && i < sizeof owned / sizeof owned[0]; i++) {
        if (json_object_get(j, owned[i]))
            why = "may not set model, messages, system or stream (kevo's own)";
    }
    if (!why) {
        *out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
        if (!*out)
            why = nomem;
    }
    json_decref(j);
    return why;
}

/* The value of setting name into m; NULL, or what is wrong with it (a constant). */
static const char *setting_value(struct kevo_llm_model *m, const char *name, const char *v)
{
    char *end = NULL;
    size_t n = strlen(v);

    if (strcmp(name, "max_output") == 0)
        return int_in(v, 1, SETTING_INT_MAX, &m->max_output) ? NULL
               : "must be a whole number of tokens from 1 to 10000000";
    if (strcmp(name, "thinking") == 0) {
        if (m->api != KEVO_LLM_ANTHROPIC)
            return "is Anthropic's extended thinking (openai models take reasoning_effort)";
        return int_in(v, THINKING_MIN, SETTING_INT_MAX, &m->thinking) ? NULL
               : "must be a whole number of tokens from 1024 (Anthropic's least) to 10000000";
    }
    if (strcmp(name, "temperature") == 0) {
        errno = 0;
        m->temperature = strtod(v, &end);
        m->has_temperature = 1;
        return end != v && !*end && !errno && m->temperature >= 0 && m->temperature <= 2
               ? NULL : "must be a number from 0 to 2";
    }
    if (strcmp(name, "reasoning_effort") == 0) {
        if (m->api != KEVO_LLM_OPENAI)
            return "is OpenAI's (anthropic models take thinking)";
        if (!n || n > EFFORT_MAX || strspn(v, "abcdefghijklmnopqrstuvwxyz") != n)
            return "must be a word in lower-case letters (minimal, low, medium, high, ...)";
        m->reasoning_effort = kevo_strdup(v);
        return m->reasoning_effort ? NULL : nomem;
    }
    if (strcmp(name, "extra") == 0)
        return extra_parse(v, &m->extra);
    return "is not a setting (known: " SETTINGS_KNOWN ")";
}

/* "setting 'NAME': WHAT" (the name cut to printable characters) into why[n]. */
static const char *setting_say(char *why, size_t n, const char *name, const char *what)
{
    char ex[KEVO_LLM_EXCERPT_MAX + 1];
    kevo_llm_excerpt(name, strlen(name) > 40 ? 40 : strlen(name), ex);
    snprintf(why, n, "setting '%s' %s", ex, what);
    return why;
}

/* The settings text s (modified) into m; NULL, or why not (in why[n]). */
static const char *spec_settings(char *s, struct kevo_llm_model *m, char *why, size_t n)
{
    static const char *const names[] = { "max_output", "temperature", "reasoning_effort",
                                         "thinking", "extra" };
    unsigned seen = 0;
    char *next;

    for (char *item = s; item; item = next) {
        char *eq = strchr(item, '=');
        const char *bad;
        next = strchr(item, '&');
        if (next)
            *next++ = '\0';
        if (!*item)
            return "an empty setting: nothing after '?', or '&' twice";
        if (!eq)
            return setting_say(why, n, item, "has no '=VALUE'");
        *eq = '\0';
        for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strcmp(item, names[i]) == 0 && (seen & (1u << i)))
                return setting_say(why, n, item, "is given twice");
            if (strcmp(item, names[i]) == 0)
                seen |= 1u << i;
        }
        if (!pct_decode(eq + 1))
            return setting_say(why, n, item, "has a bad %-escape (%XX, XX hexadecimal, not 00)");
        bad = setting_value(m, item, eq + 1);
        if (bad == nomem)
            return nomem;
        if (bad)
            return setting_say(why, n, item, bad);
    }
    if (m->thinking && m->thinking >= (m->max_output ? m->max_output : KEVO_LLM_MAX_OUTPUT)) {
        snprintf(why, n, "setting 'thinking' must be below the output limit (%d; raise "
                 "max_output)", m->max_output ? m->max_output : KEVO_LLM_MAX_OUTPUT);
        return why;
    }
    return NULL;
}

/* ---- the spec ---- */

enum kevo_status kevo_llm_model_parse(const char *spec, struct kevo_llm_model *out, char **msg)
{
    enum kevo_status st = KEVO_OK;
    char *s = NULL, *model = NULL, *base = NULL, *settings = NULL, why_buf[300];
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
    settings = strchr(s, '?');
    if (settings)
        *settings++ = '\0';
    why = spec_weight(s, &w);
    if (!why)
        why = spec_key_env(s, &env);
    if (!why)
        why = spec_split(s, &out->api, &model, &base);
    if (!why && settings)
        why = spec_settings(settings, out, why_buf, sizeof why_buf);
    if (why) {
        st = why == nomem ? KEVO_ERR_NOMEM : spec_error(spec, why, msg);
        goto out;
    }
    out->weight = w;
    out->name = kevo_strdup(model);
    out->base_url = kevo_strdup(base ? base
                                     : out->api == KEVO_LLM_OPENAI ? KEVO_LLM_OPENAI_BASE
                                                                   : KEVO_LLM_ANTHROPIC_BASE);
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
    kevo_free(m->reasoning_effort);
    kevo_free(m->extra);
    memset(m, 0, sizeof *m);
}

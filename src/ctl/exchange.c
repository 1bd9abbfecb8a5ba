/*
 * exchange - LLM calls across an air gap (exchange.h, docs/llm.md "Air-gapped clusters"):
 * `kevo llm pending` (the calls a run's offline sessions could not make, as JSON lines),
 * `kevo llm answer` (those calls made on a machine with a network, with the models,
 * limits and cost cap a run would use: llmops), `kevo llm import` (the replies stored for
 * the run's next session), and the call a resumed session rebuilds from an imported reply.
 *
 * Files are JSON lines, one object a line (blank lines are skipped). A file is checked
 * whole before anything is spent or stored: answer makes no call and import stores
 * nothing when a line is bad, and the message names every bad line (up to SHOWN_ERRORS)
 * with its field. No key is ever read into a line: specs name a key's variable only.
 * A pending file crossed the gap and may have been edited: answer takes from a line's spec
 * only provider:name and its "?" settings, never where to send a request or which key
 * variable to send (model_where). Import caps what a line may claim: a reply at the live
 * path's cap, each token count at TOKENS_MAX, the file at IMPORT_MAX.
 *
 * Thread-safety: answer's replies come back on llmops' threads; its state is behind a
 * mutex. Everything else runs on the caller's thread.
 */
#include "ctl/exchange.h"

#include "base/buf.h"
#include "base/mem.h"
#include "ctl/llm.h"
#include "ctl/run.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOWN_ERRORS 20                /* bad lines named in one message */
#define HASH_SHOWN 12                  /* prompt hash digits in a call id */
#define OUT_MAX ((size_t)1 << 30)      /* the pending lines of one run */
#define IMPORT_MAX ((size_t)256 << 20) /* a file of replies (kevo_exchange_import) */
#define TOKENS_MAX 1000000000          /* a usage count of one imported call */

/* ---- messages about lines ---- */

struct errs {
    struct kevo_buf b;
    const char *name;                  /* the file, as the user named it */
    int n;
};

static void bad(struct errs *e, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bad(struct errs *e, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (e->n++ >= SHOWN_ERRORS)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kevo_buf_say(&e->b, "%s%s:%d: %s", e->b.len ? "\n" : "", e->name, line, msg);
}

/* The message for a file with bad lines (kevo_free it), what was done about it last. */
static char *errs_take(struct errs *e, const char *outcome)
{
    if (e->n > SHOWN_ERRORS)
        kevo_buf_say(&e->b, "\n... and %d more bad line(s)", e->n - SHOWN_ERRORS);
    kevo_buf_say(&e->b, "\n%s: %d bad line(s); %s", e->name, e->n, outcome);
    return kevo_buf_take(&e->b);
}

/* The next line of text from *pos: its start and length (no '\n', no trailing '\r');
 * 0 at the end. */
static int next_line(const char *text, size_t len, size_t *pos, const char **s, size_t *n)
{
    const char *nl;

    if (*pos >= len)
        return 0;
    *s = text + *pos;
    nl = memchr(*s, '\n', len - *pos);
    *n = nl ? (size_t)(nl - *s) : len - *pos;
    *pos += *n + (nl != NULL);
    if (*n && (*s)[*n - 1] == '\r')
        (*n)--;
    return 1;
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

/* One line as a JSON object, or NULL after saying why. */
static json_t *line_object(struct errs *e, int line, const char *s, size_t n)
{
    json_error_t je;
    json_t *o = json_loadb(s, n, 0, &je);

    if (!o)
        bad(e, line, "not JSON (column %d: %s)", je.column, je.text);
    else if (!json_is_object(o))
        bad(e, line, "not a JSON object");
    if (o && !json_is_object(o)) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

/* ---- call ids ---- */

/* "ROWID-HASH12" of call id with prompt hash h, into out[48]. */
static void call_id(char out[48], int64_t id, const char *h)
{
    snprintf(out, 48, "%lld-%.*s", (long long)id, HASH_SHOWN, h);
}

/* Parse a call id: its row and hash prefix (hex[HASH_SHOWN + 1]); -1 when malformed. */
static int call_parse(const char *s, int64_t *id, char *hex)
{
    char *end = NULL;
    long long v;

    if (!s || !isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || v <= 0 || *end != '-' || strlen(end + 1) != HASH_SHOWN)
        return -1;
    for (int i = 1; i <= HASH_SHOWN; i++)
        if (!isxdigit((unsigned char)end[i]) || isupper((unsigned char)end[i]))
            return -1;
    *id = v;
    memcpy(hex, end + 1, HASH_SHOWN + 1);
    return 0;
}

/* ---- the archive ---- */

static enum kevo_status open_archive(const char *path, struct kevo_archive **a, char **msg)
{
    char def[PATH_MAX], *m = NULL;
    enum kevo_status st = KEVO_OK;

    if (!path)
        st = kevo_run_default_archive(def, sizeof def);
    if (st) {
        *msg = kevo_strdup("no archive path: set KEVO_ARCHIVE or HOME");
        return st;
    }
    path = path ? path : def;
    st = kevo_archive_open_existing(path, a, &m);   /* pending/import need its run */
    if (st)
        *msg = m ? m : kevo_strdupf("%s: %s", path, kevo_status_name(st));
    else
        kevo_free(m);
    return st;
}

/* ---- pending ---- */

/* ---- settings ---- */

char *kevo_exchange_settings(const struct kevo_llm_model *m)
{
    json_t *o = json_pack("{s:i}", "max_output", m->max_output > 0 ? m->max_output
                                                                   : KEVO_LLM_MAX_OUTPUT);
    char *s;

    if (m->has_temperature)
        json_object_set_new(o, "temperature", json_real(m->temperature));
    if (m->reasoning_effort)
        json_object_set_new(o, "reasoning_effort", json_string(m->reasoning_effort));
    if (m->thinking > 0)
        json_object_set_new(o, "thinking", json_integer(m->thinking));
    if (m->extra)
        json_object_set_new(o, "extra", json_loads(m->extra, 0, NULL));
    s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

/* What the run's defaults set where a spec sets nothing (kevo_exchange_settings), on m
 * parsed from the same spec: the call is asked as the run would have asked it. */
static void settings_apply(json_t *set, struct kevo_llm_model *m)
{
    json_t *t = json_object_get(set, "temperature"), *mo = json_object_get(set, "max_output");

    if (!m->has_temperature && json_is_number(t)) {
        m->has_temperature = 1;
        m->temperature = json_number_value(t);
    }
    if (m->max_output <= 0 && json_is_integer(mo) && json_integer_value(mo) > 0 &&
        json_integer_value(mo) <= INT_MAX)
        m->max_output = (int)json_integer_value(mo);
}

/* The settings a spec carries after its first '?' ("max_output=64000&..."), as an object
 * of NAME: value (%-decoded; a value that reads as JSON is that JSON, else a string): what
 * a pending line says of a call recorded without its settings (before schema 4). */
static json_t *settings_of(const char *spec)
{
    const char *q = spec ? strchr(spec, '?') : NULL;
    json_t *o = json_object();
    char *all = q ? kevo_strdup(q + 1) : NULL;

    for (char *p = all, *next; o && p && *p; p = next) {
        char *amp = strchr(p, '&'), *eq, *w;
        next = amp ? amp + 1 : p + strlen(p);
        if (amp)
            *amp = '\0';
        eq = strchr(p, '=');
        if (!eq)
            continue;
        *eq = '\0';
        w = eq + 1;
        for (const char *r = eq + 1; *r; r++) {   /* %XX decoded in place */
            unsigned int x;
            if (r[0] == '%' && isxdigit((unsigned char)r[1]) && isxdigit((unsigned char)r[2]) &&
                sscanf(r + 1, "%2x", &x) == 1) {
                *w++ = (char)x;
                r += 2;
            } else {
                *w++ = *r;
            }
        }
        *w = '\0';
        json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
        json_object_set_new(o, p, v ? v : json_string(eq + 1));
    }
    kevo_free(all);
    return o;
}

/* One pending call as a line (no '\n') into b. */
static enum kevo_status pending_line(struct kevo_buf *b, const struct kevo_llm_wanted *w)
{
    char id[48];
    const char *spec = w->spec ? w->spec : w->model;   /* before schema 4: provider:name@url */
    json_t *o;
    char *s;
    enum kevo_status st;

    call_id(id, w->id, w->prompt_hash);
    json_t *set = w->settings ? json_loads(w->settings, 0, NULL) : NULL;
    o = json_pack("{s:s, s:I, s:s, s:s, s:o, s:s?, s:s}", "call", id, "run",
                  (json_int_t)w->run_id, "op", w->op, "model", spec, "settings",
                  json_is_object(set) ? json_incref(set) : settings_of(spec), "system",
                  w->system, "prompt", w->user);
    json_decref(set);
    s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    st = s ? kevo_buf_addf(b, "%s\n", s) : KEVO_ERR_NOMEM;
    kevo_free(s);
    json_decref(o);
    return st;
}

enum kevo_status kevo_exchange_pending(const char *archive, int64_t run, char **out_jsonl,
                                       int *n_out, char **out_msg)
{
    struct kevo_archive *a = NULL;
    struct kevo_run_rec rr;
    struct kevo_llm_wanted *w = NULL;
    struct kevo_buf b;
    int n = 0;
    enum kevo_status st;

    *out_jsonl = NULL;
    *n_out = 0;
    *out_msg = NULL;
    memset(&rr, 0, sizeof rr);
    kevo_buf_init(&b, OUT_MAX);
    st = open_archive(archive, &a, out_msg);
    if (!st) {
        st = kevo_archive_run_get(a, run, &rr);
        if (!st)
            st = kevo_archive_llm_pending(a, run, &w, &n);
        if (st)
            *out_msg = kevo_strdupf("run %lld: %s", (long long)run, kevo_archive_errmsg(a));
    }
    for (int i = 0; !st && i < n; i++)
        st = pending_line(&b, &w[i]);
    if (!st) {
        *out_jsonl = b.len ? kevo_buf_take(&b) : kevo_strdup("");
        st = *out_jsonl ? KEVO_OK : KEVO_ERR_NOMEM;
        *n_out = n;
    }
    if (st && !*out_msg)
        *out_msg = kevo_strdupf("listing the pending calls of run %lld: %s", (long long)run,
                                kevo_status_name(st));
    kevo_buf_free(&b);
    kevo_archive_llm_wanted_free(w, n);
    kevo_archive_run_clear(&rr);
    kevo_archive_close(a);
    return st;
}

/* ---- import ---- */

/* A member of usage from 0 to TOKENS_MAX (absent: 0), so that sums over a run's calls
 * stay far from int64's limit; -1 after saying why. */
static int usage_int(struct errs *e, int line, json_t *usage, const char *key, int64_t *out)
{
    json_t *v = json_object_get(usage, key);

    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        bad(e, line, "usage.%s: not a non-negative integer", key);
        return -1;
    }
    if (json_integer_value(v) > TOKENS_MAX) {
        bad(e, line, "usage.%s: %lld tokens, more than one call can use (at most %d)", key,
            (long long)json_integer_value(v), TOKENS_MAX);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

/* What an import line holds, checked against the archive. */
enum line_kind { LINE_BAD = 0, LINE_REPLY, LINE_FAILED, LINE_USED };

static enum line_kind import_call(struct errs *e, int line, struct kevo_archive *a, json_t *o,
                                  int64_t *id)
{
    const char *s = json_string_value(json_object_get(o, "call"));
    char hex[HASH_SHOWN + 1], hash[KEVO_HASH_HEX];
    enum kevo_llm_call_state state;
    int64_t run = 0;

    if (!json_object_get(o, "call")) {
        bad(e, line, "call: missing (the \"call\" of the line of kevo llm pending)");
        return LINE_BAD;
    }
    if (call_parse(s, id, hex)) {
        bad(e, line, "call: not a call id (a string \"ROWID-HASH\", as kevo llm pending "
            "wrote it)");
        return LINE_BAD;
    }
    enum kevo_status st = kevo_archive_llm_state(a, *id, &run, hash, &state);
    if (st == KEVO_ERR_NOTFOUND || (!st && strncmp(hash, hex, HASH_SHOWN) != 0)) {
        bad(e, line, "call: %s is not a call of this archive (pending lines from another "
            "archive, or an older copy of it?)", s);
        return LINE_BAD;
    }
    if (st) {
        bad(e, line, "call: %s", kevo_archive_errmsg(a));
        return LINE_BAD;
    }
    if (state == KEVO_LLM_CALL_ANSWERED) {
        bad(e, line, "call: %s does not wait for a reply (it was made)", s);
        return LINE_BAD;
    }
    return state == KEVO_LLM_CALL_USED ? LINE_USED : LINE_REPLY;
}

/* Check line o and fill r from it (strings borrowed from o). */
static enum line_kind import_line(struct errs *e, int line, struct kevo_archive *a, json_t *o,
                                  size_t max_reply, struct kevo_llm_import_rec *r)
{
    json_t *reply = json_object_get(o, "reply"), *status = json_object_get(o, "status");
    json_t *usage = json_object_get(o, "usage"), *lat = json_object_get(o, "latency_s");
    int bad_before = e->n;
    enum line_kind k = import_call(e, line, a, o, &r->call);

    if (status && !json_is_string(status))
        bad(e, line, "status: not a string");
    if (usage && !json_is_object(usage) && !json_is_null(usage))
        bad(e, line, "usage: not an object ({\"in\": N, \"out\": N})");
    if (lat && !json_is_number(lat))
        bad(e, line, "latency_s: not a number");
    if (json_object_get(o, "model") && !json_is_string(json_object_get(o, "model")))
        bad(e, line, "model: not a string");
    usage_int(e, line, usage, "in", &r->tokens_in);
    usage_int(e, line, usage, "out", &r->tokens_out);
    usage_int(e, line, usage, "cached_in", &r->tokens_cached_in);
    usage_int(e, line, usage, "reasoning", &r->tokens_reasoning);
    r->latency_s = json_number_value(lat);
    r->model = json_string_value(json_object_get(o, "model"));
    r->reply = json_string_value(reply);
    int failed = (!reply || json_is_null(reply)) && json_is_string(status) &&
                 strcmp(json_string_value(status), "ok") != 0;
    if (!failed && (!reply || json_is_null(reply)))
        bad(e, line, "reply: missing (the model's answer, a string; a call that failed says "
            "so in \"status\")");
    else if (!failed && !json_is_string(reply))
        bad(e, line, "reply: not a string");
    else if (!failed && !*r->reply)
        bad(e, line, "reply: empty");
    else if (!failed && json_string_length(reply) > max_reply)
        bad(e, line, "reply: %zu bytes, more than a live call takes (%zu)",
            json_string_length(reply), max_reply);
    if (e->n > bad_before || k == LINE_BAD)
        return LINE_BAD;
    return failed ? LINE_FAILED : k;
}

/* Call id (> 0) added to the open-addressed set seen (n_seen slots, a power of two, at
 * least twice the ids it will hold); 1 when it was there already. */
static int seen_add(int64_t *seen, size_t n_seen, int64_t id)
{
    size_t i = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15u) & (n_seen - 1);

    while (seen[i] && seen[i] != id)
        i = (i + 1) & (n_seen - 1);
    if (seen[i])
        return 1;
    seen[i] = id;
    return 0;
}

/* The lines of text checked into recs (strings borrowed from *objs, which holds them);
 * seen: n_seen zeroed slots for seen_add. */
static void import_check(struct errs *e, struct kevo_archive *a, const char *text, size_t len,
                         json_t *objs, struct kevo_llm_import_rec *recs, int *n,
                         int64_t *seen, size_t n_seen, struct kevo_exchange_stats *stats)
{
    struct kevo_llm_limits lim;
    const char *s;
    size_t pos = 0, sl;

    kevo_llm_limits_default(&lim);   /* the live path's reply cap */
    for (int line = 1; next_line(text, len, &pos, &s, &sl); line++) {
        if (blank(s, sl))
            continue;
        json_t *o = line_object(e, line, s, sl);
        struct kevo_llm_import_rec r;
        memset(&r, 0, sizeof r);
        if (!o)
            continue;
        json_array_append_new(objs, o);
        stats->n_calls++;
        enum line_kind k = import_line(e, line, a, o, lim.max_reply_bytes, &r);
        if (k == LINE_REPLY && seen_add(seen, n_seen, r.call)) {
            bad(e, line, "call: %s is answered twice in the file",
                json_string_value(json_object_get(o, "call")));
            k = LINE_BAD;
        }
        if (k == LINE_REPLY)
            recs[(*n)++] = r;
        stats->n_failed += k == LINE_FAILED;
        stats->n_skipped += k == LINE_USED;
    }
}

enum kevo_status kevo_exchange_import(const char *archive, const char *name, const char *text,
                                      size_t len, struct kevo_exchange_stats *stats,
                                      char **out_msg)
{
    struct kevo_archive *a = NULL;
    struct errs e = { .name = name ? name : "-" };
    struct kevo_llm_import_rec *recs = NULL;
    int64_t *seen = NULL;
    json_t *objs = json_array();
    size_t lines = 1, n_seen = 2;
    int n = 0;
    enum kevo_status st;

    memset(stats, 0, sizeof *stats);
    *out_msg = NULL;
    kevo_buf_init(&e.b, 1 << 16);
    if (len > IMPORT_MAX) {
        json_decref(objs);
        *out_msg = kevo_strdupf("%s: %zu bytes, more than an import takes (%zu MiB): split "
                                "it into several files", e.name, len, IMPORT_MAX >> 20);
        return *out_msg ? KEVO_ERR_TOOBIG : KEVO_ERR_NOMEM;
    }
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    while (n_seen < 2 * lines)
        n_seen *= 2;
    recs = kevo_calloc(lines, sizeof *recs);
    seen = kevo_calloc(n_seen, sizeof *seen);
    st = recs && seen && objs ? open_archive(archive, &a, out_msg) : KEVO_ERR_NOMEM;
    if (!st)
        import_check(&e, a, text, len, objs, recs, &n, seen, n_seen, stats);
    for (int i = 0; !st && !e.n && i < n; i++)
        recs[i].source = e.name;
    if (!st && e.n) {
        st = KEVO_ERR_PARSE;
        *out_msg = errs_take(&e, "nothing was imported");
    } else if (!st) {
        st = kevo_archive_llm_import(a, recs, n);
        if (st)
            *out_msg = kevo_strdup(kevo_archive_errmsg(a));
    }
    if (!st)
        stats->n_ok = n;
    if (st && !*out_msg)
        *out_msg = kevo_strdup(kevo_status_name(st));
    kevo_buf_free(&e.b);
    kevo_free(recs);
    kevo_free(seen);
    json_decref(objs);
    kevo_archive_close(a);
    return st;
}

/* ---- answer ---- */

/* One call of the file to answer. */
struct item {
    char id[48];
    int model;                         /* index into the distinct specs */
    const char *system, *prompt;       /* borrowed from the line's object */
    int line;
};

struct answer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct kevo_llmops *ops;
    struct item *items;
    int n_items, n_done, n_submitted;
    const char **specs;                /* the distinct specs, borrowed from the lines */
    char **keys;                       /* spec + settings: what makes a model distinct */
    struct kevo_llm_model *models;
    int n_models;
    struct kevo_llm_model *local;      /* this machine's models (opts' specs), parsed */
    int n_local;
    kevo_exchange_line_fn out;
    void *user;
    struct kevo_exchange_stats *stats;
};

/* Where m (parsed from the spec of call's line) is asked: at the base URL, with the key
 * variable, of this machine's model with its provider and name; with no model given, at
 * its provider's own URL with the default variable, unless its spec names others. A file
 * that came across the gap never chooses where a key is sent. 0, or -1 after saying why. */
static int model_where(const struct answer *a, struct errs *e, int line, const char *call,
                       struct kevo_llm_model *m)
{
    const char *prov = m->api == KEVO_LLM_OPENAI ? "openai" : "anthropic";
    const struct kevo_llm_model *l = NULL;
    struct kevo_llm_model d;
    char *spec = kevo_strdupf("%s:%s", prov, m->name), *url = NULL, *key = NULL;
    int rc = -1;

    memset(&d, 0, sizeof d);
    for (int i = 0; !l && i < a->n_local; i++)
        if (a->local[i].api == m->api && !strcmp(a->local[i].name, m->name))
            l = &a->local[i];
    if (a->n_local && !l) {
        bad(e, line, "call %s: model %s:%s is not among the models given with "
            "--model/--config", call, prov, m->name);
        goto out;
    }
    if (!l && (!spec || kevo_llm_model_parse(spec, &d, NULL) != KEVO_OK)) {
        bad(e, line, "out of memory");
        goto out;
    }
    if (!l && (strcmp(d.base_url, m->base_url) || strcmp(d.key_env, m->key_env))) {
        bad(e, line, "call %s: model %s:%s: the line names a base URL or key variable, and "
            "answer takes neither from a file; name the model to use with --model SPEC (or "
            "--config FILE)", call, prov, m->name);
        goto out;
    }
    l = l ? l : &d;
    url = kevo_strdup(l->base_url);
    key = kevo_strdup(l->key_env);
    if (!url || !key) {
        bad(e, line, "out of memory");
        goto out;
    }
    kevo_free(m->base_url);
    kevo_free(m->key_env);
    m->base_url = url;
    m->key_env = key;
    url = key = NULL;
    rc = 0;
out:
    kevo_free(url);
    kevo_free(key);
    kevo_free(spec);
    kevo_llm_model_clear(&d);
    return rc;
}

/* The index of model spec s (of call's line) asked with settings set among a's distinct
 * models, added (parsed, the settings applied, placed by model_where) when new; -1 after
 * saying why. */
static int model_of(struct answer *a, struct errs *e, int line, const char *call,
                    const char *s, json_t *set)
{
    char *m = NULL, *ss = set ? json_dumps(set, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char *key = kevo_strdupf("%s\x1f%s", s, ss ? ss : "");
    int i;

    kevo_free(ss);
    if (!key) {
        bad(e, line, "out of memory");
        return -1;
    }
    for (i = 0; i < a->n_models; i++)
        if (!strcmp(a->keys[i], key)) {
            kevo_free(key);
            return i;
        }
    if (kevo_llm_model_parse(s, &a->models[i], &m) != KEVO_OK) {
        bad(e, line, "model: %s", m ? m : "not a model spec");
        kevo_llm_model_clear(&a->models[i]);
        kevo_free(m);
        kevo_free(key);
        return -1;
    }
    if (model_where(a, e, line, call, &a->models[i])) {
        kevo_llm_model_clear(&a->models[i]);
        kevo_free(key);
        return -1;
    }
    settings_apply(set, &a->models[i]);
    a->specs[a->n_models] = s;
    a->keys[a->n_models] = key;
    return a->n_models++;
}

/* A pending line into it; 0, or -1 after saying why. */
static int answer_line(struct answer *a, struct errs *e, int line, json_t *o, struct item *it)
{
    const char *call = json_string_value(json_object_get(o, "call"));
    const char *spec = json_string_value(json_object_get(o, "model"));
    json_t *sys = json_object_get(o, "system"), *set = json_object_get(o, "settings");
    int64_t id;
    char hex[HASH_SHOWN + 1];
    int before = e->n;

    if (call_parse(call, &id, hex))
        bad(e, line, "call: missing or not a call id (\"ROWID-HASH\")");
    if (!json_is_string(json_object_get(o, "prompt")) ||
        !*json_string_value(json_object_get(o, "prompt")))
        bad(e, line, "prompt: missing, empty or not a string");
    if (sys && !json_is_string(sys) && !json_is_null(sys))
        bad(e, line, "system: not a string");
    if (set && !json_is_object(set) && !json_is_null(set))
        bad(e, line, "settings: not an object");
    if (!spec)
        bad(e, line, "model: missing or not a string (a model spec)");
    else if (e->n == before)
        it->model = model_of(a, e, line, call, spec, json_is_object(set) ? set : NULL);
    if (e->n > before)
        return -1;
    snprintf(it->id, sizeof it->id, "%s", call);
    it->system = json_string_value(sys);
    it->prompt = json_string_value(json_object_get(o, "prompt"));
    it->line = line;
    return 0;
}

/* The line of a finished call (or one the cap refused: c NULL, status "cost_cap"). */
static char *answer_json(const struct answer *a, const struct item *it,
                         const struct kevo_llm_call *c)
{
    const struct kevo_llm_reply *r = c ? &c->reply : NULL;
    const char *status = r ? r->status : "cost_cap";
    json_t *o = json_pack("{s:s, s:s}", "call", it->id, "status", status);
    char *s;

    if (r && r->text && !strcmp(r->status, "ok"))
        json_object_set_new(o, "reply", json_string(r->text));
    if (r)
        json_object_set_new(o, "usage", json_pack("{s:I, s:I, s:I, s:I}", "in",
                                                  (json_int_t)r->tokens_in, "out",
                                                  (json_int_t)r->tokens_out, "cached_in",
                                                  (json_int_t)r->tokens_cached_in,
                                                  "reasoning", (json_int_t)r->tokens_reasoning));
    json_object_set_new(o, "model", json_string(a->specs[it->model]));
    if (c) {
        json_object_set_new(o, "cost", a->models[it->model].priced ? json_real(c->cost)
                                                                    : json_null());
        json_object_set_new(o, "latency_s", json_real(r->latency_s));
    }
    if (r && r->error)
        json_object_set_new(o, "error", json_string(r->error));
    else if (!r)
        json_object_set_new(o, "error", json_string("the cost cap leaves no room for this call"));
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

/* A line written and counted (under the mutex). */
static void answer_put(struct answer *a, const struct item *it, const struct kevo_llm_call *c)
{
    char *s = answer_json(a, it, c);
    int ok = c && !strcmp(c->reply.status, "ok");

    pthread_mutex_lock(&a->mu);
    if (s)
        a->out(a->user, s);
    a->stats->n_ok += ok;
    a->stats->n_failed += c && !ok;
    a->stats->n_skipped += !c;
    a->n_done++;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    kevo_free(s);
}

/* llmops' callback, on its thread: the call came back. */
static void answered(void *user, struct kevo_llm_call *c)
{
    struct answer *a = user;

    kevo_llmops_settle(a->ops, c);   /* its cost counts; its reserve is given back */
    answer_put(a, &a->items[c->sub - 1], c);
    kevo_llm_call_free(c);
}

/* Submit item i; while the cap leaves no room, wait for a call in flight to come back
 * (its reserve returns); with none in flight, the item is refused ("cost_cap"). */
static enum kevo_status answer_submit(struct answer *a, int i)
{
    for (;;) {
        struct kevo_llm_call *c = kevo_calloc(1, sizeof *c);
        if (!c)
            return KEVO_ERR_NOMEM;
        c->model = a->items[i].model;
        c->sub = i + 1;
        c->system = a->items[i].system ? kevo_strdup(a->items[i].system) : NULL;
        c->user = kevo_strdup(a->items[i].prompt);
        if (!c->user || (a->items[i].system && !c->system)) {
            kevo_llm_call_free(c);
            return KEVO_ERR_NOMEM;
        }
        pthread_mutex_lock(&a->mu);
        int before = a->n_done;
        pthread_mutex_unlock(&a->mu);
        enum kevo_status st = kevo_llmops_submit(a->ops, c);   /* takes c */
        pthread_mutex_lock(&a->mu);
        a->n_submitted += !st;
        int retry = a->n_done != before;   /* one came back meanwhile: its reserve too */
        while (st == KEVO_ERR_TOOBIG && !retry && a->n_submitted > a->n_done) {
            pthread_cond_wait(&a->cv, &a->mu);
            retry = a->n_done != before;
        }
        pthread_mutex_unlock(&a->mu);
        if (st != KEVO_ERR_TOOBIG)
            return st;
        if (!retry) {
            answer_put(a, &a->items[i], NULL);
            return KEVO_OK;
        }
    }
}

/* Prices per million tokens for a's models from the table, as kevo run reads it
 * (kevo_prices_load); with a cost cap, a model without one is refused. */
static enum kevo_status answer_prices(struct answer *a, const struct kevo_exchange_opts *o,
                                      char **msg)
{
    json_t *t = NULL;
    char *path = NULL;
    enum kevo_status st = kevo_prices_load(o->prices, &t, &path, msg);

    for (int i = 0; !st && i < a->n_models; i++)
        if (!kevo_prices_apply(t, &a->models[i]) && o->cost_cap > 0) {
            *msg = kevo_strdupf("--cost-cap: model '%s' has no price in %s (add it, or give a "
                                "table with --prices FILE)", a->models[i].name,
                                path ? path : "the price table");
            st = KEVO_ERR_INVALID;
        }
    kevo_free(path);
    json_decref(t);
    return st;
}

/* The lines of text checked into a->items (strings borrowed from objs). */
static void answer_check(struct answer *a, struct errs *e, const char *text, size_t len,
                         json_t *objs)
{
    const char *s;
    size_t pos = 0, sl;

    for (int line = 1; next_line(text, len, &pos, &s, &sl); line++) {
        if (blank(s, sl))
            continue;
        json_t *o = line_object(e, line, s, sl);
        if (!o)
            continue;
        json_array_append_new(objs, o);
        if (!answer_line(a, e, line, o, &a->items[a->n_items]))
            a->n_items++;
    }
}

/* Make every call of a->items through llmops, and wait for the last. */
static enum kevo_status answer_all(struct answer *a, const struct kevo_exchange_opts *o,
                                   char **msg)
{
    struct kevo_llmops_cfg cfg;
    enum kevo_status st;

    memset(&cfg, 0, sizeof cfg);
    cfg.n_models = a->n_models;
    cfg.models = a->models;
    cfg.max_concurrent = o->concurrency > 0 ? o->concurrency : 4;
    kevo_llm_limits_default(&cfg.limits);   /* the run's limits (run_llm.c) */
    cfg.cost_cap = o->cost_cap;
    cfg.temperature = -1;   /* the lines' settings are on the models already */
    st = kevo_llmops_new(&cfg, answered, a, &a->ops);
    if (st) {
        *msg = kevo_strdupf("cannot start the LLM calls: %s", kevo_status_name(st));
        return st;
    }
    for (int i = 0; !st && i < a->n_items; i++)
        st = answer_submit(a, i);
    pthread_mutex_lock(&a->mu);
    while (a->n_done < a->n_items && (a->n_submitted > a->n_done || !st))
        pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
    a->stats->spent = kevo_llmops_spent(a->ops);
    kevo_llmops_free(a->ops);
    a->ops = NULL;
    return st;
}

enum kevo_status kevo_exchange_answer(const char *name, const char *text, size_t len,
                                      const struct kevo_exchange_opts *o,
                                      kevo_exchange_line_fn out, void *user,
                                      struct kevo_exchange_stats *stats, char **out_msg)
{
    struct answer a;
    struct errs e = { .name = name ? name : "-" };
    json_t *objs = json_array();
    size_t lines = 1;
    enum kevo_status st = KEVO_OK;

    memset(&a, 0, sizeof a);
    memset(stats, 0, sizeof *stats);
    *out_msg = NULL;
    kevo_buf_init(&e.b, 1 << 16);
    pthread_mutex_init(&a.mu, NULL);
    pthread_cond_init(&a.cv, NULL);
    a.out = out;
    a.user = user;
    a.stats = stats;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    a.items = kevo_calloc(lines, sizeof *a.items);
    a.specs = kevo_calloc(lines, sizeof *a.specs);
    a.keys = kevo_calloc(lines, sizeof *a.keys);
    a.models = kevo_calloc(lines, sizeof *a.models);
    a.local = o->n_models > 0 ? kevo_calloc((size_t)o->n_models, sizeof *a.local) : NULL;
    if (!a.items || !a.specs || !a.keys || !a.models || !objs || (o->n_models > 0 && !a.local))
        st = KEVO_ERR_NOMEM;
    for (int i = 0; !st && i < o->n_models; i++) {
        char *m = NULL;
        st = kevo_llm_model_parse(o->models[i], &a.local[i], &m);
        if (st)
            *out_msg = kevo_strdupf("--model %s: %s", o->models[i], m ? m : kevo_status_name(st));
        else
            a.n_local++;
        kevo_free(m);
    }
    if (!st)
        answer_check(&a, &e, text, len, objs);
    stats->n_calls = a.n_items;
    if (!st && e.n) {
        st = KEVO_ERR_PARSE;
        *out_msg = errs_take(&e, "no call was made");
    }
    if (!st && a.n_items)
        st = answer_prices(&a, o, out_msg);
    if (!st && a.n_items)
        st = answer_all(&a, o, out_msg);
    if (st && !*out_msg)
        *out_msg = kevo_strdup(kevo_status_name(st));
    for (int i = 0; a.models && i < a.n_models; i++) {
        kevo_llm_model_clear(&a.models[i]);
        kevo_free(a.keys[i]);
    }
    for (int i = 0; a.local && i < o->n_models; i++)
        kevo_llm_model_clear(&a.local[i]);
    kevo_free(a.local);
    kevo_free(a.keys);
    kevo_free(a.models);
    kevo_free(a.specs);
    kevo_free(a.items);
    pthread_mutex_destroy(&a.mu);
    pthread_cond_destroy(&a.cv);
    kevo_buf_free(&e.b);
    json_decref(objs);
    return st;
}

void kevo_exchange_opts_default(struct kevo_exchange_opts *o)
{
    memset(o, 0, sizeof *o);
}

/* ---- a resumed session's call ---- */

/* The LLM operator and phase of recorded op name; -1 when none. */
static int op_of(const char *name, int *phase)
{
    *phase = 0;
    if (!strcmp(name, "llm_plan_code")) {
        *phase = 1;
        return KEVO_LLMOP_PLAN;
    }
    for (int i = 0; i < KEVO_LLMOP_COUNT; i++)
        if (!strcmp(name, kevo_llmop_names[i]))
            return i;
    return -1;
}

/* The source text of candidate id (kevo_free it); NULL when it cannot be read. */
static char *text_of(struct kevo_archive *ar, int64_t id)
{
    struct kevo_cand_rec c;
    char *t = NULL;
    size_t n = 0;

    memset(&c, 0, sizeof c);
    if (kevo_archive_cand_get(ar, id, &c) != KEVO_OK ||
        kevo_archive_source_get(ar, c.source_hash, &t, &n) != KEVO_OK)
        t = NULL;
    kevo_archive_cand_clear(&c);
    return t;
}

enum kevo_status kevo_exchange_call(struct kevo_archive *ar, struct kevo_llm_wanted *w,
                                    int model, struct kevo_llm_call **out, char **why)
{
    struct kevo_llm_call *c;
    int phase, op = op_of(w->op, &phase);

    *out = NULL;
    *why = NULL;
    if (op < 0) {
        *why = kevo_strdupf("call %lld: '%s' is not an LLM operator of this kevo",
                            (long long)w->id, w->op);
        return *why ? KEVO_ERR_INVALID : KEVO_ERR_NOMEM;
    }
    c = kevo_calloc(1, sizeof *c);
    if (!c)
        return KEVO_ERR_NOMEM;
    c->op = (enum kevo_llm_op)op;
    c->phase = phase;
    c->model = model;
    c->parent1 = w->parent1;
    c->parent2 = w->parent2;
    c->island = w->island;
    c->parent_score = w->parent_score;
    c->system = w->system;
    c->user = w->user;
    c->reply.text = w->reply;
    w->system = w->user = w->reply = NULL;   /* moved */
    c->parent_text = w->parent1 ? text_of(ar, w->parent1) : NULL;
    memcpy(c->prompt_hash, w->prompt_hash, sizeof c->prompt_hash);
    memcpy(c->plan_hash, w->plan_hash, sizeof c->plan_hash);
    c->reply.tokens_in = w->tokens_in;
    c->reply.tokens_out = w->tokens_out;
    c->reply.tokens_cached_in = w->tokens_cached_in;
    c->reply.tokens_reasoning = w->tokens_reasoning;
    c->reply.latency_s = w->latency_s;
    snprintf(c->reply.status, sizeof c->reply.status, "ok");
    c->imported = w->id;
    *out = c;
    return KEVO_OK;
}

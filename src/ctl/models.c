/*
 * models - one tiny request per LLM model, and a diagnosis when it fails (models.h,
 * docs/llm.md "Checking models"). The request is the run's in miniature: the same client
 * and the model's own settings, but a system prompt asking for one word and an output
 * limit of a few tokens, so a check costs a fraction of a cent.
 *
 * A key is never read into a message: the check asks only whether one was found and
 * where (the environment or the key file), and the client's errors have it removed
 * already (llm.c). Stateless and thread-safe.
 */
#include "ctl/models.h"

#include "ctl/llmops.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIAG_MAX 600                  /* a diagnosis line, at most */

void kevo_models_result_clear(struct kevo_models_result *res)
{
    if (!res)
        return;
    kevo_free(res->adapted);
    kevo_free(res->note);
    kevo_free(res->diagnosis);
    memset(res, 0, sizeof *res);
}

enum kevo_status kevo_models_client(struct kevo_llm **out)
{
    struct kevo_llm_limits l;

    kevo_llm_limits_default(&l);
    l.connect_timeout_s = 10;
    l.total_timeout_s = 60;          /* a reasoning model thinks a little even about "OK?" */
    l.max_attempts = 3;              /* a 429 or 5xx gets two more chances */
    l.max_wait_s = 15;
    l.max_reply_bytes = (size_t)1 << 20;
    return kevo_llm_new(4, &l, out);
}

/* ---- the key: found or not, and where (its value is wiped at once) ---- */

static const char *key_source(const struct kevo_llm_model *m, char **why)
{
    const char *env = getenv(m->key_env);
    char *k;

    *why = NULL;
    if (env && *env)
        return "env";
    k = kevo_llm_key(m, why);
    if (!k)
        return "none";
    explicit_bzero(k, strlen(k));
    kevo_free(k);
    return "file";
}

/* ---- diagnoses ---- */

/* A client error without its "gave up after N attempts (...): " (the diagnosis counts
 * the attempts itself); "" for none. */
static const char *last_error(const char *err)
{
    const char *p = err && !strncmp(err, "gave up after ", 14) ? strstr(err, "): ") : NULL;

    if (!err)
        return "";
    return p ? p + 3 : err;
}

/* The server's own words in a client error "HTTP NNN from URL: MESSAGE" (or the whole
 * error when it has no such part); "" for none. */
static const char *server_words(const char *err)
{
    const char *p = strstr(last_error(err), " from ");
    const char *q = p ? strstr(p, ": ") : NULL;

    return q ? q + 2 : last_error(err);
}

/* " (WORDS)" when the server said something, else "". */
static void paren(char *out, size_t n, const char *words)
{
    if (words && *words)
        snprintf(out, n, " (%.300s)", words);
    else if (n)
        out[0] = '\0';
}

/* Who holds the key, for "401: the key in $NAME was refused". */
static void key_holder(char *out, size_t n, const struct kevo_llm_model *m, const char *key)
{
    if (strcmp(key, "env") == 0)
        snprintf(out, n, "the key in $%s", m->key_env);
    else
        snprintf(out, n, "the key %s from the key file", m->key_env);
}

/* A refused or missing key: stage "key". */
static void diagnose_key(char *d, size_t n, const struct kevo_llm_model *m, const char *key,
                         const char *why, const struct kevo_llm_reply *rp)
{
    char holder[160], said[320];

    paren(said, sizeof said, server_words(rp->error));
    if (rp->http_status == 401 || rp->http_status == 403) {
        if (strcmp(key, "none") == 0)
            snprintf(d, n, "%d: the server wants a key and none was found: set $%s or add "
                     "%s=... to the key file%s", rp->http_status, m->key_env, m->key_env, said);
        else {
            key_holder(holder, sizeof holder, m, key);
            snprintf(d, n, "%d: %s was refused%s", rp->http_status, holder, said);
        }
    } else if (why) {
        snprintf(d, n, "no key: %s", why);
    } else if (strcmp(key, "none") != 0) {
        snprintf(d, n, "%s", rp->error ? rp->error : "the key cannot be sent");
    } else {
        snprintf(d, n, "no key: set $%s or add %s=... to the key file ($KEVO_KEY_FILE or "
                 "~/.config/kevo/keys, mode 600)", m->key_env, m->key_env);
    }
}

/* Another HTTP status: stage "settings" for a request the API refused, else "http". */
static const char *diagnose_http(char *d, size_t n, const struct kevo_llm_model *m,
                                 const struct kevo_llm_reply *rp)
{
    const char *words = server_words(rp->error);
    char said[320];
    int s = rp->http_status;

    paren(said, sizeof said, words);
    if (s == 400 || s == 422) {
        snprintf(d, n, "%d: the request was refused: %.400s", s, *words ? words : "no reason");
        return "settings";
    }
    if (s == 404)
        snprintf(d, n, "404: model '%s' or URL %s not found%s", m->name, m->base_url, said);
    else if (s == 429)
        snprintf(d, n, "429: rate limited or out of quota%s", said);
    else if (s >= 500)
        snprintf(d, n, "%d: the server failed%s", s, said);
    else
        snprintf(d, n, "%d:%s", s, *said ? said : " unexpected status");
    return "http";
}

/* What failed, from the reply's status: res->stage and the diagnosis line in d. */
static void diagnose(struct kevo_models_result *res, char *d, size_t n,
                     const struct kevo_llm_model *m, const char *why,
                     const struct kevo_llm_reply *rp)
{
    const char *err = rp->error ? last_error(rp->error) : rp->status;

    if (!strcmp(rp->status, "no_key") || rp->http_status == 401 || rp->http_status == 403) {
        res->stage = "key";
        diagnose_key(d, n, m, res->key, why, rp);
    } else if (!strncmp(rp->status, "http_", 5)) {
        res->stage = diagnose_http(d, n, m, rp);
    } else if (!strcmp(rp->status, "timeout")) {
        res->stage = "network";
        snprintf(d, n, "timeout: no answer from %s (%s)", m->base_url, err);
    } else if (!strcmp(rp->status, "network")) {
        res->stage = "network";
        snprintf(d, n, "network: cannot reach %s", err);
    } else if (!strcmp(rp->status, "refused")) {
        res->stage = "reply";
        snprintf(d, n, "no text: %s", err);
    } else {
        res->stage = "reply";
        snprintf(d, n, "%s: %s", rp->status, err);
    }
    if (rp->attempts > 1)
        snprintf(d + strlen(d), n - strlen(d), " [%d attempts]", rp->attempts);
    if (rp->adapted)
        snprintf(d + strlen(d), n - strlen(d), " [after adapting: %.120s]", rp->adapted);
}

/* ---- the check ---- */

/* A check that passed: a note when the reply had no text (the limit cut it first). */
static enum kevo_status check_passed(struct kevo_models_result *res, const struct kevo_llm_reply *rp)
{
    res->ok = 1;
    if (strcmp(rp->status, "truncated") != 0)
        return KEVO_OK;
    res->note = kevo_strdupf("the check's output limit ended the reply before any text (%lld "
                             "tokens out, %lld of them reasoning): the request got through",
                             (long long)rp->tokens_out,
                             (long long)rp->tokens_reasoning);
    return res->note ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_models_check(struct kevo_llm *c, const struct kevo_llm_model *m,
                                   struct kevo_models_result *out)
{
    struct kevo_llm_req req = { KEVO_MODELS_CHECK_SYSTEM, KEVO_MODELS_CHECK_PROMPT };
    struct kevo_llm_model small = *m;   /* borrows m's strings; never cleared */
    struct kevo_llm_reply rp;
    char *why = NULL, d[DIAG_MAX];
    enum kevo_status st;

    memset(out, 0, sizeof *out);
    /* a thinking budget must stay below the limit: a few tokens above it */
    small.max_output = KEVO_MODELS_CHECK_MAX_OUTPUT + (m->thinking > 0 ? m->thinking : 0);
    out->key = key_source(m, &why);
    st = kevo_llm_complete(c, &small, &req, &rp);
    if (st)
        goto out;
    snprintf(out->status, sizeof out->status, "%s", rp.status);
    out->http_status = rp.http_status;
    out->latency_s = rp.latency_s;
    out->tokens_in = rp.tokens_in;
    out->tokens_out = rp.tokens_out;
    if (rp.adapted && !(out->adapted = kevo_strdup(rp.adapted)))
        st = KEVO_ERR_NOMEM;
    if (!st && (!strcmp(rp.status, "ok") || !strcmp(rp.status, "truncated")))
        st = check_passed(out, &rp);
    else if (!st) {
        diagnose(out, d, sizeof d, m, why, &rp);
        for (char *p = d; *p; p++)   /* one line, whatever the server said */
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = ' ';
        out->diagnosis = kevo_strdup(d);
        st = out->diagnosis ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    kevo_llm_reply_clear(&rp);
out:
    kevo_free(why);
    if (st)
        kevo_models_result_clear(out);
    return st;
}

json_t *kevo_models_result_json(const char *spec, const struct kevo_models_result *res)
{
    json_t *o = json_pack("{s:s, s:b, s:s?, s:s, s:i, s:f, s:s, s:b, s:I, s:I}", "model", spec,
                          "ok", res->ok, "stage", res->stage, "status", res->status,
                          "http_status", res->http_status, "latency_s", res->latency_s,
                          "key", res->key ? res->key : "none", "price_known", res->price_known,
                          "tokens_in", (json_int_t)res->tokens_in, "tokens_out",
                          (json_int_t)res->tokens_out);

    if (o && res->adapted)
        json_object_set_new(o, "adapted", json_string(res->adapted));
    if (o && res->note)
        json_object_set_new(o, "note", json_string(res->note));
    if (o && res->diagnosis)
        json_object_set_new(o, "diagnosis", json_string(res->diagnosis));
    return o;
}

/* ---- `kevo models check` (kevo.h) ---- */

/* One spec checked into the document's list. */
static enum kevo_status check_spec(struct kevo_llm *c, const char *spec, json_t *table,
                                   json_t *list, int *all_ok)
{
    struct kevo_llm_model m;
    struct kevo_models_result res;
    char *pmsg = NULL;
    enum kevo_status st = KEVO_OK;

    memset(&m, 0, sizeof m);
    memset(&res, 0, sizeof res);
    if (kevo_llm_model_parse(spec, &m, &pmsg) != KEVO_OK) {
        res.stage = "spec";
        res.key = "none";
        res.diagnosis = kevo_strdupf("bad model spec: %s", pmsg ? pmsg : spec);
        st = res.diagnosis ? KEVO_OK : KEVO_ERR_NOMEM;
    } else {
        st = kevo_models_check(c, &m, &res);
        res.price_known = kevo_prices_apply(table, &m);
    }
    if (!st && json_array_append_new(list, kevo_models_result_json(spec, &res)) != 0)
        st = KEVO_ERR_NOMEM;
    *all_ok = *all_ok && res.ok;
    kevo_models_result_clear(&res);
    kevo_llm_model_clear(&m);
    kevo_free(pmsg);
    return st;
}

enum kevo_status kevo_models_check_json(const char *const *specs, int n_specs,
                                        const char *prices, char **out_json, char **out_msg)
{
    struct kevo_llm *c = NULL;
    json_t *table = NULL, *list = json_array(), *doc = NULL;
    char *path = NULL;
    int all_ok = 1;
    enum kevo_status st = KEVO_ERR_INVALID;

    *out_json = NULL;
    *out_msg = NULL;
    if (n_specs < 1 || !specs) {
        *out_msg = kevo_strdup("no model to check: name one (--model SPEC, or \"models\" in "
                               "the config file)");
        goto out;
    }
    st = list ? kevo_prices_load(prices, &table, &path, out_msg) : KEVO_ERR_NOMEM;
    if (!st)
        st = kevo_models_client(&c);
    for (int i = 0; !st && i < n_specs; i++)
        st = check_spec(c, specs[i], table, list, &all_ok);
    if (!st)
        doc = json_pack("{s:b, s:s, s:O}", "ok", all_ok, "prices", path, "models", list);
    if (!st && (!doc || !(*out_json = json_dumps(doc, JSON_COMPACT))))
        st = KEVO_ERR_NOMEM;
    if (st && !*out_msg)
        *out_msg = kevo_strdupf("checking models: %s", kevo_status_name(st));
out:
    kevo_llm_free(c);
    json_decref(doc);
    json_decref(list);
    json_decref(table);
    kevo_free(path);
    return st;
}

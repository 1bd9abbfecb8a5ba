/*
 * archive_llm - the archive's LLM calls (archive.h, docs/archive.md "llm_calls"): every
 * call a run made or wanted, the response cache they form, and the replies imported for
 * the calls an offline session could not make (`kevo llm import`), which a resumed
 * session uses (docs/llm.md "Air-gapped clusters"). Same rules as archive.c: bound
 * parameters only, one transaction per public write, statements reset after every use.
 *
 * Thread-safety: as archive.c (a handle is used by one thread at a time).
 */
#include "ctl/archive_int.h"

#include <jansson.h>

/* ---- LLM calls ---- */

enum kevo_status kevo_archive_llm_add(struct kevo_archive *a, const struct kevo_llm_call_rec *r,
                                      int64_t *id)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && r && id);
    *id = 0;
    if (!r->model || !r->op || !r->prompt || !r->status ||
        !memchr(r->prompt_hash, '\0', sizeof r->prompt_hash) || !r->prompt_hash[0])
        return ar_fail(a, KEVO_ERR_INVALID, "recording an LLM call: model, op, prompt,"
                    " prompt_hash and status must be set");
    st = ar_prep(a, S_LLM_ADD, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, r->run_id);
    ar_b_id(&b, 2, r->cand_id);
    ar_b_text(&b, 3, r->model);
    ar_b_text(&b, 4, r->op);
    ar_b_text(&b, 5, r->prompt_hash);
    ar_b_text(&b, 6, r->prompt);
    ar_b_text(&b, 7, r->reply);
    ar_b_int(&b, 8, r->tokens_in);
    ar_b_int(&b, 9, r->tokens_out);
    ar_b_real(&b, 10, isfinite(r->cost) ? r->cost : 0.0);
    ar_b_real(&b, 11, isfinite(r->latency_s) ? r->latency_s : 0.0);
    ar_b_text(&b, 12, r->status);
    ar_b_real(&b, 13, ar_now_s());
    ar_b_id(&b, 14, r->step);
    ar_b_id(&b, 15, r->submitted);
    ar_b_text(&b, 16, r->spec);
    ar_b_int(&b, 17, r->system_len);
    ar_b_id(&b, 18, r->parent1);
    ar_b_id(&b, 19, r->parent2);
    ar_b_int(&b, 20, r->island);
    ar_b_real(&b, 21, r->parent_score);
    ar_b_text(&b, 22, memchr(r->plan_hash, '\0', sizeof r->plan_hash) && r->plan_hash[0]
                       ? r->plan_hash : NULL);
    ar_b_int(&b, 23, r->tokens_cached_in);
    ar_b_int(&b, 24, r->tokens_reasoning);
    ar_b_id(&b, 25, r->answers);
    ar_b_text(&b, 26, r->settings);
    st = ar_write_stmt(a, &b, "recording an LLM call");
    if (st == KEVO_OK)
        *id = sqlite3_last_insert_rowid(a->db);
    return st;
}

enum kevo_status kevo_archive_llm_cached(struct kevo_archive *a, const char *prompt_hash,
                                         char **reply)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && prompt_hash && reply);
    *reply = NULL;
    st = ar_prep(a, S_LLM_CACHED, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_text(&b, 1, prompt_hash);
    st = ar_bound(a, &b);
    if (st == KEVO_OK)
        st = ar_one_text(a, b.s, "looking up a cached LLM reply", reply);
    ar_done(b.s);
    return st;
}

enum kevo_status kevo_archive_llm_cost(struct kevo_archive *a, int64_t run, double *cost)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && cost);
    *cost = 0;
    st = ar_prep(a, S_LLM_COST, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, run);
    st = ar_query_row(a, &b, "summing LLM costs");
    if (st == KEVO_ERR_NOTFOUND)   /* an aggregate always yields a row */
        st = ar_fail(a, KEVO_ERR_IO, "summing LLM costs: no result");
    if (st == KEVO_OK)
        *cost = sqlite3_column_double(b.s, 0);
    ar_done(b.s);
    return st;
}

void kevo_archive_llm_rows_free(struct kevo_llm_row *rows, int n)
{
    for (int i = 0; rows && i < n; i++) {
        kevo_free(rows[i].model);
        kevo_free(rows[i].op);
        kevo_free(rows[i].reply);
        kevo_free(rows[i].status);
    }
    kevo_free(rows);
}

/* The current S_LLM_ROWS row into r. */
static enum kevo_status llm_row_fill(struct kevo_archive *a, sqlite3_stmt *s,
                                     struct kevo_llm_row *r)
{
    memset(r, 0, sizeof *r);
    r->id = sqlite3_column_int64(s, 0);
    r->cand_id = sqlite3_column_int64(s, 1);
    r->step = sqlite3_column_int64(s, 2);
    r->tokens_in = sqlite3_column_int64(s, 3);
    r->tokens_out = sqlite3_column_int64(s, 4);
    r->cost = sqlite3_column_double(s, 5);
    r->latency_s = sqlite3_column_double(s, 6);
    r->submitted = sqlite3_column_int64(s, 12);
    r->tokens_cached_in = sqlite3_column_int64(s, 13);
    r->tokens_reasoning = sqlite3_column_int64(s, 14);
    r->created = sqlite3_column_double(s, 15);
    if (ar_col_dup(s, 7, &r->model) || ar_col_dup(s, 8, &r->op) || ar_col_dup(s, 10, &r->reply) ||
        ar_col_dup(s, 11, &r->status))
        return ar_fail(a, KEVO_ERR_NOMEM, "reading LLM call %lld: out of memory", (long long)r->id);
    if (!r->model || !r->op || !r->status ||
        ar_copy_field(r->prompt_hash, sizeof r->prompt_hash, (const char *)sqlite3_column_text(s, 9)))
        return ar_fail(a, KEVO_ERR_IO, "LLM call %lld: malformed row", (long long)r->id);
    return KEVO_OK;
}

enum kevo_status kevo_archive_llm_rows(struct kevo_archive *a, int64_t run,
                                       struct kevo_llm_row **rows, int *n)
{
    struct ar_bind b;
    int cap = 0;
    enum kevo_status st;

    KEVO_ASSERT(a && rows && n);
    *rows = NULL;
    *n = 0;
    st = ar_prep(a, S_LLM_ROWS, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, run);
    st = ar_bound(a, &b);
    while (st == KEVO_OK && (st = ar_step_row(a, b.s, "listing LLM calls")) == KEVO_OK) {
        if (*n == cap) {
            struct kevo_llm_row *p = ar_grow(*rows, &cap, sizeof *p);
            if (!p) {
                st = ar_fail(a, KEVO_ERR_NOMEM, "listing LLM calls: out of memory");
                break;
            }
            *rows = p;
        }
        st = llm_row_fill(a, b.s, &(*rows)[(*n)++]);
    }
    ar_done(b.s);
    if (st == KEVO_ERR_NOTFOUND)
        return KEVO_OK;
    kevo_archive_llm_rows_free(*rows, *n);
    *rows = NULL;
    *n = 0;
    return st;
}

/* ---- per-model statistics ---- */

/* The kind of a recorded status into out: its message dropped (what follows the first
 * ": " after a "replay: " prefix): "unusable: no code" is "unusable", "replay: ok" stays. */
static void status_kind(const char *s, char *out, size_t n)
{
    const char *from = strncmp(s, "replay: ", 8) ? s : s + 8;
    const char *cut = strstr(from, ": ");
    size_t len = cut ? (size_t)(cut - s) : strlen(s);

    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), s);
}

/* o[k] += v (0 when absent); nonzero when out of memory. */
static int add_int(json_t *o, const char *k, int64_t v)
{
    return json_object_set_new(o, k, json_integer(json_integer_value(json_object_get(o, k)) +
                                                  (json_int_t)v));
}

static int add_real(json_t *o, const char *k, double v)
{
    return json_object_set_new(o, k, json_real(json_number_value(json_object_get(o, k)) + v));
}

/* One S_LLM_MODELS row (a model and a status) into its model's object in arr: the last
 * one when it is the same model (rows come by model), else a new one. Nonzero when out of
 * memory. */
static int model_row(sqlite3_stmt *s, json_t *arr)
{
    const char *model = (const char *)sqlite3_column_text(s, 0);
    const char *status = (const char *)sqlite3_column_text(s, 1);
    json_t *m = json_array_get(arr, json_array_size(arr) - 1), *t;   /* none: NULL */
    char kind[64];
    int bad = 0;

    model = model ? model : "";
    if (!m || strcmp(json_string_value(json_object_get(m, "model")), model)) {
        m = json_pack("{s:s, s:{}, s:i, s:{s:i, s:i, s:i, s:i}, s:f, s:f, s:i, s:i, s:i}",
                      "model", model, "calls", "n_calls", 0, "tokens", "in", 0, "cached_in", 0,
                      "out", 0, "reasoning", 0, "cost", 0.0, "latency_s", 0.0, "candidates", 0,
                      "ok", 0, "improved", 0);
        if (!m || json_array_append_new(arr, m))
            return 1;
    }
    status_kind(status ? status : "", kind, sizeof kind);
    t = json_object_get(m, "tokens");
    bad |= add_int(json_object_get(m, "calls"), kind, sqlite3_column_int64(s, 2));
    bad |= add_int(m, "n_calls", sqlite3_column_int64(s, 2));
    bad |= add_int(t, "in", sqlite3_column_int64(s, 3));
    bad |= add_int(t, "cached_in", sqlite3_column_int64(s, 4));
    bad |= add_int(t, "out", sqlite3_column_int64(s, 5));
    bad |= add_int(t, "reasoning", sqlite3_column_int64(s, 6));
    bad |= add_real(m, "cost", sqlite3_column_double(s, 7));
    bad |= add_real(m, "latency_s", sqlite3_column_double(s, 8));
    bad |= add_int(m, "candidates", sqlite3_column_int64(s, 9));
    bad |= add_int(m, "ok", sqlite3_column_int64(s, 10));
    bad |= add_int(m, "improved", sqlite3_column_int64(s, 11));
    return bad;
}

enum kevo_status kevo_archive_llm_models_json(struct kevo_archive *a, int64_t run,
                                              char **out_json)
{
    json_t *arr = json_array();
    struct ar_bind b = { NULL, SQLITE_OK };
    enum kevo_status st;

    KEVO_ASSERT(a && out_json);
    *out_json = NULL;
    st = arr ? ar_prep(a, S_LLM_MODELS, &b) : ar_fail(a, KEVO_ERR_NOMEM, "LLM models: out of memory");
    if (st == KEVO_OK) {
        ar_b_int(&b, 1, run);
        st = ar_bound(a, &b);
    }
    while (st == KEVO_OK) {
        st = ar_step_row(a, b.s, "LLM models");
        if (st == KEVO_OK && model_row(b.s, arr))
            st = ar_fail(a, KEVO_ERR_NOMEM, "LLM models: out of memory");
    }
    if (st == KEVO_ERR_NOTFOUND) {
        *out_json = json_dumps(arr, JSON_COMPACT | JSON_PRESERVE_ORDER);
        st = *out_json ? KEVO_OK : ar_fail(a, KEVO_ERR_NOMEM, "LLM models: out of memory");
    }
    ar_done(b.s);
    json_decref(arr);
    return st;
}

/* ---- pending calls and imported replies ---- */

void kevo_archive_llm_wanted_free(struct kevo_llm_wanted *w, int n)
{
    for (int i = 0; w && i < n; i++) {
        kevo_free(w[i].model);
        kevo_free(w[i].spec);
        kevo_free(w[i].op);
        kevo_free(w[i].system);
        kevo_free(w[i].user);
        kevo_free(w[i].reply);
        kevo_free(w[i].settings);
    }
    kevo_free(w);
}

/* The recorded prompt "[system]\n" SYSTEM "\n[user]\n" USER (run_llm.c) split at
 * sys_len; one that is not of that form (cut, or recorded before schema 4) is all user. */
static enum kevo_status split_prompt(sqlite3_stmt *s, int col, int64_t sys_len,
                                     struct kevo_llm_wanted *w)
{
    static const char head[] = "[system]\n", mid[] = "\n[user]\n";
    const char *p = (const char *)sqlite3_column_text(s, col);
    size_t n = (size_t)sqlite3_column_bytes(s, col), h = sizeof head - 1, m = sizeof mid - 1;

    if (!p)
        return KEVO_ERR_IO;
    if (sys_len >= 0 && (uint64_t)sys_len <= n && n - (size_t)sys_len >= h + m &&
        !memcmp(p, head, h) && !memcmp(p + h + sys_len, mid, m)) {
        w->system = kevo_strndup(p + h, (size_t)sys_len);
        w->user = kevo_strndup(p + h + sys_len + m, n - h - (size_t)sys_len - m);
        return w->system && w->user ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    w->user = kevo_strndup(p, n);
    return w->user ? KEVO_OK : KEVO_ERR_NOMEM;
}

/* The current S_LLM_PENDING / S_LLM_IMPORTED row into w (WANTED_COLS, then the reply's). */
static enum kevo_status wanted_fill(struct kevo_archive *a, sqlite3_stmt *s,
                                    struct kevo_llm_wanted *w)
{
    enum kevo_status st;

    memset(w, 0, sizeof *w);
    w->id = sqlite3_column_int64(s, 0);
    w->run_id = sqlite3_column_int64(s, 1);
    w->parent1 = sqlite3_column_int64(s, 9);
    w->parent2 = sqlite3_column_int64(s, 10);
    w->island = sqlite3_column_int(s, 11);
    w->parent_score = sqlite3_column_double(s, 12);
    w->tokens_in = sqlite3_column_int64(s, 15);
    w->tokens_out = sqlite3_column_int64(s, 16);
    w->tokens_cached_in = sqlite3_column_int64(s, 17);
    w->tokens_reasoning = sqlite3_column_int64(s, 18);
    w->latency_s = sqlite3_column_double(s, 19);
    st = split_prompt(s, 5, sqlite3_column_int64(s, 6), w);
    if (st == KEVO_OK && (ar_col_dup(s, 2, &w->model) || ar_col_dup(s, 3, &w->spec) ||
                          ar_col_dup(s, 4, &w->op) || ar_col_dup(s, 13, &w->settings) ||
                          ar_col_dup(s, 14, &w->reply)))
        st = KEVO_ERR_NOMEM;
    if (st == KEVO_ERR_NOMEM)
        return ar_fail(a, st, "reading LLM call %lld: out of memory", (long long)w->id);
    if (st || !w->model || !w->op ||
        ar_copy_field(w->prompt_hash, sizeof w->prompt_hash,
                   (const char *)sqlite3_column_text(s, 7)) ||
        ar_copy_field(w->plan_hash, sizeof w->plan_hash, (const char *)sqlite3_column_text(s, 8)))
        return ar_fail(a, KEVO_ERR_IO, "LLM call %lld: malformed row", (long long)w->id);
    return KEVO_OK;
}

/* Every row of statement id for run, as wanted calls. */
static enum kevo_status wanted_list(struct kevo_archive *a, enum stmt_id id, int64_t run,
                                    struct kevo_llm_wanted **out, int *n)
{
    struct ar_bind b;
    int cap = 0;
    enum kevo_status st;

    KEVO_ASSERT(a && out && n);
    *out = NULL;
    *n = 0;
    st = ar_prep(a, id, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, run);
    st = ar_bound(a, &b);
    while (st == KEVO_OK) {
        st = ar_step_row(a, b.s, "listing pending LLM calls");
        if (st != KEVO_OK)
            break;
        if (*n == cap) {
            struct kevo_llm_wanted *p = ar_grow(*out, &cap, sizeof *p);
            if (!p) {
                st = ar_fail(a, KEVO_ERR_NOMEM, "listing pending LLM calls: out of memory");
                break;
            }
            *out = p;
        }
        st = wanted_fill(a, b.s, &(*out)[(*n)++]);
    }
    ar_done(b.s);
    if (st == KEVO_ERR_NOTFOUND)
        return KEVO_OK;
    kevo_archive_llm_wanted_free(*out, *n);
    *out = NULL;
    *n = 0;
    return st;
}

enum kevo_status kevo_archive_llm_pending(struct kevo_archive *a, int64_t run,
                                          struct kevo_llm_wanted **out, int *n)
{
    return wanted_list(a, S_LLM_PENDING, run, out, n);
}

enum kevo_status kevo_archive_llm_imported(struct kevo_archive *a, int64_t run,
                                           struct kevo_llm_wanted **out, int *n)
{
    return wanted_list(a, S_LLM_IMPORTED, run, out, n);
}

enum kevo_status kevo_archive_llm_state(struct kevo_archive *a, int64_t id, int64_t *run,
                                        char prompt_hash[KEVO_HASH_HEX],
                                        enum kevo_llm_call_state *state)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && run && prompt_hash && state);
    *run = 0;
    prompt_hash[0] = '\0';
    *state = KEVO_LLM_CALL_ANSWERED;
    st = ar_prep(a, S_LLM_STATE, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, id);
    st = ar_query_row(a, &b, "reading an LLM call");
    if (st == KEVO_ERR_NOTFOUND)
        ar_fail(a, st, "no LLM call %lld", (long long)id);
    if (st == KEVO_OK) {
        *run = sqlite3_column_int64(b.s, 0);
        if (ar_copy_field(prompt_hash, KEVO_HASH_HEX, (const char *)sqlite3_column_text(b.s, 1)))
            st = ar_fail(a, KEVO_ERR_IO, "LLM call %lld: malformed row", (long long)id);
        else if (sqlite3_column_int(b.s, 4))
            *state = KEVO_LLM_CALL_USED;
        else if (sqlite3_column_int(b.s, 3))
            *state = KEVO_LLM_CALL_IMPORTED;
        else if (sqlite3_column_int(b.s, 2))
            *state = KEVO_LLM_CALL_PENDING;
    }
    ar_done(b.s);
    return st;
}

/* One reply into llm_imports (inside the caller's transaction). */
static enum kevo_status import_one(struct kevo_archive *a, const struct kevo_llm_import_rec *r,
                                   double now)
{
    struct ar_bind b;
    enum kevo_status st;

    if (!r->reply)
        return ar_fail(a, KEVO_ERR_INVALID, "importing a reply to call %lld: no reply",
                    (long long)r->call);
    st = ar_prep(a, S_LLM_IMPORT, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, r->call);
    ar_b_text(&b, 2, r->reply);
    ar_b_int(&b, 3, r->tokens_in);
    ar_b_int(&b, 4, r->tokens_out);
    ar_b_int(&b, 5, r->tokens_cached_in);
    ar_b_int(&b, 6, r->tokens_reasoning);
    ar_b_real(&b, 7, isfinite(r->latency_s) ? r->latency_s : 0.0);
    ar_b_text(&b, 8, r->model);
    ar_b_text(&b, 9, r->source);
    ar_b_real(&b, 10, now);
    st = ar_write_stmt(a, &b, "importing a reply");
    if (st == KEVO_OK && sqlite3_changes(a->db) != 1)
        st = ar_fail(a, KEVO_ERR_INVALID, "importing a reply to call %lld: it is not a call that"
                  " waits for one (kevo llm pending lists those)", (long long)r->call);
    return st;
}

enum kevo_status kevo_archive_llm_import(struct kevo_archive *a,
                                         const struct kevo_llm_import_rec *r, int n)
{
    double now = ar_now_s();
    enum kevo_status st;

    KEVO_ASSERT(a && (r || n <= 0));
    st = ar_tx_begin(a);
    if (st != KEVO_OK)
        return st;
    for (int i = 0; i < n && st == KEVO_OK; i++)
        st = import_one(a, &r[i], now);
    return ar_tx_end(a, st);
}

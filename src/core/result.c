/*
 * result - the worker's eval result document decoded into struct kevo_result (result.h;
 * the document: docs/eval-json.md). Strict about verdicts and workload indexes (what the
 * controller decides on), lenient about figures. Pure; the decoded struct borrows its
 * strings and objects from the document, of which it holds one reference.
 */
#include "core/result.h"
#include "base/log.h"
#include "base/mem.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- lenient figures ---- */

/* A number; "nan"/"inf"/"-inf" (how the worker writes what JSON cannot hold); else 0. */
static double fig(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    const char *s = json_string_value(v);

    if (json_is_number(v))
        return json_number_value(v);
    if (!s)
        return 0.0;
    if (strcmp(s, "nan") == 0)
        return NAN;
    if (strcmp(s, "inf") == 0)
        return INFINITY;
    if (strcmp(s, "-inf") == 0)
        return -INFINITY;
    return 0.0;
}

/* An integer figure: a JSON integer, a finite real truncated; else `absent`. */
static int64_t ifig(json_t *o, const char *key, int64_t absent)
{
    json_t *v = json_object_get(o, key);
    double d = json_real_value(v);

    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_real(v) && isfinite(d) && fabs(d) < 9.2e18)
        return (int64_t)d;
    return absent;
}

/* A borrowed string, "" when absent or not a string. */
static const char *str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static void time_decode(json_t *t, struct kevo_result_time *out)
{
    memset(out, 0, sizeof *out);
    if (!json_is_object(t))
        return;
    out->present = 1;
    out->median_s = fig(t, "median_s");
    out->min_s = fig(t, "min_s");
    out->p20_s = fig(t, "p20_s");
    out->p80_s = fig(t, "p80_s");
    out->noise = fig(t, "noise");
    out->count = ifig(t, "count", 0);
    out->batch = ifig(t, "batch", 0);
    out->capped = json_is_true(json_object_get(t, "capped"));
    out->sm_clock_mhz = fig(t, "sm_clock_mhz");
}

/* ---- strict parts ---- */

/* *out_msg = the formatted text (kevo_free); returns KEVO_ERR_PARSE. */
__attribute__((format(printf, 2, 3)))
static enum kevo_status bad(char **out_msg, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    *out_msg = kevo_vstrdupf(fmt, ap);
    va_end(ap);
    return KEVO_ERR_PARSE;
}

/* o's "verdict" into *out; `where` names o in the message ("" or "workloads[3]."). */
static enum kevo_status verdict_decode(json_t *o, const char *where, enum kevo_verdict *out,
                                       char **out_msg)
{
    const char *s = json_string_value(json_object_get(o, "verdict"));

    if (!s)
        return bad(out_msg, "eval result: %sverdict: missing or not a string", where);
    if (kevo_verdict_parse(s, out) != KEVO_OK)
        return bad(out_msg, "eval result: %sverdict: unknown verdict \"%.40s\"", where, s);
    return KEVO_OK;
}

/*
 * One workload. Its verdict may be missing only where the document's own is not ok: the
 * worker leaves the workload it was on open when the device is lost mid-phase (eval.c
 * phase_verify), and the document's verdict (crash) is then the workload's too.
 */
static enum kevo_status wl_decode(json_t *w, int i, enum kevo_verdict doc_verdict,
                                  struct kevo_result_wl *out, char **out_msg)
{
    json_t *idx = json_object_get(w, "index");
    char where[48];

    snprintf(where, sizeof where, "workloads[%d].", i);
    if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
        json_integer_value(idx) > INT_MAX)
        return bad(out_msg, "eval result: %sindex: missing or not an integer >= 0", where);
    out->index = (int)json_integer_value(idx);
    if (doc_verdict != KEVO_VERDICT_OK && !json_object_get(w, "verdict"))
        out->verdict = doc_verdict;
    else if (verdict_decode(w, where, &out->verdict, out_msg) != KEVO_OK)
        return KEVO_ERR_PARSE;
    out->holdout = json_is_true(json_object_get(w, "holdout"));
    out->message = str(w, "message");
    out->sizes = json_object_get(w, "sizes");
    out->evidence = json_object_get(w, "evidence");
    time_decode(json_object_get(w, "time"), &out->time);
    time_decode(json_object_get(w, "ref_time"), &out->ref_time);
    out->speedup = fig(w, "speedup");
    out->gbps = fig(w, "gbps");
    out->tflops = fig(w, "tflops");
    out->t_sol_s = fig(w, "t_sol_s");
    out->sol_fraction = fig(w, "sol_fraction");
    out->bytes = fig(w, "bytes");
    out->flops = fig(w, "flops");
    return KEVO_OK;
}

static void res_decode(json_t *k, struct kevo_result_res *out)
{
    out->kernel = str(k, "kernel");
    out->n_params = ifig(k, "n_params", 0);
    out->regs = ifig(k, "regs", 0);
    out->static_smem = ifig(k, "static_smem", 0);
    out->local_bytes = ifig(k, "local_bytes", 0);
    out->max_threads_per_block = ifig(k, "max_threads_per_block", 0);
    out->block = ifig(k, "block", -1);
    out->smem = ifig(k, "smem", -1);
    out->blocks_per_sm = ifig(k, "blocks_per_sm", -1);
}

/* The workloads and resources arrays of doc into r (allocated; left to the caller). */
static enum kevo_status arrays_decode(json_t *doc, struct kevo_result *r, char **out_msg)
{
    json_t *wls = json_object_get(doc, "workloads"), *rs = json_object_get(doc, "resources");
    size_t n_wl = json_array_size(wls), n_res = json_array_size(rs);

    if (wls && !json_is_array(wls))
        return bad(out_msg, "eval result: workloads: not an array");
    if (n_wl > INT_MAX || n_res > INT_MAX)
        return bad(out_msg, "eval result: too many workloads or resources");
    if (n_wl) {
        r->wl = kevo_calloc(n_wl, sizeof *r->wl);
        if (!r->wl)
            return KEVO_ERR_NOMEM;
    }
    r->n_wl = (int)n_wl;
    for (int i = 0; i < r->n_wl; i++)
        if (wl_decode(json_array_get(wls, (size_t)i), i, r->verdict, &r->wl[i], out_msg) !=
            KEVO_OK)
            return KEVO_ERR_PARSE;
    /* resources decide nothing: an entry that is not an object reads as all defaults */
    if (n_res) {
        r->res = kevo_calloc(n_res, sizeof *r->res);
        if (!r->res)
            return KEVO_ERR_NOMEM;
    }
    r->n_res = (int)n_res;
    for (int i = 0; i < r->n_res; i++)
        res_decode(json_array_get(rs, (size_t)i), &r->res[i]);
    return KEVO_OK;
}

/* ---- the API ---- */

enum kevo_status kevo_result_decode(json_t *doc, struct kevo_result *out, char **out_msg)
{
    struct kevo_result r;
    enum kevo_status st;

    memset(out, 0, sizeof *out);
    *out_msg = NULL;
    if (!json_is_object(doc))
        return bad(out_msg, "eval result: not a JSON object");
    memset(&r, 0, sizeof r);
    st = verdict_decode(doc, "", &r.verdict, out_msg);
    if (st)
        goto out;
    r.message = str(doc, "message");
    r.evidence = json_object_get(doc, "evidence");
    r.request_s = fig(doc, "request_s");
    st = arrays_decode(doc, &r, out_msg);
    if (st)
        goto out;
    r.doc = json_incref(doc);
    *out = r;
    memset(&r, 0, sizeof r);   /* moved to *out */
out:
    kevo_result_clear(&r);
    return st;
}

void kevo_result_clear(struct kevo_result *r)
{
    if (!r)
        return;
    kevo_free(r->wl);
    kevo_free(r->res);
    json_decref(r->doc);
    memset(r, 0, sizeof *r);
}

const struct kevo_result_wl *kevo_result_wl_at(const struct kevo_result *r, int index)
{
    for (int i = 0; r && i < r->n_wl; i++)
        if (r->wl[i].index == index)
            return &r->wl[i];
    return NULL;
}

json_t *kevo_result_doc_new(enum kevo_verdict v, const char *msg, json_t *evidence)
{
    json_t *doc = json_object();
    int fail;

    KEVO_ASSERT((unsigned)v < KEVO_VERDICT_COUNT);
    if (!evidence)
        evidence = json_object();
    fail = !doc || !evidence;
    /* json_object_set_new takes its value even when it fails */
    fail = fail || json_object_set_new(doc, "verdict", json_string(kevo_verdict_name(v)));
    fail = fail || json_object_set_new(doc, "message", json_string(msg ? msg : ""));
    if (!fail) {
        fail = json_object_set_new(doc, "evidence", evidence) != 0;
        evidence = NULL;   /* taken */
    }
    if (fail) {
        json_decref(evidence);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/*
 * evalreq - one eval or calibrate request through the pool (evalreq.h).
 */
#include "ctl/evalreq.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint64_t kevo_secret_seed(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
    }
    return s;
}

/* A name or message for the text of an error: "?" for none. */
static const char *or_q(const char *s) { return s ? s : "?"; }

/* Can jansson carry s (valid UTF-8)? */
static int utf8_ok(const char *s)
{
    json_t *j = json_string(s);
    json_decref(j);
    return j != NULL;
}

/* A JSON string, or NULL for text that is not UTF-8 (which jansson cannot carry). */
static int set_str(json_t *o, const char *k, const char *v)
{
    json_t *s = json_string(v);
    return s ? json_object_set_new(o, k, s) : -1;
}

/* The compile_error result of a candidate that is not UTF-8 text (it never reaches a
 * worker): the fields of a worker's compile_error, nothing compiled. NULL: out of memory. */
static json_t *not_utf8_result(void)
{
    json_t *res = kevo_result_doc_new(KEVO_VERDICT_COMPILE_ERROR,
                                      "the candidate is not valid UTF-8 text",
                                      json_pack("{s:s}", "message", "not valid UTF-8"));

    if (res && (json_object_set_new(res, "resources", json_array()) ||
                json_object_set_new(res, "workloads", json_array()))) {
        json_decref(res);
        res = NULL;
    }
    return res;
}

static json_t *eval_request(const struct kevo_eval_call *c)
{
    char seed[32];
    json_t *req = json_object();

    if (!req)
        return NULL;
    /* A text jansson refuses must never be dropped silently: a missing cand_text would
     * make the worker evaluate the reference in the candidate's place. */
    if (set_str(req, "task_path", c->task_path) || set_str(req, "task_text", c->task_text) ||
        (c->cand_text && (set_str(req, "cand_path", c->cand_path ? c->cand_path : "?") ||
                          set_str(req, "cand_text", c->cand_text)))) {
        json_decref(req);
        return NULL;
    }
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)kevo_secret_seed());
    json_object_set_new(req, "op", json_string("eval"));
    json_object_set_new(req, "seed", json_string(seed));
    json_object_set_new(req, "trials", json_integer(c->trials));
    json_object_set_new(req, "holdout", json_integer(c->holdout));
    json_object_set_new(req, "timing", json_integer(c->timed && !c->holdout));
    json_object_set_new(req, "time_cap_s", json_real(c->time_cap_s));
    json_object_set_new(req, "time_reference", json_integer(c->time_reference));
    if (c->profile)
        json_object_set_new(req, "profile", json_integer(1));
    if (c->profile && c->profile_below_s > 0)
        json_object_set_new(req, "profile_below_s", json_real(c->profile_below_s));
    if (c->sol)
        json_object_set(req, "sol", c->sol);
    if (c->dump_dir && !c->cand_text)   /* only the reference's own evaluation dumps */
        json_object_set_new(req, "dump_dir", json_string(c->dump_dir));
    return req;
}

enum kevo_status kevo_evalreq_call(struct kevo_pool *pool, int slot, const struct kevo_eval_call *c,
                                   double deadline_s, json_t **out_result, char **out_msg)
{
    const char *what = c->cand_text ? c->cand_path : c->task_path;
    json_t *req = eval_request(c), *reply = NULL, *res;
    double t0, took;
    enum kevo_status st;

    *out_result = NULL;
    if (!req && c->cand_text && !utf8_ok(c->cand_text) && utf8_ok(c->task_text)) {
        /* the candidate's own fault: a verdict, like any text that does not compile */
        *out_result = not_utf8_result();
        return *out_result ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    if (!req) {
        *out_msg = kevo_strdupf("%s: the task (or a path) is not valid UTF-8 text",
                                or_q(c->task_path));
        return KEVO_ERR_PARSE;
    }
    t0 = kevo_now();
    st = kevo_pool_call(pool, slot, req, deadline_s, &reply);
    took = kevo_now() - t0;
    json_decref(req);
    if (st) {
        *out_msg = kevo_strdupf("evaluation of %s failed: %s", or_q(what), kevo_status_name(st));
        return st;
    }
    const char *rs = json_string_value(json_object_get(reply, "status"));
    res = json_object_get(reply, "result");
    if (!rs || strcmp(rs, "ok") != 0 || !json_is_object(res)) {
        const char *m = json_string_value(json_object_get(reply, "message"));
        *out_msg = kevo_strdupf("worker could not evaluate %s: %s", or_q(what), or_q(m ? m : rs));
        json_decref(reply);
        return KEVO_ERR_WORKER;
    }
    *out_result = json_incref(res);
    json_decref(reply);
    json_object_set_new(*out_result, "request_s", json_real(took));
    return KEVO_OK;
}

enum kevo_status kevo_evalreq_call_result(struct kevo_pool *pool, int slot,
                                          const struct kevo_eval_call *c, double deadline_s,
                                          struct kevo_result *out, char **out_msg)
{
    const char *what = c->cand_text ? c->cand_path : c->task_path;
    json_t *res = NULL;
    char *why = NULL;
    enum kevo_status st;

    memset(out, 0, sizeof *out);
    st = kevo_evalreq_call(pool, slot, c, deadline_s, &res, out_msg);
    if (st)
        return st;
    st = kevo_result_decode(res, out, &why);
    if (st == KEVO_ERR_PARSE) {
        *out_msg = kevo_strdupf("worker's result for %s is not an eval result: %s", or_q(what),
                                or_q(why));
        st = KEVO_ERR_WORKER;
    }
    kevo_free(why);
    json_decref(res);   /* *out holds its own reference */
    return st;
}

/* Is res an eval result rather than a calibration? A worker that hung or died answers any
 * request with one (pool.c's synthesized timeout or crash). */
static int is_eval_result(json_t *res)
{
    struct kevo_result r;
    char *why = NULL;
    int yes = kevo_result_decode(res, &r, &why) == KEVO_OK;

    kevo_result_clear(&r);
    kevo_free(why);
    return yes;
}

enum kevo_status kevo_evalreq_calibrate(struct kevo_pool *pool, int slot, const char *backend,
                                        int force, double deadline_s, json_t **out_calib,
                                        char **out_msg)
{
    json_t *req = json_pack("{s:s, s:i}", "op", "calibrate", "force", force), *reply = NULL;
    enum kevo_status st = req ? kevo_pool_call(pool, slot, req, deadline_s, &reply)
                              : KEVO_ERR_NOMEM;

    *out_calib = NULL;
    json_decref(req);
    if (st) {
        *out_msg = kevo_strdupf("calibration on the %s backend failed: %s", or_q(backend),
                                kevo_status_name(st));
        return st;
    }
    const char *rs = json_string_value(json_object_get(reply, "status"));
    json_t *res = json_object_get(reply, "result");
    if (!rs || strcmp(rs, "ok") != 0 || !json_is_object(res) || is_eval_result(res)) {
        const char *m = json_string_value(json_object_get(reply, "message"));
        if (!m)
            m = json_string_value(json_object_get(res, "message"));
        *out_msg = kevo_strdupf("calibration on the %s backend failed: %s", or_q(backend),
                                or_q(m));
        json_decref(reply);
        return KEVO_ERR_WORKER;
    }
    *out_calib = json_incref(res);
    json_decref(reply);
    return KEVO_OK;
}

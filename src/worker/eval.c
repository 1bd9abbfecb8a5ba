/*
 * eval - the worker-side evaluation of one candidate against a task (eval.h): compile,
 * verify on every requested workload, time, and write the result document
 * (docs/eval-json.md). The rules are docs/harness.md's; the pieces are in verify.c and timing.c.
 *
 * Shape of one evaluation:
 *   1. parse task and candidate; compile both (per-process module cache, eval_cache.h);
 *   2. resources of the candidate's kernels (registers, smem, spills, occupancy);
 *   3. correctness, workload by workload, stopping at the first failure: per trial fresh
 *      inputs from a secret seed, generated on the device into both sides' buffers, the
 *      reference on its own buffers (its outputs then sealed: noise to a candidate that
 *      scans memory), then the candidate twice (poison A, poison B) on guarded buffers,
 *      run A's outputs kept by a device copy; each output judged on the device (backend
 *      `judge`), checked in the order fault, launch, out_of_bounds, input_mutated,
 *      unwritten, nondeterministic, mismatch, degenerate; after the last trial, repeats of
 *      the candidate on its inputs, each judged against run A (eval_wl.c wl_repeats);
 *   4. timing, workload by workload, on K rotating input sets, with a re-check of the
 *      outputs, guards and inputs the timed runs left behind (the reference re-run on each
 *      set); then the SOL check.
 * Nothing the size of a tensor crosses the bus: only verdict summaries, guard regions and
 * the few elements quoted as evidence (the optional dump, eval_dump.c, aside).
 * A candidate's failure is recorded as the workload's verdict and stops that evaluation;
 * a lost device context (crash, timeout) fills the result and returns KEVO_ERR_DEVICE.
 *
 * Every tensor on both sides lives in its own allocation [guard | data | guard]: the data
 * starts 256-byte aligned, the guards hold a canary derived from the secret seed.
 *
 * This file: the request, the module cache, compiling, resources, the phases and the
 * result. One workload's buffers and checks are in eval_wl.c, timing in eval_time.c, the
 * dump in eval_dump.c.
 */
#include "worker/eval.h"
#include "worker/eval_cache.h"
#include "worker/eval_int.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

#include <errno.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the request ---- */

/* params are borrowed by the request like its texts; they live here until the next call
 * in the same thread. */
static _Thread_local int64_t req_params[KEVO_MAX_ARGS];

static enum kevo_status req_err(char **out_msg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static enum kevo_status req_err(char **out_msg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    *out_msg = kevo_vstrdupf(fmt, ap);
    va_end(ap);
    return KEVO_ERR_INVALID;
}

/* An optional integer (or boolean) field: 0 if absent or fine, -1 if of another type. */
static int opt_int(json_t *j, const char *key, int64_t *v)
{
    json_t *f = json_object_get(j, key);
    if (!f || json_is_null(f))
        return 0;
    if (json_is_integer(f))
        *v = json_integer_value(f);
    else if (json_is_boolean(f))
        *v = json_is_true(f);
    else
        return -1;
    return 0;
}

static int opt_num(json_t *j, const char *key, double *v)
{
    json_t *f = json_object_get(j, key);
    if (!f || json_is_null(f))
        return 0;
    if (!json_is_number(f))
        return -1;
    *v = json_number_value(f);
    return isfinite(*v) ? 0 : -1;
}

/* The secret seed: a string of decimal digits (JSON numbers lose bits above 2^53), or a
 * non-negative integer. */
static enum kevo_status req_seed(json_t *j, uint64_t *out, char **out_msg)
{
    json_t *f = json_object_get(j, "seed");
    const char *s = json_string_value(f);
    char *end = NULL;

    if (json_is_integer(f) && json_integer_value(f) >= 0) {
        *out = (uint64_t)json_integer_value(f);
        return KEVO_OK;
    }
    if (!s || !*s || strspn(s, "0123456789") != strlen(s))
        return req_err(out_msg, "seed must be a string of decimal digits");
    errno = 0;
    *out = strtoull(s, &end, 10);
    if (errno == ERANGE || *end)
        return req_err(out_msg, "seed '%s' does not fit in 64 bits", s);
    return KEVO_OK;
}

/* params: absent/null for the defaults, else one integer per candidate param. */
static enum kevo_status req_params_get(json_t *j, struct kevo_eval_req *out, char **out_msg)
{
    json_t *a = json_object_get(j, "params"), *v;
    size_t i;

    if (!a || json_is_null(a))
        return KEVO_OK;
    if (!json_is_array(a))
        return req_err(out_msg, "params must be an array of integers");
    if (json_array_size(a) > KEVO_MAX_ARGS)
        return req_err(out_msg, "too many params (%zu, at most %d)", json_array_size(a),
                       KEVO_MAX_ARGS);
    json_array_foreach(a, i, v)
    {
        if (!json_is_integer(v))
            return req_err(out_msg, "params[%zu] is not an integer", i);
        req_params[i] = json_integer_value(v);
    }
    out->n_params = (int)json_array_size(a);
    out->params = out->n_params ? req_params : NULL;
    return KEVO_OK;
}

/* sol: {bw, peaks{unit name: flops/s}, launch_floor_s, launch_gap_s}; missing figures stay 0
 * (unknown). */
static enum kevo_status req_sol(json_t *j, struct kevo_sol_figures *f, char **out_msg)
{
    json_t *s = json_object_get(j, "sol"), *peaks;

    if (!s || json_is_null(s))
        return KEVO_OK;
    if (!json_is_object(s) || opt_num(s, "bw", &f->bw_bytes_per_s) ||
        opt_num(s, "launch_floor_s", &f->launch_floor_s) ||
        opt_num(s, "launch_gap_s", &f->launch_gap_s))
        return req_err(out_msg, "sol must be {bw, peaks{unit: flops/s}, launch_floor_s}");
    peaks = json_object_get(s, "peaks");
    if (peaks && !json_is_object(peaks))
        return req_err(out_msg, "sol.peaks must be an object");
    for (int u = 0; peaks && u < KEVO_UNIT_COUNT; u++) {
        if (opt_num(peaks, kevo_unit_name((enum kevo_unit)u), &f->peak_flops[u]))
            return req_err(out_msg, "sol.peaks.%s is not a number",
                           kevo_unit_name((enum kevo_unit)u));
    }
    return KEVO_OK;
}

/* The small integer switches and the time cap. */
static enum kevo_status req_flags(json_t *j, struct kevo_eval_req *out, char **out_msg)
{
    int64_t trials = 3, holdout = 0, timing = 1, tref = 0, profile = 0;

    if (opt_int(j, "trials", &trials) || opt_int(j, "holdout", &holdout) ||
        opt_int(j, "timing", &timing) || opt_int(j, "time_reference", &tref) ||
        opt_int(j, "profile", &profile))
        return req_err(out_msg, "trials, holdout, timing, time_reference and profile must be "
                                "integers");
    if (trials > MAX_TRIALS)
        return req_err(out_msg, "trials %lld is more than %d", (long long)trials, MAX_TRIALS);
    out->trials = trials < 3 ? 3 : (int)trials; /* the protocol's floor, never less */
    out->holdout = holdout != 0;
    out->timing = timing != 0;
    out->time_reference = tref != 0;
    out->profile = profile != 0;
    if (opt_num(j, "profile_below_s", &out->profile_below_s) || out->profile_below_s < 0)
        return req_err(out_msg, "profile_below_s must be a number >= 0");
    if (opt_num(j, "time_cap_s", &out->time_cap_s) || out->time_cap_s < 0)
        return req_err(out_msg, "time_cap_s must be a number >= 0");
    return KEVO_OK;
}

enum kevo_status kevo_eval_req_from_json(json_t *j, struct kevo_eval_req *out, char **out_msg)
{
    enum kevo_status st;
    json_t *ct;

    memset(out, 0, sizeof *out);
    *out_msg = NULL;
    if (!json_is_object(j))
        return req_err(out_msg, "an eval request must be a JSON object");
    out->task_text = json_string_value(json_object_get(j, "task_text"));
    if (!out->task_text)
        return req_err(out_msg, "task_text is missing or not a string");
    out->task_path = json_string_value(json_object_get(j, "task_path"));
    if (!out->task_path)
        out->task_path = "task";
    ct = json_object_get(j, "cand_text");
    if (ct && !json_is_null(ct) && !json_is_string(ct))
        return req_err(out_msg, "cand_text must be a string");
    out->cand_text = json_string_value(ct);
    out->cand_path = json_string_value(json_object_get(j, "cand_path"));
    if (out->cand_path && !out->cand_text)   /* never the reference in a candidate's place */
        return req_err(out_msg, "cand_path without cand_text");
    if (!out->cand_path)
        out->cand_path = "candidate";
    ct = json_object_get(j, "dump_dir");
    if (ct && !json_is_null(ct) && (!json_is_string(ct) || !json_string_length(ct)))
        return req_err(out_msg, "dump_dir must be a non-empty string");
    out->dump_dir = json_string_value(ct);
    st = req_seed(j, &out->seed, out_msg);
    if (!st)
        st = req_params_get(j, out, out_msg);
    if (!st)
        st = req_flags(j, out, out_msg);
    if (!st)
        st = req_sol(j, &out->sol, out_msg);
    return st;
}

/* ---- the module cache ---- */

struct cache_ent {
    unsigned char key[32];
    const struct kevo_backend_ops *ops;
    void *ctx;
    struct kevo_module *mod;
    char *log;      /* compiler output of the compile that made it */
    uint64_t stamp; /* LRU clock; 0 = empty slot */
};
static struct cache_ent cache[CACHE_SLOTS];
static uint64_t cache_clock;

/* Empty slot c, freeing its module through its own backend when free_module. */
static void cache_drop(struct cache_ent *c, int free_module)
{
    if (free_module && c->mod && c->ops->module_free)
        c->ops->module_free(c->ctx, c->mod);
    kevo_free(c->log);
    memset(c, 0, sizeof *c);
}

void kevo_eval_cache_clear(struct kevo_backend *b)
{
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (!cache[i].stamp)
            continue;
        if (!b)
            cache_drop(&cache[i], 0);
        else if (cache[i].ops == b->ops && cache[i].ctx == b->ctx)
            cache_drop(&cache[i], 1);
    }
}

int kevo_eval_cache_count(void)
{
    int n = 0;
    for (int i = 0; i < CACHE_SLOTS; i++)
        n += cache[i].stamp != 0;
    return n;
}

/* Feed one length-prefixed field into the key digest. */
static void hash_part(EVP_MD_CTX *c, const void *p, size_t n)
{
    uint64_t len = n; /* length-prefixed: no two inputs share a stream */
    EVP_DigestUpdate(c, &len, sizeof len);
    EVP_DigestUpdate(c, p, n);
}

/* SHA-256 of everything that shapes the binary: source, entries, defines, flags. */
static enum kevo_status cache_key(const struct kevo_compile_req *r, unsigned char key[32])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c)
        return KEVO_ERR_NOMEM;
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    hash_part(c, r->source, r->source_len);
    for (int i = 0; i < r->n_entries; i++)
        hash_part(c, r->entries[i], strlen(r->entries[i]));
    for (int i = 0; i < r->n_defines; i++) {
        hash_part(c, r->define_names[i], strlen(r->define_names[i]));
        hash_part(c, &r->define_values[i], sizeof r->define_values[i]);
    }
    for (int i = 0; i < r->n_flags; i++)
        hash_part(c, r->flags[i], strlen(r->flags[i]));
    EVP_DigestFinal_ex(c, key, NULL);
    EVP_MD_CTX_free(c);
    return KEVO_OK;
}

/* The entry for key on backend b (refreshing its LRU stamp), or NULL. */
static struct cache_ent *cache_find(struct kevo_backend *b, const unsigned char key[32])
{
    for (int i = 0; i < CACHE_SLOTS; i++) {
        struct cache_ent *c = &cache[i];
        if (c->stamp && c->ops == b->ops && c->ctx == b->ctx && !memcmp(c->key, key, 32)) {
            c->stamp = ++cache_clock;
            return c;
        }
    }
    return NULL;
}

/* A slot for a new entry: an empty one, else the least recently used one that does not
 * hold `keep` (the module this evaluation already uses). Only modules of the current
 * backend are freed: another backend may be gone, so its entries are just forgotten. */
static struct cache_ent *cache_slot(const struct kevo_backend *b, struct kevo_module *keep)
{
    struct cache_ent *best = NULL;
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (!cache[i].stamp)
            return &cache[i];
        if (cache[i].mod != keep && (!best || cache[i].stamp < best->stamp))
            best = &cache[i];
    }
    if (best)
        cache_drop(best, best->ops == b->ops && best->ctx == b->ctx);
    return best;
}

/* Compile through the cache. *out_mod stays owned by the cache (or by *out_owned when it
 * could not be cached). *out_log is borrowed from the cache entry or the caller's buf. */
static enum kevo_status cache_compile(struct kevo_backend *b, const struct kevo_compile_req *r,
                                      struct kevo_module *keep, struct kevo_module **out_mod,
                                      struct kevo_module **out_owned, struct kevo_buf *log)
{
    unsigned char key[32];
    struct cache_ent *c;
    enum kevo_status st;

    *out_mod = *out_owned = NULL;
    st = cache_key(r, key);
    if (st)
        return st;
    c = cache_find(b, key);
    if (c) {
        *out_mod = c->mod;
        return kevo_buf_adds(log, c->log ? c->log : "");
    }
    st = b->ops->compile(b->ctx, r, out_mod, log);
    if (st)
        return st;
    c = cache_slot(b, keep);
    if (!c) {
        *out_owned = *out_mod;
        return KEVO_OK;
    }
    c->log = kevo_strdup(kevo_buf_str(log));
    memcpy(c->key, key, 32);
    c->ops = b->ops;
    c->ctx = b->ctx;
    c->mod = *out_mod;
    c->stamp = ++cache_clock;
    return KEVO_OK;
}

/* ---- compiling ---- */

/* The compiler output for the result, capped at LOG_CAP. */
static void keep_log(struct kevo_ev *e, const struct kevo_buf *log)
{
    const char *s = kevo_buf_str(log);
    size_t n = strlen(s);
    struct kevo_buf b;

    kevo_free(e->compile_log);
    kevo_buf_init(&b, LOG_CAP + 64);
    if (kevo_buf_add(&b, s, n > LOG_CAP ? LOG_CAP : n) == KEVO_OK && n > LOG_CAP &&
        kevo_buf_adds(&b, "\n[compile log truncated]\n") != KEVO_OK)
        KEVO_DEBUG("eval: compile log note dropped");
    e->compile_log = kevo_buf_take(&b);
    kevo_buf_free(&b);
}

/*
 * The compile request of plan p: its distinct kernels (which become the plan's entry
 * table, p->ent, owned by p) and, for a candidate, the request's params as -D defines.
 * KEVO_ERR_INVALID when the request gives the wrong number of params.
 */
static enum kevo_status plan_request(const struct kevo_ev *e, struct kevo_plan *p, int is_cand,
                                     struct kevo_compile_src *cs)
{
    const int64_t *params = is_cand ? e->req->params : NULL;
    enum kevo_status st;

    memset(cs, 0, sizeof *cs);
    if (is_cand && e->req->n_params && e->req->n_params != p->src->n_params)
        return KEVO_ERR_INVALID;
    st = kevo_compile_src_init(cs, p->src, params);
    if (!st)
        st = kevo_rules_protos(p->src, &p->protos);
    if (st)
        return st;
    p->ent = cs->entries;               /* the plan keeps the entry table */
    p->n_ent = cs->req.n_entries;
    cs->entries = NULL;
    return KEVO_OK;
}

/* Compile plan p through the cache. A candidate (or the reference evaluated as one) that
 * does not compile is a compile_error verdict; a task reference that does not is the
 * task's fault (KEVO_ERR_INVALID). */
static enum kevo_status compile_plan(struct kevo_ev *e, struct kevo_plan *p, int is_cand)
{
    struct kevo_compile_src cs;
    struct kevo_buf log;
    enum kevo_status st = plan_request(e, p, is_cand, &cs);

    kevo_buf_init(&log, 1u << 20);
    if (st == KEVO_ERR_INVALID)
        st = kevo_eval_error(e, KEVO_ERR_INVALID, "the request gives %d params; %s declares %d",
                             e->req->n_params, p->src->path, p->src->n_params);
    if (!st)
        st = cache_compile(e->b, &cs.req, e->ref.mod, &p->mod, &p->owned, &log);
    kevo_compile_src_free(&cs);
    if (is_cand || e->self)
        keep_log(e, &log);
    if (st == KEVO_ERR_CUDA && (is_cand || e->self))
        st = KEVO_ERR_COMPILE;   /* the driver would not load it (e.g. a huge __device__ array) */
    if (st == KEVO_ERR_COMPILE || st == KEVO_ERR_NOTFOUND) {
        if (is_cand || e->self) {
            kevo_eval_fail(e, KEVO_VERDICT_COMPILE_ERROR, json_pack("{s:s}", "log", e->compile_log),
                           "%s does not compile", p->src->path);
            st = KEVO_OK;
        } else {
            st = kevo_eval_error(e, KEVO_ERR_INVALID, "the task's reference does not compile:\n%s",
                                 kevo_buf_str(&log));
        }
    } else if (st == KEVO_ERR_DEVICE || st == KEVO_ERR_TIMEOUT) {
        kevo_eval_fail(e, st == KEVO_ERR_DEVICE ? KEVO_VERDICT_CRASH : KEVO_VERDICT_TIMEOUT, NULL,
                       "the device failed while loading %s", p->src->path);
        st = KEVO_ERR_DEVICE;
    } else if (st && !kevo_buf_str(&e->msg)[0]) {
        st = kevo_eval_error(e, st, "compiling %s: %s", p->src->path, kevo_buf_str(&log));
    }
    kevo_buf_free(&log);
    return st;
}

/* ---- resources ---- */

static json_t *resource_json(struct kevo_ev *e, int i, const struct kevo_env *env)
{
    struct kevo_func_info fi;
    json_t *o;

    memset(&fi, 0, sizeof fi);
    if (e->b->ops->func_info(e->b->ctx, e->can.mod, i, &fi))
        return NULL;
    o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i}", "kernel", e->can.ent[i], "n_params",
                  fi.n_params, "regs", fi.num_regs, "static_smem", fi.static_smem, "local_bytes",
                  fi.local_bytes, "max_threads_per_block", fi.max_threads_per_block);
    for (int l = 0; o && env && l < e->cand->n_launches; l++) {
        const struct kevo_launch *la = &e->cand->launches[l];
        int64_t b[3] = { 1, 1, 1 }, smem = 0;
        int blocks = 0, bad = 0;
        if (strcmp(la->kernel, e->can.ent[i]))
            continue;
        for (int d = 0; d < 3; d++)
            bad |= la->block[d] && kevo_eval_env_value(env, la->block[d], &b[d]);
        bad |= la->smem && kevo_eval_env_value(env, la->smem, &smem);
        if (bad || b[0] * b[1] * b[2] > INT32_MAX || smem > INT32_MAX)
            break;
        json_object_set_new(o, "block", json_integer(b[0] * b[1] * b[2]));
        json_object_set_new(o, "smem", json_integer(smem));
        if (e->b->ops->occupancy &&
            !e->b->ops->occupancy(e->b->ctx, e->can.mod, i, (int)(b[0] * b[1] * b[2]), (int)smem,
                                  &blocks))
            json_object_set_new(o, "blocks_per_sm", json_integer(blocks));
        break;
    }
    return o;
}

/* Registers, smem, spills and occupancy of each candidate kernel, at the block size and
 * smem of its first launch in workload w. */
static void add_resources(struct kevo_ev *e, int w)
{
    struct kevo_env env;
    char *m = NULL;
    int have_env =
        w >= 0 && !kevo_task_env(e->task, w, e->self ? NULL : e->cand, e->req->params, &env, &m);

    kevo_free(m);
    if (!e->b->ops->func_info)
        return;
    for (int i = 0; i < e->can.n_ent; i++) {
        json_t *o = resource_json(e, i, have_env ? &env : NULL);
        if (o)
            json_array_append_new(e->resources, o);
    }
}

/* ---- the whole evaluation ---- */

static int selected(const struct kevo_ev *e, int w)
{
    return (e->task->workloads[w].holdout != 0) == (e->req->holdout != 0);
}

/* Parse the task (its errors are KEVO_ERR_PARSE) and the candidate (its errors are the
 * compile_error verdict: the candidate is data, not kevo's failure). */
static enum kevo_status parse_both(struct kevo_ev *e)
{
    const struct kevo_eval_req *r = e->req;
    char *m = NULL;
    enum kevo_status st;

    st = kevo_task_parse(r->task_path, r->task_text, strlen(r->task_text), &e->task, &m);
    if (st) {
        st = kevo_eval_error(e, st == KEVO_ERR_NOMEM ? st : KEVO_ERR_PARSE, "%s",
                             m ? m : "the task does not parse");
        goto out;
    }
    if (!r->cand_text) {
        e->self = 1;
        e->cand = e->task;
        goto out;
    }
    st = kevo_candidate_parse(e->task, r->cand_path, r->cand_text, strlen(r->cand_text),
                              &e->cand_parsed, &m);
    e->cand = e->cand_parsed;
    if (st && st != KEVO_ERR_NOMEM) {
        kevo_eval_fail(e, KEVO_VERDICT_COMPILE_ERROR,
                       json_pack("{s:s}", "message", m ? m : "the candidate does not parse"), "%s",
                       m ? m : "the candidate does not parse");
        st = KEVO_OK;
    }
out:
    kevo_free(m);
    return st;
}

/* Put workload x's verdict into its JSON entry and, if it is the first failure, into the
 * evaluation's. */
static void wl_record(struct kevo_ev *e, struct kevo_wl *x)
{
    json_object_set_new(x->j, "verdict", json_string(kevo_verdict_name(x->verdict)));
    if (!x->verdict)
        return;
    json_object_set(x->j, "evidence", x->evidence);
    json_object_set_new(x->j, "message", json_string(x->message ? x->message : ""));
    if (e->verdict)
        return;
    json_t *evd = json_deep_copy(x->evidence);
    json_object_set_new(evd, "workload", json_integer(x->w));
    kevo_eval_fail(e, x->verdict, evd, "%s", x->message ? x->message : "");
}

/* Correctness of workload w; appends its entry to "workloads". */
static enum kevo_status phase_verify(struct kevo_ev *e, int w)
{
    struct kevo_wl x;
    enum kevo_status st = kevo_eval_wl_setup(e, &x, w);

    x.j = json_pack("{s:i, s:b, s:o}", "index", w, "holdout", e->task->workloads[w].holdout != 0,
                    "sizes", kevo_eval_wl_sizes(e, &x));
    json_array_append_new(e->wls, x.j);
    double t0 = kevo_now();
    if (!st && !x.verdict)
        st = kevo_eval_wl_verify(e, &x);
    json_object_set_new(x.j, "verify_s", json_real(kevo_now() - t0));
    if (!st || x.verdict)
        wl_record(e, &x);
    kevo_eval_wl_free(e, &x);
    return st;
}

/* Timing of workload w, into its existing entry (index `entry` of "workloads"). */
static enum kevo_status phase_time(struct kevo_ev *e, int w, size_t entry)
{
    struct kevo_wl x;
    enum kevo_status st = kevo_eval_wl_setup(e, &x, w);

    x.j = json_array_get(e->wls, entry);
    double t0 = kevo_now();
    if (!st && !x.verdict)
        st = kevo_eval_wl_time(e, &x);
    json_object_set_new(x.j, "time_s", json_real(kevo_now() - t0));
    if (!st || x.verdict)
        wl_record(e, &x);
    kevo_eval_wl_free(e, &x);
    return st;
}

/* Whether the candidate is as fast as the request wants profiled ones: the geometric mean
 * of its timed medians (the run's score) below profile_below_s, when that is set. */
static int fast_enough(const struct kevo_ev *e)
{
    double lt = 0;
    int n = 0;
    size_t i;
    json_t *w;

    if (!(e->req->profile_below_s > 0))
        return 1;
    json_array_foreach(e->wls, i, w) {
        double t = json_number_value(json_object_get(json_object_get(w, "time"), "median_s"));
        if (t > 0)
            lt += log(t), n++;
    }
    return n && exp(lt / n) < e->req->profile_below_s;
}

/* Hardware counters of the candidate on workload w, the first of "workloads". */
static enum kevo_status phase_profile(struct kevo_ev *e, int w)
{
    struct kevo_wl x;
    enum kevo_status st = kevo_eval_wl_setup(e, &x, w);

    x.j = json_array_get(e->wls, 0);
    if (!st && !x.verdict)
        st = kevo_eval_wl_profile(e, &x, &e->profile);
    if (!st || x.verdict)
        wl_record(e, &x);
    kevo_eval_wl_free(e, &x);
    return st;
}

/* The whole evaluation: parse, compile, resources, correctness everywhere, then timing
 * everywhere, then (asked for) the counters; stops at the first verdict. */
static enum kevo_status run_all(struct kevo_ev *e)
{
    enum kevo_status st = parse_both(e);
    int primary = -1;

    if (!st && !e->verdict) {
        st = e->b->ops->info(e->b->ctx, &e->info);
        if (st)
            return kevo_eval_error(e, st, "device info: %s", kevo_status_name(st));
    }
    e->ref.src = e->task;
    e->can.src = e->cand;
    double t0 = kevo_now();
    if (!st && !e->verdict)
        st = compile_plan(e, &e->ref, 0);
    if (!st && !e->verdict && e->self)
        e->can = e->ref; /* one module, evaluated as its own candidate */
    else if (!st && !e->verdict)
        st = compile_plan(e, &e->can, 1);
    e->t_compile = kevo_now() - t0;
    if (st || e->verdict)
        return st;
    for (int w = 0; w < e->task->n_workloads && primary < 0; w++)
        primary = selected(e, w) ? w : -1;
    add_resources(e, primary);
    t0 = kevo_now();
    for (int w = 0; w < e->task->n_workloads && !st && !e->verdict; w++) {
        if (selected(e, w))
            st = phase_verify(e, w);
    }
    e->t_verify = kevo_now() - t0;
    t0 = kevo_now();
    size_t entry = 0;
    for (int w = 0; e->req->timing && w < e->task->n_workloads && !st && !e->verdict; w++) {
        if (selected(e, w))
            st = phase_time(e, w, entry++);
    }
    e->t_time = kevo_now() - t0;
    if (e->req->profile && !e->req->holdout && !st && !e->verdict && primary >= 0 &&
        fast_enough(e))
        st = phase_profile(e, primary);
    return st;
}

/* The result document (docs/eval-json.md) from the evaluation's state. */
static json_t *result_ok(struct kevo_ev *e)
{
    enum kevo_verdict v = e->verdict;
    json_t *evd = e->evidence ? json_incref(e->evidence) : json_object();
    const char *why = e->message ? e->message : kevo_verdict_name(v);
    char msg[1200];

    if (v == KEVO_VERDICT_OK)
        snprintf(msg, sizeof msg, "ok: %zu workload%s verified with %d trials each%s",
                 json_array_size(e->wls), json_array_size(e->wls) == 1 ? "" : "s", e->trials,
                 e->req->timing ? ", timed" : "");
    else if (!e->req->holdout)
        snprintf(msg, sizeof msg, "%s", why);
    else
        snprintf(msg, sizeof msg, "holdout failed: %s", why);
    if (e->req->holdout && v != KEVO_VERDICT_OK) {
        json_t *copy = json_deep_copy(evd);      /* e->evidence stays as it was */
        json_decref(evd);
        evd = copy;
        json_object_set_new(evd, "inner", json_string(kevo_verdict_name(v)));
        v = KEVO_VERDICT_HOLDOUT_FAIL;
    }
    return json_pack("{s:s, s:s, s:o, s:s, s:O, s:O, s:{s:f, s:f, s:f}}", "verdict",
                     kevo_verdict_name(v), "message", msg, "evidence", evd, "compile_log",
                     e->compile_log ? e->compile_log : "", "resources", e->resources,
                     "workloads", e->wls, "phases_s", "compile", e->t_compile, "verify",
                     e->t_verify, "time", e->t_time);
}

/* result_ok with the raw profile, when one was collected. */
static json_t *result_doc(struct kevo_ev *e)
{
    json_t *doc = result_ok(e);

    if (doc && e->profile)
        json_object_set(doc, "profile", e->profile);
    return doc;
}

/* Release everything the evaluation owns (cached modules stay with the cache). */
static void ev_free(struct kevo_ev *e)
{
    if (e->can.owned && e->can.owned != e->ref.owned)
        e->b->ops->module_free(e->b->ctx, e->can.owned);
    if (e->ref.owned)
        e->b->ops->module_free(e->b->ctx, e->ref.owned);
    if (e->can.ent != e->ref.ent)
        kevo_free(e->can.ent);
    kevo_free(e->ref.ent);
    if (e->can.protos != e->ref.protos)
        kevo_rules_protos_free(e->can.protos, e->can.src ? e->can.src->n_launches : 0);
    kevo_rules_protos_free(e->ref.protos, e->ref.src ? e->ref.src->n_launches : 0);
    kevo_task_free(e->cand_parsed);
    kevo_task_free(e->task);
    kevo_buf_free(&e->err);
    kevo_buf_free(&e->msg);
    kevo_free(e->compile_log);
    kevo_free(e->message);
    json_decref(e->evidence);
    json_decref(e->resources);
    json_decref(e->wls);
    json_decref(e->profile);
}

enum kevo_status kevo_eval_run(struct kevo_backend *b, const struct kevo_eval_req *req,
                               json_t **out_result)
{
    struct kevo_ev e;
    enum kevo_status st;

    *out_result = NULL;
    memset(&e, 0, sizeof e);
    e.b = b;
    e.req = req;
    e.canary = kevo_verify_canary(req->seed);
    /* The protocol's floor holds whoever built the request. */
    e.trials = req->trials < 3 ? 3 : req->trials > MAX_TRIALS ? MAX_TRIALS : req->trials;
    kevo_buf_init(&e.err, ERR_CAP);
    kevo_buf_init(&e.msg, ERR_CAP);
    e.wls = json_array();
    e.resources = json_array();
    st = !req->task_text ? KEVO_ERR_INVALID
         : (!e.wls || !e.resources) ? KEVO_ERR_NOMEM : run_all(&e);
    if (st == KEVO_ERR_DEVICE && !e.verdict)      /* lost in a copy or fill, not a launch */
        kevo_eval_fail(&e, KEVO_VERDICT_CRASH,
                       json_pack("{s:s}", "message", kevo_buf_str(&e.err)),
                       "the device context was lost: %s", kevo_buf_str(&e.err));
    if (!st || st == KEVO_ERR_DEVICE)
        *out_result = result_doc(&e);
    else if (st != KEVO_ERR_NOMEM)
        *out_result =
            json_pack("{s:s, s:s}", "error", kevo_status_name(st), "message",
                      kevo_buf_str(&e.msg)[0] ? kevo_buf_str(&e.msg) : kevo_status_name(st));
    if (!*out_result && (!st || st == KEVO_ERR_DEVICE))
        st = KEVO_ERR_NOMEM;
    ev_free(&e);
    return st;
}

/*
 * run_llm - the LLM operators' side of `kevo run` (run_int.h, docs/llm.md). The
 * controller builds each call's prompt from the archive (a parent's source, its verdict
 * and metrics, what its siblings did), serves it from the response cache when the same
 * prompt was answered before, and hands the others to llmops' threads. Each reply comes
 * back through the run's done queue: it is recorded (prompt, reply, tokens, cost), turned
 * into a candidate (src/ctl/reply.c) and queued for the workers, or recorded with the reason
 * it could not be used, without costing GPU time.
 */
#include "ctl/run_int.h"
#include "ctl/llm.h"
#include "base/mem.h"
#include "ctl/prompt.h"
#include "ctl/reply.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KEVO_SOURCE_DIR
#define KEVO_SOURCE_DIR "."
#endif
#define LLM_TEMPERATURE 0.7
#define LLM_MAX_TOKENS 8192
#define SIBLINGS 8
#define LLM_IDLE_MAX 3                 /* calls with nothing new before waiting for a result */
#define LLM_FAIL_MAX 5                 /* failed calls in a row before giving up on them */
#define KEVO_ERR_BUSY_LLM KEVO_ERR_TOOBIG   /* the cap's reserves are taken: not now */

/* ---- set-up ---- */

static void on_done(void *user, struct kevo_llm_call *call)
{
    struct runctx *r = user;
    struct job *j = call->carrier;   /* allocated at submit: a reply is never lost */
    call->carrier = NULL;
    if (!j && !(j = kevo_calloc(1, sizeof *j))) {   /* not submitted by submit(): a bug */
        kevo_llm_call_free(call);
        return;
    }
    j->llm = call;
    j->op = -1;
    kevo_run_q_push(&r->done, j);
}

static const char *dir_of(const char *opt, const char *env, const char *sub, char *buf, size_t n)
{
    const char *e = env ? getenv(env) : NULL;
    if (opt)
        return opt;
    if (e && *e)
        return e;
    snprintf(buf, n, "%s/%s", KEVO_SOURCE_DIR, sub);
    return buf;
}

/* Prices per million tokens from the price table (docs/llm.md "Cost"); a replay's are
 * the ones its original ran with (they size the cost cap's reserves). */
static enum kevo_status load_prices(struct runctx *r)
{
    char def[PATH_MAX];
    const char *path = dir_of(r->o->prices, "KEVO_PRICES", "prices.json", def, sizeof def);
    json_error_t e;
    json_t *used = r->replay ? json_object_get(r->cfg, "prices_used") : NULL;
    json_t *t = used ? json_incref(used) : json_load_file(path, 0, &e);

    if (!t && (r->o->prices || getenv("KEVO_PRICES")))
        return kevo_run_fail(r, KEVO_ERR_PARSE, "%s:%d: %s", path, e.line, e.text);
    for (int i = 0; i < r->n_models; i++) {
        json_t *p = json_object_get(t, r->models[i].name);
        if (json_is_object(p)) {
            r->models[i].price_in = json_number_value(json_object_get(p, "in"));
            r->models[i].price_out = json_number_value(json_object_get(p, "out"));
        } else if (r->o->cost_cap > 0) {
            json_decref(t);
            return kevo_run_fail(r, KEVO_ERR_INVALID, "--cost-cap: model '%s' has no price in %s "
                                 "(add it, or give a table with --prices FILE)",
                                 r->models[i].name, path);
        }
    }
    json_decref(t);
    return KEVO_OK;
}

enum kevo_status kevo_run_llm_prepare(struct runctx *r)
{
    const struct kevo_run_opts *o = r->o;
    enum kevo_status st = KEVO_OK;

    if (!o->n_models)
        return KEVO_OK;
    r->models = kevo_calloc((size_t)o->n_models, sizeof *r->models);
    if (!r->models)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < o->n_models && !st; i++) {
        char *m = NULL;
        st = kevo_llm_model_parse(o->models[i], &r->models[i], &m);
        if (st)
            st = kevo_run_fail(r, st, "--model %s: %s", o->models[i], m ? m : "bad model spec");
        else
            r->n_models++;
        kevo_free(m);
    }
    return st ? st : load_prices(r);
}

json_t *kevo_run_llm_prices(const struct runctx *r)
{
    json_t *o = json_object();
    for (int i = 0; o && i < r->n_models; i++)
        json_object_set_new(o, r->models[i].name, json_pack("{s:f, s:f}", "in",
                                                            r->models[i].price_in, "out",
                                                            r->models[i].price_out));
    return o;
}

enum kevo_status kevo_run_llm_start(struct runctx *r)
{
    const struct kevo_run_opts *o = r->o;
    struct kevo_llmops_cfg cfg;
    double spent = 0;
    enum kevo_status st;

    if (!r->n_models)
        return KEVO_OK;
    r->op_base = r->n_ops;
    for (int i = 0; i < KEVO_LLMOP_COUNT; i++)
        kevo_search_op_register(r->s, r->op_base + i, kevo_llmop_names[i], 1.0);
    if (kevo_archive_llm_cost(r->ar, r->run, &spent) != KEVO_OK)
        spent = 0;
    memset(&cfg, 0, sizeof cfg);
    cfg.n_models = r->n_models;
    cfg.models = r->models;
    cfg.max_concurrent = o->llm_concurrency > 0 ? o->llm_concurrency : 4;
    kevo_llm_limits_default(&cfg.limits);
    cfg.cost_cap = o->cost_cap;
    cfg.spent_before = spent;
    cfg.temperature = LLM_TEMPERATURE;
    cfg.max_tokens = LLM_MAX_TOKENS;
    cfg.replay = r->replay != NULL;
    st = kevo_llmops_new(&cfg, on_done, r, &r->llm);
    return st ? kevo_run_fail(r, st, "cannot start the LLM operators: %s", kevo_status_name(st))
              : KEVO_OK;
}

void kevo_run_llm_stop(struct runctx *r)
{
    kevo_llmops_free(r->llm);
    r->llm = NULL;
    kevo_free(r->llm_asked.h);
    kevo_free(r->llm_dry.h);
    kevo_free(r->llm_unusable.h);
    memset(&r->llm_asked, 0, sizeof r->llm_asked);
    memset(&r->llm_dry, 0, sizeof r->llm_dry);
    memset(&r->llm_unusable, 0, sizeof r->llm_unusable);
    for (int i = 0; r->models && i < r->n_models; i++)
        kevo_llm_model_clear(&r->models[i]);
    kevo_free(r->models);
    r->models = NULL;
}

/* ---- recent verdicts ---- */

void kevo_run_llm_note(struct runctx *r, int64_t id, int64_t parent, const char *op,
                       const char *verdict, double score)
{
    struct recent *e = &r->recent[r->n_recent++ % RECENT];
    e->id = id;
    e->parent = parent;
    e->score = score;
    e->fixed = 0;
    snprintf(e->op, sizeof e->op, "%s", op ? op : "?");
    snprintf(e->verdict, sizeof e->verdict, "%s", verdict ? verdict : "?");
}

/* What was tried from parent p, newest first. */
static char *siblings(struct runctx *r, int64_t p)
{
    struct kevo_buf b;
    int n = 0, total = r->n_recent < RECENT ? r->n_recent : RECENT;
    kevo_buf_init(&b, 1 << 16);
    for (int k = 1; k <= total && n < SIBLINGS; k++) {
        const struct recent *e = &r->recent[(r->n_recent - k) % RECENT];
        if (e->parent != p)
            continue;
        /* no ids: they differ between archives, and a prompt must not (the cache) */
        if (kevo_buf_addf(&b, "- %s: %s", e->op, e->verdict) != KEVO_OK)
            break;
        if (e->score > 0 && kevo_buf_addf(&b, ", %.4g us", e->score * 1e6) != KEVO_OK)
            break;
        if (kevo_buf_add(&b, "\n", 1) != KEVO_OK)
            break;
        n++;
    }
    return kevo_buf_take(&b);
}

/* The newest failed candidate not yet given to the fix operator (0: none). */
static int64_t failed_parent(struct runctx *r)
{
    int total = r->n_recent < RECENT ? r->n_recent : RECENT;
    for (int k = 1; k <= total; k++) {
        struct recent *e = &r->recent[(r->n_recent - k) % RECENT];
        if (strcmp(e->verdict, "ok") != 0 && !e->fixed && e->id) {
            e->fixed = 1;   /* one fix attempt per failure */
            return e->id;
        }
    }
    return 0;
}

/* ---- prompts ---- */

/* The source text and the latest eval result of candidate id (owned by the caller). */
static enum kevo_status evidence(struct runctx *r, int64_t id, char **text, json_t **result)
{
    struct kevo_cand_rec c;
    size_t n;
    char *res = NULL;
    enum kevo_status st;

    /* the stored text, not a parsed genome: a candidate that does not parse is exactly
     * what the fix operator is given */
    memset(&c, 0, sizeof c);
    *text = NULL;
    *result = NULL;
    st = kevo_archive_cand_get(r->ar, id, &c);
    if (!st)
        st = kevo_archive_source_get(r->ar, c.source_hash, text, &n);
    kevo_archive_cand_clear(&c);
    if (st)
        return kevo_run_fail(r, st, "candidate %lld: %s", (long long)id, kevo_archive_errmsg(r->ar));
    if (kevo_archive_eval_get(r->ar, id, "verify", &res) == KEVO_OK) {
        *result = json_loads(res, 0, NULL);
        kevo_free(res);
    }
    return st;
}

/* The prompt of call c (its op, phase, parents) into c->system/c->user. */
static enum kevo_status build(struct runctx *r, struct kevo_llm_call *c, const char *plan)
{
    char tdir[PATH_MAX], pdir[PATH_MAX], *p2 = NULL, *sib = NULL, *why = NULL;
    json_t *res1 = NULL, *res2 = NULL;
    enum kevo_status st = KEVO_OK;

    if (c->parent1)
        st = evidence(r, c->parent1, &c->parent_text, &res1);
    if (!st && c->parent2)
        st = evidence(r, c->parent2, &p2, &res2);
    if (!st && c->parent1)
        sib = siblings(r, c->parent1);
    if (!st) {
        struct kevo_prompt_ctx pc = {
            .template_dir = dir_of(r->o->prompts_dir, "KEVO_PROMPTS", "prompts", tdir, sizeof tdir),
            .playbook_dir = dir_of(r->o->playbook_dir, NULL, "docs/playbook", pdir, sizeof pdir),
            .task_text = r->task_text, .lang = r->task->lang == KEVO_LANG_CUDA ? "cuda" : "c",
            .tags = (const char *const *)r->task->tags, .n_tags = r->task->n_tags,
            .calib = r->calib, .parent = c->parent_text, .parent2 = p2, .result = res1,
            .result2 = res2, .siblings = sib, .plan = plan,
        };
        st = kevo_prompt_build(kevo_llmop_template(c->op, c->phase), &pc, &c->system, &c->user,
                               &why);
        if (st)
            st = kevo_run_fail(r, st, "%s", why ? why : "cannot build a prompt");
    }
    kevo_free(why);
    kevo_free(sib);
    kevo_free(p2);
    json_decref(res1);
    json_decref(res2);
    return st;
}

/* Parents for op; KEVO_ERR_NOTFOUND when the op has none now. */
static enum kevo_status parents(struct runctx *r, struct kevo_llm_call *c)
{
    c->island = kevo_search_next_island(r->s);
    switch (c->op) {
    case KEVO_LLMOP_GENERATE:
        return KEVO_OK;
    case KEVO_LLMOP_FIX:
        c->parent1 = failed_parent(r);
        break;
    case KEVO_LLMOP_CROSSOVER:
        c->parent1 = kevo_search_parent(r->s, c->island);
        c->parent2 = c->parent1 ? kevo_search_mate(r->s, c->island, c->parent1) : 0;
        if (!c->parent2)
            return KEVO_ERR_NOTFOUND;
        break;
    default:
        c->parent1 = kevo_search_parent(r->s, c->island);
        break;
    }
    if (!c->parent1)
        return KEVO_ERR_NOTFOUND;
    for (int i = 0; i < KEVO_CELLS; i++) {
        const struct kevo_elite *e = kevo_search_cell(r->s, c->island, i);
        if (e && e->id == c->parent1)
            c->parent_score = e->score;
    }
    return KEVO_OK;
}

/* Serve from the response cache, or mark a miss of an offline run. 1: deliverable now. */
static int from_cache(struct runctx *r, struct kevo_llm_call *c)
{
    char *reply = NULL;
    if (kevo_archive_llm_cached(r->ar, c->prompt_hash, &reply) != KEVO_OK)
        return 0;
    c->from_cache = 1;
    c->reply.text = reply;
    snprintf(c->reply.status, sizeof c->reply.status, "ok");
    return 1;
}

static int hs_has(const struct hashset *s, const char *hash)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->h[i], hash))
            return 1;
    return 0;
}

/* Was hash in s? Adds it (out of memory: forgotten, which only costs a repeat). */
static int hs_put(struct hashset *s, const char *hash)
{
    if (hs_has(s, hash))
        return 1;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        void *p = kevo_reallocarray(s->h, (size_t)cap, sizeof *s->h);
        if (!p)
            return 0;
        s->h = p;
        s->cap = cap;
    }
    memcpy(s->h[s->n++], hash, KEVO_HASH_HEX);
    return 0;
}

static enum kevo_status record_call(struct runctx *r, const struct kevo_llm_call *c, int64_t cand,
                                    const char *status, int64_t step);

/* c's answer brought nothing new: its prompt is not asked again in this session, nor,
 * for a plan's second call, the plan's prompt (it would lead to the same code). */
static void mark_dry(struct runctx *r, const struct kevo_llm_call *c)
{
    hs_put(&r->llm_dry, c->prompt_hash);
    if (c->phase && c->plan_hash[0])
        hs_put(&r->llm_dry, c->plan_hash);
}

/* An offline run may not ask c: recorded (status not_cached, no step), no more calls. */
static enum kevo_status not_cached(struct runctx *r, struct kevo_llm_call *c)
{
    r->llm_refused = 1;
    kevo_run_event(r, json_pack("{s:s, s:s, s:s}", "event", "llm", "status", "not_cached",
                                "op", kevo_llmop_names[c->op]));
    enum kevo_status st = record_call(r, c, 0, "not_cached", 0);   /* no reply: no step */
    kevo_llm_call_free(c);
    return st;
}

/* Live: the cache answers prompts of earlier sessions; a prompt asked again in this one
 * gets a fresh call (the cache would only give the same candidate again), which an
 * offline run may not make. 1: the call may go on. */
static int live_source(struct runctx *r, struct kevo_llm_call *c)
{
    int again = hs_put(&r->llm_asked, c->prompt_hash);
    if (!again && from_cache(r, c))
        return 1;
    return !r->o->offline;
}

static enum kevo_status submit(struct runctx *r, struct kevo_llm_call *c)
{
    int refused = 0, unbooked = 0;
    enum kevo_status st = kevo_llmops_hash(r->llm, c);
    if (st) {
        kevo_llm_call_free(c);
        return st;
    }
    /* its answer brought nothing new: a model that repeats itself would again */
    if (hs_has(&r->llm_dry, c->prompt_hash)) {
        kevo_llm_call_free(c);
        return KEVO_ERR_NOTFOUND;
    }
    c->sub = ++r->llm_submitted;
    if (r->replay) {   /* the original's call of this number answers it */
        st = kevo_replay_book(r, c, &refused);
        if (st == KEVO_ERR_NOTFOUND)   /* none: the cap must refuse it, as it did */
            unbooked = 1, st = KEVO_OK;
    } else {
        refused = !live_source(r, c);
    }
    if (st) {
        kevo_llm_call_free(c);
        return st;
    }
    if (refused)
        return not_cached(r, c);
    char hash[KEVO_HASH_HEX];
    enum kevo_llm_op op = c->op;
    memcpy(hash, c->prompt_hash, sizeof hash);
    if (!(c->carrier = kevo_calloc(1, sizeof(struct job)))) {
        kevo_llm_call_free(c);
        return KEVO_ERR_NOMEM;
    }
    st = kevo_llmops_submit(r->llm, c);
    if (st == KEVO_ERR_TOOBIG) {
        if (r->replay && !unbooked)   /* the original made this call: the cap did not refuse */
            return kevo_replay_call_differs(r, r->llm_submitted, hash, kevo_llmop_names[op], 1);
        /* with calls in flight, their reserves come back: wait; without, the cap is met */
        if (!r->llm_outstanding) {
            r->llm_refused = 1;
            kevo_run_event(r, json_pack("{s:s, s:s, s:f}", "event", "llm", "status", "cost_cap",
                                        "spent", kevo_llmops_spent(r->llm)));
        }
        return KEVO_ERR_BUSY_LLM;
    }
    if (!st)
        r->llm_outstanding++;
    if (!st && unbooked)
        st = kevo_replay_call_differs(r, r->llm_submitted, hash, kevo_llmop_names[op], 0);
    return st;
}

/* One new call, of some LLM op that has parents now; KEVO_ERR_NOTFOUND when none has. */
static enum kevo_status one_call(struct runctx *r)
{
    unsigned exclude = (1u << r->op_base) - 1u;   /* the operators that need no LLM */

    for (int tries = 0; tries < KEVO_LLMOP_COUNT; tries++) {
        int k = kevo_search_op_pick(r->s, exclude);
        if (k < 0)
            break;
        exclude |= 1u << k;
        struct kevo_llm_call *c = kevo_calloc(1, sizeof *c);
        if (!c)
            return KEVO_ERR_NOMEM;
        c->op = (enum kevo_llm_op)(k - r->op_base);
        c->model = kevo_llmops_pick_model(r->llm, kevo_rng_unit(kevo_search_rng(r->s)));
        enum kevo_status st = parents(r, c);
        if (st == KEVO_ERR_NOTFOUND) {
            kevo_llm_call_free(c);
            continue;
        }
        if (!st)
            st = build(r, c, NULL);
        if (st) {
            kevo_llm_call_free(c);
            return st;
        }
        st = submit(r, c);
        if (st != KEVO_ERR_NOTFOUND)
            return st;
        /* its prompt was answered before with nothing new: another op may have something */
    }
    return KEVO_ERR_NOTFOUND;
}

enum kevo_status kevo_run_llm_fill(struct runctx *r)
{
    int max = r->o->llm_concurrency > 0 ? r->o->llm_concurrency : 4;
    /* Calls that bring nothing new (duplicates, unusable replies) pause the LLM operators
     * until the next evaluation arrives: a model that keeps repeating itself must not
     * spend money faster than the workers can give the prompts something new to say. */
    while (r->llm && !r->reason && !r->llm_refused && r->llm_idle < LLM_IDLE_MAX) {
        int n = r->llm_outstanding;
        if (n >= max || r->n_done + r->inflight + n >= r->budget)
            break;
        enum kevo_status st = one_call(r);
        if (st == KEVO_ERR_NOTFOUND || st == KEVO_ERR_BUSY_LLM)
            break;
        if (st)
            return st;
    }
    return KEVO_OK;
}

/* ---- replies ---- */

/* The call in the archive (with the candidate it became, 0 for none). */
static enum kevo_status record_call(struct runctx *r, const struct kevo_llm_call *c, int64_t cand,
                                    const char *status, int64_t step)
{
    struct kevo_buf prompt;
    struct kevo_llm_call_rec rec;
    int64_t id = 0;
    enum kevo_status st;

    kevo_buf_init(&prompt, (size_t)16 << 20);
    kevo_buf_say(&prompt, "[system]\n%s\n[user]\n%s", c->system ? c->system : "",
                 c->user ? c->user : "");   /* a prompt over 16 MiB is stored cut */
    memset(&rec, 0, sizeof rec);
    rec.run_id = r->run;
    rec.cand_id = cand;
    rec.model = kevo_llmops_model_name(r->llm, c->model);
    rec.op = c->phase ? "llm_plan_code" : kevo_llmop_names[c->op];
    memcpy(rec.prompt_hash, c->prompt_hash, sizeof rec.prompt_hash);
    rec.prompt = kevo_buf_str(&prompt);
    rec.reply = c->reply.text;
    rec.tokens_in = c->reply.tokens_in;
    rec.tokens_out = c->reply.tokens_out;
    rec.cost = c->cost;
    rec.latency_s = c->reply.latency_s;
    rec.step = step;
    rec.submitted = c->sub;
    char st_buf[340], st_rep[360];
    if (c->from_cache)   /* "cached", "cached unusable: ...": not a network call */
        snprintf(st_buf, sizeof st_buf, "cached%s%s", strcmp(status, "ok") ? " " : "",
                 strcmp(status, "ok") ? status : "");
    rec.status = c->from_cache ? st_buf : status;
    if (r->replay) {   /* "replay: ok": the original's reply again, nothing spent */
        snprintf(st_rep, sizeof st_rep, "replay: %s", rec.status);
        rec.status = st_rep;
        rec.cost = 0;
        rec.latency_s = 0;
    }
    st = kevo_archive_llm_add(r->ar, &rec, &id);
    kevo_buf_free(&prompt);
    return st ? kevo_run_fail(r, st, "recording an LLM call: %s", kevo_archive_errmsg(r->ar))
              : KEVO_OK;
}

/* A reply that brought nothing new (a text the run has, usable or not): a failure of its
 * operator and model, and one more call towards the pause of LLM_IDLE_MAX. Without the
 * pause, a model that keeps answering the same thing would be asked forever: nothing is
 * evaluated, so no budget runs out. */
static void nothing_new(struct runctx *r, const struct kevo_llm_call *c)
{
    mark_dry(r, c);
    kevo_search_op_proposed(r->s, r->op_base + c->op);
    kevo_search_op_result(r->s, r->op_base + c->op, 0, 0);
    kevo_llmops_model_result(r->llm, c->model, 0, 0);
    r->llm_idle++;
    kevo_run_event(r, json_pack("{s:s, s:s, s:s}", "event", "llm", "status", "duplicate",
                                "op", kevo_llmop_names[c->op]));
}

/* A reply whose candidate does not parse: a verdict without GPU time. */
static enum kevo_status unparsable(struct runctx *r, const struct kevo_llm_call *c,
                                   const char *text, size_t len, const char *msg, int64_t *id)
{
    struct kevo_cand_rec cr;
    enum kevo_status st;

    memset(&cr, 0, sizeof cr);
    st = kevo_archive_source_put(r->ar, text, len, cr.source_hash);
    if (!st)
        st = kevo_sha256_hex(text, len, cr.key);
    if (st)
        return st;
    cr.run_id = r->run;
    cr.parent1 = c->parent1;
    cr.parent2 = c->parent2;
    snprintf(cr.op, sizeof cr.op, "%s", kevo_llmop_names[c->op]);
    cr.params_json = "{}";
    cr.flags_json = "[]";
    cr.island = c->island;
    cr.cell = -1;
    st = kevo_archive_cand_add(r->ar, &cr, id);
    if (st == KEVO_ERR_INVALID) {   /* the same unusable text again: recorded once */
        nothing_new(r, c);
        return KEVO_OK;
    }
    json_t *res = json_pack("{s:s, s:s, s:{s:s}}", "verdict", "compile_error", "message", msg,
                            "evidence", "message", msg);
    char *rs = res ? json_dumps(res, JSON_COMPACT) : NULL;
    if (!st)
        st = kevo_archive_cand_finish(r->ar, *id, KEVO_VERDICT_COMPILE_ERROR, 0, 0, 0, "{}",
                                      rs ? rs : "{}");
    kevo_free(rs);
    json_decref(res);
    r->n_done++;
    r->since_best++;
    kevo_search_op_proposed(r->s, r->op_base + c->op);
    kevo_search_op_result(r->s, r->op_base + c->op, 0, 0);
    kevo_llmops_model_result(r->llm, c->model, 0, 0);
    kevo_run_llm_note(r, *id, c->parent1, kevo_llmop_names[c->op], "compile_error", 0);
    kevo_run_event(r, json_pack("{s:s, s:I, s:s, s:s, s:s}", "event", "eval", "id",
                                (json_int_t)*id, "op", kevo_llmop_names[c->op], "verdict",
                                "compile_error", "message", msg));
    return st ? kevo_run_fail(r, st, "recording a candidate: %s", kevo_archive_errmsg(r->ar))
              : KEVO_OK;
}

/* The candidate of an applied reply: parsed, recorded, queued for the workers. */
static enum kevo_status propose_text(struct runctx *r, struct kevo_llm_call *c, const char *text,
                                     size_t len, int64_t *id)
{
    struct kevo_genome g;
    struct job *j = NULL;
    char *m = NULL, path[64];
    enum kevo_status st;

    /* no run id: the parser's messages reach fix prompts, which must not differ by run */
    snprintf(path, sizeof path, "llm%s", r->task->lang == KEVO_LANG_CUDA ? ".cu" : ".c");
    st = kevo_genome_from_text(r->task, path, text, len, &g, &m);
    if (st == KEVO_ERR_NOMEM)
        return st;
    if (st) {
        st = unparsable(r, c, text, len, m ? m : "the candidate does not parse", id);
        kevo_free(m);
        return st;
    }
    st = kevo_run_record(r, &g, kevo_llmop_names[c->op], r->op_base + c->op, c->parent1,
                         c->parent2, c->parent_score, c->island, &j);
    kevo_genome_clear(&g);
    if (st == KEVO_ERR_INVALID) {   /* the model proposed a text the run already has */
        nothing_new(r, c);
        return KEVO_OK;
    }
    if (st)
        return st;
    kevo_search_op_proposed(r->s, r->op_base + c->op);
    j->model = c->model;
    *id = j->id;
    kevo_run_q_push(&r->jobs, j);
    r->inflight++;
    return KEVO_OK;
}

/* Plan-then-code: the strategy came back; ask for its implementation. */
static enum kevo_status plan_code(struct runctx *r, const struct kevo_llm_call *c)
{
    struct kevo_llm_call *n = kevo_calloc(1, sizeof *n);
    if (!n)
        return KEVO_ERR_NOMEM;
    n->op = c->op;
    n->phase = 1;
    n->model = c->model;
    n->parent1 = c->parent1;
    n->island = c->island;
    n->parent_score = c->parent_score;
    memcpy(n->plan_hash, c->prompt_hash, sizeof n->plan_hash);
    enum kevo_status st = build(r, n, c->reply.text);
    if (st) {
        kevo_llm_call_free(n);
        return st;
    }
    st = submit(r, n);
    if (st == KEVO_ERR_NOTFOUND) {   /* implemented before, to no avail: the plan is too */
        nothing_new(r, c);
        return KEVO_OK;
    }
    if (st == KEVO_ERR_BUSY_LLM) {   /* over the cap: the plan is dropped, nothing came of it */
        r->llm_idle++;
        return KEVO_OK;
    }
    return st;
}

enum kevo_status kevo_run_llm_handle(struct runctx *r, struct job *j)
{
    struct kevo_llm_call *c = j->llm;
    char *text = NULL, *why = NULL, status[300];
    size_t len = 0;
    enum kevo_reply_form form;
    int64_t id = 0;
    enum kevo_status st = KEVO_OK;

    kevo_llmops_settle(r->llm, c);   /* its cost counts from this step on */
    if (strcmp(c->reply.status, "ok") != 0) {
        /* each call already retried within its limits; a provider that still fails
         * LLM_FAIL_MAX times in a row is given up on for the session */
        kevo_llmops_model_result(r->llm, c->model, 0, 0);
        if (++r->llm_failed >= LLM_FAIL_MAX && !r->llm_refused) {
            r->llm_refused = 1;
            kevo_run_event(r, json_pack("{s:s, s:s, s:i}", "event", "llm", "status",
                                        "given_up", "failed_in_a_row", r->llm_failed));
        }
        kevo_run_event(r, json_pack("{s:s, s:s, s:s, s:s?}", "event", "llm", "status",
                                    c->reply.status, "op", kevo_llmop_names[c->op], "message",
                                    c->reply.error));
        return record_call(r, c, 0, c->reply.status, r->cur_step);
    }
    r->llm_failed = 0;
    if (r->reason || r->n_done + r->inflight >= r->budget)   /* too late: the budget is spent */
        return record_call(r, c, 0, "unused: the budget was spent", r->cur_step);
    if (c->op == KEVO_LLMOP_PLAN && c->phase == 0) {
        st = record_call(r, c, 0, "ok", r->cur_step);
        return st ? st : plan_code(r, c);
    }
    st = kevo_reply_apply(c->reply.text, strlen(c->reply.text), c->parent_text,
                          c->parent_text ? strlen(c->parent_text) : 0, &text, &len, &form, &why);
    if (st == KEVO_ERR_PARSE) {
        r->llm_idle++;
        if (hs_put(&r->llm_unusable, c->prompt_hash))   /* twice: it is the prompt */
            mark_dry(r, c);
        snprintf(status, sizeof status, "unusable: %s", why ? why : "?");
        kevo_run_event(r, json_pack("{s:s, s:s, s:s, s:s}", "event", "llm", "status", "unusable",
                                    "op", kevo_llmop_names[c->op], "message", why ? why : "?"));
        kevo_free(why);
        return record_call(r, c, 0, status, r->cur_step);
    }
    if (!st)
        st = propose_text(r, c, text, len, &id);
    if (!st)
        st = record_call(r, c, id, "ok", r->cur_step);
    kevo_free(text);
    return st;
}

/*
 * run_llm - the LLM operators of `kevo run` (run_llm.h, docs/llm.md). Starting one
 * builds its call's prompt from the archive (a parent's source, its verdict and metrics,
 * what its siblings did); the step source (steps.h) says where the answer comes from: the
 * response cache when the same prompt was answered before, else the model through
 * llmops' threads (live), or the original's answer (replay). Each reply comes back as a
 * step of the run: it is recorded (prompt, reply, tokens, cost), turned into a candidate
 * (reply.c) and sent for evaluation, or recorded with the reason it could not be used,
 * without costing GPU time.
 */
#include "ctl/run_llm.h"

#include "base/log.h"
#include "base/mem.h"
#include "core/result.h"
#include "ctl/exchange.h"
#include "ctl/llm.h"
#include "ctl/models.h"
#include "ctl/prompt.h"
#include "ctl/reply.h"
#include "ctl/steps.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLM_TEMPERATURE 0.7            /* the settings of runs recorded before "llm_settings" */
#define LLM_MAX_TOKENS 8192
#define SIBLINGS 8
#define LLM_IDLE_MAX 3                 /* calls with nothing new before waiting for a result */
#define LLM_FAIL_MAX 5                 /* failed calls in a row before giving up on them */
#define KEVO_ERR_BUSY_LLM KEVO_ERR_TOOBIG   /* the cap's reserves are taken: not now */
#define RECENT 64                      /* recent verdicts kept for prompts and the fix operator */

struct hashset {                       /* prompt hashes (a run asks hundreds, not millions) */
    char (*h)[KEVO_HASH_HEX];
    int n, cap;
};

struct idset {                         /* candidate ids (a session's imported ones) */
    int64_t *v;
    int n, cap;
};

struct recent {                        /* one recent verdict */
    int64_t id, parent;
    char op[32];
    enum kevo_verdict verdict;
    double score;
    int fixed;                         /* already given to the fix operator */
};

/* The LLM operators' state (r->llm). */
struct run_llm {
    struct kevo_llmops *calls;         /* the calls' threads and costs; NULL until started */
    struct kevo_llm_model *models;
    int n_models;
    int op_at[KEVO_LLMOP_COUNT];       /* each LLM op's index in the run's operator table */
    struct recent recent[RECENT];
    int n_recent;
    int refused;                       /* the cost cap refused a call: no more are started */
    int outstanding;                   /* calls submitted and not yet handled */
    int idle;                          /* calls since the last evaluation that brought nothing */
    struct hashset asked;              /* prompts asked in this session */
    struct hashset dry;                /* prompts whose answer brought nothing new: not asked
                                          again in this session */
    struct hashset unusable;           /* prompts that got an unusable reply (twice: dry) */
    struct hashset wanted;             /* prompts an offline session recorded as pending */
    struct idset awaiting;             /* candidates of imported replies, not evaluated yet */
    int64_t submitted;                 /* calls submitted in this session (refused ones too) */
    int failed;                        /* calls in a row the provider failed */
};

static enum kevo_status start_call(void *user, const struct kevo_operator *self);

/* The LLM operators: entries of the run's operator table, started, not proposed. Names as
 * kevo_llmop_names (kevo_run_llm_start checks). */
static const struct kevo_operator llm_ops[KEVO_LLMOP_COUNT] = {
    { .name = "llm_generate", .n_parents = 0, .prior = 1.0, .start = start_call,
      .llm_op = KEVO_LLMOP_GENERATE },
    { .name = "llm_improve", .n_parents = 1, .prior = 1.0, .start = start_call,
      .llm_op = KEVO_LLMOP_IMPROVE },
    { .name = "llm_fix", .n_parents = 1, .prior = 1.0, .start = start_call,
      .llm_op = KEVO_LLMOP_FIX },
    { .name = "llm_crossover", .n_parents = 2, .prior = 1.0, .start = start_call,
      .llm_op = KEVO_LLMOP_CROSSOVER },
    { .name = "llm_plan", .n_parents = 1, .prior = 1.0, .start = start_call,
      .llm_op = KEVO_LLMOP_PLAN },
};

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
    r->steps->arrive(r, j);
}

static const char *dir_of(const char *opt, const char *env, const char *sub, char *buf, size_t n)
{
    const char *e = env ? getenv(env) : NULL;
    if (opt)
        return opt;
    if (e && *e)
        return e;
    snprintf(buf, n, "%s/%s", kevo_data_dir(NULL), sub);
    return buf;
}

/* Prices per million tokens from the price table (docs/llm.md "Cost"); a replay's are
 * the ones its original ran with (they size the cost cap's reserves). A model the table
 * has is priced (at 0 too: a local model); one it lacks has no price. */
static enum kevo_status load_prices(struct runctx *r)
{
    json_t *t = NULL;
    char *path = NULL, *msg = NULL;
    enum kevo_status st = KEVO_OK;

    if (r->set.prices_used)
        t = json_incref(r->set.prices_used);
    else if (kevo_prices_load(r->o->prices, &t, &path, &msg) != KEVO_OK)
        st = kevo_run_fail(r, KEVO_ERR_PARSE, "%s", msg ? msg : "the price table");
    for (int i = 0; !st && i < r->llm->n_models; i++)
        if (!kevo_prices_apply(t, &r->llm->models[i]) && r->o->cost_cap > 0)
            st = kevo_run_fail(r, KEVO_ERR_INVALID, "--cost-cap: model '%s' has no price in %s "
                               "(add it, or give a table with --prices FILE)",
                               r->llm->models[i].name, path ? path : "the price table");
    kevo_free(msg);
    kevo_free(path);
    json_decref(t);
    return st;
}

/* ---- the check before the first call ---- */

/* Only the models that passed stay, in r->llm and in this session's options (r->o), so
 * the run's config records the models the session used, and a replay uses the same. */
static enum kevo_status keep_models(struct runctx *r, const int *ok)
{
    struct run_llm *L = r->llm;
    const char **specs = r->set.cfg_models;   /* the config's own, when the specs are its */
    int k = 0;

    KEVO_ASSERT(r->o == &r->set.eff && r->set.eff.n_models == L->n_models);
    if (r->set.eff.models != specs) {
        specs = kevo_calloc((size_t)L->n_models, sizeof *specs);
        if (!specs)
            return KEVO_ERR_NOMEM;
        memcpy(specs, r->set.eff.models, (size_t)L->n_models * sizeof *specs);
        kevo_free(r->set.cfg_models);
        r->set.cfg_models = specs;   /* strings borrowed from the caller, for the run */
    }
    for (int i = 0; i < L->n_models; i++) {
        if (!ok[i]) {
            kevo_llm_model_clear(&L->models[i]);
            continue;
        }
        specs[k] = specs[i];
        L->models[k] = L->models[i];   /* moved */
        if (k++ != i)
            memset(&L->models[i], 0, sizeof L->models[i]);
    }
    L->n_models = k;
    r->set.eff.models = specs;
    r->set.eff.n_models = k;
    return KEVO_OK;
}

/* One model's check as an event; its diagnosis added to why when it failed. */
static void check_event(struct runctx *r, int i, const struct kevo_models_result *res,
                        struct kevo_buf *why)
{
    const struct kevo_llm_model *m = &r->llm->models[i];
    json_t *e = json_pack("{s:s}", "event", "llm_check");

    json_object_update_new(e, kevo_models_result_json(r->o->models[i], res));
    json_object_set_new(e, "cost", m->priced ? json_real(((double)res->tokens_in * m->price_in +
                                                          (double)res->tokens_out *
                                                          m->price_out) / 1e6) : json_null());
    kevo_run_event(r, e);
    if (!res->ok)
        kevo_buf_say(why, "%s%s: %s", why->len ? "; " : "", r->o->models[i],
                     res->diagnosis ? res->diagnosis : res->status);
}

/*
 * A live session that may use the network checks every model with one tiny request
 * (models.h) before anything starts: a model that fails is dropped from the session, and
 * when none works the run refuses to start, with each one's diagnosis. The checks are
 * not the run's LLM calls: not in llm_calls, not held against the cost cap (a few dozen
 * tokens each; the event "llm_check" says what one cost). A replay does no check.
 */
static enum kevo_status preflight(struct runctx *r)
{
    struct run_llm *L = r->llm;
    struct kevo_llm *c = NULL;
    struct kevo_buf why;
    int *ok = NULL, n_ok = 0;
    enum kevo_status st;

    if (r->steps->recorded || r->o->offline)
        return KEVO_OK;
    kevo_buf_init(&why, 1 << 15);
    ok = kevo_calloc((size_t)L->n_models, sizeof *ok);
    st = ok ? kevo_models_client(&c) : KEVO_ERR_NOMEM;
    for (int i = 0; !st && i < L->n_models; i++) {
        struct kevo_models_result res;
        st = kevo_models_check(c, &L->models[i], &res);
        if (st)
            break;
        res.price_known = L->models[i].priced;
        ok[i] = res.ok;
        n_ok += res.ok;
        check_event(r, i, &res, &why);
        kevo_models_result_clear(&res);
    }
    kevo_llm_free(c);
    if (!st && !n_ok)
        st = kevo_run_fail(r, KEVO_ERR_INVALID, "no LLM model works (kevo models check says "
                           "the same): %s", kevo_buf_str(&why));
    else if (!st && n_ok < L->n_models)
        st = keep_models(r, ok);
    kevo_buf_free(&why);
    kevo_free(ok);
    return st;
}

enum kevo_status kevo_run_llm_prepare(struct runctx *r)
{
    const struct kevo_run_opts *o = r->o;
    enum kevo_status st = KEVO_OK;

    if (!o->n_models)
        return KEVO_OK;
    r->llm = kevo_calloc(1, sizeof *r->llm);
    if (!r->llm)
        return KEVO_ERR_NOMEM;
    r->llm->models = kevo_calloc((size_t)o->n_models, sizeof *r->llm->models);
    if (!r->llm->models)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < o->n_models && !st; i++) {
        char *m = NULL;
        st = kevo_llm_model_parse(o->models[i], &r->llm->models[i], &m);
        if (st)
            st = kevo_run_fail(r, st, "--model %s: %s", o->models[i], m ? m : "bad model spec");
        else
            r->llm->n_models++;
        kevo_free(m);
    }
    if (!st)
        st = load_prices(r);
    return st ? st : preflight(r);   /* models that do not work are dropped here */
}

json_t *kevo_run_llm_prices(const struct runctx *r)
{
    json_t *o = json_object();
    for (int i = 0; o && i < r->llm->n_models; i++) {
        const struct kevo_llm_model *m = &r->llm->models[i];
        if (m->priced)   /* the others have no price, which is not a price of 0 */
            json_object_set_new(o, m->name, json_pack("{s:f, s:f, s:f}", "in", m->price_in,
                                                      "out", m->price_out, "cached_in",
                                                      m->price_cached_in));
    }
    return o;
}

enum kevo_status kevo_run_llm_start(struct runctx *r)
{
    const struct kevo_run_opts *o = r->o;
    struct kevo_llmops_cfg cfg;
    double spent = 0;
    enum kevo_status st;

    if (!r->llm || !r->llm->n_models)
        return KEVO_OK;
    if (r->loop.n_ops + KEVO_LLMOP_COUNT > (int)(sizeof r->loop.ops / sizeof r->loop.ops[0]))
        return kevo_run_fail(r, KEVO_ERR_INVALID, "too many operators");
    for (int i = 0; i < KEVO_LLMOP_COUNT; i++) {
        if (strcmp(llm_ops[i].name, kevo_llmop_names[i]) != 0)   /* a programmer's slip */
            return kevo_run_fail(r, KEVO_ERR_INVALID, "LLM operator %d: '%s' is not '%s'", i,
                                 llm_ops[i].name, kevo_llmop_names[i]);
        r->llm->op_at[i] = r->loop.n_ops;
        r->loop.ops[r->loop.n_ops] = &llm_ops[i];
        kevo_search_op_register(r->loop.s, r->loop.n_ops, llm_ops[i].name, llm_ops[i].prior);
        r->loop.n_ops++;
    }
    if (kevo_archive_llm_cost(r->ar, r->run, &spent) != KEVO_OK)
        spent = 0;
    memset(&cfg, 0, sizeof cfg);
    cfg.n_models = r->llm->n_models;
    cfg.models = r->llm->models;
    cfg.max_concurrent = o->llm_concurrency > 0 ? o->llm_concurrency : 4;
    kevo_llm_limits_default(&cfg.limits);
    cfg.cost_cap = o->cost_cap;
    cfg.spent_before = spent;
    /* what the models' specs leave unset: a run whose config predates per-model settings
     * (no "llm_settings", llmops.h) goes on, or replays, as it asked */
    int legacy = r->set.cfg && !json_object_get(r->set.cfg, "llm_settings");
    cfg.temperature = legacy ? LLM_TEMPERATURE : -1;
    cfg.max_tokens = legacy ? LLM_MAX_TOKENS : 0;
    cfg.replay = r->steps->recorded;   /* answered from the record, on no thread */
    st = kevo_llmops_new(&cfg, on_done, r, &r->llm->calls);
    return st ? kevo_run_fail(r, st, "cannot start the LLM operators: %s", kevo_status_name(st))
              : KEVO_OK;
}

void kevo_run_llm_stop(struct runctx *r)
{
    struct run_llm *L = r->llm;

    if (!L)
        return;
    kevo_llmops_free(L->calls);
    kevo_free(L->asked.h);
    kevo_free(L->dry.h);
    kevo_free(L->unusable.h);
    kevo_free(L->wanted.h);
    kevo_free(L->awaiting.v);
    for (int i = 0; L->models && i < L->n_models; i++)
        kevo_llm_model_clear(&L->models[i]);
    kevo_free(L->models);
    kevo_free(L);
    r->llm = NULL;
}

int kevo_run_llm_outstanding(const struct runctx *r)
{
    return r->llm ? r->llm->outstanding : 0;
}

int kevo_run_llm_spent(const struct runctx *r, double *out)
{
    *out = r->llm && r->llm->calls ? kevo_llmops_spent(r->llm->calls) : 0;
    return r->llm && r->llm->calls;
}

struct kevo_llm_call *kevo_run_llm_take(struct runctx *r, int64_t sub)
{
    return r->llm && r->llm->calls ? kevo_llmops_take(r->llm->calls, sub) : NULL;
}

/* ---- recent verdicts ---- */

/* Add id to s (out of memory: forgotten, which only lifts a wait early). */
static void ids_put(struct idset *s, int64_t id)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        int64_t *p = kevo_reallocarray(s->v, (size_t)cap, sizeof *p);
        if (!p)
            return;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = id;
}

/* Remove id from s, if there. */
static void ids_take(struct idset *s, int64_t id)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == id) {
            s->v[i] = s->v[--s->n];
            return;
        }
}

static void note(struct runctx *r, int64_t id, int64_t parent, const char *op,
                 enum kevo_verdict verdict, double score)
{
    struct recent *e = &r->llm->recent[r->llm->n_recent++ % RECENT];
    e->id = id;
    e->parent = parent;
    e->score = score;
    e->fixed = 0;
    snprintf(e->op, sizeof e->op, "%s", op ? op : "?");
    e->verdict = verdict;
}

void kevo_run_llm_evaluated(struct runctx *r, const struct job *j, const char *op,
                            enum kevo_verdict verdict, double score, int ok, int improved)
{
    struct kevo_cand_rec c;
    int64_t parent;

    if (!r->llm)
        return;
    r->llm->idle = 0;   /* a new result: the prompts have something new to say */
    ids_take(&r->llm->awaiting, j->id);
    if (j->model >= 0)
        kevo_llmops_model_result(r->llm->calls, j->model, ok, improved);
    memset(&c, 0, sizeof c);
    parent = kevo_archive_cand_get(r->ar, j->id, &c) == KEVO_OK ? c.parent1 : 0;
    kevo_archive_cand_clear(&c);
    note(r, j->id, parent, op, verdict, score);
}

/* What was tried from parent p, newest first. */
static char *siblings(struct runctx *r, int64_t p)
{
    struct kevo_buf b;
    int n = 0, total = r->llm->n_recent < RECENT ? r->llm->n_recent : RECENT;
    kevo_buf_init(&b, 1 << 16);
    for (int k = 1; k <= total && n < SIBLINGS; k++) {
        const struct recent *e = &r->llm->recent[(r->llm->n_recent - k) % RECENT];
        if (e->parent != p)
            continue;
        /* no ids: they differ between archives, and a prompt must not (the cache) */
        if (kevo_buf_addf(&b, "- %s: %s", e->op, kevo_verdict_name(e->verdict)) != KEVO_OK)
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
    int total = r->llm->n_recent < RECENT ? r->llm->n_recent : RECENT;
    for (int k = 1; k <= total; k++) {
        struct recent *e = &r->llm->recent[(r->llm->n_recent - k) % RECENT];
        if (e->verdict != KEVO_VERDICT_OK && !e->fixed && e->id) {
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
            .task_text = r->set.task_text, .lang = r->set.task->lang == KEVO_LANG_CUDA ? "cuda" : "c",
            .tags = (const char *const *)r->set.task->tags, .n_tags = r->set.task->n_tags,
            .calib = r->set.calib, .parent = c->parent_text, .parent2 = p2, .result = res1,
            .result2 = res2, .siblings = sib, .plan = plan, .task = r->set.task,
        };
        st = kevo_prompt_build(kevo_llmop_template(c->op, c->phase), &pc, &c->system, &c->user,
                               &why);
        /* a template that cannot be read is kevo's failure (a data directory without
         * prompts/), not an op without parents: as KEVO_ERR_NOTFOUND, one_call would try
         * the next op and the LLM operators would stop without a word */
        if (st)
            st = kevo_run_fail(r, st == KEVO_ERR_NOTFOUND ? KEVO_ERR_IO : st, "%s",
                               why ? why : "cannot build a prompt");
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
    c->island = kevo_search_next_island(r->loop.s);
    switch (c->op) {
    case KEVO_LLMOP_GENERATE:
        return KEVO_OK;
    case KEVO_LLMOP_FIX:
        c->parent1 = failed_parent(r);
        break;
    case KEVO_LLMOP_CROSSOVER:
        c->parent1 = kevo_search_parent(r->loop.s, c->island);
        c->parent2 = c->parent1 ? kevo_search_mate(r->loop.s, c->island, c->parent1) : 0;
        if (!c->parent2)
            return KEVO_ERR_NOTFOUND;
        break;
    default:
        c->parent1 = kevo_search_parent(r->loop.s, c->island);
        break;
    }
    if (!c->parent1)
        return KEVO_ERR_NOTFOUND;
    for (int i = 0; i < KEVO_CELLS; i++) {
        const struct kevo_elite *e = kevo_search_cell(r->loop.s, c->island, i);
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
                                    const char *status, const char *why, int64_t step);

/* c's answer brought nothing new: its prompt is not asked again in this session, nor,
 * for a plan's second call, the plan's prompt (it would lead to the same code). */
static void mark_dry(struct runctx *r, const struct kevo_llm_call *c)
{
    hs_put(&r->llm->dry, c->prompt_hash);
    if (c->phase && c->plan_hash[0])
        hs_put(&r->llm->dry, c->plan_hash);
}

/* An offline run may not ask c: recorded as pending (status not_cached, no step) for
 * `kevo llm pending` (docs/llm.md "Air-gapped clusters"); after as many as calls may be
 * in flight, the LLM operators stop for the session (what they would ask next depends
 * on the answers). */
static enum kevo_status not_cached(struct runctx *r, struct kevo_llm_call *c)
{
    hs_put(&r->llm->wanted, c->prompt_hash);
    if (r->llm->wanted.n >= (r->o->llm_concurrency > 0 ? r->o->llm_concurrency : 4))
        r->llm->refused = 1;
    enum kevo_status st = record_call(r, c, 0, "not_cached", NULL, 0);   /* no reply: no step */
    kevo_llm_call_free(c);
    return st;
}

/* Live: the cache answers prompts of earlier sessions; a prompt asked again in this one
 * gets a fresh call (the cache would only give the same candidate again), which an
 * offline run may not make. 1: the call may go on. */
static int live_source(struct runctx *r, struct kevo_llm_call *c)
{
    int again = hs_put(&r->llm->asked, c->prompt_hash);
    if (!again && from_cache(r, c))
        return 1;
    return !r->o->offline;
}

/* The source booked a call on its original's record: only such a source has differs(). */
static enum kevo_status differs(struct runctx *r, const char *hash, enum kevo_llm_op op,
                                int cap_refused)
{
    KEVO_ASSERT(r->steps->differs);
    return r->steps->differs(r, r->llm->submitted, hash, kevo_llmop_names[op], cap_refused);
}

static enum kevo_status submit(struct runctx *r, struct kevo_llm_call *c)
{
    enum kevo_steps_book src = KEVO_STEPS_BOOK_LIVE;
    int refused = 0;
    enum kevo_status st = kevo_llmops_hash(r->llm->calls, c);
    if (st) {
        kevo_llm_call_free(c);
        return st;
    }
    /* its answer brought nothing new: a model that repeats itself would again; or it is
     * pending already */
    if (hs_has(&r->llm->dry, c->prompt_hash) || hs_has(&r->llm->wanted, c->prompt_hash)) {
        kevo_llm_call_free(c);
        return KEVO_ERR_NOTFOUND;
    }
    c->sub = ++r->llm->submitted;
    st = r->steps->book(r, c, &src);   /* a replay: the original's call of this number */
    if (!st && src == KEVO_STEPS_BOOK_LIVE)
        refused = !live_source(r, c);
    else if (!st)
        refused = src == KEVO_STEPS_BOOK_REFUSED;
    if (st) {
        kevo_llm_call_free(c);
        return st;
    }
    if (refused)
        return not_cached(r, c);
    char hash[KEVO_HASH_HEX];
    enum kevo_llm_op op = c->op;
    int c_model = c->model;   /* c is freed when the cap refuses it */
    memcpy(hash, c->prompt_hash, sizeof hash);
    if (!(c->carrier = kevo_calloc(1, sizeof(struct job)))) {
        kevo_llm_call_free(c);
        return KEVO_ERR_NOMEM;
    }
    st = kevo_llmops_submit(r->llm->calls, c);
    if (st == KEVO_ERR_TOOBIG) {
        if (src == KEVO_STEPS_BOOK_ORIGINAL)   /* the original made it: its cap let it pass */
            return differs(r, hash, op, 1);
        /* with calls in flight, their reserves come back: wait; without, the cap is met */
        if (!r->llm->outstanding) {
            r->llm->refused = 1;
            kevo_run_event(r, json_pack("{s:s, s:s, s:s, s:s, s:f}", "event", "llm", "status",
                                        "cost_cap", "model",
                                        kevo_llmops_model_name(r->llm->calls, c_model), "op",
                                        kevo_llmop_names[op], "spent",
                                        kevo_llmops_spent(r->llm->calls)));
        }
        return KEVO_ERR_BUSY_LLM;
    }
    if (!st)
        r->llm->outstanding++;
    if (!st && src == KEVO_STEPS_BOOK_NONE)   /* the original made no such call */
        st = differs(r, hash, op, 0);
    return st;
}

/* The operator table's operators that need no LLM, as a mask for kevo_search_op_pick. */
static unsigned genome_ops(const struct runctx *r)
{
    unsigned m = 0;

    for (int i = 0; i < r->loop.n_ops; i++)
        if (!r->loop.ops[i]->start)
            m |= 1u << i;
    return m;
}

/* start() of the LLM operators: one call of self's LLM op, with parents chosen now.
 * KEVO_ERR_NOTFOUND when the op has no parents now, or its prompt was answered before
 * with nothing new (another op may have something). */
static enum kevo_status start_call(void *user, const struct kevo_operator *self)
{
    struct runctx *r = user;
    struct kevo_llm_call *c = kevo_calloc(1, sizeof *c);
    enum kevo_status st;

    if (!c)
        return KEVO_ERR_NOMEM;
    c->op = (enum kevo_llm_op)self->llm_op;
    c->model = kevo_llmops_pick_model(r->llm->calls, kevo_rng_unit(kevo_search_rng(r->loop.s)));
    st = parents(r, c);
    if (!st)
        st = build(r, c, NULL);
    if (st) {
        kevo_llm_call_free(c);
        return st;
    }
    return submit(r, c);
}

/* One new call, of some LLM op that has parents now; KEVO_ERR_NOTFOUND when none has. */
static enum kevo_status one_call(struct runctx *r)
{
    unsigned exclude = genome_ops(r);

    for (int tries = 0; tries < KEVO_LLMOP_COUNT; tries++) {
        int k = kevo_search_op_pick(r->loop.s, exclude);
        if (k < 0)
            break;
        exclude |= 1u << k;
        enum kevo_status st = r->loop.ops[k]->start(r, r->loop.ops[k]);
        if (st != KEVO_ERR_NOTFOUND)
            return st;
    }
    return KEVO_ERR_NOTFOUND;
}

enum kevo_status kevo_run_llm_fill(struct runctx *r)
{
    int max = r->o->llm_concurrency > 0 ? r->o->llm_concurrency : 4, off = r->o->offline;
    /* An offline session records the calls it wants (docs/llm.md "Air-gapped clusters")
     * once the replies imported for it are handled and their candidates evaluated, so
     * they are built on all the run knows; they spend no evaluation now, so neither the
     * budget nor the end of the search holds them back (the user's stop does). */
    if (!r->llm || (off && (r->llm->outstanding || r->llm->awaiting.n)))
        return KEVO_OK;
    const char *why = r->loop.reason;
    /* Calls that bring nothing new (duplicates, unusable replies) pause the LLM operators
     * until the next evaluation arrives: a model that keeps repeating itself must not
     * spend money faster than the workers can give the prompts something new to say. */
    while (r->llm->calls && (!why || (off && strcmp(why, "interrupted"))) && !r->llm->refused &&
           r->llm->idle < LLM_IDLE_MAX) {
        int n = r->llm->outstanding;
        if (n >= max || (!off && r->loop.n_done + r->loop.inflight + n >= r->loop.budget))
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

/* What call c needs to be made elsewhere and its reply used later (docs/llm.md
 * "Air-gapped clusters"): its model's spec and settings, parents, island, plan, how its
 * prompt splits. The settings' text is the caller's to kevo_free (NULL: out of memory). */
static char *call_context(const struct runctx *r, const struct kevo_llm_call *c,
                          struct kevo_llm_call_rec *rec)
{
    const struct kevo_llm_model *m = kevo_llmops_model(r->llm->calls, c->model);

    rec->spec = c->model >= 0 && c->model < r->o->n_models ? r->o->models[c->model] : NULL;
    rec->settings = m ? kevo_exchange_settings(m) : NULL;
    rec->system_len = c->system ? (int64_t)strlen(c->system) : 0;
    rec->parent1 = c->parent1;
    rec->parent2 = c->parent2;
    rec->island = c->island;
    rec->parent_score = c->parent_score;
    memcpy(rec->plan_hash, c->plan_hash, sizeof rec->plan_hash);
    rec->tokens_cached_in = c->reply.tokens_cached_in;
    rec->tokens_reasoning = c->reply.tokens_reasoning;
    return (char *)rec->settings;
}

/* How call c is recorded: status (": why" added when why is set, the whole cut at 299
 * bytes), after "cached" or "imported" for a call that was not made over the network, and
 * after "replay: " in a replay, into out. */
static const char *call_status(const struct runctx *r, const struct kevo_llm_call *c,
                               const char *status, const char *why, char *out, size_t n)
{
    char full[300], dec[340];
    /* "cached", "cached unusable: ...", "imported", ...: not a network call */
    const char *pre = c->from_cache ? "cached" : c->imported ? "imported" : NULL;
    int ok = !strcmp(status, "ok");

    snprintf(full, sizeof full, "%s%s%s", status, why ? ": " : "", why ? why : "");
    if (pre)
        snprintf(dec, sizeof dec, "%s%s%s", pre, ok ? "" : " ", ok ? "" : full);
    else
        snprintf(dec, sizeof dec, "%s", full);
    /* "replay: ok": the original's reply again, nothing spent */
    snprintf(out, n, "%s%s", r->steps->recorded ? "replay: " : "", dec);
    return out;
}

/*
 * The event of a recorded call (docs/llm.md "Events"): {"event": "llm", "model", "op",
 * "status", "tokens": {"in", "cached_in", "out", "reasoning"}, "cost" (null when the model
 * has no price), "latency_s", and "message" (why it failed, or could not be used), "id"
 * (the candidate it became), "adapted" where there is one}. Never a key: the model is its
 * provider, name and URL.
 */
static void call_event(struct runctx *r, const struct kevo_llm_call *c,
                       const struct kevo_llm_call_rec *rec, const char *status, const char *msg)
{
    const struct kevo_llm_model *m = c->model >= 0 && c->model < r->llm->n_models
                                     ? &r->llm->models[c->model] : NULL;
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}, s:o, s:f}", "event",
                          "llm", "model", rec->model, "op", rec->op, "status", status, "tokens",
                          "in", (json_int_t)rec->tokens_in, "cached_in",
                          (json_int_t)rec->tokens_cached_in, "out", (json_int_t)rec->tokens_out,
                          "reasoning", (json_int_t)rec->tokens_reasoning, "cost",
                          m && m->priced ? json_real(rec->cost) : json_null(), "latency_s",
                          rec->latency_s);

    if (e && msg)
        json_object_set_new(e, "message", json_string(msg));   /* not UTF-8: left out */
    if (e && rec->cand_id)
        json_object_set_new(e, "id", json_integer(rec->cand_id));
    if (e && c->reply.adapted)
        json_object_set_new(e, "adapted", json_string(c->reply.adapted));
    kevo_run_event(r, e);
}

/* The call in the archive (with the candidate it became, 0 for none), as status (and why,
 * when set: "unusable: no code block"), and its event (message: why, else the reply's
 * error). */
static enum kevo_status record_call(struct runctx *r, const struct kevo_llm_call *c, int64_t cand,
                                    const char *status, const char *why, int64_t step)
{
    struct kevo_buf prompt;
    struct kevo_llm_call_rec rec;
    char st_rec[360], st_ev[360];
    int64_t id = 0;
    enum kevo_status st;

    kevo_buf_init(&prompt, (size_t)16 << 20);
    kevo_buf_say(&prompt, "[system]\n%s\n[user]\n%s", c->system ? c->system : "",
                 c->user ? c->user : "");   /* a prompt over 16 MiB is stored cut */
    memset(&rec, 0, sizeof rec);
    rec.run_id = r->run;
    rec.cand_id = cand;
    rec.model = kevo_llmops_model_name(r->llm->calls, c->model);
    rec.op = c->phase ? "llm_plan_code" : kevo_llmop_names[c->op];
    memcpy(rec.prompt_hash, c->prompt_hash, sizeof rec.prompt_hash);
    rec.prompt = kevo_buf_str(&prompt);
    rec.reply = c->reply.text;
    rec.tokens_in = c->reply.tokens_in;
    rec.tokens_out = c->reply.tokens_out;
    rec.cost = r->steps->recorded ? 0 : c->cost;   /* a replay spends nothing */
    rec.latency_s = r->steps->recorded ? 0 : c->reply.latency_s;
    rec.step = step;
    rec.submitted = c->sub;
    char *settings = call_context(r, c, &rec);
    /* a reply imported for a pending call is used, unless it came too late: then it waits
     * for the next session */
    rec.answers = strcmp(status, "unused") ? c->imported : 0;
    rec.status = call_status(r, c, status, why, st_rec, sizeof st_rec);
    st = kevo_archive_llm_add(r->ar, &rec, &id);
    if (!st)
        call_event(r, c, &rec, call_status(r, c, status, NULL, st_ev, sizeof st_ev),
                   why ? why : c->reply.error);
    kevo_buf_free(&prompt);
    kevo_free(settings);
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
    kevo_search_op_proposed(r->loop.s, r->llm->op_at[c->op]);
    kevo_search_op_result(r->loop.s, r->llm->op_at[c->op], 0, 0);
    kevo_llmops_model_result(r->llm->calls, c->model, 0, 0);
    r->llm->idle++;
    kevo_run_event(r, json_pack("{s:s, s:s, s:s, s:s}", "event", "llm", "status", "duplicate",
                                "model", kevo_llmops_model_name(r->llm->calls, c->model), "op",
                                kevo_llmop_names[c->op]));
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
    json_t *res = kevo_result_doc_new(KEVO_VERDICT_COMPILE_ERROR, msg,
                                      json_pack("{s:s}", "message", msg));
    char *rs = res ? json_dumps(res, JSON_COMPACT) : NULL;
    if (!st)
        st = kevo_archive_cand_finish(r->ar, *id, KEVO_VERDICT_COMPILE_ERROR, 0, 0, 0, "{}",
                                      rs ? rs : "{}");
    kevo_free(rs);
    json_decref(res);
    r->loop.n_done++;
    r->loop.since_best++;
    kevo_search_op_proposed(r->loop.s, r->llm->op_at[c->op]);
    kevo_search_op_result(r->loop.s, r->llm->op_at[c->op], 0, 0);
    kevo_llmops_model_result(r->llm->calls, c->model, 0, 0);
    note(r, *id, c->parent1, kevo_llmop_names[c->op], KEVO_VERDICT_COMPILE_ERROR, 0);
    kevo_run_event(r, json_pack("{s:s, s:I, s:s, s:s, s:s}", "event", "eval", "id",
                                (json_int_t)*id, "op", kevo_llmop_names[c->op], "verdict",
                                kevo_verdict_name(KEVO_VERDICT_COMPILE_ERROR), "message", msg));
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
    snprintf(path, sizeof path, "llm%s", r->set.task->lang == KEVO_LANG_CUDA ? ".cu" : ".c");
    st = kevo_genome_from_text(r->set.task, path, text, len, &g, &m);
    if (st == KEVO_ERR_NOMEM)
        return st;
    if (st) {
        st = unparsable(r, c, text, len, m ? m : "the candidate does not parse", id);
        kevo_free(m);
        return st;
    }
    st = kevo_run_record(r, &g, kevo_llmop_names[c->op], r->llm->op_at[c->op], c->parent1,
                         c->parent2, c->parent_score, c->island, &j);
    kevo_genome_clear(&g);
    if (st == KEVO_ERR_INVALID) {   /* the model proposed a text the run already has */
        nothing_new(r, c);
        return KEVO_OK;
    }
    if (st)
        return st;
    kevo_search_op_proposed(r->loop.s, r->llm->op_at[c->op]);
    j->model = c->model;
    *id = j->id;
    if (c->imported)   /* an offline session asks for more once it knows how this went */
        ids_put(&r->llm->awaiting, j->id);
    kevo_run_send(r, j);
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
        r->llm->idle++;
        return KEVO_OK;
    }
    return st;
}

enum kevo_status kevo_run_llm_handle(struct runctx *r, struct job *j)
{
    struct kevo_llm_call *c = j->llm;
    char *text = NULL, *why = NULL;
    size_t len = 0;
    enum kevo_reply_form form;
    int64_t id = 0;
    enum kevo_status st = KEVO_OK;

    KEVO_ASSERT(r->llm);   /* a call came back: the run has LLM operators */
    r->llm->outstanding--;
    kevo_llmops_settle(r->llm->calls, c);   /* its cost counts from this step on */
    if (strcmp(c->reply.status, "ok") != 0) {
        /* each call already retried within its limits; a provider that still fails
         * LLM_FAIL_MAX times in a row is given up on for the session */
        kevo_llmops_model_result(r->llm->calls, c->model, 0, 0);
        if (strcmp(c->reply.status, "truncated") == 0)   /* asked again, cut again */
            mark_dry(r, c);
        st = record_call(r, c, 0, c->reply.status, NULL, r->loop.cur_step);
        if (++r->llm->failed >= LLM_FAIL_MAX && !r->llm->refused) {
            r->llm->refused = 1;
            kevo_run_event(r, json_pack("{s:s, s:s, s:s, s:s, s:i}", "event", "llm", "status",
                                        "given_up", "model",
                                        kevo_llmops_model_name(r->llm->calls, c->model), "op",
                                        kevo_llmop_names[c->op], "failed_in_a_row",
                                        r->llm->failed));
        }
        return st;
    }
    r->llm->failed = 0;
    if (r->loop.reason || r->loop.n_done + r->loop.inflight >= r->loop.budget)   /* too late: the budget is spent */
        return record_call(r, c, 0, "unused", "the budget was spent", r->loop.cur_step);
    if (c->op == KEVO_LLMOP_PLAN && c->phase == 0) {
        st = record_call(r, c, 0, "ok", NULL, r->loop.cur_step);
        return st ? st : plan_code(r, c);
    }
    st = kevo_reply_apply(c->reply.text, strlen(c->reply.text), c->parent_text,
                          c->parent_text ? strlen(c->parent_text) : 0, &text, &len, &form, &why);
    if (st == KEVO_ERR_PARSE) {
        r->llm->idle++;
        if (hs_put(&r->llm->unusable, c->prompt_hash))   /* twice: it is the prompt */
            mark_dry(r, c);
        st = record_call(r, c, 0, "unusable", why ? why : "?", r->loop.cur_step);
        kevo_free(why);
        return st;
    }
    if (!st)
        st = propose_text(r, c, text, len, &id);
    if (!st)
        st = record_call(r, c, id, "ok", NULL, r->loop.cur_step);
    kevo_free(text);
    return st;
}

/* ---- replies imported for pending calls (docs/llm.md "Air-gapped clusters") ---- */

/* The session's model that was to make call w: the same spec, else the same provider,
 * name and URL; -1 when this session has no such model. */
static int model_index(const struct runctx *r, const struct kevo_llm_wanted *w)
{
    for (int i = 0; w->spec && i < r->llm->n_models; i++)
        if (!strcmp(w->spec, r->o->models[i]))
            return i;
    for (int i = 0; i < r->llm->n_models; i++)
        if (!strcmp(w->model, kevo_llmops_model_name(r->llm->calls, i)))
            return i;
    return -1;
}

/* Imported reply w, as call c of this session's model m, arrives as a step (as a live
 * reply would); its cost is what its tokens cost at m's prices (0 without usage: a reply
 * written by hand cost nothing). */
static enum kevo_status deliver(struct runctx *r, struct kevo_llm_wanted *w, int m)
{
    const struct kevo_llm_model *mm = &r->llm->models[m];
    struct kevo_llm_call *c = NULL;
    char *why = NULL;
    enum kevo_status st = kevo_exchange_call(r->ar, w, m, &c, &why);

    if (st == KEVO_ERR_INVALID) {   /* an operator this kevo does not have: it waits */
        kevo_run_event(r, json_pack("{s:s, s:s, s:s, s:s, s:s?}", "event", "llm", "status",
                                    "import_waits", "model", w->model, "op", w->op, "message",
                                    why));
        kevo_free(why);
        return KEVO_ERR_NOTFOUND;
    }
    if (!st && !(c->carrier = kevo_calloc(1, sizeof(struct job))))
        st = KEVO_ERR_NOMEM;
    if (st) {
        kevo_llm_call_free(c);
        return st;
    }
    double cached = (double)c->reply.tokens_cached_in;
    c->cost = (((double)c->reply.tokens_in - cached) * mm->price_in + (double)c->reply.tokens_out
               * mm->price_out + cached * (mm->price_cached_in > 0 ? mm->price_cached_in
                                                                 : mm->price_in)) / 1e6;
    if (c->island < 0 || c->island >= kevo_search_islands(r->loop.s))   /* --islands changed */
        c->island = 0;
    c->sub = ++r->llm->submitted;
    hs_put(&r->llm->asked, c->prompt_hash);
    r->llm->outstanding++;
    on_done(r, c);
    return KEVO_OK;
}

enum kevo_status kevo_run_llm_imports(struct runctx *r)
{
    struct kevo_llm_wanted *w = NULL;
    int n = 0, used = 0, waiting = 0;
    enum kevo_status st;

    if (!r->llm || !r->llm->calls || !r->o->resume || r->steps->recorded)
        return KEVO_OK;
    st = kevo_archive_llm_imported(r->ar, r->run, &w, &n);
    if (st)
        return kevo_run_fail(r, st, "reading the imported replies: %s",
                             kevo_archive_errmsg(r->ar));
    /* each may become a candidate: as many as the budget has room for, the others wait */
    int64_t room = r->loop.budget - r->loop.n_done - (r->loop.n_pending - r->loop.i_pending);
    for (int i = 0; i < n && !st; i++) {
        int m = model_index(r, &w[i]);
        st = m >= 0 && used < room ? deliver(r, &w[i], m) : KEVO_ERR_NOTFOUND;
        used += !st;
        waiting += st == KEVO_ERR_NOTFOUND;
        if (st == KEVO_ERR_NOTFOUND)
            st = KEVO_OK;
    }
    if (n)
        kevo_run_event(r, json_pack("{s:s, s:s, s:i, s:i}", "event", "llm", "status", "imported",
                                    "replies", used, "waiting", waiting));
    kevo_archive_llm_wanted_free(w, n);
    return st;
}

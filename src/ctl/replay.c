/*
 * replay - the replay source of a run's steps (steps.h; `kevo run --replay RUN`, docs/llm.md
 * "Replay"): the run again, as a new run in the same archive, from what the original
 * recorded, with no GPU and no network. The controller is deterministic given the order
 * of its steps (run.c, search_loop), so the replay feeds the original's steps back in that order: each
 * evaluation step gets the original's recorded result for the candidate with the same
 * text, each LLM step the original's recorded reply to its call of the same place in the
 * session's submissions, which must have asked the same prompt. The controller
 * itself runs unchanged and must propose exactly what the original proposed and ask
 * exactly what it asked; where it does not, the replay stops with KEVO_ERR_DIVERGED
 * naming the step. At the end the two runs are compared row by row.
 *
 * What it proves: that the archive's decisions follow from what it recorded (a run can be
 * audited and reproduced without spending anything), and that a change to kevo, its
 * prompt templates or its playbook leaves a recorded search unchanged, or where not.
 */
#include "ctl/steps.h"

#include "base/log.h"
#include "base/mem.h"
#include "ctl/run_llm.h"
#include "core/result.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kevo_replay {
    int64_t of;                        /* the original run */
    json_t *report;                    /* its final report */
    struct kevo_step *steps;           /* its step log */
    int n_steps, next;
    struct kevo_llm_row *rows;         /* its LLM calls, oldest first */
    int n_rows;
    unsigned char *booked;             /* rows matched with a call of the replay */
    const char *stop_reason;           /* borrowed from report */
    int64_t stop_step;
    int stop_waiting, stop_given;
    struct job *jobs;                  /* sent and not yet matched with a step, in order */
    char prompts[PATH_MAX];            /* the data directory's prompts/ and docs/playbook/, */
    char playbook[PATH_MAX];           /*   for a run that named neither */
};

static struct kevo_replay *rp(const struct runctx *r)
{
    return r->steps_ctx;
}

static const char *replay_stop(struct runctx *r, int waiting);

static void replay_free(struct kevo_replay *p)
{
    if (!p)
        return;
    while (p->jobs) {
        struct job *j = p->jobs;
        p->jobs = j->next;
        kevo_run_job_free(j);
    }
    json_decref(p->report);
    kevo_free(p->steps);
    kevo_archive_llm_rows_free(p->rows, p->n_rows);
    kevo_free(p->booked);
    kevo_free(p);
}

/* ---- loading the original ---- */

/* Why run rr cannot be replayed exactly, or NULL. */
static const char *unreplayable(const struct kevo_run_rec *rr, const json_t *rep,
                               const json_t *cfg)
{
    if (rr->status == KEVO_RUN_RUNNING || rr->status == KEVO_RUN_FAILED)
        return rr->status == KEVO_RUN_FAILED ? "it failed; only a run that finished (done or "
                                               "stopped) can be replayed"
                                             : "it has not finished, or it was killed (what "
                                               "it had in flight then is lost, so it cannot "
                                               "be reproduced)";
    if (rr->sessions > 1)
        return "it ran in several sessions (it was resumed); a replay reproduces a run of one "
               "session";
    if (json_integer_value(json_object_get(cfg, "replay_of")))
        return "it is itself a replay (it spent nothing, so a cost cap would not bind as it "
               "did): replay its original";
    if (!rep || !json_is_object(json_object_get(rep, "stop")) ||
        !json_is_object(json_object_get(rep, "calibration")) ||
        json_integer_value(json_object_get(rep, "workers")) < 1 ||
        !json_is_array(json_object_get(rep, "reference")))
        return "it was recorded without a step log (by an older kevo)";
    return NULL;
}

static enum kevo_status load_original(struct runctx *r, struct kevo_replay *p,
                                      struct kevo_run_rec *rr)
{
    const char *why;
    enum kevo_status st = kevo_archive_run_get(r->ar, p->of, rr);

    if (st)
        return kevo_run_fail(r, st, "--replay %lld: %s", (long long)p->of,
                             kevo_archive_errmsg(r->ar));
    p->report = rr->result_json ? json_loads(rr->result_json, 0, NULL) : NULL;
    json_t *cfg = json_loads(rr->config_json ? rr->config_json : "{}", 0, NULL);
    why = unreplayable(rr, p->report, cfg);
    json_decref(cfg);
    if (why)
        return kevo_run_fail(r, KEVO_ERR_UNSUPPORTED, "run %lld cannot be replayed: %s",
                             (long long)p->of, why);
    json_t *stop = json_object_get(p->report, "stop");
    p->stop_reason = json_string_value(json_object_get(stop, "reason"));
    p->stop_step = json_integer_value(json_object_get(stop, "step"));
    p->stop_waiting = json_is_true(json_object_get(stop, "waiting"));
    st = kevo_archive_steps(r->ar, p->of, &p->steps, &p->n_steps);
    if (!st)
        st = kevo_archive_llm_rows(r->ar, p->of, &p->rows, &p->n_rows);
    if (!st && !(p->booked = kevo_calloc((size_t)p->n_rows + 1, 1)))
        st = KEVO_ERR_NOMEM;
    for (int i = 0; !st && i < p->n_rows; i++)
        if (p->rows[i].submitted <= 0)
            return kevo_run_fail(r, KEVO_ERR_UNSUPPORTED, "run %lld cannot be replayed: its "
                                 "LLM calls were recorded without their order (by an older "
                                 "kevo)", (long long)p->of);
    if (!st)
        st = kevo_archive_source_get(r->ar, rr->task_hash, &r->set.task_text, &r->set.task_len);
    if (st)
        return kevo_run_fail(r, st, "--replay %lld: reading the run back: %s", (long long)p->of,
                             kevo_archive_errmsg(r->ar));
    return KEVO_OK;
}

static enum kevo_status replay_load(struct runctx *r)
{
    struct kevo_run_rec rr;
    struct kevo_replay *p = kevo_calloc(1, sizeof *p);
    enum kevo_status st = p ? KEVO_OK : KEVO_ERR_NOMEM;

    memset(&rr, 0, sizeof rr);
    if (!st) {
        p->of = r->o->replay;
        r->steps_ctx = p;
        st = load_original(r, p, &rr);
    }
    if (!st) {
        r->set.cfg = json_loads(rr.config_json ? rr.config_json : "{}", 0, NULL);
        r->set.path_owned = kevo_strdup(rr.task_path ? rr.task_path : "task.cu");
        r->set.task_path = r->set.path_owned;
        if (!r->set.cfg || !r->set.path_owned)
            st = kevo_run_fail(r, KEVO_ERR_NOMEM, "--replay %lld: out of memory",
                               (long long)p->of);
    }
    kevo_archive_run_clear(&rr);
    return st;
}

/* ---- the original's options and what its workers gave ---- */

static double cfg_f(const struct runctx *r, const char *key)
{
    return json_number_value(json_object_get(r->set.cfg, key));
}

static int64_t cfg_i(const struct runctx *r, const char *key)
{
    return json_integer_value(json_object_get(r->set.cfg, key));
}

static void replay_opts(struct runctx *r)
{
    struct kevo_run_opts *e = &r->set.eff;
    const char *b = json_string_value(json_object_get(r->set.cfg, "backend"));
    const char *pd = json_string_value(json_object_get(r->set.cfg, "prompts"));
    const char *bd = json_string_value(json_object_get(r->set.cfg, "playbook"));

    *e = *r->o;
    r->o = e;
    e->budget = cfg_i(r, "budget");
    e->stagnation = cfg_i(r, "stagnation");
    e->target = cfg_f(r, "target");
    e->cost_cap = cfg_f(r, "cost_cap");
    e->n_islands = (int)cfg_i(r, "islands");
    e->rng_seed = (uint64_t)cfg_i(r, "rng_seed");
    e->eval.trials = cfg_i(r, "trials") >= 3 ? (int)cfg_i(r, "trials") : e->eval.trials;
    e->eval.time_cap_s = cfg_f(r, "time_cap_s");
    e->eval.backend = b && !strcmp(b, "cpu") ? KEVO_BACKEND_CPU : KEVO_BACKEND_CUDA;
    e->llm_concurrency = (int)cfg_i(r, "llm_concurrency");
    e->offline = json_is_true(json_object_get(r->set.cfg, "offline"));
    e->holdout_tries = (int)cfg_i(r, "holdout_tries");
    /* this session's may differ; else the original's, else the data directory's (never
     * the environment of the replay's shell: the original's was recorded when it was set) */
    snprintf(rp(r)->prompts, PATH_MAX, "%s/prompts", kevo_data_dir(NULL));
    snprintf(rp(r)->playbook, PATH_MAX, "%s/docs/playbook", kevo_data_dir(NULL));
    e->prompts_dir = e->prompts_dir ? e->prompts_dir : pd ? pd : rp(r)->prompts;
    e->playbook_dir = e->playbook_dir ? e->playbook_dir : bd ? bd : rp(r)->playbook;
    e->time_s = 0;   /* the original's clock stops it (report "stop"), not ours */
    e->n_gpus = 0;
    e->gpus = NULL;
    e->n_seeds = 0;
    e->seeds = NULL;
    e->resume = 0;
    kevo_run_cfg_models(r);
    /* the prices it ran with: they size the cost cap's reserves as they did */
    r->set.prices_used = json_object_get(r->set.cfg, "prices_used");
}

static enum kevo_status replay_start(struct runctx *r)
{
    json_t *rep = rp(r)->report;

    r->set.n_slots = (int)json_integer_value(json_object_get(rep, "workers"));
    r->set.calib = json_incref(json_object_get(rep, "calibration"));
    /* the original's reference was ok (it ran); its workloads are what the run uses */
    r->loop.ref = kevo_result_doc_new(KEVO_VERDICT_OK, NULL, NULL);
    if (!r->loop.ref ||
        json_object_set(r->loop.ref, "workloads", json_object_get(rep, "reference")))
        return KEVO_ERR_NOMEM;
    kevo_run_reference_set(r);
    return KEVO_OK;
}

static enum kevo_status replay_begin(struct runctx *r)
{
    int64_t *ids = NULL;
    int n = 0;
    enum kevo_status st = kevo_archive_cand_ids(r->ar, rp(r)->of, KEVO_CAND_ANY, &ids, &n);
    int64_t *p = st ? NULL : kevo_reallocarray(r->loop.pending, (size_t)n + 1, sizeof *p);

    if (!st && !p)
        st = KEVO_ERR_NOMEM;
    if (p)
        r->loop.pending = p;
    for (int i = 0; i < n && !st; i++) {
        struct kevo_cand_rec c;
        struct kevo_genome g;
        struct job *j = NULL;
        char *text = NULL, *m = NULL;
        size_t len = 0;

        memset(&c, 0, sizeof c);
        st = kevo_archive_cand_get(r->ar, ids[i], &c);
        if (!st && strcmp(c.op, "seed") == 0) {
            st = kevo_archive_source_get(r->ar, c.source_hash, &text, &len);
            if (!st)
                st = kevo_genome_from_text(r->set.task, r->set.task_path, text, len, &g, &m);
            if (!st)
                st = kevo_run_record(r, &g, "seed", -1, 0, 0, 0, c.island, &j);
            if (!st)
                r->loop.pending[r->loop.n_pending++] = j->id;
            kevo_run_job_free(j);
        }
        if (st)
            st = kevo_run_fail(r, st, "--replay %lld: reading its candidate %lld for its seeds: %s",
                               (long long)rp(r)->of,
                               (long long)ids[i], m ? m : kevo_archive_errmsg(r->ar));
        kevo_free(m);
        kevo_free(text);
        kevo_archive_cand_clear(&c);
    }
    kevo_free(ids);
    return st;
}

/* ---- steps ---- */

static enum kevo_status diverged(struct runctx *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static enum kevo_status diverged(struct runctx *r, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return kevo_run_fail(r, KEVO_ERR_DIVERGED, "replay of run %lld diverged at step %lld: %s",
                         (long long)rp(r)->of, (long long)r->loop.step + 1, what);
}

/* The queued job whose text has key (taken out of the queue); NULL if none. */
static struct job *take_job(struct runctx *r, const char *key)
{
    char k[KEVO_HASH_HEX];

    for (struct job **pp = &rp(r)->jobs; *pp; pp = &(*pp)->next) {
        struct job *j = *pp;
        if (kevo_sha256_hex(j->text, strlen(j->text), k) != KEVO_OK || strcmp(k, key) != 0)
            continue;
        *pp = j->next;
        j->next = NULL;
        return j;
    }
    return NULL;
}

static enum kevo_status eval_step(struct runctx *r, int64_t orig, struct job **out)
{
    struct kevo_cand_rec c;
    char *res = NULL;
    struct job *j = NULL;
    enum kevo_status st;

    memset(&c, 0, sizeof c);
    st = kevo_archive_cand_get(r->ar, orig, &c);
    if (!st && !(j = take_job(r, c.key)))
        st = diverged(r, "the original evaluated its candidate %lld (%s) here; the replay had "
                      "not proposed it (%d evaluation(s) in flight)", (long long)orig, c.op,
                      r->loop.inflight);
    else if (!st)
        st = kevo_archive_eval_get(r->ar, orig, "verify", &res);
    if (!st && !(j->result = json_loads(res, 0, NULL)))
        st = KEVO_ERR_PARSE;
    if (st && st != KEVO_ERR_DIVERGED)
        st = kevo_run_fail(r, st, "--replay %lld: candidate %lld's result: %s",
                           (long long)rp(r)->of, (long long)orig, kevo_archive_errmsg(r->ar));
    if (st)
        kevo_run_job_free(j);
    else
        *out = j;
    kevo_free(res);
    kevo_archive_cand_clear(&c);
    return st;
}

/* A row's status as its run recorded it, without a replay's prefix. */
static const char *orig_status(const struct kevo_llm_row *w)
{
    const char *s = w->status;
    while (strncmp(s, "replay: ", 8) == 0)
        s += 8;
    return s;
}

static const struct kevo_llm_row *row_of(const struct kevo_replay *p, int64_t id)
{
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].id == id)
            return &p->rows[i];
    return NULL;
}

static enum kevo_status llm_step(struct runctx *r, int64_t orig, struct job **out)
{
    const struct kevo_llm_row *w = row_of(rp(r), orig);
    struct kevo_llm_call *c = w ? kevo_run_llm_take(r, w->submitted) : NULL;
    struct job *j;

    if (!c)
        return diverged(r, "the original's LLM call %lld (%s, its call %lld of the session) "
                        "came back here; the replay had no such call in flight", (long long)orig,
                        w ? w->op : "?", w ? (long long)w->submitted : 0LL);
    /* a reply text means the transport said ok; without one the status is its error */
    snprintf(c->reply.status, sizeof c->reply.status, "%s", w->reply ? "ok" : orig_status(w));
    c->reply.text = w->reply ? kevo_strdup(w->reply) : NULL;
    c->reply.tokens_in = w->tokens_in;
    c->reply.tokens_out = w->tokens_out;
    c->reply.tokens_cached_in = w->tokens_cached_in;
    c->reply.tokens_reasoning = w->tokens_reasoning;
    c->from_cache = strncmp(orig_status(w), "cached", 6) == 0;
    c->cost = w->cost;   /* settled as the original was: the cap decides the same */
    j = c->carrier;      /* allocated when it was submitted */
    c->carrier = NULL;
    if (!j || (w->reply && !c->reply.text)) {
        kevo_free(j);
        kevo_llm_call_free(c);
        return KEVO_ERR_NOMEM;
    }
    j->llm = c;
    j->op = -1;
    *out = j;
    return KEVO_OK;
}

static enum kevo_status replay_step(struct runctx *r, struct job **out)
{
    struct kevo_replay *p = rp(r);

    *out = NULL;
    if (replay_stop(r, 1) && !p->stop_given && !r->loop.reason) {
        p->stop_given = 1;   /* the original stopped here while waiting */
        return KEVO_OK;
    }
    if (p->next >= p->n_steps)
        return diverged(r, "the original's log ends after step %d; the replay still waits for "
                        "%d evaluation(s) and %d LLM reply(ies)", p->n_steps, r->loop.inflight,
                        kevo_run_llm_outstanding(r));
    const struct kevo_step *x = &p->steps[p->next++];
    if (x->step != r->loop.step + 1)
        return diverged(r, "the original's log has step %lld here", (long long)x->step);
    return x->kind == KEVO_STEP_EVAL ? eval_step(r, x->id, out) : llm_step(r, x->id, out);
}

static enum kevo_status replay_finish(struct runctx *r)
{
    const struct kevo_replay *p = rp(r);
    if (p->next >= p->n_steps)
        return KEVO_OK;
    const struct kevo_step *x = &p->steps[p->next];
    return diverged(r, "the replay had nothing left to evaluate or ask (%s), but the original "
                    "went on with its %s %lld", r->loop.reason ? r->loop.reason : "exhausted",
                    x->kind == KEVO_STEP_EVAL ? "candidate" : "LLM call", (long long)x->id);
}

static const char *replay_stop(struct runctx *r, int waiting)
{
    const struct kevo_replay *p = rp(r);
    /* the reasons that came from outside the run; the others the replay finds itself */
    if (!p || !p->stop_reason ||
        (strcmp(p->stop_reason, "time") != 0 && strcmp(p->stop_reason, "interrupted") != 0))
        return NULL;
    return p->stop_step == r->loop.step && p->stop_waiting == waiting ? p->stop_reason : NULL;
}

/* ---- LLM calls ---- */

static enum kevo_status replay_book(struct runctx *r, struct kevo_llm_call *c,
                                   enum kevo_steps_book *out)
{
    struct kevo_replay *p = rp(r);

    *out = KEVO_STEPS_BOOK_NONE;
    for (int i = 0; i < p->n_rows; i++) {
        const struct kevo_llm_row *w = &p->rows[i];
        if (w->submitted != c->sub)
            continue;
        if (p->booked[i] || strcmp(w->prompt_hash, c->prompt_hash) != 0)
            return kevo_run_fail(r, KEVO_ERR_DIVERGED, "replay of run %lld diverged after step "
                                 "%lld: its LLM call %lld asked the model another prompt (%s, "
                                 "prompt %.12s) than the original's (%s, prompt %.12s); the "
                                 "prompt templates, the playbook or kevo itself changed, or the "
                                 "original's decisions depended on something it did not record",
                                 (long long)p->of, (long long)r->loop.step, (long long)c->sub,
                                 kevo_llmop_names[c->op], c->prompt_hash, w->op, w->prompt_hash);
        p->booked[i] = 1;
        *out = strcmp(orig_status(w), "not_cached") == 0 ? KEVO_STEPS_BOOK_REFUSED
                                                         : KEVO_STEPS_BOOK_ORIGINAL;
        c->from_cache = strncmp(orig_status(w), "cached", 6) == 0;
        return KEVO_OK;
    }
    return KEVO_OK;   /* none: the cap must refuse it, as it did */
}

static enum kevo_status replay_differs(struct runctx *r, int64_t sub, const char *prompt_hash,
                                      const char *op, int cap_refused)
{
    return kevo_run_fail(r, KEVO_ERR_DIVERGED, "replay of run %lld diverged after step %lld: "
                         "its LLM call %lld (%s, prompt %.12s) %s", (long long)rp(r)->of,
                         (long long)r->loop.step, (long long)sub, op, prompt_hash,
                         cap_refused ? "was refused by the cost cap, which let the original's "
                                       "call pass"
                                     : "was made where the original made none (its cost cap "
                                       "refused it, or it made fewer calls)");
}

/* ---- the held-out gate ---- */

static enum kevo_status replay_holdout_result(struct runctx *r, int64_t id, json_t **out)
{
    struct kevo_cand_rec c;
    int64_t orig = 0;
    char *res = NULL;
    enum kevo_status st;

    *out = NULL;
    memset(&c, 0, sizeof c);
    st = kevo_archive_cand_get(r->ar, id, &c);
    if (!st && kevo_archive_cand_by_key(r->ar, rp(r)->of, c.key, &orig) != KEVO_OK)
        orig = 0;
    if (!st && (!orig || kevo_archive_eval_get(r->ar, orig, "holdout", &res) != KEVO_OK))
        st = kevo_run_fail(r, KEVO_ERR_DIVERGED, "replay of run %lld diverged at the held-out "
                           "gate: the original did not gate its candidate with this text "
                           "(replay candidate %lld, %s)", (long long)rp(r)->of,
                           (long long)id, c.op);
    if (!st && !(*out = json_loads(res, 0, NULL)))
        st = kevo_run_fail(r, KEVO_ERR_PARSE, "--replay %lld: candidate %lld's held-out result "
                           "does not parse", (long long)rp(r)->of, (long long)orig);
    kevo_free(res);
    kevo_archive_cand_clear(&c);
    return st;
}

/* ---- comparing the runs ---- */

/* The position of id among ids (sorted); -1 for 0 or absent: how candidates of two runs
 * are named alike. */
static int ordinal(const int64_t *ids, int n, int64_t id)
{
    int lo = 0, hi = n - 1;
    while (id && lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (ids[mid] == id)
            return mid;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

struct sides {
    int64_t *a, *b;                    /* candidate ids: the original's, the replay's */
    int na, nb;
};

static int same_real(double x, double y)
{
    return x == y || (isnan(x) && isnan(y));
}

/* The first difference between candidate i of both runs, into d; 0 when alike. */
static int cand_diff(struct runctx *r, const struct sides *s, int i, char *d, size_t n)
{
    struct kevo_cand_rec x, y;
    int bad = 0;

    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    if (kevo_archive_cand_get(r->ar, s->a[i], &x) || kevo_archive_cand_get(r->ar, s->b[i], &y))
        bad = snprintf(d, n, "candidate %d cannot be read: %s", i + 1, kevo_archive_errmsg(r->ar));
    else if (strcmp(x.key, y.key) || strcmp(x.op, y.op))
        bad = snprintf(d, n, "candidate %d is another text or operator (%s, %s)", i + 1, x.op, y.op);
    else if (ordinal(s->a, s->na, x.parent1) != ordinal(s->b, s->nb, y.parent1) ||
             ordinal(s->a, s->na, x.parent2) != ordinal(s->b, s->nb, y.parent2))
        bad = snprintf(d, n, "candidate %d (%s) has other parents", i + 1, x.op);
    else if (x.state != y.state || x.verdict != y.verdict || x.step != y.step)
        bad = snprintf(d, n, "candidate %d (%s): verdict \"%s\" at step %lld, replayed \"%s\" at "
                       "step %lld", i + 1, x.op, kevo_archive_cand_verdict(&x), (long long)x.step,
                       kevo_archive_cand_verdict(&y), (long long)y.step);
    else if (!same_real(x.score, y.score) || !same_real(x.sol_fraction, y.sol_fraction) ||
             !same_real(x.speedup, y.speedup))
        bad = snprintf(d, n, "candidate %d (%s): score %.9g, replayed %.9g", i + 1, x.op, x.score,
                       y.score);
    else if (x.island != y.island || x.cell != y.cell)
        bad = snprintf(d, n, "candidate %d (%s): island/cell %d/%d, replayed %d/%d", i + 1, x.op,
                       x.island, x.cell, y.island, y.cell);
    kevo_archive_cand_clear(&x);
    kevo_archive_cand_clear(&y);
    return bad;
}

static int same_str(const char *x, const char *y)
{
    return x == y || (x && y && strcmp(x, y) == 0);
}

/* The first difference between LLM call i of both runs, into d; 0 when alike. */
static int call_diff(const struct sides *s, const struct kevo_llm_row *x,
                     const struct kevo_llm_row *y, int i, char *d, size_t n)
{
    if (strcmp(x->prompt_hash, y->prompt_hash) || strcmp(x->op, y->op) ||
        strcmp(x->model, y->model))
        return snprintf(d, n, "LLM call %d (%s) had another prompt or model", i + 1, x->op);
    if (!same_str(x->reply, y->reply) || x->tokens_in != y->tokens_in ||
        x->tokens_out != y->tokens_out || strcmp(orig_status(x), orig_status(y)))
        return snprintf(d, n, "LLM call %d (%s): status \"%s\", replayed \"%s\"", i + 1, x->op,
                        x->status, y->status);
    if (x->step != y->step ||
        ordinal(s->a, s->na, x->cand_id) != ordinal(s->b, s->nb, y->cand_id))
        return snprintf(d, n, "LLM call %d (%s) came at another step or gave another candidate",
                        i + 1, x->op);
    return 0;
}

/* The final held-out-checked candidate of a report, by its position in the run. */
static int final_of(const json_t *rep, const int64_t *ids, int n)
{
    return ordinal(ids, n, json_integer_value(json_object_get(json_object_get(rep, "final"),
                                                              "id")));
}

static int runs_diff(struct runctx *r, const struct sides *s, json_t *rep, char *d, size_t n)
{
    const json_t *orig = rp(r)->report;
    struct kevo_llm_row *rows = NULL;
    int nr = 0, bad = 0;

    if (s->na != s->nb)
        return snprintf(d, n, "the original has %d candidates, the replay %d", s->na, s->nb);
    for (int i = 0; i < s->na && !bad; i++)
        bad = cand_diff(r, s, i, d, n);
    if (!bad && kevo_archive_llm_rows(r->ar, r->run, &rows, &nr) != KEVO_OK)
        bad = snprintf(d, n, "its LLM calls cannot be read: %s", kevo_archive_errmsg(r->ar));
    else if (!bad && nr != rp(r)->n_rows)
        bad = snprintf(d, n, "the original made %d LLM calls, the replay %d", rp(r)->n_rows,
                       nr);
    for (int i = 0; i < nr && !bad; i++)
        bad = call_diff(s, &rp(r)->rows[i], &rows[i], i, d, n);
    kevo_archive_llm_rows_free(rows, nr);
    if (!bad && !same_str(json_string_value(json_object_get(orig, "reason")), r->loop.reason))
        bad = snprintf(d, n, "the original stopped for \"%s\", the replay for \"%s\"",
                       json_string_value(json_object_get(orig, "reason")), r->loop.reason);
    if (!bad && final_of(orig, s->a, s->na) != final_of(rep, s->b, s->nb))
        bad = snprintf(d, n, "the held-out gate chose another candidate");
    return bad;
}

static enum kevo_status replay_compare(struct runctx *r, json_t *report)
{
    struct sides s;
    char d[600] = "";
    enum kevo_status st;

    memset(&s, 0, sizeof s);
    st = kevo_archive_cand_ids(r->ar, rp(r)->of, KEVO_CAND_ANY, &s.a, &s.na);
    if (!st)
        st = kevo_archive_cand_ids(r->ar, r->run, KEVO_CAND_ANY, &s.b, &s.nb);
    if (st) {
        kevo_free(s.a);
        return kevo_run_fail(r, st, "comparing the replay: %s", kevo_archive_errmsg(r->ar));
    }
    int bad = runs_diff(r, &s, report, d, sizeof d) > 0;
    json_object_set_new(report, "replay", json_pack("{s:I, s:b, s:I, s:i, s:i, s:s?}", "of",
                                                    (json_int_t)rp(r)->of, "identical", !bad,
                                                    "steps", (json_int_t)r->loop.step, "candidates",
                                                    s.nb, "llm_calls", rp(r)->n_rows,
                                                    "difference", bad ? d : NULL));
    kevo_free(s.a);
    kevo_free(s.b);
    return bad ? kevo_run_fail(r, KEVO_ERR_DIVERGED, "replay of run %lld (as run %lld) differs "
                               "from it: %s", (long long)rp(r)->of, (long long)r->run, d)
               : KEVO_OK;
}

/* ---- the source ---- */

static enum kevo_status replay_open(struct runctx *r)
{
    enum kevo_status st = replay_load(r);

    if (!st)
        st = kevo_run_parse_task(r);
    if (!st)
        replay_opts(r);
    return st;
}

/* Kept in order until the original's step that evaluated the same text. */
static void replay_send(struct runctx *r, struct job *j)
{
    struct job **pp = &rp(r)->jobs;

    while (*pp)
        pp = &(*pp)->next;
    j->next = NULL;
    *pp = j;
}

static enum kevo_status replay_next(struct runctx *r, double wait_s, struct job **out)
{
    (void)wait_s;   /* the original's steps are all there: nothing to wait for */
    *out = NULL;
    if (r->stop && *r->stop) {   /* the user stopped the replay: at once */
        r->loop.reason = "interrupted";   /* even after another reason: no gate, stopped */
        r->loop.stop_step = r->loop.step;
        r->loop.stop_waiting = 1;
        r->loop.halted = 1;
        return KEVO_OK;
    }
    return replay_step(r, out);
}

/* A replay's calls run on no thread: nothing arrives. */
static void replay_arrive(struct runctx *r, struct job *j)
{
    (void)r;
    KEVO_WARN("replay: an LLM reply arrived from a thread; dropped");
    kevo_run_job_free(j);
}

static enum kevo_status replay_holdout(struct runctx *r, struct job *j, struct job **out)
{
    enum kevo_status st = replay_holdout_result(r, j->id, &j->result);

    *out = NULL;
    if (st) {
        kevo_run_job_free(j);
        return st;
    }
    *out = j;
    return KEVO_OK;
}

/* It must end where the original did, unless the user stopped it. */
static enum kevo_status replay_end(struct runctx *r)
{
    return r->stop && *r->stop ? KEVO_OK : replay_finish(r);
}

static enum kevo_status replay_report(struct runctx *r, json_t *report)
{
    return r->stop && *r->stop ? KEVO_OK : replay_compare(r, report);
}

static void replay_close(struct runctx *r)
{
    replay_free(rp(r));
    r->steps_ctx = NULL;
}

const struct kevo_steps_ops kevo_steps_replay = {
    .name = "replay",
    .recorded = 1,
    .open = replay_open,
    .start = replay_start,
    .begin = replay_begin,
    .send = replay_send,
    .next = replay_next,
    .arrive = replay_arrive,
    .holdout = replay_holdout,
    .book = replay_book,
    .differs = replay_differs,
    .stop_reason = replay_stop,
    .finish = replay_end,
    .compare = replay_report,
    .close = replay_close,
};

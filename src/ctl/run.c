/*
 * run - `kevo run`: one search from start (or resume, or replay) to the held-out gate
 * (run.h, docs/search.md). This file is the run itself: its set-up, the search loop, the
 * held-out gate and the report. Where its steps come from (workers and models, or a
 * recorded run) is the step source's business (steps.h); the LLM operators are
 * run_llm.c's; both are reached through their interfaces only.
 *
 * The loop is a function of the steps it handles, in their order: it proposes only after
 * handling a step, and what LLM calls cost counts when their replies are handled. So the
 * archive's step log is enough to run it again (replay.c).
 */
#include "ctl/run.h"

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/proc.h"
#include "ctl/archive.h"
#include "ctl/genome.h"
#include "ctl/ops.h"
#include "ctl/run_llm.h"
#include "ctl/profile.h"
#include "ctl/run_state.h"
#include "ctl/search.h"
#include "ctl/show.h"
#include "ctl/steps.h"
#include "core/result.h"
#include "core/task.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BUDGET 200
#define DEFAULT_TRIES 5
#define PER_SLOT 2                 /* jobs queued per worker slot */
#define WAIT_TICK_S 0.5            /* status events while waiting */
#define FALLBACK_PARENTS 32        /* best candidates tried as parents once elites are spent */
#define EVENT_LOG_LINES 4          /* compile log lines in an eval event */

/* ---- metrics of a result ---- */

/* A figure as the archive and the search take it: a non-finite one (the result's "nan",
 * "inf") reads 0, as unknown. */
static double fin(double v)
{
    return isfinite(v) ? v : 0.0;
}

/* Geometric means over the visible workloads: the candidate's median time (its score),
 * its fraction of SOL, and its speedup over the reference's timed run. */
static void summarize(const struct runctx *r, const struct kevo_result *res, double *score,
                      double *sol, double *speedup)
{
    double lt = 0, ls = 0, lu = 0;
    int n = 0, ns = 0, nu = 0;

    for (int i = 0; i < res->n_wl; i++) {
        const struct kevo_result_wl *w = &res->wl[i];
        double t = fin(w->time.median_s), f = fin(w->sol_fraction);
        if (!(t > 0))
            continue;
        lt += log(t);
        n++;
        if (f > 0) {
            ls += log(f);
            ns++;
        }
        if (w->index < r->loop.n_wl && r->loop.ref_median[w->index] > 0) {
            lu += log(r->loop.ref_median[w->index] / t);
            nu++;
        }
    }
    *score = n ? exp(lt / n) : 0;
    *sol = ns ? exp(ls / ns) : 0;
    *speedup = nu ? exp(lu / nu) : 0;
}

/* Per workload: index, median, sol fraction, GB/s, TFLOP/s; and the resources. */
static char *metrics_text(const struct kevo_result *res)
{
    json_t *m = json_object(), *wl = json_array();
    json_t *rs = json_object_get(res->doc, "resources");   /* stored whole */
    char *s;

    for (int i = 0; i < res->n_wl; i++) {
        const struct kevo_result_wl *w = &res->wl[i];
        json_array_append_new(wl, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f}", "index", w->index,
                                            "median_s", fin(w->time.median_s), "noise",
                                            fin(w->time.noise), "sol_fraction",
                                            fin(w->sol_fraction), "gbps", fin(w->gbps),
                                            "tflops", fin(w->tflops)));
    }
    json_object_set_new(m, "workloads", wl);
    json_object_set(m, "resources", rs ? rs : json_null());
    s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return s;
}

/*
 * j's result decoded into *out. A document that does not decode (a worker that broke the
 * protocol) is replaced by a `crash` naming why, so it is still recorded as a verdict.
 */
static enum kevo_status decode(struct job *j, struct kevo_result *out)
{
    char *why = NULL;
    enum kevo_status st = j->result ? kevo_result_decode(j->result, out, &why) : KEVO_ERR_PARSE;

    if (st == KEVO_ERR_NOMEM || !st) {
        kevo_free(why);
        return st;
    }
    char *msg = kevo_strdupf("the worker's result cannot be read: %s",
                             why ? why : "no result");
    json_t *rq = json_incref(json_object_get(j->result, "request_s"));   /* its time counts */
    json_t *by = json_incref(json_object_get(j->result, "evaluated_by"));   /* and its place */
    kevo_free(why);
    json_decref(j->result);
    j->result = kevo_result_doc_new(KEVO_VERDICT_CRASH, msg, NULL);
    kevo_free(msg);
    if (j->result && rq)
        json_object_set(j->result, "request_s", rq);
    if (j->result && by)
        json_object_set(j->result, "evaluated_by", by);
    json_decref(rq);
    json_decref(by);
    if (!j->result)
        return KEVO_ERR_NOMEM;
    st = kevo_result_decode(j->result, out, &why);
    kevo_free(why);   /* a document kevo wrote itself decodes */
    return st;
}

static int seen_key(void *user, const char *key)
{
    struct runctx *r = user;
    int64_t id = 0;
    return kevo_archive_cand_by_key(r->ar, r->run, key, &id) == KEVO_OK;
}

/* Candidate id's score when it is ok; else (or id 0) 0. */
static double ok_score(struct runctx *r, int64_t id)
{
    struct kevo_cand_rec c;
    double s = 0;
    memset(&c, 0, sizeof c);
    if (id && kevo_archive_cand_get(r->ar, id, &c) == KEVO_OK && c.state == KEVO_CAND_DONE &&
        c.verdict == KEVO_VERDICT_OK)
        s = c.score;
    kevo_archive_cand_clear(&c);
    return s;
}

/* A job for an archived pending candidate (sent again: it has no verdict yet). */
static enum kevo_status pending_job(struct runctx *r, int64_t id, struct job **out)
{
    const struct kevo_genome *g;
    struct kevo_cand_rec c;
    struct job *j;
    size_t len;
    enum kevo_status st = kevo_run_genome_of(r, id, &g);

    *out = NULL;
    if (st)
        return st;
    memset(&c, 0, sizeof c);
    st = kevo_archive_cand_get(r->ar, id, &c);
    j = st ? NULL : kevo_calloc(1, sizeof *j);
    if (!st && !j)
        st = KEVO_ERR_NOMEM;
    if (!st)
        st = kevo_genome_copy(g, &j->g);
    if (!st)
        st = kevo_genome_text(&j->g, &j->text, &len);
    if (!st) {
        j->id = id;
        j->island = c.island >= 0 && c.island < kevo_search_islands(r->loop.s) ? c.island : 0;
        j->op = kevo_run_op_index(r, c.op);
        j->model = -1;
        j->parent_score = ok_score(r, c.parent1);   /* judged as when it was proposed */
        snprintf(j->path, sizeof j->path, "cand%lld%s", (long long)id,
                 r->set.task->lang == KEVO_LANG_CUDA ? ".cu" : ".c");
        *out = j;
    } else {
        kevo_run_job_free(j);
    }
    kevo_archive_cand_clear(&c);
    return st;
}

/* ---- proposals ---- */

/* The operator table's asynchronous (LLM) operators, as a mask for kevo_search_op_pick. */
static unsigned llm_ops(const struct runctx *r)
{
    unsigned m = 0;

    for (int i = 0; i < r->loop.n_ops; i++)
        if (r->loop.ops[i]->start)
            m |= 1u << i;
    return m;
}

/* One child of parent p1 by some operator; KEVO_ERR_NOTFOUND when none has anything new. */
static enum kevo_status child_of(struct runctx *r, int island, int64_t p1, struct job **out)
{
    const struct kevo_genome *g1, *g2 = NULL;
    struct kevo_op_ctx oc = { kevo_search_rng(r->loop.s), seen_key, r };
    struct kevo_genome child, pg1, pg2;
    unsigned exclude = llm_ops(r);   /* they start calls (run_llm.c), not children */
    int llm_count = __builtin_popcount(exclude);
    enum kevo_status st;
    const struct kevo_elite *e = NULL;
    double p1_score = 0;

    for (int c = 0; c < KEVO_CELLS && !e; c++) {
        const struct kevo_elite *x = kevo_search_cell(r->loop.s, island, c);
        if (x && x->id == p1)
            e = x;
    }
    p1_score = e ? e->score : 0;
    if (!e) {   /* a fallback parent, not an elite of this island */
        struct kevo_cand_rec c;
        memset(&c, 0, sizeof c);
        if (kevo_archive_cand_get(r->ar, p1, &c) == KEVO_OK && c.score > 0)
            p1_score = c.score;
        kevo_archive_cand_clear(&c);
    }
    for (int tries = 0; tries < r->loop.n_ops - llm_count; tries++) {
        int op = kevo_search_op_pick(r->loop.s, exclude);
        int64_t p2 = 0;
        if (op < 0)
            break;
        exclude |= 1u << op;
        /* copies: a second genome_of may evict the first from the cache */
        st = kevo_run_genome_of(r, p1, &g1);
        if (!st)
            st = kevo_genome_copy(g1, &pg1);
        if (st)
            return st;
        memset(&pg2, 0, sizeof pg2);
        if (r->loop.ops[op]->n_parents == 2 && (p2 = kevo_search_mate(r->loop.s, island, p1)) != 0) {
            st = kevo_run_genome_of(r, p2, &g2);
            if (!st)
                st = kevo_genome_copy(g2, &pg2);
        }
        if (!st)
            st = r->loop.ops[op]->propose(&oc, &pg1, p2 ? &pg2 : NULL, &child);
        kevo_genome_clear(&pg1);
        kevo_genome_clear(&pg2);
        if (st == KEVO_ERR_NOTFOUND)
            continue;
        if (st)
            return kevo_run_fail(r, st, "operator %s failed: %s", r->loop.ops[op]->name, kevo_status_name(st));
        kevo_search_op_proposed(r->loop.s, op);
        st = kevo_run_record(r, &child, r->loop.ops[op]->name, op, p1, p2, p1_score, island, out);
        kevo_genome_clear(&child);
        if (st != KEVO_ERR_INVALID)
            return st;
    }
    return KEVO_ERR_NOTFOUND;
}

/* The next job: pending candidates first, then a child of a parent from the next island. */
static enum kevo_status propose(struct runctx *r, struct job **out)
{
    *out = NULL;
    if (r->loop.i_pending < r->loop.n_pending)
        return pending_job(r, r->loop.pending[r->loop.i_pending++], out);
    for (int attempt = 0; attempt < 4 * kevo_search_islands(r->loop.s) + 8; attempt++) {
        int island = kevo_search_next_island(r->loop.s);
        int64_t p = kevo_search_parent(r->loop.s, island);
        if (!p)
            continue;
        enum kevo_status st = child_of(r, island, p, out);
        if (st != KEVO_ERR_NOTFOUND)
            return st;
    }
    /* Every elite's neighbourhood is explored: widen to the run's best candidates, which
     * reach configurations two or more steps from an elite. */
    int64_t ids[FALLBACK_PARENTS];
    int n = 0;
    if (kevo_archive_best(r->ar, r->run, -1, FALLBACK_PARENTS, ids, &n) != KEVO_OK)
        n = 0;
    for (int i = 0; i < n; i++) {
        struct kevo_cand_rec c;
        memset(&c, 0, sizeof c);
        int island = kevo_archive_cand_get(r->ar, ids[i], &c) == KEVO_OK && c.island >= 0 &&
                             c.island < kevo_search_islands(r->loop.s) ? c.island : 0;
        kevo_archive_cand_clear(&c);
        enum kevo_status st = child_of(r, island, ids[i], out);
        if (st != KEVO_ERR_NOTFOUND)
            return st;
    }
    return KEVO_ERR_NOTFOUND;
}

/* ---- results ---- */

static json_t *status_json(struct runctx *r)
{
    const struct kevo_elite *b = kevo_search_best(r->loop.s);
    double el = kevo_now() - r->t0;
    double valid = r->loop.n_done ? (double)r->loop.n_ok / (double)r->loop.n_done : 0;
    double ref = 0;
    int n = 0;
    for (int i = 0; i < r->loop.n_wl; i++)
        if (r->loop.ref_median[i] > 0)
            ref += log(r->loop.ref_median[i]), n++;
    ref = n ? exp(ref / n) : 0;
    double eta = r->loop.n_done && r->loop.budget > r->loop.n_done ? el / (double)r->loop.n_done *
                                                          (double)(r->loop.budget - r->loop.n_done) : 0;
    return json_pack("{s:s, s:I, s:I, s:I, s:f, s:o, s:f, s:o, s:f, s:f, s:i}", "event", "status",
                     "run", (json_int_t)r->run, "evaluations", (json_int_t)r->loop.n_done, "budget",
                     (json_int_t)r->loop.budget, "valid", valid, "best_s",
                     b ? json_real(b->score) : json_null(), "best_sol", r->loop.best_sol,
                     "speedup", b && ref > 0 ? json_real(ref / b->score) : json_null(),
                     "elapsed_s", el, "eta_s", eta, "in_flight", r->loop.inflight);
}

/* The name of operator index op (-1: a seed). */
static const char *op_name(const struct runctx *r, int op)
{
    if (op < 0)
        return "seed";
    return op < r->loop.n_ops ? r->loop.ops[op]->name : "?";
}

/* A candidate's counters (the worker's raw ones, worker/eval_profile.c) as the profile
 * object prompts show ({{profile}}) before the result is stored; a failed collection stays
 * as the worker said it. Their cost counts against the run's profiling share. */
static void attach_profile(struct runctx *r, json_t *result)
{
    json_t *raw = json_object_get(result, "profile"), *prof = NULL;
    char *msg = NULL;

    if (!json_is_object(raw))
        return;
    r->loop.profile_s += fin(json_number_value(json_object_get(raw, "cost_s")));
    if (json_object_get(raw, "error"))
        return;
    if (kevo_profile_from_worker(raw, &prof, &msg) == KEVO_OK)
        json_object_set_new(result, "profile", prof);
    else
        json_object_set_new(result, "profile", json_pack("{s:s, s:s}", "tool", "cupti", "error",
                                                         msg ? msg : "malformed"));
    kevo_free(msg);
}

/* Whether the next evaluations ask for counters: CUDA, and profiling within its share of
 * the worker time so far; and of which candidates: a new best only, so the elites the
 * improve prompts start from carry them (the worker knows its candidate's score once it is
 * timed). Read by the evaluating threads: kevo_run_profile_due. */
static void profile_update(struct runctx *r)
{
    const struct kevo_elite *b = kevo_search_best(r->loop.s);
    double below = b && b->score > 0 ? b->score : 0;
    int on = r->o->profile_share > 0 && r->set.backend && !strcmp(r->set.backend, "cuda") &&
             r->loop.profile_s <= r->o->profile_share * r->loop.busy_s;

    __atomic_store(&r->loop.profile_below_s, &below, __ATOMIC_RELAXED);
    __atomic_store_n(&r->loop.profile_on, on, __ATOMIC_RELAXED);
}

int kevo_run_profile_due(const struct runctx *r, double *below_s)
{
    __atomic_load(&r->loop.profile_below_s, below_s, __ATOMIC_RELAXED);
    return __atomic_load_n(&r->loop.profile_on, __ATOMIC_RELAXED);
}

/* Record one evaluated candidate: archive first, then the search state and the event. */
static enum kevo_status handle(struct runctx *r, struct job *j)
{
    double score = 0, sol = 0, speedup = 0;
    struct kevo_result rs;
    enum kevo_status st = decode(j, &rs);
    if (st)
        return kevo_run_fail(r, st, "reading the result of candidate %lld", (long long)j->id);
    enum kevo_verdict v = rs.verdict;
    int ok = v == KEVO_VERDICT_OK, best = 0;
    attach_profile(r, j->result);
    char *metrics = metrics_text(&rs), *res = json_dumps(j->result, JSON_COMPACT);

    st = metrics && res ? KEVO_OK : KEVO_ERR_NOMEM;
    r->loop.busy_s += fin(rs.request_s);
    if (ok)
        summarize(r, &rs, &score, &sol, &speedup);
    ok = ok && score > 0;
    if (!st)
        st = kevo_archive_cand_finish_step(r->ar, j->id, r->loop.cur_step, v, score, sol, speedup,
                                           metrics, res);
    if (st)
        st = kevo_run_fail(r, st, "recording the verdict of candidate %lld: %s", (long long)j->id,
                  kevo_archive_errmsg(r->ar));
    r->loop.n_done++;
    r->loop.n_ok += ok;
    if (!st && ok) {
        struct kevo_desc d;
        kevo_desc_of(&j->g, &rs, &d);
        json_t *dj = kevo_desc_json(&d, r->set.task->lang);
        char *ds = json_dumps(dj, JSON_COMPACT);
        st = kevo_archive_cand_place(r->ar, j->id, j->island, kevo_desc_cell(&d), ds ? ds : "{}");
        if (st)
            st = kevo_run_fail(r, st, "placing candidate %lld: %s", (long long)j->id,
                               kevo_archive_errmsg(r->ar));
        kevo_free(ds);
        json_decref(dj);
        best = kevo_search_place(r->loop.s, j->island, kevo_desc_cell(&d), j->id, score);
        r->loop.exhausted = 0;   /* a new elite may have neighbours nobody tried */
        if (best)
            r->loop.best_sol = sol;
    }
    r->loop.since_best = best ? 0 : r->loop.since_best + 1;
    int improved = ok && (!(j->parent_score > 0) || score < j->parent_score);
    kevo_search_op_result(r->loop.s, j->op, ok, improved);
    kevo_run_llm_evaluated(r, j, op_name(r, j->op), v, score, ok, improved);
    kevo_search_tick(r->loop.s);
    profile_update(r);
    /* the candidate by its id, not the scratch name its worker compiled it under */
    char *why = ok ? NULL : kevo_show_message(j->id, rs.doc);
    json_t *ev = json_pack("{s:s, s:I, s:s, s:s, s:f, s:f, s:f, s:b, s:s?}", "event", "eval",
                           "id", (json_int_t)j->id, "op", op_name(r, j->op), "verdict",
                           kevo_verdict_name(v), "score_s", score, "sol_fraction", sol,
                           "speedup", speedup, "best", best, "message", why);
    json_t *by = json_object_get(j->result, "evaluated_by");   /* where (steps_live.c) */
    if (json_is_object(by)) {
        json_object_set(ev, "rank", json_object_get(by, "rank"));
        json_object_set(ev, "device", json_object_get(by, "device"));
    }
    if (v == KEVO_VERDICT_COMPILE_ERROR) {   /* what went wrong, without `kevo show` */
        int more = 0;
        json_object_set_new(ev, "log", kevo_show_log_head(rs.doc, EVENT_LOG_LINES, &more));
        json_object_set_new(ev, "log_more", json_integer(more));
    }
    kevo_run_event(r, ev);
    kevo_free(why);
    kevo_result_clear(&rs);
    kevo_free(metrics);
    kevo_free(res);
    return st;
}

/* ---- stopping ---- */

/* Why the search stops now, if it does. Waiting: no step arrived in a tick. A replay
 * stops where its original did for the reasons that depend on the clock or the user. */
static const char *should_stop(struct runctx *r, int waiting)
{
    const char *why = r->steps->stop_reason ? r->steps->stop_reason(r, waiting) : NULL;
    if (r->stop && *r->stop)
        return "interrupted";
    if (why)
        return why;
    if (r->loop.n_done >= r->loop.budget)
        return "budget";
    if (r->o->time_s > 0 && kevo_now() - r->t0 >= r->o->time_s)
        return "time";
    if (r->o->target > 0 && r->loop.best_sol >= r->o->target)
        return "target";
    if (r->loop.since_best >= r->loop.stagnation)
        return "stagnation";
    /* what the controller has settled: with the LLM operators, their own account (a
     * replay spends nothing, yet must stop where its original did) */
    if (r->o->cost_cap > 0) {
        double cost = 0;
        if (!kevo_run_llm_spent(r, &cost) && kevo_archive_llm_cost(r->ar, r->run, &cost) != KEVO_OK)
            cost = 0;
        if (cost >= r->o->cost_cap)
            return "cost";
    }
    return NULL;
}

/* Set r->reason (once) from should_stop, remembering where for the report's "stop". */
static void check_stop(struct runctx *r, int waiting)
{
    if (r->loop.reason || !(r->loop.reason = should_stop(r, waiting)))
        return;
    r->loop.stop_step = r->loop.step;
    r->loop.stop_waiting = waiting;
}

/* Keep PER_SLOT jobs per slot queued while the search goes on. */
static enum kevo_status fill(struct runctx *r)
{
    int llm = kevo_run_llm_outstanding(r);   /* room for their candidates */
    while (!r->loop.reason && !r->loop.exhausted && r->loop.inflight < PER_SLOT * r->set.n_slots &&
           r->loop.n_done + r->loop.inflight + llm < r->loop.budget) {
        struct job *j = NULL;
        enum kevo_status st = propose(r, &j);
        if (st == KEVO_ERR_NOTFOUND) {   /* nothing new now; results in flight may change that */
            r->loop.exhausted = r->loop.inflight == 0 && llm == 0;
            break;
        }
        if (st)
            return st;
        kevo_run_send(r, j);
    }
    return KEVO_OK;
}

/* One job from the done queue (or, replaying, from the original's log) is one step. */
static enum kevo_status take_step(struct runctx *r, struct job *j)
{
    enum kevo_status st;

    r->loop.cur_step = ++r->loop.step;
    if (j->llm) {
        st = kevo_run_llm_handle(r, j);
    } else {
        r->loop.inflight--;
        st = j->st ? kevo_run_fail(r, j->st, "%s", j->msg ? j->msg : kevo_status_name(j->st))
                   : handle(r, j);
    }
    r->loop.cur_step = 0;
    kevo_run_job_free(j);
    check_stop(r, 0);
    return st;
}

/*
 * The search proper: until a budget stops it or nothing new is left. Every decision is a
 * function of the steps handled so far, in their order: proposals are made only after a
 * step (a fill that proposes nothing still draws from the search's generator, so a fill
 * at every idle tick would make the run depend on timing), and what LLM calls cost counts
 * when their replies are handled. The steps' order is in the archive; `--replay` feeds
 * them back in it and gets the same run.
 */
static enum kevo_status search_loop(struct runctx *r)
{
    enum kevo_status st = KEVO_OK;
    double last = kevo_now();
    int changed = 1;

    profile_update(r);   /* the first evaluations (the seeds) may be profiled too */
    while (!st) {
        if (changed) {
            st = kevo_run_llm_fill(r);
            if (!st)
                st = fill(r);
            changed = 0;
        }
        if (st || (r->loop.inflight == 0 && kevo_run_llm_outstanding(r) == 0))
            break;
        struct job *j = NULL;
        st = r->steps->next(r, WAIT_TICK_S, &j);
        if (st || r->loop.halted)
            break;
        if (!j) {
            check_stop(r, 1);
        } else {
            st = take_step(r, j);
            changed = 1;
        }
        if (kevo_now() - last >= WAIT_TICK_S) {
            kevo_run_event(r, status_json(r));
            last = kevo_now();
        }
    }
    if (!r->loop.reason) {
        r->loop.reason = r->loop.exhausted ? "exhausted" : "budget";
        r->loop.stop_step = r->loop.step;
    }
    if (!st && r->steps->finish)   /* a replay must end where its original did */
        st = r->steps->finish(r);
    return st;
}

/* ---- setup ---- */

static void free_genomes(struct kevo_genome *g, int n)
{
    for (int i = 0; g && i < n; i++)
        kevo_genome_clear(&g[i]);
    kevo_free(g);
}

/* ---- the held-out gate ---- */

/* Candidate id on the holdout workloads: the job with its result (or kevo's failure). */
static enum kevo_status gate_eval(struct runctx *r, int64_t id, struct job **out)
{
    struct job *j = NULL;
    enum kevo_status st = pending_job(r, id, &j);

    *out = NULL;
    if (st)
        return st;
    j->holdout = 1;
    return r->steps->holdout(r, j, out);
}

/* The best candidates in order until one passes the task's holdout workloads. */
static enum kevo_status holdout_gate(struct runctx *r, json_t *report)
{
    int tries = r->o->holdout_tries > 0 ? r->o->holdout_tries : DEFAULT_TRIES, n = 0;
    int64_t ids[64];
    json_t *rejected = json_array();
    enum kevo_status st;
    int has_holdout = 0;

    for (int w = 0; w < r->set.task->n_workloads; w++)
        has_holdout |= r->set.task->workloads[w].holdout;
    tries = tries > 64 ? 64 : tries;
    st = kevo_archive_best(r->ar, r->run, -1, tries, ids, &n);
    for (int i = 0; i < n && !st; i++) {
        struct job *j = NULL;
        if (!has_holdout) {
            json_object_set_new(report, "final", json_pack("{s:I, s:s}", "id", (json_int_t)ids[i],
                                                           "holdout", "none declared"));
            break;
        }
        st = gate_eval(r, ids[i], &j);
        if (st)
            break;
        struct kevo_result rs;
        enum kevo_verdict v = KEVO_VERDICT_CRASH;   /* kevo's own failure: no result */
        memset(&rs, 0, sizeof rs);
        if (j->result) {
            st = decode(j, &rs);
            if (!st)
                v = rs.verdict;
        }
        char *res = j->result ? json_dumps(j->result, JSON_COMPACT) : NULL;
        r->loop.busy_s += fin(rs.request_s);
        if (!st)
            st = j->st ? kevo_run_fail(r, j->st, "%s", j->msg ? j->msg : "holdout evaluation failed")
                       : kevo_archive_eval_add(r->ar, ids[i], "holdout", res ? res : "{}");
        kevo_run_event(r, json_pack("{s:s, s:I, s:s}", "event", "holdout", "id", (json_int_t)ids[i],
                                    "verdict", kevo_verdict_name(v)));
        if (!st && v == KEVO_VERDICT_OK)
            json_object_set_new(report, "final", json_pack("{s:I, s:s}", "id", (json_int_t)ids[i],
                                                           "holdout", "ok"));
        else if (!st)
            json_array_append_new(rejected, json_pack("{s:I, s:s, s:s?}", "id", (json_int_t)ids[i],
                                                      "verdict", kevo_verdict_name(v), "message",
                                                      json_string_value(json_object_get(
                                                          rs.doc, "message"))));
        kevo_result_clear(&rs);
        kevo_free(res);
        kevo_run_job_free(j);
        if (json_object_get(report, "final"))
            break;
    }
    json_object_set_new(report, "holdout_rejected", rejected);
    if (!json_object_get(report, "final"))
        json_object_set_new(report, "final", json_null());
    return st;
}

/* ---- the report ---- */

static json_t *best_json(struct runctx *r, int64_t id)
{
    struct kevo_cand_rec c;
    json_t *j;

    memset(&c, 0, sizeof c);
    if (!id || kevo_archive_cand_get(r->ar, id, &c) != KEVO_OK)
        return json_null();
    j = json_pack("{s:I, s:s, s:f, s:f, s:f, s:I, s:i, s:i}", "id", (json_int_t)c.id, "op", c.op,
                  "score_s", c.score, "sol_fraction", c.sol_fraction, "speedup", c.speedup,
                  "parent", (json_int_t)c.parent1, "island", c.island, "cell", c.cell);
    json_object_set_new(j, "params", c.params_json ? json_loads(c.params_json, 0, NULL) : json_null());
    json_object_set_new(j, "flags", c.flags_json ? json_loads(c.flags_json, 0, NULL) : json_null());
    /* score_s and the others are geomeans, which match no workload: each one's figures */
    json_object_set_new(j, "workloads", kevo_show_workloads(c.metrics_json,
                                                            json_object_get(r->loop.ref,
                                                                            "workloads")));
    kevo_archive_cand_clear(&c);
    return j;
}

static json_t *report_json(struct runctx *r)
{
    const struct kevo_elite *b = kevo_search_best(r->loop.s);
    double el = kevo_now() - r->t0;
    json_t *isl = json_array();

    for (int i = 0; i < kevo_search_islands(r->loop.s); i++)
        json_array_append_new(isl, json_pack("{s:i, s:i}", "island", i, "occupied_cells",
                                             kevo_search_occupied(r->loop.s, i)));
    /* with the reference, the calibration and the workers: what a replay needs */
    return json_pack("{s:I, s:s, s:s, s:s, s:{s:s, s:I, s:b}, s:I, s:I, s:o, s:o, s:f, s:f, s:f,"
                     " s:o, s:o, s:i, s:O}", "run",
                     (json_int_t)r->run, "task", r->set.task->name, "path", r->set.task_path, "reason",
                     r->loop.reason ? r->loop.reason : "?", "stop", "reason", r->loop.reason ? r->loop.reason : "?",
                     "step", (json_int_t)r->loop.stop_step, "waiting", r->loop.stop_waiting,
                     "evaluations", (json_int_t)r->loop.n_done, "ok",
                     (json_int_t)r->loop.n_ok, "best", best_json(r, b ? b->id : 0), "reference",
                     r->loop.ref ? json_incref(json_object_get(r->loop.ref, "workloads")) : json_null(),
                     "elapsed_s", el, "worker_busy_s", r->loop.busy_s, "controller_overhead",
                     el > 0 ? 1.0 - r->loop.busy_s / (el * r->set.n_slots) : 0.0, "islands", isl,
                     "operators", kevo_search_op_json(r->loop.s), "workers", r->set.n_slots,
                     "calibration", r->set.calib ? r->set.calib : json_null());
}

/* ---- entry ---- */

void kevo_run_opts_default(struct kevo_run_opts *o)
{
    memset(o, 0, sizeof *o);
    kevo_eval_opts_default(&o->eval);
    o->profile_share = 0.1;
}

/* The options a resumed run keeps: what defines the search, not this session's limits. */
static json_t *config_json(const struct kevo_run_opts *o, const char *backend)
{
    json_t *gpus = json_array(), *seeds = json_array(), *models = json_array();
    const char *env = getenv("KEVO_PROMPTS");
    const char *prompts = o->prompts_dir ? o->prompts_dir : env && *env ? env : NULL;
    for (int i = 0; i < o->n_gpus; i++)
        json_array_append_new(gpus, json_integer(o->gpus[i]));
    for (int i = 0; i < o->n_seeds; i++)
        json_array_append_new(seeds, json_string(o->seeds[i]));
    for (int i = 0; i < o->n_models; i++)   /* specs name a key's variable, never a key */
        json_array_append_new(models, json_string(o->models[i]));
    return json_pack("{s:s, s:I, s:f, s:I, s:f, s:i, s:I, s:o, s:o, s:i, s:f, s:o, s:i, s:b,"
                     " s:i, s:s?, s:s?}", "backend", backend,
                     "budget", (json_int_t)o->budget, "target", o->target, "stagnation",
                     (json_int_t)o->stagnation, "cost_cap", o->cost_cap, "islands", o->n_islands,
                     "rng_seed", (json_int_t)o->rng_seed, "gpus", gpus, "seeds", seeds, "trials",
                     o->eval.trials, "time_cap_s", o->eval.time_cap_s, "models", models,
                     "llm_concurrency", o->llm_concurrency, "offline", o->offline,
                     "holdout_tries", o->holdout_tries, "prompts", prompts,
                     "playbook", o->playbook_dir);
}

static enum kevo_status open_archive(struct runctx *r, const char *path)
{
    char def[PATH_MAX], *m = NULL;
    enum kevo_status st = KEVO_OK;

    if (!path) {
        st = kevo_run_default_archive(def, sizeof def);
        if (st)
            return kevo_run_fail(r, st, "no archive path: set KEVO_ARCHIVE or HOME");
        path = def;
    }
    st = kevo_archive_open(path, &r->ar, &m);
    if (st)
        st = kevo_run_fail(r, st, "%s", m ? m : path);
    kevo_free(m);
    return st;
}

static enum kevo_status new_search(struct runctx *r)
{
    struct kevo_search_cfg sc;
    int64_t n = 0, nd = 0, nok = 0;

    kevo_search_cfg_default(&sc);
    sc.n_islands = (int)kevo_run_opt_i(r, r->o->n_islands, "islands", 2);
    /* reproducible per run, and a resumed session does not replay the first one's draws */
    if (r->run && kevo_archive_counts(r->ar, r->run, &n, &nd, &nok) != KEVO_OK)
        n = 0;   /* only the seed's mix is lost */
    sc.seed = (uint64_t)kevo_run_opt_i(r, (int64_t)r->o->rng_seed, "rng_seed", (int64_t)sc.seed) ^
              (uint64_t)n * 0x9E3779B97F4A7C15ull;
    enum kevo_status st = kevo_search_new(&sc, &r->loop.s);
    if (st)
        return kevo_run_fail(r, st, "bad search configuration (islands 1..%d)", KEVO_MAX_ISLANDS);
    /* the table: these, then the LLM operators (kevo_run_llm_start) */
    const struct kevo_operator *const *ops = kevo_ops_builtin(&r->loop.n_ops);
    for (int i = 0; i < r->loop.n_ops; i++) {
        r->loop.ops[i] = ops[i];
        kevo_search_op_register(r->loop.s, i, ops[i]->name, ops[i]->prior);
    }
    return KEVO_OK;
}

/*
 * Whether run r->run may have another session: a finished (done) one only with a --budget
 * given to this session above the evaluations it made (else the refusal changes nothing:
 * the run is not gated again and stays replayable); one still running in a live process
 * of this host never (two controllers would write one run); a stopped or killed one as
 * it is (a run left `running` by a controller that died included).
 */
static enum kevo_status resume_room(struct runctx *r)
{
    struct kevo_run_rec rr;
    int64_t n = 0, nd = 0, nok = 0, given = r->o->budget;
    enum kevo_status st;
    char small[64] = "", again[64] = "";

    memset(&rr, 0, sizeof rr);
    st = kevo_archive_run_get(r->ar, r->run, &rr);
    if (!st)
        st = kevo_archive_counts(r->ar, r->run, &n, &nd, &nok);
    if (st) {
        st = kevo_run_fail(r, st, "run %lld: %s", (long long)r->run, kevo_archive_errmsg(r->ar));
    } else if (rr.status == KEVO_RUN_DONE && given <= nd) {
        json_t *rep = rr.result_json ? json_loads(rr.result_json, 0, NULL) : NULL;
        const char *why = json_string_value(json_object_get(rep, "reason"));
        if (given > 0)
            snprintf(small, sizeof small, ", and --budget %lld is not more", (long long)given);
        if (rr.sessions <= 1)   /* what a replay can reproduce (replay.c) */
            snprintf(again, sizeof again, "; kevo run --replay %lld replays it",
                     (long long)r->run);
        st = kevo_run_fail(r, KEVO_ERR_INVALID, "run %lld is done: stopped by %s after %lld "
                           "evaluations%s; it goes on only with a larger --budget (more than "
                           "%lld)%s", (long long)r->run, why ? why : "?", (long long)nd, small,
                           (long long)nd, again);
        json_decref(rep);
    } else if (rr.status == KEVO_RUN_RUNNING && kevo_proc_check(&rr.owner) == KEVO_PROC_ALIVE) {
        st = kevo_run_fail(r, KEVO_ERR_INVALID, "run %lld is running (kevo pid %lld on %s): "
                           "stop it first (Ctrl-C or kill %lld), then resume it",
                           (long long)r->run, (long long)rr.owner.pid, rr.owner.host,
                           (long long)rr.owner.pid);
    }
    kevo_archive_run_clear(&rr);
    return st;
}

static enum kevo_status setup(struct runctx *r)
{
    const struct kevo_run_opts *o;
    enum kevo_status st = open_archive(r, r->o->archive);

    if (!st)
        st = r->steps->open(r);   /* the task and the options */
    o = r->o;
    if (!st && o->resume)
        st = resume_room(r);   /* before anything is checked or started */
    if (!st)
        st = new_search(r);   /* checks the search options before the run exists */
    if (!st && r->steps->check)
        st = r->steps->check(r);   /* a new run's seeds */
    if (!st)
        st = kevo_run_llm_prepare(r);
    if (st)
        return st;
    r->set.backend = o->eval.backend == KEVO_BACKEND_CPU ? "cpu"
                     : o->eval.backend == KEVO_BACKEND_CUDA ? "cuda"
                     : r->set.task->lang == KEVO_LANG_C ? "cpu" : "cuda";
    if (!o->resume) {
        json_t *cfg = config_json(o, r->set.backend);
        json_object_set_new(cfg, "llm_settings", json_integer(KEVO_LLMOPS_SETTINGS));
        if (o->replay)
            json_object_set_new(cfg, "replay_of", json_integer(o->replay));
        if (r->llm)
            json_object_set_new(cfg, "prices_used", kevo_run_llm_prices(r));
        char *cs = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
        st = cs ? kevo_archive_run_create(r->ar, r->set.task->name, r->set.task_path,
                                          r->set.task_text, r->set.task_len, cs, &r->run)
                : KEVO_ERR_NOMEM;
        kevo_free(cs);
        json_decref(cfg);
        if (st)
            return kevo_run_fail(r, st, "creating the run: %s", kevo_archive_errmsg(r->ar));
        r->running = 1;
    }
    r->loop.budget = kevo_run_opt_i(r, o->budget, "budget", DEFAULT_BUDGET);
    r->loop.stagnation = kevo_run_opt_i(r, o->stagnation, "stagnation", 0);
    if (r->loop.stagnation <= 0)
        r->loop.stagnation = r->loop.budget / 4 > 24 ? r->loop.budget / 4 : 24;
    r->loop.n_wl = r->set.task->n_workloads;
    r->loop.ref_median = kevo_calloc((size_t)r->loop.n_wl + 1, sizeof *r->loop.ref_median);
    if (!r->loop.ref_median)
        return KEVO_ERR_NOMEM;
    st = r->steps->start(r);   /* workers and calibration, or the original's */
    if (!st)
        st = kevo_run_llm_start(r);
    /* a resumed run is running again (one more session) once this one can go on: an
     * attempt that fails before leaves the run as it was */
    if (!st && o->resume) {
        if (kevo_archive_run_finish(r->ar, r->run, KEVO_RUN_RUNNING, NULL) != KEVO_OK)
            return kevo_run_fail(r, KEVO_ERR_IO, "run %lld: %s", (long long)r->run,
                                 kevo_archive_errmsg(r->ar));
        r->running = 1;
    }
    return st;
}

static void teardown(struct runctx *r)
{
    kevo_run_llm_stop(r);   /* its threads hand replies to the step source: stop them first */
    if (r->steps_ctx)
        r->steps->close(r);
    for (int i = 0; i < GENOME_CACHE; i++)
        kevo_genome_clear(&r->loop.cache[i].g);
    kevo_search_free(r->loop.s);
    kevo_archive_close(r->ar);
    kevo_task_free(r->set.task);
    kevo_free(r->set.task_text);
    kevo_free(r->set.path_owned);
    kevo_free(r->loop.ref_median);
    kevo_free(r->loop.pending);
    free_genomes(r->set.seeds, r->set.n_seeds);
    kevo_free(r->set.cfg_models);
    json_decref(r->set.cfg);
    json_decref(r->set.calib);
    json_decref(r->set.sol);
    json_decref(r->loop.ref);
    kevo_buf_free(&r->msg);
}

/* The report's last figures, and the held-out gate unless the user stopped the run. */
static enum kevo_status finish(struct runctx *r, json_t *rep)
{
    enum kevo_status st = KEVO_OK;
    double el, spent = 0;

    if (strcmp(r->loop.reason, "interrupted") != 0)
        st = holdout_gate(r, rep);
    el = kevo_now() - r->t0;   /* the whole run, the gate included */
    json_object_set_new(rep, "elapsed_s", json_real(el));
    json_object_set_new(rep, "worker_busy_s", json_real(r->loop.busy_s));
    json_object_set_new(rep, "controller_overhead",
                        json_real(el > 0 ? 1.0 - r->loop.busy_s / (el * r->set.n_slots) : 0.0));
    /* as recorded: a replay spends nothing */
    if (r->llm && kevo_archive_llm_cost(r->ar, r->run, &spent) == KEVO_OK)
        json_object_set_new(rep, "llm_spent", json_real(spent));
    if (r->llm) {   /* per model, all sessions: priced by this one's table or the first's */
        json_t *prices = kevo_run_llm_prices(r);
        json_object_update_missing(prices, json_object_get(r->set.cfg, "prices_used"));
        json_object_set_new(rep, "llm_models", kevo_runs_llm_models(r->ar, r->run, prices));
        json_decref(prices);
    }
    /* an offline run: the calls that wait for `kevo llm pending` (docs/llm.md) */
    struct kevo_llm_wanted *w = NULL;
    int nw = 0;
    if (r->llm && r->o->offline && !r->steps->recorded &&
        kevo_archive_llm_pending(r->ar, r->run, &w, &nw) == KEVO_OK)
        json_object_set_new(rep, "llm_pending", json_integer(nw));
    kevo_archive_llm_wanted_free(w, nw);
    return st;
}

enum kevo_status kevo_run(const char *task_path, const struct kevo_run_opts *o,
                          kevo_run_event_fn ev, void *user, volatile int *stop, int64_t *run_id,
                          char **out_json, char **out_msg)
{
    struct runctx r;
    json_t *rep = NULL;
    enum kevo_status st, diverged = KEVO_OK;

    memset(&r, 0, sizeof r);
    kevo_buf_init(&r.msg, 1 << 16);
    r.o = o;
    r.ev = ev;
    r.user = user;
    r.stop = stop;
    r.t0 = kevo_now();
    r.set.task_path = task_path;
    r.steps = o->replay ? &kevo_steps_replay : &kevo_steps_live;   /* the one choice */
    *out_json = NULL;
    *out_msg = NULL;
    st = setup(&r);
    if (run_id)   /* a resume refused before its session began is no run of this call */
        *run_id = r.running || !o->resume ? r.run : 0;
    if (!st)
        st = r.steps->begin(&r);   /* the reference, the first candidates */
    if (!st)
        st = kevo_run_llm_imports(&r);   /* a resumed run's imported replies first */
    if (!st) {
        kevo_run_event(&r, json_pack("{s:s, s:I, s:s, s:s, s:I, s:i, s:b, s:I}", "event", "start",
                                     "run", (json_int_t)r.run, "task", r.set.task->name,
                                     "backend", r.set.backend, "budget",
                                     (json_int_t)r.loop.budget, "workers", r.set.n_slots,
                                     "resumed", o->resume != 0, "replay_of",
                                     (json_int_t)o->replay));
        st = search_loop(&r);
    }
    if (!st) {
        rep = report_json(&r);
        st = finish(&r, rep);
    }
    if (!st && r.steps->report)   /* the workers' side: the MPI ranks */
        r.steps->report(&r, rep);
    if (!st && r.steps->compare)   /* a replay: the same run as its original? */
        diverged = r.steps->compare(&r, rep);
    if (!st) {
        char *s = json_dumps(rep, JSON_INDENT(1));
        enum kevo_run_status rs = strcmp(r.loop.reason, "interrupted") == 0 ? KEVO_RUN_STOPPED
                                                                            : KEVO_RUN_DONE;
        st = s ? kevo_archive_run_finish(r.ar, r.run, rs, s) : KEVO_ERR_NOMEM;
        if (st)
            st = kevo_run_fail(&r, st, "recording the report: %s", kevo_archive_errmsg(r.ar));
        kevo_run_event(&r, json_pack("{s:s, s:O}", "event", "done", "report", rep));
        *out_json = s;
        st = st ? st : diverged;
    } else if (r.running && kevo_archive_run_finish(r.ar, r.run, KEVO_RUN_FAILED, NULL)) {
        KEVO_WARN("run %lld: could not mark it failed: %s", (long long)r.run,
                  kevo_archive_errmsg(r.ar));
    }
    if (st)
        *out_msg = r.msg.len ? kevo_buf_take(&r.msg) : kevo_strdup(kevo_status_name(st));
    json_decref(rep);
    teardown(&r);
    return st;
}

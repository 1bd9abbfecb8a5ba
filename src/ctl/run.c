/*
 * run - `kevo run`: one search from start (or resume) to the held-out gate (run.h,
 * docs/search.md).
 *
 * Process model: the controller (this thread) proposes candidates and records results;
 * one thread per pool slot sends jobs to its worker and waits. Every proposal is written
 * to the archive (pending) before it is dispatched and every verdict as soon as it
 * arrives, so a run killed at any moment resumes with nothing lost and nothing evaluated
 * twice: done candidates are never sent again, pending ones are sent again (they have no
 * verdict yet). The queue keeps two jobs per slot so a worker never waits for a proposal.
 */
#include "ctl/run.h"
#include "ctl/run_int.h"
#include "ctl/archive.h"
#include "base/buf.h"
#include "ctl/evalreq.h"
#include "base/fsutil.h"
#include "ctl/genome.h"
#include "base/log.h"
#include "base/mem.h"
#include "ctl/ops.h"
#include "ctl/pool.h"
#include "ctl/search.h"
#include "core/sol.h"
#include "core/task.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_BUDGET 200
#define DEFAULT_TRIES 5
#define PER_SLOT 2                 /* jobs queued per worker slot */
#define WAIT_TICK_S 0.5            /* status events while waiting */
#define CALIBRATE_DEADLINE_S 600.0
#define FALLBACK_PARENTS 32        /* best candidates tried as parents once elites are spent */

/* ---- jobs and queues ---- */

void kevo_run_job_free(struct job *j)
{
    if (!j)
        return;
    kevo_genome_clear(&j->g);
    kevo_llm_call_free(j->llm);
    kevo_free(j->text);
    kevo_free(j->msg);
    json_decref(j->result);
    kevo_free(j);
}

static void q_init(struct queue *q)
{
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
}

static void q_destroy(struct queue *q)
{
    while (q->head) {
        struct job *j = q->head;
        q->head = j->next;
        kevo_run_job_free(j);
    }
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}

void kevo_run_q_push(struct queue *q, struct job *j)
{
    pthread_mutex_lock(&q->mu);
    j->next = NULL;
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static void q_close(struct queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* The next job, waiting at most wait_s (< 0: until closed); NULL on timeout or close. */
static struct job *q_pop(struct queue *q, double wait_s)
{
    struct timespec until;
    struct job *j = NULL;

    clock_gettime(CLOCK_REALTIME, &until);
    if (wait_s >= 0) {
        until.tv_sec += (time_t)wait_s;
        until.tv_nsec += (long)((wait_s - floor(wait_s)) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->closed) {
        if (wait_s < 0)
            pthread_cond_wait(&q->cv, &q->mu);
        else if (pthread_cond_timedwait(&q->cv, &q->mu, &until) != 0)
            break;
    }
    if (q->head) {
        j = q->head;
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    return j;
}

/* ---- the run's state ---- */

double kevo_run_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

void kevo_run_event(struct runctx *r, json_t *e)
{
    if (!e)
        return;
    if (r->ev) {
        char *s = json_dumps(e, JSON_COMPACT);
        if (s)
            r->ev(r->user, s);
        kevo_free(s);
    }
    json_decref(e);
}

enum kevo_status kevo_run_fail(struct runctx *r, enum kevo_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum kevo_status kevo_run_fail(struct runctx *r, enum kevo_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!r->msg.len && kevo_buf_vaddf(&r->msg, fmt, ap) != KEVO_OK) {
        /* keep what fitted */
    }
    va_end(ap);
    return st;
}

/* ---- worker threads ---- */

struct slot_arg {
    struct runctx *r;
    int slot;
};

static void *slot_main(void *p)
{
    struct slot_arg *a = p;
    struct runctx *r = a->r;
    struct job *j;

    while ((j = q_pop(&r->jobs, -1)) != NULL) {
        struct kevo_eval_call c = {
            .task_path = r->task_path, .task_text = r->task_text, .cand_path = j->path,
            .cand_text = j->text, .trials = r->o->eval.trials, .holdout = j->holdout,
            .timed = !j->holdout, .time_reference = 0, .time_cap_s = r->o->eval.time_cap_s,
            .sol = r->sol,
        };
        j->st = kevo_evalreq_call(r->pool, a->slot, &c, r->o->eval.deadline_s, &j->result,
                                  &j->msg);
        kevo_run_q_push(&r->done, j);
    }
    kevo_free(a);
    return NULL;
}

static enum kevo_status start_threads(struct runctx *r)
{
    for (int i = 0; i < r->n_slots; i++) {
        struct slot_arg *a = kevo_malloc(sizeof *a);
        if (!a)
            return KEVO_ERR_NOMEM;
        a->r = r;
        a->slot = i;
        int rc = pthread_create(&r->threads[i], NULL, slot_main, a);
        if (rc != 0) {
            kevo_free(a);
            return kevo_run_fail(r, KEVO_ERR_SYSTEM, "cannot start a worker thread: %s",
                                 strerror(rc));
        }
        r->n_threads++;
    }
    return KEVO_OK;
}

/* ---- metrics of a result ---- */

/* Geometric means over the visible workloads: the candidate's median time (its score),
 * its fraction of SOL, and its speedup over the reference's timed run. */
static void summarize(const struct runctx *r, json_t *res, double *score, double *sol,
                      double *speedup)
{
    double lt = 0, ls = 0, lu = 0;
    int n = 0, ns = 0, nu = 0;
    size_t i;
    json_t *w;

    json_array_foreach(json_object_get(res, "workloads"), i, w) {
        double t = json_number_value(json_object_get(json_object_get(w, "time"), "median_s"));
        double f = json_number_value(json_object_get(w, "sol_fraction"));
        int idx = (int)json_integer_value(json_object_get(w, "index"));
        if (!(t > 0))
            continue;
        lt += log(t);
        n++;
        if (f > 0)
            ls += log(f), ns++;
        if (idx >= 0 && idx < r->n_wl && r->ref_median[idx] > 0)
            lu += log(r->ref_median[idx] / t), nu++;
    }
    *score = n ? exp(lt / n) : 0;
    *sol = ns ? exp(ls / ns) : 0;
    *speedup = nu ? exp(lu / nu) : 0;
}

/* Per workload: index, median, sol fraction, GB/s, TFLOP/s; and the resources. */
static char *metrics_text(json_t *res)
{
    json_t *m = json_object(), *wl = json_array(), *w;
    size_t i;
    json_array_foreach(json_object_get(res, "workloads"), i, w) {
        json_t *t = json_object_get(w, "time");
        json_array_append_new(
            wl, json_pack("{s:O, s:f, s:f, s:f, s:f, s:f}", "index", json_object_get(w, "index"),
                          "median_s", json_number_value(json_object_get(t, "median_s")),
                          "noise", json_number_value(json_object_get(t, "noise")),
                          "sol_fraction", json_number_value(json_object_get(w, "sol_fraction")),
                          "gbps", json_number_value(json_object_get(w, "gbps")), "tflops",
                          json_number_value(json_object_get(w, "tflops"))));
    }
    json_object_set_new(m, "workloads", wl);
    json_t *rs = json_object_get(res, "resources");
    json_object_set(m, "resources", rs ? rs : json_null());
    char *s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return s;
}

static const char *verdict_of(json_t *res)
{
    const char *v = json_string_value(json_object_get(res, "verdict"));
    return v ? v : "crash";
}

/* ---- candidates from the archive ---- */

/* The genome of candidate id (cached; borrowed until the next call that may evict). */
enum kevo_status kevo_run_genome_of(struct runctx *r, int64_t id, const struct kevo_genome **out)
{
    struct kevo_cand_rec c;
    char *text = NULL, *pmsg = NULL, path[64];
    size_t len = 0;
    enum kevo_status st;

    for (int i = 0; i < GENOME_CACHE; i++)
        if (r->cache[i].id == id) {
            *out = &r->cache[i].g;
            return KEVO_OK;
        }
    memset(&c, 0, sizeof c);
    st = kevo_archive_cand_get(r->ar, id, &c);
    if (!st)
        st = kevo_archive_source_get(r->ar, c.source_hash, &text, &len);
    struct cached_genome *slot = &r->cache[r->cache_next];
    kevo_genome_clear(&slot->g);
    slot->id = 0;
    snprintf(path, sizeof path, "run%lld/cand%lld%s", (long long)r->run, (long long)id,
             r->task->lang == KEVO_LANG_CUDA ? ".cu" : ".c");
    if (!st)
        st = kevo_genome_from_text(r->task, path, text, len, &slot->g, &pmsg);
    if (!st) {
        slot->id = id;
        r->cache_next = (r->cache_next + 1) % GENOME_CACHE;
        *out = &slot->g;
    } else {
        st = kevo_run_fail(r, st, "candidate %lld in the archive cannot be read back: %s",
                  (long long)id, pmsg ? pmsg : kevo_archive_errmsg(r->ar));
    }
    kevo_free(pmsg);
    kevo_free(text);
    kevo_archive_cand_clear(&c);
    return st;
}

static int seen_key(void *user, const char *key)
{
    struct runctx *r = user;
    int64_t id = 0;
    return kevo_archive_cand_by_key(r->ar, r->run, key, &id) == KEVO_OK;
}

/* A job for genome g (taken), recorded as a pending candidate. KEVO_ERR_INVALID when the
 * run already has it (the genome is dropped). */
enum kevo_status kevo_run_record(struct runctx *r, struct kevo_genome *g, const char *op, int op_i,
                               int64_t p1, int64_t p2, double p1_score, int island,
                               struct job **out)
{
    struct kevo_cand_rec c;
    struct job *j = kevo_calloc(1, sizeof *j);
    size_t len = 0;
    enum kevo_status st = j ? KEVO_OK : KEVO_ERR_NOMEM;

    *out = NULL;
    memset(&c, 0, sizeof c);
    if (!st) {
        j->g = *g;
        memset(g, 0, sizeof *g);
        st = kevo_genome_text(&j->g, &j->text, &len);
    }
    if (!st)
        st = kevo_archive_source_put(r->ar, j->text, len, c.source_hash);
    if (!st)
        st = kevo_sha256_hex(j->text, len, c.key);
    if (!st)
        st = kevo_genome_json(&j->g, &c.params_json, &c.flags_json);
    if (!st) {
        c.run_id = r->run;
        c.parent1 = p1;
        c.parent2 = p2;
        snprintf(c.op, sizeof c.op, "%s", op);
        c.island = island;
        c.cell = -1;
        st = kevo_archive_cand_add(r->ar, &c, &j->id);
    }
    if (!st) {
        j->op = op_i;
        j->model = -1;
        j->island = island;
        j->parent_score = p1_score;
        snprintf(j->path, sizeof j->path, "run%lld/cand%lld%s", (long long)r->run,
                 (long long)j->id, r->task->lang == KEVO_LANG_CUDA ? ".cu" : ".c");
        *out = j;
    } else {
        if (st != KEVO_ERR_INVALID)
            st = kevo_run_fail(r, st, "recording a candidate: %s", kevo_archive_errmsg(r->ar));
        kevo_run_job_free(j);
    }
    kevo_free(c.params_json);
    kevo_free(c.flags_json);
    return st;
}

/* The search's index of operator `name` (the LLM ones included); -1 for seeds. */
static int op_index(const struct runctx *r, const char *name)
{
    for (int i = 0; i < r->n_ops; i++)
        if (strcmp(r->ops[i]->name, name) == 0)
            return i;
    for (int i = 0; r->llm && i < KEVO_LLMOP_COUNT; i++)
        if (strcmp(kevo_llmop_names[i], name) == 0)
            return r->op_base + i;
    return -1;
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
        j->island = c.island >= 0 && c.island < kevo_search_islands(r->s) ? c.island : 0;
        j->op = op_index(r, c.op);
        j->model = -1;
        j->parent_score = ok_score(r, c.parent1);   /* judged as when it was proposed */
        snprintf(j->path, sizeof j->path, "run%lld/cand%lld%s", (long long)r->run,
                 (long long)id, r->task->lang == KEVO_LANG_CUDA ? ".cu" : ".c");
        *out = j;
    } else {
        kevo_run_job_free(j);
    }
    kevo_archive_cand_clear(&c);
    return st;
}

/* ---- proposals ---- */

/* One child of parent p1 by some operator; KEVO_ERR_NOTFOUND when none has anything new. */
static enum kevo_status child_of(struct runctx *r, int island, int64_t p1, struct job **out)
{
    const struct kevo_genome *g1, *g2 = NULL;
    struct kevo_op_ctx oc = { kevo_search_rng(r->s), seen_key, r };
    struct kevo_genome child, pg1, pg2;
    unsigned exclude = r->llm ? ~((1u << r->op_base) - 1u) : 0;   /* LLM ops run elsewhere */
    enum kevo_status st;
    const struct kevo_elite *e = NULL;
    double p1_score = 0;

    for (int c = 0; c < KEVO_CELLS && !e; c++) {
        const struct kevo_elite *x = kevo_search_cell(r->s, island, c);
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
    for (int tries = 0; tries < r->n_ops; tries++) {
        int op = kevo_search_op_pick(r->s, exclude);
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
        if (r->ops[op]->n_parents == 2 && (p2 = kevo_search_mate(r->s, island, p1)) != 0) {
            st = kevo_run_genome_of(r, p2, &g2);
            if (!st)
                st = kevo_genome_copy(g2, &pg2);
        }
        if (!st)
            st = r->ops[op]->propose(&oc, &pg1, p2 ? &pg2 : NULL, &child);
        kevo_genome_clear(&pg1);
        kevo_genome_clear(&pg2);
        if (st == KEVO_ERR_NOTFOUND)
            continue;
        if (st)
            return kevo_run_fail(r, st, "operator %s failed: %s", r->ops[op]->name, kevo_status_name(st));
        kevo_search_op_proposed(r->s, op);
        st = kevo_run_record(r, &child, r->ops[op]->name, op, p1, p2, p1_score, island, out);
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
    if (r->i_pending < r->n_pending)
        return pending_job(r, r->pending[r->i_pending++], out);
    for (int attempt = 0; attempt < 4 * kevo_search_islands(r->s) + 8; attempt++) {
        int island = kevo_search_next_island(r->s);
        int64_t p = kevo_search_parent(r->s, island);
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
                             c.island < kevo_search_islands(r->s) ? c.island : 0;
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
    const struct kevo_elite *b = kevo_search_best(r->s);
    double el = kevo_run_now() - r->t0;
    double valid = r->n_done ? (double)r->n_ok / (double)r->n_done : 0;
    double ref = 0;
    int n = 0;
    for (int i = 0; i < r->n_wl; i++)
        if (r->ref_median[i] > 0)
            ref += log(r->ref_median[i]), n++;
    ref = n ? exp(ref / n) : 0;
    double eta = r->n_done && r->budget > r->n_done ? el / (double)r->n_done *
                                                          (double)(r->budget - r->n_done) : 0;
    return json_pack("{s:s, s:I, s:I, s:I, s:f, s:o, s:f, s:o, s:f, s:f, s:i}", "event", "status",
                     "run", (json_int_t)r->run, "evaluations", (json_int_t)r->n_done, "budget",
                     (json_int_t)r->budget, "valid", valid, "best_s",
                     b ? json_real(b->score) : json_null(), "best_sol", r->best_sol,
                     "speedup", b && ref > 0 ? json_real(ref / b->score) : json_null(),
                     "elapsed_s", el, "eta_s", eta, "in_flight", r->inflight);
}

/* The name of operator index op (-1: a seed). */
static const char *op_name(const struct runctx *r, int op)
{
    if (op < 0)
        return "seed";
    if (r->llm && op >= r->op_base)
        return kevo_llmop_names[op - r->op_base];
    return op < r->n_ops ? r->ops[op]->name : "?";
}

/* Record one evaluated candidate: archive first, then the search state and the event. */
static enum kevo_status handle(struct runctx *r, struct job *j)
{
    double score = 0, sol = 0, speedup = 0;
    const char *v = verdict_of(j->result);
    int ok = strcmp(v, "ok") == 0, best = 0;
    char *metrics = metrics_text(j->result), *res = json_dumps(j->result, JSON_COMPACT);
    enum kevo_status st = metrics && res ? KEVO_OK : KEVO_ERR_NOMEM;

    r->busy_s += json_number_value(json_object_get(j->result, "request_s"));
    r->llm_idle = 0;   /* a new result: the prompts have something new to say */
    if (ok)
        summarize(r, j->result, &score, &sol, &speedup);
    ok = ok && score > 0;
    enum kevo_verdict vk = KEVO_VERDICT_CRASH;   /* verdict_of's fallback for a name it lacks */
    if (kevo_verdict_parse(v, &vk) != KEVO_OK)
        vk = KEVO_VERDICT_CRASH;
    if (!st)
        st = kevo_archive_cand_finish_step(r->ar, j->id, r->cur_step, vk, score, sol, speedup,
                                           metrics, res);
    if (st)
        st = kevo_run_fail(r, st, "recording the verdict of candidate %lld: %s", (long long)j->id,
                  kevo_archive_errmsg(r->ar));
    r->n_done++;
    r->n_ok += ok;
    if (!st && ok) {
        struct kevo_desc d;
        kevo_desc_of(&j->g, j->result, &d);
        json_t *dj = kevo_desc_json(&d, r->task->lang);
        char *ds = json_dumps(dj, JSON_COMPACT);
        st = kevo_archive_cand_place(r->ar, j->id, j->island, kevo_desc_cell(&d), ds ? ds : "{}");
        if (st)
            st = kevo_run_fail(r, st, "placing candidate %lld: %s", (long long)j->id,
                               kevo_archive_errmsg(r->ar));
        kevo_free(ds);
        json_decref(dj);
        best = kevo_search_place(r->s, j->island, kevo_desc_cell(&d), j->id, score);
        r->exhausted = 0;   /* a new elite may have neighbours nobody tried */
        if (best)
            r->best_sol = sol;
    }
    r->since_best = best ? 0 : r->since_best + 1;
    int improved = ok && (!(j->parent_score > 0) || score < j->parent_score);
    kevo_search_op_result(r->s, j->op, ok, improved);
    if (r->llm && j->model >= 0)
        kevo_llmops_model_result(r->llm, j->model, ok, improved);
    if (r->llm) {
        struct kevo_cand_rec c;
        memset(&c, 0, sizeof c);
        int64_t parent = kevo_archive_cand_get(r->ar, j->id, &c) == KEVO_OK ? c.parent1 : 0;
        kevo_archive_cand_clear(&c);
        kevo_run_llm_note(r, j->id, parent, op_name(r, j->op), v, score);
    }
    kevo_search_tick(r->s);
    kevo_run_event(r, json_pack("{s:s, s:I, s:s, s:s, s:f, s:f, s:f, s:b, s:s?}", "event", "eval", "id",
                       (json_int_t)j->id, "op", op_name(r, j->op),
                       "verdict", v, "score_s", score, "sol_fraction", sol, "speedup", speedup,
                       "best", best, "message",
                       ok ? NULL : json_string_value(json_object_get(j->result, "message"))));
    kevo_free(metrics);
    kevo_free(res);
    return st;
}

/* ---- stopping ---- */

/* Why the search stops now, if it does. Waiting: no step arrived in a tick. A replay
 * stops where its original did for the reasons that depend on the clock or the user. */
static const char *should_stop(struct runctx *r, int waiting)
{
    const char *why = r->replay ? kevo_replay_stop(r, waiting) : NULL;
    if (r->stop && *r->stop)
        return "interrupted";
    if (why)
        return why;
    if (r->n_done >= r->budget)
        return "budget";
    if (r->o->time_s > 0 && kevo_run_now() - r->t0 >= r->o->time_s)
        return "time";
    if (r->o->target > 0 && r->best_sol >= r->o->target)
        return "target";
    if (r->since_best >= r->stagnation)
        return "stagnation";
    /* what the controller has settled: with the LLM operators, their own account (a
     * replay spends nothing, yet must stop where its original did) */
    if (r->o->cost_cap > 0) {
        double cost = 0;
        if (r->llm)
            cost = kevo_llmops_spent(r->llm);
        else if (kevo_archive_llm_cost(r->ar, r->run, &cost) != KEVO_OK)
            cost = 0;
        if (cost >= r->o->cost_cap)
            return "cost";
    }
    return NULL;
}

/* Set r->reason (once) from should_stop, remembering where for the report's "stop". */
static void check_stop(struct runctx *r, int waiting)
{
    if (r->reason || !(r->reason = should_stop(r, waiting)))
        return;
    r->stop_step = r->step;
    r->stop_waiting = waiting;
}

/* Keep PER_SLOT jobs per slot queued while the search goes on. */
static enum kevo_status fill(struct runctx *r)
{
    int llm = r->llm_outstanding;   /* room for their candidates */
    while (!r->reason && !r->exhausted && r->inflight < PER_SLOT * r->n_slots &&
           r->n_done + r->inflight + llm < r->budget) {
        struct job *j = NULL;
        enum kevo_status st = propose(r, &j);
        if (st == KEVO_ERR_NOTFOUND) {   /* nothing new now; results in flight may change that */
            r->exhausted = r->inflight == 0 && r->llm_outstanding == 0;
            break;
        }
        if (st)
            return st;
        kevo_run_q_push(&r->jobs, j);
        r->inflight++;
    }
    return KEVO_OK;
}

/* One job from the done queue (or, replaying, from the original's log) is one step. */
static enum kevo_status take_step(struct runctx *r, struct job *j)
{
    enum kevo_status st;

    r->cur_step = ++r->step;
    if (j->llm) {
        r->llm_outstanding--;
        st = kevo_run_llm_handle(r, j);
    } else {
        r->inflight--;
        st = j->st ? kevo_run_fail(r, j->st, "%s", j->msg ? j->msg : kevo_status_name(j->st))
                   : handle(r, j);
    }
    r->cur_step = 0;
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
    double last = kevo_run_now();
    int changed = 1;

    while (!st) {
        if (changed) {
            st = kevo_run_llm_fill(r);
            if (!st)
                st = fill(r);
            changed = 0;
        }
        if (st || (r->inflight == 0 && r->llm_outstanding == 0))
            break;
        if (r->replay && r->stop && *r->stop) {   /* the user stopped the replay: at once */
            r->reason = "interrupted";   /* even after another reason: no gate, stopped */
            r->stop_step = r->step;
            r->stop_waiting = 1;
            break;
        }
        struct job *j = NULL;
        if (r->replay)
            st = kevo_replay_next(r, &j);
        else
            j = q_pop(&r->done, WAIT_TICK_S);
        if (st)
            break;
        if (!j) {
            check_stop(r, 1);
        } else {
            st = take_step(r, j);
            changed = 1;
        }
        if (kevo_run_now() - last >= WAIT_TICK_S) {
            kevo_run_event(r, status_json(r));
            last = kevo_run_now();
        }
    }
    if (!r->reason) {
        r->reason = r->exhausted ? "exhausted" : "budget";
        r->stop_step = r->step;
    }
    if (!st && r->replay && !(r->stop && *r->stop))   /* it must end where the original did */
        st = kevo_replay_done(r);
    return st;
}

/* ---- setup ---- */

enum kevo_status kevo_run_reference_candidate(const char *text, size_t len, char **out,
                                              size_t *out_len)
{
    struct kevo_buf b;
    const char *p = text, *end = text + len;
    enum kevo_status st = KEVO_OK;

    kevo_buf_init(&b, len + 4096);
    while (p < end && !st) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl + 1 : end, *kw;
        size_t kl;
        int dir = kevo_task_directive(p, (size_t)((nl ? nl : end) - p), &kw, &kl);
        if (dir && kl == 7 && !strncmp(kw, "holdout", 7)) {
            /* held-out sizes stay secret: this text reaches archives and prompts */
            st = kevo_buf_adds(&b, nl ? "//\n" : "//");
        } else if (dir && !(kl == 6 && !strncmp(kw, "launch", 6)) &&
                   !(kl == 4 && !strncmp(kw, "call", 4))) {
            const char *k = strstr(p, "kevo");   /* "// kevo size" becomes "// task: size" */
            st = kevo_buf_add(&b, p, (size_t)(k - p));
            if (!st)
                st = kevo_buf_adds(&b, "task:");
            if (!st)
                st = kevo_buf_add(&b, k + 4, (size_t)(e - k - 4));
        } else {
            st = kevo_buf_add(&b, p, (size_t)(e - p));
        }
        p = e;
    }
    if (st) {
        kevo_buf_free(&b);
        return st;
    }
    *out_len = b.len;
    *out = kevo_buf_take(&b);
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_run_default_archive(char *out, size_t n)
{
    const char *e = getenv("KEVO_ARCHIVE"), *x = getenv("XDG_DATA_HOME"), *h = getenv("HOME");
    int w;
    if (e && *e)
        w = snprintf(out, n, "%s", e);
    else if (x && *x == '/')
        w = snprintf(out, n, "%s/kevo/archive.db", x);
    else if (h && *h)
        w = snprintf(out, n, "%s/.local/share/kevo/archive.db", h);
    else
        return KEVO_ERR_NOTFOUND;
    return w > 0 && (size_t)w < n ? KEVO_OK : KEVO_ERR_TOOBIG;
}

/* The seed texts: the --seed files (or, resuming an empty run, the ones it started with),
 * else the reference as a candidate. Each is parsed here, before anything is created, so
 * a bad seed fails the command with its file, line and column. */
static enum kevo_status seed_genomes(struct runctx *r, struct kevo_genome **out, int *n_out)
{
    json_t *cfg_seeds = r->cfg ? json_object_get(r->cfg, "seeds") : NULL;
    int n_cfg = (int)json_array_size(cfg_seeds), from_cfg = !r->o->n_seeds && n_cfg > 0;
    int n = r->o->n_seeds ? r->o->n_seeds : from_cfg ? n_cfg : 1;
    struct kevo_genome *g = kevo_calloc((size_t)n, sizeof *g);
    enum kevo_status st = g ? KEVO_OK : KEVO_ERR_NOMEM;

    *out = g;
    *n_out = 0;
    for (int i = 0; i < n && !st; i++) {
        const char *path = r->o->n_seeds ? r->o->seeds[i]
                           : from_cfg ? json_string_value(json_array_get(cfg_seeds, (size_t)i))
                                      : r->task_path;
        char *text = NULL, *pmsg = NULL;
        size_t len = 0;

        if (!path)
            st = kevo_run_fail(r, KEVO_ERR_INVALID, "the run's seed %d has no path", i + 1);
        else if (r->o->n_seeds || from_cfg)
            st = kevo_fs_read_file(path, KEVO_TASK_MAX_FILE, &text, &len, &pmsg);
        else
            st = kevo_run_reference_candidate(r->task_text, r->task_len, &text, &len);
        if (st && pmsg) {
            st = kevo_run_fail(r, st, "%s", pmsg);
            kevo_free(pmsg);
            pmsg = NULL;
        }
        if (!st) {
            st = kevo_genome_from_text(r->task, path, text, len, &g[i], &pmsg);
            if (st)
                st = kevo_run_fail(r, st, "%s", pmsg ? pmsg : kevo_status_name(st));
            else
                (*n_out)++;
        }
        kevo_free(pmsg);
        kevo_free(text);
    }
    return st;
}

static void free_genomes(struct kevo_genome *g, int n)
{
    for (int i = 0; g && i < n; i++)
        kevo_genome_clear(&g[i]);
    kevo_free(g);
}

/* Record the seeds as pending candidates: fill() sends them within the budget. */
static enum kevo_status add_seeds(struct runctx *r, struct kevo_genome *g, int n)
{
    enum kevo_status st = KEVO_OK;
    int64_t *p = kevo_reallocarray(r->pending, (size_t)(r->n_pending + n) + 1, sizeof *p);

    if (!p)
        return KEVO_ERR_NOMEM;
    r->pending = p;
    for (int i = 0; i < n && !st; i++) {
        struct job *j = NULL;
        st = kevo_run_record(r, &g[i], "seed", -1, 0, 0, 0, i % kevo_search_islands(r->s), &j);
        if (st == KEVO_ERR_INVALID)   /* the same seed twice, or already in the run */
            st = KEVO_OK;
        if (j)
            r->pending[r->n_pending++] = j->id;
        kevo_run_job_free(j);
    }
    return st;
}

/* Time the reference once: its medians give every candidate's speedup. */
static enum kevo_status reference(struct runctx *r)
{
    struct kevo_eval_call c = { .task_path = r->task_path, .task_text = r->task_text,
                                .trials = r->o->eval.trials, .timed = 1,
                                .time_cap_s = r->o->eval.time_cap_s, .sol = r->sol };
    char *msg = NULL;
    enum kevo_status st = kevo_evalreq_call(r->pool, 0, &c, r->o->eval.deadline_s, &r->ref, &msg);

    if (st) {
        st = kevo_run_fail(r, st, "%s", msg ? msg : kevo_status_name(st));
        kevo_free(msg);
        return st;
    }
    r->busy_s += json_number_value(json_object_get(r->ref, "request_s"));
    if (strcmp(verdict_of(r->ref), "ok") != 0)
        return kevo_run_fail(r, KEVO_ERR_INVALID, "%s: the task's reference is not ok (%s): %s",
                    r->task_path, verdict_of(r->ref),
                    json_string_value(json_object_get(r->ref, "message")));
    kevo_run_reference_set(r);
    return KEVO_OK;
}

void kevo_run_reference_set(struct runctx *r)
{
    size_t i;
    json_t *w;

    json_array_foreach(json_object_get(r->ref, "workloads"), i, w) {
        int idx = (int)json_integer_value(json_object_get(w, "index"));
        if (idx >= 0 && idx < r->n_wl)
            r->ref_median[idx] =
                json_number_value(json_object_get(json_object_get(w, "time"), "median_s"));
    }
    kevo_run_event(r, json_pack("{s:s, s:I, s:O}", "event", "reference", "run", (json_int_t)r->run,
                       "workloads", json_object_get(r->ref, "workloads")));
}

/* Rebuild the search state of a resumed run from the archive: every ok candidate placed
 * again, operator statistics recounted, pending candidates queued to be sent again. */
static enum kevo_status rebuild(struct runctx *r)
{
    int64_t *ids = NULL;
    int n = 0;
    enum kevo_status st = kevo_archive_cand_ids(r->ar, r->run, KEVO_CAND_DONE, &ids, &n);

    for (int i = 0; i < n && !st; i++) {
        struct kevo_cand_rec c;
        memset(&c, 0, sizeof c);
        st = kevo_archive_cand_get(r->ar, ids[i], &c);
        if (st)
            break;
        int ok = c.verdict == KEVO_VERDICT_OK && c.score > 0;
        int op = op_index(r, c.op);
        kevo_search_op_proposed(r->s, op);
        kevo_search_op_result(r->s, op, ok, c.improved);
        r->n_done++;
        r->n_ok += ok;
        if (ok && c.cell >= 0 && kevo_search_place(r->s, c.island, c.cell, c.id, c.score))
            r->best_sol = c.sol_fraction;
        kevo_archive_cand_clear(&c);
    }
    kevo_free(ids);
    kevo_search_migrate(r->s);
    if (!st)
        st = kevo_archive_cand_ids(r->ar, r->run, KEVO_CAND_PENDING, &r->pending, &r->n_pending);
    return st ? kevo_run_fail(r, st, "reading run %lld back: %s", (long long)r->run,
                     kevo_archive_errmsg(r->ar))
              : KEVO_OK;
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
    if (r->replay) {
        st = kevo_replay_holdout(r, id, &j->result);
        if (st)
            kevo_run_job_free(j);
        else
            *out = j;
        return st;
    }
    kevo_run_q_push(&r->jobs, j);
    j = NULL;
    while (!j || j->llm) {   /* an LLM reply still on its way is dropped, not a result */
        kevo_run_job_free(j);
        j = q_pop(&r->done, -1);
    }
    *out = j;
    return KEVO_OK;
}

/* The best candidates in order until one passes the task's holdout workloads. */
static enum kevo_status holdout_gate(struct runctx *r, json_t *report)
{
    int tries = r->o->holdout_tries > 0 ? r->o->holdout_tries : DEFAULT_TRIES, n = 0;
    int64_t ids[64];
    json_t *rejected = json_array();
    enum kevo_status st;
    int has_holdout = 0;

    for (int w = 0; w < r->task->n_workloads; w++)
        has_holdout |= r->task->workloads[w].holdout;
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
        char *res = j->result ? json_dumps(j->result, JSON_COMPACT) : NULL;
        r->busy_s += json_number_value(json_object_get(j->result, "request_s"));
        st = j->st ? kevo_run_fail(r, j->st, "%s", j->msg ? j->msg : "holdout evaluation failed")
                   : kevo_archive_eval_add(r->ar, ids[i], "holdout", res ? res : "{}");
        const char *v = j->result ? verdict_of(j->result) : "crash";
        kevo_run_event(r, json_pack("{s:s, s:I, s:s}", "event", "holdout", "id", (json_int_t)ids[i],
                           "verdict", v));
        if (!st && strcmp(v, "ok") == 0)
            json_object_set_new(report, "final", json_pack("{s:I, s:s}", "id", (json_int_t)ids[i],
                                                           "holdout", "ok"));
        else if (!st)
            json_array_append_new(rejected, json_pack("{s:I, s:s, s:s?}", "id", (json_int_t)ids[i],
                                                      "verdict", v, "message",
                                                      json_string_value(json_object_get(
                                                          j->result, "message"))));
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
    kevo_archive_cand_clear(&c);
    return j;
}

static json_t *report_json(struct runctx *r)
{
    const struct kevo_elite *b = kevo_search_best(r->s);
    double el = kevo_run_now() - r->t0;
    json_t *isl = json_array();

    for (int i = 0; i < kevo_search_islands(r->s); i++)
        json_array_append_new(isl, json_pack("{s:i, s:i}", "island", i, "occupied_cells",
                                             kevo_search_occupied(r->s, i)));
    /* with the reference, the calibration and the workers: what a replay needs */
    return json_pack("{s:I, s:s, s:s, s:s, s:{s:s, s:I, s:b}, s:I, s:I, s:o, s:o, s:f, s:f, s:f,"
                     " s:o, s:o, s:i, s:O}", "run",
                     (json_int_t)r->run, "task", r->task->name, "path", r->task_path, "reason",
                     r->reason ? r->reason : "?", "stop", "reason", r->reason ? r->reason : "?",
                     "step", (json_int_t)r->stop_step, "waiting", r->stop_waiting,
                     "evaluations", (json_int_t)r->n_done, "ok",
                     (json_int_t)r->n_ok, "best", best_json(r, b ? b->id : 0), "reference",
                     r->ref ? json_incref(json_object_get(r->ref, "workloads")) : json_null(),
                     "elapsed_s", el, "worker_busy_s", r->busy_s, "controller_overhead",
                     el > 0 ? 1.0 - r->busy_s / (el * r->n_slots) : 0.0, "islands", isl,
                     "operators", kevo_search_op_json(r->s), "workers", r->n_slots,
                     "calibration", r->calib ? r->calib : json_null());
}

/* ---- entry ---- */

void kevo_run_opts_default(struct kevo_run_opts *o)
{
    memset(o, 0, sizeof *o);
    kevo_eval_opts_default(&o->eval);
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

/* The task: from the file for a new run, from the archive (as it was) for a resume. */
static enum kevo_status load_task(struct runctx *r, const char *path)
{
    char *m = NULL;
    enum kevo_status st = KEVO_OK;

    if (r->o->replay) {
        st = kevo_replay_open(r);
        if (st)
            return st;
    } else if (r->o->resume) {
        struct kevo_run_rec rr;
        memset(&rr, 0, sizeof rr);
        st = kevo_archive_run_get(r->ar, r->o->resume, &rr);
        if (st)
            return kevo_run_fail(r, st, "run %lld: %s", (long long)r->o->resume, kevo_archive_errmsg(r->ar));
        st = kevo_archive_source_get(r->ar, rr.task_hash, &r->task_text, &r->task_len);
        r->cfg = json_loads(rr.config_json ? rr.config_json : "{}", 0, NULL);
        r->run = rr.id;
        r->path_owned = kevo_strdup(rr.task_path ? rr.task_path : "task.cu");
        r->task_path = r->path_owned;
        kevo_archive_run_clear(&rr);
        if (!st && (!r->cfg || !r->path_owned))
            st = KEVO_ERR_NOMEM;
        if (st)
            return kevo_run_fail(r, st, "run %lld: its task or config cannot be read back from the "
                        "archive", (long long)r->o->resume);
        if (json_integer_value(json_object_get(r->cfg, "replay_of")))
            return kevo_run_fail(r, KEVO_ERR_INVALID, "run %lld is a replay of run %lld; a replay "
                                 "is not resumed (replay run %lld again)", (long long)r->o->resume,
                                 (long long)json_integer_value(json_object_get(r->cfg, "replay_of")),
                                 (long long)json_integer_value(json_object_get(r->cfg, "replay_of")));
    } else {
        r->task_path = path;
        st = kevo_fs_read_file(path, KEVO_TASK_MAX_FILE, &r->task_text, &r->task_len, &m);
        if (st) {
            st = kevo_run_fail(r, st, "%s", m ? m : kevo_status_name(st));
            kevo_free(m);
            return st;
        }
    }
    st = kevo_task_parse(r->task_path, r->task_text, r->task_len, &r->task, &m);
    if (st)
        st = kevo_run_fail(r, st, "%s", m ? m : kevo_status_name(st));
    kevo_free(m);
    return st;
}

/* An option of this session, else the resumed run's, else the default. */
static int64_t opt_i(const struct runctx *r, int64_t v, const char *key, int64_t dflt)
{
    int64_t c = r->cfg ? json_integer_value(json_object_get(r->cfg, key)) : 0;
    return v ? v : c ? c : dflt;
}

static enum kevo_status open_workers(struct runctx *r)
{
    const struct kevo_run_opts *o = r->o;
    struct kevo_pool_opts po = { 0 };
    int dev = o->eval.device;
    char *m = NULL;
    json_t *calib = NULL;
    struct kevo_sol_figures f;

    if (o->n_gpus > MAX_SLOTS)
        return kevo_run_fail(r, KEVO_ERR_INVALID, "at most %d devices", MAX_SLOTS);
    po.backend = r->backend;
    po.n_devices = o->n_gpus > 0 ? o->n_gpus : 1;
    po.devices = o->n_gpus > 0 ? o->gpus : &dev;
    po.exe = getenv("KEVO_WORKER_EXE");
    po.start_timeout_s = 60;
    double t0 = kevo_run_now();
    enum kevo_status st = kevo_pool_open(&po, &r->pool, &m);
    if (st) {
        st = kevo_run_fail(r, st, "cannot start %s workers: %s", r->backend, m ? m : "?");
        kevo_free(m);
        return st;
    }
    r->n_slots = kevo_pool_size(r->pool);
    st = kevo_evalreq_calibrate(r->pool, 0, r->backend, 0, CALIBRATE_DEADLINE_S, &calib, &m);
    /* every worker starts at once (its device init is the worker's time, not ours) */
    r->busy_s += (kevo_run_now() - t0) * kevo_pool_size(r->pool);
    if (st) {
        st = kevo_run_fail(r, st, "%s", m ? m : "calibration failed");
        kevo_free(m);
        return st;
    }
    kevo_sol_figures_from_json(calib, &f);
    r->calib = calib;
    r->sol = kevo_sol_figures_to_json(&f);
    return r->sol ? KEVO_OK : KEVO_ERR_NOMEM;
}

static enum kevo_status new_search(struct runctx *r)
{
    struct kevo_search_cfg sc;
    int64_t n = 0, nd = 0, nok = 0;

    kevo_search_cfg_default(&sc);
    sc.n_islands = (int)opt_i(r, r->o->n_islands, "islands", 2);
    /* reproducible per run, and a resumed session does not replay the first one's draws */
    if (r->run && kevo_archive_counts(r->ar, r->run, &n, &nd, &nok) != KEVO_OK)
        n = 0;   /* only the seed's mix is lost */
    sc.seed = (uint64_t)opt_i(r, (int64_t)r->o->rng_seed, "rng_seed", (int64_t)sc.seed) ^
              (uint64_t)n * 0x9E3779B97F4A7C15ull;
    enum kevo_status st = kevo_search_new(&sc, &r->s);
    if (st)
        return kevo_run_fail(r, st, "bad search configuration (islands 1..%d)", KEVO_MAX_ISLANDS);
    r->ops = kevo_ops_builtin(&r->n_ops);
    for (int i = 0; i < r->n_ops; i++)
        kevo_search_op_register(r->s, i, r->ops[i]->name, r->ops[i]->prior);
    return KEVO_OK;
}

/* This session's options, with what a resumed run was started with filling the gaps. */
static void effective_opts(struct runctx *r)
{
    json_t *c = r->cfg, *g = json_object_get(c, "gpus");
    const char *b = json_string_value(json_object_get(c, "backend"));

    r->eff = *r->o;
    r->o = &r->eff;
    if (!c)
        return;
    if (!r->eff.target)
        r->eff.target = json_number_value(json_object_get(c, "target"));
    if (!r->eff.cost_cap)
        r->eff.cost_cap = json_number_value(json_object_get(c, "cost_cap"));
    if (!r->eff.eval.time_cap_s)
        r->eff.eval.time_cap_s = json_number_value(json_object_get(c, "time_cap_s"));
    if (json_integer_value(json_object_get(c, "trials")) >= 3)
        r->eff.eval.trials = (int)json_integer_value(json_object_get(c, "trials"));
    if (r->eff.eval.backend == KEVO_BACKEND_AUTO && b)
        r->eff.eval.backend = !strcmp(b, "cpu") ? KEVO_BACKEND_CPU : KEVO_BACKEND_CUDA;
    if (!r->eff.n_gpus && json_array_size(g) && json_array_size(g) <= MAX_SLOTS) {
        for (size_t i = 0; i < json_array_size(g); i++)
            r->gpus[i] = (int)json_integer_value(json_array_get(g, i));
        r->eff.n_gpus = (int)json_array_size(g);
        r->eff.gpus = r->gpus;
    }
    if (!r->eff.n_models)
        kevo_run_cfg_models(r);
    if (!r->eff.llm_concurrency)
        r->eff.llm_concurrency = (int)json_integer_value(json_object_get(c, "llm_concurrency"));
}

/* The models of the run's config (borrowed from r->cfg) into r->eff. */
void kevo_run_cfg_models(struct runctx *r)
{
    json_t *m = json_object_get(r->cfg, "models");
    size_t n = json_array_size(m);
    r->eff.n_models = 0;
    r->eff.models = NULL;
    if (!n || !(r->cfg_models = kevo_calloc(n, sizeof *r->cfg_models)))
        return;
    for (size_t i = 0; i < n; i++)
        if (json_string_value(json_array_get(m, i)))
            r->cfg_models[r->eff.n_models++] = json_string_value(json_array_get(m, i));
    r->eff.models = r->cfg_models;
}

static enum kevo_status setup(struct runctx *r, const char *task_path,
                              struct kevo_genome **seeds, int *n_seeds)
{
    const struct kevo_run_opts *o;
    enum kevo_status st = open_archive(r, r->o->archive);

    if (!st)
        st = load_task(r, task_path);
    if (st)
        return st;
    if (r->o->replay)
        st = kevo_replay_opts(r);
    else
        effective_opts(r);
    o = r->o;
    if (!st)
        st = new_search(r);   /* checks the search options before the run exists */
    if (!st && !o->resume && !o->replay)
        st = seed_genomes(r, seeds, n_seeds);
    if (!st)
        st = kevo_run_llm_prepare(r);
    if (st)
        return st;
    r->backend = o->eval.backend == KEVO_BACKEND_CPU ? "cpu"
                 : o->eval.backend == KEVO_BACKEND_CUDA ? "cuda"
                 : r->task->lang == KEVO_LANG_C ? "cpu" : "cuda";
    if (!o->resume) {
        json_t *cfg = config_json(o, r->backend);
        if (o->replay)
            json_object_set_new(cfg, "replay_of", json_integer(o->replay));
        if (r->n_models)
            json_object_set_new(cfg, "prices_used", kevo_run_llm_prices(r));
        char *cs = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
        st = cs ? kevo_archive_run_create(r->ar, r->task->name, r->task_path, r->task_text,
                                          r->task_len, cs, &r->run)
                : KEVO_ERR_NOMEM;
        kevo_free(cs);
        json_decref(cfg);
        if (st)
            return kevo_run_fail(r, st, "creating the run: %s", kevo_archive_errmsg(r->ar));
        r->running = 1;
    }
    r->budget = opt_i(r, o->budget, "budget", DEFAULT_BUDGET);
    r->stagnation = opt_i(r, o->stagnation, "stagnation", 0);
    if (r->stagnation <= 0)
        r->stagnation = r->budget / 4 > 24 ? r->budget / 4 : 24;
    r->n_wl = r->task->n_workloads;
    r->ref_median = kevo_calloc((size_t)r->n_wl + 1, sizeof *r->ref_median);
    if (!r->ref_median)
        return KEVO_ERR_NOMEM;
    st = o->replay ? kevo_replay_setup(r) : open_workers(r);
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
    kevo_run_llm_stop(r);   /* its threads push into r->done: stop them first */
    for (struct job *j; (j = q_pop(&r->jobs, 0)) != NULL;)
        kevo_run_job_free(j);   /* not sent: they stay pending in the archive */
    q_close(&r->jobs);
    for (int i = 0; i < r->n_threads; i++)
        pthread_join(r->threads[i], NULL);
    q_destroy(&r->jobs);
    q_destroy(&r->done);
    kevo_pool_free(r->pool);
    for (int i = 0; i < GENOME_CACHE; i++)
        kevo_genome_clear(&r->cache[i].g);
    kevo_search_free(r->s);
    kevo_archive_close(r->ar);
    kevo_task_free(r->task);
    kevo_free(r->task_text);
    kevo_free(r->path_owned);
    kevo_free(r->ref_median);
    kevo_free(r->pending);
    kevo_replay_free(r->replay);
    kevo_free(r->cfg_models);
    json_decref(r->cfg);
    json_decref(r->calib);
    json_decref(r->sol);
    json_decref(r->ref);
    kevo_buf_free(&r->msg);
}

enum kevo_status kevo_run(const char *task_path, const struct kevo_run_opts *o,
                          kevo_run_event_fn ev, void *user, volatile int *stop, int64_t *run_id,
                          char **out_json, char **out_msg)
{
    struct runctx r;
    json_t *rep = NULL;
    struct kevo_genome *seeds = NULL;
    int n_seeds = 0;
    enum kevo_status st;

    memset(&r, 0, sizeof r);
    kevo_buf_init(&r.msg, 1 << 16);
    q_init(&r.jobs);
    q_init(&r.done);
    r.o = o;
    r.ev = ev;
    r.user = user;
    r.stop = stop;
    r.t0 = kevo_run_now();
    *out_json = NULL;
    *out_msg = NULL;
    st = setup(&r, task_path, &seeds, &n_seeds);
    if (run_id)
        *run_id = r.run;
    if (!st && !o->replay)   /* a replay has the original's results: no workers */
        st = start_threads(&r);
    if (!st && !o->replay)
        st = reference(&r);
    if (!st && o->resume)
        st = rebuild(&r);
    if (!st && o->resume && !r.n_done && !r.n_pending)   /* it stopped before its seeds */
        st = seed_genomes(&r, &seeds, &n_seeds);
    if (!st && o->replay)
        st = kevo_replay_seeds(&r);
    else if (!st && n_seeds)
        st = add_seeds(&r, seeds, n_seeds);
    if (!st) {
        kevo_run_event(&r, json_pack("{s:s, s:I, s:s, s:s, s:I, s:i, s:b, s:I}", "event", "start",
                            "run", (json_int_t)r.run, "task", r.task->name, "backend", r.backend,
                            "budget", (json_int_t)r.budget, "workers", r.n_slots, "resumed",
                            o->resume != 0, "replay_of", (json_int_t)o->replay));
        st = search_loop(&r);
    }
    if (!st) {
        rep = report_json(&r);
        if (strcmp(r.reason, "interrupted") != 0)
            st = holdout_gate(&r, rep);
        double el = kevo_run_now() - r.t0;   /* the whole run, the gate included */
        json_object_set_new(rep, "elapsed_s", json_real(el));
        json_object_set_new(rep, "worker_busy_s", json_real(r.busy_s));
        json_object_set_new(rep, "controller_overhead",
                            json_real(el > 0 ? 1.0 - r.busy_s / (el * r.n_slots) : 0.0));
        double spent = 0;   /* as recorded: a replay spends nothing */
        if (r.llm && kevo_archive_llm_cost(r.ar, r.run, &spent) == KEVO_OK)
            json_object_set_new(rep, "llm_spent", json_real(spent));
    }
    enum kevo_status diverged = KEVO_OK;
    if (!st && r.replay && !(stop && *stop))   /* not when the user stopped the replay */
        diverged = kevo_replay_compare(&r, rep);
    if (!st) {
        char *s = json_dumps(rep, JSON_INDENT(1));
        enum kevo_run_status rs = strcmp(r.reason, "interrupted") == 0 ? KEVO_RUN_STOPPED
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
    free_genomes(seeds, n_seeds);
    teardown(&r);
    return st;
}

/*
 * steps_live - the live source of a run's steps (steps.h): a pool of worker processes,
 * one thread per slot sending it jobs and waiting, and the LLM threads (run_llm.c) whose
 * finished calls arrive here. Whatever finishes first is the next step; the controller
 * records every step's number, which is what makes a live run replayable.
 *
 * Also what starts a live run: its task from the file (a new run) or the archive (a
 * resumed one), this session's options over the resumed run's, the workers and their
 * calibration, the reference's timed result, and the first candidates (this command's
 * seeds, or a resumed run's pending candidates after its state is rebuilt).
 *
 * Every proposal is written to the archive (pending) before it is sent and every verdict
 * as soon as it arrives, so a run killed at any moment resumes with nothing lost and
 * nothing evaluated twice. The queue keeps two jobs per slot so a worker never waits for
 * a proposal (run.c, fill).
 *
 * With --mpi (r->o->mpi) the pool also has the slots of the other MPI ranks (relay.h,
 * docs/cluster.md): their threads are like the others. When a rank is lost, the job its
 * slot was evaluating goes back to the queue for another slot and that slot's thread ends;
 * the run fails only when no slot is left. Each result records where it ran
 * ("evaluated_by": rank, device, host).
 */
#include "ctl/steps.h"

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/proc.h"
#include "ctl/evalreq.h"
#include "ctl/mpi_io.h"
#include "ctl/pool.h"
#include "ctl/run.h"
#include "core/result.h"
#include "core/sol.h"

#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CALIBRATE_DEADLINE_S 600.0
#define WORKER_START_S       60.0    /* a worker's first ping */

struct queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *head, *tail;
    int closed;
};

/* The live source's state (r->steps_ctx). */
struct live {
    struct kevo_pool *pool;
    struct kevo_relay_hub *hub;   /* the other MPI ranks (borrowed from r->o->mpi); NULL
                                     without --mpi */
    struct queue jobs, done;
    pthread_t *threads;           /* one per slot */
    int n_threads;
    atomic_int n_alive;           /* slots whose rank is not lost */
};

static struct live *live_of(struct runctx *r)
{
    return r->steps_ctx;
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

static void q_push(struct queue *q, struct job *j)
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

/* j goes first: it was taken already, by a slot that lost its rank. */
static void q_push_front(struct queue *q, struct job *j)
{
    pthread_mutex_lock(&q->mu);
    j->next = q->head;
    q->head = j;
    if (!q->tail)
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

/* ---- worker threads ---- */

struct slot_arg {
    struct runctx *r;
    int slot;
};

/* Where slot ran a result: "evaluated_by" {"rank", "device", "host"} (stored with it). */
static void note_where(struct kevo_pool *pool, int slot, json_t *result)
{
    const char *host = NULL;
    int rank = 0, device = 0;

    if (result && kevo_pool_where(pool, slot, &rank, &device, &host) == KEVO_OK)
        json_object_set_new(result, "evaluated_by", json_pack("{s:i, s:i, s:s}", "rank", rank,
                                                              "device", device, "host", host));
}

/* j's slot lost its rank before j was evaluated: j goes back to the queue for another
 * slot; when none is left, it ends the run (its status stays KEVO_ERR_LOST). */
static void requeue(struct live *L, struct job *j)
{
    kevo_free(j->msg);
    j->msg = NULL;
    if (atomic_fetch_sub(&L->n_alive, 1) > 1) {
        j->st = KEVO_OK;
        q_push_front(&L->jobs, j);
        return;
    }
    j->msg = kevo_strdup("every worker was lost: the MPI ranks that hosted them died or "
                         "stopped answering");
    q_push(&L->done, j);
}

static void *slot_main(void *p)
{
    struct slot_arg *a = p;
    struct runctx *r = a->r;
    struct live *L = live_of(r);
    struct job *j;

    while ((j = q_pop(&L->jobs, -1)) != NULL) {
        double below = 0;
        int profile = !j->holdout && kevo_run_profile_due(r, &below);
        struct kevo_eval_call c = {
            .task_path = r->set.task_path, .task_text = r->set.task_text, .cand_path = j->path,
            .cand_text = j->text, .trials = r->o->eval.trials, .holdout = j->holdout,
            .timed = !j->holdout, .time_reference = 0, .time_cap_s = r->o->eval.time_cap_s,
            .sol = r->set.sol, .profile = profile, .profile_below_s = below,
        };
        j->st = kevo_evalreq_call(L->pool, a->slot, &c, r->o->eval.deadline_s, &j->result,
                                  &j->msg);
        if (j->st == KEVO_ERR_LOST) {   /* this slot is gone for good */
            requeue(L, j);
            break;
        }
        note_where(L->pool, a->slot, j->result);
        q_push(&L->done, j);
    }
    kevo_free(a);
    return NULL;
}

static enum kevo_status start_threads(struct runctx *r)
{
    struct live *L = live_of(r);

    L->threads = kevo_calloc((size_t)r->set.n_slots, sizeof *L->threads);
    if (!L->threads)
        return KEVO_ERR_NOMEM;
    atomic_store(&L->n_alive, r->set.n_slots);
    for (int i = 0; i < r->set.n_slots; i++) {
        struct slot_arg *a = kevo_malloc(sizeof *a);
        if (!a)
            return KEVO_ERR_NOMEM;
        a->r = r;
        a->slot = i;
        int rc = pthread_create(&L->threads[i], NULL, slot_main, a);
        if (rc != 0) {
            kevo_free(a);
            return kevo_run_fail(r, KEVO_ERR_SYSTEM, "cannot start a worker thread: %s",
                                 strerror(rc));
        }
        L->n_threads++;
    }
    return KEVO_OK;
}

/* The task: from the file for a new run (r->set.task_path), from the archive (as it was)
 * for a resume. */
static enum kevo_status load_task(struct runctx *r)
{
    char *m = NULL;
    enum kevo_status st = KEVO_OK;

    if (r->o->resume) {
        struct kevo_run_rec rr;
        memset(&rr, 0, sizeof rr);
        st = kevo_archive_run_get(r->ar, r->o->resume, &rr);
        if (st)
            return kevo_run_fail(r, st, "run %lld: %s", (long long)r->o->resume, kevo_archive_errmsg(r->ar));
        st = kevo_archive_source_get(r->ar, rr.task_hash, &r->set.task_text, &r->set.task_len);
        r->set.cfg = json_loads(rr.config_json ? rr.config_json : "{}", 0, NULL);
        r->run = rr.id;
        r->set.path_owned = kevo_strdup(rr.task_path ? rr.task_path : "task.cu");
        r->set.task_path = r->set.path_owned;
        kevo_archive_run_clear(&rr);
        if (!st && (!r->set.cfg || !r->set.path_owned))
            st = KEVO_ERR_NOMEM;
        if (st)
            return kevo_run_fail(r, st, "run %lld: its task or config cannot be read back from the "
                        "archive", (long long)r->o->resume);
        if (json_integer_value(json_object_get(r->set.cfg, "replay_of")))
            return kevo_run_fail(r, KEVO_ERR_INVALID, "run %lld is a replay of run %lld; a replay "
                                 "is not resumed (replay run %lld again)", (long long)r->o->resume,
                                 (long long)json_integer_value(json_object_get(r->set.cfg, "replay_of")),
                                 (long long)json_integer_value(json_object_get(r->set.cfg, "replay_of")));
    } else {
        st = kevo_fs_read_file(r->set.task_path, KEVO_TASK_MAX_FILE, &r->set.task_text, &r->set.task_len, &m);
        if (st) {
            st = kevo_run_fail(r, st, "%s", m ? m : kevo_status_name(st));
            kevo_free(m);
            return st;
        }
    }
    return KEVO_OK;
}

/* This session's options, with what a resumed run was started with filling the gaps. */
static void effective_opts(struct runctx *r)
{
    json_t *c = r->set.cfg, *g = json_object_get(c, "gpus");
    const char *b = json_string_value(json_object_get(c, "backend"));

    r->set.eff = *r->o;
    r->o = &r->set.eff;
    if (!c)
        return;
    if (!r->set.eff.target)
        r->set.eff.target = json_number_value(json_object_get(c, "target"));
    if (!r->set.eff.cost_cap)
        r->set.eff.cost_cap = json_number_value(json_object_get(c, "cost_cap"));
    if (!r->set.eff.eval.time_cap_s)
        r->set.eff.eval.time_cap_s = json_number_value(json_object_get(c, "time_cap_s"));
    if (json_integer_value(json_object_get(c, "trials")) >= 3)
        r->set.eff.eval.trials = (int)json_integer_value(json_object_get(c, "trials"));
    if (r->set.eff.eval.backend == KEVO_BACKEND_AUTO && b)
        r->set.eff.eval.backend = !strcmp(b, "cpu") ? KEVO_BACKEND_CPU : KEVO_BACKEND_CUDA;
    if (!r->set.eff.n_gpus && json_array_size(g) && json_array_size(g) <= MAX_SLOTS) {
        for (size_t i = 0; i < json_array_size(g); i++)
            r->set.gpus[i] = (int)json_integer_value(json_array_get(g, i));
        r->set.eff.n_gpus = (int)json_array_size(g);
        r->set.eff.gpus = r->set.gpus;
    }
    if (!r->set.eff.n_models)
        kevo_run_cfg_models(r);
    if (!r->set.eff.llm_concurrency)
        r->set.eff.llm_concurrency = (int)json_integer_value(json_object_get(c, "llm_concurrency"));
    if (!r->set.eff.offline)   /* an air-gapped run stays offline (docs/llm.md) */
        r->set.eff.offline = json_is_true(json_object_get(c, "offline"));
}

/* The suite's exemplar for the run's task into out: DATA/examples/seeds/NAME when the task
 * file's text is that of the suite's task DATA/tasks/x/NAME, so the exemplar answers exactly
 * this contract (a user's own task of the same name gets none). 1 when there is one. */
static int suite_exemplar(const struct runctx *r, char *out, size_t n)
{
    const char *slash = strrchr(r->set.task_path, '/');
    const char *name = slash ? slash + 1 : r->set.task_path;
    char pat[PATH_MAX];
    glob_t gl;
    int found = 0;

    snprintf(out, n, "%s/examples/seeds/%s", kevo_data_dir(NULL), name);
    snprintf(pat, sizeof pat, "%s/tasks/*/%s", kevo_data_dir(NULL), name);
    if (access(out, R_OK) != 0 || glob(pat, 0, NULL, &gl) != 0)
        return 0;
    for (size_t i = 0; i < gl.gl_pathc && !found; i++) {
        char *text = NULL, *msg = NULL;
        size_t len = 0;
        if (!kevo_fs_read_file(gl.gl_pathv[i], KEVO_TASK_MAX_FILE, &text, &len, &msg))
            found = len == r->set.task_len && !memcmp(text, r->set.task_text, len);
        kevo_free(text);
        kevo_free(msg);
    }
    globfree(&gl);
    return found;
}

/* The seed texts: the --seed files (or, resuming an empty run, the ones it started with),
 * else the reference as a candidate, and the suite's exemplar for a suite task. Each is
 * parsed here, before anything is created, so a bad seed fails the command with its file,
 * line and column. */
static enum kevo_status seed_genomes(struct runctx *r, struct kevo_genome **out, int *n_out)
{
    json_t *cfg_seeds = r->set.cfg ? json_object_get(r->set.cfg, "seeds") : NULL;
    int n_cfg = (int)json_array_size(cfg_seeds), from_cfg = !r->o->n_seeds && n_cfg > 0;
    char ex[PATH_MAX];
    int use_ex = !r->o->n_seeds && !from_cfg && !r->o->no_exemplar &&
                 suite_exemplar(r, ex, sizeof ex);
    int n = r->o->n_seeds ? r->o->n_seeds : from_cfg ? n_cfg : 1 + use_ex;
    struct kevo_genome *g = kevo_calloc((size_t)n, sizeof *g);
    enum kevo_status st = g ? KEVO_OK : KEVO_ERR_NOMEM;

    *out = g;
    *n_out = 0;
    for (int i = 0; i < n && !st; i++) {
        const char *path = r->o->n_seeds ? r->o->seeds[i]
                           : from_cfg ? json_string_value(json_array_get(cfg_seeds, (size_t)i))
                           : i == 1 ? ex : r->set.task_path;
        char *text = NULL, *pmsg = NULL;
        size_t len = 0;

        if (i == 1 && use_ex)
            KEVO_INFO("seeding from the suite's exemplar %s as well (--no-exemplar: the "
                      "reference alone)", ex);
        if (!path)
            st = kevo_run_fail(r, KEVO_ERR_INVALID, "the run's seed %d has no path", i + 1);
        else if (r->o->n_seeds || from_cfg || (i == 1 && use_ex))
            st = kevo_fs_read_file(path, KEVO_TASK_MAX_FILE, &text, &len, &pmsg);
        else
            st = kevo_run_reference_candidate(r->set.task_text, r->set.task_len, &text, &len);
        if (st && pmsg) {
            st = kevo_run_fail(r, st, "%s", pmsg);
            kevo_free(pmsg);
            pmsg = NULL;
        }
        if (!st) {
            st = kevo_genome_from_text(r->set.task, path, text, len, &g[i], &pmsg);
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

/* Record the seeds as pending candidates: fill() sends them within the budget. */
static enum kevo_status add_seeds(struct runctx *r, struct kevo_genome *g, int n)
{
    enum kevo_status st = KEVO_OK;
    int64_t *p = kevo_reallocarray(r->loop.pending, (size_t)(r->loop.n_pending + n) + 1, sizeof *p);

    if (!p)
        return KEVO_ERR_NOMEM;
    r->loop.pending = p;
    for (int i = 0; i < n && !st; i++) {
        struct job *j = NULL;
        st = kevo_run_record(r, &g[i], "seed", -1, 0, 0, 0, i % kevo_search_islands(r->loop.s), &j);
        if (st == KEVO_ERR_INVALID)   /* the same seed twice, or already in the run */
            st = KEVO_OK;
        if (j)
            r->loop.pending[r->loop.n_pending++] = j->id;
        kevo_run_job_free(j);
    }
    return st;
}


/* ---- the workers ---- */

/* The devices of the ranks' slots differ: their times are compared all the same. */
static void warn_mixed(json_t *ranks)
{
    const char *first = NULL;
    size_t i, k;
    json_t *e, *s;

    json_array_foreach(ranks, i, e) {
        json_array_foreach(json_object_get(e, "slots"), k, s) {
            const char *name = json_string_value(json_object_get(s, "name"));
            if (!first)
                first = name;
            if (name && first && strcmp(name, first) != 0) {
                KEVO_WARN("the MPI ranks have different devices (%s, %s): every candidate's "
                          "time is compared with the reference's on rank 0 all the same",
                          first, name);
                return;
            }
        }
    }
}

/*
 * --mpi: the other ranks' slots as the pool's remote ones (*out, kevo_free; *n_out), from
 * the hub of r->o->mpi, started here with this run's backend and devices.
 */
static enum kevo_status open_ranks(struct runctx *r, const struct kevo_pool_opts *po,
                                   struct kevo_pool_remote **out, int *n_out)
{
    struct live *L = live_of(r);
    struct kevo_relay_hub_opts ho = { .backend = po->backend, .devices = po->devices,
                                      .n_devices = po->n_devices,
                                      .start_timeout_s = po->start_timeout_s };
    char *m = NULL;
    enum kevo_status st;
    int n;

    *out = NULL;
    *n_out = 0;
    if (!r->o->mpi)
        return KEVO_OK;
    st = kevo_mpi_hub(r->o->mpi, &ho, &L->hub, &m);
    if (st) {
        st = kevo_run_fail(r, st, "MPI: %s", m ? m : kevo_status_name(st));
        kevo_free(m);
        return st;
    }
    n = kevo_relay_hub_slots(L->hub);
    *out = kevo_calloc((size_t)n + 1, sizeof **out);
    if (!*out)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        kevo_relay_hub_slot(L->hub, i, &(*out)[i]);
    *n_out = n;
    return KEVO_OK;
}

/*
 * The pool. With the other ranks' slots, this rank's own workers must open their devices
 * too (ping does not): a controller on a host without them leaves the evaluating to the
 * other ranks.
 */
static enum kevo_status open_pool(struct runctx *r, struct kevo_pool_opts *po, char **out_msg)
{
    struct live *L = live_of(r);
    enum kevo_status st = kevo_pool_open(po, &L->pool, out_msg);
    char *name = NULL, *why = NULL;

    if (!po->n_remote || st == KEVO_ERR_NOMEM)
        return st;
    for (int i = 0; !st && i < po->n_devices; i++) {
        st = kevo_pool_probe(L->pool, i, po->start_timeout_s, &name, &why);
        kevo_free(name);
        name = NULL;
    }
    if (!st || st == KEVO_ERR_NOMEM) {
        kevo_free(why);
        return st;
    }
    KEVO_WARN("rank 0 evaluates nothing itself (%s): the other ranks' %d worker%s do",
              why ? why : *out_msg ? *out_msg : kevo_status_name(st), po->n_remote,
              po->n_remote == 1 ? "" : "s");
    kevo_free(why);
    kevo_free(*out_msg);
    *out_msg = NULL;
    kevo_pool_free(L->pool);
    L->pool = NULL;
    po->n_devices = 0;
    return kevo_pool_open(po, &L->pool, out_msg);
}

/* The "ranks" event of an MPI run: this rank's workers and the other ranks'. */
static void ranks_event(struct runctx *r, int n_local)
{
    struct live *L = live_of(r);
    struct kevo_proc_id me;
    json_t *ranks;

    if (!L->hub)
        return;
    kevo_proc_self(&me);
    ranks = kevo_relay_hub_ranks(L->hub);
    warn_mixed(ranks);
    kevo_run_event(r, json_pack("{s:s, s:I, s:{s:i, s:s, s:I, s:i}, s:o}", "event", "ranks",
                                "run", (json_int_t)r->run, "controller", "rank", 0, "host",
                                me.host, "pid", (json_int_t)me.pid, "workers", n_local,
                                "ranks", ranks));
}

static enum kevo_status open_workers(struct runctx *r)
{
    const struct kevo_run_opts *o = r->o;
    struct kevo_pool_opts po = { 0 };
    struct kevo_pool_remote *remote = NULL;
    int dev = o->eval.device;
    char *m = NULL;
    json_t *calib = NULL;
    struct kevo_sol_figures f;

    if (o->n_gpus > MAX_SLOTS)
        return kevo_run_fail(r, KEVO_ERR_INVALID, "at most %d devices", MAX_SLOTS);
    po.backend = r->set.backend;
    po.n_devices = o->n_gpus > 0 ? o->n_gpus : 1;
    po.devices = o->n_gpus > 0 ? o->gpus : &dev;
    po.exe = getenv("KEVO_WORKER_EXE");
    po.start_timeout_s = WORKER_START_S;
    double t0 = kevo_now();
    enum kevo_status st = open_ranks(r, &po, &remote, &po.n_remote);
    if (st) {
        kevo_free(remote);
        return st;
    }
    po.remote = remote;
    po.link = live_of(r)->hub ? kevo_relay_hub_link(live_of(r)->hub) : NULL;
    st = open_pool(r, &po, &m);
    kevo_free(remote);
    ranks_event(r, po.n_devices);
    if (st) {
        st = kevo_run_fail(r, st, "cannot start %s workers: %s", r->set.backend, m ? m : "?");
        kevo_free(m);
        return st;
    }
    r->set.n_slots = kevo_pool_size(live_of(r)->pool);
    st = kevo_evalreq_calibrate(live_of(r)->pool, 0, r->set.backend, 0, CALIBRATE_DEADLINE_S, &calib, &m);
    /* every worker starts at once (its device init is the worker's time, not ours) */
    r->loop.busy_s += (kevo_now() - t0) * kevo_pool_size(live_of(r)->pool);
    if (st) {
        st = kevo_run_fail(r, st, "%s", m ? m : "calibration failed");
        kevo_free(m);
        return st;
    }
    kevo_sol_figures_from_json(calib, &f);
    r->set.calib = calib;
    r->set.sol = kevo_sol_figures_to_json(&f);
    return r->set.sol ? KEVO_OK : KEVO_ERR_NOMEM;
}

/* Time the reference once: its medians give every candidate's speedup. */
static enum kevo_status reference(struct runctx *r)
{
    struct kevo_eval_call c = { .task_path = r->set.task_path, .task_text = r->set.task_text,
                                .trials = r->o->eval.trials, .timed = 1,
                                .time_cap_s = r->o->eval.time_cap_s, .sol = r->set.sol };
    char *msg = NULL;
    enum kevo_status st = kevo_evalreq_call(live_of(r)->pool, 0, &c, r->o->eval.deadline_s, &r->loop.ref, &msg);

    if (st) {
        st = kevo_run_fail(r, st, "%s", msg ? msg : kevo_status_name(st));
        kevo_free(msg);
        return st;
    }
    struct kevo_result rs;
    st = kevo_result_decode(r->loop.ref, &rs, &msg);
    if (st) {
        st = kevo_run_fail(r, st, "%s: the reference's result: %s", r->set.task_path,
                           msg ? msg : kevo_status_name(st));
        kevo_free(msg);
        return st;
    }
    r->loop.busy_s += isfinite(rs.request_s) ? rs.request_s : 0.0;
    if (rs.verdict != KEVO_VERDICT_OK)
        st = kevo_run_fail(r, KEVO_ERR_INVALID, "%s: the task's reference is not ok (%s): %s",
                           r->set.task_path, kevo_verdict_name(rs.verdict), rs.message);
    kevo_result_clear(&rs);
    if (!st)
        kevo_run_reference_set(r);
    return st;
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
        int op = kevo_run_op_index(r, c.op);
        kevo_search_op_proposed(r->loop.s, op);
        kevo_search_op_result(r->loop.s, op, ok, c.improved);
        r->loop.n_done++;
        r->loop.n_ok += ok;
        if (ok && c.cell >= 0 && kevo_search_place(r->loop.s, c.island, c.cell, c.id, c.score))
            r->loop.best_sol = c.sol_fraction;
        kevo_archive_cand_clear(&c);
    }
    kevo_free(ids);
    kevo_search_migrate(r->loop.s);
    if (!st)
        st = kevo_archive_cand_ids(r->ar, r->run, KEVO_CAND_PENDING, &r->loop.pending, &r->loop.n_pending);
    return st ? kevo_run_fail(r, st, "reading run %lld back: %s", (long long)r->run,
                     kevo_archive_errmsg(r->ar))
              : KEVO_OK;
}

/* ---- the source ---- */

static enum kevo_status live_open(struct runctx *r)
{
    struct live *L = kevo_calloc(1, sizeof *L);
    enum kevo_status st;

    if (!L)
        return KEVO_ERR_NOMEM;
    q_init(&L->jobs);
    q_init(&L->done);
    r->steps_ctx = L;
    st = load_task(r);
    if (!st)
        st = kevo_run_parse_task(r);
    if (!st)
        effective_opts(r);
    return st;
}

/* A new run's seeds are parsed before anything is created, so a bad seed fails the
 * command with its file, line and column. */
static enum kevo_status live_check(struct runctx *r)
{
    return r->o->resume ? KEVO_OK : seed_genomes(r, &r->set.seeds, &r->set.n_seeds);
}

static enum kevo_status live_begin(struct runctx *r)
{
    enum kevo_status st = start_threads(r);

    if (!st)
        st = reference(r);
    if (!st && r->o->resume)
        st = rebuild(r);
    if (!st && r->o->resume && !r->loop.n_done && !r->loop.n_pending)   /* it stopped before its seeds */
        st = seed_genomes(r, &r->set.seeds, &r->set.n_seeds);
    if (!st && r->set.n_seeds)
        st = add_seeds(r, r->set.seeds, r->set.n_seeds);
    return st;
}

static void live_send(struct runctx *r, struct job *j)
{
    q_push(&live_of(r)->jobs, j);
}

/* The MPI ranks lost since the last look, as "rank_lost" events (on the loop's thread). */
static void lost_events(struct runctx *r)
{
    json_t *news = kevo_relay_hub_news(live_of(r)->hub), *e;
    size_t i;

    json_array_foreach(news, i, e)
        kevo_run_event(r, json_pack("{s:s, s:I, s:O, s:O, s:O?, s:O}", "event", "rank_lost",
                                    "run", (json_int_t)r->run, "rank", json_object_get(e, "rank"),
                                    "host", json_object_get(e, "host"), "why",
                                    json_object_get(e, "why"), "lost_calls",
                                    json_object_get(e, "lost_calls")));
    json_decref(news);
}

static enum kevo_status live_next(struct runctx *r, double wait_s, struct job **out)
{
    *out = q_pop(&live_of(r)->done, wait_s);
    if (live_of(r)->hub)
        lost_events(r);
    return KEVO_OK;
}

/* The report's "ranks" of an MPI run: each rank's state and calls. */
static void live_report(struct runctx *r, json_t *report)
{
    if (live_of(r) && live_of(r)->hub)
        json_object_set_new(report, "ranks", kevo_relay_hub_ranks(live_of(r)->hub));
}

static void live_arrive(struct runctx *r, struct job *j)
{
    q_push(&live_of(r)->done, j);
}

/* The held-out evaluation goes to a worker like any other; the loop has ended, so the
 * next evaluation to come back is it. */
static enum kevo_status live_holdout(struct runctx *r, struct job *j, struct job **out)
{
    struct live *L = live_of(r);

    q_push(&L->jobs, j);
    j = NULL;
    while (!j || j->llm) {   /* an LLM reply still on its way is dropped, not a result */
        kevo_run_job_free(j);
        j = q_pop(&L->done, -1);
    }
    *out = j;
    return KEVO_OK;
}

static enum kevo_status live_book(struct runctx *r, struct kevo_llm_call *c,
                                  enum kevo_steps_book *out)
{
    (void)r;
    (void)c;
    *out = KEVO_STEPS_BOOK_LIVE;
    return KEVO_OK;
}

/* The LLM threads are stopped before (they push into done). */
static void live_close(struct runctx *r)
{
    struct live *L = live_of(r);

    if (!L)
        return;
    for (struct job *j; (j = q_pop(&L->jobs, 0)) != NULL;)
        kevo_run_job_free(j);   /* not sent: they stay pending in the archive */
    q_close(&L->jobs);
    for (int i = 0; i < L->n_threads; i++)
        pthread_join(L->threads[i], NULL);
    q_destroy(&L->jobs);
    q_destroy(&L->done);
    kevo_pool_free(L->pool);   /* the hub stays: kevo_mpi_close stops the ranks */
    kevo_free(L->threads);
    kevo_free(L);
    r->steps_ctx = NULL;
}

const struct kevo_steps_ops kevo_steps_live = {
    .name = "live",
    .recorded = 0,
    .open = live_open,
    .check = live_check,
    .start = open_workers,
    .begin = live_begin,
    .send = live_send,
    .next = live_next,
    .arrive = live_arrive,
    .holdout = live_holdout,
    .book = live_book,
    .report = live_report,
    .close = live_close,
};

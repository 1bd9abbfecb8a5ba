/*
 * run_int - what the files of `kevo run` share: run.c (the controller, the search loop,
 * the held-out gate) and run_llm.c (the LLM operators' side of the loop). Private to
 * them; the contract is kevo.h (kevo_run) and run.h.
 */
#ifndef KEVO_RUN_INT_H
#define KEVO_RUN_INT_H

#include "ctl/archive.h"
#include "base/buf.h"
#include "ctl/genome.h"
#include "kevo.h"
#include "ctl/llmops.h"
#include "ctl/ops.h"
#include "ctl/pool.h"
#include "ctl/search.h"
#include "core/task.h"

#include <jansson.h>
#include <pthread.h>

#define GENOME_CACHE 64
#define MAX_SLOTS 64
#define RECENT 64                  /* recent verdicts kept for prompts and the fix operator */

struct job {
    int64_t id;                    /* candidate id; 0 for the reference */
    int holdout;
    int op;                        /* operator index; -1 for seeds */
    int island;
    double parent_score;           /* of parent 1; 0 when none */
    struct kevo_genome g;          /* what is evaluated (empty for the reference) */
    char *text;                    /* kevo_genome_text(g) */
    char path[64];
    json_t *result;                /* the worker's result */
    enum kevo_status st;           /* kevo's own failure */
    char *msg;
    struct kevo_llm_call *llm;     /* set: a finished LLM call, not an evaluation */
    int model;                     /* the LLM model that wrote it; -1: none */
    struct job *next;
};

struct queue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *head, *tail;
    int closed;
};

struct cached_genome {
    int64_t id;
    struct kevo_genome g;
};

struct hashset {                   /* prompt hashes (a run asks hundreds, not millions) */
    char (*h)[KEVO_HASH_HEX];
    int n, cap;
};

struct recent {                    /* one recent verdict */
    int64_t id, parent;
    char op[32], verdict[32];
    double score;
    int fixed;                     /* already given to the fix operator */
};

struct runctx {
    const struct kevo_run_opts *o; /* &eff once the run's options are known */
    struct kevo_run_opts eff;      /* this session's options + the resumed run's */
    int gpus[MAX_SLOTS];
    const char *task_path;
    char *path_owned;              /* a resumed run's task path, from the archive */
    json_t *cfg;                   /* a resumed run's config */
    struct kevo_task *task;
    char *task_text;
    size_t task_len;
    struct kevo_archive *ar;
    int64_t run;
    struct kevo_pool *pool;
    int n_slots;
    const char *backend;
    json_t *calib, *sol;
    json_t *ref;                   /* the reference's timed result */
    double *ref_median;            /* per workload index; 0 when not timed */
    int n_wl;
    struct kevo_search *s;
    const struct kevo_operator *const *ops;
    int n_ops;
    struct queue jobs, done;
    pthread_t threads[MAX_SLOTS];
    int n_threads;
    double busy_s;                 /* seconds workers were working for the run: starting
                                      (device init), calibrating, evaluating */
    int inflight;
    int64_t *pending;              /* candidates to (re)send before proposing */
    int n_pending, i_pending;
    struct cached_genome cache[GENOME_CACHE];
    int cache_next;
    int64_t budget, stagnation, n_done, n_ok, since_best;
    double t0, best_sol;
    const char *reason;            /* why the search stopped */
    int exhausted;
    kevo_run_event_fn ev;
    void *user;
    volatile int *stop;
    struct kevo_buf msg;           /* kevo's own failure */
    /* the LLM operators (run_llm.c); llm NULL when the run has no models */
    struct kevo_llmops *llm;
    struct kevo_llm_model *models;
    int n_models;
    int op_base;                   /* the LLM ops' index in the search's operator table */
    struct recent recent[RECENT];
    int n_recent;
    int llm_refused;               /* the cost cap refused a call: no more are started */
    int llm_outstanding;           /* calls submitted and not yet handled by the controller */
    int llm_idle;                  /* calls since the last evaluation that brought nothing new */
    struct hashset llm_asked;      /* prompts asked in this session */
    struct hashset llm_dry;        /* prompts whose answer brought nothing new: not asked
                                      again in this session */
    struct hashset llm_unusable;   /* prompts that got an unusable reply (twice: dry) */
    int64_t llm_submitted;         /* calls submitted in this session (refused ones too) */
    int llm_failed;                /* calls in a row the provider failed */
    /* the step log: every job the controller takes from the done queue is one step */
    int64_t step;                  /* steps handled in this session */
    int64_t cur_step;              /* the step being handled; 0 between steps */
    int64_t stop_step;             /* r->reason was set after this step ... */
    int stop_waiting;              /* ... while waiting for the next one (1) or right
                                      after handling it (0) */
    struct kevo_replay *replay;    /* replay.c; NULL for a live run */
    const char **cfg_models;       /* the config's model specs (borrowed from cfg) */
    int running;                   /* this session created or resumed the run: a failure
                                      from here on marks it failed */
};


/* ---- run.c ---- */
double kevo_run_now(void);
void kevo_run_job_free(struct job *j);
void kevo_run_q_push(struct queue *q, struct job *j);
void kevo_run_event(struct runctx *r, json_t *e);             /* takes e */
enum kevo_status kevo_run_fail(struct runctx *r, enum kevo_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The genome of candidate id (cached; borrowed until the next call). */
KEVO_NODISCARD enum kevo_status kevo_run_genome_of(struct runctx *r, int64_t id,
                                                   const struct kevo_genome **out);
/* The models of the run's config (r->cfg) as this session's (r->eff). */
void kevo_run_cfg_models(struct runctx *r);
/* The reference's medians (r->ref) into r->ref_median, and its event. */
void kevo_run_reference_set(struct runctx *r);
/* A job for genome g (taken), recorded as a pending candidate; KEVO_ERR_INVALID when the
 * run already has it. */
KEVO_NODISCARD enum kevo_status kevo_run_record(struct runctx *r, struct kevo_genome *g,
                                                const char *op, int op_i, int64_t p1, int64_t p2,
                                                double p1_score, int island, struct job **out);

/* ---- replay.c: `kevo run --replay RUN` (docs/llm.md "Replay") ---- */
struct kevo_replay;
/* Load run o->replay: its task, config and report (refused with a message when it cannot
 * be replayed exactly); fills r->task_text, r->cfg, r->path_owned. */
KEVO_NODISCARD enum kevo_status kevo_replay_open(struct runctx *r);
void kevo_replay_free(struct kevo_replay *p);   /* NULL: no-op */
/* The options of the original run (this session's own are ignored). */
KEVO_NODISCARD enum kevo_status kevo_replay_opts(struct runctx *r);
/* What the original's workers gave before the search: calibration, reference, workers. */
KEVO_NODISCARD enum kevo_status kevo_replay_setup(struct runctx *r);
/* The original's seeds, recorded as pending candidates on their islands. */
KEVO_NODISCARD enum kevo_status kevo_replay_seeds(struct runctx *r);
/* The next step of the original's log as a job (taken), or *out NULL once, where the
 * original stopped while waiting; KEVO_ERR_DIVERGED (with r->msg) when the replay has
 * nothing the step can be matched to. */
KEVO_NODISCARD enum kevo_status kevo_replay_next(struct runctx *r, struct job **out);
/* The search loop ended: KEVO_ERR_DIVERGED (naming the next step) when the original's
 * log goes on. */
KEVO_NODISCARD enum kevo_status kevo_replay_done(struct runctx *r);
/* The original's stop reason, where it stopped at this step (waiting or not); else NULL. */
const char *kevo_replay_stop(struct runctx *r, int waiting);
/* A call about to be submitted: matched with the original's call of the same submission
 * number (c->sub), which must have asked the same prompt (else KEVO_ERR_DIVERGED); c gets
 * its source (from_cache). *refused 1: the original was refused it (offline, not cached).
 * KEVO_ERR_NOTFOUND: the original has no call of that number (its cap refused it). */
KEVO_NODISCARD enum kevo_status kevo_replay_book(struct runctx *r, struct kevo_llm_call *c,
                                                 int *refused);
/* KEVO_ERR_DIVERGED with the message: the replay's call c_sub (op, prompt) was made
 * where the original's was refused by its cost cap or never made (cap_refused 0), or the
 * other way round (cap_refused 1). */
KEVO_NODISCARD enum kevo_status kevo_replay_call_differs(struct runctx *r, int64_t sub,
                                                         const char *prompt_hash, const char *op,
                                                         int cap_refused);
/* The original's held-out result for candidate id (taken); KEVO_ERR_DIVERGED if none. */
KEVO_NODISCARD enum kevo_status kevo_replay_holdout(struct runctx *r, int64_t id, json_t **out);
/* Compare this run with the original; "replay" in report; KEVO_ERR_DIVERGED if they
 * differ (r->msg names the first difference). */
KEVO_NODISCARD enum kevo_status kevo_replay_compare(struct runctx *r, json_t *report);

/* ---- run_llm.c ---- */
/* Parse the run's models and their prices (before the run exists: a bad --model fails
 * the command, not a run). */
KEVO_NODISCARD enum kevo_status kevo_run_llm_prepare(struct runctx *r);
/* The prices the run's models were given: {"MODEL": {"in": P, "out": P}} (new ref). */
json_t *kevo_run_llm_prices(const struct runctx *r);
/* Start the LLM operators when the run has models (no-op otherwise). */
KEVO_NODISCARD enum kevo_status kevo_run_llm_start(struct runctx *r);
void kevo_run_llm_stop(struct runctx *r);
/* Keep the LLM calls in flight while the search goes on. */
KEVO_NODISCARD enum kevo_status kevo_run_llm_fill(struct runctx *r);
/* A finished call came back through the done queue: record it and propose its candidate. */
KEVO_NODISCARD enum kevo_status kevo_run_llm_handle(struct runctx *r, struct job *j);
/* Remember a verdict (for prompts' sibling summaries and the fix operator). */
void kevo_run_llm_note(struct runctx *r, int64_t id, int64_t parent, const char *op,
                       const char *verdict, double score);

#endif

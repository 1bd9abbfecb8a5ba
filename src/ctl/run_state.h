/*
 * run_state - the state of one `kevo run` and the services every part of it uses. Private
 * to the files of the run; the contract is kevo.h (kevo_run) and run.h.
 *
 * The parts of a run, each owning its part of the state:
 *   run.c        the run: set-up, the search loop, the held-out gate, the report (loop)
 *   steps.h      where steps come from: steps_live.c (the pool and the LLM threads) or
 *                replay.c (the archive's step log); each keeps its state behind steps_ctx
 *   run_llm.c    the LLM operators (struct run_llm, opaque)
 *   run_state.c  this header's services: events, failures, candidates recorded, the
 *                reference's figures, the genome cache
 * They call one another only downwards: run.c -> steps_live.c, replay.c, run_llm.c ->
 * run_state.c; a step source and the LLM side reach each other only through steps.h's
 * vtable, held in the state.
 */
#ifndef KEVO_RUN_STATE_H
#define KEVO_RUN_STATE_H

#include "kevo.h"
#include "base/buf.h"
#include "ctl/archive.h"
#include "ctl/genome.h"
#include "ctl/llmops.h"
#include "ctl/ops.h"
#include "ctl/search.h"
#include "core/task.h"

#include <jansson.h>

#define GENOME_CACHE 64
#define MAX_SLOTS 64

/* One step of the run: an evaluation (result from a worker or the record) or a finished
 * LLM call. */
struct job {
    int64_t id;                    /* candidate id; 0 for the reference */
    int holdout;
    int op;                        /* operator index in the run's table; -1 for seeds */
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

struct cached_genome {
    int64_t id;
    struct kevo_genome g;
};

/* The run as set up (run.c and the step source's options/open); read-only afterwards. */
struct run_setup {
    struct kevo_run_opts eff;      /* this session's options + the resumed (replayed) run's */
    int gpus[MAX_SLOTS];
    const char *task_path;
    char *path_owned;              /* a resumed or replayed run's task path, from the archive */
    json_t *cfg;                   /* a resumed or replayed run's config */
    const char **cfg_models;       /* the config's model specs (borrowed from cfg) */
    json_t *prices_used;           /* (borrowed from cfg) a replay's prices, else NULL */
    struct kevo_task *task;
    char *task_text;
    size_t task_len;
    const char *backend;
    json_t *calib, *sol;           /* the device's calibration and the request's "sol" */
    int n_slots;                   /* workers (a replay: the original's) */
    struct kevo_genome *seeds;     /* this command's seeds, parsed before the run exists */
    int n_seeds;
};

/* The search loop's state (run.c; the step sources update inflight and busy_s). */
struct run_loop {
    struct kevo_search *s;
    const struct kevo_operator *ops[32];   /* the run's operators: search index = table index */
    int n_ops;
    int64_t *pending;              /* candidates to (re)send before proposing */
    int n_pending, i_pending;
    struct cached_genome cache[GENOME_CACHE];
    int cache_next;
    int64_t budget, stagnation, n_done, n_ok, since_best;
    double best_sol;
    const char *reason;            /* why the search stopped */
    int exhausted;
    int halted;                    /* the step source ended the search at once */
    int inflight;                  /* evaluations sent and not yet handled */
    double busy_s;                 /* seconds workers were working for the run: starting
                                      (device init), calibrating, evaluating */
    double profile_s;              /* ... of which collecting counters (run.c) */
    int profile_on;                /* ask for counters now ... */
    double profile_below_s;        /* ... of a candidate faster than this, the best score
                                      (atomic: the evaluating threads read both through
                                      kevo_run_profile_due) */
    json_t *ref;                   /* the reference's timed result */
    double *ref_median;            /* per workload index; 0 when not timed */
    int n_wl;
    /* the step log: every step the controller handles has a number */
    int64_t step;                  /* steps handled in this session */
    int64_t cur_step;              /* the step being handled; 0 between steps */
    int64_t stop_step;             /* reason was set after this step ... */
    int stop_waiting;              /* ... while waiting for the next one (1) or right
                                      after handling it (0) */
};

struct kevo_steps_ops;
struct run_llm;

struct runctx {
    const struct kevo_run_opts *o; /* &set.eff once the run's options are known */
    struct kevo_archive *ar;
    int64_t run;
    int running;                   /* this session created or resumed the run: a failure
                                      from here on marks it failed */
    double t0;
    kevo_run_event_fn ev;
    void *user;
    volatile int *stop;
    struct kevo_buf msg;           /* kevo's own failure */
    struct run_setup set;
    struct run_loop loop;
    const struct kevo_steps_ops *steps;   /* live or replay (steps.h) */
    void *steps_ctx;                      /* its state */
    struct run_llm *llm;                  /* the LLM operators; NULL without models */
};

/* ---- run_state.c ---- */
void kevo_run_job_free(struct job *j);   /* NULL: no-op */
void kevo_run_event(struct runctx *r, json_t *e);             /* takes e */
enum kevo_status kevo_run_fail(struct runctx *r, enum kevo_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The genome of candidate id (cached; borrowed until the next call). */
KEVO_NODISCARD enum kevo_status kevo_run_genome_of(struct runctx *r, int64_t id,
                                                   const struct kevo_genome **out);
/* A job for genome g (taken), recorded as a pending candidate; KEVO_ERR_INVALID when the
 * run already has it. */
KEVO_NODISCARD enum kevo_status kevo_run_record(struct runctx *r, struct kevo_genome *g,
                                                const char *op, int op_i, int64_t p1, int64_t p2,
                                                double p1_score, int island, struct job **out);
/* Send j (taken) to the step source for evaluation; it counts as in flight. */
void kevo_run_send(struct runctx *r, struct job *j);
/* The models of the run's config (set.cfg) as this session's (set.eff). */
void kevo_run_cfg_models(struct runctx *r);
/* The reference's medians (loop.ref) into loop.ref_median, and its event. */
void kevo_run_reference_set(struct runctx *r);
/* An option of this session (v), else the resumed run's config's (key), else dflt. */
int64_t kevo_run_opt_i(const struct runctx *r, int64_t v, const char *key, int64_t dflt);
/* Parse r->set.task_text into r->set.task (a failure names the file, line, column). */
KEVO_NODISCARD enum kevo_status kevo_run_parse_task(struct runctx *r);
/* Whether an evaluation sent now should ask the worker for the candidate's counters
 * (kevo_run_opts.profile_share), and then for a candidate faster than *below_s only (the
 * run's best score: a new best; 0: any). Thread-safe. */
int kevo_run_profile_due(const struct runctx *r, double *below_s);

/* The run's operator table index of `name` (-1: none, e.g. "seed"). */
int kevo_run_op_index(const struct runctx *r, const char *name);

#endif

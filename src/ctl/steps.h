/*
 * steps - where the steps of a run come from: the interface between the search loop
 * (run.c), which is a function of the steps it handles in their order, and the two
 * sources of steps:
 *   live    (steps_live.c) the worker pool evaluates what is sent, the LLM threads answer
 *           calls; steps arrive in the order they finish, and that order is recorded
 *   replay  (replay.c) the archive's step log of an earlier run gives each step back in
 *           the order the original handled it: recorded results and replies, no worker,
 *           no network (docs/llm.md "Replay")
 * The loop never asks which one it has. All members run on the controller's thread
 * except `arrive`, which LLM threads call.
 */
#ifndef KEVO_STEPS_H
#define KEVO_STEPS_H

#include "kevo.h"
#include "ctl/run_state.h"

/* Where an LLM call's answer will come from (book). */
enum kevo_steps_book {
    KEVO_STEPS_BOOK_LIVE = 0,      /* the response cache, else the model */
    KEVO_STEPS_BOOK_ORIGINAL,      /* the original run's answer to the same call */
    KEVO_STEPS_BOOK_REFUSED,       /* the original was refused it (offline, not cached) */
    KEVO_STEPS_BOOK_NONE           /* the original made no such call (its cap refused it) */
};

struct kevo_steps_ops {
    const char *name;              /* "live", "replay" */
    int recorded;                  /* 1: results and replies come from a record: nothing is
                                      spent, no worker runs */
    /* Open the source: the task's text, path and parse (r->set), the run's config
     * (r->set.cfg) when the run already exists, and this session's options (r->set.eff,
     * r->o). Before the run is created. */
    KEVO_NODISCARD enum kevo_status (*open)(struct runctx *r);
    /* (optional) Once the search is configured, before the run is created: what must fail
     * the command rather than a run (a new run's seeds, parsed into r->set.seeds). */
    KEVO_NODISCARD enum kevo_status (*check)(struct runctx *r);
    /* The workers, once the run exists: r->set.calib, sol and n_slots. */
    KEVO_NODISCARD enum kevo_status (*start)(struct runctx *r);
    /* Before the search: the reference's result (kevo_run_reference_set), a resumed run's
     * state rebuilt, and the first candidates recorded as pending (r->loop.pending): this
     * command's seeds (r->set.seeds), a resumed run's pending ones, or the original's. */
    KEVO_NODISCARD enum kevo_status (*begin)(struct runctx *r);
    /* Evaluate j (taken). */
    void (*send)(struct runctx *r, struct job *j);
    /* The next step (taken) into *out, or *out NULL when none came within wait_s. The
     * source may end the search at once by setting r->loop.halted (a replay the user
     * stopped). KEVO_ERR_DIVERGED when a replay cannot match the step. */
    KEVO_NODISCARD enum kevo_status (*next)(struct runctx *r, double wait_s, struct job **out);
    /* A finished LLM call (taken), from an LLM thread. */
    void (*arrive)(struct runctx *r, struct job *j);
    /* j's held-out evaluation (j taken; the job with its result back in *out). */
    KEVO_NODISCARD enum kevo_status (*holdout)(struct runctx *r, struct job *j,
                                               struct job **out);
    /* An LLM call about to be submitted (c->sub its number in the session): where its
     * answer comes from. KEVO_ERR_DIVERGED when a replay's call asks another prompt. */
    KEVO_NODISCARD enum kevo_status (*book)(struct runctx *r, struct kevo_llm_call *c,
                                            enum kevo_steps_book *out);
    /* (optional: required of a source whose book() answers ORIGINAL or NONE)
     * KEVO_ERR_DIVERGED, with the message: call sub was refused by the cost cap where the
     * original's passed (cap_refused 1), or made where the original made none. */
    KEVO_NODISCARD enum kevo_status (*differs)(struct runctx *r, int64_t sub,
                                               const char *prompt_hash, const char *op,
                                               int cap_refused);
    /* (optional) a stop reason the loop cannot find itself (the original's clock or user),
     * when it stopped after the current step, waiting for the next (1) or not (0). */
    const char *(*stop_reason)(struct runctx *r, int waiting);
    /* (optional) the loop ended: KEVO_ERR_DIVERGED when the original's log goes on. */
    KEVO_NODISCARD enum kevo_status (*finish)(struct runctx *r);
    /* (optional) the report is made: compare with the original ("replay" in report). */
    KEVO_NODISCARD enum kevo_status (*compare)(struct runctx *r, json_t *report);
    /* (optional) the report is made: add what the source knows of its workers (live:
     * the MPI ranks, "ranks"). */
    void (*report)(struct runctx *r, json_t *report);
    /* Stop and free everything (evaluations in flight are dropped: they stay pending). */
    void (*close)(struct runctx *r);
};

extern const struct kevo_steps_ops kevo_steps_live;     /* steps_live.c */
extern const struct kevo_steps_ops kevo_steps_replay;   /* replay.c */

#endif

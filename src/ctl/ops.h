/*
 * ops - the search's operators (docs/search.md): each turns one or two parent genomes into
 * a child the run has not evaluated yet. The ones here need no LLM: param (a tuning
 * parameter moved to a neighbouring or random value), geometry (the same, for params the
 * launch plan's grid/block/smem use), sweep (a coordinate sweep: the first value of some
 * param not yet tried with the parent's other choices), flags (one allowed compiler flag
 * toggled) and crossover (params taken from either of two parents of the same source).
 *
 * The LLM operators (run_llm.c) are entries of the same table: asynchronous, with start()
 * instead of propose(), since a model's answer comes back later as a step of the run. A
 * run's table holds both kinds; the search picks among them by their measured success and
 * the run calls whichever member the picked entry has.
 */
#ifndef KEVO_OPS_H
#define KEVO_OPS_H

#include "ctl/genome.h"
#include "ctl/search.h"

struct kevo_op_ctx {
    struct kevo_rng *rng;
    /* 1 if the run already has (or is evaluating) a candidate with this key */
    int (*seen)(void *user, const char *key);
    void *user;
};

struct kevo_operator {
    const char *name;
    int n_parents;               /* 0 (a model writes from the task alone), 1 or 2 */
    double prior;                /* initial selection weight */
    /* (optional: synchronous operators) A new child of p1 (and p2) into *out;
     * KEVO_ERR_NOTFOUND when the operator has nothing unseen to offer for these parents
     * (the run then tries another). */
    KEVO_NODISCARD enum kevo_status (*propose)(const struct kevo_op_ctx *c,
                                               const struct kevo_genome *p1,
                                               const struct kevo_genome *p2,
                                               struct kevo_genome *out);
    /* (optional: asynchronous operators) Start making a child with the run's LLM side
     * (user: the run); the child comes back later as a step. KEVO_ERR_NOTFOUND when it has
     * no parents, or nothing new to ask, now. */
    KEVO_NODISCARD enum kevo_status (*start)(void *user, const struct kevo_operator *self);
    int llm_op;                  /* asynchronous: its enum kevo_llm_op (llmops.h) */
};

/* The built-in operators, in registration order; *n gets the count. */
const struct kevo_operator *const *kevo_ops_builtin(int *n);

#endif

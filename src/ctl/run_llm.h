/*
 * run_llm - the LLM operators of `kevo run` (docs/llm.md): asynchronous operators of the
 * run's one operator table (ops.h: each has start(), no propose()). The search picks them
 * like any other operator; starting one builds its prompt and submits a call; the reply
 * comes back as a step of the run (steps.h), is recorded, and becomes a candidate sent
 * for evaluation, or is recorded with the reason it could not be used.
 *
 * Its state (struct run_llm, in r->llm) is its own; r->llm is NULL for a run without
 * models, and every function here is then a no-op.
 */
#ifndef KEVO_RUN_LLM_H
#define KEVO_RUN_LLM_H

#include "ctl/run_state.h"

/* Parse the run's models and their prices, and (a live session that may use the
 * network) check each with one tiny request, dropping the ones that fail from r->llm and
 * r->o; none working is a failure. All before the run exists: a bad --model or a refused
 * key fails the command, not a run. Allocates r->llm when the run has models. */
KEVO_NODISCARD enum kevo_status kevo_run_llm_prepare(struct runctx *r);
/* The prices the run's models were given: {"MODEL": {"in": P, "out": P, "cached_in": P}}
 * for each model the price table has (new ref); a model without a price is not there. */
json_t *kevo_run_llm_prices(const struct runctx *r);
/* Add the LLM operators to the run's table (r->loop.ops, the search) and start their
 * threads (none for a recorded source). */
KEVO_NODISCARD enum kevo_status kevo_run_llm_start(struct runctx *r);
/* Stop the threads and free r->llm; before the step source is closed (the threads hand
 * it their replies). */
void kevo_run_llm_stop(struct runctx *r);
/* A resumed live session: every reply imported for the run's pending calls (docs/llm.md
 * "Air-gapped clusters") arrives as a step, as a live reply would, as far as the budget
 * has room for their candidates (the others wait for the next session); after
 * steps->begin, before the search. */
KEVO_NODISCARD enum kevo_status kevo_run_llm_imports(struct runctx *r);
/* Keep the LLM calls in flight while the search goes on. */
KEVO_NODISCARD enum kevo_status kevo_run_llm_fill(struct runctx *r);
/* A finished call came back as a step: record it and propose its candidate. */
KEVO_NODISCARD enum kevo_status kevo_run_llm_handle(struct runctx *r, struct job *j);
/* An evaluation was handled: its model's score and the recent verdicts the prompts and
 * the fix operator read. */
void kevo_run_llm_evaluated(struct runctx *r, const struct job *j, const char *op,
                            enum kevo_verdict verdict, double score, int ok, int improved);
/* Calls submitted and not yet handled. */
int kevo_run_llm_outstanding(const struct runctx *r);
/* What the calls cost so far, as the controller settled it (*out); 0 without models. */
int kevo_run_llm_spent(const struct runctx *r, double *out);
/* A recorded source: the submitted call of number sub, taken back to be answered; NULL
 * when there is none. */
struct kevo_llm_call *kevo_run_llm_take(struct runctx *r, int64_t sub);

#endif

/*
 * llmops - the LLM operators of a run (docs/llm.md): generate (a first implementation
 * from the task), improve (a parent and its measurements), fix (a failed candidate and
 * its evidence), crossover (two parents) and plan (the model names one strategy, then a
 * second call implements it). Calls run on their own threads, at most max_concurrent at a
 * time, so a slow model never holds up the workers; the run's controller builds the
 * prompts (src/ctl/prompt.c), hands them over with kevo_llmops_submit, and gets each finished
 * call back through the callback, on the proposer's thread.
 *
 * Costs: every reply's tokens are priced by its model; a new call is refused while the
 * money spent plus the worst case of the calls in flight would pass the cap. What a call
 * cost counts when the controller settles it (kevo_llmops_settle), not when its thread
 * finishes, so every decision about cost is a function of what the controller has
 * handled, in the order it handled it: the same run replayed makes the same decisions.
 *
 * Replay (cfg.replay): no network and no threads; submitted calls wait until the
 * controller takes them (kevo_llmops_take) and answers them from the archive.
 */
#ifndef KEVO_LLMOPS_H
#define KEVO_LLMOPS_H

#include "ctl/archive.h"
#include "kevo.h"
#include "ctl/llm.h"
#include <jansson.h>

enum kevo_llm_op { KEVO_LLMOP_GENERATE = 0, KEVO_LLMOP_IMPROVE, KEVO_LLMOP_FIX,
                   KEVO_LLMOP_CROSSOVER, KEVO_LLMOP_PLAN, KEVO_LLMOP_COUNT };
extern const char *const kevo_llmop_names[KEVO_LLMOP_COUNT];   /* "llm_generate", ... */
/* The template of an op (and phase: plan's second call is "plan_code"). */
const char *kevo_llmop_template(enum kevo_llm_op op, int phase);

/* One call: filled by the controller, answered on a proposer thread. */
struct kevo_llm_call {
    enum kevo_llm_op op;
    int phase;                        /* plan: 0 the strategy, 1 the code */
    int model;                        /* index into the models */
    int64_t parent1, parent2;
    int island;
    double parent_score;
    char *system, *user;              /* the prompt (owned) */
    char *parent_text;                /* what SEARCH blocks apply to (owned), may be NULL */
    char prompt_hash[KEVO_HASH_HEX];  /* model + prompt + sampling parameters */
    char plan_hash[KEVO_HASH_HEX];    /* plan's second call: the first call's prompt hash */
    int64_t sub;                      /* its place among the session's submissions (from 1) */
    void *carrier;                    /* the owner's memory for delivering it (allocated when
                                         submitted, so delivery cannot fail); kevo_free'd
                                         with the call */
    int from_cache;                   /* answered from the archive's response cache */
    int64_t imported;                 /* answered by a reply imported for this pending call
                                         (an llm_calls row; exchange.h); 0: none */
    struct kevo_llm_reply reply;
    double cost;
    double reserve;                   /* the worst case held for it until settled */
    int settled;
};
void kevo_llm_call_free(struct kevo_llm_call *c);   /* NULL: no-op */

struct kevo_llmops_cfg {
    int n_models;
    const struct kevo_llm_model *models;   /* borrowed for the lifetime of the ops */
    int max_concurrent;
    struct kevo_llm_limits limits;
    double cost_cap;                       /* 0: none */
    double spent_before;                   /* what earlier sessions of the run spent */
    /* for a model whose spec does not set them: temperature (< 0: none sent) and output
     * limit (0: KEVO_LLM_MAX_OUTPUT). They go into the prompt hash and size the reserve */
    double temperature;
    int max_tokens;
    int replay;                            /* 1: no network, no threads (see above) */
};

/*
 * The defaults a run's config records as "llm_settings" (a new number whenever they
 * change, so a replay or a resumed run asks with the ones it started with): absent, runs
 * recorded before per-model settings: temperature 0.7 and 8192 output tokens for every
 * model; 2: no temperature and KEVO_LLM_MAX_OUTPUT, unless the model's spec says.
 */
#define KEVO_LLMOPS_SETTINGS 2

typedef void (*kevo_llmops_done_fn)(void *user, struct kevo_llm_call *call);  /* takes it */

struct kevo_llmops;

KEVO_NODISCARD enum kevo_status kevo_llmops_new(const struct kevo_llmops_cfg *cfg,
                                                kevo_llmops_done_fn done, void *user,
                                                struct kevo_llmops **out);
/* Stops the threads after the calls in flight (each bounded by its timeouts). */
void kevo_llmops_free(struct kevo_llmops *o);

/* Choose a model for the next call: weight x (1 + its rate of improving candidates). */
int kevo_llmops_pick_model(struct kevo_llmops *o, double unit_random);
/* A model's candidate came back: ok, and whether it beat its parent. */
void kevo_llmops_model_result(struct kevo_llmops *o, int model, int ok, int improved);
/* The prompt hash of a call (set in call->prompt_hash): the model (provider and name),
 * the settings it is asked with, and the prompt. */
KEVO_NODISCARD enum kevo_status kevo_llmops_hash(const struct kevo_llmops *o,
                                                 struct kevo_llm_call *call);
/*
 * Hand a call over (taken). KEVO_ERR_TOOBIG when the cost cap would be passed (the call is
 * freed). A call with from_cache set is delivered without the network.
 */
KEVO_NODISCARD enum kevo_status kevo_llmops_submit(struct kevo_llmops *o,
                                                   struct kevo_llm_call *call);
/* The controller handled call c: its cost counts, its reserve is given back (once). */
void kevo_llmops_settle(struct kevo_llmops *o, struct kevo_llm_call *c);
/* Replay: the waiting call with submission number sub (the caller owns it); NULL if none. */
struct kevo_llm_call *kevo_llmops_take(struct kevo_llmops *o, int64_t sub);
/* Calls submitted and not yet delivered; money settled so far. */
int kevo_llmops_in_flight(struct kevo_llmops *o);
double kevo_llmops_spent(struct kevo_llmops *o);
/* "openai:gpt-5@https://host/v1" for model i (borrowed; never a key). */
const char *kevo_llmops_model_name(const struct kevo_llmops *o, int i);
/* Model i as its calls are sent: its spec's settings, cfg's defaults where it sets none
 * (borrowed); NULL for no such model. */
const struct kevo_llm_model *kevo_llmops_model(const struct kevo_llmops *o, int i);

/* ---- the price table (docs/llm.md "Cost"), one reading for run, check and answer ---- */

/*
 * The table: opt (a file), else $KEVO_PRICES, else the data directory's prices.json
 * (kevo_data_dir). *out is a new reference, NULL when that table is missing (then nothing
 * has a price). A
 * table named by opt or the environment that cannot be read is KEVO_ERR_PARSE with *msg
 * "PATH:LINE: what" (kevo_free). *path (kevo_free; may be NULL) names the file used.
 */
KEVO_NODISCARD enum kevo_status kevo_prices_load(const char *opt, json_t **out, char **path,
                                                 char **msg);
/* m's prices from the table's entry m->name: price_in, price_out, price_cached_in (its
 * "cached_in", else the "in" rate) and priced = 1; a model the table lacks gets no price
 * (priced 0, prices 0). Returns m->priced. table NULL: no prices. */
int kevo_prices_apply(json_t *table, struct kevo_llm_model *m);

#endif

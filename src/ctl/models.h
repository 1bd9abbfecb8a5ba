/*
 * models - checking LLM models before they are used (docs/llm.md "Checking models"): one
 * tiny request per model (a few output tokens) says whether the model is reachable, its
 * key was found (never shown: only where it came from), the request's settings were
 * accepted (after the client's adaptations), the reply has the API's shape, and how long
 * it took; a model that fails gets a one-line diagnosis a person can act on ("401: the key
 * in $OPENAI_API_KEY was refused"). `kevo models check` prints it; `kevo run` runs the
 * same check before its first LLM call (run_llm.c) and drops the models that fail.
 *
 * Thread-safe as the client is (llm.h): a check holds no state of its own.
 */
#ifndef KEVO_MODELS_H
#define KEVO_MODELS_H

#include "ctl/llm.h"
#include "kevo.h"

#include <jansson.h>

/* The check's request (a test's fake provider recognises it by its system prompt). */
#define KEVO_MODELS_CHECK_SYSTEM "Reply with the word OK."
#define KEVO_MODELS_CHECK_PROMPT "OK?"
#define KEVO_MODELS_CHECK_MAX_OUTPUT 16   /* output tokens (above a thinking budget) */

/* The outcome of one model's check. */
struct kevo_models_result {
    int ok;                       /* the model can be used */
    const char *stage;            /* (static) what failed, NULL when ok: "spec", "key",
                                     "network", "http", "settings", "reply" */
    const char *key;              /* (static) where the key came from: "env", "file",
                                     "none" (no key found; a local server may not need one) */
    char status[32];              /* the reply's status (llm.h), "" for a bad spec */
    int http_status;              /* of the last attempt; 0 when none got a response */
    double latency_s;
    int64_t tokens_in, tokens_out;
    int price_known;              /* the price table has the model (the caller fills it) */
    char *adapted;                /* (owned) what the client changed for the model, or NULL */
    char *note;                   /* (owned) a remark on a check that passed, or NULL */
    char *diagnosis;              /* (owned) one line saying what failed; NULL when ok */
};
void kevo_models_result_clear(struct kevo_models_result *res);   /* NULL: no-op */

/* A client with the check's limits: short timeouts, few attempts (the whole check of one
 * model takes at most about a minute). kevo_llm_free it. */
KEVO_NODISCARD enum kevo_status kevo_models_client(struct kevo_llm **out);

/*
 * Check model m with client c: the model's own settings (temperature, reasoning effort,
 * thinking, extra members: what its calls will send), but an output limit of
 * KEVO_MODELS_CHECK_MAX_OUTPUT tokens. KEVO_OK whenever *out was filled in, whatever the
 * outcome; an error status only when kevo itself failed (out of memory), *out then empty.
 * Never writes the key anywhere.
 */
KEVO_NODISCARD enum kevo_status kevo_models_check(struct kevo_llm *c,
                                                  const struct kevo_llm_model *m,
                                                  struct kevo_models_result *out);

/* {"model": spec, "ok", "stage", "status", "http_status", "latency_s", "key", "price_known",
 * "tokens_in", "tokens_out", "adapted", "note", "diagnosis"} (stage null when ok; the last
 * three only when there is something to say); NULL
 * out of memory. spec names the model as the user wrote it (specs hold no keys). */
json_t *kevo_models_result_json(const char *spec, const struct kevo_models_result *res);

#endif

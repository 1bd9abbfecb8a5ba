/*
 * exchange - LLM calls across an air gap (docs/llm.md "Air-gapped clusters"). An offline
 * session records the calls it could not make (archive: status "not_cached");
 * `kevo llm pending` writes them as JSON lines, `kevo llm answer` makes them on a machine
 * with a network (that machine's models, the run's settings, limits and cost cap:
 * llmops), `kevo llm import` stores the replies, and a resumed session turns each
 * imported reply into a step (run_llm.c, with kevo_exchange_call below). Its public half
 * (pending, answer, import) is declared in kevo.h.
 *
 * A call's id in the files is "ROWID-HASH12": the llm_calls row of the call that waits,
 * and the first 12 hex digits of its prompt hash, so a file from another archive (or an
 * older copy) is refused instead of answering the wrong prompt.
 */
#ifndef KEVO_EXCHANGE_H
#define KEVO_EXCHANGE_H

#include "ctl/archive.h"
#include "ctl/llmops.h"
#include "kevo.h"

/* The settings model m is asked with (llmops' model: its spec's, the run's defaults where
 * it sets none) as the JSON text recorded with a call (kevo_free it; NULL: out of memory):
 * {"max_output", "temperature", "reasoning_effort", "thinking", "extra"}, each when set. */
char *kevo_exchange_settings(const struct kevo_llm_model *m);

/*
 * The call that w (an imported reply, kevo_archive_llm_imported) answers, as a finished
 * call of model `model` ready to be handled like a live reply: op and phase from w->op,
 * parents, island, parent score, prompt, hashes, the reply with its tokens, status "ok",
 * and `imported` set to w->id. w's system, user and reply texts move into it (w keeps
 * NULLs). The parent's text (for SEARCH/REPLACE edits) is read from ar. KEVO_ERR_INVALID
 * (*why says it, kevo_free it) when w's operator is not an LLM operator of this kevo.
 */
KEVO_NODISCARD enum kevo_status kevo_exchange_call(struct kevo_archive *ar,
                                                   struct kevo_llm_wanted *w, int model,
                                                   struct kevo_llm_call **out, char **why);

#endif

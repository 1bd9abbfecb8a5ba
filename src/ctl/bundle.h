/*
 * bundle - the prompt kevo would send a model for a task, outside a run: `kevo prompt`
 * (kevo.h: kevo_prompt_json) and the `prompt` tool of `kevo mcp`. The same templates
 * (prompts/NAME.md) and evidence as the LLM operators of kevo run (ctl/prompt.h): the task
 * without its holdout lines, the device's calibration, the candidate with its verdict,
 * evidence and figures, what was tried from it, the playbook notes that fit. Held-out
 * sizes never reach it. Pure but for reading the templates and the playbook.
 */
#ifndef KEVO_BUNDLE_H
#define KEVO_BUNDLE_H

#include "kevo.h"
#include "core/task.h"
#include <jansson.h>

/* The operators a bundle is built for; "improve", "fix" and "plan" need a candidate. */
#define KEVO_BUNDLE_OPS "generate, improve, fix, plan"

/* What a bundle is built from (all borrowed). */
struct kevo_bundle {
    const char *op;                /* one of KEVO_BUNDLE_OPS; NULL: improve with a
                                      candidate, generate without */
    const struct kevo_task *task;  /* parsed: its text, language and tags */
    const char *cand_text;         /* the candidate's source, or NULL */
    json_t *result;                /* the candidate's eval result (docs/eval-json.md), or
                                      NULL: "not evaluated yet" */
    json_t *calib;                 /* the device's calibration, or NULL: unknown */
    const char *siblings;          /* what was tried from the candidate, or NULL */
};

/*
 * The prompt as {"op", "template", "system", "user"} (*out, json_decref it). An unknown
 * op, or one that needs a candidate without one, is KEVO_ERR_INVALID; a template that
 * cannot be read KEVO_ERR_NOTFOUND; *out_msg (kevo_free) says why. The templates are
 * $KEVO_PROMPTS or the data directory's prompts/, the notes its docs/playbook/.
 */
KEVO_NODISCARD enum kevo_status kevo_bundle_build(const struct kevo_bundle *b, json_t **out,
                                                  char **out_msg);

/*
 * The eval result of a candidate in text: a `kevo eval --json` document (its candidate
 * whose "path" is cand_path, else its first; *out_calib gets its "calibration"), one eval
 * result (an object with a "verdict"), or the `eval` tool's structured output (its
 * "result"). New references (NULL when absent); KEVO_ERR_PARSE naming what is wrong.
 */
KEVO_NODISCARD enum kevo_status kevo_bundle_result_of(const char *name, const char *text,
                                                      const char *cand_path, json_t **out_result,
                                                      json_t **out_calib, char **out_msg);

#endif

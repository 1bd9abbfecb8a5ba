/*
 * prompt - the prompts of the LLM operators (docs/llm.md "Prompts"), built from editable
 * template files (prompts/NAME.md) and the evidence kevo has: the task file with its holdout
 * lines removed, the device's calibrated facts, the parent's source, its verdict with the
 * evidence, its metrics per workload with resources and whether each workload is memory-
 * or compute-bound, what siblings tried, and playbook notes (docs/playbook/) with one
 * exemplar candidate file, chosen by the task's tags, its bound and the parent's
 * (ctl/playbook.h). Held-out workloads and seeds never reach a prompt.
 *
 * Templates use {{name}} placeholders: task device parent parent2 verdict metrics metrics2
 * siblings playbook plan profile (the parent's hardware counters, ctl/profile.h: nothing
 * when its result has none). An unknown placeholder is an error naming the template file.
 */
#ifndef KEVO_PROMPT_H
#define KEVO_PROMPT_H

#include "kevo.h"
#include "core/task.h"
#include <jansson.h>
#include <stddef.h>

struct kevo_prompt_ctx {
    const char *template_dir;        /* the prompts/ directory */
    const char *playbook_dir;        /* the docs/playbook/ directory; NULL: no notes */
    const char *task_text;           /* the task file as is (holdouts are removed here) */
    const char *lang;                /* "cuda" or "c" */
    const char *const *tags;         /* the task's tags */
    int n_tags;
    json_t *calib;                   /* the device's calibration (kevo calibrate --json) */
    const char *parent, *parent2;    /* candidate sources, may be NULL */
    json_t *result, *result2;        /* their eval results (docs/eval-json.md), may be NULL */
    const char *siblings;            /* a summary of what was tried, may be NULL */
    const char *plan;                /* the strategy of plan-then-code, may be NULL */
    int max_notes;                   /* playbook notes chosen by score, besides those the
                                        task asks for (0: KEVO_PLAYBOOK_NOTES, 3) */
    size_t max_chars;                /* the playbook section's budget in characters, notes
                                        and exemplar code together (0: KEVO_PLAYBOOK_CHARS) */
    const struct kevo_task *task;    /* the parsed task: its bound, name and `notes`;
                                        may be NULL (notes by tags and the parent alone) */
};

/*
 * The system and user prompts of template `name` (e.g. "improve": prompts/improve.md,
 * with prompts/system.md as the system prompt). kevo_free both. KEVO_ERR_NOTFOUND /
 * KEVO_ERR_PARSE with *why (kevo_free) naming the file and the problem.
 */
KEVO_NODISCARD enum kevo_status kevo_prompt_build(const char *name,
                                                  const struct kevo_prompt_ctx *c,
                                                  char **system, char **user, char **why);

/* The task text without its holdout lines (kevo_free it). */
char *kevo_prompt_task_text(const char *task_text);

#endif

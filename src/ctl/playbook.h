/*
 * playbook - what a prompt's {{playbook}} carries: the notes of docs/playbook/ and the
 * exemplar code they point at (verified candidate files under examples/seeds/), chosen for
 * one task and parent and cut to a budget in characters (docs/playbook/README.md,
 * "How notes are chosen").
 *
 * A note applies when its `lang` is the task's and its `bottleneck` is `any`, the task's
 * intrinsic bound or the bound observed on the parent; it is scored by its tags against
 * the task's words (its tags, and when it is compute-bound the unit of its `flops` line:
 * fp32, bf16, ...), by the
 * bounds it matches, and by one point when it names exemplars. Notes the task names in
 * `// kevo notes` come first, whatever they say; then the best max_notes others. One
 * exemplar is chosen among those the chosen notes name: the file named after the task,
 * else the one whose file name shares most words with the task's name and words, else
 * the first named; never one with the same code as a parent in the prompt. Notes are given
 * best first, the exemplar right after the note that names it, each only when it fits
 * what is left of the budget (an exemplar too long gives way to the next best); what was
 * left out for length is named in a last line. Pure: reads the note and exemplar files.
 *
 * A playbook none of whose notes names exemplars (format 1: one kept with runs recorded
 * before them, bench/results/2026-11-22-h100-llm-scripted/playbook) is chosen from as
 * kevo did then: by its tags and the parent's measured bound, the bodies of the best
 * max_notes notes, no budget; so those runs replay to the same prompts.
 */
#ifndef KEVO_PLAYBOOK_H
#define KEVO_PLAYBOOK_H

#include "base/buf.h"
#include "core/task.h"
#include <jansson.h>
#include <stddef.h>

/* The playbook section's default budget in characters (about 10,000 tokens): room for the
 * largest exemplar (FA3-style attention, 26 KB) after its note. */
#define KEVO_PLAYBOOK_CHARS ((size_t)40000)
#define KEVO_PLAYBOOK_NOTES 3          /* notes chosen by score, besides those asked for */

struct kevo_playbook_req {
    const char *dir;                   /* docs/playbook/; exemplars are ../../PATH from it */
    const char *lang;                  /* "cuda" or "c"; NULL: any */
    const struct kevo_task *task;      /* the task: bound, name, notes asked for; may be NULL */
    const char *const *tags;           /* the task's tags (when task is NULL) */
    int n_tags;
    const char *bound;                 /* the intrinsic bound: "memory" "compute" "latency"
                                          or "any" (kevo_playbook_bound) */
    const char *observed;              /* the bound seen on the parent, or NULL */
    const char *measured;              /* the parent's measured bound ("memory", "compute",
                                          "latency", "any"): what a format-1 playbook is
                                          chosen by; NULL: "any" */
    const char *parent, *parent2;      /* sources in the prompt: an exemplar with the same
                                          code is not repeated; may be NULL */
    int max_notes;                     /* 0: KEVO_PLAYBOOK_NOTES */
    size_t max_chars;                  /* 0: KEVO_PLAYBOOK_CHARS */
};

/*
 * The task's bound at its first workload: "compute" when its flops over the device's peak
 * for the flops' unit take longer than its bytes over the device's bandwidth, else
 * "memory"; the figures are calib's (kevo calibrate's document), or, where it has none,
 * the ridge of an H100 (FLOP per byte: fp32 and fp64 20, tf32 120, fp16 and bf16 250,
 * fp8 500). NULL when task is NULL or its expressions cannot be evaluated.
 */
const char *kevo_playbook_bound(const struct kevo_task *task, json_t *calib);

/*
 * The bound the parent's profile found ("memory" or "compute", from
 * kevo_profile_diagnose); NULL when there is no usable profile or it found the kernel
 * latency-bound (neither unit busy: the kernel has not reached its limit yet).
 */
const char *kevo_playbook_profiled(const json_t *profile);

/* The playbook section into b: "(none)" when no note applies. */
void kevo_playbook_text(const struct kevo_playbook_req *q, struct kevo_buf *b);

#endif

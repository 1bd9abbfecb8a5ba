/*
 * result - an evaluation's result as the controller reads it: one decoder from the
 * worker's JSON document (docs/eval-json.md) to a struct with enum kevo_verdict, the
 * per-workload figures and the resources, so no controller code looks a verdict up by
 * string key or compares verdict names. The document itself is kept (a reference) for
 * what is stored or shown whole: the archive's copy, the evidence, prompts.
 *
 * Decoding is strict about what the controller decides on (the verdict must be one of
 * enum kevo_verdict; a workload's index must be an integer) and lenient about figures (a
 * missing or non-numeric figure reads 0, "nan"/"inf" strings read as NaN/Inf). A workload
 * without a verdict in a document that is not ok (the one the worker was on when the
 * device was lost) reads as having the document's verdict.
 * Pure; thread-safe (no state beyond the caller's).
 */
#ifndef KEVO_RESULT_H
#define KEVO_RESULT_H

#include "kevo.h"
#include <jansson.h>

/* A timing summary (`time` / `ref_time` of a workload). */
struct kevo_result_time {
    int present;                   /* 0: the workload was not timed (all fields 0) */
    double median_s, min_s, p20_s, p80_s, noise;
    int64_t count, batch;
    int capped;
    double sm_clock_mhz;
};

/* One workload of the result, in the document's order. */
struct kevo_result_wl {
    int index;                     /* into the task's workloads (holdouts included) */
    int holdout;
    enum kevo_verdict verdict;
    const char *message;           /* borrowed from the document; "" when none */
    json_t *sizes, *evidence;      /* borrowed; NULL when absent */
    struct kevo_result_time time, ref_time;
    double speedup, gbps, tflops, t_sol_s, sol_fraction, bytes, flops;
};

/* One compiled kernel's resources. */
struct kevo_result_res {
    const char *kernel;            /* borrowed; "" when absent */
    int64_t n_params, regs, static_smem, local_bytes, max_threads_per_block;
    int64_t block, smem, blocks_per_sm;   /* -1 when absent */
};

struct kevo_result {
    json_t *doc;                   /* the document (a reference the result holds) */
    enum kevo_verdict verdict;
    const char *message;           /* borrowed; "" when none */
    json_t *evidence;              /* borrowed; NULL when absent */
    int n_wl;
    struct kevo_result_wl *wl;     /* owned */
    int n_res;
    struct kevo_result_res *res;   /* owned */
    double request_s;              /* the controller's wall time for the request; 0: unknown */
};

/*
 * Decode doc (borrowed; the result takes its own reference). KEVO_ERR_PARSE with *out_msg
 * (kevo_free) naming the field when doc is not an eval result: not an object, no verdict
 * (of the result or of a workload), an unknown verdict name, a workload without an integer
 * index >= 0, `workloads` not an array. KEVO_ERR_NOMEM (*out_msg NULL) when out of memory.
 * *out and *out_msg are cleared first; *out is left clear on failure. Extra fields (`path`,
 * `holdout`, ...) are ignored. Free with kevo_result_clear.
 */
KEVO_NODISCARD enum kevo_status kevo_result_decode(json_t *doc, struct kevo_result *out,
                                                   char **out_msg);
void kevo_result_clear(struct kevo_result *r);   /* NULL and cleared results: no-op */

/* The workload with task index `index`, or NULL. */
const struct kevo_result_wl *kevo_result_wl_at(const struct kevo_result *r, int index);

/*
 * A result document kevo writes itself, for a candidate that never reached a worker's
 * verdict (a worker that hung or died, a reply that could not be read): {"verdict":
 * kevo_verdict_name(v), "message": msg, "evidence": evidence}; evidence is taken (may be
 * NULL: {}). New reference; NULL when out of memory.
 */
json_t *kevo_result_doc_new(enum kevo_verdict v, const char *msg, json_t *evidence);

#endif

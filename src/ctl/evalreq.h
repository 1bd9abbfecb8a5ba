/*
 * evalreq - the controller's side of one evaluation: build the worker's eval request
 * (src/worker/worker.c reads it; docs/eval-json.md), send it on a pool slot with its deadline,
 * and unwrap the result: as the JSON document, or decoded (core/result.h) for code that
 * decides on the verdict. Shared by `kevo eval`, `kevo bench` (through kevo_eval_json) and
 * `kevo run`. Every request carries a fresh secret seed the proposer never sees.
 */
#ifndef KEVO_EVALREQ_H
#define KEVO_EVALREQ_H

#include "kevo.h"
#include "core/result.h"
#include "ctl/pool.h"
#include <jansson.h>
#include <stdint.h>

struct kevo_eval_call {
    const char *task_path, *task_text;
    const char *cand_path, *cand_text;   /* cand_text NULL: the reference itself */
    int trials;
    int holdout;                          /* run the holdout workloads only */
    int timed;                            /* time it (never with holdout) */
    int time_reference;                   /* time the reference interleaved with it */
    int profile;                          /* an ok candidate's counters, in the worker */
    double profile_below_s;               /* ... only when the geometric mean of its timed
                                             medians is below this (0: always) */
    double time_cap_s;
    json_t *sol;                          /* borrowed: the speed-of-light figures */
    const char *dump_dir;                 /* NULL, or an absolute directory */
};

/* A secret 64-bit seed from the OS (getrandom), never shown to a proposer. */
uint64_t kevo_secret_seed(void);

/*
 * One evaluation on pool slot `slot`. KEVO_OK: *out_result is the result object (new
 * reference) with `request_s` added - a candidate's failure is its verdict inside it. A
 * non-OK status means kevo could not evaluate (a worker that cannot start, a reply that is
 * not a result), with *out_msg set (kevo_free it).
 */
KEVO_NODISCARD enum kevo_status kevo_evalreq_call(struct kevo_pool *pool, int slot,
                                                  const struct kevo_eval_call *c,
                                                  double deadline_s, json_t **out_result,
                                                  char **out_msg);
/*
 * The same, decoded: KEVO_OK with *out the result (its doc has `request_s`; clear it with
 * kevo_result_clear). A result that does not decode (no verdict, an unknown one, a
 * workload without an index) is the worker's fault, not the candidate's: KEVO_ERR_WORKER
 * with *out_msg naming the field. *out is cleared first and left clear on failure.
 */
KEVO_NODISCARD enum kevo_status kevo_evalreq_call_result(struct kevo_pool *pool, int slot,
                                                         const struct kevo_eval_call *c,
                                                         double deadline_s,
                                                         struct kevo_result *out,
                                                         char **out_msg);

/* The calibration of the device behind slot (measured, or the worker's cached one). */
KEVO_NODISCARD enum kevo_status kevo_evalreq_calibrate(struct kevo_pool *pool, int slot,
                                                       const char *backend, int force,
                                                       double deadline_s, json_t **out_calib,
                                                       char **out_msg);

#endif

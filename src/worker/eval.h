/*
 * eval - the worker-side evaluation of one candidate (or the task's reference) against a
 * task: compile both, run the correctness protocol on each requested workload, time them,
 * and produce a result document. Runs inside the worker process, on an open backend.
 * Protocol: docs/harness.md; result schema: docs/eval-json.md.
 *
 * A candidate's failure is a verdict in the result, never a non-OK status. Non-OK statuses
 * mean the evaluation itself could not run (bad request, out of memory) -- except
 * KEVO_ERR_DEVICE: the device context is lost; the result is still filled (verdict crash)
 * and the caller must exit so the process can be restarted.
 */
#ifndef KEVO_EVAL_H
#define KEVO_EVAL_H

#include "worker/backend.h"
#include "core/sol.h"
#include "kevo.h"
#include <jansson.h>
#include <stdint.h>

/*
 * One request, as decoded from the worker protocol. Texts are borrowed.
 * JSON form (keys): task_path, task_text, cand_path, cand_text (absent: the reference is
 * the candidate), params ([int...] or absent), seed (uint64 as a string of decimal digits,
 * secret), trials, holdout (0: visible workloads, 1: holdout only), timing (0/1),
 * time_cap_s, time_reference (0/1), sol {bw, peaks{unit:value}, launch_floor_s},
 * dump_dir (a directory: evaluating the reference itself, trial 0 of each workload is
 * written there, see eval_dump.c).
 */
struct kevo_eval_req {
    const char *task_path, *task_text;
    const char *cand_path, *cand_text;      /* NULL: evaluate the reference itself */
    int n_params;
    const int64_t *params;                  /* NULL: defaults */
    uint64_t seed;
    int trials;                             /* >= 3 */
    int holdout;
    int timing;
    double time_cap_s;                      /* per workload and per kernel; 0 = default 2 s */
    int time_reference;                     /* also time the reference, interleaved */
    int profile;                            /* an ok candidate's hardware counters ... */
    double profile_below_s;                 /* ... when the geometric mean of its timed
                                               medians is below this (0: always) */
    struct kevo_sol_figures sol;
    const char *dump_dir;                   /* NULL: no dump */
};

KEVO_NODISCARD enum kevo_status kevo_eval_req_from_json(json_t *j, struct kevo_eval_req *out,
                                                        char **out_msg);

/*
 * Evaluate. *out_result is a new JSON object (caller json_decref's) on KEVO_OK and on
 * KEVO_ERR_DEVICE. Fields: verdict, message, evidence{...}, compile_log, resources[...],
 * workloads[{sizes, verdict, evidence, time{median_s,min_s,p20_s,p80_s,noise,count,capped,
 * batch,sm_clock_mhz}, ref_time{...}, speedup, gbps, tflops, t_sol_s, sol_fraction}].
 */
KEVO_NODISCARD enum kevo_status kevo_eval_run(struct kevo_backend *b,
                                              const struct kevo_eval_req *req,
                                              json_t **out_result);

#endif

/*
 * profile - hardware counters of a candidate's kernels, for verdicts and prompts
 * (docs/eval-json.md "profile"). This first collector runs Nsight Compute's CLI (ncu) on a
 * verification-only `kevo eval` of the candidate, in a child process of the controller,
 * and parses its CSV; the worker's CUPTI collector (worker/eval_profile.c) fills the same
 * object with "tool": "cupti", from the same counters (core/counters.h). The object:
 *
 *   {"tool": "ncu", "kernels": [{"name", "grid": [x,y,z], "block": [x,y,z], "launches",
 *    "time_us", "dram_gbps", "dram_pct_of_peak", "l2_hit_pct", "l1_hit_pct", "sm_pct",
 *    "tensor_pct", "achieved_occupancy_pct", "spill_bytes",
 *    "stalls": [{"reason", "per_issue"}, ...]}], "workload", "launch_count", "cost_s",
 *    "diagnosis", ("note"), or {"tool", "error", "cost_s"} when collecting failed}
 *
 * One kernel entry per (name, grid, block), each figure the median over its launches and
 * absent where the counter was not available. The controller never runs candidate code
 * itself: the profiled process is kevo's own `eval` command, whose worker runs it as any
 * evaluation does. Pure functions (parse, diagnose, text) are thread-safe; collect forks.
 */
#ifndef KEVO_PROFILE_H
#define KEVO_PROFILE_H

#include "kevo.h"
#include "base/buf.h"
#include "core/task.h"
#include <jansson.h>
#include <stddef.h>

/* The diagnosis's thresholds: a unit at or above this percentage of its peak bounds the
 * kernel; tensor pipes below the idle one are "idle". */
#define KEVO_PROFILE_BOUND_PCT 60.0
#define KEVO_PROFILE_TENSOR_IDLE_PCT 5.0
#define KEVO_PROFILE_MAX_STALLS 4          /* stall reasons kept per kernel, largest first */

/*
 * The CSV ncu writes with --csv (--log-file) into a profile object {"tool": "ncu",
 * "kernels": [...]} (*out, json_decref it). Lines before the "ID" header and ncu's own
 * ("==PROF== ...", "==WARNING== ...") are skipped; values may carry thousands separators,
 * "n/a" is an absent value, times and byte counts are converted from the unit given.
 * A header with no row gives an empty "kernels". Malformed text is KEVO_ERR_INVALID with
 * *out_msg (kevo_free) naming the line; never a crash.
 */
KEVO_NODISCARD enum kevo_status kevo_profile_parse_ncu(const char *csv_text, json_t **out,
                                                       char **out_msg);

/*
 * The worker's raw profile (collected in-process through CUPTI: {"tool": "cupti",
 * "launches": [{"name", "grid", "block", "m": {metric: value}}], "workload", "passes",
 * "cost_s"}) as a profile object like kevo_profile_parse_ncu's, "tool": "cupti", with
 * its other fields kept and a "diagnosis" added. *out: json_decref; KEVO_ERR_INVALID with
 * *out_msg (kevo_free) when raw has no usable launches.
 */
KEVO_NODISCARD enum kevo_status kevo_profile_from_worker(const json_t *raw, json_t **out,
                                                         char **out_msg);

/*
 * One line for a person or a prompt about the kernel that takes most of the profiled
 * time: "memory-bound: DRAM at 91% of peak (3.1 TB/s), L2 hit 35%; top stalls:
 * long_scoreboard 120.1, drain 2.6", "compute-bound: SM at 71%, tensor pipes idle (0.8%);
 * occupancy 36%; ...", or "latency-bound: neither DRAM (8%) nor SM (32%) busy; ...";
 * with spills when there are any. Bound means at least KEVO_PROFILE_BOUND_PCT of peak
 * (DRAM throughput first when both are). Always NUL-terminates buf (n > 0).
 */
void kevo_profile_diagnose(const json_t *profile, char *buf, size_t n);

/*
 * The profile as a few lines for an LLM prompt (the {{profile}} placeholder): what was
 * profiled, the diagnosis and each kernel's counters, each line ending in '\n'. Nothing
 * for NULL, a failed profile or one without kernels.
 */
void kevo_profile_text(const json_t *profile, struct kevo_buf *b);

/*
 * Where ncu is: $KEVO_NCU when set (it must be an executable file), else the first of
 * $PATH, $CUDA_HOME/bin, the toolkit kevo was built with, /usr/local/cuda/bin.
 * *out_path (kevo_free) or KEVO_ERR_NOTFOUND with *out_msg "profile: ncu not found
 * (install Nsight Compute or set KEVO_NCU)".
 */
KEVO_NODISCARD enum kevo_status kevo_profile_find_ncu(char **out_path, char **out_msg);

struct kevo_profile_req {
    const char *task_path, *cand_path;   /* as the profiled `kevo eval` gets them */
    const struct kevo_task *task, *cand; /* the same, parsed: kernel names, workloads */
    const char *backend;                 /* "cuda" or "cpu"; NULL: the task's language */
    int device;                          /* the GPU */
    const char *ncu;                     /* (optional) ncu's path; NULL: kevo_profile_find_ncu */
    const char *exe;                     /* (optional) the kevo binary; NULL:
                                            $KEVO_WORKER_EXE, else this executable */
    double eval_deadline_s;              /* the profiled eval's --deadline; 0: 300 */
    double deadline_s;                   /* wall limit of the whole ncu run; 0: 2 x eval's
                                            deadline + 120 s */
};

/*
 * Profile req->cand: run ncu (fork + execvp, never a shell; its own process group, killed
 * whole at the deadline; output in a temporary directory, removed after) on
 * `EXE eval --no-timing --trials 3 --deadline S --backend cuda --device N TASK CAND`, with
 * only the candidate's kernels counted (-k regex:^(k1|k2)$) and --launch-count twice its
 * launch lines: runs A and B of the first visible workload's first trial. *out (json_decref)
 * is the parsed profile plus "workload" {"index", "sizes"}, "launch_count", "cost_s" (wall
 * seconds), "diagnosis", and "note" when the reference has a kernel of the same name (its
 * launches may then be among those counted). A CPU evaluation has no counters: KEVO_OK with
 * *out NULL. KEVO_ERR_NOTFOUND when ncu is absent, KEVO_ERR_TIMEOUT past the deadline,
 * KEVO_ERR_WORKER when ncu counted no launch (its output's last lines in the message);
 * *out_msg (kevo_free) says why, starting "profile: ".
 */
KEVO_NODISCARD enum kevo_status kevo_profile_collect(const struct kevo_profile_req *req,
                                                     json_t **out, char **out_msg);

/* 1 when an ok entry of cands has no profile the worker collected (kevo_profile_cands
 * then runs ncu, which needs the device to itself). */
int kevo_profile_missing(const json_t *cands);

/*
 * `kevo eval --profile`: for each entry of cands (the eval document's "candidates") whose
 * verdict is ok and whose "profile" the worker could not collect (absent, or with an
 * "error": kept as "cupti_error"), load its "path" as a candidate of task, collect its
 * profile through ncu with base's settings and set it as the entry's "profile"; a
 * collection that fails sets {"tool": "ncu", "error", "cost_s"} there instead (the
 * evaluation stands). Returns the seconds spent profiling, the worker's included.
 */
double kevo_profile_cands(const struct kevo_profile_req *base, json_t *cands);

#endif

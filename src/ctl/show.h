/*
 * show - candidates as a person reads them (show.c): one candidate with its source, log and
 * evidence (kevo.h: kevo_show_json, `kevo show`), every candidate of a run
 * (kevo_runs_cands_json, `kevo runs ID --candidates`), and the pieces `kevo run` uses for
 * its events and report: a candidate named by its id, never by the scratch name its worker
 * compiled it under, the first lines of its compile log, its figures per workload.
 */
#ifndef KEVO_SHOW_H
#define KEVO_SHOW_H

#include "kevo.h"
#include <jansson.h>
#include <stdint.h>

/*
 * The message of candidate id's eval result (docs/eval-json.md) for a person: "candidate
 * ID does not compile" for a compile error, else the worker's message with the run's
 * scratch directory ("run7/" of older archives) taken out of the names it gives. kevo_free
 * it; NULL when out of memory.
 */
char *kevo_show_message(int64_t id, const json_t *result);

/* The first n non-blank lines of the result's compile log, as a new JSON array of
 * strings ([] when it has none); *more gets how many lines were left out. */
json_t *kevo_show_log_head(const json_t *result, int n, int *more);

/*
 * A candidate's figures per workload from its metrics (the archive's metrics_json text)
 * and the reference's eval workloads (ref: [{index, sizes, time: {median_s}}], or NULL):
 * a new array of {index, sizes (null when ref does not say), time_s, sol_fraction,
 * speedup (the reference's median over the candidate's; null when either is unknown)}.
 */
json_t *kevo_show_workloads(const char *metrics_json, const json_t *ref);

#endif

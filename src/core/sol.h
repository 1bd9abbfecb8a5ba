/*
 * sol - speed of light, the arithmetic both sides share: the figures of a calibration
 * (measured in the worker by worker/calibrate.h, cached per device), their two JSON forms
 * (the calibration document and the "sol" object of an eval request), and the floor of a
 * workload:
 *   T_sol = max(bytes / BW, flops / peak(unit), launch floor)
 * Pure functions; thread-safe.
 */
#ifndef KEVO_SOL_H
#define KEVO_SOL_H

#include "kevo.h"
#include "core/task.h"
#include <jansson.h>

/* Speed-of-light figures of the device (from calibration); 0 means unknown. */
struct kevo_sol_figures {
    double bw_bytes_per_s;                 /* achievable DRAM bandwidth */
    double peak_flops[KEVO_UNIT_COUNT];    /* per unit (enum kevo_unit) */
    double launch_floor_s;                 /* empty-kernel time under the same protocol */
    double launch_gap_s;                   /* kernel timestamps (CUPTI): the launch latency
                                              added to each pass's span; 0 = unknown */
    double margin;                         /* how far below the floor a time may fall before
                                              it is `implausible` (relative); 0 = default */
};

/* Extract the figures eval needs from a calibration object or a request's "sol" object
 * (missing entries are 0). */
void kevo_sol_figures_from_json(json_t *calib, struct kevo_sol_figures *out);
/* The "sol" object of an eval request from figures (new reference; NULL: out of memory). */
json_t *kevo_sol_figures_to_json(const struct kevo_sol_figures *f);
/* T_sol in seconds for a workload; units with no known peak contribute nothing. */
double kevo_sol_floor(const struct kevo_sol_figures *f, double bytes, double flops,
                      enum kevo_unit unit);

/* v when it is a positive finite number, else 0 (unknown). */
double kevo_sol_positive(double v);
/* Adds key:v, or nothing when v is not positive (unknown). -1 on out of memory. */
int kevo_sol_set_positive(json_t *o, const char *key, double v);

#endif

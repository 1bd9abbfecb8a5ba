/*
 * sol - speed of light: calibrate this device's achievable DRAM bandwidth (read, write and
 * copy kernels) and peak throughput per unit (fp32 FMA; fp16/bf16/tf32 tensor cores where
 * the device has them), cache the figures per device, and compute the floor of a task:
 *   T_sol = max(bytes / BW, flops / peak(unit), launch floor)
 * The calibration kernels are real files: kernels/calibrate.cu (CUDA) and
 * kernels/calibrate_cpu.c (CPU), embedded at build time (build/gen/NAME.inc).
 *
 * Cache: $XDG_CACHE_HOME/kevo/calibration/<device>.json (default ~/.cache/kevo/...;
 * KEVO_CACHE_DIR overrides the kevo cache root), written atomically.
 */
#ifndef KEVO_SOL_H
#define KEVO_SOL_H

#include "worker/backend.h"
#include "worker/eval.h"
#include "kevo.h"
#include <jansson.h>

/*
 * Measure (or load from the cache unless force) and return a JSON object:
 * {device{name,arch,sms,l2_bytes,clock_mhz,...}, bandwidth{read,write,copy,best} (bytes/s),
 *  peaks{fp32,fp64,tf32,fp16,bf16,fp8: flops/s, measured and "used"}, launch_floor_s,
 *  cached: bool, measured_at: ISO date}.
 * Runs in the worker (it launches kernels).
 */
KEVO_NODISCARD enum kevo_status kevo_sol_calibrate(struct kevo_backend *b, int force,
                                                   json_t **out, struct kevo_buf *err);
/* Extract the figures eval needs from a calibration object (missing entries are 0). */
void kevo_sol_figures_from_json(json_t *calib, struct kevo_sol_figures *out);
/* Fill the "sol" object of an eval request from figures. */
json_t *kevo_sol_figures_to_json(const struct kevo_sol_figures *f);
/* T_sol in seconds for a workload; units with no known peak contribute nothing. */
double kevo_sol_floor(const struct kevo_sol_figures *f, double bytes, double flops,
                      enum kevo_unit unit);

#endif

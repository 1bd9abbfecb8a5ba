/*
 * calibrate - measure this device's achievable DRAM bandwidth (read, write and copy
 * kernels) and peak throughput per unit (fp32 FMA; fp16/bf16/tf32 tensor cores where the
 * device has them) and its launch floor, through the backend; cache the figures per device.
 * Runs in the worker (it launches kernels); core/sol.h reads the figures.
 *
 * Cache: $XDG_CACHE_HOME/kevo/calibration/<device>.json (default ~/.cache/kevo/...;
 * KEVO_CACHE_DIR overrides the kevo cache root), written atomically.
 */
#ifndef KEVO_CALIBRATE_H
#define KEVO_CALIBRATE_H

#include "kevo.h"
#include "base/buf.h"
#include "worker/backend.h"
#include <jansson.h>

/*
 * Measure (or load from the cache unless force) and return a JSON object:
 * {device{name,arch,sms,l2_bytes,clock_mhz,...}, bandwidth{read,write,copy,best} (bytes/s),
 *  peaks{fp32,fp64,tf32,fp16,bf16,fp8: flops/s, measured and "used"}, launch_floor_s,
 *  cached: bool, measured_at: ISO date}. Failure reasons go to *err.
 */
KEVO_NODISCARD enum kevo_status kevo_calibrate_run(struct kevo_backend *b, int force,
                                                   json_t **out, struct kevo_buf *err);

#endif

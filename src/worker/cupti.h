/*
 * cupti - NVIDIA's profiling interface (CUPTI), loaded at run time with dlopen, for what the
 * driver API cannot give the CUDA backend:
 *  - each kernel's start and end as the GPU stamps them (activity records of kind
 *    CONCURRENT_KERNEL): the clock behind Nsight Compute's gpu__time_duration, with no
 *    event-record overhead, no launch gaps and no poison fills to subtract around a batch;
 *  - hardware counters of each kernel launch (the range profiler of CUDA 12.6+: user
 *    ranges, user replay), evaluated to metric values on the host.
 * Nothing links -lcupti: without libcupti, or when CUPTI is already taken (a process run
 * under ncu or nsys), kevo_cupti_open fails with a message and the backend times with
 * events and leaves hardware counters to ncu's CLI (ctl/profile.h).
 *
 * One per process (CUPTI's activity callbacks are process-wide; the worker has one CUDA
 * context). Not thread-safe, except for the buffer callbacks CUPTI calls from its own thread.
 */
#ifndef KEVO_CUPTI_H
#define KEVO_CUPTI_H

#include "base/buf.h"
#include "kevo.h"
#include <cuda.h>
#include <stdint.h>

struct kevo_cupti;   /* opaque */

/*
 * Load libcupti ($KEVO_CUPTI: its path, or "0" for none; else the loader's search path,
 * then the toolkit kevo was built with) and start recording kernel activity in ctx.
 * KEVO_ERR_NOTFOUND when there is no libcupti or KEVO_CUPTI=0, KEVO_ERR_CUDA when CUPTI
 * refuses (busy, too old), with *err saying which. *out: kevo_cupti_close.
 */
KEVO_NODISCARD enum kevo_status kevo_cupti_open(CUcontext ctx, int device, struct kevo_cupti **out,
                                                struct kevo_buf *err);
void kevo_cupti_close(struct kevo_cupti *c);

/* One kernel that ran: the GPU's timestamps (ns) and the launch's correlation id. */
struct kevo_cupti_kernel {
    uint64_t start, end;
    uint32_t corr;
};

/*
 * Stop (on = 0) or restart (on = 1) recording kernels. CUPTI's concurrent-kernel tracing
 * instruments the kernel code to stamp it (NVIDIA: "CUPTI instruments the kernel code to
 * capture the timing information"; on an H100 about 9 more instructions per warp: vadd 64M
 * issued 32.0 M warp instructions under tracing, 27.3 M under ncu, with the stall ratios
 * moved by up to 40 %, bench/results/2026-11-25-h100-stall-probe/), so hardware counters
 * are collected with it stopped. Call with the device idle; kernels run meanwhile are
 * never recorded.
 */
KEVO_NODISCARD enum kevo_status kevo_cupti_trace(struct kevo_cupti *c, int on, struct kevo_buf *err);

/* Forget every kernel recorded so far. Call with the device idle (after a sync). */
KEVO_NODISCARD enum kevo_status kevo_cupti_mark(struct kevo_cupti *c, struct kevo_buf *err);

/*
 * The kernels that ran since the last mark, in launch order (*out borrowed until the next
 * call; *n of them). Call with the device idle. KEVO_ERR_CUDA when records were dropped
 * (the caller must not trust the list) or flushing failed.
 */
KEVO_NODISCARD enum kevo_status kevo_cupti_kernels(struct kevo_cupti *c,
                                                   const struct kevo_cupti_kernel **out, int *n,
                                                   struct kevo_buf *err);

/*
 * Pure: the sum over passes p, in seconds, of end(k[last[p]]) - start(k[first[p]]) plus
 * launch_s: a pass's kernels as the GPU stamps them, plus the device's launch latency,
 * which a kernel's own start..end leaves out and Nsight Compute's gpu__time_duration
 * counts (~1.1-1.3 us on an H100 or H200; the CUDA backend measures it on an isolated
 * launch, kevo_cupti_gap the back-to-back figure beside it). Passes with first[p] < 0 are
 * skipped; -1 when an index is out of [0, n) or a span is negative.
 */
double kevo_cupti_spans(const struct kevo_cupti_kernel *k, int n, const int *first,
                        const int *last, int n_pass, double launch_s);

/* Pure: the median, in seconds, of the idle gaps start(k[i]) - end(k[i-1]) for i in
 * (from, to): kernels launched back to back, where part of each launch overlaps the kernel
 * before it. -1 if none. */
double kevo_cupti_gap(const struct kevo_cupti_kernel *k, int from, int to);

/* Pure: the launch latency a pass adds, in seconds: iso_s (an isolated launch's, as ncu
 * counts it) when it is in [0, 100 us), else b2b_s (back to back) when that is; -1 when
 * neither is (NaN included): the clock cannot be trusted. */
double kevo_cupti_pick_latency(double iso_s, double b2b_s);

/* ---- hardware counters (range profiler) ---- */

struct kevo_cupti_prof;   /* opaque: a configured collection */

/*
 * Configure the collection of metrics (perfworks names, as ncu --metrics takes them) over
 * n_ranges ranges per pass. A metric the device does not know is left out (its values are
 * NaN); KEVO_ERR_NOTFOUND when none is known. *out: kevo_cupti_prof_close.
 */
KEVO_NODISCARD enum kevo_status kevo_cupti_prof_open(struct kevo_cupti *c,
                                                     const char *const *metrics, int n_metrics,
                                                     int n_ranges, struct kevo_cupti_prof **out,
                                                     struct kevo_buf *err);
/* One pass: start; launch (each kernel is a range of its own: auto ranges); stop says
 * whether every pass is done. */
KEVO_NODISCARD enum kevo_status kevo_cupti_prof_start(struct kevo_cupti_prof *p, struct kevo_buf *err);
KEVO_NODISCARD enum kevo_status kevo_cupti_prof_stop(struct kevo_cupti_prof *p, int *all_done,
                                                     struct kevo_buf *err);
/* After the last pass: decode; *n_ranges profiled. */
KEVO_NODISCARD enum kevo_status kevo_cupti_prof_decode(struct kevo_cupti_prof *p, int *n_ranges,
                                                       struct kevo_buf *err);
/* values[n_metrics] of range r, NaN for a metric left out. */
KEVO_NODISCARD enum kevo_status kevo_cupti_prof_values(struct kevo_cupti_prof *p, int r,
                                                       double *values, struct kevo_buf *err);
void kevo_cupti_prof_close(struct kevo_cupti_prof *p);

#endif

/*
 * par - split a loop over [0, n) into chunks run on a few threads. The worker generates
 * inputs and compares outputs of up to billions of elements per trial; one core makes
 * that the slowest part of an evaluation, so the element loops of verify run here.
 * Threads are plain pthreads (no OpenMP in the worker: a fork after libgomp has started
 * its pool deadlocks, and the CPU backend forks).
 */
#ifndef KEVO_PAR_H
#define KEVO_PAR_H

#include <stdint.h>

#define KEVO_PAR_MAX 16

/* Number of chunks kevo_par_for will use for n elements (1 for small n). */
int kevo_par_chunks(int64_t n);

/*
 * Call fn(ctx, c, lo, hi) for each chunk c in [0, kevo_par_chunks(n)), covering [0, n) in
 * order; chunk boundaries are multiples of `align` (>= 1). Chunks may run concurrently;
 * returns when all are done. Falls back to running inline if a thread cannot start.
 */
void kevo_par_for(int64_t n, int64_t align, void (*fn)(void *ctx, int c, int64_t lo, int64_t hi),
                  void *ctx);

#endif

/*
 * calibrate_cpu.c - the CPU backend's counterpart of kernels/calibrate.cu: functions that
 * `kevo calibrate` times to measure this machine's memory bandwidth, fp32 FMA peak and
 * call floor (src/sol.c). The CPU backend builds it with the system compiler into a shared
 * object and calls each function through its `call` shim; src/sol.c asks for
 * -O3 -march=native -fopenmp and passes CAL_CPU_ACC as a -D define.
 *
 * By hand: cc -O3 -march=native -fopenmp -shared -fPIC -o /tmp/cal.so kernels/calibrate_cpu.c
 *
 * Functions (n counts floats; every buffer is 64-byte aligned by the backend's arena):
 *   bw_read(x, sink, n)        sums x[0..n); stores the sum in sink[0].   Bytes: 4*n.
 *   bw_write(y, n)             y[i] = (float)(i & 0xffffff).               Bytes: 4*n.
 *   bw_copy(x, y, n)           y = x.                                      Bytes: 8*n.
 *   empty(sink)                nothing: its time is the call floor.
 *   fma_fp32(out, n_items, iters)
 *                              n_items independent work items, each with CAL_CPU_ACC
 *                              accumulators updated by one FMA per iteration.
 *                              FLOPs = 2 * CAL_CPU_ACC * iters * n_items.
 *
 * OpenMP spreads every loop over all cores; without -fopenmp the pragmas are ignored and
 * the functions still compute the same thing on one core. The reduction keeps CAL_CPU_SUM
 * partial sums per chunk so it vectorizes without -ffast-math.
 */
#include <stddef.h>

#ifndef CAL_CPU_ACC
#define CAL_CPU_ACC 192        /* accumulators per work item; the FLOP count depends on it */
#endif
/* Accumulators live in registers in parts of 12 vectors: enough independent chains to hide
 * the FMA latency on two pipes, few enough not to spill (32 vector registers with AVX-512,
 * 16 without). The part size changes the schedule, never the FLOP count. */
#if defined(__AVX512F__)
#define CAL_CPU_PART 192
#elif defined(__AVX__)
#define CAL_CPU_PART 96
#else
#define CAL_CPU_PART 48
#endif
_Static_assert(CAL_CPU_ACC % CAL_CPU_PART == 0, "CAL_CPU_ACC must be a multiple of the part");
#define CAL_CPU_SUM 32         /* partial sums per chunk in bw_read */
#define CAL_CPU_CHUNK 16384L   /* floats per OpenMP work unit (64 KiB) */

void bw_read(const float *x, float *sink, long n)
{
    long n_chunks = (n + CAL_CPU_CHUNK - 1) / CAL_CPU_CHUNK;
    float total = 0.0f;

#pragma omp parallel for reduction(+ : total) schedule(static)
    for (long c = 0; c < n_chunks; c++) {
        long lo = c * CAL_CPU_CHUNK;
        long hi = lo + CAL_CPU_CHUNK < n ? lo + CAL_CPU_CHUNK : n;
        float acc[CAL_CPU_SUM] = {0.0f};
        long i = lo;
        for (; i + CAL_CPU_SUM <= hi; i += CAL_CPU_SUM)
            for (int j = 0; j < CAL_CPU_SUM; j++)   // lanes are independent: vectorizes
                acc[j] += x[i + j];
        for (; i < hi; i++)
            acc[0] += x[i];
        for (int j = 0; j < CAL_CPU_SUM; j++)
            total += acc[j];
    }
    sink[0] = total;                                // keeps every load alive
}

void bw_write(float *y, long n)
{
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        y[i] = (float)(i & 0xffffff);               // index-derived: no memset shortcut
}

void bw_copy(const float *x, float *y, long n)
{
#pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
        y[i] = x[i];
}

void empty(float *sink)
{
    (void)sink;
}

void fma_fp32(float *out, long n_items, long iters)
{
#pragma omp parallel for schedule(static)
    for (long w = 0; w < n_items; w++) {
        const float b = 0.999f, c = 1.0e-3f;         // |a| stays bounded: no denormals
        float t = 0.0f;
        for (int p = 0; p < CAL_CPU_ACC; p += CAL_CPU_PART) {
            float a[CAL_CPU_PART];
            for (int j = 0; j < CAL_CPU_PART; j++)
                a[j] = (float)(w + p + j) * 1.0e-3f;
            for (long it = 0; it < iters; it++)
                for (int j = 0; j < CAL_CPU_PART; j++)   // independent lanes: vector FMAs
                    a[j] = __builtin_fmaf(a[j], b, c);
            for (int j = 0; j < CAL_CPU_PART; j++)
                t += a[j];
        }
        out[w] = t;
    }
}

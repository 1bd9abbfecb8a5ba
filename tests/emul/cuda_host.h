/*
 * cuda_host - just enough of CUDA, on the host, to compile and run the verification
 * kernels of kernels/harness.cu (with KEVO_HARNESS_ON_HOST): the qualifiers, the thread
 * and block indices, __syncthreads, the rounding intrinsics and atomicMin.
 *
 * launch() runs a grid block after block; the threads of a block are real threads (a
 * std::barrier is __syncthreads), so the judge's shared-memory tree runs as on a GPU.
 * What it cannot check: CUDA's math library (log, sincos may differ from glibc's in the
 * last bit) and NVRTC's code generation. Those need the GPU (test_backend_cuda).
 */
#ifndef KEVO_CUDA_HOST_H
#define KEVO_CUDA_HOST_H

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#define __device__ static
#define __global__
#define __forceinline__ inline
#define __shared__ static   /* one block runs at a time */

struct kevo_dim3 {
    unsigned x, y, z;
};
static thread_local kevo_dim3 threadIdx, blockIdx;
static kevo_dim3 blockDim, gridDim;
static std::barrier<> *kevo_block_barrier;

static inline void __syncthreads() { kevo_block_barrier->arrive_and_wait(); }

/* One rounding each: volatile keeps the compiler from fusing them (and -ffp-contract=off). */
static inline double __dmul_rn(double a, double b) { volatile double r = a * b; return r; }
static inline double __dadd_rn(double a, double b) { volatile double r = a + b; return r; }
static inline double __dsub_rn(double a, double b) { volatile double r = a - b; return r; }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline long long __double_as_longlong(double d)
{
    long long v;
    memcpy(&v, &d, 8);
    return v;
}
static inline double __longlong_as_double(long long v)
{
    double d;
    memcpy(&d, &v, 8);
    return d;
}
static inline unsigned __float_as_uint(float f)
{
    unsigned v;
    memcpy(&v, &f, 4);
    return v;
}
static inline float __uint_as_float(unsigned v)
{
    float f;
    memcpy(&f, &v, 4);
    return f;
}
static inline float __double2float_rn(double d) { return (float)d; }
static inline double __ll2double_rn(long long v) { return (double)v; }
static inline unsigned long long atomicMin(unsigned long long *p, unsigned long long v)
{
    unsigned long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST,
                                                 __ATOMIC_SEQ_CST)) {
    }
    return o;
}
using std::fabs;
using std::frexp;
using std::isfinite;
using std::isinf;
using std::isnan;
using std::ldexp;
using std::llround;
using std::log;
using std::rint;
using std::signbit;
#define sincos(x, s, c) (*(s) = std::sin(x), *(c) = std::cos(x))

/* Run f as a grid of `grid` blocks of `block` threads. The threads live for the whole
 * grid and meet at a barrier between blocks (so shared memory is free to reuse). */
template <class F> static void launch(unsigned grid, unsigned block, F f)
{
    std::barrier<> bar((std::ptrdiff_t)block);
    std::vector<std::thread> ts;

    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    kevo_block_barrier = &bar;
    for (unsigned t = 0; t < block; t++) {
        ts.emplace_back([&, t] {
            for (unsigned b = 0; b < grid; b++) {
                blockIdx = {b, 0, 0};
                threadIdx = {t, 0, 0};
                f();
                bar.arrive_and_wait();
            }
        });
    }
    for (auto &th : ts)
        th.join();
}

#endif

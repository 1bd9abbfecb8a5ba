// kevo doc    SwiGLU gate as one streaming pass: 16-byte loads of g and u (8 bf16 each), silu
// kevo doc    and the product in float, one 16-byte store; UNROLL vectors per thread in flight.
// kevo param  THREADS 256 128 512
// kevo param  UNROLL 2 1 4
// kevo launch swiglu_fast grid=cdiv(M*N, 8*THREADS*UNROLL) block=THREADS (g, u, out, M*N)
/*
 * A candidate for tasks/level2/swiglu_bf16.cu, kept out of examples/seeds/: it is correct
 * and at ~97% of DRAM bandwidth on the primary size, but on the second (1000 x 14336, 86
 * MB) it runs below kevo's speed-of-light floor (24.5 us against 26.7 us on an H100,
 * 2026-11-25), so kevo judges it `implausible`: its 28 MB output stays in the 50 MB L2
 * (written back after the kernel ends), which the floor (every byte through DRAM) does
 * not allow for. bench/results/2026-11-25-h100-exemplars.json has its rows. It is: an
 * elementwise chain fused into one kernel reads each input once and writes the output
 * once (6 bytes per element, against 14 for the unfused reference with its float scratch).
 * The tensors are flat and 256-byte aligned, so the body runs on uint4s from element 0;
 * the last total % 8 elements are done one by one by the first threads of block 0. Each
 * thread issues all its loads (2 x UNROLL x 16 bytes) before computing.
 */
#include <cuda_bf16.h>

#ifndef THREADS
#define THREADS 256
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

__device__ __forceinline__ float silu_mul(float g, float u)
{
    return g / (1.f + __expf(-g)) * u;
}

__device__ __forceinline__ uint4 swiglu8(uint4 g, uint4 u)
{
    const __nv_bfloat162 *g2 = (const __nv_bfloat162 *)&g, *u2 = (const __nv_bfloat162 *)&u;
    uint4 o;
    __nv_bfloat162 *o2 = (__nv_bfloat162 *)&o;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float2 a = __bfloat1622float2(g2[k]), b = __bfloat1622float2(u2[k]);
        o2[k] = __floats2bfloat162_rn(silu_mul(a.x, b.x), silu_mul(a.y, b.y));
    }
    return o;
}

extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_fast(const __nv_bfloat16 *__restrict__ g, const __nv_bfloat16 *__restrict__ u,
            __nv_bfloat16 *__restrict__ out, long long total)
{
    const uint4 *g8 = (const uint4 *)g, *u8 = (const uint4 *)u;
    uint4 *o8 = (uint4 *)out;
    long long nv = total >> 3;
    long long base = (long long)blockIdx.x * THREADS * UNROLL + threadIdx.x;
    uint4 a[UNROLL], b[UNROLL];

#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
        long long i = base + (long long)j * THREADS;
        if (i < nv) {
            a[j] = __ldcs(g8 + i);
            b[j] = __ldcs(u8 + i);
        }
    }
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
        long long i = base + (long long)j * THREADS;
        if (i < nv)
            __stcs(o8 + i, swiglu8(a[j], b[j]));
    }
    if (blockIdx.x == 0 && threadIdx.x < (total & 7)) {
        long long i = 8 * nv + threadIdx.x;
        out[i] = __float2bfloat16_rn(silu_mul(__bfloat162float(g[i]), __bfloat162float(u[i])));
    }
}

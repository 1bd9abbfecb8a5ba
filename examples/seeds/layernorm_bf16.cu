// kevo doc    LayerNorm of bf16 rows read once: 16-byte loads (8 bf16) kept in registers as
// kevo doc    floats, mean and centred variance reduced from registers, one 16-byte store per 8.
// kevo param  THREADS 256 128 512
// kevo param  VPT 2 1 4
// kevo launch layernorm_fast grid=M block=THREADS (x, w, b, y, N, eps)
/*
 * An exemplar for tasks/level1/layernorm_bf16.cu (docs/playbook/row-reductions.md).
 *
 * Fast path (N % 8 == 0, so every row starts 16-byte aligned, and N <= 8 * VPT * THREADS:
 * N = 4096 at 256 x 2): each thread loads VPT uint4s (8 bf16 each), converts them to float,
 * the block reduces the sum, then the sum of (x - mean)^2 over the same registers (two
 * passes over registers, no cancellation), and writes w * (x - mean) * rstd + b rounded
 * once to bf16. Other rows (the holdout N = 5003) take a scalar three-pass path that
 * re-reads the row from L2. Statistics in float: within one bf16 step of the reference.
 */
#include <cuda_bf16.h>

#ifndef THREADS
#define THREADS 256
#endif
#ifndef VPT
#define VPT 2
#endif
#define WARPS (THREADS / 32)

__device__ __forceinline__ float block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0)
        sh[wp] = v;
    __syncthreads();
    v = lane < WARPS ? sh[lane] : 0.f;
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();   /* sh is reused by the next reduction */
    return v;
}

/* 8 bf16 of a uint4 into f[0..7] */
__device__ __forceinline__ void unpack8(uint4 u, float *f)
{
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        float2 p = __bfloat1622float2(h[k]);
        f[2 * k] = p.x;
        f[2 * k + 1] = p.y;
    }
}

__device__ void row_fast(const uint4 *x8, const uint4 *w8, const uint4 *b8, uint4 *y8, int n,
                         float eps, float *sh)
{
    float f[VPT][8];
    int n8 = n >> 3;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        int i = threadIdx.x + j * THREADS;
        uint4 u = i < n8 ? __ldcs(x8 + i) : make_uint4(0, 0, 0, 0);
        unpack8(u, f[j]);
    }
#pragma unroll
    for (int j = 0; j < VPT; j++)
#pragma unroll
        for (int k = 0; k < 8; k++)
            s += f[j][k];
    float mean = block_sum(s, sh) / (float)n;
    float q = 0.f;
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        if (threadIdx.x + j * THREADS < n8) {
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float d = f[j][k] - mean;
                q += d * d;
            }
        }
    }
    float rstd = rsqrtf(block_sum(q, sh) / (float)n + eps);
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        int i = threadIdx.x + j * THREADS;
        if (i < n8) {
            float g[8], c[8];
            unpack8(__ldg(w8 + i), g);
            unpack8(__ldg(b8 + i), c);
            uint4 o;
            __nv_bfloat162 *h = (__nv_bfloat162 *)&o;
#pragma unroll
            for (int k = 0; k < 4; k++)
                h[k] = __floats2bfloat162_rn((f[j][2 * k] - mean) * rstd * g[2 * k] + c[2 * k],
                                             (f[j][2 * k + 1] - mean) * rstd * g[2 * k + 1] +
                                                 c[2 * k + 1]);
            __stcs(y8 + i, o);
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
layernorm_fast(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ w,
               const __nv_bfloat16 *__restrict__ b, __nv_bfloat16 *__restrict__ y, int n,
               float eps)
{
    __shared__ float sh[WARPS];
    const __nv_bfloat16 *row = x + (long long)blockIdx.x * n;
    __nv_bfloat16 *out = y + (long long)blockIdx.x * n;

    if ((n & 7) == 0 && n <= 8 * VPT * THREADS) {
        row_fast((const uint4 *)row, (const uint4 *)w, (const uint4 *)b, (uint4 *)out, n, eps,
                 sh);
        return;
    }
    float s = 0.f, q = 0.f;
    for (int i = threadIdx.x; i < n; i += THREADS)
        s += __bfloat162float(row[i]);
    float mean = block_sum(s, sh) / (float)n;
    for (int i = threadIdx.x; i < n; i += THREADS) {
        float d = __bfloat162float(row[i]) - mean;
        q += d * d;
    }
    float rstd = rsqrtf(block_sum(q, sh) / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += THREADS)
        out[i] = __float2bfloat16_rn((__bfloat162float(row[i]) - mean) * rstd *
                                     __bfloat162float(w[i]) + __bfloat162float(b[i]));
}

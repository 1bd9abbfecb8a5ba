// kevo task   layernorm_bf16
// kevo doc    LayerNorm of each row of an M x N bfloat16 matrix with bf16 weight and bias:
// kevo doc    y[r,c] = (x[r,c] - mean_r) / sqrt(var_r + eps) * w[c] + b[c] (var_r biased);
// kevo doc    statistics in float or better, y rounded once to bf16 (as F.layer_norm).
// kevo tags   norm reduction bf16
// kevo size   M=16384 N=4096
// kevo size   M=4096 N=1024
// kevo holdout M=37 N=5003
// kevo input  x bf16[M,N] normal(1,2)
// kevo input  w bf16[N] uniform(0.5,1.5)
// kevo input  b bf16[N] uniform(-0.5,0.5)
// kevo output y bf16[M,N]
// kevo scalar eps f32 1e-5
// kevo bytes  4*M*N + 4*N
// kevo flops  8*M*N
// kevo torch  F.layer_norm(x, (N,), w, b, eps)
// kevo launch layernorm_ref grid=M block=256 smem=2048 (x, w, b, y, N, eps)
/*
 * layernorm_bf16 - the reference: one block per row, three passes: the mean (sum in
 * double), the biased variance as the mean of (x - mean)^2 (two-pass, in double, so no
 * cancellation), then each element normalised in double, scaled and shifted in float, and
 * rounded once to bf16. Shared-memory tree reductions use one double per thread (256
 * threads, 2048 bytes); any N works. The primary size moves 256 MiB (bf16 in and out),
 * the holdout has a prime row length so bf16x2 / 16-byte vector loads meet odd tails and
 * unaligned row starts. Inputs are normal(1,2): a nonzero mean and a non-unit spread, so
 * skipping the centring or the scaling fails, and w, b vary per column. Default bf16
 * tolerance (rtol=2e-2, atol=1e-2): outputs are ~N(b, w^2) mostly within +-5; float
 * statistics (one-pass E[x^2]-E[x]^2 included: var 4 against E[x^2] 5) differ by ~1e-6
 * relative before the final bf16 rounding, so a candidate is at most one bf16 step
 * (~0.4%) away.
 */
#include <cuda_bf16.h>

__device__ static double block_sum(double *red, double v)
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();   /* red[] is reused by the next reduction */
    return v;
}

extern "C" __global__ void layernorm_ref(const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                                         const __nv_bfloat16 *b, __nv_bfloat16 *y, int n,
                                         float eps)
{
    extern __shared__ double red[];
    const __nv_bfloat16 *row = x + (size_t)blockIdx.x * n;
    __nv_bfloat16 *out = y + (size_t)blockIdx.x * n;
    double s = 0.0, ss = 0.0;

    for (int c = threadIdx.x; c < n; c += blockDim.x)
        s += (double)__bfloat162float(row[c]);
    double mean = block_sum(red, s) / n;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        double d = (double)__bfloat162float(row[c]) - mean;
        ss += d * d;
    }
    double rstd = 1.0 / sqrt(block_sum(red, ss) / n + (double)eps);
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        float v = (float)(((double)__bfloat162float(row[c]) - mean) * rstd);
        out[c] = __float2bfloat16(v * __bfloat162float(w[c]) + __bfloat162float(b[c]));
    }
}

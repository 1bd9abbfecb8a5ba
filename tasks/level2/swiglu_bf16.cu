// kevo task   swiglu_bf16
// kevo doc    SwiGLU gate of a Llama MLP, bf16: out = silu(g) * u elementwise, silu(t) = t / (1 + exp(-t)),
// kevo doc    computed in float and rounded to bf16 once. g, u, out [M,N].
// kevo tags   elementwise activation bf16 fusion
// kevo size   M=4096 N=11008
// kevo size   M=1000 N=14336
// kevo holdout M=37 N=5003
// kevo input  g bf16[M,N] normal(0,2)
// kevo input  u bf16[M,N] normal(0,1)
// kevo output out bf16[M,N]
// kevo scratch sg f32[M,N]
// kevo tol    rtol=2e-2 atol=1e-2
// kevo bytes  6*M*N
// kevo flops  5*M*N
// kevo torch  F.silu(g) * u
// kevo launch silu_ref grid=cdiv(M*N,256) block=256 (g, sg, M*N)
// kevo launch mul_ref grid=cdiv(M*N,256) block=256 (sg, u, out, M*N)
/*
 * swiglu_bf16 - the reference, unfused as PyTorch runs it: (1) one thread per element writes
 * silu(g) (in float, to a scratch matrix); (2) one thread per element multiplies by u and
 * rounds to bf16. A fused kernel reads g and u once and writes out: 6 bytes per element.
 * Primary size: 4096 tokens of Llama-2-7B's 11008-wide MLP, 258 MiB moved; the second is
 * Llama-3-8B's 14336 width; the holdout is odd (no multiple of 2 or 8 in N).
 * Inputs: g ~ N(0,2) covers the negative (near-zero), curved and linear regions of silu; u is
 * independent, so out equals neither input.
 * Tolerance: the bf16 default; PyTorch rounds silu(g) to bf16 before the product (one extra
 * rounding, <= 0.4%), and a correct candidate using __expf differs by ~1e-6 before rounding.
 */
#include <cuda_bf16.h>

extern "C" __global__ void silu_ref(const __nv_bfloat16 *g, float *sg, long long total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total) {
        float t = __bfloat162float(g[i]);
        sg[i] = t / (1.0f + expf(-t));
    }
}

extern "C" __global__ void mul_ref(const float *sg, const __nv_bfloat16 *u, __nv_bfloat16 *out,
                                   long long total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        out[i] = __float2bfloat16(sg[i] * __bfloat162float(u[i]));
}

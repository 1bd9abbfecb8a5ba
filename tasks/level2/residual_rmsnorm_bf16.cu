// kevo task   residual_rmsnorm_bf16
// kevo doc    Pre-norm residual add + RMSNorm (Llama), bf16, two outputs: h = bf16(x + r) (the new
// kevo doc    residual stream) and y = bf16(h * rsqrt(mean(h^2 over the row) + eps) * w), where the norm
// kevo doc    is computed in float from the ROUNDED h. x, r, h, y [M,N]; w [N].
// kevo tags   norm reduction residual bf16 fusion
// kevo size   M=16384 N=4096
// kevo size   M=1000 N=5120
// kevo holdout M=37 N=5003
// kevo input  x bf16[M,N] normal(0,1)
// kevo input  r bf16[M,N] normal(0.5,2)
// kevo input  w bf16[N] uniform(0.5,1.5)
// kevo output h bf16[M,N]
// kevo output y bf16[M,N]
// kevo scalar eps f32 1e-6
// kevo tol    rtol=2e-2 atol=1e-2
// kevo bytes  8*M*N + 2*N
// kevo flops  6*M*N
// kevo torch  h = x + r
// kevo torch  hf = h.float()
// kevo torch  (h, (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(torch.bfloat16))
// kevo launch add_ref grid=cdiv(M*N,256) block=256 (x, r, h, M*N)
// kevo launch rmsnorm_bf16_ref grid=M block=256 smem=1024 (h, w, y, N, eps)
/*
 * residual_rmsnorm_bf16 - the reference, unfused: (1) one thread per element writes
 * h = bf16(x + r) (the float sum of two bf16 values, rounded once, as PyTorch's bf16 add);
 * (2) one block per row reads h back, sums the squares in float with a shared-memory tree
 * reduction (blockDim 256, one float of dynamic shared memory per thread), and writes
 * y = bf16(h * inv_rms * w) with the product in float. A fused kernel reads x and r once
 * and keeps the row on chip: 8 bytes per element in all. Primary size: 16384 tokens of a
 * 4096-wide model, 512 MiB moved.
 * Inputs: r has mean 0.5 and std 2, x std 1, so h differs from both x and r, and the rms of
 * a row (~2.3) differs from 1, so y differs from h; w varies per column.
 * Tolerance: the bf16 default (rtol=2e-2 atol=1e-2) for both outputs. h is exactly defined
 * (a correct candidate matches it bitwise); y differs between correct implementations by the
 * final bf16 rounding (one ulp) and, for PyTorch-style code that rounds h*inv_rms to bf16
 * before the weight, by one more rounding.
 */
#include <cuda_bf16.h>

extern "C" __global__ void add_ref(const __nv_bfloat16 *x, const __nv_bfloat16 *r,
                                   __nv_bfloat16 *h, long long total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        h[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(r[i]));
}

// One block per row; blockDim.x must be a power of two, smem = blockDim.x floats.
extern "C" __global__ void rmsnorm_bf16_ref(const __nv_bfloat16 *h, const __nv_bfloat16 *w,
                                            __nv_bfloat16 *y, int n, float eps)
{
    extern __shared__ float red[];
    const __nv_bfloat16 *row = h + (size_t)blockIdx.x * n;
    __nv_bfloat16 *out = y + (size_t)blockIdx.x * n;
    unsigned t = threadIdx.x;
    float ss = 0.0f;

    for (int c = t; c < n; c += blockDim.x) {
        float v = __bfloat162float(row[c]);
        ss += v * v;
    }
    red[t] = ss;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads();
    }
    float inv = rsqrtf(red[0] / (float)n + eps);
    for (int c = t; c < n; c += blockDim.x)
        out[c] = __float2bfloat16(__bfloat162float(row[c]) * inv * __bfloat162float(w[c]));
}

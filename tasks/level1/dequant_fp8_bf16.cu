// kevo task   dequant_fp8_bf16
// kevo doc    Dequantize an M x N fp8 (e4m3) matrix with a float32 scale per row to bfloat16:
// kevo doc    y[r,c] = bf16_rn(float(x[r,c]) * s[r]) (the product rounded to float32 first).
// kevo tags   quantize elementwise fp8
// kevo size   M=16384 N=8192
// kevo size   M=2048 N=5120
// kevo holdout M=37 N=5003
// kevo input  x fp8e4m3[M,N] normal(0,64)
// kevo input  s f32[M] uniform(0.001,0.01)
// kevo output y bf16[M,N]
// kevo tol    rtol=8e-3 atol=0
// kevo bytes  3*M*N + 4*M
// kevo flops  M*N
// kevo torch  (x.float() * s[:, None]).to(torch.bfloat16)
// kevo launch dequant_ref grid=cdiv(M*N,256) block=256 (x, s, y, M*N, N)
/*
 * dequant_fp8_bf16 - the reference: one thread per element (64-bit flat index): the fp8
 * value converted to float (exact), one float multiply by its row's scale (rounded to
 * float), then one round-to-nearest-even to bf16, exactly what PyTorch's x.float() * s
 * followed by .to(torch.bfloat16) does. (The product needs up to 28 significant bits, so
 * rounding it straight to bf16 can differ from this by one bf16 ulp.)
 *
 * Sizes: the primary dequantizes a 128 MiB fp8 weight matrix into 256 MiB of bf16
 * (16384 x 8192, row scales); the second is a smaller projection; the holdout has an odd
 * N (a kernel that converts 4 or 16 fp8 values at a time must handle the tail).
 *
 * Inputs: normal(0,64) rounded to e4m3 covers its exponent range from the subnormals
 * (below 2^-6, ~1e-4 of the values) to ~300 (the 448 limit is 7 std away); the scales
 * vary by row, so neither input alone resembles the output.
 * Tolerance: a candidate that follows the definition matches exactly; rtol = 8e-3 (just
 * over the 2^-7 relative size of one bf16 ulp) accepts a one-ulp difference from a
 * different but sound rounding path and nothing worse; atol = 0 because zeros are exact.
 */
#include <cuda_fp8.h>
#include <cuda_bf16.h>

extern "C" __global__ void dequant_ref(const __nv_fp8_e4m3 *x, const float *s, __nv_bfloat16 *y,
                                       long long total, int n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        y[i] = __float2bfloat16_rn((float)x[i] * s[i / n]);
}

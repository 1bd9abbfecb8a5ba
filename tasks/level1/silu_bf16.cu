// kevo task   silu_bf16
// kevo doc    SiLU (swish) elementwise on a bfloat16 vector, computed in float and rounded once
// kevo doc    to bfloat16 (round to nearest even): y = x / (1 + exp(-x)), as F.silu(x).
// kevo tags   elementwise activation bf16
// kevo size   N=67108864
// kevo size   N=1000000
// kevo holdout N=4194301
// kevo input  x bf16[N] normal(0,3)
// kevo output y bf16[N]
// kevo bytes  4*N
// kevo flops  4*N
// kevo torch  F.silu(x)
// kevo launch silu_ref grid=cdiv(N,256) block=256 (x, y, N)
/*
 * silu_bf16 - the reference: one thread per element; the bf16 input is widened to float,
 * x / (1 + expf(-x)) is evaluated in float (for x < -88 expf overflows to inf and the
 * quotient is -0, the correct limit) and rounded once to bf16. The primary size is 2^26
 * elements (128 MiB read + 128 MiB written), DRAM bound; the holdout is odd so packed
 * bf16x2 / 16-byte vector kernels must handle a tail. normal(0,3) inputs put most values in
 * the curved region (|x| < 5) and give negative outputs down to ~-0.28, so neither zeros
 * nor a copy of x passes. Default bf16 tolerance (rtol=2e-2, atol=1e-2): a candidate using
 * __expf or computing x*sigmoid(x) differs from the reference by at most one bf16 rounding
 * step (~0.4% relative).
 */
#include <cuda_bf16.h>

extern "C" __global__ void silu_ref(const __nv_bfloat16 *x, __nv_bfloat16 *y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) {
        float v = __bfloat162float(x[i]);
        y[i] = __float2bfloat16(v / (1.0f + expf(-v)));
    }
}

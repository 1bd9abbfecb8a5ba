// kevo task   scale_add_f32
// kevo doc    Fused scale-add over an M x N float32 matrix (row-major) with a per-column bias:
// kevo doc    y[r,c] = alpha*x[r,c] + beta*z[r,c] + bias[c].
// kevo tags   elementwise fused
// kevo size   M=8192 N=4096
// kevo size   M=1024 N=768
// kevo holdout M=33 N=5003
// kevo input  x f32[M,N] normal(0,1)
// kevo input  z f32[M,N] normal(1,2)
// kevo input  bias f32[N] uniform(-1,1)
// kevo output y f32[M,N]
// kevo scalar alpha f32 1.5
// kevo scalar beta f32 -0.75
// kevo bytes  12*M*N + 4*N
// kevo flops  5*M*N
// kevo torch  alpha * x + beta * z + bias
// kevo launch scale_add_ref grid=(cdiv(N,256),M) block=256 (x, z, bias, y, N, alpha, beta)
/*
 * scale_add_f32 - the reference: one thread per element, a 2-D grid (column blocks x rows)
 * so no division is needed to find the column of the bias. M stays under the grid's y limit
 * (65535) in every workload. The primary size moves 384 MiB (two 128 MiB inputs, one
 * output), DRAM bound; the holdout's N=5003 is odd and prime so vectorised kernels must
 * handle a row tail and unaligned row starts. x, z and bias have different means and
 * spreads and alpha, beta are not 1 or 0, so no single input, no unscaled sum and no
 * constant comes close. Default f32 tolerance: fma contraction or another order of the
 * three additions changes a result by ~1 ulp of the largest term (|terms| <= ~10, so
 * < 1e-6 absolute), well inside atol=1e-5 where the terms cancel.
 */
extern "C" __global__ void scale_add_ref(const float *x, const float *z, const float *bias,
                                         float *y, int n, float alpha, float beta)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    size_t i = (size_t)blockIdx.y * n + c;

    if (c < n)
        y[i] = alpha * x[i] + beta * z[i] + bias[c];
}

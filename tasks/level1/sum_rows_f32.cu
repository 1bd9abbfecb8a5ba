// kevo task   sum_rows_f32
// kevo doc    Sum over the last axis of an M x N float32 matrix (row-major): out[r] = sum_c x[r,c].
// kevo tags   reduction
// kevo size   M=8192 N=8192
// kevo size   M=1024 N=65536
// kevo holdout M=37 N=100003
// kevo input  x f32[M,N] normal(0.5,2)
// kevo output out f32[M]
// kevo tol    rtol=1e-4 atol=1e-3
// kevo bytes  4*M*N + 4*M
// kevo flops  M*N
// kevo torch  x.sum(dim=-1)
// kevo launch sum_rows_ref grid=M block=256 smem=2048 (x, out, N)
/*
 * sum_rows_f32 - the reference: one block per row; each thread accumulates a strided slice
 * of the row in double, a shared-memory tree reduction (one double per thread; the launch
 * uses 256 threads and 2048 bytes) adds the partial sums, and the double is rounded once,
 * so the reference is the most accurate party. The primary size reads 256 MiB; the second
 * has few long rows (1024 blocks of 64K elements), the holdout 37 rows of a prime length.
 * Inputs are normal(0.5,2): the row sums are ~N/2 +- 2*sqrt(N) (4096 +- 181 at N=8192), so
 * zeros and any constant are far off (relative spread 4%, 0.6% at the holdout against
 * rtol=1e-4), and no sum lands near zero. Tolerance: a float candidate's rounding error
 * grows like eps*sqrt(chain length)*|partial sum|; even one sequential float chain over a
 * whole 100003-element row stays ~1e-5 relative, and tree/warp reductions are far below
 * that, so rtol=1e-4 passes every sane order; atol=1e-3 is only a floor.
 */
extern "C" __global__ void sum_rows_ref(const float *x, float *out, int n)
{
    extern __shared__ double red[];
    const float *row = x + (size_t)blockIdx.x * n;
    unsigned t = threadIdx.x;
    double s = 0.0;

    for (int c = t; c < n; c += blockDim.x)
        s += row[c];
    red[t] = s;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k)
            red[t] += red[t + k];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = (float)red[0];
}

// kevo task   mean_rows_f32
// kevo doc    Mean over the last axis of an M x N float32 matrix (row-major):
// kevo doc    out[r] = (1/N) * sum_c x[r,c].
// kevo tags   reduction
// kevo size   M=262144 N=256
// kevo size   M=2048 N=16384
// kevo holdout M=1003 N=333
// kevo input  x f32[M,N] normal(1,2)
// kevo output out f32[M]
// kevo bytes  4*M*N + 4*M
// kevo flops  M*N
// kevo torch  x.mean(dim=-1)
// kevo launch mean_rows_ref grid=M block=256 smem=2048 (x, out, N)
/*
 * mean_rows_f32 - the reference: one block per row, each thread accumulates a strided
 * slice in double, a shared-memory tree reduction (one double per thread: 256 threads,
 * 2048 bytes) adds the partials, and sum/N is rounded once to float. The primary shape is
 * many short rows (262144 x 256, 256 MiB read): one 256-thread block per 1 KiB row leaves
 * room for warp-per-row or several-rows-per-block kernels. The second is few long rows,
 * the holdout a row length (333) that is no multiple of 4 or 32, so rows start unaligned.
 * Inputs are normal(1,2): row means are 1 +- 2/sqrt(N) (0.4..1.6 at N=256, 1 +- 0.016 at
 * N=16384), never near zero, and a constant 1.0 misses by far more than rtol. Default f32
 * tolerance (rtol=1e-4, atol=1e-5): a float candidate's summation error over at most 16384
 * terms of a positive-mean row is ~1e-6 relative, and dividing or multiplying by 1/N
 * differs by an ulp.
 */
extern "C" __global__ void mean_rows_ref(const float *x, float *out, int n)
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
        out[blockIdx.x] = (float)(red[0] / n);
}

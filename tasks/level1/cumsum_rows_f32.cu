// kevo task   cumsum_rows_f32
// kevo doc    Inclusive prefix sum along the last axis of an M x N float32 matrix:
// kevo doc    y[r,c] = x[r,0] + x[r,1] + ... + x[r,c].
// kevo tags   scan
// kevo size   M=8192 N=8192
// kevo size   M=128 N=131072
// kevo holdout M=37 N=100003
// kevo holdout M=1001 N=257
// kevo input  x f32[M,N] normal(0,1)
// kevo output y f32[M,N]
// kevo tol    rtol=1e-4 atol=2e-2
// kevo bytes  8*M*N
// kevo flops  M*N
// kevo torch  torch.cumsum(x, dim=-1)
// kevo launch cumsum_ref grid=M block=512 smem=4096 (x, y, N)
/*
 * cumsum_rows_f32 - the reference: one block per row walks the row in chunks of
 * blockDim.x elements; each chunk is scanned in shared memory (Hillis-Steele, log2(512)
 * steps) in double precision and offset by the double carry of the earlier chunks, so every
 * output is the exactly rounded prefix sum to within ~1e-16 relative: the reference is the
 * most accurate party. Any N; blockDim.x must be a power of two (the launch uses 512) with
 * one double of dynamic shared memory per thread.
 *
 * Sizes: the primary moves 512 MiB (a typical many-rows scan); the second has few, very
 * long rows (one block per row cannot fill the GPU: a candidate must split rows, e.g.
 * with a decoupled look-back); the holdouts have odd lengths, one long and one short.
 *
 * Tolerance. The inputs are normal(0,1), so each row is a random walk: |y[r,c]| ~ sqrt(c)
 * (up to ~360 at c = 131072), crossing zero now and then. A float candidate that sums a
 * whole row sequentially (the worst legitimate order) makes a rounding error of about
 * 2^-24 * |y| at every step; these add up like a random walk to a standard deviation of
 * ~2^-24 * N / sqrt(6) at the end of the row, ~3e-3 at N = 131072 and ~1e-2 for the worst
 * element over all rows (measured on an H100 against numpy's sequential float32 cumsum:
 * at most 9.6e-3, of which 4.9e-3 beyond the rtol term). That error does not shrink where
 * the walk crosses zero, so it needs an absolute term: atol = 2e-2 (2-4x that), small
 * against the typical |y| of ~100-360 and against any single term (an off-by-one, i.e. an
 * exclusive scan, or a dropped element is off by |x| ~ 1 and fails). Tree/look-back scans
 * in float are far more accurate than that (torch.cumsum: 9e-4 at most). The rtol of 1e-4
 * bounds the relative L2 error (the sequential float error is 5e-6 of ||y||). The
 * reference takes ~0.5 ms at the primary size.
 */
extern "C" __global__ void cumsum_ref(const float *x, float *y, int n)
{
    extern __shared__ double buf[];
    const float *row = x + (size_t)blockIdx.x * n;
    float *out = y + (size_t)blockIdx.x * n;
    unsigned t = threadIdx.x;
    double carry = 0.0;

    for (int base = 0; base < n; base += blockDim.x) {
        int c = base + (int)t;
        double v = c < n ? (double)row[c] : 0.0;

        buf[t] = v;
        __syncthreads();
        for (unsigned off = 1; off < blockDim.x; off <<= 1) {
            double add = t >= off ? buf[t - off] : 0.0;
            __syncthreads();
            v += add;
            buf[t] = v;
            __syncthreads();
        }
        if (c < n)
            out[c] = (float)(carry + v);
        carry += buf[blockDim.x - 1];
        __syncthreads();   // buf[] is overwritten by the next chunk
    }
}

// kevo task   log_softmax_rows_f32
// kevo doc    Log-softmax over the last axis of an M x N float32 matrix (row-major):
// kevo doc    y[r,c] = x[r,c] - max_r - log(sum_k exp(x[r,k] - max_r)), max_r = max_k x[r,k].
// kevo tags   softmax reduction
// kevo size   M=16384 N=2048
// kevo size   M=128 N=32000
// kevo holdout M=7 N=100003
// kevo input  x f32[M,N] normal(0,3)
// kevo output y f32[M,N]
// kevo tol    rtol=1e-5 atol=1e-5
// kevo bytes  8*M*N
// kevo flops  5*M*N
// kevo torch  torch.log_softmax(x, dim=-1)
// kevo launch log_softmax_ref grid=M block=256 smem=2048 (x, y, N)
/*
 * log_softmax_rows_f32 - the reference: one block per row, three passes over the row: the
 * maximum (exact, float), then sum(exp(x - max)) evaluated and accumulated in double, then
 * y = x - (max + log(sum)) in double, rounded once: the most accurate party. Shared-memory
 * tree reductions use one double per thread (256 threads, 2048 bytes); any N works.
 * Shapes: the primary reads and writes 128 MiB each (short rows, many blocks), the second
 * is a language-model head (128 x 32000), the holdout few very long prime rows.
 * Inputs are normal(0,3), so exp spans many orders of magnitude and the max subtraction
 * matters; outputs run from about -0.5 (a row's maximum) to -30 with real spread.
 * Tolerance rtol=1e-5 atol=1e-5, tighter than the f32 default, whose rtol=1e-4 would let a
 * log-sum-exp be off by ~1e-3. The log-sum-exp is ~11..17 here, so a float candidate is
 * off by a few ulp of it (~3e-6) plus the float sum's relative error (~1e-6 for tree sums,
 * ~1e-5 for one sequential chain over 100003 terms, where |y| ~ 16 gives 1.7e-4 of room);
 * fast-math __expf/__logf add ~1e-6. Each stays below atol + rtol*|y| >= 1e-5.
 */
__device__ static double block_reduce(double *red, double v, int op)
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] = op == 0 ? fmax(red[t], red[t + s]) : red[t] + red[t + s];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();   /* red[] is reused by the next reduction */
    return v;
}

extern "C" __global__ void log_softmax_ref(const float *x, float *y, int n)
{
    extern __shared__ double red[];
    const float *row = x + (size_t)blockIdx.x * n;
    float *out = y + (size_t)blockIdx.x * n;
    float m = -__int_as_float(0x7f800000);   /* -inf */
    double s = 0.0;

    for (int c = threadIdx.x; c < n; c += blockDim.x)
        m = fmaxf(m, row[c]);
    m = (float)block_reduce(red, m, 0);
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        s += exp((double)row[c] - m);
    s = block_reduce(red, s, 1);
    double lse = (double)m + log(s);
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        out[c] = (float)((double)row[c] - lse);
}

// kevo task   softmax_rows
// kevo doc    Softmax over the last axis of an M x N float32 matrix.
// kevo tags   softmax reduction
// kevo size   M=4096 N=8192
// kevo size   M=128 N=50257
// kevo holdout M=7 N=100003
// kevo input  x f32[M,N] normal(0,4)
// kevo output y f32[M,N]
// kevo tol    rtol=1e-4 atol=1e-7
// kevo bytes  8*M*N
// kevo flops  5*M*N
// kevo torch  torch.softmax(x, dim=-1)
// kevo launch softmax_ref grid=M block=256 smem=1024 (x, y, N)
/*
 * softmax_rows - the reference: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)).
 *
 * Naive on purpose: one block per row, each thread walks the row with a stride of
 * blockDim.x, then a shared-memory tree reduction gives the row maximum and, in a second
 * pass, the sum. Works for any N (no tiling assumptions); the launch fixes blockDim.x to a
 * power of two (256) and the dynamic shared memory to one float per thread.
 * Subtracting the maximum keeps expf in range for the normal(0,4) inputs (|x| up to ~25).
 */

// Tree reduction over blockDim.x values in red[]; op 0 = max, 1 = sum. Every thread gets
// the result. blockDim.x must be a power of two.
__device__ static float block_reduce(float *red, float v, int op)
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] = op == 0 ? fmaxf(red[t], red[t + s]) : red[t] + red[t + s];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();   // red[] is reused by the next reduction
    return v;
}

extern "C" __global__ void softmax_ref(const float *x, float *y, int n)
{
    extern __shared__ float red[];
    const float *row = x + (size_t)blockIdx.x * n;
    float *out = y + (size_t)blockIdx.x * n;
    float m = -3.402823466e38f;
    float s = 0.0f;

    for (int c = threadIdx.x; c < n; c += blockDim.x)
        m = fmaxf(m, row[c]);
    m = block_reduce(red, m, 0);
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        s += expf(row[c] - m);
    s = block_reduce(red, s, 1);
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        out[c] = expf(row[c] - m) / s;
}

// kevo task   rmsnorm_f32
// kevo doc    RMS normalisation of each row of an M x N float32 matrix, scaled by a per-column
// kevo doc    weight: y[r,c] = x[r,c] / sqrt(mean(x[r,:]^2) + eps) * w[c].
// kevo tags   norm reduction
// kevo size   M=16384 N=4096
// kevo size   M=1000 N=1536
// kevo holdout M=37 N=5003
// kevo input  x f32[M,N] normal(0,2)
// kevo input  w f32[N] uniform(0.5,1.5)
// kevo output y f32[M,N]
// kevo scalar eps f32 1e-5
// kevo tol    rtol=1e-4 atol=1e-6
// kevo bytes  8*M*N + 4*N
// kevo flops  4*M*N
// kevo torch  x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
// kevo launch rmsnorm_ref grid=M block=256 smem=1024 (x, w, y, N, eps)
/*
 * rmsnorm_f32 - the reference: one block per row; each thread sums the squares of a
 * strided slice of the row, a shared-memory tree reduction gives the row's sum of squares,
 * then every element is scaled. Any N; blockDim.x must be a power of two (the launch uses
 * 256) with one float of dynamic shared memory per thread. The inputs have rms ~2, so the
 * normalisation changes every value (an identity or passthrough output is far off), and
 * the weight varies per column.
 */
extern "C" __global__ void rmsnorm_ref(const float *x, const float *w, float *y, int n,
                                       float eps)
{
    extern __shared__ float red[];
    const float *row = x + (size_t)blockIdx.x * n;
    float *out = y + (size_t)blockIdx.x * n;
    unsigned t = threadIdx.x;
    float ss = 0.0f;

    for (int c = t; c < n; c += blockDim.x)
        ss += row[c] * row[c];
    red[t] = ss;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads();
    }
    float inv = 1.0f / sqrtf(red[0] / (float)n + eps);
    for (int c = t; c < n; c += blockDim.x)
        out[c] = row[c] * inv * w[c];
}

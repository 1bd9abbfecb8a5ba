// kevo task   residual_layernorm_f32
// kevo doc    Post-norm residual + LayerNorm (BERT-style), float32: v = x + r, then
// kevo doc    y = (v - mean(v)) / sqrt(var(v) + eps) * g + b per row (biased variance, over the N columns).
// kevo doc    x, r, y [M,N]; g, b [N].
// kevo tags   norm reduction residual fusion
// kevo size   M=8192 N=4096
// kevo size   M=1000 N=1024
// kevo holdout M=37 N=5003
// kevo input  x f32[M,N] normal(1,2)
// kevo input  r f32[M,N] normal(0.5,1)
// kevo input  g f32[N] uniform(0.5,1.5)
// kevo input  b f32[N] uniform(-1,1)
// kevo output y f32[M,N]
// kevo scratch v f32[M,N]
// kevo scalar eps f32 1e-5
// kevo tol    rtol=1e-4 atol=1e-5
// kevo bytes  12*M*N + 8*N
// kevo flops  8*M*N
// kevo torch  F.layer_norm(x + r, (N,), g, b, eps)
// kevo launch add_f32_ref grid=cdiv(M*N,256) block=256 (x, r, v, M*N)
// kevo launch layernorm_ref grid=M block=256 smem=1024 (v, g, b, y, N, eps)
/*
 * residual_layernorm_f32 - the reference, unfused: (1) one thread per element writes the sum
 * v = x + r to a scratch matrix; (2) one block per row computes the mean, then the variance
 * as the mean of (v - mean)^2 (two passes, so no cancellation), each with a shared-memory
 * tree reduction (blockDim 256, one float per thread), and writes the affine output. A fused
 * kernel reads x and r once, keeps the row on chip and writes y: 12 bytes per element.
 * Primary size: 8192 tokens of a 4096-wide model, 384 MiB moved.
 * Inputs: v has mean ~1.5 and std ~2.2, so a kernel that skips the mean or the variance is
 * far off; g and b vary per column.
 * Tolerance: rtol=1e-4 atol=1e-5. Outputs are O(1); float reductions over 4096 values in any
 * order, or a one-pass E[v^2]-E[v]^2 variance (cancellation of ~1.5x here), change them by
 * ~1e-6.
 */

extern "C" __global__ void add_f32_ref(const float *x, const float *r, float *v, long long total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        v[i] = x[i] + r[i];
}

// Tree reduction (sum) over blockDim.x values; every thread gets the result.
__device__ static float block_sum(float *red, float v)
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();
    return v;
}

// One block per row; blockDim.x must be a power of two, smem = blockDim.x floats.
extern "C" __global__ void layernorm_ref(const float *v, const float *g, const float *b,
                                         float *y, int n, float eps)
{
    extern __shared__ float red[];
    const float *row = v + (size_t)blockIdx.x * n;
    float *out = y + (size_t)blockIdx.x * n;
    float s = 0.0f;

    for (int c = threadIdx.x; c < n; c += blockDim.x)
        s += row[c];
    float mean = block_sum(red, s) / (float)n;
    s = 0.0f;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        float d = row[c] - mean;
        s += d * d;
    }
    float inv = 1.0f / sqrtf(block_sum(red, s) / (float)n + eps);
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        out[c] = (row[c] - mean) * inv * g[c] + b[c];
}

// kevo task   add_layernorm_gelu_f32
// kevo doc    Add, LayerNorm with affine, exact (erf) GELU, float32: v = x + y,
// kevo doc    n = (v - mean(v)) / sqrt(var(v) + eps) * g + b per row (biased variance over N columns),
// kevo doc    out = 0.5 n (1 + erf(n / sqrt(2))). x, y, out [M,N]; g, b [N].
// kevo tags   norm reduction activation gelu fusion
// kevo size   M=16384 N=1024
// kevo size   M=1000 N=768
// kevo holdout M=37 N=5003
// kevo input  x f32[M,N] normal(-1,2)
// kevo input  y f32[M,N] normal(0.5,1)
// kevo input  g f32[N] uniform(0.5,1.5)
// kevo input  b f32[N] uniform(-1,1)
// kevo output out f32[M,N]
// kevo scratch v f32[M,N]
// kevo scratch nrm f32[M,N]
// kevo scalar eps f32 1e-5
// kevo tol    rtol=1e-4 atol=1e-5
// kevo bytes  12*M*N + 8*N
// kevo flops  20*M*N
// kevo torch  F.gelu(F.layer_norm(x + y, (N,), g, b, eps))
// kevo launch add_f32_ref grid=cdiv(M*N,256) block=256 (x, y, v, M*N)
// kevo launch layernorm_ref grid=M block=256 smem=1024 (v, g, b, nrm, N, eps)
// kevo launch gelu_erf_ref grid=cdiv(M*N,256) block=256 (nrm, out, M*N)
/*
 * add_layernorm_gelu_f32 - the reference, unfused as three eager ops: (1) one thread per
 * element writes v = x + y to scratch; (2) one block per row computes the mean, then the
 * variance as the mean of (v - mean)^2 (two passes), each with a shared-memory tree
 * reduction (blockDim 256, one float per thread), and writes the affine LayerNorm to scratch;
 * (3) one thread per element applies the exact GELU with erff. A fused kernel reads x and y
 * once and writes out: 12 bytes per element. Primary size: 16384 tokens at BERT-large's width
 * 1024, 192 MiB moved; the second size is BERT-base's 768.
 * Inputs: v has mean -0.5 and std ~2.2; g in [0.5,1.5] and b in [-1,1] put the GELU input
 * around N(b, g^2), covering its negative, curved and linear parts.
 * Tolerance: rtol=1e-4 atol=1e-5. Float reductions in any order (or a one-pass variance)
 * change the normalized value by ~1e-6, erff is accurate to ~2 ulp; the tanh approximation
 * of GELU differs by up to ~5e-4 and fails, as intended (this task is the exact GELU).
 */

extern "C" __global__ void add_f32_ref(const float *x, const float *y, float *v, long long total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        v[i] = x[i] + y[i];
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
                                         float *nrm, int n, float eps)
{
    extern __shared__ float red[];
    const float *row = v + (size_t)blockIdx.x * n;
    float *out = nrm + (size_t)blockIdx.x * n;
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

extern "C" __global__ void gelu_erf_ref(const float *nrm, float *out, long long total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total) {
        float t = nrm[i];
        out[i] = 0.5f * t * (1.0f + erff(t * 0.7071067811865476f));
    }
}

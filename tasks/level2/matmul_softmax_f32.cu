// kevo task   matmul_softmax_f32
// kevo doc    Row softmax of a matrix product, float32: P = softmax(A B, dim=-1), A [M,K] and
// kevo doc    B [K,N] row-major, P [M,N] (attention probabilities for one head: A = queries, B = keys^T).
// kevo tags   gemm softmax reduction attention fusion
// kevo size   M=4096 N=4096 K=256
// kevo size   M=512 N=2048 K=128
// kevo holdout M=77 N=1031 K=67
// kevo input  a f32[M,K] normal(0,1)
// kevo input  b f32[K,N] normal(0,0.25)
// kevo output p f32[M,N]
// kevo scratch logits f32[M,N]
// kevo tol    rtol=1e-4 atol=1e-7
// kevo bytes  4*M*K + 4*K*N + 4*M*N
// kevo flops  2*M*N*K + 5*M*N
// kevo torch  torch.softmax(a @ b, dim=-1)
// kevo launch gemm_nn_f32_ref grid=(cdiv(N,16), cdiv(M,16)) block=(16,16) (a, b, logits, M, N, K)
// kevo launch softmax_ref grid=M block=256 smem=1024 (logits, p, N)
/*
 * matmul_softmax_f32 - the reference, unfused: (1) a classic 16x16 shared-memory tiled GEMM
 * (one output per thread, float accumulation) writes the logits to a scratch matrix; (2) one
 * block per row (blockDim 256, one float of shared memory per thread) computes the max, the
 * sum of exp(l - max) with tree reductions, and writes the probabilities. A fused kernel
 * keeps each row block of logits on chip (or recomputes it, flash-style, with an online
 * max/sum) and writes P once. Primary size: 4096 queries x 4096 keys at K=256: 8.6 GFLOP
 * and 72 MiB of minimum traffic, so both the GEMM and the write matter.
 * Inputs: with K=256, A ~ N(0,1), B ~ N(0,0.25), the logits have std 4, so rows are peaked
 * but not one-hot; a uniform distribution or zeros fail.
 * Tolerance: rtol=1e-4 atol=1e-7. A logit is a 256-term fp32 sum of size ~4; any summation
 * order changes it by ~1e-6 absolute, i.e. each probability by ~1e-6 relative (and expf vs
 * __expf by about as much); measured against fp64 this reference uses 0.18 of the
 * tolerance on its worst element. TF32 products err by ~1e-3 in the logits (relative L2
 * ~7e-4) and fail.
 */

#define TILE 16

// C[m,n] = sum_k A[m,k] * B[k,n]; blockDim = (16,16), grid = (cdiv(N,16), cdiv(M,16)).
extern "C" __global__ void gemm_nn_f32_ref(const float *a, const float *b, float *c, int m,
                                           int n, int k)
{
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;

    for (int k0 = 0; k0 < k; k0 += TILE) {
        as[ty][tx] = (row < m && k0 + tx < k) ? a[(size_t)row * k + k0 + tx] : 0.0f;
        bs[ty][tx] = (k0 + ty < k && col < n) ? b[(size_t)(k0 + ty) * n + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; i++)
            acc += as[ty][i] * bs[i][tx];
        __syncthreads();
    }
    if (row < m && col < n)
        c[(size_t)row * n + col] = acc;
}

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
    __syncthreads();
    return v;
}

// One block per row of length n.
extern "C" __global__ void softmax_ref(const float *l, float *p, int n)
{
    extern __shared__ float red[];
    const float *row = l + (size_t)blockIdx.x * n;
    float *out = p + (size_t)blockIdx.x * n;
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

// kevo task   logits_logsoftmax_nll_f32
// kevo doc    Fused classifier head + cross-entropy, float32: logits = X W^T (X [M,K], W [V,K]), per-row
// kevo doc    loss[m] = -log_softmax(logits[m,:])[t[m]] = logsumexp(logits[m,:]) - logits[m, t[m]].
// kevo doc    t: i32 [M] targets in [0,V); loss: f32 [M]. No reduction over rows, no ignore index.
// kevo tags   gemm softmax reduction loss gather fusion
// kevo size   M=512 K=4096 V=32000
// kevo size   M=64 K=1024 V=8000
// kevo holdout M=37 K=515 V=5003
// kevo input  x f32[M,K] normal(0,1)
// kevo input  w f32[V,K] normal(0,0.04)
// kevo input  t i32[M] randint(0,V)
// kevo output loss f32[M]
// kevo scratch logits f32[M,V]
// kevo tol    rtol=1e-5 atol=1e-4
// kevo bytes  4*M*K + 4*V*K + 4*M + 4*M
// kevo flops  2*M*V*K + 4*M*V
// kevo torch  F.cross_entropy(F.linear(x, w), t.long(), reduction='none')
// kevo launch gemm_nt_f32_ref grid=(cdiv(V,16), cdiv(M,16)) block=(16,16) (x, w, logits, M, V, K)
// kevo launch nll_ref grid=M block=256 smem=2048 (logits, t, loss, V)
/*
 * logits_logsoftmax_nll_f32 - the reference, unfused: (1) a classic 16x16 shared-memory tiled
 * GEMM (one output per thread, float accumulation) writes all logits to a scratch matrix
 * (64 MB at the primary size); (2) one block per row takes the maximum (float tree
 * reduction), then sums exp(l - max) in double (tree reduction of doubles: blockDim 256,
 * 8 bytes of shared memory per thread) and writes max + log(sum) - logits[t]. A fused kernel
 * never stores the logits: it keeps a running max/sum per row while the GEMM tiles stream
 * through the vocabulary, and picks up the target logit on the way. Primary size: 512
 * tokens through a 4096 x 32000 (Llama-2) vocabulary head: 134 GFLOP, ~22 ms naive on an
 * H100, ~2 ms at the fp32 CUDA-core peak; the holdout has odd M, K, V.
 * Inputs: with K=4096, X ~ N(0,1), W ~ N(0,0.04) the logits have std ~2.6, so the losses are
 * ~10-25 with a spread of ~2.6 (through the target logit); t is uniform over the vocabulary.
 * Tolerance: rtol=1e-5 atol=1e-4 (~3e-4 at a loss of 20). A logit is a 4096-term fp32 sum
 * of size ~2.6; any summation order changes it by ~1e-5 at most, and the loss (lse minus one
 * logit) by about as much; a float sum of the 32000 exponentials adds ~1e-6 relative to the
 * lse (measured on an H100: this reference is within 1.4e-5 of an fp64 computation, 0.06 of
 * the tolerance). TF32 logits make the loss err by ~1e-3 (3-12x the tolerance) and fail; a
 * constant loss fails by the spread of t's logit.
 */

#define TILE 16

// C[m,n] = sum_k X[m,k] * W[n,k] (n < V here); blockDim = (16,16), grid = (cdiv(n,16), cdiv(m,16)).
extern "C" __global__ void gemm_nt_f32_ref(const float *x, const float *w, float *c, int m,
                                           int n, int k)
{
    __shared__ float xs[TILE][TILE + 1];
    __shared__ float ws[TILE][TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    int wrow = blockIdx.x * TILE + ty;
    float acc = 0.0f;

    for (int k0 = 0; k0 < k; k0 += TILE) {
        int kk = k0 + tx;
        xs[ty][tx] = (row < m && kk < k) ? x[(size_t)row * k + kk] : 0.0f;
        ws[ty][tx] = (wrow < n && kk < k) ? w[(size_t)wrow * k + kk] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; i++)
            acc += xs[ty][i] * ws[tx][i];
        __syncthreads();
    }
    if (row < m && col < n)
        c[(size_t)row * n + col] = acc;
}

// One block per row of V logits; blockDim.x must be a power of two, smem = 8*blockDim.x bytes.
extern "C" __global__ void nll_ref(const float *logits, const int *t, float *loss, int v)
{
    extern __shared__ double dred[];
    float *fred = (float *)dred;
    const float *row = logits + (size_t)blockIdx.x * v;
    unsigned tid = threadIdx.x;
    float m = -3.402823466e38f;
    double s = 0.0;

    for (int c = tid; c < v; c += blockDim.x)
        m = fmaxf(m, row[c]);
    fred[tid] = m;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (tid < h)
            fred[tid] = fmaxf(fred[tid], fred[tid + h]);
        __syncthreads();
    }
    m = fred[0];
    __syncthreads();                           // fred aliases dred
    for (int c = tid; c < v; c += blockDim.x)
        s += exp((double)row[c] - (double)m);
    dred[tid] = s;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (tid < h)
            dred[tid] += dred[tid + h];
        __syncthreads();
    }
    if (tid == 0)
        loss[blockIdx.x] = (float)((double)m + log(dred[0]) - (double)row[t[blockIdx.x]]);
}

// kevo task   matmul_bias_relu_f32
// kevo doc    Linear layer with ReLU in float32: Y = relu(X W^T + b). X [M,K] row-major, W [N,K]
// kevo doc    (nn.Linear layout), b [N], Y [M,N]. Full fp32 precision (TF32 is not accurate enough).
// kevo tags   gemm epilogue relu fusion
// kevo size   M=4096 N=4096 K=4096
// kevo size   M=256 N=1024 K=1024
// kevo holdout M=131 N=1001 K=515
// kevo input  x f32[M,K] normal(0,1)
// kevo input  w f32[N,K] normal(0,0.02)
// kevo input  b f32[N] uniform(-1,1)
// kevo output y f32[M,N]
// kevo scratch acc f32[M,N]
// kevo tol    rtol=1e-4 atol=1e-4
// kevo bytes  4*M*K + 4*N*K + 4*N + 4*M*N
// kevo flops  2*M*N*K
// kevo torch  torch.relu(F.linear(x, w, b))
// kevo launch gemm_nt_f32_ref grid=(cdiv(N,16), cdiv(M,16)) block=(16,16) (x, w, acc, M, N, K)
// kevo launch bias_relu_ref grid=cdiv(M*N,256) block=256 (acc, b, y, M*N, N)
/*
 * matmul_bias_relu_f32 - the reference, unfused: (1) a classic 16x16 shared-memory tiled
 * GEMM (one output per thread, float accumulation) into a scratch matrix; (2) one thread per
 * element adds the bias and clamps at zero. A candidate fuses the epilogue into a fast fp32
 * GEMM. Size: 4096 tokens through a 4096x4096 projection, 137 GFLOP (~2 ms at the fp32
 * CUDA-core peak; ~22 ms naive on an H100).
 * Inputs: with K=4096, X ~ N(0,1), W ~ N(0,0.02) the product has std ~1.28, plus a bias in
 * [-1,1]: about half the outputs are clamped to exactly 0, the rest spread up to ~6.
 * Tolerance: the sum has 4096 terms of size ~0.016. This sequential FMA chain differs from
 * the exact (fp64) result by up to ~2e-5 (measured on an H100; typically ~1e-6), and another
 * fp32 order (tiles, split-K) by about as much, so atol=1e-4 and rtol=1e-4 leave a margin
 * of ~2.5x on the worst element; TF32 inputs (10-bit mantissa) err by ~2e-3 (relative L2
 * ~3e-4) and fail, as does any constant or all-zero output. (PyTorch's cuBLAS SGEMM with
 * TF32 off happened to match this kernel bitwise: same k order, same FMAs.)
 */

#define TILE 16

// C[m,n] = sum_k X[m,k] * W[n,k]; blockDim = (16,16), grid = (cdiv(N,16), cdiv(M,16)).
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

extern "C" __global__ void bias_relu_ref(const float *acc, const float *b, float *y,
                                         long long total, int n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        y[i] = fmaxf(acc[i] + b[i % n], 0.0f);
}

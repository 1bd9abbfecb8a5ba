// kevo task   matmul_bias_gelu_bf16
// kevo doc    GPT-style MLP up-projection with GELU: Y = gelu_tanh(X W^T + b), bf16 in and out,
// kevo doc    float accumulation. X [M,K] row-major, W [N,K] (nn.Linear layout), b [N]; gelu_tanh(v) =
// kevo doc    0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))). Y is rounded to bf16 once, at the end.
// kevo tags   gemm epilogue gelu bf16 fusion
// kevo size   M=2048 N=16384 K=4096
// kevo size   M=128 N=4096 K=1024
// kevo holdout M=257 N=1003 K=509
// kevo input  x bf16[M,K] normal(0,1)
// kevo input  w bf16[N,K] normal(0,0.02)
// kevo input  b bf16[N] uniform(-1,1)
// kevo output y bf16[M,N]
// kevo scratch acc f32[M,N]
// kevo tol    rtol=2e-2 atol=1e-2
// kevo bytes  2*M*K + 2*N*K + 2*N + 2*M*N
// kevo flops  2*M*N*K on bf16
// kevo torch  F.gelu(F.linear(x, w, b), approximate='tanh')
// kevo launch gemm_nt_bf16_ref grid=(cdiv(N,16), cdiv(M,16)) block=(16,16) (x, w, acc, M, N, K)
// kevo launch bias_gelu_ref grid=cdiv(M*N,256) block=256 (acc, b, y, M*N, N)
/*
 * matmul_bias_gelu_bf16 - the reference, unfused on purpose: (1) a classic 16x16
 * shared-memory tiled GEMM, one output per thread, bf16 converted to float on the way into
 * shared memory, float accumulation, writes the float product to a scratch matrix; (2) one
 * thread per element adds the bias, applies tanh-GELU in float and rounds to bf16. A fused
 * kernel keeps the product in registers and runs on tensor cores. Size: 2048 tokens of a
 * 4096-wide (GPT-J-6B-like) model going to its 4x MLP width 16384: 275 GFLOP, ~45 ms naive on
 * an H100, ~0.35 ms at the bf16 tensor-core peak. The holdout has no dimension that is a
 * multiple of 2, 8 or 16 (odd K means rows are not 16-byte aligned).
 * Inputs: with K=4096, X ~ N(0,1) and W ~ N(0,0.02) the product has std ~1.28, plus a bias in
 * [-1,1], so the GELU sees both its linear and its curved/negative region and the output
 * spreads over roughly [-0.17, 7]; zeros or a constant fail by far.
 * Tolerance: bf16 products are exact in float, so a tensor-core candidate differs from this
 * float sum only by summation order (~1e-6 relative); the output rounding to bf16 (up to one
 * ulp, 0.4%, between two correct roundings) and PyTorch's rounding of the intermediate
 * X W^T + b to bf16 (a few ulps where the sum cancels) stay well inside rtol=2e-2 atol=1e-2.
 */
#include <cuda_bf16.h>

#define TILE 16

// C[m,n] = sum_k X[m,k] * W[n,k]; blockDim = (16,16), grid = (cdiv(N,16), cdiv(M,16)).
extern "C" __global__ void gemm_nt_bf16_ref(const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                                            float *c, int m, int n, int k)
{
    __shared__ float xs[TILE][TILE + 1];
    __shared__ float ws[TILE][TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;          // output row (token)
    int col = blockIdx.x * TILE + tx;          // output column (feature)
    int wrow = blockIdx.x * TILE + ty;         // W row this thread loads
    float acc = 0.0f;

    for (int k0 = 0; k0 < k; k0 += TILE) {
        int kk = k0 + tx;
        xs[ty][tx] = (row < m && kk < k) ? __bfloat162float(x[(size_t)row * k + kk]) : 0.0f;
        ws[ty][tx] = (wrow < n && kk < k) ? __bfloat162float(w[(size_t)wrow * k + kk]) : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; i++)
            acc += xs[ty][i] * ws[tx][i];
        __syncthreads();
    }
    if (row < m && col < n)
        c[(size_t)row * n + col] = acc;
}

extern "C" __global__ void bias_gelu_ref(const float *acc, const __nv_bfloat16 *b,
                                         __nv_bfloat16 *y, long long total, int n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total) {
        float v = acc[i] + __bfloat162float(b[i % n]);
        float g = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        y[i] = __float2bfloat16(g);
    }
}

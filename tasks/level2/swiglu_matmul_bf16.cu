// kevo task   swiglu_matmul_bf16
// kevo doc    Gate and up projections of a Llama MLP with the SwiGLU gate, bf16 in and out, float
// kevo doc    accumulation: out = bf16(silu(X Wg^T) * (X Wu^T)), silu(t) = t / (1 + exp(-t)).
// kevo doc    X [M,K] row-major; Wg, Wu [N,K] (nn.Linear layout); out [M,N].
// kevo tags   gemm epilogue activation bf16 fusion
// kevo size   M=1024 N=11008 K=4096
// kevo size   M=64 N=2816 K=1024
// kevo holdout M=129 N=1003 K=517
// kevo input  x bf16[M,K] normal(0,1)
// kevo input  wg bf16[N,K] normal(0,0.02)
// kevo input  wu bf16[N,K] normal(0,0.02)
// kevo output out bf16[M,N]
// kevo scratch gate f32[M,N]
// kevo scratch up f32[M,N]
// kevo tol    rtol=2e-2 atol=1e-2
// kevo bytes  2*M*K + 4*N*K + 2*M*N
// kevo flops  4*M*N*K on bf16
// kevo torch  F.silu(F.linear(x, wg)) * F.linear(x, wu)
// kevo launch gemm_nt_bf16_ref grid=(cdiv(N,16), cdiv(M,16)) block=(16,16) (x, wg, gate, M, N, K)
// kevo launch gemm_nt_bf16_ref grid=(cdiv(N,16), cdiv(M,16)) block=(16,16) (x, wu, up, M, N, K)
// kevo launch swiglu_ref grid=cdiv(M*N,256) block=256 (gate, up, out, M*N)
/*
 * swiglu_matmul_bf16 - the reference, unfused: two runs of a classic 16x16 shared-memory
 * tiled GEMM (one output per thread, bf16 converted to float into shared memory, float
 * accumulation) write the gate and up products to float scratch matrices; then one thread
 * per element computes silu(gate) * up and rounds to bf16. A fused kernel reads X once for
 * both products on tensor cores and never stores them. Primary size: a 1024-token prefill
 * chunk through Llama-2-7B's gate/up projections (4096 -> 11008): 185 GFLOP, ~30 ms naive on
 * an H100, ~0.25 ms at the bf16 tensor-core peak. The holdout has odd M, N and K (rows not
 * 16-byte aligned).
 * Inputs: with K=4096, X ~ N(0,1) and W ~ N(0,0.02) each product has std ~1.28, so silu sees
 * its negative, curved and linear regions; gate and up are independent, so out matches
 * neither product alone, and zeros or a constant fail.
 * Tolerance: bf16 products are exact in float, so a tensor-core candidate differs only by
 * summation order (~1e-6 relative); rounding gate and up to bf16 first (as PyTorch does)
 * plus the final rounding costs up to 2 bf16 ulps (measured: 0.73 of the tolerance on the
 * worst element), inside rtol=2e-2 atol=1e-2. Using GELU instead of SiLU fails.
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
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    int wrow = blockIdx.x * TILE + ty;
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

extern "C" __global__ void swiglu_ref(const float *gate, const float *up, __nv_bfloat16 *out,
                                      long long total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total) {
        float t = gate[i];
        out[i] = __float2bfloat16(t / (1.0f + expf(-t)) * up[i]);
    }
}

// kevo task   bmm_f32
// kevo doc    Batched matrix product of float32 tensors, all row-major: A is B x M x K, X is
// kevo doc    B x K x N, C is B x M x N, C[z,i,j] = sum_p A[z,i,p] * X[z,p,j], float32 accuracy
// kevo doc    (no TF32).
// kevo tags   gemm batched
// kevo size   B=32 M=1024 N=1024 K=1024
// kevo size   B=256 M=128 N=128 K=64
// kevo holdout B=5 M=333 N=129 K=97
// kevo input  a f32[B,M,K] uniform(-1,1)
// kevo input  x f32[B,K,N] uniform(-1,1)
// kevo output c f32[B,M,N]
// kevo tol    rtol=1e-4 atol=5e-4
// kevo bytes  4*B*M*K + 4*B*K*N + 4*B*M*N
// kevo flops  2*B*M*N*K
// kevo torch  torch.bmm(a, x)
// kevo launch bmm_ref grid=(cdiv(N,16), cdiv(M,16), B) block=(16,16) (a, x, c, M, N, K)
/*
 * bmm_f32 - the reference: the textbook shared-memory tiled kernel of matmul_f32 with the
 * batch on gridDim.z: one thread per output, 16 x 16 tiles held as doubles (zero-filled
 * past the edges, so any M, N, K), a double accumulator, so every entry is the exactly
 * rounded result to within ~1e-16 (the reference is the most accurate party). About 15 ms
 * at the primary size on an H100. (The batch size is called B, so the second operand is x.)
 *
 * Sizes: the primary is 32 independent 1024^3 products (69 GFLOP); the second is many
 * small attention-like products (128 x 64 by 64 x 128, as Q K^T per head), where one
 * product cannot fill the GPU; the holdout has odd sizes everywhere.
 *
 * Tolerance. |C| ~ sqrt(K)/3 (~11 at K = 1024). A float candidate accumulating
 * sequentially errs by ~1.5e-5 (standard deviation), ~1e-4 for the worst of 32M entries
 * (cuBLAS's fp32 batched GEMM: 1e-4 at most, measured); atol = 5e-4 covers that 5x,
 * near-zero entries included. TF32 tensor cores must FAIL (the task is fp32): measured
 * with PyTorch's allow_tf32 on an H100, a relative L2 error of 2.6e-4 (2.6x over the
 * rtol of 1e-4) with ~60% of the entries over the elementwise bound.
 */
#define TS 16

extern "C" __global__ void bmm_ref(const float *a, const float *x, float *c, int m, int n, int k)
{
    __shared__ double as[TS][TS];
    __shared__ double xs[TS][TS];
    const float *az = a + (size_t)blockIdx.z * m * k;
    const float *xz = x + (size_t)blockIdx.z * k * n;
    float *cz = c + (size_t)blockIdx.z * m * n;
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TS + ty;
    int col = blockIdx.x * TS + tx;
    double acc = 0.0;

    for (int k0 = 0; k0 < k; k0 += TS) {
        int ka = k0 + tx, kb = k0 + ty;

        as[ty][tx] = row < m && ka < k ? (double)az[(size_t)row * k + ka] : 0.0;
        xs[ty][tx] = kb < k && col < n ? (double)xz[(size_t)kb * n + col] : 0.0;
        __syncthreads();
        for (int p = 0; p < TS; p++)
            acc += as[ty][p] * xs[p][tx];
        __syncthreads();
    }
    if (row < m && col < n)
        cz[(size_t)row * n + col] = (float)acc;
}

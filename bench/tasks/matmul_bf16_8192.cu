// kevo task   matmul_bf16_8192
// kevo doc    (bench/: the suite's matmul_bf16 at 8192^3, the shape issue 15 names.)
// kevo doc    Matrix product C = A B of bfloat16 matrices with float32 accumulation and a bfloat16
// kevo doc    result, all row-major: A is M x K, B is K x N, C is M x N,
// kevo doc    C[i,j] = bf16_rn(sum_p float(A[i,p]) * float(B[p,j])).
// kevo tags   gemm
// kevo size   M=8192 N=8192 K=8192
// kevo holdout M=1001 N=777 K=1037
// kevo input  a bf16[M,K] uniform(-1,1)
// kevo input  b bf16[K,N] uniform(-1,1)
// kevo output c bf16[M,N]
// kevo tol    rtol=1e-2 atol=1e-2
// kevo bytes  2*M*K + 2*K*N + 2*M*N
// kevo flops  2*M*N*K on bf16
// kevo torch  a @ b
// kevo launch matmul_bf16_ref grid=(cdiv(N,16), cdiv(M,16)) block=(16,16) (a, b, c, M, N, K)
/*
 * matmul_bf16 - the reference: the textbook shared-memory tiled kernel, one thread per
 * output, 16 x 16 tiles of A and B converted to float in shared memory (zero-filled past
 * the edges, so any M, N, K), a float accumulator, and one round-to-nearest-even to bf16 at
 * the end. Products of two bf16 values are exact in float, so the only float error is
 * the accumulation's (~1e-6 relative), far below bf16's resolution. No tensor cores:
 * a few TFLOP/s, against ~800 for a good bf16 kernel on an H100.
 *
 * Sizes: the primary is a transformer projection (8192 tokens, hidden 4096, 275 GFLOP);
 * the second is decode-sized (16 tokens): it moves 32 MiB of B and is memory-bound; the
 * holdout has no dimension that is a multiple of 4 or 8 (a tensor-core kernel must handle
 * the edges).
 *
 * Tolerance. |C| ~ sqrt(K)/3 (~21 at K = 4096). A correct candidate (tensor cores with
 * float accumulation, any order, split-K) gets a float sum within ~1e-6 of the
 * reference's, so after rounding to bf16 it agrees or differs by one bf16 ulp: at most
 * 2^-7 = 7.8e-3 relative. rtol = 1e-2 accepts that and nothing much worse; atol = 1e-2
 * covers entries that cancel to near zero. Measured on an H100: cuBLAS through PyTorch,
 * even with reduced-precision reductions allowed, passes (relative L2 1.4e-4, one-ulp
 * differences); accumulating in fp16 instead of float fails (relative L2 ~1e-2, ~10% of
 * the entries over the bound), as does an all-zero or constant output. The reference
 * takes ~33 ms at the primary size.
 */
#include <cuda_bf16.h>

#define TS 16

extern "C" __global__ void matmul_bf16_ref(const __nv_bfloat16 *a, const __nv_bfloat16 *b,
                                           __nv_bfloat16 *c, int m, int n, int k)
{
    __shared__ float as[TS][TS];
    __shared__ float bs[TS][TS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TS + ty;
    int col = blockIdx.x * TS + tx;
    float acc = 0.0f;

    for (int k0 = 0; k0 < k; k0 += TS) {
        int ka = k0 + tx, kb = k0 + ty;

        as[ty][tx] = row < m && ka < k ? __bfloat162float(a[(size_t)row * k + ka]) : 0.0f;
        bs[ty][tx] = kb < k && col < n ? __bfloat162float(b[(size_t)kb * n + col]) : 0.0f;
        __syncthreads();
        for (int p = 0; p < TS; p++)
            acc += as[ty][p] * bs[p][tx];
        __syncthreads();
    }
    if (row < m && col < n)
        c[(size_t)row * n + col] = __float2bfloat16_rn(acc);
}

/* matmul_f32_reference - the reference of task matmul_f32, its kernels renamed matmul_f32_ref_* so
 * they link beside the exported ones. */
#define matmul_ref matmul_f32_ref_matmul_ref
// export: task   matmul_f32
// export: doc    Matrix product C = A B of float32 matrices, all row-major: A is M x K, B is K x N,
// export: doc    C is M x N, C[i,j] = sum_p A[i,p] * B[p,j], computed to float32 accuracy (no TF32).
// export: tags   gemm
// export: size   M=4096 N=4096 K=4096
// export: size   M=512 N=3072 K=768
// export: holdout M=1000 N=1003 K=517
// export: input  a f32[M,K] uniform(-1,1)
// export: input  b f32[K,N] uniform(-1,1)
// export: output c f32[M,N]
// export: tol    rtol=1e-4 atol=1e-3
// export: bytes  4*M*K + 4*K*N + 4*M*N
// export: flops  2*M*N*K
// export: torch  a @ b
// export: launch matmul_ref grid=(cdiv(N,16), cdiv(M,16)) block=(16,16) (a, b, c, M, N, K)
/*
 * matmul_f32 - the reference: the textbook shared-memory tiled kernel, one thread per
 * output, 16 x 16 tiles of A and B staged through shared memory (zero-filled past the
 * edges, so any M, N, K). The tiles are held as doubles and the accumulator is a double:
 * each product of two floats is exact in double, so C is the exactly rounded result to
 * within ~1e-16 and the reference is the most accurate party. Shared-memory bound at a
 * few TFLOP/s (4.7, ~30 ms at the primary size on an H100): far from the ~50 TFLOP/s the GPU
 * can do in fp32.
 *
 * Sizes: the primary is the classic 4096^3 GEMM (137 GFLOP); the second a BERT-base FFN
 * shape (smaller, not square); the holdout has no dimension that is a multiple of 4.
 *
 * Tolerance. Entries of C are sums of K products of uniform(-1,1) values: |C| ~ sqrt(K)/3,
 * ~21 at K = 4096. A float candidate that accumulates sequentially (the worst sensible
 * order) errs by ~6e-5 (standard deviation; measured on an H100 with separate multiply
 * and add: worst 2.8e-4 over 64 rows at K = 4096); cuBLAS's fp32 GEMM errs by at most
 * 4e-4. atol = 1e-3 covers that with room, entries that cancel to near zero included.
 * TF32 tensor cores (10-bit mantissa) must FAIL, as the task is fp32: measured with
 * PyTorch's allow_tf32 on an H100, their relative L2 error is 2.6e-4 at every size here
 * (2.6x over the rtol of 1e-4) and ~64% of the entries exceed 1e-3 + 1e-4 * |C| (errors
 * up to 3e-2 at K = 4096). Error-compensated schemes (3xTF32, split bf16) that reach
 * fp32 accuracy pass.
 */
#define TS 16

extern "C" __global__ void matmul_ref(const float *a, const float *b, float *c, int m, int n,
                                      int k)
{
    __shared__ double as[TS][TS];
    __shared__ double bs[TS][TS];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TS + ty;
    int col = blockIdx.x * TS + tx;
    double acc = 0.0;

    for (int k0 = 0; k0 < k; k0 += TS) {
        int ka = k0 + tx, kb = k0 + ty;

        as[ty][tx] = row < m && ka < k ? (double)a[(size_t)row * k + ka] : 0.0;
        bs[ty][tx] = kb < k && col < n ? (double)b[(size_t)kb * n + col] : 0.0;
        __syncthreads();
        for (int p = 0; p < TS; p++)
            acc += as[ty][p] * bs[p][tx];
        __syncthreads();
    }
    if (row < m && col < n)
        c[(size_t)row * n + col] = (float)acc;
}

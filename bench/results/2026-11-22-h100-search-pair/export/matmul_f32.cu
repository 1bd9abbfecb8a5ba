/* matmul_f32 - exported by kevo from run 5, candidate 77, for task matmul_f32.
 * Its params are fixed below; build with the flags in the Makefile. */
#define BM 64
#define BN 64
#define BK 8
#define TM 8
#define TN 4
// export: doc    Shared-memory tiled SGEMM with register blocking: a block computes a BM x BN
// export: doc    tile of C in steps of BK along K; each thread accumulates a TM x TN sub-tile
// export: doc    in registers from rows of the staged A and B tiles.
// export: param BM 64 128
// export: param BN 64 128
// export: param BK 8 16
// export: param TM 8 4
// export: param TN 4 8
// export: launch sgemm_tiled grid=(cdiv(N,BN),cdiv(M,BM)) block=(BM/TM)*(BN/TN) (a, b, c, M, N, K)
/*
 * A seed for tasks/level1/matmul_f32.cu (C = A B, row-major f32, float accumulation like
 * the reference; no TF32, which the task's tolerance rejects). Every combination of the
 * params is valid: 64 to 1024 threads, at most 16 KB of shared memory. Tiles at the
 * matrix edges are padded with zeros on load and guarded on store, so any M, N, K work.
 */
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 4
#endif
#define NT ((BM / TM) * (BN / TN))

extern "C" __global__ void __launch_bounds__(NT)
sgemm_tiled(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
            int M, int N, int K)
{
    __shared__ float As[BK][BM];     /* A tile, transposed: As[k][row] */
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x, tr = tid / (BN / TN), tc = tid % (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];

#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++)
            acc[i][j] = 0.f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += NT) {
            int r = i / BK, c = i % BK, gr = row0 + r, gc = k0 + c;
            As[c][r] = gr < M && gc < K ? A[(long long)gr * K + gc] : 0.f;
        }
        for (int i = tid; i < BK * BN; i += NT) {
            int r = i / BN, c = i % BN, gr = k0 + r, gc = col0 + c;
            Bs[r][c] = gr < K && gc < N ? B[(long long)gr * N + gc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i++)
                a[i] = As[kk][tr * TM + i];
#pragma unroll
            for (int j = 0; j < TN; j++)
                b[j] = Bs[kk][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; i++) {
        int gr = row0 + tr * TM + i;
#pragma unroll
        for (int j = 0; j < TN; j++) {
            int gc = col0 + tc * TN + j;
            if (gr < M && gc < N)
                C[(long long)gr * N + gc] = acc[i][j];
        }
    }
}

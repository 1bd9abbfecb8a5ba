// kevo doc    Register-blocked SGEMM: 128 x 128 tiles of C, 256 threads each accumulating an
// kevo doc    8 x 8 block (two 4-wide halves 64 apart), BK = 8, A stored transposed in shared
// kevo doc    memory, float4 shared reads, double-buffered tiles fetched a step ahead.
// kevo launch sgemm_tiled grid=(cdiv(N,128),cdiv(M,128)) block=256 (a, b, c, M, N, K)
/*
 * An exemplar for tasks/level1/matmul_f32.cu (docs/playbook/register-blocking-gemm.md):
 * C = A B, row-major f32, FFMA with float accumulation (the task rejects TF32).
 *
 * Each k step a thread reads 8 values of A and 8 of B from shared memory as four float4s
 * and does 64 FMAs: the ratio that keeps the FMA pipes busy. Thread (ty, tx) owns rows
 * ty*4..+3 and 64+ty*4..+3, columns tx*4..+3 and 64+tx*4..+3: a warp's float4 reads of B
 * cover 16 distinct float4s (no bank conflict) and of A two (broadcasts). The next tile is
 * loaded into registers while the current one is used, then stored into the other shared
 * buffer: one __syncthreads per k step. Global loads are float4s when the row length
 * allows it (K % 4 == 0 for A, N % 4 == 0 for B), else scalar; edges are zero-filled, so
 * any M, N, K works (the holdout is 1000 x 1003 x 517).
 */
#define BM 128
#define BN 128
#define BK 8
#define NT 256

struct tile_regs {
    float a[4], b[4];
};

/* This thread's share of the A (128 x 8) and B (8 x 128) tiles at k0, zero past the edges. */
__device__ __forceinline__ void fetch(tile_regs &t, const float *__restrict__ A,
                                      const float *__restrict__ B, int M, int N, int K, int row0,
                                      int col0, int k0, bool a4, bool b4)
{
    int tid = threadIdx.x;
    int ar = row0 + (tid >> 1), ak = k0 + (tid & 1) * 4;
    int bk = k0 + (tid >> 5), bc = col0 + (tid & 31) * 4;
    if (a4 && ar < M && ak + 3 < K) {
        float4 v = *(const float4 *)(A + (long long)ar * K + ak);
        t.a[0] = v.x; t.a[1] = v.y; t.a[2] = v.z; t.a[3] = v.w;
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
            t.a[j] = ar < M && ak + j < K ? A[(long long)ar * K + ak + j] : 0.f;
    }
    if (b4 && bk < K && bc + 3 < N) {
        float4 v = *(const float4 *)(B + (long long)bk * N + bc);
        t.b[0] = v.x; t.b[1] = v.y; t.b[2] = v.z; t.b[3] = v.w;
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
            t.b[j] = bk < K && bc + j < N ? B[(long long)bk * N + bc + j] : 0.f;
    }
}

__device__ __forceinline__ void stash(const tile_regs &t, float (*As)[BM], float (*Bs)[BN])
{
    int tid = threadIdx.x, ar = tid >> 1, ak = (tid & 1) * 4;
#pragma unroll
    for (int j = 0; j < 4; j++)
        As[ak + j][ar] = t.a[j];
    *(float4 *)&Bs[tid >> 5][(tid & 31) * 4] = make_float4(t.b[0], t.b[1], t.b[2], t.b[3]);
}

__device__ __forceinline__ void store_row(float *__restrict__ C, int M, int N, int r, int c,
                                          float4 v, bool c4)
{
    if (r >= M)
        return;
    float *p = C + (long long)r * N + c;
    if (c4 && c + 3 < N) {
        *(float4 *)p = v;
    } else {
        if (c < N)
            p[0] = v.x;
        if (c + 1 < N)
            p[1] = v.y;
        if (c + 2 < N)
            p[2] = v.z;
        if (c + 3 < N)
            p[3] = v.w;
    }
}

extern "C" __global__ void __launch_bounds__(NT, 2)
sgemm_tiled(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
            int M, int N, int K)
{
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool a4 = (K & 3) == 0, b4 = (N & 3) == 0;
    const int nk = (K + BK - 1) / BK;
    float acc[8][8];
    tile_regs t;

#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc[i][j] = 0.f;
    fetch(t, A, B, M, N, K, row0, col0, 0, a4, b4);
    stash(t, As[0], Bs[0]);
    __syncthreads();
    for (int kt = 0; kt < nk; kt++) {
        const int cur = kt & 1;
        if (kt + 1 < nk)
            fetch(t, A, B, M, N, K, row0, col0, (kt + 1) * BK, a4, b4);
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float4 a0 = *(const float4 *)&As[cur][kk][ty * 4];
            float4 a1 = *(const float4 *)&As[cur][kk][64 + ty * 4];
            float4 b0 = *(const float4 *)&Bs[cur][kk][tx * 4];
            float4 b1 = *(const float4 *)&Bs[cur][kk][64 + tx * 4];
            const float a[8] = { a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w };
            const float b[8] = { b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w };
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (kt + 1 < nk)
            stash(t, As[cur ^ 1], Bs[cur ^ 1]);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int r = row0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        store_row(C, M, N, r, col0 + tx * 4,
                  make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]), b4);
        store_row(C, M, N, r, col0 + 64 + tx * 4,
                  make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]), b4);
    }
}

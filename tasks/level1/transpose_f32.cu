// kevo task   transpose_f32
// kevo doc    Transpose of an M x N float32 matrix (row-major) into an N x M one:
// kevo doc    y[c,r] = x[r,c].
// kevo tags   layout transpose
// kevo size   M=8192 N=4096
// kevo size   M=3000 N=1000
// kevo holdout M=1001 N=4099
// kevo input  x f32[M,N] normal(0,1)
// kevo output y f32[N,M]
// kevo bytes  8*M*N
// kevo torch  x.t().contiguous()
// kevo launch transpose_ref grid=(cdiv(M,32),cdiv(N,8)) block=(32,8) (x, y, M, N)
/*
 * transpose_f32 - the reference: one thread per output element, threads of a warp take 32
 * consecutive output columns (input rows), so the writes are coalesced and every read
 * touches a different row (a 32-byte sector per 4 useful bytes): the textbook naive
 * transpose that a shared-memory tiled kernel beats. The grid is (M/32, N/8) blocks of
 * 32 x 8 threads; cdiv(N,8) stays under the y limit (65535) in every workload, and both
 * edges are masked for the holdout (1001 x 4099: neither a multiple of 4 nor of 32).
 * The primary shape is rectangular (256 MiB read + 256 MiB written), so a square-only
 * kernel or one that swaps M and N fails. The output is an exact copy of permuted values:
 * the default f32 tolerance only matters in that nothing but the right permutation passes.
 */
extern "C" __global__ void transpose_ref(const float *x, float *y, int m, int n)
{
    int r = blockIdx.x * 32 + threadIdx.x;   /* input row = output column */
    int c = blockIdx.y * 8 + threadIdx.y;    /* input column = output row */

    if (r < m && c < n)
        y[(size_t)c * m + r] = x[(size_t)r * n + c];
}

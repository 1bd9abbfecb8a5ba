// kevo task   max_cols_f32
// kevo doc    Maximum over axis 0 of an M x N float32 matrix (row-major), i.e. of each column:
// kevo doc    out[c] = max_r x[r,c]. Inputs hold no NaN.
// kevo tags   reduction strided
// kevo size   M=32768 N=2048
// kevo size   M=65536 N=96
// kevo holdout M=1001 N=5003
// kevo holdout M=30011 N=7
// kevo input  x f32[M,N] normal(0,1)
// kevo output out f32[N]
// kevo bytes  4*M*N + 4*N
// kevo torch  x.amax(dim=0)
// kevo launch max_cols_ref grid=cdiv(N,32) block=(32,32) (x, out, M, N)
/*
 * max_cols_f32 - the reference: one block of 32 x 32 threads per strip of 32 columns.
 * Thread (tx, ty) walks rows ty, ty+32, ... of column 32*blockIdx.x + tx, so each warp
 * reads 128 contiguous bytes of one row (coalesced); the 32 partial maxima of a column
 * are then combined in a padded shared tile. Columns past N (the holdouts) are masked.
 * The reduction axis is the strided one: with N=2048 this launches only 64 blocks, and the
 * second workload (N=96) only 3, so a fast kernel must also split the rows across blocks
 * (or use vector loads and more work per thread); the second holdout has fewer columns than
 * a warp. Max is exact, so any reduction order gives bitwise the same answer and the
 * default f32 tolerance is ample. normal(0,1) maxima over 32768 rows are ~4 +- 0.4, so a
 * constant or zeros fail, and the maxima differ from any single row of x.
 */
extern "C" __global__ void max_cols_ref(const float *x, float *out, int m, int n)
{
    __shared__ float part[32][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    float mx = -__int_as_float(0x7f800000);   /* -inf */

    if (c < n)
        for (int r = threadIdx.y; r < m; r += 32)
            mx = fmaxf(mx, x[(size_t)r * n + c]);
    part[threadIdx.y][threadIdx.x] = mx;
    __syncthreads();
    if (threadIdx.y == 0 && c < n) {
        float v = part[0][threadIdx.x];
        for (int k = 1; k < 32; k++)
            v = fmaxf(v, part[k][threadIdx.x]);
        out[c] = v;
    }
}

// kevo task   cpu_transpose
// kevo doc    Transpose of an M x N float32 matrix (row-major) on the CPU: y[c,r] = x[r,c],
// kevo doc    y is N x M row-major.
// kevo tags   transpose memory
// kevo size   M=2048 N=2048
// kevo size   M=1000 N=3001
// kevo holdout M=7 N=10007
// kevo input  x f32[M,N] normal(0,1)
// kevo output y f32[N,M]
// kevo tol    rtol=0 atol=0
// kevo bytes  8*M*N
// kevo torch  x.t().contiguous()
// kevo call   transpose_ref(x, y, M, N)
/*
 * cpu_transpose - the reference: two plain loops, reading x row by row and writing y
 * with a stride of M floats (every write touches a new cache line, which is what a
 * blocked candidate fixes). A copy is exact, so the tolerance is zero. 2048 x 2048 is
 * 16 MiB each way, bigger than the caches; the second workload is non-square with an odd
 * N, the holdout is a tall-thin extreme, so a candidate that assumes a square matrix or a
 * multiple of its tile size fails. normal(0,1) values: an output equal to the input (or
 * any constant) is far off.
 */
void transpose_ref(const float *x, float *y, int m, int n)
{
    for (int r = 0; r < m; r++)
        for (int c = 0; c < n; c++)
            y[(long)c * m + r] = x[(long)r * n + c];
}

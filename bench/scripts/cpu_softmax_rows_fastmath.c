// kevo call   softmax_rows_fm(x, y, M, N)
// kevo flags  -O3 -march=native -fopenmp -ffast-math
/*
 * A candidate for tasks/cpu/cpu_softmax_rows.c, for bench/scripts/mcp_session.py's run on a
 * machine without a GPU: examples/seeds/cpu_softmax_rows.c (rows in parallel with OpenMP)
 * with -ffast-math, so the compiler may vectorize expf (glibc's vector math) and reorder
 * the float sums; the row sum stays in double, like the reference's.
 */
#include <math.h>

void softmax_rows_fm(const float *restrict x, float *restrict y, int m, int n)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < m; r++) {
        const float *row = x + (long)r * n;
        float *out = y + (long)r * n;
        float mx = row[0];
        double s = 0.0;

        for (int c = 1; c < n; c++)
            mx = fmaxf(mx, row[c]);
        for (int c = 0; c < n; c++)
            out[c] = expf(row[c] - mx);
        for (int c = 0; c < n; c++)
            s += out[c];
        float inv = (float)(1.0 / s);
        for (int c = 0; c < n; c++)
            out[c] *= inv;
    }
}

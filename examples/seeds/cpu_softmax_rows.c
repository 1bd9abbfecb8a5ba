// kevo call   softmax_rows_fast(x, y, M, N)
// kevo flags  -O3 -march=native -fopenmp
/*
 * A candidate for tasks/cpu/cpu_softmax_rows.c: rows in parallel with OpenMP, the maximum and
 * the scaled exponentials in vectorizable loops, the sum in double like the reference.
 */
#include <math.h>

void softmax_rows_fast(const float *restrict x, float *restrict y, int m, int n)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < m; r++) {
        const float *row = x + (long)r * n;
        float *out = y + (long)r * n;
        float mx = row[0];
        double s = 0.0;

        for (int c = 1; c < n; c++)
            mx = fmaxf(mx, row[c]);
        for (int c = 0; c < n; c++) {
            out[c] = expf(row[c] - mx);
            s += out[c];
        }
        float inv = (float)(1.0 / s);
        for (int c = 0; c < n; c++)
            out[c] *= inv;
    }
}

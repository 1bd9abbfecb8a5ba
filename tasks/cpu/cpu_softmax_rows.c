// kevo task   cpu_softmax_rows
// kevo doc    Softmax over the last axis of an M x N float32 matrix, on the CPU.
// kevo tags   softmax reduction
// kevo size   M=512 N=1024
// kevo size   M=100 N=5000
// kevo holdout M=7 N=10007
// kevo input  x f32[M,N] normal(0,2)
// kevo output y f32[M,N]
// kevo tol    rtol=1e-4 atol=1e-7
// kevo bytes  8*M*N
// kevo flops  5*M*N
// kevo torch  torch.softmax(x, dim=-1)
// kevo call   softmax_rows_ref(x, y, M, N)
/*
 * cpu_softmax_rows - the reference: per row, the maximum, then the sum of exp(x - max)
 * accumulated in double (so the reference is the most accurate party), then the scaled
 * exponentials. ~0.5 M expf per workload: a few milliseconds on one core.
 */
#include <math.h>

void softmax_rows_ref(const float *x, float *y, int m, int n)
{
    for (int r = 0; r < m; r++) {
        const float *row = x + (long)r * n;
        float *out = y + (long)r * n;
        float mx = row[0];
        double s = 0.0;

        for (int c = 1; c < n; c++)
            mx = row[c] > mx ? row[c] : mx;
        for (int c = 0; c < n; c++)
            s += expf(row[c] - mx);
        for (int c = 0; c < n; c++)
            out[c] = (float)(expf(row[c] - mx) / s);
    }
}

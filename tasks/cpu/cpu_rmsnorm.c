// kevo task   cpu_rmsnorm
// kevo doc    RMS normalisation of each row of an M x N float32 matrix, scaled by a per-column
// kevo doc    weight, on the CPU: y[r,c] = x[r,c] / sqrt(mean(x[r,:]^2) + eps) * w[c].
// kevo tags   norm reduction
// kevo size   M=1024 N=1024
// kevo size   M=333 N=4097
// kevo holdout M=5 N=12345
// kevo input  x f32[M,N] normal(0,2)
// kevo input  w f32[N] uniform(0.5,1.5)
// kevo output y f32[M,N]
// kevo scalar eps f32 1e-5
// kevo tol    rtol=1e-4 atol=1e-6
// kevo bytes  8*M*N + 4*N
// kevo flops  4*M*N
// kevo torch  x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
// kevo call   rmsnorm_ref(x, w, y, M, N, eps)
/*
 * cpu_rmsnorm - the reference: the sum of squares of each row in double, then every
 * element scaled. The inputs have rms ~2 so the normalisation changes every value, and
 * the weight varies per column.
 */
#include <math.h>

void rmsnorm_ref(const float *x, const float *w, float *y, int m, int n, float eps)
{
    for (int r = 0; r < m; r++) {
        const float *row = x + (long)r * n;
        double ss = 0.0;

        for (int c = 0; c < n; c++)
            ss += (double)row[c] * row[c];
        float inv = (float)(1.0 / sqrt(ss / n + eps));
        for (int c = 0; c < n; c++)
            y[(long)r * n + c] = row[c] * inv * w[c];
    }
}

// kevo task   cpu_layernorm
// kevo doc    Layer normalisation of each row of an M x N float32 matrix with a per-column
// kevo doc    weight and bias, on the CPU: y[r,c] = (x[r,c] - mean_r) / sqrt(var_r + eps) * w[c]
// kevo doc    + b[c], where mean_r and var_r are the mean and the biased variance of row r.
// kevo tags   norm reduction
// kevo size   M=2048 N=2048
// kevo size   M=333 N=4097
// kevo holdout M=5 N=12345
// kevo input  x f32[M,N] normal(3,2)
// kevo input  w f32[N] uniform(0.5,1.5)
// kevo input  b f32[N] uniform(-1,1)
// kevo output y f32[M,N]
// kevo scalar eps f32 1e-5
// kevo tol    rtol=1e-4 atol=1e-5
// kevo bytes  8*M*N + 8*N
// kevo flops  7*M*N
// kevo torch  F.layer_norm(x, (N,), w, b, eps)
// kevo call   layernorm_ref(x, w, b, y, M, N, eps)
/*
 * cpu_layernorm - the reference: per row, the mean in double, then the variance as the
 * mean of squared deviations in double (two passes, no cancellation), then every element
 * normalised, scaled and shifted. The inputs have mean 3 and std 2, so a candidate that
 * forgets to subtract the mean, or uses the one-pass E[x^2] - mean^2 in float carelessly,
 * is visibly off; normalised values are O(1), so atol=1e-5 next to rtol=1e-4 only matters
 * where the output crosses zero.
 */
#include <math.h>

void layernorm_ref(const float *x, const float *w, const float *b, float *y, int m, int n,
                   float eps)
{
    for (int r = 0; r < m; r++) {
        const float *row = x + (long)r * n;
        double mean = 0.0, var = 0.0;

        for (int c = 0; c < n; c++)
            mean += row[c];
        mean /= n;
        for (int c = 0; c < n; c++)
            var += (row[c] - mean) * (row[c] - mean);
        var /= n;
        double inv = 1.0 / sqrt(var + eps);
        for (int c = 0; c < n; c++)
            y[(long)r * n + c] = (float)((row[c] - mean) * inv * w[c] + b[c]);
    }
}

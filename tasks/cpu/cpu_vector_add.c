// kevo task   cpu_vector_add
// kevo doc    Elementwise sum of two float32 vectors on the CPU: z = x + y.
// kevo tags   elementwise
// kevo size   N=4194304
// kevo size   N=100003
// kevo holdout N=1000003
// kevo input  x f32[N] normal(1,2)
// kevo input  y f32[N] uniform(-1,3)
// kevo output z f32[N]
// kevo tol    rtol=1e-6 atol=1e-6
// kevo bytes  12*N
// kevo flops  N
// kevo torch  x + y
// kevo call   vector_add_ref(x, y, z, N)
/*
 * cpu_vector_add - the reference, a plain loop. The primary size (48 MiB moved) is past
 * the last-level cache of a small host; the second and the holdout are odd, so a candidate
 * that assumes a multiple of its SIMD width leaves a tail. x and y have different means
 * and spreads so neither input alone, nor a constant, is close to z.
 */
void vector_add_ref(const float *x, const float *y, float *z, int n)
{
    for (int i = 0; i < n; i++)
        z[i] = x[i] + y[i];
}

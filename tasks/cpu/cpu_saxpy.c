// kevo task   cpu_saxpy
// kevo doc    Scaled vector sum on the CPU: z = alpha * x + y (float32, alpha a scalar).
// kevo tags   elementwise
// kevo size   N=4194304
// kevo size   N=65537
// kevo holdout N=999999
// kevo input  x f32[N] normal(0,1)
// kevo input  y f32[N] normal(2,3)
// kevo output z f32[N]
// kevo scalar alpha f32 2.5
// kevo tol    rtol=1e-5 atol=1e-5
// kevo bytes  12*N
// kevo flops  2*N
// kevo torch  alpha * x + y
// kevo call   saxpy_ref(x, y, z, alpha, N)
/*
 * cpu_saxpy - the reference. The output is separate from y (an in-place update would be an
 * input mutation under the harness). The tolerance leaves room for a candidate whose
 * compiler contracts alpha*x + y into one fused multiply-add (one rounding instead of
 * two: differences up to an ulp of alpha*x, ~1e-6 here).
 */
void saxpy_ref(const float *x, const float *y, float *z, float alpha, int n)
{
    for (int i = 0; i < n; i++) {
        float ax = alpha * x[i];
        z[i] = ax + y[i];
    }
}

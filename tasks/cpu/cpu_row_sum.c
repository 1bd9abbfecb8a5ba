// kevo task   cpu_row_sum
// kevo doc    Sum of each row of an M x N float32 matrix, on the CPU: out[r] = sum_c x[r,c].
// kevo tags   reduction
// kevo size   M=4096 N=1024
// kevo size   M=1000 N=777
// kevo holdout M=13 N=100003
// kevo input  x f32[M,N] normal(1,1)
// kevo output out f32[M]
// kevo tol    rtol=1e-4 atol=1e-3
// kevo bytes  4*M*N + 4*M
// kevo flops  M*N
// kevo torch  x.sum(-1)
// kevo call   row_sum_ref(x, out, M, N)
/*
 * cpu_row_sum - the reference: a double accumulator per row (the most accurate party).
 * The inputs have mean 1, so every row sum is near N with a spread of ~sqrt(N): no sum
 * cancels to zero, and a float candidate summing in any order is within 1e-5 relative.
 */
void row_sum_ref(const float *x, float *out, int m, int n)
{
    for (int r = 0; r < m; r++) {
        double s = 0.0;

        for (int c = 0; c < n; c++)
            s += x[(long)r * n + c];
        out[r] = (float)s;
    }
}

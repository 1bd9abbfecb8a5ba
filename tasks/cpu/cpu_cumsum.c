// kevo task   cpu_cumsum
// kevo doc    Inclusive prefix sum along each row of an M x N float32 matrix, on the CPU:
// kevo doc    y[r,i] = sum_{j<=i} x[r,j].
// kevo tags   scan
// kevo size   M=2048 N=4096
// kevo size   M=300 N=5001
// kevo holdout M=3 N=100003
// kevo input  x f32[M,N] normal(0.5,1)
// kevo output y f32[M,N]
// kevo tol    rtol=1e-4 atol=1e-4
// kevo bytes  8*M*N
// kevo flops  M*N
// kevo torch  torch.cumsum(x, dim=-1)
// kevo call   cumsum_ref(x, y, M, N)
/*
 * cpu_cumsum - the reference: one sequential running sum per row in double, rounded to
 * float at each output, so it is the most accurate party. The inputs have mean 0.5, so
 * the prefix sums grow steadily (~0.5*i, up to ~50000 on the holdout row); a float
 * candidate summing sequentially or in blocks is off by ~1e-6 relative there, and the
 * atol covers the first few elements of a row, where sums are small and may cancel.
 * 8 M elements: about ten milliseconds on one core. On the holdout's rows of 10^5
 * elements a plain float running sum drifts by ~0.5 absolute against sums of ~5e4
 * (~1e-5 relative), still inside rtol; a candidate need not use double.
 */
void cumsum_ref(const float *x, float *y, int m, int n)
{
    for (int r = 0; r < m; r++) {
        double s = 0.0;

        for (int i = 0; i < n; i++) {
            s += x[(long)r * n + i];
            y[(long)r * n + i] = (float)s;
        }
    }
}

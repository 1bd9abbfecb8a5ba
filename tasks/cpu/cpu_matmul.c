// kevo task   cpu_matmul
// kevo doc    Matrix product C = A B of float32 matrices (A is M x K, B is K x N), on the CPU.
// kevo tags   gemm
// kevo size   M=256 N=256 K=256
// kevo size   M=384 N=200 K=130
// kevo holdout M=77 N=129 K=61
// kevo input  a f32[M,K] uniform(-1,1)
// kevo input  b f32[K,N] uniform(-1,1)
// kevo output c f32[M,N]
// kevo tol    rtol=1e-4 atol=1e-4
// kevo bytes  4*M*K + 4*K*N + 4*M*N
// kevo flops  2*M*N*K
// kevo torch  a @ b
// kevo call   matmul_ref(a, b, c, M, N, K)
/*
 * cpu_matmul - the reference: i-j-k loops with a double accumulator, so it is the most
 * accurate party (a float candidate summing in another order differs by ~1e-6 relative;
 * the atol covers entries that cancel to near zero). Small sizes: 2*256^3 = 34 MFLOP,
 * tens of milliseconds naive on one core. The second workload has no dimension that is a
 * multiple of 8 or 16.
 */
void matmul_ref(const float *a, const float *b, float *c, int m, int n, int k)
{
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double s = 0.0;

            for (int p = 0; p < k; p++)
                s += (double)a[(long)i * k + p] * b[(long)p * n + j];
            c[(long)i * n + j] = (float)s;
        }
    }
}

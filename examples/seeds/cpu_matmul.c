// kevo doc    Cache-blocked matrix product: C is computed in BI x BJ tiles, the K loop in
// kevo doc    chunks of BK, with the innermost loop over j so it vectorises. The block sizes
// kevo doc    are params for kevo run to tune.
// kevo param  BI 8 4 16 32 64
// kevo param  BJ 64 16 32 128 256
// kevo param  BK 32 8 16 64 128 256
// kevo flags  -O3 -march=native
// kevo call   matmul_blocked(a, b, c, M, N, K)
/*
 * A seed for tasks/cpu/cpu_matmul.c, written as a user would: blocked i-k-j loops with
 * float accumulation into C (tolerance of the task: rtol=1e-4 atol=1e-4). The block
 * sizes that are fastest depend on the caches of the machine, which is what the search
 * finds out; the defaults are a guess.
 */
#include <string.h>

void matmul_blocked(const float *a, const float *b, float *c, int m, int n, int k)
{
    memset(c, 0, (size_t)m * n * sizeof *c);
    for (int i0 = 0; i0 < m; i0 += BI)
        for (int j0 = 0; j0 < n; j0 += BJ)
            for (int p0 = 0; p0 < k; p0 += BK) {
                int i1 = i0 + BI < m ? i0 + BI : m;
                int j1 = j0 + BJ < n ? j0 + BJ : n;
                int p1 = p0 + BK < k ? p0 + BK : k;
                for (int i = i0; i < i1; i++)
                    for (int p = p0; p < p1; p++) {
                        float av = a[(long)i * k + p];
                        for (int j = j0; j < j1; j++)
                            c[(long)i * n + j] += av * b[(long)p * n + j];
                    }
            }
}

// kevo task   cpu_landscape
// kevo doc    y = 2 x + 1 over N floats: a test task for kevo run (tests/unit/test_run.c),
// kevo doc    paired with tests/search/landscape_seed.c whose params set how much redundant
// kevo doc    work it does, so the fastest configuration is known in advance.
// kevo tags   test
// kevo size   N=200000
// kevo size   N=50000
// kevo holdout N=1001
// kevo input  x f32[N] uniform(-1,1)
// kevo output y f32[N]
// kevo bytes  8*N
// kevo flops  2*N
// kevo torch  2 * x + 1
// kevo call   landscape_ref(x, y, N)
/*
 * landscape - the reference is one pass. The seed adds 6 (|A - 4| + |B - 2|) passes of
 * redundant work: the only configuration without any is A=4, B=2, and every other one
 * costs at least 6 more passes (~0.6 ms), far outside timing noise, so the answer can be
 * checked without an exhaustive sweep in CI (36 configurations).
 */
void landscape_ref(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = 2.0f * x[i] + 1.0f;
}

// kevo task   cpu_slow_ref
// kevo doc    y = 2 x + 1 over N floats, with a reference that is slow on purpose: a test task
// kevo doc    for the LLM operators of kevo run (tests/unit/test_llm_run.c), where a plain
// kevo doc    loop written by the (fake) model must beat the reference clearly.
// kevo tags   test elementwise
// kevo size   N=100000
// kevo size   N=30000
// kevo holdout N=1001
// kevo input  x f32[N] uniform(-1,1)
// kevo output y f32[N]
// kevo bytes  8*N
// kevo flops  2*N
// kevo torch  2 * x + 1
// kevo call   slow_ref(x, y, N)
/*
 * slow_ref - the reference computes each element 32 times through a volatile, so the
 * compiler keeps every repetition: about 30x slower than a plain loop, far outside timing
 * noise.
 */
void slow_ref(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++) {
        volatile float v = 0.0f;
        for (int k = 0; k < 32; k++)
            v = 2.0f * x[i] + 1.0f;
        y[i] = v;
    }
}

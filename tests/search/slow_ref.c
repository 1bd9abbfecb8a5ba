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
 * slow_ref - the reference computes each element 256 times through a volatile, so the
 * compiler keeps every repetition: a plain loop beats it by far more than the fixed cost
 * of a timed CPU sample (the round trip to the runner: ~0.05-0.2 ms in a small VM, where
 * 32 repetitions, 0.4-1 ms at these sizes, left a plain loop only 2-5x ahead).
 */
void slow_ref(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++) {
        volatile float v = 0.0f;
        for (int k = 0; k < 256; k++)
            v = 2.0f * x[i] + 1.0f;
        y[i] = v;
    }
}

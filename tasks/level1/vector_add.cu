// kevo task   vector_add
// kevo doc    Elementwise sum of two float32 vectors: z = x + y.
// kevo tags   elementwise
// kevo size   N=67108864
// kevo size   N=1000000
// kevo size   N=5003
// kevo holdout N=33554467
// kevo input  x f32[N] normal(1,2)
// kevo input  y f32[N] uniform(-1,3)
// kevo output z f32[N]
// kevo tol    rtol=1e-6 atol=1e-6
// kevo bytes  12*N
// kevo flops  N
// kevo torch  x + y
// kevo launch vector_add_ref grid=cdiv(N,256) block=256 (x, y, z, N)
/*
 * vector_add - the reference: one thread per element. The primary size (2^26 elements,
 * 768 MiB moved, 15x the L2) is pure DRAM bandwidth on an H100; the second is small enough
 * that launch overhead shows; the third is timed in batches (a few microseconds); the holdout is odd so a kernel that assumes a multiple of its vector
 * width or block size leaves a tail. x and y have different means and spreads so that
 * neither input alone, nor a constant, is close to z.
 */
extern "C" __global__ void vector_add_ref(const float *x, const float *y, float *z, int n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < (size_t)n)
        z[i] = x[i] + y[i];
}

// kevo task   gelu_f32
// kevo doc    GELU, tanh approximation, elementwise on a float32 vector:
// kevo doc    y = 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3)))
// kevo doc    (as F.gelu(x, approximate='tanh')).
// kevo tags   elementwise activation
// kevo size   N=33554432
// kevo size   N=1000000
// kevo holdout N=5000011
// kevo input  x f32[N] normal(0,2)
// kevo output y f32[N]
// kevo bytes  8*N
// kevo flops  8*N
// kevo torch  F.gelu(x, approximate='tanh')
// kevo launch gelu_ref grid=cdiv(N,256) block=256 (x, y, N)
/*
 * gelu_f32 - the reference: one thread per element, the formula exactly as PyTorch writes
 * it (tanhf is accurate to 2 ulp). The primary size is 2^25 elements (256 MiB moved, five
 * times the L2), pure DRAM bandwidth; the holdout is odd so a vectorised kernel must handle
 * a tail. Inputs are normal(0,2): about half the outputs sit on the curved negative side
 * (near zero but not zero) and only ~4% (x > 3.6) are so large that GELU(x) equals x
 * within rtol, so neither zeros nor a copy of x passes. Default f32 tolerance (rtol=1e-4,
 * atol=1e-5): an equivalent form such as x*sigmoid(2u) or a 1-ulp tanh differs by ~1e-7
 * (measured against PyTorch: 4.8e-7 at most), while the exact erf GELU (up to
 * 4.7e-4 away, at x ~ -2.7) fails, and so will tanh.approx.f32 (~5e-4 relative error on
 * tanh, amplified where 1 + tanh(u) cancels for negative x).
 * flops counts ~8 operations per element (cube, fma, scale, tanh as one, add, two muls).
 */
extern "C" __global__ void gelu_ref(const float *x, float *y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) {
        float v = x[i];
        float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(u));
    }
}

// kevo task   scale_shift
// kevo doc    Benchmark task (bench/README.md): y = a * x + b elementwise on float32, a
// kevo doc    memory-bound kernel with three workloads: 64 MiB (past the L2), 4 MiB, 16 KiB.
// kevo tags   elementwise
// kevo size   N=16777216
// kevo size   N=1048576
// kevo size   N=4099
// kevo holdout N=999983
// kevo input  x f32[N] normal(0,3)
// kevo output y f32[N]
// kevo scalar a f32 1.5
// kevo scalar b f32 -0.25
// kevo tol    rtol=1e-6 atol=1e-6
// kevo bytes  8*N
// kevo flops  2*N
// kevo torch  1.5 * x - 0.25
// kevo launch scale_shift_ref grid=cdiv(N,256) block=256 (x, y, a, b, N)
/* The reference: one thread per element. */
extern "C" __global__ void scale_shift_ref(const float *x, float *y, float a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + b;
}

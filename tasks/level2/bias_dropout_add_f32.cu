// kevo task   bias_dropout_add_f32
// kevo doc    Bias + dropout + residual add (Megatron's bias_dropout_add) with the dropout mask given:
// kevo doc    y = residual + (x + bias) * mask * (1/(1-p)), mask u8 in {0,1}. x, mask, residual, y [M,N];
// kevo doc    bias [N]; the scale is computed in float as 1.0f / (1.0f - p).
// kevo tags   elementwise dropout residual fusion
// kevo size   M=8192 N=4096
// kevo size   M=1000 N=1536
// kevo holdout M=37 N=5003
// kevo input  x f32[M,N] normal(0,1)
// kevo input  bias f32[N] uniform(-1,1)
// kevo input  mask u8[M,N] randint(0,2)
// kevo input  residual f32[M,N] normal(1,1)
// kevo output y f32[M,N]
// kevo scratch t1 f32[M,N]
// kevo scratch t2 f32[M,N]
// kevo scalar p f32 0.1
// kevo tol    rtol=1e-5 atol=5e-6
// kevo bytes  13*M*N + 4*N
// kevo flops  3*M*N
// kevo torch  residual + (x + bias) * mask.to(torch.float32) * (1.0 / (1.0 - p))
// kevo launch add_bias_ref grid=cdiv(M*N,256) block=256 (x, bias, t1, M*N, N)
// kevo launch dropout_ref grid=cdiv(M*N,256) block=256 (t1, mask, t2, M*N, p)
// kevo launch add_ref grid=cdiv(M*N,256) block=256 (t2, residual, y, M*N)
/*
 * bias_dropout_add_f32 - the reference, unfused as three eager ops: bias add, dropout with
 * the given mask, residual add, one thread per element each, with float scratch tensors in
 * between (3x the traffic of the fused op). A fused kernel reads x, mask and residual once and
 * writes y: 13 bytes per element. Primary size: 8192 tokens of a 4096-wide model, 416 MiB
 * moved. The mask is an input (deterministic dropout) drawn 50/50, which need not match p:
 * the function is the formula, for any mask; p=0.1 makes the scale 1/0.9, not a power of 2.
 * Inputs: x ~ N(0,1) plus a per-column bias; residual ~ N(1,1); so y equals neither the
 * residual (half the elements add a term of size ~1.2) nor a constant.
 * Tolerance: rtol=1e-5 atol=5e-6: the result is a few float operations on values up to ~6
 * (ulp 4.8e-7); a different association ((x+b)*scale*m, FMA contraction, dividing by 1-p)
 * changes it by a few such ulps, which is absolute error where residual and the dropped-in
 * term cancel (this reference is within 1e-6 of the fp64 result). Skipping the 1/(1-p)
 * scale errs by ~0.1-0.7 and fails.
 */

extern "C" __global__ void add_bias_ref(const float *x, const float *bias, float *t1,
                                        long long total, int n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        t1[i] = x[i] + bias[i % n];
}

extern "C" __global__ void dropout_ref(const float *t1, const unsigned char *mask, float *t2,
                                       long long total, float p)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        t2[i] = t1[i] * (float)mask[i] * (1.0f / (1.0f - p));
}

extern "C" __global__ void add_ref(const float *t2, const float *residual, float *y,
                                   long long total)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        y[i] = t2[i] + residual[i];
}

// kevo task   quantize_int8_f32
// kevo doc    Per-row symmetric int8 quantization of an M x N float32 matrix, in float32:
// kevo doc    scale[r] = max_c |x[r,c]| * (1.0f/127) (as PyTorch evaluates "/ 127"), q[r,c] =
// kevo doc    clamp(rint(x[r,c] / scale[r]), -127, 127) (an IEEE division; rint: halves to even).
// kevo tags   quantize reduction
// kevo size   M=16384 N=4096
// kevo size   M=2048 N=14336
// kevo holdout M=37 N=5003
// kevo holdout M=1001 N=100
// kevo input  x f32[M,N] normal(0,3)
// kevo output q i8[M,N]
// kevo output scale f32[M]
// kevo bytes  5*M*N + 4*M
// kevo flops  2*M*N
// kevo torch  s = x.abs().amax(-1, keepdim=True) / 127
// kevo torch  (torch.round(x / s).clamp(-127, 127).to(torch.int8), s.squeeze(-1))
// kevo launch quant_ref grid=M block=256 smem=1024 (x, q, scale, N)
/*
 * quantize_int8_f32 - the reference: one block per row; a shared-memory tree reduction
 * of |x| gives the row's maximum (exact in any order); every thread then computes
 * scale = amax * (1.0f / 127.0f), thread 0 stores it, and each element becomes
 * rintf(x / scale) clamped to [-127, 127].
 * blockDim.x must be a power of two (256) with one float of dynamic shared memory per
 * thread.
 *
 * The integer outputs are compared exactly, so the float operations are pinned down to
 * match PyTorch's: the maximum is exact; PyTorch evaluates "tensor / 127" (a Python
 * scalar) as a multiply by the float32 reciprocal 1.0f/127.0f, so the scale is that one
 * rounded product (a true division differs by an ulp for a few rows, checked on an H100);
 * each quotient x / scale is a tensor-by-tensor division there, one correctly rounded
 * float division (NVRTC's default -prec-div=true). Multiplying x by 1/scale instead, or
 * -use_fast_math's approximate division, moves quotients that lie near a half-integer
 * across it (~30 of 67M elements at the primary size) and fails. rintf rounds halves to
 * even, like torch.round. The row's maximum maps to +-127 (the quotient is within an ulp
 * of 127), so the clamp only guards rounding. No row is all zero (scale 0) with these
 * inputs.
 *
 * Sizes: the primary quantizes 256 MiB of activations (16384 tokens x 4096); the second
 * has long rows (14336, an FFN width); the holdouts have odd N, one with short rows.
 * normal(0,3): the max of a row is ~4 std, so q spans the whole int8 range with most
 * values small, and scale varies by row.
 */
extern "C" __global__ void quant_ref(const float *x, signed char *q, float *scale, int n)
{
    extern __shared__ float red[];
    const float *row = x + (size_t)blockIdx.x * n;
    signed char *qr = q + (size_t)blockIdx.x * n;
    unsigned t = threadIdx.x;
    float m = 0.0f;

    for (int c = t; c < n; c += blockDim.x)
        m = fmaxf(m, fabsf(row[c]));
    red[t] = m;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] = fmaxf(red[t], red[t + s]);
        __syncthreads();
    }
    float sc = red[0] * (1.0f / 127.0f);

    if (t == 0)
        scale[blockIdx.x] = sc;
    for (int c = t; c < n; c += blockDim.x) {
        float v = rintf(row[c] / sc);
        v = fminf(fmaxf(v, -127.0f), 127.0f);
        qr[c] = (signed char)(int)v;
    }
}

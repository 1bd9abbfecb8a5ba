// kevo task   masked_softmax_f32
// kevo doc    Causal attention softmax, float32: for scores x [B,H,S,S], row i of each (b,h):
// kevo doc    p[j] = softmax_j(x[j] * scale) over j <= i, and p[j] = 0 exactly for j > i (masked, -inf).
// kevo tags   softmax reduction attention mask fusion
// kevo size   B=2 H=32 S=1024
// kevo size   B=4 H=16 S=512
// kevo holdout B=3 H=5 S=333
// kevo input  x f32[B,H,S,S] normal(0,32)
// kevo output y f32[B,H,S,S]
// kevo scratch t f32[B,H,S,S]
// kevo scalar scale f32 0.08838834764831845
// kevo tol    rtol=1e-4 atol=1e-7
// kevo bytes  4*B*H*(S*(S+1)/2) + 4*B*H*S*S
// kevo flops  3*B*H*S*(S+1)
// kevo torch  mask = torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1)
// kevo torch  torch.softmax((x * scale).masked_fill(mask, float('-inf')), dim=-1)
// kevo launch scale_mask_ref grid=cdiv(B*H*S*S,256) block=256 (x, t, B*H*S*S, S, scale)
// kevo launch softmax_ref grid=B*H*S block=256 smem=1024 (t, y, S)
/*
 * masked_softmax_f32 - the reference, unfused as in eager attention code: (1) one thread per
 * element writes x*scale, or -inf above the diagonal, to a scratch tensor; (2) one block per
 * row (blockDim 256, one float of shared memory per thread) takes the row maximum over the
 * unmasked entries, the sum of exp(v - max) with a tree reduction, and writes
 * exp(v - max) / sum, which is exactly 0 for the -inf entries. A fused kernel reads each
 * row once, skips the masked half (the bytes count only the lower triangle as read), and
 * writes zeros there without computing.
 * Primary size: 2 sequences of 1024 tokens x 32 heads, 64 Mi scores, ~384 MiB minimum
 * traffic; the holdout's S=333 is odd and not a multiple of the warp or block size.
 * Inputs: N(0,32) scores times 1/sqrt(128) have std ~2.8, so the rows' distributions range
 * from one-hot (row 0 is exactly 1 at j=0) to spread out; a uniform or unmasked output fails.
 * Tolerance: rtol=1e-4, atol=1e-7 as for softmax_rows: expf/__expf and a different
 * reduction order change an output by ~1e-6 relative; masked entries must be ~0.
 */

extern "C" __global__ void scale_mask_ref(const float *x, float *t, long long total, int s,
                                          float scale)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (idx < total) {
        int j = (int)(idx % s);
        int i = (int)((idx / s) % s);
        t[idx] = j > i ? -__int_as_float(0x7f800000) : x[idx] * scale;
    }
}

// Tree reduction over blockDim.x values in red[]; op 0 = max, 1 = sum. Every thread gets
// the result. blockDim.x must be a power of two.
__device__ static float block_reduce(float *red, float v, int op)
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] = op == 0 ? fmaxf(red[t], red[t + s]) : red[t] + red[t + s];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();
    return v;
}

// One block per row of length n; every row has at least one finite entry (j = 0).
extern "C" __global__ void softmax_ref(const float *t, float *y, int n)
{
    extern __shared__ float red[];
    const float *row = t + (size_t)blockIdx.x * n;
    float *out = y + (size_t)blockIdx.x * n;
    float m = -__int_as_float(0x7f800000);
    float s = 0.0f;

    for (int c = threadIdx.x; c < n; c += blockDim.x)
        m = fmaxf(m, row[c]);
    m = block_reduce(red, m, 0);
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        s += expf(row[c] - m);
    s = block_reduce(red, s, 1);
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        out[c] = expf(row[c] - m) / s;
}

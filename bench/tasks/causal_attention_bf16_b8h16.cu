// kevo task   causal_attention_bf16_b8h16
// kevo doc    (bench/: the suite's causal_attention_bf16 at the shape issue 15 names.)
// kevo doc    Causal scaled-dot-product attention forward, bf16 in and out: for each (b, h),
// kevo doc    out[i,:] = sum_{j<=i} softmax_j(q[i,:].k[j,:] / sqrt(D)) v[j,:]; q, k, v and out
// kevo doc    are [B, H, S, D] row-major (D contiguous). D is 64 or 128 in every workload.
// kevo tags   attention softmax gemm
// kevo size   B=8 H=16 S=2048 D=128
// kevo holdout B=3 H=5 S=1111 D=128
// kevo input  q bf16[B,H,S,D] normal(0,1.5)
// kevo input  k bf16[B,H,S,D] normal(0,1.5)
// kevo input  v bf16[B,H,S,D] normal(0,1)
// kevo output out bf16[B,H,S,D]
// kevo scratch p f32[B,H,S,S]
// kevo tol    rtol=2e-2 atol=1e-2
// kevo bytes  8*B*H*S*D
// kevo flops  2*B*H*S*(S+1)*D on bf16
// kevo torch  F.scaled_dot_product_attention(q, k, v, is_causal=True)
// kevo launch attn_scores grid=(cdiv(S,16), cdiv(S,16), B*H) block=(16,16) (q, k, p, S, D)
// kevo launch attn_softmax grid=(S, B*H) block=256 smem=1024 (p, S)
// kevo launch attn_pv grid=(cdiv(D,64), S, B*H) block=64 (p, v, out, S, D)
/*
 * causal_attention_bf16 - the reference, three launches through a float scratch matrix
 * p of all B*H*S*S scores (512 MiB at the primary size; only the lower triangle j <= i
 * is ever written or read):
 *   attn_scores   one thread per (i, j <= i): the dot product of q row i and k row j in
 *                 float, times 1/sqrt(D); threads above the diagonal do nothing.
 *   attn_softmax  one block per row i: max and sum of exp over p[i, 0..i] by shared-memory
 *                 tree reductions, p[i, j] overwritten with the probability.
 *   attn_pv       one thread per (i, d): sum_{j<=i} p[i,j] * v[j,d] in float, rounded to
 *                 bf16 once at the end.
 * Everything is computed in float from the bf16 inputs, so the reference is more accurate
 * than a flash-attention candidate that rounds P to bf16 before the PV product.
 * flops: QK^T and PV are each 2*D flops per (i, j <= i) pair, S*(S+1)/2 pairs per head:
 * 4*D*S*(S+1)/2 = 2*B*H*S*(S+1)*D, 34 GFLOP at the primary size (the exp and the
 * normalisation are not counted).
 * Inputs: q and k have std 1.5, so the scaled scores have std ~2.25 and the softmax is
 * neither flat nor one-hot; late rows still average many values (|out| ~0.1-0.3), early
 * rows few (|out| ~1). Tolerance: the bf16 defaults. The output itself is bf16 (a
 * rounding of 2^-9 relative on each side); PyTorch's flash SDPA (bf16 P) differs from
 * the reference by 0.16% relative L2 and uses at most 31% of the elementwise allowance
 * (measured on an H100, every workload); an all-zero output fails the relative L2 check.
 * Sizes: a LLaMA-like head size 128 at 2k context with B*H = 32; a second workload with
 * D=64; the holdout has S = 1111 (odd, not a multiple of any tile) and B*H = 15.
 * Grid y and z stay far below 65535 (S <= 2048, B*H <= 128).
 */
#include <cuda_bf16.h>

extern "C" __global__ void attn_scores(const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                                       float *p, int s, int d)
{
    int j = blockIdx.x * 16 + threadIdx.x;
    int i = blockIdx.y * 16 + threadIdx.y;
    size_t bh = blockIdx.z;

    if (i >= s || j > i)
        return;
    const __nv_bfloat16 *qi = q + (bh * s + i) * d;
    const __nv_bfloat16 *kj = k + (bh * s + j) * d;
    float acc = 0.0f;

    for (int c = 0; c < d; c++)
        acc += __bfloat162float(qi[c]) * __bfloat162float(kj[c]);
    p[(bh * s + i) * s + j] = acc / sqrtf((float)d);
}

// Tree reduction over blockDim.x values (a power of two); op 0 = max, 1 = sum.
__device__ static float block_reduce(float *red, float v, int op)
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (t < w)
            red[t] = op == 0 ? fmaxf(red[t], red[t + w]) : red[t] + red[t + w];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();
    return v;
}

extern "C" __global__ void attn_softmax(float *p, int s)
{
    extern __shared__ float red[];
    int i = blockIdx.x;
    float *row = p + ((size_t)blockIdx.y * s + i) * s;
    float m = -3.402823466e38f;
    float sum = 0.0f;

    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        m = fmaxf(m, row[j]);
    m = block_reduce(red, m, 0);
    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        sum += expf(row[j] - m);
    sum = block_reduce(red, sum, 1);
    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        row[j] = expf(row[j] - m) / sum;
}

extern "C" __global__ void attn_pv(const float *p, const __nv_bfloat16 *v, __nv_bfloat16 *out,
                                   int s, int d)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y;
    size_t bh = blockIdx.z;

    if (c >= d)
        return;
    const float *row = p + (bh * s + i) * s;
    const __nv_bfloat16 *vb = v + bh * s * d;
    float acc = 0.0f;

    for (int j = 0; j <= i; j++)
        acc += row[j] * __bfloat162float(vb[(size_t)j * d + c]);
    out[(bh * s + i) * d + c] = __float2bfloat16(acc);
}

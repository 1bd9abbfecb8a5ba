// kevo task   rope_qk_bf16
// kevo doc    Rotary position embedding (GPT-NeoX / Llama rotate-half convention) on q [B,S,H,D] and
// kevo doc    k [B,S,HK,D] (bf16), tables cos, sin [S,D/2] (f32); with h = D/2, for i < h:
// kevo doc    out[..,i] = x[..,i]*cos[s,i] - x[..,i+h]*sin[s,i], out[..,i+h] = x[..,i+h]*cos[s,i] + x[..,i]*sin[s,i].
// kevo tags   elementwise rope attention bf16 fusion
// kevo size   B=4 S=4096 H=32 HK=8 D=128
// kevo size   B=1 S=1000 H=32 HK=32 D=64
// kevo holdout B=3 S=257 H=5 HK=1 D=80
// kevo input  q bf16[B,S,H,D] normal(0,1)
// kevo input  k bf16[B,S,HK,D] normal(0,1)
// kevo input  cos f32[S,D/2] uniform(-1,1)
// kevo input  sin f32[S,D/2] uniform(-1,1)
// kevo output q_out bf16[B,S,H,D]
// kevo output k_out bf16[B,S,HK,D]
// kevo tol    rtol=2e-2 atol=1e-2
// kevo bytes  4*B*S*(H+HK)*D + 8*S*(D/2)
// kevo flops  3*B*S*(H+HK)*D
// kevo torch  c = torch.cat([cos, cos], dim=-1)[None, :, None, :]
// kevo torch  s = torch.cat([sin, sin], dim=-1)[None, :, None, :]
// kevo torch  rotate_half = lambda t: torch.cat((-t[..., D // 2:], t[..., :D // 2]), dim=-1)
// kevo torch  qf = q.float()
// kevo torch  kf = k.float()
// kevo torch  ((qf * c + rotate_half(qf) * s).to(torch.bfloat16), (kf * c + rotate_half(kf) * s).to(torch.bfloat16))
// kevo launch rope_ref grid=cdiv(B*S*H*(D/2),256) block=256 (q, cos, sin, q_out, B*S*H*(D/2), S, H, D)
// kevo launch rope_ref grid=cdiv(B*S*HK*(D/2),256) block=256 (k, cos, sin, k_out, B*S*HK*(D/2), S, HK, D)
/*
 * rope_qk_bf16 - the reference, one launch per tensor (as an unfused q/k pair of calls): one
 * thread per rotated pair (i, i + D/2) of one head of one token reads the two values and the
 * token's cos/sin entry, computes both outputs in float and rounds each to bf16 once. A fused
 * kernel handles q and k in one pass and reuses each token's table row across heads.
 * Primary size: 4 sequences of 4096 tokens, 32 query heads and 8 key heads of dim 128
 * (Llama-3-8B's grouped-query layout), 322 MiB moved. The holdout has D=80 (D/2 = 40, not a
 * multiple of 32 or 16), an odd S and head counts 5 and 1.
 * Inputs: the tables are inputs, drawn independently uniform(-1,1) (not a true rotation: the
 * function is the formula above for any table), so the outputs equal neither input nor a
 * rotation with the unit circle assumed; a candidate must read them.
 * Tolerance: the bf16 default. Each output is x1*c -/+ x2*s in float from bf16 inputs, exact
 * up to float rounding (~1e-7), then rounded once; correct candidates differ by at most one
 * bf16 ulp (FMA contraction can flip a rounding), PyTorch-style code the same.
 */
#include <cuda_bf16.h>

// x, out: [B,S,nh,D]; cos/sin: [S,D/2]. pairs = B*S*nh*(D/2).
extern "C" __global__ void rope_ref(const __nv_bfloat16 *x, const float *cos_t,
                                    const float *sin_t, __nv_bfloat16 *out, long long pairs,
                                    int s_len, int nh, int d)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int half = d / 2;

    if (p >= pairs)
        return;
    int i = (int)(p % half);
    long long row = p / half;                    // (b, s, head) flattened
    int s = (int)((row / nh) % s_len);
    size_t base = (size_t)row * d;
    float x1 = __bfloat162float(x[base + i]);
    float x2 = __bfloat162float(x[base + i + half]);
    float c = cos_t[(size_t)s * half + i];
    float sn = sin_t[(size_t)s * half + i];

    out[base + i] = __float2bfloat16(x1 * c - x2 * sn);
    out[base + i + half] = __float2bfloat16(x2 * c + x1 * sn);
}

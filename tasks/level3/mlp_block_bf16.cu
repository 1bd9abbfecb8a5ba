// kevo task   mlp_block_bf16
// kevo doc    LLaMA feed-forward block, bf16 in and out: out = (silu(x Wg^T) * (x Wu^T)) Wd^T with
// kevo doc    silu(g) = g / (1 + exp(-g)); x is [T, Dm], Wg and Wu are [Di, Dm], Wd is [Dm, Di]
// kevo doc    (nn.Linear layout), all row-major; out is [T, Dm].
// kevo tags   mlp gemm fused
// kevo size   T=1024 Dm=2048 Di=5632
// kevo size   T=200 Dm=2048 Di=5632
// kevo holdout T=131 Dm=1543 Di=4133
// kevo input  x bf16[T,Dm] normal(0,1)
// kevo input  wg bf16[Di,Dm] uniform(-0.04,0.04)
// kevo input  wu bf16[Di,Dm] uniform(-0.04,0.04)
// kevo input  wd bf16[Dm,Di] uniform(-0.025,0.025)
// kevo output out bf16[T,Dm]
// kevo scratch hid f32[T,Di]
// kevo tol    rtol=2e-2 atol=3e-2
// kevo bytes  4*T*Dm + 6*Di*Dm
// kevo flops  6*T*Dm*Di on bf16
// kevo torch  (F.silu(x @ wg.T) * (x @ wu.T)) @ wd.T
// kevo launch mlp_gate_up grid=(cdiv(Di,16), cdiv(T,16)) block=(16,16) (x, wg, wu, hid, T, Dm, Di)
// kevo launch mlp_down grid=(cdiv(Dm,16), cdiv(T,16)) block=(16,16) (hid, wd, out, T, Dm, Di)
/*
 * mlp_block_bf16 - the reference, two launches through a float scratch matrix hid [T, Di]:
 *   mlp_gate_up  one thread per (t, n): the gate and up dot products of row t of x with
 *                row n of Wg and Wu, in float, then hid = silu(gate) * up, kept in float.
 *   mlp_down     one thread per (t, m): out = sum_n hid[t,n] * Wd[m,n] in float, rounded
 *                to bf16 once.
 * Naive: no shared-memory tiling and no tensor cores; each thread reads its weight row
 * straight from memory (through L1/L2). The reference never rounds the intermediate
 * values, so it is more accurate than PyTorch, which rounds x Wg^T, x Wu^T, the silu and
 * the product to bf16 before the down projection.
 * Sizes: a LLaMA-7B-like MLP at a 2048 model width (Di = 2.75 Dm) with 1024 tokens,
 * 71 GFLOP; the second workload is a small batch of 200 tokens (the 69 MB of weights
 * dominate: a bandwidth-bound regime); the holdout has an odd token count and widths
 * that are not multiples of 8 (rows of the weights start at unaligned addresses).
 * Inputs: x ~ N(0,1) and weights with std ~1/sqrt(fan-in) (uniform +-0.04 for Dm=2048,
 * +-0.025 for Di=5632), so the gate and up values are O(1) (silu is in its non-linear
 * range) and the outputs have std ~0.7 (~0.6 on the holdout's narrower widths).
 * Tolerance: rtol=2e-2 (the bf16 default) and atol=3e-2, ~4% of the output's std at the
 * primary size. PyTorch's own result (x Wg^T, x Wu^T, silu and the product each rounded
 * to bf16 before the down projection) differs from this exact-intermediate reference by
 * ~0.4% relative L2, i.e. ~3e-3 absolute per output, with a maximum of ~0.016 over 2 M
 * outputs: the default atol=1e-2 rejected it on 9 elements (measured on an H100). A
 * candidate that rounds hid to bf16 once errs less. An all-zero output still fails the
 * relative L2 check (error 1), as does any output whose relative L2 error exceeds 2%.
 */
#include <cuda_bf16.h>

extern "C" __global__ void mlp_gate_up(const __nv_bfloat16 *x, const __nv_bfloat16 *wg,
                                       const __nv_bfloat16 *wu, float *hid, int t, int dm,
                                       int di)
{
    int n = blockIdx.x * 16 + threadIdx.x;
    int r = blockIdx.y * 16 + threadIdx.y;

    if (r >= t || n >= di)
        return;
    const __nv_bfloat16 *xr = x + (size_t)r * dm;
    const __nv_bfloat16 *gr = wg + (size_t)n * dm;
    const __nv_bfloat16 *ur = wu + (size_t)n * dm;
    float g = 0.0f, u = 0.0f;

    for (int c = 0; c < dm; c++) {
        float xv = __bfloat162float(xr[c]);

        g += xv * __bfloat162float(gr[c]);
        u += xv * __bfloat162float(ur[c]);
    }
    hid[(size_t)r * di + n] = g / (1.0f + expf(-g)) * u;
}

extern "C" __global__ void mlp_down(const float *hid, const __nv_bfloat16 *wd,
                                    __nv_bfloat16 *out, int t, int dm, int di)
{
    int m = blockIdx.x * 16 + threadIdx.x;
    int r = blockIdx.y * 16 + threadIdx.y;

    if (r >= t || m >= dm)
        return;
    const float *hr = hid + (size_t)r * di;
    const __nv_bfloat16 *wr = wd + (size_t)m * di;
    float acc = 0.0f;

    for (int c = 0; c < di; c++)
        acc += hr[c] * __bfloat162float(wr[c]);
    out[(size_t)r * dm + m] = __float2bfloat16(acc);
}

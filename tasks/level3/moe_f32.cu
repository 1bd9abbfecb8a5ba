// kevo task   moe_f32
// kevo doc    Top-2 mixture-of-experts feed-forward in float32: logits = x Wr^T [T,E]; each token
// kevo doc    picks its two largest logits (ties -> lower expert index), weights w = softmax of those
// kevo doc    two; out[t] = sum_j w_j * relu(x[t] W1[e_j]^T) W2[e_j]^T. x [T,D], Wr [E,D],
// kevo doc    W1 [E,Dff,D], W2 [E,D,Dff] (nn.Linear layout per expert), out [T,D].
// kevo tags   moe gemm routing topk fused
// kevo size   T=4096 D=512 Dff=1024 E=8
// kevo size   T=1024 D=256 Dff=512 E=4
// kevo holdout T=1001 D=200 Dff=333 E=6
// kevo input  x f32[T,D] normal(0,1)
// kevo input  wr f32[E,D] uniform(-0.1,0.1)
// kevo input  w1 f32[E,Dff,D] uniform(-0.075,0.075)
// kevo input  w2 f32[E,D,Dff] uniform(-0.055,0.055)
// kevo output out f32[T,D]
// kevo scratch topi i32[T,2]
// kevo scratch topw f32[T,2]
// kevo scratch hid f32[T,2,Dff]
// kevo tol    rtol=1e-4 atol=1e-5
// kevo bytes  8*T*D + 4*E*D + 8*E*D*Dff
// kevo flops  2*T*D*E + 8*T*D*Dff
// kevo torch  logits = x @ wr.T
// kevo torch  top_v, top_i = torch.topk(logits, 2, dim=-1)
// kevo torch  wsel = torch.zeros(T, E, device=x.device, dtype=x.dtype).scatter(1, top_i, torch.softmax(top_v, dim=-1))
// kevo torch  out = torch.zeros_like(x)
// kevo torch  for e in range(E): tk = torch.nonzero(wsel[:, e])[:, 0]; out.index_add_(0, tk, wsel[tk, e, None] * (F.relu(x[tk] @ w1[e].T) @ w2[e].T))
// kevo torch  out
// kevo launch moe_router grid=cdiv(T,128) block=128 (x, wr, topi, topw, T, D, E)
// kevo launch moe_expert_up grid=(cdiv(Dff,128), 2*T) block=128 (x, w1, topi, hid, T, D, Dff)
// kevo launch moe_expert_down grid=(cdiv(D,128), T) block=128 (hid, w2, topi, topw, out, T, D, Dff)
/*
 * moe_f32 - the reference, three launches through scratch tensors:
 *   moe_router       one thread per token: the E logits in double (rounded to float), a
 *                    running top-2 with strict '>' so that of equal logits the lower
 *                    expert index wins, then the two softmax weights; topi/topw [T,2].
 *   moe_expert_up    one thread per (token, slot, f): relu(x[t] . W1[e][f]) into
 *                    hid [T,2,Dff].
 *   moe_expert_down  one thread per (t, d): sum over the two slots of w_j times
 *                    hid[t,j,:] . W2[e_j][d], in float.
 * Only the selected experts are computed (2 of E per token): flops are the router
 * (2*T*D*E) plus 2 experts x 2 matrices x 2*D*Dff per token (8*T*D*Dff), 17 GFLOP at the
 * primary size (a Mixtral-like 8-expert top-2 layer, scaled down). bytes: x, out, the
 * router and every expert's weights once (with 4096 tokens every expert is used).
 * Inputs: router weights give logits of std ~1.3 (the two weights are unequal but
 * neither negligible); expert weights have std ~1/sqrt(fan-in), so the hidden values are
 * O(1) (about half clipped by relu) and the outputs have std ~0.5.
 * Tolerance: float sums of <= 1024 terms in any order stay ~1e-6 relative; rtol=1e-4
 * atol=1e-5 (PyTorch's float32 result is within 3.4e-6 absolute, measured on an H100).
 * Routing is a discontinuous function: a candidate whose logits differ from the
 * reference's by float rounding (~1e-7 relative) picks another expert only when a
 * token's 2nd and 3rd logits are that close. Measured: over 300 draws of the primary
 * workload (1.2 M tokens), float32 logits (x @ wr.T in PyTorch) and float64 logits chose
 * the same pair of experts for every token, so a correct candidate is expected to fail
 * this way far less than once per thousand trials. The holdout has an odd token count,
 * widths that are not multiples of 8, and 6 experts.
 */

extern "C" __global__ void moe_router(const float *x, const float *wr, int *topi, float *topw,
                                      int t, int d, int ne)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;

    if (r >= t)
        return;
    const float *xr = x + (size_t)r * d;
    float l1 = -3.402823466e38f, l2 = -3.402823466e38f;
    int i1 = 0, i2 = 0;

    for (int e = 0; e < ne; e++) {
        const float *we = wr + (size_t)e * d;
        double acc = 0.0;

        for (int c = 0; c < d; c++)
            acc += (double)xr[c] * we[c];
        float l = (float)acc;
        if (l > l1) {
            l2 = l1; i2 = i1;
            l1 = l; i1 = e;
        } else if (l > l2) {
            l2 = l; i2 = e;
        }
    }
    float z = expf(l2 - l1);   // <= 1
    topi[2 * r] = i1;
    topi[2 * r + 1] = i2;
    topw[2 * r] = 1.0f / (1.0f + z);
    topw[2 * r + 1] = z / (1.0f + z);
}

extern "C" __global__ void moe_expert_up(const float *x, const float *w1, const int *topi,
                                         float *hid, int t, int d, int dff)
{
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    size_t slot = blockIdx.y;   // t*2 + j
    size_t r = slot / 2;

    if (f >= dff)
        return;
    int e = topi[slot];
    const float *xr = x + r * d;
    const float *wf = w1 + ((size_t)e * dff + f) * d;
    float acc = 0.0f;

    for (int c = 0; c < d; c++)
        acc += xr[c] * wf[c];
    hid[slot * dff + f] = fmaxf(acc, 0.0f);
}

extern "C" __global__ void moe_expert_down(const float *hid, const float *w2, const int *topi,
                                           const float *topw, float *out, int t, int d, int dff)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    size_t r = blockIdx.y;

    if (c >= d)
        return;
    float res = 0.0f;

    for (int j = 0; j < 2; j++) {
        int e = topi[2 * r + j];
        const float *hr = hid + (2 * r + j) * dff;
        const float *wd = w2 + ((size_t)e * d + c) * dff;
        float acc = 0.0f;

        for (int f = 0; f < dff; f++)
            acc += hr[f] * wd[f];
        res += topw[2 * r + j] * acc;
    }
    out[r * d + c] = res;
}

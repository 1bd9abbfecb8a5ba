// kevo task   decoder_layer_f32
// kevo doc    Pre-norm transformer decoder layer in float32 (no rotary, no biases):
// kevo doc    h = x + Attn(RMSNorm(x; g1)) Wo^T, out = h + gelu(RMSNorm(h; g2) W1^T) W2^T, where
// kevo doc    Attn is causal multi-head attention (H heads of size Dh, D = H*Dh, scale 1/sqrt(Dh))
// kevo doc    on q,k,v = xn Wq^T, xn Wk^T, xn Wv^T; RMSNorm(a; g) = a / sqrt(mean(a^2) + eps) * g;
// kevo doc    gelu is the exact erf form; x and out are [B, S, D], weights are nn.Linear [out, in].
// kevo tags   transformer attention gemm norm fused
// kevo size   B=4 S=512 H=16 Dh=64 D=H*Dh Dff=4*D
// kevo size   B=8 S=128 H=8 Dh=64 D=H*Dh Dff=4*D
// kevo holdout B=3 S=131 H=5 Dh=64 D=H*Dh Dff=3*D+17
// kevo input  x f32[B,S,D] normal(0.5,1)
// kevo input  g1 f32[D] uniform(0.5,1.5)
// kevo input  wq f32[D,D] uniform(-0.08,0.08)
// kevo input  wk f32[D,D] uniform(-0.08,0.08)
// kevo input  wv f32[D,D] uniform(-0.05,0.05)
// kevo input  wo f32[D,D] uniform(-0.05,0.05)
// kevo input  g2 f32[D] uniform(0.5,1.5)
// kevo input  w1 f32[Dff,D] uniform(-0.05,0.05)
// kevo input  w2 f32[D,Dff] uniform(-0.025,0.025)
// kevo output out f32[B,S,D]
// kevo scratch xn f32[B,S,D]
// kevo scratch qs f32[B,S,D]
// kevo scratch ks f32[B,S,D]
// kevo scratch vs f32[B,S,D]
// kevo scratch sc f32[B,H,S,S]
// kevo scratch ao f32[B,S,D]
// kevo scratch hres f32[B,S,D]
// kevo scratch hn f32[B,S,D]
// kevo scratch mid f32[B,S,Dff]
// kevo scalar eps f32 1e-5
// kevo tol    rtol=1e-4 atol=1e-4
// kevo bytes  8*B*S*D + 16*D*D + 8*D*Dff + 8*D
// kevo flops  8*B*S*D*D + 2*B*S*(S+1)*D + 4*B*S*D*Dff
// kevo torch  xn = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g1
// kevo torch  q = (xn @ wq.T).view(B, S, H, Dh).transpose(1, 2)
// kevo torch  k = (xn @ wk.T).view(B, S, H, Dh).transpose(1, 2)
// kevo torch  v = (xn @ wv.T).view(B, S, H, Dh).transpose(1, 2)
// kevo torch  a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, S, D)
// kevo torch  h = x + a @ wo.T
// kevo torch  hn = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * g2
// kevo torch  h + F.gelu(hn @ w1.T) @ w2.T
// kevo launch rmsnorm_rows grid=B*S block=256 smem=1024 (x, g1, xn, D, eps)
// kevo launch linear_nt grid=(cdiv(D,16), cdiv(B*S,16)) block=(16,16) (xn, wq, x, qs, B*S, D, D, 0)
// kevo launch linear_nt grid=(cdiv(D,16), cdiv(B*S,16)) block=(16,16) (xn, wk, x, ks, B*S, D, D, 0)
// kevo launch linear_nt grid=(cdiv(D,16), cdiv(B*S,16)) block=(16,16) (xn, wv, x, vs, B*S, D, D, 0)
// kevo launch attn_scores grid=(cdiv(S,16), cdiv(S,16), B*H) block=(16,16) (qs, ks, sc, S, H, Dh)
// kevo launch attn_softmax grid=(S, B*H) block=256 smem=1024 (sc, S)
// kevo launch attn_pv grid=(cdiv(Dh,64), S, B*H) block=64 (sc, vs, ao, S, H, Dh)
// kevo launch linear_nt grid=(cdiv(D,16), cdiv(B*S,16)) block=(16,16) (ao, wo, x, hres, B*S, D, D, 2)
// kevo launch rmsnorm_rows grid=B*S block=256 smem=1024 (hres, g2, hn, D, eps)
// kevo launch linear_nt grid=(cdiv(Dff,16), cdiv(B*S,16)) block=(16,16) (hn, w1, x, mid, B*S, Dff, D, 1)
// kevo launch linear_nt grid=(cdiv(D,16), cdiv(B*S,16)) block=(16,16) (mid, w2, hres, out, B*S, D, Dff, 2)
/*
 * decoder_layer_f32 - the reference: eleven simple launches through float scratch
 * tensors, each of them the obvious kernel:
 *   rmsnorm_rows  one block per token, a shared-memory tree reduction of the squares.
 *   linear_nt     one thread per output element of out[M,N] = in[M,K] W[N,K]^T, with an
 *                 epilogue: 0 none, 1 exact GELU, 2 + res[M,N] (the residual adds).
 *                 Used for q, k, v, the output projection (+x), W1 (GELU) and W2 (+h).
 *   attn_scores   one thread per (b, h, i, j <= i): q.k / sqrt(Dh) into sc [B,H,S,S]
 *                 (only the lower triangle is written and read).
 *   attn_softmax  one block per row, in place, over j <= i.
 *   attn_pv       one thread per (b, i, h, d): sum_{j<=i} p * v, written into the
 *                 head's columns of ao [B,S,D] (heads concatenated, as view/transpose does).
 * flops: 4 D x D projections (8*B*S*D^2), causal attention (2*D flops for each of QK and
 * PV per pair j <= i: 2*B*S*(S+1)*D) and the MLP (4*B*S*D*Dff): 54 GFLOP at the
 * primary size, a GPT-2-medium-like layer (D=1024, 16 heads of 64) on 4 x 512 tokens.
 * The holdout has an odd sequence length, 5 heads (D=320) and an MLP width of 977.
 * Inputs: x has mean 0.5 (so the norm matters); weight ranges are ~1/sqrt(fan-in)
 * except Wq and Wk, which are larger so that the attention scores have std ~2 at the
 * primary size (softmax neither flat nor one-hot); every stage changes the output
 * (the attention and MLP branches each add O(0.5) to the residual stream).
 * Tolerance: fp32 arithmetic in any summation order (errors ~1e-6 relative after sums of
 * up to 4096 terms, a softmax and two norms) passes rtol=1e-4 atol=1e-4 with a wide
 * margin against outputs of O(1); TF32 tensor cores (~1e-3 relative) do not.
 */

__device__ static float block_reduce_sum(float *red, float v)
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (t < w)
            red[t] += red[t + w];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();
    return v;
}

__device__ static float block_reduce_max(float *red, float v)
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (t < w)
            red[t] = fmaxf(red[t], red[t + w]);
        __syncthreads();
    }
    v = red[0];
    __syncthreads();
    return v;
}

extern "C" __global__ void rmsnorm_rows(const float *x, const float *g, float *y, int d,
                                        float eps)
{
    extern __shared__ float red[];
    const float *row = x + (size_t)blockIdx.x * d;
    float *o = y + (size_t)blockIdx.x * d;
    float ss = 0.0f;

    for (int c = threadIdx.x; c < d; c += blockDim.x)
        ss += row[c] * row[c];
    ss = block_reduce_sum(red, ss);
    float inv = 1.0f / sqrtf(ss / (float)d + eps);
    for (int c = threadIdx.x; c < d; c += blockDim.x)
        o[c] = row[c] * inv * g[c];
}

// out[M,N] = epi(in[M,K] W[N,K]^T); epi 0: none, 1: exact GELU, 2: + res[M,N].
extern "C" __global__ void linear_nt(const float *in, const float *w, const float *res,
                                     float *out, int m, int n, int k, int epi)
{
    int col = blockIdx.x * 16 + threadIdx.x;
    int row = blockIdx.y * 16 + threadIdx.y;

    if (row >= m || col >= n)
        return;
    const float *a = in + (size_t)row * k;
    const float *b = w + (size_t)col * k;
    float acc = 0.0f;

    for (int c = 0; c < k; c++)
        acc += a[c] * b[c];
    size_t o = (size_t)row * n + col;
    if (epi == 1)
        acc = 0.5f * acc * (1.0f + erff(acc * 0.70710678118654752f));
    else if (epi == 2)
        acc += res[o];
    out[o] = acc;
}

// q, k: [B, S, H*Dh]; sc: [B, H, S, S]; blockIdx.z = b*H + h.
extern "C" __global__ void attn_scores(const float *q, const float *k, float *sc, int s,
                                       int nh, int dh)
{
    int j = blockIdx.x * 16 + threadIdx.x;
    int i = blockIdx.y * 16 + threadIdx.y;
    size_t bh = blockIdx.z;
    size_t b = bh / nh, h = bh % nh;
    size_t d = (size_t)nh * dh;

    if (i >= s || j > i)
        return;
    const float *qi = q + (b * s + i) * d + h * dh;
    const float *kj = k + (b * s + j) * d + h * dh;
    float acc = 0.0f;

    for (int c = 0; c < dh; c++)
        acc += qi[c] * kj[c];
    sc[(bh * s + i) * s + j] = acc / sqrtf((float)dh);
}

extern "C" __global__ void attn_softmax(float *sc, int s)
{
    extern __shared__ float red[];
    int i = blockIdx.x;
    float *row = sc + ((size_t)blockIdx.y * s + i) * s;
    float m = -3.402823466e38f;
    float sum = 0.0f;

    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        m = fmaxf(m, row[j]);
    m = block_reduce_max(red, m);
    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        sum += expf(row[j] - m);
    sum = block_reduce_sum(red, sum);
    for (int j = threadIdx.x; j <= i; j += blockDim.x)
        row[j] = expf(row[j] - m) / sum;
}

// ao[b, i, h*Dh + c] = sum_{j<=i} p[b,h,i,j] * v[b, j, h*Dh + c].
extern "C" __global__ void attn_pv(const float *p, const float *v, float *ao, int s, int nh,
                                   int dh)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y;
    size_t bh = blockIdx.z;
    size_t b = bh / nh, h = bh % nh;
    size_t d = (size_t)nh * dh;

    if (c >= dh)
        return;
    const float *row = p + (bh * s + i) * s;
    const float *vb = v + b * s * d + h * dh + c;
    float acc = 0.0f;

    for (int j = 0; j <= i; j++)
        acc += row[j] * vb[(size_t)j * d];
    ao[(b * s + i) * d + h * dh + c] = acc;
}

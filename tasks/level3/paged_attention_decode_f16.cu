// kevo task   paged_attention_decode_f16
// kevo doc    Single-query (decode) attention over a paged KV cache, f16: for each (b, h),
// kevo doc    out[b,h,:] = sum_{j<L} softmax_j(q[b,h,:].K_j / sqrt(D)) V_j, where token j of sequence b is
// kevo doc    k_cache[block_table[b, j/BS], j%BS, h, :] (likewise v); every sequence has L tokens.
// kevo tags   attention decode paged gather softmax
// kevo size   B=8 H=32 D=128 L=4096 BS=16 MAXB=cdiv(L,BS) NB=B*MAXB
// kevo size   B=32 H=8 D=64 L=1000 BS=16 MAXB=cdiv(L,BS) NB=B*MAXB
// kevo holdout B=5 H=7 D=128 L=1237 BS=16 MAXB=cdiv(L,BS) NB=B*MAXB
// kevo input  q f16[B,H,D] normal(0,2)
// kevo input  k_cache f16[NB,BS,H,D] normal(0,1)
// kevo input  v_cache f16[NB,BS,H,D] normal(0,1)
// kevo input  block_table i32[B,MAXB] randint(0,NB)
// kevo output out f16[B,H,D]
// kevo scratch sc f32[B,H,L]
// kevo tol    rtol=1e-2 atol=1e-3
// kevo bytes  4*B*H*D + 4*B*MAXB + 2*B*L*H*D
// kevo flops  4*B*H*L*D on fp16
// kevo torch  kk = k_cache[block_table.long()].reshape(B, MAXB * BS, H, D)[:, :L].transpose(1, 2)
// kevo torch  vv = v_cache[block_table.long()].reshape(B, MAXB * BS, H, D)[:, :L].transpose(1, 2)
// kevo torch  F.scaled_dot_product_attention(q[:, :, None, :], kk, vv)[:, :, 0, :]
// kevo launch pa_scores grid=(cdiv(L,128), H, B) block=128 (q, k_cache, block_table, sc, H, D, L, BS, MAXB)
// kevo launch pa_softmax grid=B*H block=256 smem=1024 (sc, L)
// kevo launch pa_pv grid=(cdiv(D,128), H, B) block=128 (sc, v_cache, block_table, out, H, D, L, BS, MAXB)
/*
 * paged_attention_decode_f16 - the reference, three launches through a float scratch of
 * scores sc [B,H,L]:
 *   pa_scores   one thread per (b, h, j): look up the physical block of token j in the
 *               block table, dot its key with q in float, times 1/sqrt(D).
 *   pa_softmax  one block per (b, h): max and sum by shared-memory tree reductions, the
 *               scores overwritten with probabilities.
 *   pa_pv       one thread per (b, h, d): sum_j p_j * V_j[d] in float, rounded to f16
 *               once. Only B*H*D threads, each walking all L tokens: slow and latency
 *               bound on purpose (a split-K "flash decoding" candidate fixes it).
 * Context lengths: every sequence has the same length L (a size), so the format needs no
 * lengths tensor; the last block of a sequence is partial when L is not a multiple of BS
 * (the second workload and the holdout), and its tail slots hold data that must be ignored.
 * Block table: randint(0, NB) with NB = B*MAXB physical blocks, as a cache allocator that
 * hands out blocks in any order would give; entries may repeat (two logical blocks then
 * share a physical block, which is harmless for a read-only cache).
 * bytes: q and out once, the block table, and the keys and values of the tokens read. With
 * a random table only ~63% of the referenced blocks are distinct (1 - 1/e), and a
 * candidate may legitimately read a repeated block once; the floor therefore counts half
 * of the nominal 4*B*L*H*D bytes of K and V (512 MiB nominal at the primary size, a
 * LLaMA-7B-like 32 heads of 128 at a 4k context, batch 8).
 * Inputs: q has std 2, k and v std 1, so the scaled scores have std ~2 and the softmax
 * weights concentrate on tens of tokens: |out| ~0.1-0.3, far from zero or from any
 * single value row. Tolerance: the f16 defaults; a candidate that keeps P in f16 or
 * accumulates in split partial sums errs by ~1e-4 absolute; PyTorch's f16 SDPA on the
 * gathered cache uses at most 8% of the elementwise allowance (measured on an H100).
 */
#include <cuda_fp16.h>

extern "C" __global__ void pa_scores(const __half *q, const __half *kc, const int *table,
                                     float *sc, int nh, int d, int l, int bs, int maxb)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    size_t h = blockIdx.y, b = blockIdx.z;

    if (j >= l)
        return;
    size_t blk = (size_t)table[b * maxb + j / bs];
    const __half *kp = kc + ((blk * bs + j % bs) * nh + h) * d;
    const __half *qp = q + (b * nh + h) * d;
    float acc = 0.0f;

    for (int c = 0; c < d; c++)
        acc += __half2float(qp[c]) * __half2float(kp[c]);
    sc[(b * nh + h) * l + j] = acc / sqrtf((float)d);
}

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

extern "C" __global__ void pa_softmax(float *sc, int l)
{
    extern __shared__ float red[];
    float *row = sc + (size_t)blockIdx.x * l;
    float m = -3.402823466e38f;
    float sum = 0.0f;

    for (int j = threadIdx.x; j < l; j += blockDim.x)
        m = fmaxf(m, row[j]);
    m = block_reduce(red, m, 0);
    for (int j = threadIdx.x; j < l; j += blockDim.x)
        sum += expf(row[j] - m);
    sum = block_reduce(red, sum, 1);
    for (int j = threadIdx.x; j < l; j += blockDim.x)
        row[j] = expf(row[j] - m) / sum;
}

extern "C" __global__ void pa_pv(const float *sc, const __half *vc, const int *table,
                                 __half *out, int nh, int d, int l, int bs, int maxb)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    size_t h = blockIdx.y, b = blockIdx.z;

    if (c >= d)
        return;
    const float *p = sc + (b * nh + h) * l;
    float acc = 0.0f;

    for (int j = 0; j < l; j++) {
        size_t blk = (size_t)table[b * maxb + j / bs];

        acc += p[j] * __half2float(vc[((blk * bs + j % bs) * nh + h) * d + c]);
    }
    out[(b * nh + h) * d + c] = __float2half(acc);
}

// kevo doc    Y = gelu_tanh(X W^T + b) on Hopper tensor cores: the TMA + wgmma GEMM of
// kevo doc    examples/seeds/matmul_bf16.cu with W K-major (nn.Linear's [N,K]) and the bias and
// kevo doc    GELU applied to the float accumulators in registers before the one rounding to
// kevo doc    bf16, so the product never goes to memory. Few tiles: split K, and the second
// kevo doc    launch sums the parts and applies the epilogue.
// kevo param  ST 4 3
// kevo tmap   tx x box=[128, 64] swizzle=128
// kevo tmap   tw w box=[256, 64] swizzle=128
// kevo scratch ws f32[min(8*M*N, 4325376)]
// kevo launch gemm_bias_gelu grid=min(cdiv(M,128)*cdiv(N,256)*max(1, min(8, 132/(cdiv(M,128)*cdiv(N,256)))), 132) block=384 smem=ST*49152+1280 (x, w, b, y, ws, tx, tw, M, N, K)
// kevo launch splitk_bias_gelu grid=cdiv(min(M*N, 131072), 1024) block=256 (ws, b, y, M, N, K)
/*
 * An exemplar for tasks/level2/matmul_bias_gelu_bf16.cu (docs/playbook/wgmma-and-tma.md,
 * online-softmax-and-fusion.md): a GEMM with a fused epilogue. It is
 * examples/seeds/matmul_bf16.cu (read that file's comment for the pipeline: persistent
 * blocks of one TMA producer thread and two wgmma consumer warpgroups, 128 x 256 tiles,
 * mbarrier stages, split K for few tiles) with two changes:
 *
 * - B is W [N,K], K-major like A: its stage is one 256 x 64 TMA box (32 KB, 128-byte
 *   swizzle, row n's 16-byte chunk c at chunk c ^ (n & 7)), and the B descriptor is the
 *   K-major one (LBO 16, SBO 1024 between 8-row groups, the next k16 +32 bytes,
 *   imm-trans-b 0), exactly as A's.
 * - The epilogue: each thread's accumulators (rows 16w + lane/4 (+8), columns
 *   8i + 2(lane % 4) (+1)) get the bias of their column, the tanh GELU
 *   (0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), tanhf for accuracy), and one
 *   rounding to bf16, as the reference does after its float product. The split-K path sums
 *   the float parts in slice order first, then does the same.
 *
 * Rows whose pitch the TMA unit cannot take (K not a multiple of 8: the holdout) get zero
 * maps from the harness; then the producer warpgroup fills the stages with plain loads in
 * the same swizzled layout.
 */
#include <cuda_bf16.h>

#ifndef ST
#define ST 4
#endif
#define BM 128
#define BN 256
#define BK 64
#define A_BYTES (BM * BK * 2)              /* 16 KB */
#define B_BYTES (BN * BK * 2)              /* 32 KB */
#define STAGE_BYTES (A_BYTES + B_BYTES)
#define SMS 132                            /* H100 SXM and H200: 132 SMs */
#define MAX_SPLIT 8
#define GROUP_M 8

/* ---- PTX wrappers: shared addresses are 32-bit offsets in the shared window ---- */

__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void st_shared16(unsigned dst, uint4 v)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w) : "memory");
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar)
                 : "memory");
}

/* Spin until the phase of parity `parity` of the barrier has completed. */
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    unsigned done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Shared-memory matrix descriptor, 128-byte swizzle (start, LBO, SBO in bytes). */
__device__ __forceinline__ unsigned long long sdesc(unsigned addr, unsigned lbo, unsigned sbo)
{
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

/* One wgmma.m64n256k16: d (128 floats) += or = A (64 x 16, smem) * B (16 x 256, smem, K-major: W). */
__device__ __forceinline__ void wgmma_n256(float *d, unsigned long long da, unsigned long long db, int acc)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
          "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
          "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
          "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
          "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
          "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
          "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]),
          "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
          "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),
          "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),
          "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
          "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
          "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]),
          "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]),
          "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]),
          "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
          "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),
          "+f"(d[127])
        : "l"(da), "l"(db), "r"(acc));
}

/* ---- work units ---- */

struct plan {
    int tm, tn, tiles, nkb, split, kper, units;
};

/* The same in both launches: the split of K fills the SMs when tiles are few. */
__device__ __forceinline__ plan make_plan(int M, int N, int K)
{
    plan p;
    p.tm = (M + BM - 1) / BM;
    p.tn = (N + BN - 1) / BN;
    p.tiles = p.tm * p.tn;
    p.nkb = (K + BK - 1) / BK;
    int s = SMS / p.tiles;
    s = s < 1 ? 1 : s > MAX_SPLIT ? MAX_SPLIT : s;
    s = s > p.nkb ? p.nkb : s;
    p.kper = (p.nkb + s - 1) / s;
    p.split = (p.nkb + p.kper - 1) / p.kper;   /* every slice non-empty */
    p.units = p.tiles * p.split;
    return p;
}

/* Unit u: its tile (mt, nt), grouped GROUP_M tiles down M for L2 reuse, and k blocks. */
__device__ __forceinline__ void unit_of(const plan &p, int u, int &mt, int &nt, int &kb0, int &kb1)
{
    int tile = u / p.split, ks = u % p.split;
    int per = GROUP_M * p.tn, first = tile / per * GROUP_M;
    int gs = p.tm - first < GROUP_M ? p.tm - first : GROUP_M, r = tile % per;
    mt = first + r % gs;
    nt = r / gs;
    kb0 = ks * p.kper;
    kb1 = kb0 + p.kper < p.nkb ? kb0 + p.kper : p.nkb;
}

/* ---- producer ---- */

/* The harness's tensor map (`// kevo tmap`): 128 opaque bytes, read by the TMA unit. */
struct __align__(64) tmap_t {
    unsigned long long v[16];
};

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}

/* A 2-D box of map m at (c0 inner, c1 outer) into shared dst; it completes bytes on bar. */
__device__ __forceinline__ void tma_load(unsigned dst, const tmap_t *m, unsigned bar, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst), "l"((unsigned long long)m), "r"(bar),
                 "r"(c0), "r"(c1) : "memory");
}

/* 8 bf16 from p[0..n) (n <= 8 valid, the rest 0), as one 16-byte chunk. */
__device__ __forceinline__ uint4 gather8(const unsigned short *p, int n)
{
    unsigned w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        unsigned lo = 2 * e < n ? p[2 * e] : 0, hi = 2 * e + 1 < n ? p[2 * e + 1] : 0;
        w[e] = lo | hi << 16;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* Stage (sa, sb) <- X[mt*BM.., kb*BK..] and W[nt*BN.., kb*BK..] with plain loads, laid out
 * as the TMA unit's 128-byte swizzle lays them (for rows the TMA unit cannot take). */
__device__ __forceinline__ void load_stage(const __nv_bfloat16 *a, const __nv_bfloat16 *b, int M,
                                           int N, int K, int mt, int nt, int kb, unsigned sa,
                                           unsigned sb)
{
    const int t = threadIdx.x;   /* 0..127 */
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int q = t + 128 * i, row = q >> 3, c = q & 7;
        int gm = mt * BM + row, gk = kb * BK + c * 8;
        unsigned dst = sa + row * 128 + ((c ^ (row & 7)) << 4);
        const __nv_bfloat16 *src = a + (long long)gm * K + gk;
        st_shared16(dst, gather8((const unsigned short *)src, gm < M ? K - gk : 0));
    }
#pragma unroll
    for (int i = 0; i < 16; i++) {   /* W's 256 x 64 tile, K-major like A's */
        int q = t + 128 * i, row = q >> 3, c = q & 7;
        int gn = nt * BN + row, gk = kb * BK + c * 8;
        unsigned dst = sb + row * 128 + ((c ^ (row & 7)) << 4);
        const __nv_bfloat16 *src = b + (long long)gn * K + gk;
        st_shared16(dst, gather8((const unsigned short *)src, gn < N ? K - gk : 0));
    }
}

/*
 * TMA (rows of A and B a multiple of 16 bytes, so the maps are real): one thread waits
 * until stage `slot` is empty, tells full[slot] to expect the stage's 48 KB, and issues
 * one box of X (128 x 64) and one of W (256 x 64), which complete on full[slot].
 * Boxes past the edges are zero-filled and still count their bytes. Otherwise all 128
 * threads fill the stage with plain loads, fence the async proxy and arrive.
 */
__device__ void producer(const tmap_t *ta, const tmap_t *tb, const __nv_bfloat16 *a,
                         const __nv_bfloat16 *b, int M, int N, int K, const plan &p,
                         unsigned base, unsigned full, unsigned empty, bool tma)
{
    int g = 0;   /* stages issued so far, over all units */
    if (tma && threadIdx.x != 0)
        return;
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        int mt, nt, kb0, kb1;
        unit_of(p, u, mt, nt, kb0, kb1);
        for (int kb = kb0; kb < kb1; kb++, g++) {
            unsigned slot = g % ST, sa = base + slot * STAGE_BYTES, bar = full + 8 * slot;
            mbar_wait(empty + 8 * slot, ((g / ST) & 1) ^ 1);
            if (!tma) {
                load_stage(a, b, M, N, K, mt, nt, kb, sa, sa + A_BYTES);
                fence_async();
                mbar_arrive(bar);
                continue;
            }
            mbar_expect_tx(bar, STAGE_BYTES);
            tma_load(sa, ta, bar, kb * BK, mt * BM);
            tma_load(sa + A_BYTES, tb, bar, kb * BK, nt * BN);
        }
    }
}

/* ---- consumers ---- */

/* The task's epilogue on one float: tanh GELU of v + bias. */
__device__ __forceinline__ float bias_gelu(float v, float bias)
{
    v += bias;
    return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

__device__ __forceinline__ void epilogue(const float *d, const __nv_bfloat16 *bias,
                                         __nv_bfloat16 *c, float *ws, int M, int N,
                                         const plan &p, int u, int mt, int nt, int cw)
{
    const int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int r0 = mt * BM + cw * 64 + w * 16 + (lane >> 2);
    const long long mn = (long long)M * N;
    float *part = ws + (u % p.split) * mn;
#pragma unroll
    for (int i = 0; i < 32; i++) {
        int col = nt * BN + 8 * i + 2 * (lane & 3);
        float b0 = col < N ? __bfloat162float(bias[col]) : 0.f;
        float b1 = col + 1 < N ? __bfloat162float(bias[col + 1]) : 0.f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int row = r0 + 8 * h;
            float x = d[4 * i + 2 * h], y = d[4 * i + 2 * h + 1];
            if (row >= M || col >= N)
                continue;
            long long o = (long long)row * N + col;
            if (p.split > 1) {
                part[o] = x;
                if (col + 1 < N)
                    part[o + 1] = y;
                continue;
            }
            x = bias_gelu(x, b0);
            y = bias_gelu(y, b1);
            if ((N & 1) == 0) {
                *(__nv_bfloat162 *)(c + o) = __floats2bfloat162_rn(x, y);
            } else {
                c[o] = __float2bfloat16_rn(x);
                if (col + 1 < N)
                    c[o + 1] = __float2bfloat16_rn(y);
            }
        }
    }
}

__device__ void consumer(const __nv_bfloat16 *bias, __nv_bfloat16 *c, float *ws, int M, int N,
                         const plan &p, unsigned base, unsigned full, unsigned empty, int cw)
{
    float d[128];
    unsigned g = 0;
#pragma unroll
    for (int i = 0; i < 128; i++)
        d[i] = 0.f;
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        int mt, nt, kb0, kb1;
        unit_of(p, u, mt, nt, kb0, kb1);
        for (int kb = kb0; kb < kb1; kb++, g++) {
            unsigned slot = g % ST, sa = base + slot * STAGE_BYTES + cw * 64 * 128;
            unsigned sb = base + slot * STAGE_BYTES + A_BYTES;
            mbar_wait(full + 8 * slot, (g / ST) & 1);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
                wgmma_n256(d, sdesc(sa + kk * 32, 16, 1024), sdesc(sb + kk * 32, 16, 1024),
                           kb > kb0 || kk > 0);
            wgmma_commit();
            wgmma_wait<1>();   /* the previous stage's products are done: free it */
            if (kb > kb0)
                mbar_arrive(empty + 8 * ((g - 1) % ST));
        }
        wgmma_wait<0>();
        mbar_arrive(empty + 8 * ((g - 1) % ST));
        epilogue(d, bias, c, ws, M, N, p, u, mt, nt, cw);
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
gemm_bias_gelu(const __nv_bfloat16 *__restrict__ a, const __nv_bfloat16 *__restrict__ b,
               const __nv_bfloat16 *__restrict__ bias, __nv_bfloat16 *__restrict__ c,
               float *__restrict__ ws, const __grid_constant__ tmap_t ta,
               const __grid_constant__ tmap_t tb, int M, int N, int K)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned base = (raw + 1023) & ~1023u;   /* the swizzle needs 1024-byte atoms */
    const unsigned full = base + ST * STAGE_BYTES, empty = full + 8 * ST;
    const plan p = make_plan(M, N, K);
    const int wg = threadIdx.x >> 7;
    const bool tma = (K & 7) == 0;   /* rows of X and W 16-byte multiples: the maps are real */

    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(full + 8 * s, tma ? 1 : 128);   /* the TMA thread, or every producer */
            mbar_init(empty + 8 * s, 256);   /* every consumer thread arrives */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg == 0)
        producer(&ta, &tb, a, b, M, N, K, p, base, full, empty, tma);
    else
        consumer(bias, c, ws, M, N, p, base, full, empty, wg - 1);
}

/* Y = bf16(gelu(sum of the K slices' parts + bias)), parts in slice order; nothing when K
 * was not split. */
extern "C" __global__ void __launch_bounds__(256)
splitk_bias_gelu(const float *__restrict__ ws, const __nv_bfloat16 *__restrict__ bias,
                 __nv_bfloat16 *__restrict__ c, int M, int N, int K)
{
    const plan p = make_plan(M, N, K);
    const long long mn = (long long)M * N;
    if (p.split == 1)
        return;
    for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < mn;
         i += (long long)gridDim.x * 256) {
        float s = 0.f;
        for (int k = 0; k < p.split; k++)
            s += ws[k * mn + i];
        c[i] = __float2bfloat16_rn(bias_gelu(s, __bfloat162float(bias[i % N])));
    }
}

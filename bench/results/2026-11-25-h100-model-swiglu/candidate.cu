// kevo doc    out = bf16(silu(X Wg^T) * (X Wu^T)) fused on Hopper tensor cores: the TMA + wgmma
// kevo doc    pipeline of matmul_bias_gelu_bf16 with one m64n256k16 B operand made of 128 rows
// kevo doc    of Wg followed by 128 rows of Wu, so each 128 x 128 output tile reads its X tile
// kevo doc    once for both products, and the SwiGLU runs on the float accumulators.
// kevo param  ST 4 3
// kevo tmap   tx x box=[128, 64] swizzle=128
// kevo tmap   tg wg box=[128, 64] swizzle=128
// kevo tmap   tu wu box=[128, 64] swizzle=128
// kevo scratch ws f32[min(16*M*N, 4325376)]
// kevo launch swiglu_gemm grid=min(cdiv(M,128)*cdiv(N,128)*max(1, min(8, 132/(cdiv(M,128)*cdiv(N,128)))), 132) block=384 smem=ST*49152+1280 (x, wg, wu, out, ws, tx, tg, tu, M, N, K)
// kevo launch splitk_swiglu grid=cdiv(min(M*N, 131072), 1024) block=256 (ws, out, M, N, K)
/*
 * Persistent blocks of one TMA producer warpgroup (one thread issues) and two wgmma consumer
 * warpgroups (64 rows of the 128-row tile each). A stage holds X[128 x 64] (16 KB) and
 * W[256 x 64] = Wg rows nt*128.. (16 KB) then Wu rows nt*128.. (16 KB), all 128-byte
 * swizzled, K-major. One m64n256k16 wgmma per k16 gives accumulator blocks 0..15 = gate
 * columns 0..127 (d[0..63]) and blocks 16..31 = up columns 0..127 (d[64..127]).
 * Epilogue: silu(gate) * up in float, one rounding to bf16.
 * Few tiles (M=64): split K; parts (gate, up) go to ws, the second launch sums them in slice
 * order and applies the SwiGLU. K not a multiple of 8 (holdout): zero maps, plain loads.
 */
#include <cuda_bf16.h>

#ifndef ST
#define ST 4
#endif
#define BM 128
#define BN 128                               /* output columns per tile */
#define BK 64
#define A_BYTES (BM * BK * 2)                /* 16 KB */
#define W_BYTES (BN * BK * 2)                /* 16 KB per weight */
#define STAGE_BYTES (A_BYTES + 2 * W_BYTES)  /* 48 KB */
#define SMS 132
#define MAX_SPLIT 8
#define GROUP_M 8

/* ---- PTX wrappers ---- */

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
    return (unsigned long long)((addr & 0x3FFFF) >> 4) |
           ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

#define F8(i)                                                                                \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])

/* d (64 x 256 per warpgroup, 128 floats per thread) (+)= A(desc) * B(desc)^T, both K-major. */
__device__ __forceinline__ void wgmma_n256(float *d, unsigned long long da, unsigned long long db,
                                           int acc)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, 0, 0;\n}\n"
        : F8(0), F8(8), F8(16), F8(24), F8(32), F8(40), F8(48), F8(56),
          F8(64), F8(72), F8(80), F8(88), F8(96), F8(104), F8(112), F8(120)
        : "l"(da), "l"(db), "r"(acc));
}

/* ---- work units ---- */

struct plan {
    int tm, tn, tiles, nkb, split, kper, units;
};

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
    s = s < 1 ? 1 : s;
    p.kper = (p.nkb + s - 1) / s;
    p.split = (p.nkb + p.kper - 1) / p.kper;   /* every slice non-empty */
    p.units = p.tiles * p.split;
    return p;
}

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

struct __align__(64) tmap_t {
    unsigned long long v[16];
};

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}

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

/* Plain-load fill of one stage in the TMA's 128-byte-swizzle layout (K % 8 != 0). */
__device__ __forceinline__ void load_stage(const __nv_bfloat16 *x, const __nv_bfloat16 *wg,
                                           const __nv_bfloat16 *wu, int M, int N, int K, int mt,
                                           int nt, int kb, unsigned sa, unsigned sb)
{
    const int t = threadIdx.x;   /* 0..127 */
#pragma unroll
    for (int i = 0; i < 8; i++) {
        int q = t + 128 * i, row = q >> 3, c = q & 7;
        int gm = mt * BM + row, gk = kb * BK + c * 8;
        unsigned dst = sa + row * 128 + ((c ^ (row & 7)) << 4);
        const __nv_bfloat16 *src = x + (long long)gm * K + gk;
        st_shared16(dst, gather8((const unsigned short *)src, gm < M ? K - gk : 0));
    }
#pragma unroll
    for (int i = 0; i < 16; i++) {   /* rows 0..127: Wg, rows 128..255: Wu */
        int q = t + 128 * i, row = q >> 3, c = q & 7;
        const __nv_bfloat16 *w = row < BN ? wg : wu;
        int gn = nt * BN + (row & (BN - 1)), gk = kb * BK + c * 8;
        unsigned dst = sb + row * 128 + ((c ^ (row & 7)) << 4);
        const __nv_bfloat16 *src = w + (long long)gn * K + gk;
        st_shared16(dst, gather8((const unsigned short *)src, gn < N ? K - gk : 0));
    }
}

__device__ void producer(const tmap_t *tx, const tmap_t *tg, const tmap_t *tu,
                         const __nv_bfloat16 *x, const __nv_bfloat16 *wg,
                         const __nv_bfloat16 *wu, int M, int N, int K, const plan &p,
                         unsigned base, unsigned full, unsigned empty, bool tma)
{
    int g = 0;
    if (tma && threadIdx.x != 0)
        return;
    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        int mt, nt, kb0, kb1;
        unit_of(p, u, mt, nt, kb0, kb1);
        for (int kb = kb0; kb < kb1; kb++, g++) {
            unsigned slot = g % ST, sa = base + slot * STAGE_BYTES, bar = full + 8 * slot;
            mbar_wait(empty + 8 * slot, ((g / ST) & 1) ^ 1);
            if (!tma) {
                load_stage(x, wg, wu, M, N, K, mt, nt, kb, sa, sa + A_BYTES);
                fence_async();
                mbar_arrive(bar);
                continue;
            }
            mbar_expect_tx(bar, STAGE_BYTES);
            tma_load(sa, tx, bar, kb * BK, mt * BM);
            tma_load(sa + A_BYTES, tg, bar, kb * BK, nt * BN);
            tma_load(sa + A_BYTES + W_BYTES, tu, bar, kb * BK, nt * BN);
        }
    }
}

/* ---- consumers ---- */

__device__ __forceinline__ float swiglu(float g, float u)
{
    return g / (1.0f + expf(-g)) * u;
}

__device__ __forceinline__ void epilogue(const float *d, __nv_bfloat16 *c, float *ws, int M, int N,
                                         const plan &p, int u, int mt, int nt, int cw)
{
    const int w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int r0 = mt * BM + cw * 64 + w * 16 + (lane >> 2);
    const long long mn = (long long)M * N;
    float *part = ws + (long long)(u % p.split) * 2 * mn;
#pragma unroll
    for (int i = 0; i < 16; i++) {
        int col = nt * BN + 8 * i + 2 * (lane & 3);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int row = r0 + 8 * h;
            float g0 = d[4 * i + 2 * h], g1 = d[4 * i + 2 * h + 1];
            float u0 = d[64 + 4 * i + 2 * h], u1 = d[64 + 4 * i + 2 * h + 1];
            if (row >= M || col >= N)
                continue;
            long long o = (long long)row * N + col;
            if (p.split > 1) {
                part[o] = g0;
                part[mn + o] = u0;
                if (col + 1 < N) {
                    part[o + 1] = g1;
                    part[mn + o + 1] = u1;
                }
                continue;
            }
            float a = swiglu(g0, u0), b = swiglu(g1, u1);
            if ((N & 1) == 0) {
                *(__nv_bfloat162 *)(c + o) = __floats2bfloat162_rn(a, b);
            } else {
                c[o] = __float2bfloat16_rn(a);
                if (col + 1 < N)
                    c[o + 1] = __float2bfloat16_rn(b);
            }
        }
    }
}

__device__ void consumer(__nv_bfloat16 *c, float *ws, int M, int N, const plan &p, unsigned base,
                         unsigned full, unsigned empty, int cw)
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
                           (kb > kb0 || kk > 0) ? 1 : 0);
            wgmma_commit();
            wgmma_wait<1>();
            if (kb > kb0)
                mbar_arrive(empty + 8 * ((g - 1) % ST));
        }
        wgmma_wait<0>();
        mbar_arrive(empty + 8 * ((g - 1) % ST));
        epilogue(d, c, ws, M, N, p, u, mt, nt, cw);
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
swiglu_gemm(const __nv_bfloat16 *__restrict__ x, const __nv_bfloat16 *__restrict__ wg,
            const __nv_bfloat16 *__restrict__ wu, __nv_bfloat16 *__restrict__ out,
            float *__restrict__ ws, const __grid_constant__ tmap_t tx,
            const __grid_constant__ tmap_t tg, const __grid_constant__ tmap_t tu, int M, int N,
            int K)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned base = (raw + 1023) & ~1023u;
    const unsigned full = base + ST * STAGE_BYTES, empty = full + 8 * ST;
    const plan p = make_plan(M, N, K);
    const int wgi = threadIdx.x >> 7;
    const bool tma = (K & 7) == 0;   /* row pitch a multiple of 16 bytes: real maps */

    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(full + 8 * s, tma ? 1 : 128);
            mbar_init(empty + 8 * s, 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wgi == 0)
        producer(&tx, &tg, &tu, x, wg, wu, M, N, K, p, base, full, empty, tma);
    else
        consumer(out, ws, M, N, p, base, full, empty, wgi - 1);
}

/* out = bf16(silu(sum of gate parts) * sum of up parts), parts in slice order; nothing when
 * K was not split. */
extern "C" __global__ void __launch_bounds__(256)
splitk_swiglu(const float *__restrict__ ws, __nv_bfloat16 *__restrict__ out, int M, int N, int K)
{
    const plan p = make_plan(M, N, K);
    const long long mn = (long long)M * N;
    if (p.split == 1)
        return;
    for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < mn;
         i += (long long)gridDim.x * 256) {
        float g = 0.f, u = 0.f;
        for (int k = 0; k < p.split; k++) {
            g += ws[(2LL * k) * mn + i];
            u += ws[(2LL * k + 1) * mn + i];
        }
        out[i] = __float2bfloat16_rn(swiglu(g, u));
    }
}

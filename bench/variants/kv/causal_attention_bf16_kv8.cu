// kevo doc    Persistent causal flash attention on Hopper, FA3-style: grid = min(132, tiles),
// kevo doc    each block walks 128-row query tiles in snake order over the heaviest-first
// kevo doc    list; one producer thread streams Q and 128-key tiles of K and V through NST
// kevo doc    stages with the TMA unit (harness tensor maps, 128-byte swizzle, mbarriers)
// kevo doc    and prefetches the next tile while the consumers finish; two consumer
// kevo doc    warpgroups ping-pong their wgmma issue and overlap Q K^T with P V.
// kevo param  NST 2 3
// kevo param  KVMB 8
// kevo tmap   tq q box=[1, 128, 64] swizzle=128 shape=[B*H, S, D]
// kevo tmap   tk k box=[1, 128, 64] swizzle=128 shape=[B*H, S, D]
// kevo tmap   tv v box=[1, 128, 64] swizzle=128 shape=[B*H, S, D]
// kevo launch attn_fwd_ws grid=min(132, B*H*cdiv(S,128)) block=384 smem=(256+512*NST)*D+1152 (out, tq, tk, tv, B*H, S, D)
/*
 * An exemplar for tasks/level3/causal_attention_bf16.cu (docs/playbook/wgmma-and-tma.md,
 * online-softmax-and-fusion.md), FA3-style: out = softmax(Q K^T / sqrt(D), causal) V per
 * (b, h), D = 64 or 128. Measured on an H100 (bench/results/2026-11-25-h100-exemplars-2/):
 * 72.4 us at B=4 H=8 S=2048 D=128, 1.53x PyTorch SDPA timed in the same session (the
 * previous exemplar, both warpgroups loading with cp.async in lockstep: 132 us, 0.83x).
 *
 * Shared memory (1024-byte aligned): Q [D/64][128 rows][64] (16 KB per 64-column half),
 * then NST stages of K and V in the same layout. This is exactly what a TMA box
 * [1, 128, 64] with 128-byte swizzle writes (row r's 16-byte chunk c at c ^ (r & 7)), so
 * the seed's descriptors apply unchanged: D/64 boxes per tile. The maps view the tensors
 * as [B*H, S, D]: rows past S inside a head are out of the box's bounds and arrive as
 * zeros (and still count toward expect_tx), so no poison reaches a product. Barriers
 * (fullQ, fullK/V[NST], emptyK/V[NST]) sit after the last stage.
 *
 * Producer (warpgroup 0, setmaxnreg.dec to 24 so the consumers can hold 240): one thread
 * loads Q once, then K_j and V_j for j = diagonal down to 0, each into stage n % NST
 * after waiting for emptyK/emptyV of that stage (separate K and V barriers: K is free as
 * soon as Q K^T is done, V only after P V, so the next K can land earlier).
 *
 * Consumers (warpgroups 1 and 2, rows 0-63 / 64-127): key tiles are visited from the
 * diagonal down, so the one tile that needs the causal mask (and the keys >= S of the
 * last tile, which are above the diagonal for every stored row) is the first, handled
 * outside the steady loop. Steady step n (FA3's intra-warpgroup overlap): issue
 * S_n = Q K_n^T, rescale O by the previous step's correction, issue O += P_{n-1} V_{n-1}
 * (P from registers), then wait only for S_n (wait_group 1), release K_n, compute the
 * row max / correction / exponentials of S_n while P V still runs, wait for it, release
 * V_{n-1}, pack P_n. The issue of both GEMMs is bracketed by a named-barrier token passed
 * between the two consumer warpgroups (bar.sync own / bar.arrive other's, 256 threads):
 * while one warpgroup issues and the tensor cores work for it, the other does its
 * softmax. Token accounting: warpgroup 1 pre-arrives once on its own barrier; each
 * warpgroup syncs nkv+1 times (first step, nkv-1 steady steps, final P V) and arrives on
 * the other's barrier as often, except warpgroup 2's very last arrive, which nobody would
 * consume (so no barrier is left half-arrived at exit).
 *
 * Softmax: scores are kept unscaled; max on raw scores, p = 2^(s*c - m*c) with
 * c = log2(e)/sqrt(D) (one FFMA + ex2 per element); row sums are per-thread partials,
 * reduced over the quad once at the end. Output: O / l stored from registers as bf16
 * pairs, rows >= S skipped.
 *
 * Persistent: with one 384-thread block per SM (its registers allow no second one), a
 * fresh block starts with the tensor cores idle while Q and the first K arrive, and ends
 * with them idle during its epilogue; at S = 512 that is a large share of each block's
 * life. So the producer runs ahead into the next tile: it reloads Q as soon as both
 * consumers' last Q K^T of the current tile is done (mbarrier emptyQ, 256 arrivals), and
 * its K/V stage counter runs on across tiles, so the next tile's loads land during the
 * last P V and the epilogue.
 *
 * Schedule: tiles sorted heaviest first within groups of heads whose K and V fit in L2
 * (heads_per_group; one group when all fit); block b takes positions b, 2G-1-b, 2G+b,
 * 4G-1-b, ... (snake order), which for the suite's workloads gives the same largest
 * per-block load as greedy longest-first.
 *
 * Token accounting across tiles: warpgroup 1 pre-arrives once at the start; per tile each
 * warpgroup syncs nkv+1 times and arrives as often, except warpgroup 2's arrive after the
 * final P V of its block's last tile, which nobody would take.
 */
#include <cuda_bf16.h>

#ifndef NST
#define NST 2
#endif
#ifndef KVMB
#define KVMB 16   /* MB of K and V one group of heads may hold in L2 (heads_per_group) */
#endif

#define NEG_INF __int_as_float(0xff800000)

struct __align__(64) tmap_t {
    unsigned long long v[16];
};

/* ---- PTX wrappers: shared addresses are 32-bit offsets in the shared window ---- */

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
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
/* A 3-D box of map m at (c0 inner, c1, c2 outer) into shared dst; completes bytes on bar. */
__device__ __forceinline__ void tma_load3(unsigned dst, const tmap_t *m, unsigned bar, int c0,
                                          int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst), "l"((unsigned long long)m),
                 "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void bar_sync(int id, int n)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n)
{
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keep the compiler from moving accesses of wgmma operands across the async window. */
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void fence_regs(unsigned (&r)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+r"(r[i])::"memory");
}

__device__ __forceinline__ float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Shared-memory matrix descriptor, 128-byte swizzle (start, LBO, SBO in bytes). */
__device__ __forceinline__ unsigned long long sdesc(unsigned addr, unsigned lbo, unsigned sbo)
{
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wg_s128(float *d, unsigned long long da, unsigned long long db, int acc)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
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
          "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wg_pv128(float *d, const unsigned *a, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
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
          "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
__device__ __forceinline__ void wg_pv64(float *d, const unsigned *a, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
        "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
          "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
          "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
          "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
/* O += P V for one 16-key step: D = 128 or 64 by the accumulator's size. */
__device__ __forceinline__ void pv(float (&o)[64], const unsigned *a, unsigned long long db)
{
    wg_pv128(o, a, db);
}
__device__ __forceinline__ void pv(float (&o)[32], const unsigned *a, unsigned long long db)
{
    wg_pv64(o, a, db);
}

__device__ __forceinline__ unsigned pack(float x, float y)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *(unsigned *)&h;
}

/* Shared-memory map (offsets from the 1024-aligned base) for head size D. */
template <int D> struct lay {
    static constexpr unsigned TILE = 256 * D;                /* 128 rows x D bf16 */
    __host__ __device__ static constexpr unsigned K(int s) { return TILE + s * 2 * TILE; }
    __host__ __device__ static constexpr unsigned V(int s) { return 2 * TILE + s * 2 * TILE; }
    static constexpr unsigned BARS = TILE + NST * 2 * TILE;
};
/* Barrier addresses: fullQ, emptyQ, then fullK, fullV, emptyK, emptyV (NST each). */
#define FULLQ(b) (b)
#define EMPTYQ(b) ((b) + 8)
#define FULLK(b, s) ((b) + 16 + 8 * (s))
#define FULLV(b, s) ((b) + 16 + 8 * NST + 8 * (s))
#define EMPTYK(b, s) ((b) + 16 + 16 * NST + 8 * (s))
#define EMPTYV(b, s) ((b) + 16 + 24 * NST + 8 * (s))

/*
 * Heads per group of the schedule: all of them when every head's K and V fit in L2 (40 of
 * the H100's 50 MB), else as many as 16 MB hold. The blocks running at one time work on
 * one or two groups, so each K/V tile comes from DRAM about once; without groups, at
 * B=8 H=16 S=2048 D=128 (128 MB of K and V) the running blocks spread over 132 heads and
 * read every K/V tile again from DRAM for each query tile: 416 us, against 288 us for SDPA.
 */
__device__ __forceinline__ int heads_per_group(int BH, int nq, int D)
{
    const long long per = (long long)nq * 128 * D * 4;   /* K and V of one head, bytes */
    if (per * BH <= (40ll << 20))
        return BH;
    const int hg = (int)(((long long)KVMB << 20) / per);
    return hg < 1 ? 1 : hg > BH ? BH : hg;
}

/* The i-th tile of this block: snake order over the tiles, group of heads by group, each
 * group's tiles sorted heaviest first (position r of a group of n heads starting at head
 * f = query tile nq-1-r/n of head f + r%n), so every block gets about the same work. */
__device__ __forceinline__ bool tile_of(int i, int T, int BH, int nq, int hg, int &bh, int &qt)
{
    const int G = gridDim.x, b = blockIdx.x;
    const int pos = i * G + ((i & 1) ? G - 1 - b : b);
    if (pos >= T)
        return false;
    const int grp = pos / (hg * nq), r = pos % (hg * nq), f = grp * hg;
    const int n = BH - f < hg ? BH - f : hg;   /* the last group may be smaller */
    qt = nq - 1 - r / n;
    bh = f + r % n;
    return true;
}

/* S = Q K^T for this warpgroup's 64 rows against the 128 keys of stage s (async). */
template <int D> __device__ __forceinline__ void issue_qk(float (&s)[64], unsigned sq, unsigned sk)
{
    fence_regs(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
        wg_s128(s, sdesc(sq + (kk >> 2) * 16384 + (kk & 3) * 32, 16, 1024),
                sdesc(sk + (kk >> 2) * 16384 + (kk & 3) * 32, 16, 1024), kk > 0);
    wgmma_commit();
    fence_regs(s);
}

/* O += P V over the 128 keys of stage sv (async); P in registers. */
template <int D> __device__ __forceinline__ void issue_pv(float (&o)[D / 2], unsigned (&p)[32],
                                                          unsigned sv)
{
    fence_regs(o);
    fence_regs(p);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; kk++)
        pv(o, p + 4 * kk, sdesc(sv + kk * 2048, 16384, 1024));
    wgmma_commit();
    fence_regs(o);
}

template <int D> __device__ void producer(const tmap_t *tq, const tmap_t *tk, const tmap_t *tv,
                                          unsigned base, int BH, int nq)
{
    typedef lay<D> L;
    const unsigned bars = base + L::BARS;
    const int T = BH * nq, hg = heads_per_group(BH, nq, D);
    int g = 0;   /* K/V tiles issued so far, over all of this block's query tiles */
    int bh, qt;
    for (int i = 0; tile_of(i, T, BH, nq, hg, bh, qt); i++) {
        mbar_wait(EMPTYQ(bars), (i & 1) ^ 1);   /* both warpgroups' last Q K^T is done */
        mbar_expect_tx(FULLQ(bars), L::TILE);
#pragma unroll
        for (int h = 0; h < D / 64; h++)
            tma_load3(base + h * 16384, tq, FULLQ(bars), h * 64, qt * 128, bh);
        for (int n = 0; n <= qt; n++, g++) {
            const int j = qt - n, s = g % NST;
            const unsigned par = ((g / NST) & 1) ^ 1;
            mbar_wait(EMPTYK(bars, s), par);
            mbar_expect_tx(FULLK(bars, s), L::TILE);
#pragma unroll
            for (int h = 0; h < D / 64; h++)
                tma_load3(base + L::K(s) + h * 16384, tk, FULLK(bars, s), h * 64, j * 128, bh);
            mbar_wait(EMPTYV(bars, s), par);
            mbar_expect_tx(FULLV(bars, s), L::TILE);
#pragma unroll
            for (int h = 0; h < D / 64; h++)
                tma_load3(base + L::V(s) + h * 16384, tv, FULLV(bars, s), h * 64, j * 128, bh);
        }
    }
}

template <int D> __device__ void consumer(__nv_bfloat16 *out, int BH, int S, unsigned base,
                                          int c)
{
    typedef lay<D> L;
    const unsigned bars = base + L::BARS;
    const int t = threadIdx.x & 127, w = t >> 5, lane = t & 31;
    const int nq = (S + 127) / 128, T = BH * nq, hg = heads_per_group(BH, nq, D);
    const int me = 1 + c, other = 2 - c;   /* named barriers 1 and 2: the issue token */
    const unsigned sq = base + c * 8192;   /* this warpgroup's 64 rows in each half */
    const float sl2 = 1.4426950408889634f * rsqrtf((float)D);
    int g = 0;   /* K/V tiles consumed so far */
    int bh, qt;

    if (c == 0)
        bar_arrive(1, 256);   /* warpgroup 1 holds the token first */
    for (int i = 0; tile_of(i, T, BH, nq, hg, bh, qt); i++) {
        int nbh, nqt;
        const bool last = !tile_of(i + 1, T, BH, nq, hg, nbh, nqt);
        const int nkv = qt + 1;
        float o[D / 2], s[64], m[2], l[2] = { 0.f, 0.f }, corr[2] = { 1.f, 1.f };
        unsigned p[32];

#pragma unroll
        for (int x = 0; x < D / 2; x++)
            o[x] = 0.f;
        mbar_wait(FULLQ(bars), i & 1);

        /* n = 0: the diagonal tile, the only one with masked keys. */
        {
            const int sk = g % NST;
            mbar_wait(FULLK(bars, sk), (g / NST) & 1);
            bar_sync(me, 256);
            issue_qk<D>(s, sq, base + L::K(sk));
            bar_arrive(other, 256);
            wgmma_wait<0>();
            fence_regs(s);
            mbar_arrive(EMPTYK(bars, sk));
            if (nkv == 1)
                mbar_arrive(EMPTYQ(bars));
        }
        {
            const int rl = c * 64 + w * 16 + (lane >> 2);   /* row within the tile */
            float mx[2] = { NEG_INF, NEG_INF };
#pragma unroll
            for (int x = 0; x < 16; x++)
#pragma unroll
                for (int h = 0; h < 2; h++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        float y = s[4 * x + 2 * h + e];
                        if (8 * x + 2 * (lane & 3) + e > rl + 8 * h)
                            y = NEG_INF;
                        s[4 * x + 2 * h + e] = y;
                        mx[h] = fmaxf(mx[h], y);
                    }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                m[h] = mx[h];   /* finite: key = row is never masked */
            }
            const float ms0 = m[0] * sl2, ms1 = m[1] * sl2;
#pragma unroll
            for (int x = 0; x < 16; x++) {
                float p0 = ex2(fmaf(s[4 * x], sl2, -ms0)), p1 = ex2(fmaf(s[4 * x + 1], sl2, -ms0));
                float p2 = ex2(fmaf(s[4 * x + 2], sl2, -ms1)), p3 = ex2(fmaf(s[4 * x + 3], sl2, -ms1));
                l[0] += p0 + p1;
                l[1] += p2 + p3;
                p[2 * x] = pack(p0, p1);       /* row r, keys 8x + 2(lane%4): A fragment */
                p[2 * x + 1] = pack(p2, p3);   /* row r + 8 */
            }
        }

        /* Steady steps: S_n overlaps P_{n-1} V_{n-1}; softmax of S_n overlaps that P V. */
        for (int n = 1; n < nkv; n++) {
            const int gk = g + n, gv = g + n - 1, sk = gk % NST, sv = gv % NST;
            mbar_wait(FULLK(bars, sk), (gk / NST) & 1);
            bar_sync(me, 256);
            issue_qk<D>(s, sq, base + L::K(sk));
            mbar_wait(FULLV(bars, sv), (gv / NST) & 1);
#pragma unroll
            for (int x = 0; x < D / 8; x++) {
                o[4 * x] *= corr[0];
                o[4 * x + 1] *= corr[0];
                o[4 * x + 2] *= corr[1];
                o[4 * x + 3] *= corr[1];
            }
            issue_pv<D>(o, p, base + L::V(sv));
            bar_arrive(other, 256);
            wgmma_wait<1>();   /* S_n is done (groups retire in order) */
            fence_regs(s);
            mbar_arrive(EMPTYK(bars, sk));
            if (n == nkv - 1)
                mbar_arrive(EMPTYQ(bars));   /* Q is read for the last time: prefetch the next */
            float mx[2] = { m[0], m[1] };
#pragma unroll
            for (int x = 0; x < 16; x++) {
                mx[0] = fmaxf(mx[0], fmaxf(s[4 * x], s[4 * x + 1]));
                mx[1] = fmaxf(mx[1], fmaxf(s[4 * x + 2], s[4 * x + 3]));
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
                mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
                corr[h] = ex2((m[h] - mx[h]) * sl2);
                m[h] = mx[h];
                l[h] *= corr[h];
            }
            const float ms0 = m[0] * sl2, ms1 = m[1] * sl2;
#pragma unroll
            for (int x = 0; x < 16; x++) {
                s[4 * x] = ex2(fmaf(s[4 * x], sl2, -ms0));
                s[4 * x + 1] = ex2(fmaf(s[4 * x + 1], sl2, -ms0));
                s[4 * x + 2] = ex2(fmaf(s[4 * x + 2], sl2, -ms1));
                s[4 * x + 3] = ex2(fmaf(s[4 * x + 3], sl2, -ms1));
                l[0] += s[4 * x] + s[4 * x + 1];
                l[1] += s[4 * x + 2] + s[4 * x + 3];
            }
            wgmma_wait<0>();   /* P_{n-1} V_{n-1} is done: its P registers and V stage are free */
            fence_regs(o);
            fence_regs(p);
            mbar_arrive(EMPTYV(bars, sv));
#pragma unroll
            for (int x = 0; x < 32; x++)
                p[x] = pack(s[2 * x], s[2 * x + 1]);
        }

        /* Final P V (key tile 0). */
        {
            const int gv = g + nkv - 1, sv = gv % NST;
            mbar_wait(FULLV(bars, sv), (gv / NST) & 1);
            bar_sync(me, 256);
#pragma unroll
            for (int x = 0; x < D / 8; x++) {
                o[4 * x] *= corr[0];
                o[4 * x + 1] *= corr[0];
                o[4 * x + 2] *= corr[1];
                o[4 * x + 3] *= corr[1];
            }
            issue_pv<D>(o, p, base + L::V(sv));
            if (c == 0 || !last)   /* warpgroup 2's very last token would never be taken */
                bar_arrive(other, 256);
            wgmma_wait<0>();
            fence_regs(o);
            fence_regs(p);
            mbar_arrive(EMPTYV(bars, sv));
        }
        g += nkv;

        /* Epilogue: runs while the other warpgroup (and the producer's prefetch of the
         * next tile's Q, K and V) proceed. */
        const int r0 = qt * 128 + c * 64 + w * 16 + (lane >> 2);
        const long long off = (long long)bh * S * D;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
            l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
            int row = r0 + 8 * h;
            if (row >= S)
                continue;
            float inv = 1.f / l[h];
            __nv_bfloat16 *dst = out + off + (long long)row * D + 2 * (lane & 3);
#pragma unroll
            for (int x = 0; x < D / 8; x++)
                *(__nv_bfloat162 *)(dst + 8 * x) =
                    __floats2bfloat162_rn(o[4 * x + 2 * h] * inv, o[4 * x + 2 * h + 1] * inv);
        }
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
attn_fwd_ws(__nv_bfloat16 *__restrict__ out, const __grid_constant__ tmap_t tq,
            const __grid_constant__ tmap_t tk, const __grid_constant__ tmap_t tv, int BH, int S,
            int D)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned base = (raw + 1023) & ~1023u;   /* the swizzle needs 1024-byte atoms */
    const unsigned bars = base + (D == 128 ? lay<128>::BARS : lay<64>::BARS);
    const int wg = threadIdx.x >> 7;

    if (threadIdx.x == 0) {
        mbar_init(FULLQ(bars), 1);
        mbar_init(EMPTYQ(bars), 256);
        for (int s = 0; s < NST; s++) {
            mbar_init(FULLK(bars, s), 1);     /* the producer's expect_tx arrive */
            mbar_init(FULLV(bars, s), 1);
            mbar_init(EMPTYK(bars, s), 256);  /* every consumer thread arrives */
            mbar_init(EMPTYV(bars, s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
        if (threadIdx.x == 0) {
            const int nq = (S + 127) / 128;
            if (D == 128)
                producer<128>(&tq, &tk, &tv, base, BH, nq);
            else
                producer<64>(&tq, &tk, &tv, base, BH, nq);
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
        if (D == 128)
            consumer<128>(out, BH, S, base, wg - 1);
        else
            consumer<64>(out, BH, S, base, wg - 1);
    }
}

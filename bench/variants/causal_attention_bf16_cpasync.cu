// kevo doc    Causal flash attention on Hopper tensor cores: a block owns 128 query rows (two
// kevo doc    warpgroups of 64), streams 128-key tiles of K and V through two cp.async stages,
// kevo doc    computes S = Q K^T with wgmma (A and B from shared memory), keeps the online
// kevo doc    softmax in registers, and feeds P to the P V wgmma straight from registers.
// kevo launch attn_fwd grid=(cdiv(S,128), B*H) block=256 smem=1280*D+1024 (q, k, v, out, S, D)
/*
 * An exemplar for tasks/level3/causal_attention_bf16.cu (docs/playbook/wgmma-and-tma.md,
 * online-softmax-and-fusion.md): out = softmax(Q K^T / sqrt(D), causal) V per (b, h),
 * D = 64 or 128 (a template, chosen at run time).
 *
 * Shared memory (1024-byte aligned, 128-byte swizzle): Q [D/64][128 rows][64], and two
 * stages of K and V in the same layout (row r's 16-byte chunk c stored at c ^ (r & 7)).
 * That one layout serves three operands: Q is the K-major A of S = Q K^T, K its K-major B
 * (imm-trans-b 0, SBO 1024 between 8-key groups), and V the N-major B of O += P V
 * (imm-trans-b 1, LBO 16384 between 64-column blocks of D, SBO 1024 between 8-key groups).
 * Rows past S are zero-filled (cp.async src-size 0), so no poison reaches a product.
 *
 * Per key tile j (keys 0..127 of tile j, tiles up to the diagonal, the heaviest query tiles
 * launched first): wait for the stage (cp.async.wait_group, fence.proxy.async,
 * __syncthreads), prefetch tile j+1 into the other stage, S = Q K^T (D/16 wgmma
 * m64n128k16), scale by log2(e)/sqrt(D), mask keys past the diagonal or past S (the last
 * tile only), running max per row over the 4 lanes that share it, rescale O and the row
 * sums, P = exp2(S - max) packed to bf16 in exactly the A-fragment layout of the next
 * wgmma (the accumulator's 8-column blocks 2k and 2k+1 are key step k), O += P V (8 wgmma
 * m64nDk16, A from registers). At the end O / rowsum is stored as bf16 pairs.
 */
#include <cuda_bf16.h>

#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ void cp_async16(unsigned dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait0() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

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
__device__ __forceinline__ void wg_pv128(float *d, const unsigned *a, unsigned long long db, int acc)
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
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}
__device__ __forceinline__ void wg_pv64(float *d, const unsigned *a, unsigned long long db, int acc)
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
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

/* O += P V for one key step: D = 128 or 64 by the accumulator's size. */
__device__ __forceinline__ void pv(float (&o)[64], const unsigned *a, unsigned long long db)
{
    wg_pv128(o, a, db, 1);
}
__device__ __forceinline__ void pv(float (&o)[32], const unsigned *a, unsigned long long db)
{
    wg_pv64(o, a, db, 1);
}

/* 128 rows x D of src (rows row0.., zero past S) into the swizzled tile at dst. */
template <int D> __device__ __forceinline__ void load_tile(unsigned dst, const __nv_bfloat16 *src,
                                                           int row0, int S)
{
    constexpr int CPR = D / 8;   /* 16-byte chunks per row */
#pragma unroll
    for (int i = 0; i < 128 * CPR / 256; i++) {
        int qd = threadIdx.x + 256 * i, row = qd / CPR, c = qd % CPR, gr = row0 + row;
        unsigned d = dst + (c >> 3) * 16384 + row * 128 + (((c & 7) ^ (row & 7)) << 4);
        cp_async16(d, gr < S ? src + (long long)gr * D + c * 8 : src, gr < S ? 16 : 0);
    }
}

__device__ __forceinline__ unsigned pack(float x, float y)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *(unsigned *)&h;
}

template <int D> __device__ void attn(const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                                      const __nv_bfloat16 *v, __nv_bfloat16 *out, int S,
                                      unsigned base)
{
    const int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const int qt = (S + 127) / 128 - 1 - blockIdx.x, q0 = qt * 128, nkv = qt + 1;
    const long long off = (long long)blockIdx.y * S * D;
    const unsigned sq = base, skv = base + 256 * D;   /* stage st: K at skv + st*512*D */
    const int r0 = q0 + wg * 64 + w * 16 + (lane >> 2);
    const float sl2 = 1.4426950408889634f * rsqrtf((float)D);
    float o[D / 2], m[2] = { NEG_INF, NEG_INF }, l[2] = { 0.f, 0.f };

#pragma unroll
    for (int i = 0; i < D / 2; i++)
        o[i] = 0.f;
    load_tile<D>(sq, q + off, q0, S);
    load_tile<D>(skv, k + off, 0, S);
    load_tile<D>(skv + 256 * D, v + off, 0, S);
    cp_async_commit();
    for (int j = 0; j < nkv; j++) {
        if (j + 1 < nkv) {
            unsigned st = skv + ((j + 1) & 1) * 512 * D;
            load_tile<D>(st, k + off, (j + 1) * 128, S);
            load_tile<D>(st + 256 * D, v + off, (j + 1) * 128, S);
            cp_async_commit();
            cp_async_wait1();
        } else {
            cp_async_wait0();
        }
        fence_async();
        __syncthreads();
        const unsigned sk = skv + (j & 1) * 512 * D, sv = sk + 256 * D;
        float s[64];
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            wg_s128(s, sdesc(sq + (kk >> 2) * 16384 + wg * 8192 + (kk & 3) * 32, 16, 1024),
                    sdesc(sk + (kk >> 2) * 16384 + (kk & 3) * 32, 16, 1024), kk > 0);
        wgmma_commit();
        wgmma_wait0();
        const int kv0 = j * 128;
        const bool edge = j == nkv - 1 || kv0 + 128 > S;
        float mx[2] = { m[0], m[1] };
#pragma unroll
        for (int i = 0; i < 16; i++)
#pragma unroll
            for (int h = 0; h < 2; h++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int key = kv0 + 8 * i + 2 * (lane & 3) + e, row = r0 + 8 * h;
                    float x = s[4 * i + 2 * h + e] * sl2;
                    if (edge && (key > row || key >= S))
                        x = NEG_INF;
                    s[4 * i + 2 * h + e] = x;
                    mx[h] = fmaxf(mx[h], x);
                }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            float corr = exp2f(m[h] - mx[h]);
            m[h] = mx[h];
            l[h] *= corr;
#pragma unroll
            for (int i = 0; i < D / 8; i++) {
                o[4 * i + 2 * h] *= corr;
                o[4 * i + 2 * h + 1] *= corr;
            }
        }
        unsigned a[8][4];
#pragma unroll
        for (int i = 0; i < 16; i++) {
            float p0 = exp2f(s[4 * i] - m[0]), p1 = exp2f(s[4 * i + 1] - m[0]);
            float p2 = exp2f(s[4 * i + 2] - m[1]), p3 = exp2f(s[4 * i + 3] - m[1]);
            l[0] += p0 + p1;
            l[1] += p2 + p3;
            a[i >> 1][(i & 1) * 2] = pack(p0, p1);       /* row r, keys 8i + 2(lane%4) */
            a[i >> 1][(i & 1) * 2 + 1] = pack(p2, p3);   /* row r + 8 */
        }
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 8; kk++)
            pv(o, a[kk], sdesc(sv + kk * 2048, 16384, 1024));
        wgmma_commit();
        wgmma_wait0();
        __syncthreads();   /* this stage is reloaded two tiles on */
    }
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
        for (int i = 0; i < D / 8; i++)
            *(__nv_bfloat162 *)(dst + 8 * i) =
                __floats2bfloat162_rn(o[4 * i + 2 * h] * inv, o[4 * i + 2 * h + 1] * inv);
    }
}

extern "C" __global__ void __launch_bounds__(256, 1)
attn_fwd(const __nv_bfloat16 *__restrict__ q, const __nv_bfloat16 *__restrict__ k,
         const __nv_bfloat16 *__restrict__ v, __nv_bfloat16 *__restrict__ out, int S, int D)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned base = (raw + 1023) & ~1023u;   /* the swizzle needs 1024-byte atoms */

    if (D == 128)
        attn<128>(q, k, v, out, S, base);
    else
        attn<64>(q, k, v, out, S, base);
}

// kevo doc    Row softmax that reads each row once: the row is held in registers as float4s
// kevo doc    (VPT per thread), max and sum are block reductions over registers, one write.
// kevo doc    Rows that do not fit (or are not 16-byte aligned) take an online two-pass path.
// kevo param  THREADS 512 256 1024
// kevo param  VPT 4 2 8
// kevo launch softmax_fast grid=M block=THREADS (x, y, N)
/*
 * An exemplar for tasks/level1/softmax_rows.cu (docs/playbook/row-reductions.md).
 *
 * Fast path (N % 4 == 0 and N <= 4 * VPT * THREADS, e.g. N = 8192 at 512 x 4): each thread
 * loads its VPT float4s before using any (VPT x 16 bytes in flight per thread), the block
 * reduces the maximum, then the sum of exp(x - max), both from registers, and writes
 * exp(x - max) / sum as float4s: DRAM sees one read and one write of the row.
 * Other rows (N = 50257, the odd holdouts): an online pass keeps a running (max, sum) per
 * thread over float4s (one rescale per four values) after a scalar head that reaches the
 * 16-byte boundary, the block merges the pairs, and a second pass re-reads the row (mostly
 * from L2) to write it, vectorized the same way. Both reductions are fixed trees: the
 * result is bitwise reproducible.
 */
#ifndef THREADS
#define THREADS 512
#endif
#ifndef VPT
#define VPT 4
#endif
#define WARPS (THREADS / 32)
#define NEG_INF __int_as_float(0xff800000)   /* NVRTC has no math.h INFINITY */

__device__ __forceinline__ float warp_max(float v)
{
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Every thread gets the block's maximum (op 0) or sum (op 1); sh holds WARPS floats. */
__device__ __forceinline__ float block_reduce(float v, float *sh, int op)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = op ? warp_sum(v) : warp_max(v);
    if (lane == 0)
        sh[w] = v;
    __syncthreads();
    v = lane < WARPS ? sh[lane] : (op ? 0.f : NEG_INF);
    v = op ? warp_sum(v) : warp_max(v);
    __syncthreads();   /* sh may be reused at once */
    return v;
}

/* (m, s) := the merge of two running (max, sum of exp(x - max)) pairs. */
__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2)
{
    float mn = fmaxf(m, m2);
    if (mn == NEG_INF)
        return;
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

__device__ void row_registers(const float4 *x4, float4 *y4, int n4, float *sh)
{
    float4 v[VPT];
    float m = NEG_INF;
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        int i = threadIdx.x + j * THREADS;
        v[j] = i < n4 ? __ldcs(x4 + i) : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
    }
#pragma unroll
    for (int j = 0; j < VPT; j++)
        m = fmaxf(m, fmaxf(fmaxf(v[j].x, v[j].y), fmaxf(v[j].z, v[j].w)));
    m = block_reduce(m, sh, 0);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        v[j].x = __expf(v[j].x - m);
        v[j].y = __expf(v[j].y - m);
        v[j].z = __expf(v[j].z - m);
        v[j].w = __expf(v[j].w - m);
        s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
    }
    float inv = 1.f / block_reduce(s, sh, 1);
#pragma unroll
    for (int j = 0; j < VPT; j++) {
        int i = threadIdx.x + j * THREADS;
        if (i < n4)
            __stcs(y4 + i, make_float4(v[j].x * inv, v[j].y * inv, v[j].z * inv, v[j].w * inv));
    }
}

struct run {
    float m, s;   /* running max, sum of exp(x - m) */
};

__device__ __forceinline__ void add1(run &r, float v)
{
    if (v > r.m) {
        r.s = r.s * __expf(r.m - v) + 1.f;
        r.m = v;
    } else {
        r.s += __expf(v - r.m);
    }
}

__device__ __forceinline__ void add4(run &r, float4 v)
{
    float mx = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
    if (mx > r.m) {
        r.s *= __expf(r.m - mx);
        r.m = mx;
    }
    r.s += (__expf(v.x - r.m) + __expf(v.y - r.m)) + (__expf(v.z - r.m) + __expf(v.w - r.m));
}

/*
 * Any row: a scalar head up to the 16-byte boundary (row r starts at element r * n), a
 * float4 body with four loads in flight per thread, a scalar tail; the output row has the
 * same alignment. Pass 1 keeps a running (max, sum); pass 2 re-reads (mostly from L2).
 */
__device__ void row_online(const float *row, float *out, int n, long long base, float *sh,
                           float *sh2)
{
    int head = (int)((4 - (base & 3)) & 3);
    head = head < n ? head : n;
    const int nv = (n - head) >> 2, tail = head + 4 * nv;
    const float4 *r4 = (const float4 *)(row + head);
    float4 *o4 = (float4 *)(out + head);
    run r = { NEG_INF, 0.f };

    if (threadIdx.x < head)
        add1(r, row[threadIdx.x]);
    int i = threadIdx.x;
    for (; i + 3 * THREADS < nv; i += 4 * THREADS) {
        float4 a = r4[i], b = r4[i + THREADS], c = r4[i + 2 * THREADS], d = r4[i + 3 * THREADS];
        add4(r, a);
        add4(r, b);
        add4(r, c);
        add4(r, d);
    }
    for (; i < nv; i += THREADS)
        add4(r, r4[i]);
    for (int k = tail + threadIdx.x; k < n; k += THREADS)
        add1(r, row[k]);
#pragma unroll
    for (int o = 16; o; o >>= 1)
        merge(r.m, r.s, __shfl_xor_sync(0xffffffffu, r.m, o), __shfl_xor_sync(0xffffffffu, r.s, o));
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) {
        sh[w] = r.m;
        sh2[w] = r.s;
    }
    __syncthreads();
    float m = lane < WARPS ? sh[lane] : NEG_INF, s = lane < WARPS ? sh2[lane] : 0.f;
#pragma unroll
    for (int o = 16; o; o >>= 1)
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    const float inv = 1.f / s;
    if (threadIdx.x < head)
        out[threadIdx.x] = __expf(row[threadIdx.x] - m) * inv;
    for (i = threadIdx.x; i < nv; i += THREADS) {
        float4 v = r4[i];
        __stcs(o4 + i, make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv,
                                   __expf(v.z - m) * inv, __expf(v.w - m) * inv));
    }
    for (int k = tail + threadIdx.x; k < n; k += THREADS)
        out[k] = __expf(row[k] - m) * inv;
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_fast(const float *__restrict__ x, float *__restrict__ y, int n)
{
    __shared__ float sh[WARPS], sh2[WARPS];
    const long long base = (long long)blockIdx.x * n;
    const float *row = x + base;
    float *out = y + base;

    if ((n & 3) == 0 && n <= 4 * VPT * THREADS)
        row_registers((const float4 *)row, (float4 *)out, n >> 2, sh);
    else
        row_online(row, out, n, base, sh, sh2);
}

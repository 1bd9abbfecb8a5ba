// kevo doc    Cross-entropy in one read of the logits: each thread keeps a running (max, sum of
// kevo doc    exp) over float4s, the block merges the pairs; a second tiny launch takes the mean.
// kevo param  THREADS 512 256 1024
// kevo scratch rl f64[B]
// kevo launch ce_rows_fast grid=B block=THREADS (x, t, rl, V)
// kevo launch ce_mean_fast grid=1 block=1024 (rl, loss, B)
/*
 * An exemplar for tasks/level1/cross_entropy_f32.cu (docs/playbook/row-reductions.md,
 * online-softmax-and-fusion.md).
 *
 * loss = mean_r(logsumexp(x[r, :]) - x[r, t[r]]). The row pass never writes the softmax,
 * so it is a pure streaming read: rows are read as float4s after a scalar head that
 * reaches the 16-byte boundary (row r starts at element r * V, aligned only when V % 4 ==
 * 0), four loads in flight per thread; each float4 rescales the running sum once. The
 * block merges the (max, sum) pairs with shuffles, and thread 0 writes the row's loss in
 * double. The mean is a fixed-order sum in one block: deterministic, no atomics.
 */
#ifndef THREADS
#define THREADS 512
#endif
#define WARPS (THREADS / 32)
#define NEG_INF __int_as_float(0xff800000)

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

__device__ __forceinline__ void merge(run &r, float m2, float s2)
{
    float mn = fmaxf(r.m, m2);
    if (mn == NEG_INF)
        return;
    r.s = r.s * __expf(r.m - mn) + s2 * __expf(m2 - mn);
    r.m = mn;
}

__device__ __forceinline__ void warp_merge(run &r)
{
#pragma unroll
    for (int o = 16; o; o >>= 1)
        merge(r, __shfl_xor_sync(0xffffffffu, r.m, o), __shfl_xor_sync(0xffffffffu, r.s, o));
}

extern "C" __global__ void __launch_bounds__(THREADS)
ce_rows_fast(const float *__restrict__ x, const int *__restrict__ t, double *__restrict__ rl,
             int v)
{
    __shared__ float shm[WARPS], shs[WARPS];
    long long base = (long long)blockIdx.x * v;
    const float *row = x + base;
    int head = (int)((4 - (base & 3)) & 3);
    head = head < v ? head : v;
    int nv = (v - head) >> 2;
    const float4 *r4 = (const float4 *)(row + head);
    run r = { NEG_INF, 0.f };

    if (threadIdx.x < head)
        add1(r, row[threadIdx.x]);
    int i = threadIdx.x;
    for (; i + 3 * THREADS < nv; i += 4 * THREADS) {
        float4 a = __ldcs(r4 + i), b = __ldcs(r4 + i + THREADS);
        float4 c = __ldcs(r4 + i + 2 * THREADS), d = __ldcs(r4 + i + 3 * THREADS);
        add4(r, a);
        add4(r, b);
        add4(r, c);
        add4(r, d);
    }
    for (; i < nv; i += THREADS)
        add4(r, __ldcs(r4 + i));
    for (int k = head + 4 * nv + threadIdx.x; k < v; k += THREADS)
        add1(r, row[k]);
    warp_merge(r);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) {
        shm[w] = r.m;
        shs[w] = r.s;
    }
    __syncthreads();
    if (w == 0) {
        r.m = lane < WARPS ? shm[lane] : NEG_INF;
        r.s = lane < WARPS ? shs[lane] : 0.f;
        warp_merge(r);
        if (lane == 0)
            rl[blockIdx.x] = log((double)r.s) + (double)r.m - (double)row[t[blockIdx.x]];
    }
}

extern "C" __global__ void __launch_bounds__(1024)
ce_mean_fast(const double *__restrict__ rl, float *__restrict__ loss, int b)
{
    __shared__ double sh[32];
    double s = 0.0;
    for (int i = threadIdx.x; i < b; i += 1024)
        s += rl[i];
#pragma unroll
    for (int o = 16; o; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = sh[threadIdx.x];
#pragma unroll
        for (int o = 16; o; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0)
            loss[0] = (float)(s / b);
    }
}

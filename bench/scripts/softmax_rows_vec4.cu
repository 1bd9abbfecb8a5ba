// kevo param  THREADS 512 1024 256
// kevo launch softmax_vec4 grid=M block=THREADS (x, y, N)
/*
 * A candidate for tasks/level1/softmax_rows.cu: examples/seeds/softmax_rows.cu (one block
 * per row, an online (max, sum) pass merged with warp shuffles, then a writing pass) with
 * 16-byte loads and stores. A row of odd N starts anywhere (row r at r*N floats), so each
 * row is split at its first 16-byte boundary: up to 3 scalars before it, float4s through
 * the body, up to 3 scalars after. x and y start 256-byte aligned with the same N, so a
 * row of y has the same split as the row of x. bench/scripts/mcp_session.py evaluates it
 * after the seed, through `kevo mcp`, with the seed as its parent.
 */
#define NEG_INF __int_as_float(0xff800000)   /* NVRTC has no math.h INFINITY */

#ifndef THREADS
#define THREADS 512
#endif

/* (m, s) += (m2, s2): sums of exp(v - m) rescaled to the larger maximum. */
__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2)
{
    float mn = fmaxf(m, m2);
    if (mn == NEG_INF)
        return;                         /* both empty */
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

/* (m, s) += one value. */
__device__ __forceinline__ void add(float &m, float &s, float v)
{
    if (v > m) {
        s = s * __expf(m - v) + 1.f;
        m = v;
    } else {
        s += __expf(v - m);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_vec4(const float *__restrict__ x, float *__restrict__ y, int n)
{
    __shared__ float wm[32], ws[32];
    const float *row = x + (long long)blockIdx.x * n;
    float *out = y + (long long)blockIdx.x * n;
    int head = (int)((16 - ((unsigned long long)row & 15)) & 15) >> 2;   /* 0..3 scalars */
    head = head < n ? head : n;
    int n4 = (n - head) >> 2;                                            /* float4s */
    int tail = head + 4 * n4;                                            /* 0..3 after */
    const float4 *row4 = (const float4 *)(row + head);
    float4 *out4 = (float4 *)(out + head);
    int t = threadIdx.x;
    float m = NEG_INF, s = 0.f;

    if (t < head)
        add(m, s, row[t]);
    for (int i = t; i < n4; i += THREADS) {
        float4 v = row4[i];
        add(m, s, v.x);
        add(m, s, v.y);
        add(m, s, v.z);
        add(m, s, v.w);
    }
    if (tail + t < n)
        add(m, s, row[tail + t]);

    for (int off = 16; off; off >>= 1)
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
    int warp = t >> 5, lane = t & 31;
    if (lane == 0) {
        wm[warp] = m;
        ws[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < THREADS / 32 ? wm[lane] : NEG_INF;
        s = lane < THREADS / 32 ? ws[lane] : 0.f;
        for (int off = 16; off; off >>= 1)
            merge(m, s, __shfl_xor_sync(0xffffffffu, m, off),
                  __shfl_xor_sync(0xffffffffu, s, off));
        if (lane == 0) {
            wm[0] = m;
            ws[0] = s;
        }
    }
    __syncthreads();
    m = wm[0];
    float inv = 1.f / ws[0];

    if (t < head)
        out[t] = __expf(row[t] - m) * inv;
    for (int i = t; i < n4; i += THREADS) {
        float4 v = row4[i];
        v.x = __expf(v.x - m) * inv;
        v.y = __expf(v.y - m) * inv;
        v.z = __expf(v.z - m) * inv;
        v.w = __expf(v.w - m) * inv;
        out4[i] = v;
    }
    if (tail + t < n)
        out[tail + t] = __expf(row[tail + t] - m) * inv;
}

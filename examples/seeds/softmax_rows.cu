// kevo param  THREADS 256 512 1024 128
// kevo launch softmax_fast grid=M block=THREADS (x, y, N)
/*
 * A candidate for tasks/level1/softmax_rows.cu, written as a user would: one block per
 * row; a single pass keeps a running (max, sum) pair per thread (online softmax), warps
 * merge their pairs with shuffles, then a second pass writes exp(x - max) / sum. The
 * second read of the row mostly hits L2, so DRAM sees close to one read and one write.
 */
#define NEG_INF __int_as_float(0xff800000)   /* NVRTC has no math.h INFINITY */

#ifndef THREADS
#define THREADS 256
#endif

__device__ __forceinline__ void merge(float &m, float &s, float m2, float s2)
{
    float mn = fmaxf(m, m2);
    if (mn == NEG_INF)
        return;                         /* both empty */
    s = s * __expf(m - mn) + s2 * __expf(m2 - mn);
    m = mn;
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_fast(const float *__restrict__ x, float *__restrict__ y, int n)
{
    __shared__ float wm[32], ws[32];
    const float *row = x + (long long)blockIdx.x * n;
    float *out = y + (long long)blockIdx.x * n;
    float m = NEG_INF, s = 0.f;

    for (int i = threadIdx.x; i < n; i += THREADS) {
        float v = row[i];
        if (v > m) {
            s = s * __expf(m - v) + 1.f;
            m = v;
        } else {
            s += __expf(v - m);
        }
    }
    for (int off = 16; off; off >>= 1)
        merge(m, s, __shfl_xor_sync(0xffffffffu, m, off), __shfl_xor_sync(0xffffffffu, s, off));
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
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
    for (int i = threadIdx.x; i < n; i += THREADS)
        out[i] = __expf(row[i] - m) * inv;
}

// kevo doc    Row sums with warp shuffles: each of THREADS threads sums a strided slice of
// kevo doc    its row (float4 loads when the row start is aligned), warps reduce with
// kevo doc    shuffles, one shared-memory slot per warp finishes the row.
// kevo param  THREADS 256 128 512 1024
// kevo param  ROWS_PER_BLOCK 1 2 4
// kevo launch sum_rows_shfl grid=cdiv(M, ROWS_PER_BLOCK) block=THREADS (x, out, M, N)
/*
 * A seed for tasks/level1/sum_rows_f32.cu. Sums are float (the task's tolerance allows a
 * different order than the reference's double). With ROWS_PER_BLOCK > 1 each block walks
 * several rows in turn, which helps when rows are short.
 */
#ifndef THREADS
#define THREADS 256
#endif
#ifndef ROWS_PER_BLOCK
#define ROWS_PER_BLOCK 1
#endif

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
sum_rows_shfl(const float *__restrict__ x, float *__restrict__ out, int m, int n)
{
    __shared__ float part[32];
    for (int k = 0; k < ROWS_PER_BLOCK; k++) {
        int r = blockIdx.x * ROWS_PER_BLOCK + k;
        if (r >= m)
            return;
        const float *row = x + (long long)r * n;
        float s = 0.f;
        /* float4 when the row starts 16-byte aligned (row * n * 4 bytes from an aligned base) */
        if (((long long)r * n) % 4 == 0) {
            int n4 = n / 4;
            const float4 *row4 = reinterpret_cast<const float4 *>(row);
            for (int i = threadIdx.x; i < n4; i += THREADS) {
                float4 v = row4[i];
                s += (v.x + v.y) + (v.z + v.w);
            }
            for (int i = n4 * 4 + threadIdx.x; i < n; i += THREADS)
                s += row[i];
        } else {
            for (int i = threadIdx.x; i < n; i += THREADS)
                s += row[i];
        }
        s = warp_sum(s);
        if ((threadIdx.x & 31) == 0)
            part[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x < 32) {
            float t = threadIdx.x < THREADS / 32 ? part[threadIdx.x] : 0.f;
            t = warp_sum(t);
            if (threadIdx.x == 0)
                out[r] = t;
        }
        __syncthreads();
    }
}

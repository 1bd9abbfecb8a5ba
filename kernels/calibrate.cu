/*
 * calibrate.cu - the kernels `kevo calibrate` runs to measure this device's speed of light
 * (src/sol.c): achievable DRAM bandwidth, the launch floor, and the fp32 and tensor-core
 * peaks. Device code only: src/sol.c compiles it with NVRTC for the device's own arch
 * (sm_90a on an H100) through the CUDA backend and launches it with plans it builds itself.
 *
 * By hand: nvcc -arch=sm_90a -cubin -o /tmp/calibrate.cubin kernels/calibrate.cu
 *          cuobjdump -sass /tmp/calibrate.cubin | grep -E 'HMMA|LDG.E.128'
 *
 * Kernels (all extern "C"; one thread block = 256 threads unless said otherwise):
 *   bw_read(x, sink, n4)    reads n4 16-byte vectors of x, sums them; one store per block.
 *                           Bytes moved: 16*n4.
 *   bw_write(y, n4)         writes n4 16-byte vectors derived from the index. 16*n4.
 *   bw_copy(x, y, n4)       y = x over n4 16-byte vectors. 32*n4 (read + write).
 *   empty(sink)             does nothing: its time is the launch floor.
 *   fma_fp32(out, iters)    per thread: CAL_FMA_CHAINS independent FMA chains, unrolled
 *                           CAL_FMA_UNROLL times per iteration.
 *                           FLOPs per thread = 2 * CAL_FMA_CHAINS * CAL_FMA_UNROLL * iters.
 *   mma_fp16/mma_bf16(out, iters)
 *                           per warp: CAL_MMA_ACC independent accumulators, one
 *                           mma.sync m16n8k16 each per iteration.
 *                           FLOPs per warp = 2*16*8*16 * CAL_MMA_ACC * iters.
 *   mma_tf32(out, iters)    the same with m16n8k8: FLOPs per warp = 2*16*8*8 * ACC * iters.
 *
 * The grid-stride loops keep four independent 16-byte accesses in flight per thread so a
 * grid of a few blocks per SM saturates HBM. Every kernel stores a value that depends on
 * all of its work, so the compiler cannot drop the loads or the arithmetic.
 * The tensor-core kernels need sm_80 (mma.sync with bf16/tf32); on older archs they compile
 * to no-ops and src/sol.c does not time them. src/sol.c passes the CAL_* counts as -D
 * defines, so its FLOP arithmetic and this file always agree.
 */

#ifndef CAL_FMA_CHAINS
#define CAL_FMA_CHAINS 8
#endif
#ifndef CAL_FMA_UNROLL
#define CAL_FMA_UNROLL 32
#endif
#ifndef CAL_MMA_ACC
#define CAL_MMA_ACC 8
#endif

/* Sum v over the block; the result is valid in thread 0. Block size: multiple of 32. */
__device__ static float cal_block_sum(float v)
{
    __shared__ float part[32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0f;
    if (threadIdx.x < 32)
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ static float cal_hsum(float4 a) { return (a.x + a.y) + (a.z + a.w); }

/* ---- bandwidth ---- */

extern "C" __global__ void bw_read(const float4 *__restrict__ x, float *__restrict__ sink,
                                   long n4)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long s = (long)gridDim.x * blockDim.x;
    float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;

    for (; i + 3 * s < n4; i += 4 * s) {      // four loads in flight before any add
        float4 a = x[i], b = x[i + s], c = x[i + 2 * s], d = x[i + 3 * s];
        acc0 += cal_hsum(a);
        acc1 += cal_hsum(b);
        acc2 += cal_hsum(c);
        acc3 += cal_hsum(d);
    }
    for (; i < n4; i += s)
        acc0 += cal_hsum(x[i]);
    float t = cal_block_sum((acc0 + acc1) + (acc2 + acc3));
    if (threadIdx.x == 0)
        sink[blockIdx.x] = t;                  // the one store that keeps the loads alive
}

extern "C" __global__ void bw_write(float4 *__restrict__ y, long n4)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long s = (long)gridDim.x * blockDim.x;

    for (; i < n4; i += s) {
        float f = (float)(int)(i & 0xffffff);  // index-derived, so no memset shortcut
        y[i] = make_float4(f, f + 1.0f, f + 2.0f, f + 3.0f);
    }
}

extern "C" __global__ void bw_copy(const float4 *__restrict__ x, float4 *__restrict__ y, long n4)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long s = (long)gridDim.x * blockDim.x;

    for (; i + 3 * s < n4; i += 4 * s) {
        float4 a = x[i], b = x[i + s], c = x[i + 2 * s], d = x[i + 3 * s];
        y[i] = a;
        y[i + s] = b;
        y[i + 2 * s] = c;
        y[i + 3 * s] = d;
    }
    for (; i < n4; i += s)
        y[i] = x[i];
}

/* ---- launch floor: grid 1, block 32 ---- */

extern "C" __global__ void empty(float *sink) {}

/* ---- fp32 FMA peak ---- */

extern "C" __global__ void fma_fp32(float *out, int iters)
{
    const float b = 0.999f, c = 1.0e-3f;    // |a| stays bounded: no inf/NaN slow paths
    float a[CAL_FMA_CHAINS];

#pragma unroll
    for (int j = 0; j < CAL_FMA_CHAINS; j++)
        a[j] = (float)(threadIdx.x + j) * 1.0e-3f;
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int u = 0; u < CAL_FMA_UNROLL; u++) {
#pragma unroll
            for (int j = 0; j < CAL_FMA_CHAINS; j++)
                a[j] = fmaf(a[j], b, c);       // chains are independent: no stall on latency
        }
    }
    float t = 0.0f;
#pragma unroll
    for (int j = 0; j < CAL_FMA_CHAINS; j++)
        t += a[j];
    out[(long)blockIdx.x * blockDim.x + threadIdx.x] = t;
}

/* ---- tensor cores (mma.sync, sm_80+) ---- */

/* Fragments per thread: A 4 x b32, B 2 x b32, C/D 4 x f32, for all three shapes used here.
 * The inputs are small non-zero constants (zeros would draw less power and flatter the
 * clock); the accumulators are independent, so the tensor pipe never waits on itself. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CAL_MMA_KERNEL(NAME, SHAPE_TYPES, AVAL, BVAL)                                     \
    extern "C" __global__ void NAME(float *out, int iters)                                 \
    {                                                                                      \
        float d[CAL_MMA_ACC][4];                                                           \
        unsigned a0 = (AVAL) ^ (threadIdx.x & 7), a1 = (AVAL), a2 = (AVAL), a3 = (AVAL);   \
        unsigned b0 = (BVAL), b1 = (BVAL) ^ (threadIdx.x & 3);                             \
        _Pragma("unroll")                                                                  \
        for (int k = 0; k < CAL_MMA_ACC; k++)                                              \
            d[k][0] = d[k][1] = d[k][2] = d[k][3] = 0.0f;                                  \
        for (int it = 0; it < iters; it++) {                                               \
            _Pragma("unroll")                                                              \
            for (int k = 0; k < CAL_MMA_ACC; k++)                                          \
                asm volatile("mma.sync.aligned." SHAPE_TYPES                               \
                             " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"      \
                             : "+f"(d[k][0]), "+f"(d[k][1]), "+f"(d[k][2]), "+f"(d[k][3])  \
                             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));      \
        }                                                                                  \
        float t = 0.0f;                                                                    \
        _Pragma("unroll")                                                                  \
        for (int k = 0; k < CAL_MMA_ACC; k++)                                              \
            t += (d[k][0] + d[k][1]) + (d[k][2] + d[k][3]);                                \
        out[(long)blockIdx.x * blockDim.x + threadIdx.x] = t;                              \
    }
#else
/* Before sm_80 (and in a host pass) a no-op; src/sol.c does not time these there. */
#define CAL_MMA_KERNEL(NAME, SHAPE_TYPES, AVAL, BVAL)                                     \
    extern "C" __global__ void NAME(float *out, int iters) {}
#endif

/* 0x2e66 = 0.1 in fp16; 0x3dcd = 0.1 in bf16; 0x3dcccccd = 0.1f (tf32 uses its top bits) */
CAL_MMA_KERNEL(mma_fp16, "m16n8k16.row.col.f32.f16.f16.f32", 0x2e662e66u, 0x2e662e66u)
CAL_MMA_KERNEL(mma_bf16, "m16n8k16.row.col.f32.bf16.bf16.f32", 0x3dcd3dcdu, 0x3dcd3dcdu)
CAL_MMA_KERNEL(mma_tf32, "m16n8k8.row.col.f32.tf32.tf32.f32", 0x3dcccccdu, 0x3dcccccdu)

// kevo doc    Vectorised elementwise add: each thread handles ITEMS groups of VEC floats
// kevo doc    (float4 loads when VEC is 4), THREADS per block; the tail is done one by one.
// kevo param  THREADS 256 128 512 1024
// kevo param  VEC 4 1 2
// kevo param  ITEMS 1 2 4 8
// kevo launch vadd_vec grid=cdiv(N, THREADS*VEC*ITEMS) block=THREADS (x, y, z, N)
/*
 * A seed for tasks/level1/vector_add.cu: z = x + y. Wide loads cut the instruction count
 * per byte; ITEMS > 1 gives each thread several independent loads in flight. Vector loads
 * need 16-byte alignment: every tensor starts 256-byte aligned, and a group of VEC
 * elements starting at a multiple of VEC is aligned too; the last partial group is done
 * element by element.
 */
#ifndef THREADS
#define THREADS 256
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef ITEMS
#define ITEMS 1
#endif

template <int V> struct vec_of;
template <> struct vec_of<1> { typedef float t; };
template <> struct vec_of<2> { typedef float2 t; };
template <> struct vec_of<4> { typedef float4 t; };

__device__ __forceinline__ float add1(float a, float b) { return a + b; }
__device__ __forceinline__ float2 add1(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float4 add1(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

extern "C" __global__ void __launch_bounds__(THREADS)
vadd_vec(const float *__restrict__ x, const float *__restrict__ y, float *__restrict__ z, int n)
{
    typedef typename vec_of<VEC>::t V;
    const long long groups = n / VEC;
    const long long base = ((long long)blockIdx.x * THREADS * ITEMS) + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        long long g = base + (long long)k * THREADS;
        if (g < groups)
            reinterpret_cast<V *>(z)[g] =
                add1(reinterpret_cast<const V *>(x)[g], reinterpret_cast<const V *>(y)[g]);
    }
    /* the tail (n % VEC elements) by the first threads of block 0 */
    if (blockIdx.x == 0 && threadIdx.x < n % VEC) {
        long long i = groups * VEC + threadIdx.x;
        z[i] = x[i] + y[i];
    }
}

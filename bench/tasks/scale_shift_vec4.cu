// kevo param  THREADS 256 512 128
// kevo launch scale_shift_vec4 grid=min(cdiv(N,4*THREADS),1056) block=THREADS (x, y, a, b, N)
/* A candidate for bench/tasks/scale_shift.cu: 16-byte loads and stores in a grid-stride
 * loop over a grid of 8 blocks per SM, a scalar tail for N not a multiple of 4. */
extern "C" __global__ void scale_shift_vec4(const float *__restrict__ x, float *__restrict__ y,
                                            float a, float b, int n)
{
    int n4 = n / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    float4 *y4 = reinterpret_cast<float4 *>(y);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 v = x4[i];
        y4[i] = make_float4(a * v.x + b, a * v.y + b, a * v.z + b, a * v.w + b);
    }
    int t = 4 * n4 + blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n)
        y[t] = a * x[t] + b;
}

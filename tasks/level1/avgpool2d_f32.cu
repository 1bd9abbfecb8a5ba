// kevo task   avgpool2d_f32
// kevo doc    2x2 average pooling, stride 2, no padding, NCHW float32 (an odd last row/column is
// kevo doc    dropped): x is N x C x H x W, y is N x C x floor(H/2) x floor(W/2),
// kevo doc    y[n,c,i,j] = (x[n,c,2i,2j] + x[n,c,2i,2j+1] + x[n,c,2i+1,2j] + x[n,c,2i+1,2j+1]) / 4.
// kevo tags   pool
// kevo size   N=64 C=256 H=56 W=56
// kevo size   N=16 C=512 H=14 W=14
// kevo holdout N=3 C=7 H=57 W=101
// kevo input  x f32[N,C,H,W] normal(0.5,1)
// kevo output y f32[N,C,H/2,W/2]
// kevo bytes  4*N*C*H*W + 4*N*C*(H/2)*(W/2)
// kevo flops  4*N*C*(H/2)*(W/2)
// kevo torch  F.avg_pool2d(x, 2)
// kevo launch avgpool_ref grid=cdiv(N*C*(H/2)*(W/2),256) block=256 (x, y, N*C, H, W)
/*
 * avgpool2d_f32 - the reference: one thread per output element (flat index over
 * N*C*Ho*Wo, 64-bit), summing its 2x2 window row by row, left to right, then multiplying
 * by 1/4 (exact, the same as dividing by 4), as PyTorch does. With H or W odd, the last
 * input row/column belongs to no window (floor division), which a kernel that assumes even
 * sizes gets wrong: the holdout has both odd.
 *
 * Sizes: the primary is a ResNet-style downsampling of a 256-channel 56x56 map at batch
 * 64 (196 MiB in, 49 MiB out); the second a small late-layer shape (14x14: rows of 14
 * floats, awkward for vector loads). The inputs have mean 0.5 so the outputs are not
 * centred on 0; a sum of 4 floats in another order differs by ~1e-7 of the terms, well
 * inside the default float32 tolerance.
 */
extern "C" __global__ void avgpool_ref(const float *x, float *y, long long planes, int h, int w)
{
    int ho = h / 2, wo = w / 2;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i >= planes * ho * wo)
        return;
    int oj = (int)(i % wo);
    int oi = (int)((i / wo) % ho);
    long long pl = i / ((long long)wo * ho);
    const float *p = x + (size_t)pl * h * w + (size_t)(2 * oi) * w + 2 * oj;
    float s = p[0] + p[1];

    s += p[w];
    s += p[w + 1];
    y[i] = s * 0.25f;
}

// kevo task   maxpool2d_f32
// kevo doc    3x3 max pooling, stride 2, padding 1 (padding never wins), NCHW float32: x is
// kevo doc    N x C x H x W, y is N x C x ceil(H/2) x ceil(W/2),
// kevo doc    y[n,c,i,j] = max over x[n,c,2i-1..2i+1, 2j-1..2j+1] inside the image.
// kevo tags   pool
// kevo size   N=64 C=64 H=112 W=112
// kevo size   N=8 C=256 H=28 W=28
// kevo holdout N=3 C=5 H=57 W=99
// kevo input  x f32[N,C,H,W] normal(0,1)
// kevo output y f32[N,C,cdiv(H,2),cdiv(W,2)]
// kevo bytes  4*N*C*H*W + 4*N*C*cdiv(H,2)*cdiv(W,2)
// kevo torch  F.max_pool2d(x, 3, stride=2, padding=1)
// kevo launch maxpool_ref grid=cdiv(N*C*cdiv(H,2)*cdiv(W,2),256) block=256 (x, y, N*C, H, W)
/*
 * maxpool2d_f32 - the reference: one thread per output element (flat index over
 * N*C*Ho*Wo, 64-bit), taking the maximum of the window's taps that lie inside the image.
 * With padding 1 and stride 2 the output is ceil(H/2) x ceil(W/2) (floor((H+2-3)/2)+1)
 * and every window holds at least one real pixel, so the result is always an input value.
 * The windows overlap (each interior input is read by up to 4 outputs), which a fast
 * kernel exploits by staging a tile; the reference re-reads through the cache.
 *
 * Sizes: the primary is the ResNet stem max pool at batch 64 (64 channels, 112x112 ->
 * 56x56; 196 MiB in, 49 MiB out); the second is a small deep-layer shape; the holdout has
 * odd H and W (the last window then hangs over the bottom/right edge). The output is an
 * input value, selected exactly, so the default tolerance amounts to an exact comparison.
 */
extern "C" __global__ void maxpool_ref(const float *x, float *y, long long planes, int h, int w)
{
    int ho = (h + 1) / 2, wo = (w + 1) / 2;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i >= planes * ho * wo)
        return;
    int oj = (int)(i % wo);
    int oi = (int)((i / wo) % ho);
    long long pl = i / ((long long)wo * ho);
    const float *xp = x + (size_t)pl * h * w;
    float m = -__int_as_float(0x7f800000);

    for (int u = 2 * oi - 1; u <= 2 * oi + 1; u++) {
        if (u < 0 || u >= h)
            continue;
        for (int v = 2 * oj - 1; v <= 2 * oj + 1; v++) {
            if (v < 0 || v >= w)
                continue;
            float t = xp[(size_t)u * w + v];
            m = t > m ? t : m;
        }
    }
    y[i] = m;
}

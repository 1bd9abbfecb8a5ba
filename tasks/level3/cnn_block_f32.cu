// kevo task   cnn_block_f32
// kevo doc    ResNet basic block (inference), NCHW float32: y = relu(bn1(conv1(x))),
// kevo doc    out = relu(bn2(conv2(y)) + x), where conv is a 3x3 convolution, stride 1, zero padding 1,
// kevo doc    no bias, C -> C channels, weights [C, C, 3, 3]; bn_i(z)[n,c] = z[n,c] * s_i[c] + b_i[c].
// kevo tags   conv norm fused cnn
// kevo size   N=32 C=64 H=56 W=56
// kevo size   N=8 C=128 H=28 W=28
// kevo holdout N=3 C=72 H=29 W=23
// kevo input  x f32[N,C,H,W] normal(0,1)
// kevo input  w1 f32[C,C,3,3] uniform(-0.07,0.07)
// kevo input  s1 f32[C] uniform(0.5,1.5)
// kevo input  b1 f32[C] uniform(-0.5,0.5)
// kevo input  w2 f32[C,C,3,3] uniform(-0.07,0.07)
// kevo input  s2 f32[C] uniform(0.5,1.5)
// kevo input  b2 f32[C] uniform(-0.5,0.5)
// kevo output out f32[N,C,H,W]
// kevo scratch y f32[N,C,H,W]
// kevo tol    rtol=2e-4 atol=1e-4
// kevo bytes  8*N*C*H*W + 72*C*C + 16*C
// kevo flops  36*N*C*C*H*W
// kevo torch  y = F.relu(F.conv2d(x, w1, padding=1) * s1.view(1, -1, 1, 1) + b1.view(1, -1, 1, 1))
// kevo torch  F.relu(F.conv2d(y, w2, padding=1) * s2.view(1, -1, 1, 1) + b2.view(1, -1, 1, 1) + x)
// kevo launch conv3x3_bn_relu grid=(cdiv(H*W,256), C, N) block=256 (x, w1, s1, b1, x, y, C, H, W, 0)
// kevo launch conv3x3_bn_relu grid=(cdiv(H*W,256), C, N) block=256 (y, w2, s2, b2, x, out, C, H, W, 1)
/*
 * cnn_block_f32 - the reference: two launches of one direct-convolution kernel, one
 * thread per output element (n, co, oy, ox), looping over the C input channels and the
 * 3x3 taps with the zero padding as a bounds check, accumulating in float; then the
 * folded batch-norm (scale and shift per channel), the residual (second launch only) and
 * the ReLU. The intermediate y is a float scratch tensor. The weights are read as
 * broadcasts (one output channel per block), the input rows coalesced.
 * Sizes: the first stage of a ResNet-18/34 (64 channels at 56x56) on a batch of 32,
 * 2 x 2*N*C*C*9*H*W = 14.8 GFLOP; a second stage (128 channels, 28x28); the holdout has
 * a channel count that is not a multiple of 32, a non-square odd image and an odd
 * batch, so a kernel that assumes 8x8 or 16x16 spatial tiles, or square images, fails.
 * Inputs: weights of std ~1/sqrt(9C), batch-norm scales in 0.5..1.5 and shifts in
 * -0.5..0.5, so every stage moves the values (about half the outputs are clipped by the
 * final ReLU, the rest are O(1) and differ from relu(x)).
 * Tolerance: sums of 576 (1152 at C=128) products in float; a different summation order
 * gives ~1e-6 relative, an implicit-GEMM or Winograd F(2x2,3x3) candidate in fp32 stays
 * well within rtol=2e-4 atol=1e-4; TF32 tensor cores (~1e-3) do not.
 */

// mode 0: out = relu(conv(in) * s + b); mode 1: out = relu(conv(in) * s + b + res).
extern "C" __global__ void conv3x3_bn_relu(const float *in, const float *w, const float *s,
                                           const float *b, const float *res, float *out,
                                           int c, int h, int wd, int mode)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    int co = blockIdx.y;
    size_t n = blockIdx.z;

    if (p >= h * wd)
        return;
    int oy = p / wd, ox = p % wd;
    const float *wc = w + (size_t)co * c * 9;
    float acc = 0.0f;

    for (int ci = 0; ci < c; ci++) {
        const float *plane = in + (n * c + ci) * (size_t)h * wd;
        const float *wk = wc + ci * 9;

        for (int ky = 0; ky < 3; ky++) {
            int iy = oy + ky - 1;

            if (iy < 0 || iy >= h)
                continue;
            for (int kx = 0; kx < 3; kx++) {
                int ix = ox + kx - 1;

                if (ix >= 0 && ix < wd)
                    acc += plane[(size_t)iy * wd + ix] * wk[ky * 3 + kx];
            }
        }
    }
    size_t o = (n * c + co) * (size_t)h * wd + p;
    float v = acc * s[co] + b[co];
    if (mode == 1)
        v += res[o];
    out[o] = fmaxf(v, 0.0f);
}

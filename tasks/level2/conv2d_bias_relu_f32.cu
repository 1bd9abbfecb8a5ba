// kevo task   conv2d_bias_relu_f32
// kevo doc    3x3 convolution, stride 1, zero padding 1, NCHW float32, plus bias and ReLU:
// kevo doc    y[n,k,i,j] = relu(bias[k] + sum_{c,r,s} x[n,c,i+r-1,j+s-1] * w[k,c,r,s]).
// kevo doc    x [B,C,H,W], w [K,C,3,3], bias [K], y [B,K,H,W] (out-of-range x reads as 0).
// kevo tags   conv epilogue relu fusion
// kevo size   B=32 C=128 K=128 H=56 W=56
// kevo size   B=8 C=256 K=256 H=14 W=14
// kevo holdout B=3 C=19 K=37 H=29 W=31
// kevo input  x f32[B,C,H,W] normal(0,1)
// kevo input  w f32[K,C,3,3] normal(0,0.03)
// kevo input  bias f32[K] uniform(-1,1)
// kevo output y f32[B,K,H,W]
// kevo scratch acc f32[B,K,H,W]
// kevo tol    rtol=1e-4 atol=5e-5
// kevo bytes  4*B*C*H*W + 4*K*C*9 + 4*K + 4*B*K*H*W
// kevo flops  2*B*K*H*W*C*9
// kevo torch  F.relu(F.conv2d(x, w, bias, padding=1))
// kevo launch conv3x3_ref grid=cdiv(B*K*H*W,256) block=256 (x, w, acc, B, C, K, H, W)
// kevo launch bias_relu_nchw_ref grid=cdiv(B*K*H*W,256) block=256 (acc, bias, y, B*K*H*W, K, H*W)
/*
 * conv2d_bias_relu_f32 - the reference, unfused: (1) a direct convolution, one thread per
 * output element, looping over input channels and the 3x3 window (inputs and weights come
 * from L1/L2; no tiling), into a scratch tensor; (2) one thread per element adds the
 * per-channel bias and applies ReLU. Size: a ResNet-style 3x3 layer, 128 channels in and
 * out at 56x56, batch 32: 29.6 GFLOP, so a good implicit-GEMM kernel is compute-bound (the
 * reference takes ~4.6 ms on an H100); the second size is a late-stage layer (14x14, 256
 * channels) where the spatial extent is small. The holdout has odd channel counts and
 * H != W, all odd or prime.
 * Inputs: each output sums C*9 = 1152 terms of x ~ N(0,1) times w ~ N(0,0.03), std ~1.0,
 * plus a bias in [-1,1]: about half the outputs clamp to exactly 0, the rest spread to ~4.
 * Tolerance: this sequential sum differs from the exact (fp64) result by up to ~8e-6 on the
 * 1152-term sums (~1.4e-5 on the second size's 2304 terms; measured on an H100), another
 * fp32 order by about as much, so rtol=1e-4 atol=5e-5 leaves a margin of ~3x on the worst
 * element; TF32 (PyTorch's cuDNN default, to be disabled when validating) errs by ~2e-3,
 * relative L2 ~2.5e-4, and fails.
 */

extern "C" __global__ void conv3x3_ref(const float *x, const float *w, float *acc, int nb,
                                       int c, int k, int h, int wd)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)nb * k * h * wd;

    if (idx >= total)
        return;
    int j = (int)(idx % wd);
    int i = (int)((idx / wd) % h);
    int ko = (int)((idx / ((long long)wd * h)) % k);
    int n = (int)(idx / ((long long)wd * h * k));
    float s = 0.0f;

    for (int ci = 0; ci < c; ci++) {
        const float *xp = x + ((size_t)n * c + ci) * h * wd;
        const float *wp = w + ((size_t)ko * c + ci) * 9;
        for (int r = 0; r < 3; r++) {
            int ii = i + r - 1;
            if (ii < 0 || ii >= h)
                continue;
            for (int q = 0; q < 3; q++) {
                int jj = j + q - 1;
                if (jj < 0 || jj >= wd)
                    continue;
                s += xp[(size_t)ii * wd + jj] * wp[r * 3 + q];
            }
        }
    }
    acc[idx] = s;
}

extern "C" __global__ void bias_relu_nchw_ref(const float *acc, const float *bias, float *y,
                                              long long total, int k, int hw)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;

    if (i < total)
        y[i] = fmaxf(acc[i] + bias[(i / hw) % k], 0.0f);
}

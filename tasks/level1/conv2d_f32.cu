// kevo task   conv2d_f32
// kevo doc    2-D convolution (cross-correlation, as F.conv2d), NCHW, 3x3 kernel, stride 1, zero
// kevo doc    padding 1 (output H x W): x is N x Cin x H x W, w is Cout x Cin x 3 x 3,
// kevo doc    y[n,o,i,j] = sum_{c,u,v} x[n,c,i+u-1,j+v-1] * w[o,c,u,v]. float32 accuracy (no TF32).
// kevo tags   conv
// kevo size   N=32 Cin=64 Cout=64 H=56 W=56
// kevo size   N=8 Cin=3 Cout=64 H=224 W=224
// kevo holdout N=3 Cin=17 Cout=33 H=31 W=45
// kevo input  x f32[N,Cin,H,W] normal(0,1)
// kevo input  w f32[Cout,Cin,3,3] uniform(-0.1,0.1)
// kevo output y f32[N,Cout,H,W]
// kevo tol    rtol=1e-4 atol=1e-4
// kevo bytes  4*N*Cin*H*W + 4*Cout*Cin*9 + 4*N*Cout*H*W
// kevo flops  2*N*Cout*H*W*Cin*9
// kevo torch  F.conv2d(x, w, padding=1)
// kevo launch conv2d_ref grid=(cdiv(H*W,256), Cout, N) block=256 (x, w, y, Cin, Cout, H, W)
/*
 * conv2d_f32 - the reference: one thread per output pixel (threads along the row-major
 * pixel index of one output plane, so the loads of x are mostly coalesced and the weight
 * loads are broadcasts), looping over input channels and the 3x3 taps, skipping taps that
 * fall in the zero padding, with a double accumulator of exact products (the exactly
 * rounded result: the reference is the most accurate party). ~2 ms at the primary size.
 *
 * Sizes: the primary is a ResNet-50 conv2_x 3x3 layer at batch 32 (64 -> 64 channels,
 * 56x56, 7.4 GFLOP, reduction length Cin*9 = 576); the second is a VGG-style first layer
 * (3 input channels: reduction length 27, a different shape for an implicit GEMM, 224x224
 * images); the holdout has odd channel counts and sizes.
 *
 * Tolerance. |y| ~ sqrt(Cin*9) * 1 * 0.058 (~1.4 for the primary, less on the border). A
 * float candidate summing in any order errs by ~1e-5 at worst (cuDNN's fp32 path: 8e-6,
 * measured); atol = 1e-4 covers that with room and covers outputs near zero. TF32 tensor
 * cores (cuDNN's default in PyTorch) must FAIL, as the task is fp32: measured on an H100,
 * a relative L2 error of 2.9e-4 at the primary size (2.9x over the rtol of 1e-4) with
 * ~60% of the outputs over the elementwise bound.
 */
extern "C" __global__ void conv2d_ref(const float *x, const float *w, float *y, int cin,
                                      int cout, int h, int wd)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    int o = blockIdx.y, n = blockIdx.z;
    const float *xn = x + (size_t)n * cin * h * wd;
    const float *wo = w + (size_t)o * cin * 9;
    double acc = 0.0;

    if (p >= h * wd)
        return;
    int i = p / wd, j = p % wd;
    for (int c = 0; c < cin; c++) {
        const float *xc = xn + (size_t)c * h * wd;
        for (int u = 0; u < 3; u++) {
            int ii = i + u - 1;
            if (ii < 0 || ii >= h)
                continue;
            for (int v = 0; v < 3; v++) {
                int jj = j + v - 1;
                if (jj < 0 || jj >= wd)
                    continue;
                acc += (double)xc[(size_t)ii * wd + jj] * (double)wo[c * 9 + u * 3 + v];
            }
        }
    }
    y[((size_t)n * cout + o) * h * wd + p] = (float)acc;
}

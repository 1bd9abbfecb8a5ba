// kevo task   conv1d_f32
// kevo doc    1-D convolution (cross-correlation, as F.conv1d), stride 1, no padding: x is
// kevo doc    B x Cin x L, w is Cout x Cin x Kw, y is B x Cout x (L-Kw+1),
// kevo doc    y[b,o,l] = sum_{c<Cin, j<Kw} x[b,c,l+j] * w[o,c,j]. float32 accuracy (no TF32).
// kevo tags   conv
// kevo size   B=16 Cin=256 Cout=256 L=4096 Kw=5
// kevo size   B=8 Cin=128 Cout=192 L=1000 Kw=3
// kevo holdout B=3 Cin=37 Cout=29 L=1001 Kw=7
// kevo input  x f32[B,Cin,L] normal(0,1)
// kevo input  w f32[Cout,Cin,Kw] uniform(-0.1,0.1)
// kevo output y f32[B,Cout,L-Kw+1]
// kevo tol    rtol=1e-4 atol=1e-4
// kevo bytes  4*B*Cin*L + 4*Cout*Cin*Kw + 4*B*Cout*(L-Kw+1)
// kevo flops  2*B*Cout*(L-Kw+1)*Cin*Kw
// kevo torch  F.conv1d(x, w)
// kevo launch conv1d_ref grid=(cdiv(L-Kw+1,128), Cout, B) block=128 (x, w, y, Cin, Cout, L, Kw)
/*
 * conv1d_f32 - the reference: one thread per output element (threads along the output
 * position, so the loads of x are coalesced and the weight loads are broadcasts), looping
 * over input channels and taps with a double accumulator of exact products, so the
 * result is the exactly rounded sum (the reference is the most accurate party). About
 * 14 ms at the primary size on an H100. Any sizes with Kw <= L.
 *
 * Sizes: the primary is a wide temporal convolution (256 -> 256 channels, 4096 steps, 5
 * taps, 43 GFLOP: compute-bound, an implicit GEMM with reduction length Cin*Kw = 1280);
 * the second is smaller with another tap count; the holdout has odd channel counts and
 * length and 7 taps.
 *
 * Tolerance. |y| ~ sqrt(Cin*Kw) * 1 * 0.058 (~2 for the primary). A float candidate that
 * accumulates sequentially errs by ~1e-5 at worst (cuDNN's fp32 path: 2e-5 at most,
 * measured); atol = 1e-4 leaves room and covers outputs that cancel to near zero. TF32
 * tensor cores must FAIL (the task is fp32): measured with PyTorch's cudnn.allow_tf32 on
 * an H100, a relative L2 error of 2.9e-4 (2.9x over the rtol of 1e-4) with ~65% of the
 * outputs over the elementwise bound.
 */
extern "C" __global__ void conv1d_ref(const float *x, const float *w, float *y, int cin,
                                      int cout, int l, int kw)
{
    int lout = l - kw + 1;
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    int o = blockIdx.y, b = blockIdx.z;
    const float *xb = x + (size_t)b * cin * l;
    const float *wo = w + (size_t)o * cin * kw;
    double acc = 0.0;

    if (p >= lout)
        return;
    for (int c = 0; c < cin; c++) {
        for (int j = 0; j < kw; j++)
            acc += (double)xb[(size_t)c * l + p + j] * (double)wo[c * kw + j];
    }
    y[((size_t)b * cout + o) * lout + p] = (float)acc;
}

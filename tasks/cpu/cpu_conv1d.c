// kevo task   cpu_conv1d
// kevo doc    1-D convolution (PyTorch's conv1d: cross-correlation) with 'same' zero padding,
// kevo doc    on the CPU: y[b,o,l] = bias[o] + sum_{c,k} w[o,c,k] * x[b,c,l+k-K/2] (terms
// kevo doc    outside 0..L-1 are zero); x is [B,C,L], w is [O,C,K] with K odd, y is [B,O,L].
// kevo tags   conv
// kevo size   B=2 C=32 O=64 L=1024 K=7
// kevo size   B=3 C=17 O=24 L=2000 K=3
// kevo holdout B=1 C=5 O=11 L=4099 K=9
// kevo input  x f32[B,C,L] normal(0,1)
// kevo input  w f32[O,C,K] uniform(-0.1,0.1)
// kevo input  bias f32[O] uniform(-1,1)
// kevo output y f32[B,O,L]
// kevo tol    rtol=1e-4 atol=1e-5
// kevo bytes  4*B*C*L + 4*O*C*K + 4*O + 4*B*O*L
// kevo flops  2*B*O*C*K*L
// kevo torch  F.conv1d(x, w, bias, padding=K // 2)
// kevo call   conv1d_ref(x, w, bias, y, B, C, O, L, K)
/*
 * cpu_conv1d - the reference: one double accumulator per output element, looping over the
 * input channels and the taps and skipping taps that fall in the zero padding, so it is
 * the most accurate party (a float candidate summing C*K <= 224 terms of ~0.06 in another
 * order is off by ~1e-7 absolute; the atol covers outputs that cancel to near zero).
 * 2*2*64*32*7*1024 = 59 MFLOP: tens of milliseconds naive on one core. The weights are
 * small (uniform +-0.1, fan-in 224) so outputs are O(1), with a bias per output channel;
 * the other workloads use other odd kernel widths, channel counts that are not multiples
 * of 4 or 8, and odd lengths, so the padded edges and tails are exercised.
 */
void conv1d_ref(const float *x, const float *w, const float *bias, float *y, int nb, int c,
                int o, int l, int k)
{
    int pad = k / 2;

    for (int b = 0; b < nb; b++) {
        for (int oc = 0; oc < o; oc++) {
            for (int i = 0; i < l; i++) {
                double s = bias[oc];

                for (int ic = 0; ic < c; ic++) {
                    const float *xr = x + ((long)b * c + ic) * l;
                    const float *wr = w + ((long)oc * c + ic) * k;

                    for (int t = 0; t < k; t++) {
                        int p = i + t - pad;

                        if (p >= 0 && p < l)
                            s += (double)wr[t] * xr[p];
                    }
                }
                y[((long)b * o + oc) * l + i] = (float)s;
            }
        }
    }
}

// kevo task   selective_scan_f32
// kevo doc    Mamba selective scan (float32), per batch b and channel d with N states, h_0 = 0:
// kevo doc    h_t[n] = exp(delta_t*A[d,n]) h_{t-1}[n] + delta_t*Bm[b,t,n]*u_t, y_t = sum_n Cm[b,t,n] h_t[n] + Dskip[d]*u_t,
// kevo doc    where u_t = u[b,t,d], delta_t = delta[b,t,d]; u, delta, y are [B,L,Dn]; A is [Dn,N]; Bm, Cm are [B,L,N]. N <= 64.
// kevo tags   scan recurrence ssm
// kevo size   B=16 L=512 Dn=2048 N=16
// kevo size   B=4 L=1024 Dn=1536 N=16
// kevo holdout B=3 L=333 Dn=1000 N=16
// kevo input  u f32[B,L,Dn] normal(0,1)
// kevo input  delta f32[B,L,Dn] uniform(0.01,0.1)
// kevo input  A f32[Dn,N] uniform(-4.0,-0.5)
// kevo input  Bm f32[B,L,N] normal(0,1)
// kevo input  Cm f32[B,L,N] normal(0,1)
// kevo input  Dskip f32[Dn] uniform(0.5,1.5)
// kevo output y f32[B,L,Dn]
// kevo tol    rtol=3e-4 atol=1e-4
// kevo bytes  12*B*L*Dn + 8*B*L*N + 4*Dn*N + 4*Dn
// kevo flops  7*B*L*Dn*N + 2*B*L*Dn
// kevo torch  h = torch.zeros(B, Dn, N, device=u.device, dtype=u.dtype)
// kevo torch  ys = []
// kevo torch  for t in range(L): h = torch.exp(delta[:, t, :, None] * A) * h + delta[:, t, :, None] * Bm[:, t, None, :] * u[:, t, :, None]; ys.append((h * Cm[:, t, None, :]).sum(-1))
// kevo torch  torch.stack(ys, 1) + u * Dskip
// kevo launch selective_scan_ref grid=(cdiv(Dn,128), B) block=128 (u, delta, A, Bm, Cm, Dskip, y, L, Dn, N)
/*
 * selective_scan_f32 - the reference: one thread per (b, d) channel walks the sequence
 * in order, keeping its N states in a local array (N <= 64), and writes y_t at each step;
 * exp is recomputed for every (t, n). The reads of u, delta and y are coalesced across
 * the channels of a block; Bm[b,t,:] and Cm[b,t,:] are broadcasts. Only B*Dn threads
 * (32768 at the primary size) each run L dependent steps, so the reference is latency
 * bound; a candidate can chunk the sequence (the recurrence is a linear scan with the
 * associative operator (a1,b1).(a2,b2) = (a1*a2, a2*b1 + b2)) or keep the states in
 * registers and prefetch.
 * Sizes: a Mamba-370M-like inner width (Dn = 2048, N = 16) for 16 sequences of 512
 * tokens: u, delta and y are 192 MiB together; the holdout has an odd length and a
 * channel count that is not a multiple of 32 or of the block size.
 * Inputs: delta in 0.01..0.1 and A in -4..-0.5 give per-step decays exp(delta*A) between
 * 0.67 and 0.995, so the states remember from ~3 to ~200 steps back; the state part of y
 * has std ~0.6 next to ~1.0 for the skip term Dskip*u (y has std 1.2), so y = Dskip*u
 * (relative L2 error ~0.5) or zero fails.
 * Tolerance: a chunked or parallel scan in float reorders the products of decays and the
 * sums (errors ~1e-6 relative per step, growing with the memory length ~1/(1-decay)),
 * and may use exp of summed delta*A; rtol=3e-4 atol=1e-4 leaves room for that against
 * outputs of O(1). PyTorch's step-by-step float32 loop is within 1.7e-6 absolute of this
 * reference, and the reference within 1.4e-6 of float64 (measured on an H100).
 */

extern "C" __global__ void selective_scan_ref(const float *u, const float *delta,
                                              const float *A, const float *Bm,
                                              const float *Cm, const float *Dskip, float *y,
                                              int l, int dn, int n)
{
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    size_t b = blockIdx.y;
    float h[64];

    if (d >= dn || n > 64)
        return;
    for (int k = 0; k < n; k++)
        h[k] = 0.0f;
    const float *ad = A + (size_t)d * n;
    float dsk = Dskip[d];

    for (int t = 0; t < l; t++) {
        size_t bt = b * l + t;
        float dt = delta[bt * dn + d];
        float uu = u[bt * dn + d];
        const float *bv = Bm + bt * n;
        const float *cv = Cm + bt * n;
        float acc = 0.0f;

        for (int k = 0; k < n; k++) {
            h[k] = expf(dt * ad[k]) * h[k] + dt * bv[k] * uu;
            acc += cv[k] * h[k];
        }
        y[bt * dn + d] = acc + dsk * uu;
    }
}

// kevo task   cosine_sim_f32
// kevo doc    Row-wise cosine similarity of two M x N float32 matrices, as F.cosine_similarity
// kevo doc    (dim=-1, eps=1e-8):
// kevo doc    y[r] = dot(a[r,:], b[r,:]) / (max(||a[r,:]||, eps) * max(||b[r,:]||, eps)).
// kevo tags   reduction
// kevo size   M=16384 N=4096
// kevo size   M=65536 N=128
// kevo holdout M=1001 N=1537
// kevo holdout M=37 N=100003
// kevo input  a f32[M,N] normal(1,1)
// kevo input  b f32[M,N] normal(0.5,2)
// kevo output y f32[M]
// kevo scalar eps f32 1e-8
// kevo bytes  8*M*N + 4*M
// kevo flops  6*M*N
// kevo torch  F.cosine_similarity(a, b, dim=-1, eps=eps)
// kevo launch cosine_ref grid=M block=256 smem=6144 (a, b, y, N, eps)
/*
 * cosine_sim_f32 - the reference: one block per row; each thread accumulates a.b, a.a and
 * b.b over a strided slice of the row in double, three shared-memory tree reductions (in
 * double) give the row's sums, and thread 0 writes the quotient. blockDim.x must be a power
 * of two (256) with three doubles of dynamic shared memory per thread. eps only matters for
 * near-zero rows, which these inputs never have (the clamp is on each norm, as in current
 * PyTorch).
 *
 * Sizes: the primary reads 512 MiB (e.g. scoring 16384 pairs of 4096-d embeddings); the
 * second has many short rows (128: a block per row wastes most threads, a warp per row
 * does better); the holdouts have odd N, one of them with few long rows.
 *
 * Inputs: independent rows with different means, so each similarity is ~0.5 / sqrt(2 *
 * 4.25) = 0.17 plus a row-dependent part of ~1/sqrt(N) (spread across rows; a constant
 * output fails). A float candidate's sums lose ~1e-6 relative at N = 100003 even when
 * accumulated sequentially, well inside the default float32 tolerance (rtol 1e-4, atol
 * 1e-5 for the few values near zero at N = 128).
 */
extern "C" __global__ void cosine_ref(const float *a, const float *b, float *y, int n, float eps)
{
    extern __shared__ double red[];   // 3 x blockDim.x
    const float *ar = a + (size_t)blockIdx.x * n;
    const float *br = b + (size_t)blockIdx.x * n;
    unsigned t = threadIdx.x, nt = blockDim.x;
    double ab = 0.0, aa = 0.0, bb = 0.0;

    for (int c = t; c < n; c += nt) {
        double u = ar[c], v = br[c];
        ab += u * v;
        aa += u * u;
        bb += v * v;
    }
    red[t] = ab;
    red[nt + t] = aa;
    red[2 * nt + t] = bb;
    __syncthreads();
    for (unsigned s = nt / 2; s > 0; s >>= 1) {
        if (t < s) {
            red[t] += red[t + s];
            red[nt + t] += red[nt + t + s];
            red[2 * nt + t] += red[2 * nt + t + s];
        }
        __syncthreads();
    }
    if (t == 0) {
        double na = fmax(sqrt(red[nt]), (double)eps);
        double nb = fmax(sqrt(red[2 * nt]), (double)eps);
        y[blockIdx.x] = (float)(red[0] / (na * nb));
    }
}

// kevo task   argmax_rows_f32
// kevo doc    Index of the maximum over the last axis of an M x N float32 matrix (row-major),
// kevo doc    out[r] = argmax_c x[r,c] as int32; ties go to the lowest index. Inputs hold no NaN.
// kevo tags   reduction argmax
// kevo size   M=8192 N=8192
// kevo size   M=128 N=50257
// kevo holdout M=37 N=100003
// kevo input  x f32[M,N] normal(0,1)
// kevo output out i32[M]
// kevo bytes  4*M*N + 4*M
// kevo torch  torch.argmax(x, dim=-1).to(torch.int32)
// kevo launch argmax_rows_ref grid=M block=256 smem=2048 (x, out, N)
/*
 * argmax_rows_f32 - the reference: one block per row; each thread walks a strided slice in
 * increasing index order keeping (value, index) of its first strict maximum, then a
 * shared-memory tree reduction (256 floats + 256 ints = 2048 bytes for the 256-thread
 * launch) keeps the larger value, or on equal values the smaller index. So the result is
 * the first maximal index, PyTorch's rule, whatever the order of combination. The primary
 * size reads 256 MiB; the second is greedy decoding over a GPT-2 vocabulary (128 rows of
 * 50257 logits), the holdout long prime rows. The output is an integer, compared exactly:
 * normal(0,1) inputs make the maximum of a row unique with overwhelming probability, and
 * the argmax positions are spread uniformly over 0..N-1, so no constant passes.
 */
extern "C" __global__ void argmax_rows_ref(const float *x, int *out, int n)
{
    extern __shared__ float sv[];
    int *si = (int *)(sv + blockDim.x);
    const float *row = x + (size_t)blockIdx.x * n;
    unsigned t = threadIdx.x;
    float bv = 0.0f;
    int bi = -1;   /* -1: no element seen yet */

    for (int c = t; c < n; c += blockDim.x) {
        float v = row[c];
        if (bi < 0 || v > bv) {
            bv = v;
            bi = c;
        }
    }
    sv[t] = bv;
    si[t] = bi;
    __syncthreads();
    for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
        if (t < k) {
            float ov = sv[t + k];
            int oi = si[t + k];
            if (oi >= 0 && (si[t] < 0 || ov > sv[t] || (ov == sv[t] && oi < si[t]))) {
                sv[t] = ov;
                si[t] = oi;
            }
        }
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = si[0];
}

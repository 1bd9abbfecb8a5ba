// kevo task   cross_entropy_f32
// kevo doc    Mean cross-entropy loss of B rows of float32 logits over V classes with int32
// kevo doc    targets (0 <= t < V): loss = (1/B) sum_r (logsumexp(x[r,:]) - x[r, t[r]]),
// kevo doc    a single float32 (as F.cross_entropy with reduction 'mean').
// kevo tags   loss softmax reduction
// kevo size   B=4096 V=32000
// kevo size   B=512 V=50257
// kevo holdout B=37 V=100003
// kevo holdout B=1001 V=5003
// kevo input  x f32[B,V] normal(0,2)
// kevo input  t i32[B] randint(0,V)
// kevo output loss f32[]
// kevo scratch rowloss f64[B]
// kevo tol    rtol=1e-5 atol=1e-5
// kevo bytes  4*B*V + 4*B + 4
// kevo flops  4*B*V
// kevo torch  F.cross_entropy(x, t.long())
// kevo launch ce_rows_ref grid=B block=256 smem=2048 (x, t, rowloss, V)
// kevo launch ce_mean_ref grid=1 block=1024 smem=8192 (rowloss, loss, B)
/*
 * cross_entropy_f32 - the reference, two launches: (1) one block per row: a shared-memory
 * tree reduction gives the row maximum m, a second one the sum of exp(x - m) (expf per
 * element, summed in double), and the row's loss log(sum) + m - x[t] goes to a double
 * scratch; (2) one block sums the B row losses in a fixed order (strided partial sums
 * and a tree, in double) and writes the mean. Deterministic (no atomics); every scratch
 * element is written before it is read. blockDim.x must be a power of two with one
 * double of dynamic shared memory per thread.
 *
 * Sizes: the primary is a language-model loss over 4096 tokens and a 32000-entry
 * vocabulary (500 MiB of logits); the second has GPT-2's vocabulary of 50257; the
 * holdouts have odd V, one with few rows (a kernel must split rows to fill the GPU) and
 * one with many short rows. Logits with std 2 give a softmax that is neither flat nor
 * one-hot (losses ~ log(V) + 2, varying by row).
 *
 * Tolerance. The loss (~12) is one number, judged across trials as well. A float
 * candidate's error is ~1e-6 relative (the sum of V exponentials and the mean over B
 * rows each lose ~2^-24 * sqrt(n) relative when summed sequentially; PyTorch's differs
 * by 8e-8 on an H100), so rtol = 1e-5 leaves ample room while a loss that drops one row
 * of the 4096 (a change of |loss_r - mean| / B, 1.4e-5 to 8e-5 relative in the trials
 * tried) fails.
 */
__device__ static double block_reduce(double *red, double v, int op)   // 0 = max, 1 = sum
{
    unsigned t = threadIdx.x;

    red[t] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] = op == 0 ? fmax(red[t], red[t + s]) : red[t] + red[t + s];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();   // red[] is reused by the next reduction
    return v;
}

extern "C" __global__ void ce_rows_ref(const float *x, const int *t, double *rowloss, int v)
{
    extern __shared__ double red[];
    const float *row = x + (size_t)blockIdx.x * v;
    float m = -__int_as_float(0x7f800000);
    double s = 0.0;

    for (int c = threadIdx.x; c < v; c += blockDim.x)
        m = fmaxf(m, row[c]);
    m = (float)block_reduce(red, m, 0);
    for (int c = threadIdx.x; c < v; c += blockDim.x)
        s += expf(row[c] - m);
    s = block_reduce(red, s, 1);
    if (threadIdx.x == 0)
        rowloss[blockIdx.x] = log(s) + (double)m - (double)row[t[blockIdx.x]];
}

extern "C" __global__ void ce_mean_ref(const double *rowloss, float *loss, int b)
{
    extern __shared__ double red[];
    double s = 0.0;

    for (int r = threadIdx.x; r < b; r += blockDim.x)
        s += rowloss[r];
    s = block_reduce(red, s, 1);
    if (threadIdx.x == 0)
        loss[0] = (float)(s / b);
}

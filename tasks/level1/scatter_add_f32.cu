// kevo task   scatter_add_f32
// kevo doc    Scatter-add of rows: out = zeros(V, D), then out[idx[t],:] += src[t,:] for all t < T;
// kevo doc    idx int32 in [0,V), src T x D and out V x D row-major float32 (index_add_ on dim 0).
// kevo tags   scatter memory embedding-backward
// kevo size   T=32768 V=16384 D=1024
// kevo size   T=4096 V=50257 D=768
// kevo holdout T=1001 V=997 D=771
// kevo input  idx i32[T] randint(0,V)
// kevo input  src f32[T,D] normal(0,1)
// kevo output out f32[V,D]
// kevo bytes  4*T + 4*T*D + 4*V*D
// kevo flops  T*D
// kevo torch  torch.zeros(V, D, device=src.device, dtype=src.dtype).index_add_(0, idx.long(), src)
// kevo atomics
// kevo launch scatter_add_ref grid=V block=256 (idx, src, out, T, D)
/*
 * scatter_add_f32 - the reference, deterministic without atomics: one 256-thread block per
 * output row v. The block zeroes its row, then scans idx in chunks of 256 (each thread
 * loads one index into shared memory); __syncthreads_count skips the chunks where no index
 * equals v (nearly all of them), and in the others the block walks the chunk in order and,
 * for each t with idx[t] == v, adds src[t,:] into the row, each thread owning the columns
 * c = threadIdx.x (mod 256). So every out element is the sum of its src values in
 * increasing t, the same on every run. Cost: each block reads all of idx (128 KiB, from
 * L2) once, V*T index reads in all (5e8 at the primary, well under a millisecond), plus
 * one pass over src and out.
 * Sizes: the primary is an embedding backward with on average 2 tokens per row (13% of rows
 * empty; 128 MiB of src read, 64 MiB of out written); the second a sparse one (a GPT-2
 * vocabulary, 92% of rows zero); the holdout has odd D and T > V. bytes counts idx and src
 * read once and out written once.
 * 'atomics': the natural fast kernel adds src rows into out with float atomicAdd (after
 * zeroing it), whose summation order varies from run to run; each element sums ~Poisson(2)
 * normal(0,1) terms, so another order moves it by ~1 ulp of a partial sum (< 1e-6), inside
 * the default f32 tolerance (rtol=1e-4, atol=1e-5). All-zero output fails the degenerate
 * check, and a candidate that forgets to zero rows without indices leaves poison there.
 */
#define CHUNK 256   /* == blockDim.x of the launch */

extern "C" __global__ void scatter_add_ref(const int *idx, const float *src, float *out,
                                           int t_count, int d)
{
    __shared__ int sidx[CHUNK];
    const int v = blockIdx.x;
    float *row = out + (size_t)v * d;

    for (int c = threadIdx.x; c < d; c += blockDim.x)
        row[c] = 0.0f;
    for (int t0 = 0; t0 < t_count; t0 += CHUNK) {
        int t = t0 + threadIdx.x;
        int hit = 0;

        if (t < t_count) {
            int k = idx[t];
            sidx[threadIdx.x] = k;
            hit = k == v;
        }
        /* a barrier and a block-wide count: the branch below is uniform */
        if (__syncthreads_count(hit) == 0)
            continue;
        int len = min(CHUNK, t_count - t0);
        for (int j = 0; j < len; j++) {
            if (sidx[j] != v)
                continue;
            const float *s = src + (size_t)(t0 + j) * d;
            for (int c = threadIdx.x; c < d; c += blockDim.x)
                row[c] += s[c];
        }
        __syncthreads();   /* sidx[] is overwritten by the next chunk */
    }
}

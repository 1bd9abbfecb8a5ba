// kevo task   embedding_gather_f32
// kevo doc    Embedding lookup: out[t,:] = table[idx[t],:] for t < T, with idx int32 in [0,V)
// kevo doc    and a row-major V x D float32 table; out is T x D.
// kevo tags   gather memory embedding
// kevo size   T=16384 V=50257 D=2048
// kevo size   T=4096 V=50257 D=768
// kevo holdout T=1001 V=5003 D=771
// kevo input  idx i32[T] randint(0,V)
// kevo input  table f32[V,D] normal(0,1)
// kevo output out f32[T,D]
// kevo bytes  4*T + 4*T*D + 4*D*(T - T*(T-1)/(2*V))
// kevo torch  F.embedding(idx.long(), table)
// kevo launch embedding_ref grid=(cdiv(D,256),T) block=256 (idx, table, out, D)
/*
 * embedding_gather_f32 - the reference: one thread per output element, a 2-D grid of
 * (column blocks, tokens); T stays under the grid's y limit (65535) in every workload.
 * Shapes: a GPT-2 sized vocabulary (V=50257, odd) with D=2048, 16384 tokens for the
 * primary (128 MiB written, ~109 MiB of table rows read); the holdout's D=771 is odd so
 * rows start unaligned and 16-byte vector copies need a tail.
 * bytes is a lower bound on what must move: idx read, out written, and each table row that
 * idx names read once. The number of distinct rows among T uniform draws is at least T
 * minus the number of colliding pairs, whose mean is T(T-1)/(2V) (2670 of 16384 at the
 * primary; the true expected count of distinct rows, V(1-(1-1/V)^T) = 13988, is above the
 * 13714 used, and its spread is a few dozen), so the floor never exceeds the real minimum.
 * The rest of the table need not be read. Values are copied exactly; the default f32
 * tolerance only means that nothing but the right rows passes.
 */
extern "C" __global__ void embedding_ref(const int *idx, const float *table, float *out, int d)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int t = blockIdx.y;

    if (c < d)
        out[(size_t)t * d + c] = table[(size_t)idx[t] * d + c];
}

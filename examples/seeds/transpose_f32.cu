// kevo doc    Shared-memory tiled transpose: a TILE x TILE tile is read with coalesced rows
// kevo doc    into padded shared memory and written back with coalesced rows of the output;
// kevo doc    a block of TILE x ROWS threads loops over the tile's rows.
// kevo param  TILE 64 32 16
// kevo param  ROWS 8 4 16
// kevo launch transpose_tiled grid=(cdiv(N,TILE),cdiv(M,TILE)) block=(TILE,ROWS) (x, y, M, N)
/*
 * An exemplar for tasks/level1/transpose_f32.cu (docs/playbook/coalescing-and-layout.md):
 * y[c, r] = x[r, c] for an M x N input. Reads and writes are both coalesced: a warp reads
 * 32 consecutive floats of an input row into the tile and writes 32 consecutive floats of
 * an output row out of it. The +1 column of padding keeps the column reads of the tile free
 * of bank conflicts. A 64 x 64 tile with 64 x 8 threads gives each thread 8 independent
 * loads before the barrier: enough bytes in flight to approach DRAM bandwidth. Streaming
 * hints (__ldcs/__stcs): neither matrix is touched again. Edges (any M, N) are guarded.
 * TILE=64 with ROWS=16 is 1024 threads and 16.6 KB of shared memory: every combination
 * fits a block.
 */
#ifndef TILE
#define TILE 64
#endif
#ifndef ROWS
#define ROWS 8
#endif

extern "C" __global__ void __launch_bounds__(TILE * ROWS)
transpose_tiled(const float *__restrict__ x, float *__restrict__ y, int m, int n)
{
    __shared__ float tile[TILE][TILE + 1];
    const int c0 = blockIdx.x * TILE, r0 = blockIdx.y * TILE;

#pragma unroll
    for (int r = threadIdx.y; r < TILE; r += ROWS) {
        int gr = r0 + r, gc = c0 + threadIdx.x;
        if (gr < m && gc < n)
            tile[r][threadIdx.x] = __ldcs(x + (long long)gr * n + gc);
    }
    __syncthreads();
#pragma unroll
    for (int c = threadIdx.y; c < TILE; c += ROWS) {
        int gc = c0 + c, gr = r0 + threadIdx.x;   /* output row gc, column gr */
        if (gc < n && gr < m)
            __stcs(y + (long long)gc * m + gr, tile[threadIdx.x][c]);
    }
}

/*
 * backend_cuda_int - what the CUDA backend's files share (backend_cuda.c: device, memory,
 * launches, verification ops; backend_cuda_time.c: timed samples and hardware counters):
 * the context, a prepared launch and the calls that check, marshal and enqueue one. Not a
 * contract for anything outside the CUDA backend.
 */
#ifndef KEVO_BACKEND_CUDA_INT_H
#define KEVO_BACKEND_CUDA_INT_H

#include "worker/backend_cuda.h"
#include "worker/cudrv.h"
#include "worker/cupti.h"
#include "worker/vmm.h"
#include <stdint.h>

#define MALLOC_HEAP_BYTES   (1u << 20)   /* device malloc: candidates barely need it */
#define PRINTF_FIFO_BYTES   (64u << 10)
#define BLOCK_TIMEOUT_NS    1000000000ull /* the blocking kernel gives up after ~1 s */
#define QUEUE_CAP           24           /* launches queued behind the blocker (nvbench:
                                            "~32 kernel launches max"); past it the
                                            blocker is released and the rest streams in */
#define HOST_FLAG_RELEASE   0            /* int index in the host-mapped words */
#define HOST_FLAG_TIMEOUT   1
#define HOST_TS_OFFSET      16           /* bytes: 4 x u64 stamps (gt0, clk0, gt1, clk1) */
#define HOST_WORDS_BYTES    64
#define HENT_GEN            2            /* harness entries of the verification ops */
#define HENT_SEAL           3
#define HENT_JUDGE          4
#define HENT_EVICT          5            /* kevo_harness_evict: the clean cold start */
#define HENT_DISCARD        6            /* kevo_harness_discard: then an invalid L2 */
#define HENT_ICACHE         7            /* kevo_harness_icache: cold instruction caches */
#define ICACHE_THREADS      128          /* its block: a warp per SM sub-partition */
#define EVICT_KEY           0x1E3779B9   /* what the evict kernel's XOR must equal to write */
#define V_THREADS           256          /* = KV_THREADS in kernels/harness.cu */
#define JUDGE_MAX_BLOCKS    1024         /* the judge's grid: a function of n only ... */
#define JUDGE_PER_BLOCK     4096         /* ... so a result never depends on the device */

struct cuda_entry {
    char *name;
    CUfunction f;
    struct kevo_func_info fi;
    int dyn_smem_max;                    /* current MAX_DYNAMIC_SHARED_SIZE_BYTES */
};

struct kevo_module {
    CUmodule mod;
    int n_entries;
    struct cuda_entry *e;
};

struct cuda_ctx {
    const struct kevo_cudrv *d;
    CUdevice dev;
    CUcontext ctx;                       /* the device's primary context, retained */
    CUstream stream;                     /* the harness stream */
    struct kevo_device_info info;
    int max_grid[3], max_block[3];
    CUdeviceptr flush;                   /* 2 x L2, read before a cold sample (evict) */
    size_t flush_bytes;
    void *host_words;                    /* host-mapped: release/timeout flags, stamps */
    CUdeviceptr dev_words;
    CUevent ev0, ev1;
    struct kevo_module *harness;         /* entry 0: kevo_harness_block, 1: _timestamp,
                                            2-4: kevo_harness_gen, _seal, _judge */
    CUdeviceptr vdev;                    /* judge parts, then the gen_check result word */
    CUdeviceptr sink;                    /* the evict kernel's never-written word */
    void *vhost;                         /* pinned: where they are read back */
    int lost;                            /* a sticky fault was seen */
    struct kevo_buf msg;                 /* last message of calls without an err buffer */
    struct pinned *pinned;               /* host blocks handed out or kept for reuse */
    struct kevo_vmm *vmm;                /* guarded device memory: every buffer, the
                                            harness's own included (vmm.h) */
    struct kevo_cupti *cupti;            /* kernel timestamps and counters; NULL: none */
    char cupti_why[256];                 /* why there is none */
    long kseq;                           /* kernels launched since the last cupti mark */
    double launch_gap_s;                 /* the GPU's launch latency (CUPTI: measured) */
    int warm_icache;                     /* KEVO_WARM_ICACHE=1: cold starts keep the SMs'
                                            instruction caches (a comparison, not a mode) */
};

/* A page-locked host block. Pinning costs ~0.1 s per GiB, so freed blocks are kept (up to
 * PINNED_KEEP bytes) and handed out again to requests of a similar size. */
struct pinned {
    struct pinned *next;
    void *p;
    size_t bytes;
    int in_use;
};

#define PINNED_KEEP ((size_t)8 << 30)

/* One launch, checked and marshalled, ready for cuLaunchKernel. */
struct prepared {
    int fill;                         /* a KEVO_ENTRY_FILL call: dst, bytes, pattern */
    uint64_t dst, bytes;
    uint32_t pattern;
    CUfunction f;
    const char *name;
    uint32_t grid[3], block[3], smem;
    uint64_t argv[KEVO_MAX_ARGS];
    void *argp[KEVO_MAX_ARGS];
    uint64_t tmap[KEVO_CALL_MAX_TMAPS][16];   /* encoded tensor maps (CUtensorMap bytes) */
    CUfunction icache;                /* an evict: kevo_harness_icache first (NULL: warm) */
    uint32_t icache_grid;             /*   one block per SM, argv3 = (sink, a, b, key) */
    uint64_t argv3[4];
    void *argp3[4];
    CUfunction discard;               /* an evict: then kevo_harness_discard (grid x V_THREADS) */
    uint32_t discard_grid;            /*   over argv2 = (buffer, 128-byte lines) */
    uint64_t argv2[2];
    void *argp2[2];
};

_Static_assert(sizeof(struct kevo_judge_part) == 128, "kevo_judge_part must mirror kv_part");
#define VDEV_BYTES (JUDGE_MAX_BLOCKS * sizeof(struct kevo_judge_part) + 8)

/* Note a status: a sticky fault marks the context lost. Returns st. */
enum kevo_status kevo_cuda_note(struct cuda_ctx *c, enum kevo_status st);
/* Make the context current on this thread; KEVO_ERR_DEVICE once it is lost. */
enum kevo_status kevo_cuda_bind(struct cuda_ctx *c, struct kevo_buf *err);
/* Raise entry e's dynamic shared memory limit to smem when it is below. */
enum kevo_status kevo_cuda_raise_smem(struct cuda_ctx *c, struct cuda_entry *e, unsigned smem,
                                      struct kevo_buf *err);
/* Enough blocks of V_THREADS for `items` grid-stride items, at most 16 per SM. */
uint32_t kevo_cuda_stride_grid(const struct cuda_ctx *c, int64_t items);
/* Wait for the harness stream (binding the context first). */
enum kevo_status kevo_cuda_drain(struct cuda_ctx *c, struct kevo_buf *err);
/* Check and marshal call i of m into p (which must not move afterwards: argp points
 * into it); fills and evicts (KEVO_ENTRY_FILL/EVICT) need no module. */
enum kevo_status kevo_cuda_prepare_one(struct cuda_ctx *c, struct kevo_module *m,
                                       const struct kevo_call *call, int i, struct prepared *p,
                                       struct kevo_buf *err);
/* The whole plan, checked before anything is enqueued (*out: kevo_free). */
enum kevo_status kevo_cuda_prepare(struct cuda_ctx *c, struct kevo_module *m,
                                   const struct kevo_call *calls, int n_calls,
                                   struct prepared **out, struct kevo_buf *err);
/* Enqueue one prepared launch on the harness stream; counts kernels in c->kseq. */
enum kevo_status kevo_cuda_enqueue(struct cuda_ctx *c, const struct prepared *p,
                                   struct kevo_buf *err);

/* backend_cuda_time.c: the backend ops `time` and `profile`, and CUPTI's set-up. */
enum kevo_status kevo_cuda_time(void *ctx, struct kevo_module *m, const struct kevo_call *calls,
                                int n_calls, int batch, int flush, struct kevo_sample *out,
                                struct kevo_buf *err);
enum kevo_status kevo_cuda_profile(void *ctx, struct kevo_module *m, const struct kevo_call *pre,
                                   int n_pre, const struct kevo_call *calls, int n_calls,
                                   const char *const *metrics, int n_metrics, double *values,
                                   int *passes, struct kevo_buf *err);
/* Start CUPTI's kernel records (a failure only leaves timing to events, said at info level). */
void kevo_cuda_cupti_open(struct cuda_ctx *c, int device);

#endif

/*
 * backend - the device interface that verify, timing, sol and eval are written against.
 * Two implementations: backend_cuda (NVRTC + driver API, in the worker process only) and
 * backend_cpu (C built with the system compiler into a shared object, run in a sandboxed
 * runner process).
 *
 * Device memory is named by uint64_t addresses (CUdeviceptr on CUDA, a pointer into the
 * shared arena on CPU). Launches are asynchronous; sync() reports faults. A status of
 * KEVO_ERR_DEVICE from any call means the device context is lost (sticky fault): the
 * caller records `crash` and the worker exits so the pool restarts it.
 */
#ifndef KEVO_BACKEND_H
#define KEVO_BACKEND_H

#include "base/buf.h"
#include "kevo.h"
#include "core/task.h"
#include "core/rules.h"
#include "core/verify.h"
#include <stddef.h>
#include <stdint.h>

struct kevo_device_info {
    char name[128];
    char arch[32];            /* "sm_90a" on an H100; "x86_64" on CPU */
    int cc_major, cc_minor;   /* 0 on CPU */
    int n_sms;                /* SMs; CPU: online cores */
    int64_t l2_bytes;         /* L2 (CPU: last-level cache estimate) */
    int64_t mem_bytes;
    int64_t smem_per_block_optin;
    int64_t smem_per_sm;
    int max_threads_per_block;
    int clock_mhz;            /* nominal SM clock */
    int mem_clock_mhz;
    int bus_width_bits;
    int64_t alloc_granule;    /* guarded allocations map whole units of this (CUDA: the VMM
                                 granularity, 2 MiB; CPU: the page): a stray access within
                                 one stays in the buffer's own mapping and does not fault */
    int kernel_clock;         /* time() reports kernel_seconds from the GPU's own kernel
                                 timestamps (CUDA with CUPTI): 0 on CPU and without CUPTI */
    double launch_gap_s;      /* with kernel_clock: the launch latency this process measured
                                 (calibration keeps one per device: core/sol.h): an
                                 isolated launch's, as Nsight Compute counts it */
    double launch_gap_b2b_s;  /* for the record: the latency between kernels run back to
                                 back, which overlaps the kernel before (0: not measured) */
};

/* What to compile: the whole source text, its path for messages, -D params and flags. */
struct kevo_compile_req {
    const char *path;
    const char *source;
    size_t source_len;
    int n_defines;
    const char *const *define_names;
    const int64_t *define_values;
    int n_flags;
    const char *const *flags;   /* already checked against the allowed list */
    int n_entries;              /* kernel/function names the plan will launch */
    const char *const *entries;
};

struct kevo_module;   /* opaque, backend-owned */

/* Static facts about one compiled kernel/function. */
struct kevo_func_info {
    int n_params;
    int param_size[KEVO_MAX_ARGS];    /* bytes of each parameter (CUDA); CPU: 0 if unknown */
    int num_regs;                     /* CUDA: registers per thread */
    int static_smem;                  /* bytes */
    int local_bytes;                  /* local memory per thread: > 0 means spills/stack */
    int max_threads_per_block;
};

/* One argument value of a resolved launch. TMAP (CUDA): a tensor map of the buffer at
 * ptr, described by the call's tm[i]; the backend encodes it (128 bytes) at launch. */
enum kevo_val_kind { KEVO_VAL_PTR = 0, KEVO_VAL_INT, KEVO_VAL_FLOAT, KEVO_VAL_TMAP };
struct kevo_val {
    enum kevo_val_kind kind;
    enum kevo_dtype dtype;    /* FLOAT: KEVO_F32/F64/...; INT: the scalar's dtype or I64 */
    uint64_t ptr;
    int64_t i;
    double f;
};

#define KEVO_CALL_MAX_TMAPS KEVO_RULES_TMAPS_PER_LAUNCH   /* tensor-map arguments of one launch */

/*
 * A call whose entry is KEVO_ENTRY_FILL is not a kernel: it fills args[1].i bytes at
 * device address args[0].ptr (4-byte aligned) with the repeating 4-byte pattern args[2].i,
 * in stream order with the kernels around it. Timed batches use it to poison the outputs
 * before every pass (kevo_call_fill builds one).
 */
#define KEVO_ENTRY_FILL (-1)

/*
 * A call whose entry is KEVO_ENTRY_EVICT reads args[1].i bytes at args[0].ptr (16-byte
 * aligned), which writes back and evicts everything cached before, then drops that
 * buffer's own lines without writing them (its contents become undefined): a cold start
 * with nothing dirty for the next kernel to write back and nothing valid to replace, as
 * after a profiler's cache invalidation (CUDA; the CPU backend refuses it).
 * kevo_call_evict builds one.
 */
#define KEVO_ENTRY_EVICT (-2)

/* One launch of the plan with every expression evaluated. */
struct kevo_call {
    int entry;                /* index into the module's entries */
    uint32_t grid[3], block[3];
    uint32_t smem;
    int n_args;
    struct kevo_val args[KEVO_MAX_ARGS];
    int n_tm;
    struct kevo_tmap_spec tm[KEVO_CALL_MAX_TMAPS];   /* what TMAP arguments describe */
};

/* A KEVO_ENTRY_FILL call. */
static inline struct kevo_call kevo_call_fill(uint64_t dst, size_t bytes, uint32_t pattern)
{
    struct kevo_call c = {.entry = KEVO_ENTRY_FILL, .grid = {1, 1, 1}, .block = {1, 1, 1},
                          .n_args = 3};
    c.args[0].kind = KEVO_VAL_PTR;
    c.args[0].ptr = dst;
    c.args[1].kind = KEVO_VAL_INT;
    c.args[1].i = (int64_t)bytes;
    c.args[2].kind = KEVO_VAL_INT;
    c.args[2].i = (int64_t)pattern;
    return c;
}

/* A KEVO_ENTRY_EVICT call. */
static inline struct kevo_call kevo_call_evict(uint64_t buf, size_t bytes)
{
    struct kevo_call c = {.entry = KEVO_ENTRY_EVICT, .grid = {1, 1, 1}, .block = {1, 1, 1},
                          .n_args = 2};
    c.args[0].kind = KEVO_VAL_PTR;
    c.args[0].ptr = buf;
    c.args[1].kind = KEVO_VAL_INT;
    c.args[1].i = (int64_t)bytes;
    return c;
}

/* Result of one timed batch. */
struct kevo_sample {
    double seconds;           /* elapsed for the whole batch, between events */
    double sm_clock_mhz;      /* measured during the batch; 0 if unknown */
    /* kernel_clock 1: the sum over the batch's passes of the span from the start of the
     * pass's first plan kernel to the end of its last, as the GPU stamped them (fills and
     * evicts, calls whose entry is < 0, are outside every span), over kernel_passes passes
     * that launched a plan kernel: the caller adds a launch latency per pass (the device's
     * calibrated one, else info.launch_gap_s); 0: not known, use seconds */
    double kernel_seconds;
    int kernel_clock;
    int kernel_passes;
};

struct kevo_backend_ops {
    const char *name;
    KEVO_NODISCARD enum kevo_status (*info)(void *ctx, struct kevo_device_info *out);
    /* KEVO_ERR_COMPILE with the compiler log in *log for a source that does not compile. */
    KEVO_NODISCARD enum kevo_status (*compile)(void *ctx, const struct kevo_compile_req *req,
                                               struct kevo_module **out, struct kevo_buf *log);
    /* Facts about entry i; KEVO_ERR_LAUNCH/NOTFOUND if the entry does not exist. */
    KEVO_NODISCARD enum kevo_status (*func_info)(void *ctx, struct kevo_module *m, int entry,
                                                 struct kevo_func_info *out);
    /* (optional) theoretical max active blocks per SM for a block size and dynamic smem. */
    KEVO_NODISCARD enum kevo_status (*occupancy)(void *ctx, struct kevo_module *m, int entry,
                                                 int block_threads, int smem, int *out_blocks);
    void (*module_free)(void *ctx, struct kevo_module *m);
    /*
     * Device memory, 256-byte aligned. free(0) is a no-op. Guarded (both backends): every
     * allocation has its own mapping with unmapped (or, in a CPU runner, inaccessible)
     * address space around it, wider than any 32-bit index of 8-byte elements reaches,
     * and ends where its mapping ends, so an access past its end faults.
     */
    KEVO_NODISCARD enum kevo_status (*alloc)(void *ctx, size_t bytes, uint64_t *out);
    void (*free)(void *ctx, uint64_t addr);
    KEVO_NODISCARD enum kevo_status (*upload)(void *ctx, uint64_t dst, const void *src, size_t n);
    KEVO_NODISCARD enum kevo_status (*download)(void *ctx, void *dst, uint64_t src, size_t n);
    /* Fill n bytes at dst with a repeating 4-byte pattern. */
    KEVO_NODISCARD enum kevo_status (*fill32)(void *ctx, uint64_t dst, uint32_t pattern, size_t n);
    /* Copy n bytes of device memory from src to dst (the ranges do not overlap). */
    KEVO_NODISCARD enum kevo_status (*copy)(void *ctx, uint64_t dst, uint64_t src, size_t n);
    /*
     * The verification ops (docs/harness.md, verify.h): inputs are generated, checked and
     * judged where they live, so only small summaries cross the bus. Ordered like the
     * memory ops (after every launch enqueued before them); each returns when done.
     * KEVO_ERR_DEVICE as for sync; *err (may be NULL) says why a call failed.
     *
     * gen: fill n elements at dst exactly as kevo_verify_generate(g, seed, stream) does.
     * On a GPU, uniform and randint are bit-identical; normal may differ in the last bit
     * of double log/cos/sin before the rounding to the dtype (docs/internals/backend_cuda.md).
     */
    KEVO_NODISCARD enum kevo_status (*gen)(void *ctx, uint64_t dst, const struct kevo_gen *g,
                                           uint64_t seed, uint64_t stream, int64_t n,
                                           struct kevo_buf *err);
    /* *first = the smallest index whose bits differ from what gen writes there, else -1. */
    KEVO_NODISCARD enum kevo_status (*gen_check)(void *ctx, uint64_t buf, const struct kevo_gen *g,
                                                 uint64_t seed, uint64_t stream, int64_t n,
                                                 int64_t *first, struct kevo_buf *err);
    /* XOR n elements of dt at buf with kevo_verify_seal_bits(key, i) (an involution). */
    KEVO_NODISCARD enum kevo_status (*seal)(void *ctx, uint64_t buf, enum kevo_dtype dt,
                                            int64_t n, uint64_t key, struct kevo_buf *err);
    /* kevo_verify_judge over device memory (ref sealed under rq->ref_key). Deterministic:
     * the same data always gives the same result, rel_l2 included, bit for bit. */
    KEVO_NODISCARD enum kevo_status (*judge)(void *ctx, const struct kevo_judge_req *rq,
                                             struct kevo_judge_res *res, struct kevo_buf *err);
    /*
     * Enqueue one pass of the plan. KEVO_ERR_LAUNCH (with *err set) for a plan the device
     * refuses: grid/block/smem limits, an argument that does not fit its parameter's width,
     * too many resources. Argument widths come from the kernel's own parameter info.
     */
    KEVO_NODISCARD enum kevo_status (*launch)(void *ctx, struct kevo_module *m,
                                              const struct kevo_call *calls, int n_calls,
                                              struct kevo_buf *err);
    /* Wait for everything enqueued; KEVO_ERR_DEVICE on a sticky fault, with *err set. */
    KEVO_NODISCARD enum kevo_status (*sync)(void *ctx, struct kevo_buf *err);
    /*
     * Time `batch` back-to-back passes of the plan. Before the timed region: reset
     * persisting-L2 state and flush the caches when `flush` is set. Returns after the work
     * completed; faults as for sync.
     */
    KEVO_NODISCARD enum kevo_status (*time)(void *ctx, struct kevo_module *m,
                                            const struct kevo_call *calls, int n_calls,
                                            int batch, int flush, struct kevo_sample *out,
                                            struct kevo_buf *err);
    /*
     * (optional) Where the last KEVO_ERR_DEVICE came from when it was a memory access the
     * backend could locate: 1 with *addr and *write (1 a store, 0 a load, -1 unknown),
     * else 0. Cleared by the next launch or timed batch.
     */
    int (*fault)(void *ctx, uint64_t *addr, int *write);
    /*
     * (optional) Hardware counters of each call of a plan: the `pre` calls (poison fills
     * and an evict: the cold start), then the plan with each call a range, replayed as often
     * as the metrics need. values[i * n_metrics + k]: metric k of plan call i, NaN where the
     * device does not have it; *passes: the replays. KEVO_ERR_NOTFOUND (with *err) when
     * the backend cannot count (no CUPTI); faults as for sync.
     */
    KEVO_NODISCARD enum kevo_status (*profile)(void *ctx, struct kevo_module *m,
                                               const struct kevo_call *pre, int n_pre,
                                               const struct kevo_call *calls, int n_calls,
                                               const char *const *metrics, int n_metrics,
                                               double *values, int *passes,
                                               struct kevo_buf *err);
    void (*destroy)(void *ctx);
    /*
     * (optional) host memory that upload/download move fastest (page-locked on CUDA, where
     * pageable copies are staged and run at a fraction of the bus speed). NULL members:
     * use kevo_malloc/kevo_free. host_free returns 1 if p was one of its blocks (now
     * released), 0 if not (the caller frees it); host_free(NULL) returns 0.
     */
    KEVO_NODISCARD enum kevo_status (*host_alloc)(void *ctx, size_t bytes, void **out);
    int (*host_free)(void *ctx, void *p);
};

/* The clock a device's samples are timed with: "cupti" (the GPU's kernel timestamps),
 * "events" (CUDA events around a batch) or "wall" (the CPU backend's host clock). */
static inline const char *kevo_clock_name(const struct kevo_device_info *info)
{
    return info->kernel_clock ? "cupti" : info->cc_major > 0 ? "events" : "wall";
}

struct kevo_backend {
    const struct kevo_backend_ops *ops;
    void *ctx;
};

/*
 * A compile request for a parsed task or candidate: its source, the distinct kernels (or
 * functions) its launch plan uses, in first-use order (the entry indices of its calls),
 * its params as -D defines (params: NULL for the defaults, else t->n_params values) and
 * its flags. Strings are borrowed from t; the arrays are owned (kevo_compile_src_free).
 */
struct kevo_compile_src {
    struct kevo_compile_req req;
    const char **entries;
    const char **names;
    int64_t *values;
};
KEVO_NODISCARD enum kevo_status kevo_compile_src_init(struct kevo_compile_src *s,
                                                      const struct kevo_task *t,
                                                      const int64_t *params);
void kevo_compile_src_free(struct kevo_compile_src *s);

/* Open the backend of `lang` (C -> CPU, CUDA -> device `device`). Only the worker opens
 * the CUDA backend; the controller never initialises CUDA. */
KEVO_NODISCARD enum kevo_status kevo_backend_open_cpu(struct kevo_backend *out, struct kevo_buf *err);
KEVO_NODISCARD enum kevo_status kevo_backend_open_cuda(int device, struct kevo_backend *out,
                                                       struct kevo_buf *err);
void kevo_backend_close(struct kevo_backend *b);

#endif

/*
 * backend_cuda - the backend.h vtable on one CUDA device: NVRTC compiles (rtc.c), the
 * driver API loaded at run time (cudrv.c), one non-blocking "harness" stream that every
 * launch, fill and timed sample goes through, and the timing sample of
 * docs/harness.md "Timing" (blocking kernel, clock stamps, events), and
 * the verification ops (gen, gen_check, seal, judge) on kernels of kernels/harness.cu, so
 * only summaries cross the bus. Design notes: docs/internals/backend_cuda.md.
 *
 * Invariants: the primary context is retained for the backend's life and made current on
 * every entry (a worker may compile on one thread and launch on another); once a sticky
 * fault is seen (KEVO_ERR_DEVICE) every later call answers KEVO_ERR_DEVICE at once, since
 * the context is gone and the worker must exit. Launch arguments are always marshalled at
 * the width the compiled kernel declares, never at the width the plan assumed.
 *
 * Thread-safety: one backend is used by one thread at a time (the worker's); the calls
 * make the context current themselves, so which thread that is may change.
 */
#include "worker/backend_cuda.h"

#include "worker/cudrv.h"
#include "core/dtype_conv.h"
#include "base/log.h"
#include "base/mem.h"
#include "worker/rtc.h"
#include "worker/vmm.h"
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.cu.inc"   /* build/gen: kernels/harness.cu as kevo_kernel_harness_cu[] */

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
    CUfunction discard;               /* an evict: then kevo_harness_discard (grid x V_THREADS) */
    uint32_t discard_grid;            /*   over argv2 = (buffer, 128-byte lines) */
    uint64_t argv2[2];
    void *argp2[2];
};

_Static_assert(sizeof(struct kevo_judge_part) == 128, "kevo_judge_part must mirror kv_part");
#define VDEV_BYTES (JUDGE_MAX_BLOCKS * sizeof(struct kevo_judge_part) + 8)

/* ---- messages ---- */

/* Note a status: a sticky fault marks the context lost. Returns st. */
static enum kevo_status note(struct cuda_ctx *c, enum kevo_status st)
{
    if (st == KEVO_ERR_DEVICE)
        c->lost = 1;
    return st;
}

/* For calls with no err buffer: keep the message in c->msg and log it. */
static enum kevo_status report(struct cuda_ctx *c, enum kevo_status st)
{
    if (st)
        KEVO_ERROR("cuda: %s", kevo_buf_str(&c->msg));
    return note(c, st);
}

/* Make the context current on this thread; KEVO_ERR_DEVICE once it is lost. */
static enum kevo_status bind(struct cuda_ctx *c, struct kevo_buf *err)
{
    if (c->lost) {
        kevo_buf_say(err, "the CUDA context was lost to an earlier device fault");
        return KEVO_ERR_DEVICE;
    }
    return note(c, KEVO_CU(c->d, err, c->d->cuCtxSetCurrent(c->ctx)));
}

/* ---- argument marshalling (pure) ---- */

/* x in a float format of ebits exponent and mbits mantissa bits (16 bits in all), rounded
 * to nearest even; overflow gives infinity and NaN stays NaN, as IEEE does. */
static uint16_t narrow_float(double x, int ebits, int mbits)
{
    const int bias = (1 << (ebits - 1)) - 1;
    const uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mbits);
    const uint16_t sign = signbit(x) ? (uint16_t)(1u << (ebits + mbits)) : 0;
    double a = fabs(x);
    int e = 0;

    if (isnan(x))
        return (uint16_t)(sign | inf | (1u << (mbits - 1)));
    if (isinf(x))
        return (uint16_t)(sign | inf);
    if (a == 0.0)
        return sign;
    frexp(a, &e);                                     /* a in [2^(e-1), 2^e) */
    int biased = e - 1 + bias;
    if (biased < 1) {                                 /* subnormal: units of 2^(1-bias-m) */
        double q = nearbyint(ldexp(a, bias - 1 + mbits));
        return (uint16_t)(sign | (uint16_t)q);        /* q == 2^m encodes the min normal */
    }
    double q = nearbyint(ldexp(a, mbits - (e - 1)));  /* in [2^m, 2^(m+1)] */
    if (q >= ldexp(1.0, mbits + 1)) {
        q = ldexp(1.0, mbits);
        biased++;
    }
    if (biased >= (1 << ebits) - 1)
        return (uint16_t)(sign | inf);
    return (uint16_t)(sign | (uint16_t)(biased << mbits) | (uint16_t)((uint32_t)q - (1u << mbits)));
}

uint16_t kevo_backend_cuda_half_bits(double x) { return narrow_float(x, 5, 10); }
uint16_t kevo_backend_cuda_bf16_bits(double x) { return narrow_float(x, 8, 7); }

static enum kevo_status marshal_int(const struct kevo_val *v, int size, const char *kernel,
                                    int index, void *out, struct kevo_buf *err)
{
    int64_t lo, hi;

    if (size != 1 && size != 2 && size != 4 && size != 8) {
        kevo_buf_say(err, "kernel '%s': argument %d is an integer but the parameter is %d bytes "
                  "(expected 1, 2, 4 or 8)", kernel, index, size);
        return KEVO_ERR_LAUNCH;
    }
    hi = size == 8 ? INT64_MAX : (int64_t)((UINT64_C(1) << (8 * size - 1)) - 1);
    lo = -hi - 1;
    if (v->i < lo || v->i > hi) {
        kevo_buf_say(err, "kernel '%s': argument %d = %" PRId64 " does not fit its %d-byte parameter "
                  "(range %" PRId64 "..%" PRId64 "; signedness is unknown, so values above "
                  "the signed maximum are refused)", kernel, index, v->i, size, lo, hi);
        return KEVO_ERR_LAUNCH;
    }
    int8_t i8 = (int8_t)v->i;
    int16_t i16 = (int16_t)v->i;
    int32_t i32 = (int32_t)v->i;
    if (size == 1)
        memcpy(out, &i8, 1);
    else if (size == 2)
        memcpy(out, &i16, 2);
    else if (size == 4)
        memcpy(out, &i32, 4);
    else
        memcpy(out, &v->i, 8);
    return KEVO_OK;
}

static enum kevo_status marshal_float(const struct kevo_val *v, int size, const char *kernel,
                                      int index, void *out, struct kevo_buf *err)
{
    const char *type = NULL;

    if (size == 8) {
        memcpy(out, &v->f, 8);
        return KEVO_OK;
    }
    if (size == 4) {
        float f = (float)v->f;
        memcpy(out, &f, 4);
        if (!isinf(f) || isinf(v->f))
            return KEVO_OK;
        type = "float";
    } else if (size == 2) {
        int bf = v->dtype == KEVO_BF16;
        uint16_t h = bf ? kevo_backend_cuda_bf16_bits(v->f) : kevo_backend_cuda_half_bits(v->f);
        memcpy(out, &h, 2);
        if ((h & 0x7fff) != (bf ? 0x7f80 : 0x7c00) || isinf(v->f))
            return KEVO_OK;
        type = bf ? "bf16" : "half";
    } else {
        kevo_buf_say(err, "kernel '%s': argument %d is a float but the parameter is %d bytes "
                  "(expected 2, 4 or 8)", kernel, index, size);
        return KEVO_ERR_LAUNCH;
    }
    kevo_buf_say(err, "kernel '%s': argument %d = %g overflows its %d-byte (%s) parameter", kernel,
         index, v->f, size, type);
    return KEVO_ERR_LAUNCH;
}

enum kevo_status kevo_backend_cuda_marshal_arg(const struct kevo_val *v, int param_size,
                                               const char *kernel, int index, void *out,
                                               struct kevo_buf *err)
{
    memset(out, 0, 8);
    switch (v->kind) {
    case KEVO_VAL_PTR:
        if (param_size != 8) {
            kevo_buf_say(err, "kernel '%s': argument %d is a device pointer (8 bytes) but the "
                      "parameter is %d bytes", kernel, index, param_size);
            return KEVO_ERR_LAUNCH;
        }
        memcpy(out, &v->ptr, 8);
        return KEVO_OK;
    case KEVO_VAL_INT:
        return marshal_int(v, param_size, kernel, index, out, err);
    case KEVO_VAL_FLOAT:
        return marshal_float(v, param_size, kernel, index, out, err);
    }
    kevo_buf_say(err, "kernel '%s': argument %d has an unknown kind %d", kernel, index, (int)v->kind);
    return KEVO_ERR_LAUNCH;
}

/* ---- device facts ---- */

static int attr(struct cuda_ctx *c, CUdevice_attribute a, int *out, struct kevo_buf *err)
{
    *out = 0;
    return KEVO_CU(c->d, err, c->d->cuDeviceGetAttribute(out, a, c->dev)) != KEVO_OK;
}

/* Fill c->info and the launch limits. Attributes that only inform (clocks, bus width)
 * read as 0 when a driver does not report them; the ones launches depend on must exist. */
static enum kevo_status query_device(struct cuda_ctx *c, struct kevo_buf *err)
{
    struct kevo_device_info *in = &c->info;
    int v = 0;
    size_t mem = 0;

    memset(in, 0, sizeof *in);
    if (KEVO_CU(c->d, err, c->d->cuDeviceGetName(in->name, (int)sizeof in->name, c->dev)) ||
        KEVO_CU(c->d, err, c->d->cuDeviceTotalMem(&mem, c->dev)) ||
        attr(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &in->cc_major, err) ||
        attr(c, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &in->cc_minor, err) ||
        attr(c, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &in->n_sms, err) ||
        attr(c, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &in->max_threads_per_block, err))
        return KEVO_ERR_CUDA;
    for (int i = 0; i < 3; i++) {
        if (attr(c, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + i, &c->max_grid[i], err) ||
            attr(c, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + i, &c->max_block[i], err))
            return KEVO_ERR_CUDA;
    }
    if (attr(c, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &v, err))
        return KEVO_ERR_CUDA;
    in->smem_per_block_optin = v;
    in->mem_bytes = (int64_t)mem;
    kevo_cudrv_arch_name(in->cc_major, in->cc_minor, in->arch, sizeof in->arch);
    /* Informational: a missing attribute leaves 0 ("unknown"), not a failure. */
    if (!attr(c, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &v, NULL))
        in->l2_bytes = v;
    if (!attr(c, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &v, NULL))
        in->smem_per_sm = v;
    if (!attr(c, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &v, NULL))
        in->clock_mhz = v / 1000;                     /* kHz */
    if (!attr(c, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &v, NULL))
        in->mem_clock_mhz = v / 1000;
    if (!attr(c, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &v, NULL))
        in->bus_width_bits = v;
    return KEVO_OK;
}

/* ---- modules ---- */

static void module_free(struct cuda_ctx *c, struct kevo_module *m)
{
    if (!m)
        return;
    if (m->mod && c->d->cuCtxSetCurrent(c->ctx) == CUDA_SUCCESS)
        (void)c->d->cuModuleUnload(m->mod);       /* fails harmlessly on a lost context */
    for (int i = 0; i < m->n_entries; i++)
        kevo_free(m->e[i].name);
    kevo_free(m->e);
    kevo_free(m);
}

/* Static facts of one kernel: attributes, and parameter sizes from cuFuncGetParamInfo
 * (which answers an error past the last parameter). */
static enum kevo_status entry_info(struct cuda_ctx *c, struct cuda_entry *e, struct kevo_buf *log)
{
    const struct kevo_cudrv *d = c->d;
    struct kevo_func_info *fi = &e->fi;
    size_t off = 0, size = 0;

    int *const dst[] = {&fi->num_regs, &fi->static_smem, &fi->local_bytes,
                        &fi->max_threads_per_block, &e->dyn_smem_max};
    const CUfunction_attribute which[] = {
        CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
        CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES};
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        enum kevo_status st = KEVO_CU(d, log, d->cuFuncGetAttribute(dst[i], which[i], e->f));
        if (st)
            return st;
    }
    fi->n_params = 0;
    while (d->cuFuncGetParamInfo(e->f, (size_t)fi->n_params, &off, &size) == CUDA_SUCCESS) {
        if (fi->n_params == KEVO_MAX_ARGS) {
            kevo_buf_say(log, "kernel '%s' has more than %d parameters\n", e->name, KEVO_MAX_ARGS);
            return KEVO_ERR_COMPILE;
        }
        fi->param_size[fi->n_params++] = (int)size;
    }
    return KEVO_OK;
}

/* A load failure the driver blames on the binary is the candidate's compile verdict. */
static enum kevo_status load_status(enum kevo_status st)
{
    return st == KEVO_ERR_LAUNCH ? KEVO_ERR_COMPILE : st;
}

/* Load cubin and look up each entry. KEVO_ERR_COMPILE (message in *log) for an entry that
 * the module does not export. */
static enum kevo_status module_load(struct cuda_ctx *c, const void *cubin, int n_entries,
                                    const char *const *entries, struct kevo_module **out,
                                    struct kevo_buf *log)
{
    const struct kevo_cudrv *d = c->d;
    enum kevo_status st = KEVO_OK;
    struct kevo_module *m = NULL;

    *out = NULL;
    m = kevo_calloc(1, sizeof *m);
    if (m)
        m->e = kevo_calloc(n_entries > 0 ? (size_t)n_entries : 1, sizeof *m->e);
    if (!m || !m->e) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    st = note(c, load_status(KEVO_CU(d, log, d->cuModuleLoadData(&m->mod, cubin))));
    if (st)
        goto out;
    for (int i = 0; i < n_entries; i++) {
        struct cuda_entry *e = &m->e[i];
        e->name = kevo_strdup(entries[i]);
        if (!e->name) {
            st = KEVO_ERR_NOMEM;
            goto out;
        }
        m->n_entries = i + 1;
        CUresult r = d->cuModuleGetFunction(&e->f, m->mod, entries[i]);
        if (r == CUDA_ERROR_NOT_FOUND) {
            kevo_buf_say(log, "kernel '%s' not found; is it extern \"C\"?\n", entries[i]);
            st = KEVO_ERR_COMPILE;
            goto out;
        }
        st = note(c, load_status(KEVO_CU(d, log, r)));
        if (!st)
            st = note(c, entry_info(c, e, log));
        if (st)
            goto out;
    }
    *out = m;
    m = NULL;
out:
    module_free(c, m);
    return st;
}

/* ---- compile, facts ---- */

static enum kevo_status cuda_info(void *ctx, struct kevo_device_info *out)
{
    struct cuda_ctx *c = ctx;

    *out = c->info;
    return KEVO_OK;
}

static enum kevo_status cuda_compile(void *ctx, const struct kevo_compile_req *req,
                                     struct kevo_module **out, struct kevo_buf *log)
{
    struct cuda_ctx *c = ctx;
    enum kevo_status st;
    void *cubin = NULL;
    size_t size = 0;

    *out = NULL;
    st = bind(c, log);
    if (st)
        return st;
    st = kevo_rtc_compile(req, c->info.arch, &cubin, &size, log, NULL);
    if (!st)
        st = module_load(c, cubin, req->n_entries, req->entries, out, log);
    kevo_free(cubin);
    return st;
}

static enum kevo_status cuda_func_info(void *ctx, struct kevo_module *m, int entry,
                                       struct kevo_func_info *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    if (!m || entry < 0 || entry >= m->n_entries)
        return KEVO_ERR_NOTFOUND;
    *out = m->e[entry].fi;
    return KEVO_OK;
}

/* Let e take smem bytes of dynamic shared memory (the opt-in above 48 KiB). */
static enum kevo_status raise_smem(struct cuda_ctx *c, struct cuda_entry *e, unsigned smem,
                                   struct kevo_buf *err)
{
    enum kevo_status st;

    if ((int64_t)smem <= e->dyn_smem_max)
        return KEVO_OK;
    st = KEVO_CU_LAUNCH(c->d, err, c->d->cuFuncSetAttribute(
                                       e->f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)smem));
    if (!st)
        e->dyn_smem_max = (int)smem;
    return note(c, st);
}

static enum kevo_status cuda_occupancy(void *ctx, struct kevo_module *m, int entry,
                                       int block_threads, int smem, int *out_blocks)
{
    struct cuda_ctx *c = ctx;
    enum kevo_status st;

    *out_blocks = 0;
    if (!m || entry < 0 || entry >= m->n_entries)
        return KEVO_ERR_NOTFOUND;
    if (block_threads <= 0 || smem < 0)
        return KEVO_ERR_INVALID;
    kevo_buf_reset(&c->msg);
    st = bind(c, &c->msg);
    if (!st)
        st = raise_smem(c, &m->e[entry], (unsigned)smem, &c->msg);
    if (!st)
        st = KEVO_CU(c->d, &c->msg, c->d->cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                        out_blocks, m->e[entry].f, block_threads, (size_t)smem));
    return report(c, st);
}

static void cuda_module_free(void *ctx, struct kevo_module *m)
{
    module_free(ctx, m);
}

/* ---- memory ---- */

static enum kevo_status cuda_alloc(void *ctx, size_t bytes, uint64_t *out)
{
    struct cuda_ctx *c = ctx;
    CUdeviceptr p = 0;
    enum kevo_status st;

    *out = 0;
    kevo_buf_reset(&c->msg);
    st = bind(c, &c->msg);
    if (!st)   /* each buffer guarded by unmapped addresses on both sides (vmm.h) */
        st = kevo_vmm_alloc(c->vmm, bytes, &p, &c->msg);
    if (!st)
        *out = (uint64_t)p;
    return report(c, st);
}

static void cuda_free(void *ctx, uint64_t addr)
{
    struct cuda_ctx *c = ctx;

    if (addr == 0 || c->lost || c->d->cuCtxSetCurrent(c->ctx) != CUDA_SUCCESS)
        return;
    if (!kevo_vmm_free(c->vmm, (CUdeviceptr)addr))
        KEVO_DEBUG("cuda: free of 0x%" PRIx64 ", which is not a live buffer", addr);
}

/* Copies are synchronous with respect to the harness stream: the stream is drained
 * first, since a non-blocking stream does not order against the copy's stream. */
static enum kevo_status drain(struct cuda_ctx *c, struct kevo_buf *err)
{
    enum kevo_status st = bind(c, err);

    if (!st)
        st = note(c, KEVO_CU(c->d, err, c->d->cuStreamSynchronize(c->stream)));
    return st;
}

static enum kevo_status cuda_upload(void *ctx, uint64_t dst, const void *src, size_t n)
{
    struct cuda_ctx *c = ctx;
    enum kevo_status st;

    kevo_buf_reset(&c->msg);
    st = drain(c, &c->msg);
    /* On the harness stream, then waited for: a synchronous copy from pageable memory may
     * return before its DMA lands, and nothing would order it before the next launch on
     * the (non-blocking) harness stream. */
    if (!st && n)
        st = KEVO_CU(c->d, &c->msg,
                     c->d->cuMemcpyHtoDAsync((CUdeviceptr)dst, src, n, c->stream));
    if (!st && n)
        st = drain(c, &c->msg);
    return report(c, st);
}

static enum kevo_status cuda_download(void *ctx, void *dst, uint64_t src, size_t n)
{
    struct cuda_ctx *c = ctx;
    enum kevo_status st;

    kevo_buf_reset(&c->msg);
    st = drain(c, &c->msg);
    if (!st && n)
        st = KEVO_CU(c->d, &c->msg, c->d->cuMemcpyDtoH(dst, (CUdeviceptr)src, n));
    return report(c, st);
}

/* n bytes of the repeating little-endian pattern: whole words with cuMemsetD32Async, a
 * tail of 1-3 bytes with the pattern's matching bytes. Enqueued on the harness stream. */
static enum kevo_status cuda_fill32(void *ctx, uint64_t dst, uint32_t pattern, size_t n)
{
    struct cuda_ctx *c = ctx;
    const struct kevo_cudrv *d = c->d;
    enum kevo_status st;
    size_t words = n / 4;

    kevo_buf_reset(&c->msg);
    if (dst % 4 != 0) {
        kevo_buf_say(&c->msg, "fill32: address 0x%" PRIx64 " is not 4-byte aligned", dst);
        return report(c, KEVO_ERR_INVALID);
    }
    st = bind(c, &c->msg);
    if (!st && words)
        st = KEVO_CU(d, &c->msg, d->cuMemsetD32Async((CUdeviceptr)dst, pattern, words, c->stream));
    for (size_t i = 0; !st && i < n % 4; i++) {
        unsigned char byte = (unsigned char)(pattern >> (8 * i));
        st = KEVO_CU(d, &c->msg, d->cuMemsetD8Async((CUdeviceptr)(dst + 4 * words + i), byte, 1,
                                                    c->stream));
    }
    return report(c, st);
}

/* ---- launches ---- */

/* Check the geometry of call i against the device and the kernel. */
static enum kevo_status check_dims(const struct cuda_ctx *c, const struct cuda_entry *e,
                                   const struct kevo_call *call, int i, struct kevo_buf *err)
{
    static const char axis[] = "xyz";
    uint64_t threads = 1;

    for (int k = 0; k < 3; k++) {
        if (call->block[k] < 1 || call->block[k] > (uint32_t)c->max_block[k]) {
            kevo_buf_say(err, "kernel '%s' (launch %d): block.%c = %u is outside 1..%d", e->name, i,
                 axis[k], call->block[k], c->max_block[k]);
            return KEVO_ERR_LAUNCH;
        }
        if (call->grid[k] < 1 || call->grid[k] > (uint32_t)c->max_grid[k]) {
            kevo_buf_say(err, "kernel '%s' (launch %d): grid.%c = %u is outside 1..%d", e->name, i,
                 axis[k], call->grid[k], c->max_grid[k]);
            return KEVO_ERR_LAUNCH;
        }
        threads *= call->block[k];
    }
    if (threads > (uint64_t)c->info.max_threads_per_block ||
        threads > (uint64_t)e->fi.max_threads_per_block) {
        kevo_buf_say(err, "kernel '%s' (launch %d): %" PRIu64 " threads per block; the device allows "
                  "%d and this kernel (%d registers per thread) at most %d", e->name, i,
             threads, c->info.max_threads_per_block, e->fi.num_regs, e->fi.max_threads_per_block);
        return KEVO_ERR_LAUNCH;
    }
    if ((int64_t)call->smem + e->fi.static_smem > c->info.smem_per_block_optin) {
        kevo_buf_say(err, "kernel '%s' (launch %d): %u bytes of dynamic shared memory plus %d static "
                  "exceed the device's %" PRId64 " per block", e->name, i, call->smem,
             e->fi.static_smem, c->info.smem_per_block_optin);
        return KEVO_ERR_LAUNCH;
    }
    return KEVO_OK;
}

static uint32_t stride_grid(const struct cuda_ctx *c, int64_t items);
static enum kevo_status prepare_one(struct cuda_ctx *c, struct kevo_module *m,
                                    const struct kevo_call *call, int i, struct prepared *p,
                                    struct kevo_buf *err);

/* The harness's evict kernel over [buf, buf + bytes) (its sink: c->sink), then its
 * discard kernel over the same lines: cold, clean and then invalid, as under ncu's cache
 * control (bench/results/2026-11-25-h100-ncu-fidelity.json: with the evict alone, L2 full
 * of clean lines, a latency-bound softmax read +3.4 % against ncu; with the discard +1.7 %). */
static enum kevo_status prepare_evict(struct cuda_ctx *c, uint64_t buf, uint64_t bytes, int i,
                                      struct prepared *p, struct kevo_buf *err)
{
    struct kevo_call k = {.entry = HENT_EVICT, .block = {V_THREADS, 1, 1}, .n_args = 4};
    k.grid[0] = stride_grid(c, (int64_t)(bytes / 16));
    k.grid[1] = k.grid[2] = 1;
    k.args[0] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = buf};
    k.args[1] = (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I64,
                                  .i = (int64_t)(bytes / 16)};
    k.args[2] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = (uint64_t)c->sink};
    k.args[3] = (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = EVICT_KEY};
    enum kevo_status st = prepare_one(c, c->harness, &k, i, p, err);
    if (st)
        return st;
    p->discard = c->harness->e[HENT_DISCARD].f;
    p->discard_grid = stride_grid(c, (int64_t)(bytes / 128));
    p->argv2[0] = buf;
    p->argv2[1] = bytes / 128;
    p->argp2[0] = &p->argv2[0];
    p->argp2[1] = &p->argv2[1];
    return KEVO_OK;
}

/* Check and marshal call i of m into p (which must not move afterwards: argp points
 * into it). */
static enum kevo_status prepare_one(struct cuda_ctx *c, struct kevo_module *m,
                                    const struct kevo_call *call, int i, struct prepared *p,
                                    struct kevo_buf *err)
{
    enum kevo_status st;

    memset(p, 0, sizeof *p);   /* callers may pass uninitialised storage (the harness's h[]) */
    if (call->entry == KEVO_ENTRY_EVICT) {
        if (call->n_args != 2 || call->args[0].ptr % 16 != 0 || call->args[1].i < 0) {
            kevo_buf_say(err, "launch %d: an evict needs a 16-byte aligned address and a size", i);
            return KEVO_ERR_INVALID;
        }
        return prepare_evict(c, call->args[0].ptr, (uint64_t)call->args[1].i, i, p, err);
    }
    if (call->entry == KEVO_ENTRY_FILL) {
        if (call->n_args != 3 || call->args[0].ptr % 4 != 0 || call->args[1].i < 0) {
            kevo_buf_say(err, "launch %d: a fill needs an aligned address and a size", i);
            return KEVO_ERR_INVALID;
        }
        p->fill = 1;
        p->dst = call->args[0].ptr;
        p->bytes = (uint64_t)call->args[1].i;
        p->pattern = (uint32_t)call->args[2].i;
        p->name = "fill";
        return KEVO_OK;
    }
    if (!m || call->entry < 0 || call->entry >= m->n_entries) {
        kevo_buf_say(err, "launch %d: entry %d does not exist (module has %d)", i, call->entry,
             m ? m->n_entries : 0);
        return KEVO_ERR_LAUNCH;
    }
    struct cuda_entry *e = &m->e[call->entry];
    st = check_dims(c, e, call, i, err);
    if (st)
        return st;
    if (call->n_args != e->fi.n_params) {
        kevo_buf_say(err, "kernel '%s' (launch %d): %d arguments given, the kernel takes %d", e->name,
             i, call->n_args, e->fi.n_params);
        return KEVO_ERR_LAUNCH;
    }
    for (int a = 0; a < call->n_args; a++) {
        st = kevo_backend_cuda_marshal_arg(&call->args[a], e->fi.param_size[a], e->name, a,
                                           &p->argv[a], err);
        if (st)
            return st;
        p->argp[a] = &p->argv[a];
    }
    st = raise_smem(c, e, call->smem, err);
    if (st)
        return st;
    p->f = e->f;
    p->name = e->name;
    p->smem = call->smem;
    memcpy(p->grid, call->grid, sizeof p->grid);
    memcpy(p->block, call->block, sizeof p->block);
    return KEVO_OK;
}

/* The whole plan, checked before anything is enqueued (kevo_free the result). */
static enum kevo_status prepare(struct cuda_ctx *c, struct kevo_module *m,
                                const struct kevo_call *calls, int n_calls,
                                struct prepared **out, struct kevo_buf *err)
{
    enum kevo_status st = KEVO_OK;
    struct prepared *p = NULL;

    *out = NULL;
    if (n_calls < 0 || (n_calls > 0 && !calls)) {
        kevo_buf_say(err, "launch: bad plan (%d calls)", n_calls);
        return KEVO_ERR_INVALID;
    }
    p = kevo_calloc(n_calls > 0 ? (size_t)n_calls : 1, sizeof *p);
    if (!p)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < n_calls && !st; i++)
        st = prepare_one(c, m, &calls[i], i, &p[i], err);
    if (st) {
        kevo_free(p);
        return st;
    }
    *out = p;
    return KEVO_OK;
}

static enum kevo_status enqueue(struct cuda_ctx *c, const struct prepared *p,
                                struct kevo_buf *err)
{
    const struct kevo_cudrv *d = c->d;
    size_t before = err ? err->len : 0;
    enum kevo_status st;

    if (p->fill) {
        st = KEVO_OK;
        if (p->bytes / 4)
            st = KEVO_CU(d, err, d->cuMemsetD32Async((CUdeviceptr)p->dst, p->pattern,
                                                     p->bytes / 4, c->stream));
        for (uint64_t i = 0; !st && i < p->bytes % 4; i++)
            st = KEVO_CU(d, err, d->cuMemsetD8Async((CUdeviceptr)(p->dst + p->bytes / 4 * 4 + i),
                                                    (unsigned char)(p->pattern >> (8 * i)), 1,
                                                    c->stream));
        return note(c, st);
    }
    st = KEVO_CU_LAUNCH(
        d, err, d->cuLaunchKernel(p->f, p->grid[0], p->grid[1], p->grid[2], p->block[0],
                                  p->block[1], p->block[2], p->smem, c->stream,
                                  (void **)p->argp, NULL));
    if (st && err && err->len > before)
        kevo_buf_say(err, " (kernel '%s')", p->name);
    if (!st && p->discard)
        st = KEVO_CU_LAUNCH(d, err, d->cuLaunchKernel(p->discard, p->discard_grid, 1, 1, V_THREADS,
                                                      1, 1, 0, c->stream, (void **)p->argp2, NULL));
    return note(c, st);
}

static enum kevo_status cuda_launch(void *ctx, struct kevo_module *m,
                                    const struct kevo_call *calls, int n_calls,
                                    struct kevo_buf *err)
{
    struct cuda_ctx *c = ctx;
    struct prepared *p = NULL;
    enum kevo_status st = bind(c, err);

    if (!st)
        st = prepare(c, m, calls, n_calls, &p, err);
    for (int i = 0; !st && i < n_calls; i++)
        st = enqueue(c, &p[i], err);
    kevo_free(p);
    return st;
}

static enum kevo_status cuda_sync(void *ctx, struct kevo_buf *err)
{
    return drain(ctx, err);
}

/* ---- timing ---- */

static volatile int *host_flags(struct cuda_ctx *c) { return (volatile int *)c->host_words; }

static volatile uint64_t *host_stamps(struct cuda_ctx *c)
{
    return (volatile uint64_t *)((char *)c->host_words + HOST_TS_OFFSET);
}

/* The harness launches of one sample: the blocker and the two clock stamps. */
static enum kevo_status prepare_harness(struct cuda_ctx *c, struct prepared h[3],
                                        struct kevo_buf *err)
{
    const uint64_t w = (uint64_t)c->dev_words;
    const uint32_t stamp_blocks = (uint32_t)(4 * c->info.n_sms < c->max_grid[0]
                                                 ? 4 * c->info.n_sms : c->max_grid[0]);
    struct kevo_call calls[3] = {
        {.entry = 0, .grid = {1, 1, 1}, .block = {1, 1, 1}, .n_args = 3,
         .args = {{.kind = KEVO_VAL_PTR, .ptr = w + 4 * HOST_FLAG_RELEASE},
                  {.kind = KEVO_VAL_PTR, .ptr = w + 4 * HOST_FLAG_TIMEOUT},
                  {.kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = (int64_t)BLOCK_TIMEOUT_NS}}},
        {.entry = 1, .grid = {stamp_blocks, 1, 1}, .block = {32, 1, 1}, .n_args = 1,
         .args = {{.kind = KEVO_VAL_PTR, .ptr = w + HOST_TS_OFFSET}}},
        {.entry = 1, .grid = {stamp_blocks, 1, 1}, .block = {32, 1, 1}, .n_args = 1,
         .args = {{.kind = KEVO_VAL_PTR, .ptr = w + HOST_TS_OFFSET + 16}}},
    };
    enum kevo_status st = KEVO_OK;

    for (int i = 0; i < 3 && !st; i++)
        st = prepare_one(c, c->harness, &calls[i], i, &h[i], err);
    return st;
}

/* Before the timed region: persisting-L2 lines dropped, then (cold) the flush buffer
 * read so nothing the candidate reads is left in L2, and nothing dirty either. */
static enum kevo_status begin_sample(struct cuda_ctx *c, int flush, struct kevo_buf *err)
{
    const struct kevo_cudrv *d = c->d;
    CUresult r = d->cuCtxResetPersistingL2Cache();

    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_UNSUPPORTED_LIMIT)
        return note(c, KEVO_CU(d, err, r));
    if (!flush)
        return KEVO_OK;
    struct prepared ev;
    struct kevo_call k = kevo_call_evict((uint64_t)c->flush, c->flush_bytes);
    enum kevo_status st = prepare_one(c, NULL, &k, 0, &ev, err);
    return st ? st : enqueue(c, &ev, err);
}

static void release(struct cuda_ctx *c)
{
    __atomic_store_n(&host_flags(c)[HOST_FLAG_RELEASE], 1, __ATOMIC_SEQ_CST);
}

/* The plan `batch` times between the events; the blocker holds the GPU until QUEUE_CAP
 * launches are queued (or all of them are). */
static enum kevo_status timed_region(struct cuda_ctx *c, const struct prepared *p, int n_calls,
                                     int batch, const struct prepared h[3], int *released,
                                     struct kevo_buf *err)
{
    const struct kevo_cudrv *d = c->d;
    enum kevo_status st = enqueue(c, &h[1], err);
    long queued = 0;

    if (!st)
        st = note(c, KEVO_CU(d, err, d->cuEventRecord(c->ev0, c->stream)));
    for (int b = 0; b < batch && !st; b++) {
        for (int i = 0; i < n_calls && !st; i++) {
            if (!*released && queued == QUEUE_CAP) {
                release(c);
                *released = 1;
            }
            st = enqueue(c, &p[i], err);
            queued++;
        }
    }
    if (!st)
        st = note(c, KEVO_CU(d, err, d->cuEventRecord(c->ev1, c->stream)));
    if (!st)
        st = enqueue(c, &h[2], err);
    return st;
}

/* Seconds between the events, and the SM clock from the two stamps (0 if unknown). */
static enum kevo_status read_sample(struct cuda_ctx *c, struct kevo_sample *out,
                                    struct kevo_buf *err)
{
    volatile uint64_t *ts = host_stamps(c);
    float ms = 0;
    enum kevo_status st = KEVO_CU(c->d, err, c->d->cuEventElapsedTime(&ms, c->ev0, c->ev1));

    if (st)
        return note(c, st);
    out->seconds = ms / 1e3;
    if (ts[0] && ts[2] > ts[0] && ts[3] > ts[1])
        out->sm_clock_mhz = (double)(ts[3] - ts[1]) / (double)(ts[2] - ts[0]) * 1e3;
    if (host_flags(c)[HOST_FLAG_TIMEOUT])
        KEVO_WARN("cuda: the blocking kernel timed out before the sample was queued; "
                  "this sample includes host launch gaps");
    return KEVO_OK;
}

static enum kevo_status cuda_time(void *ctx, struct kevo_module *m,
                                  const struct kevo_call *calls, int n_calls, int batch,
                                  int flush, struct kevo_sample *out, struct kevo_buf *err)
{
    struct cuda_ctx *c = ctx;
    struct prepared *p = NULL;
    struct prepared h[3];
    int blocked = 0, released = 0;
    enum kevo_status st;

    memset(out, 0, sizeof *out);
    if (batch < 1) {
        kevo_buf_say(err, "time: batch must be >= 1 (got %d)", batch);
        return KEVO_ERR_INVALID;
    }
    st = drain(c, err);   /* the blocker must not wait behind earlier work */
    if (!st)
        st = prepare(c, m, calls, n_calls, &p, err);
    if (!st)
        st = prepare_harness(c, h, err);
    if (st)
        goto out;
    memset(c->host_words, 0, HOST_WORDS_BYTES);
    st = begin_sample(c, flush, err);
    if (!st)
        st = enqueue(c, &h[0], err);
    if (st)
        goto out;
    blocked = 1;
    st = timed_region(c, p, n_calls, batch, h, &released, err);
out:
    if (blocked) {
        if (!released)
            release(c);
        enum kevo_status st2 = drain(c, st ? NULL : err);   /* keep the first message */
        if (!st)
            st = st2;
    }
    if (!st)
        st = read_sample(c, out, err);
    kevo_free(p);
    return st;
}

/* ---- copies and verification on the device (kernels/harness.cu) ---- */

static enum kevo_status cuda_copy(void *ctx, uint64_t dst, uint64_t src, size_t n)
{
    struct cuda_ctx *c = ctx;
    enum kevo_status st;

    kevo_buf_reset(&c->msg);
    st = bind(c, &c->msg);
    if (!st && n)   /* on the stream: ordered after earlier launches, before later ones */
        st = KEVO_CU(c->d, &c->msg,
                     c->d->cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, c->stream));
    return report(c, st);
}

static struct kevo_val vptr(uint64_t p) { return (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = p}; }
static struct kevo_val vint(int64_t i)
{
    return (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = i};
}
static struct kevo_val vflt(double f)
{
    return (struct kevo_val){.kind = KEVO_VAL_FLOAT, .dtype = KEVO_F64, .f = f};
}

/* Enough blocks of V_THREADS for `items` grid-stride items, at most 16 per SM. */
static uint32_t stride_grid(const struct cuda_ctx *c, int64_t items)
{
    int64_t blocks = (items + V_THREADS - 1) / V_THREADS;
    int64_t cap = 16 * (int64_t)(c->info.n_sms > 0 ? c->info.n_sms : 1);
    blocks = blocks < cap ? blocks : cap;
    return blocks < 1 ? 1 : (uint32_t)blocks;
}

/* Launch harness entry `entry` (grid x V_THREADS) and wait for it. */
static enum kevo_status vrun(struct cuda_ctx *c, int entry, uint32_t grid,
                             const struct kevo_val *args, int n_args, struct kevo_buf *err)
{
    struct kevo_call call = {.entry = entry, .grid = {grid, 1, 1}, .block = {V_THREADS, 1, 1},
                             .n_args = n_args};
    struct prepared p;
    enum kevo_status st = bind(c, err);

    memcpy(call.args, args, (size_t)n_args * sizeof *args);
    if (!st)
        st = prepare_one(c, c->harness, &call, 0, &p, err);
    if (!st)
        st = enqueue(c, &p, err);
    if (!st)
        st = note(c, KEVO_CU(c->d, err, c->d->cuStreamSynchronize(c->stream)));
    return st;
}

/* The generator kernel: writes n elements at dst, or checks them at check. */
static enum kevo_status gen_run(struct cuda_ctx *c, uint64_t dst, uint64_t check,
                                const struct kevo_gen *g, uint64_t seed, uint64_t stream,
                                int64_t n, struct kevo_buf *err)
{
    const struct kevo_val args[11] = {
        vptr(dst), vptr(check), vptr(c->vdev + VDEV_BYTES - 8), vint(g->dtype), vint(g->kind),
        vflt(g->a), vflt(g->b), vint(g->lo), vint(g->hi),
        vint((int64_t)kevo_verify_stream_key(seed, stream)), vint(n)};
    return vrun(c, HENT_GEN, stride_grid(c, (n + 1) / 2), args, 11, err);
}

static enum kevo_status cuda_gen(void *ctx, uint64_t dst, const struct kevo_gen *g, uint64_t seed,
                                 uint64_t stream, int64_t n, struct kevo_buf *err)
{
    return n > 0 ? gen_run(ctx, dst, 0, g, seed, stream, n, err) : KEVO_OK;
}

static enum kevo_status cuda_gen_check(void *ctx, uint64_t buf, const struct kevo_gen *g,
                                       uint64_t seed, uint64_t stream, int64_t n,
                                       int64_t *first, struct kevo_buf *err)
{
    struct cuda_ctx *c = ctx;
    const CUdeviceptr word = c->vdev + VDEV_BYTES - 8;
    enum kevo_status st = KEVO_OK;
    uint64_t v = UINT64_MAX;

    *first = -1;
    if (n <= 0)
        return KEVO_OK;
    st = bind(c, err);
    if (!st)   /* ~0: nothing found yet; the kernel lowers it with atomicMin */
        st = KEVO_CU(c->d, err, c->d->cuMemsetD32Async(word, 0xFFFFFFFFu, 2, c->stream));
    if (!st)
        st = gen_run(c, 0, buf, g, seed, stream, n, err);
    if (!st)
        st = note(c, KEVO_CU(c->d, err, c->d->cuMemcpyDtoH(&v, word, 8)));
    if (!st && v != UINT64_MAX)
        *first = (int64_t)v;
    return st;
}

static enum kevo_status cuda_seal(void *ctx, uint64_t buf, enum kevo_dtype dt, int64_t n,
                                  uint64_t key, struct kevo_buf *err)
{
    const struct kevo_val args[4] = {vptr(buf), vint((int64_t)kevo_dtype_size(dt)),
                                     vint((int64_t)key), vint(n)};
    if (n <= 0 || !key)
        return KEVO_OK;
    return vrun(ctx, HENT_SEAL, stride_grid(ctx, n), args, 4, err);
}

static int64_t first_of(int64_t x, int64_t y) { return x < 0 ? y : y < 0 ? x : x < y ? x : y; }

/* p += q, exactly as kv_part_merge on the device. */
static void part_merge(struct kevo_judge_part *p, const struct kevo_judge_part *q)
{
    p->n_bad += q->n_bad;
    p->first_bad = first_of(p->first_bad, q->first_bad);
    if (q->worst >= 0 && (p->worst < 0 || q->max_abs > p->max_abs ||
                          (q->max_abs == p->max_abs && q->worst < p->worst))) {
        p->max_abs = q->max_abs;
        p->worst = q->worst;
    }
    p->max_rel = q->max_rel > p->max_rel ? q->max_rel : p->max_rel;
    p->sum_d2 += q->sum_d2;
    p->sum_w2 += q->sum_w2;
    p->unw_a += q->unw_a;
    p->unw_a_first = first_of(p->unw_a_first, q->unw_a_first);
    p->unw_b += q->unw_b;
    p->unw_b_first = first_of(p->unw_b_first, q->unw_b_first);
    p->diff_first = first_of(p->diff_first, q->diff_first);
    p->a_varies |= q->a_varies;
    p->ref_lo = q->ref_lo < p->ref_lo ? q->ref_lo : p->ref_lo;
    p->ref_hi = q->ref_hi > p->ref_hi ? q->ref_hi : p->ref_hi;
    p->ref_amax = q->ref_amax > p->ref_amax ? q->ref_amax : p->ref_amax;
}

/* The merged parts as a result (kevo_verify_compare's closing arithmetic). */
static void judge_result(const struct kevo_judge_req *rq, const struct kevo_judge_part *p,
                         struct kevo_judge_res *res)
{
    struct kevo_cmp *m = &res->cmp;

    memset(res, 0, sizeof *res);
    m->n = rq->n;
    m->n_bad = p->n_bad;
    m->first_bad = p->first_bad;
    m->worst = p->worst;
    m->max_abs = p->max_abs;
    m->max_rel = p->max_rel;
    if (kevo_dtype_is_float(rq->dt)) {
        m->ref_norm = sqrt(p->sum_w2);
        m->rel_l2 = m->ref_norm > 0 ? sqrt(p->sum_d2) / m->ref_norm : sqrt(p->sum_d2);
        m->l2_fail = m->ref_norm > 0 && !(m->rel_l2 <= rq->rtol);
    }
    m->pass = m->n_bad == 0 && !m->l2_fail;
    res->unw_a = p->unw_a;
    res->unw_a_first = p->unw_a_first;
    res->unw_b = p->unw_b;
    res->unw_b_first = p->unw_b_first;
    res->diff_first = p->diff_first;
    res->a_constant = rq->n > KEVO_VERIFY_SMALL && !p->a_varies;
    res->ref_spread = p->ref_hi > p->ref_lo && (p->ref_hi - p->ref_lo) > 1e-5 * p->ref_amax;
}

void kevo_backend_cuda_judge_merge(const struct kevo_judge_req *rq, struct kevo_judge_part *parts,
                                   int64_t n_parts, struct kevo_judge_res *res)
{
    for (int64_t b = 1; b < n_parts; b++)   /* in block order: the sums' order is fixed */
        part_merge(&parts[0], &parts[b]);
    judge_result(rq, &parts[0], res);
}

/* Elements [i, i + k) of a and of ref (unsealed) into the host; k <= KEVO_VERIFY_SMALL. */
static enum kevo_status judge_fetch(struct cuda_ctx *c, const struct kevo_judge_req *rq,
                                    int64_t i, int64_t k, uint64_t *a, uint64_t *ref,
                                    struct kevo_buf *err)
{
    const size_t esz = kevo_dtype_size(rq->dt);
    unsigned char *ra = (unsigned char *)ref;
    enum kevo_status st =
        KEVO_CU(c->d, err, c->d->cuMemcpyDtoH(a, rq->a + (uint64_t)i * esz, (size_t)k * esz));

    if (!st)
        st = KEVO_CU(c->d, err,
                     c->d->cuMemcpyDtoH(ref, rq->ref + (uint64_t)i * esz, (size_t)k * esz));
    for (int64_t j = 0; !st && j < k; j++) {
        uint64_t m = kevo_verify_seal_bits(rq->ref_key, (uint64_t)(i + j));
        for (size_t b = 0; b < esz; b++)
            ra[(size_t)j * esz + b] ^= (unsigned char)(m >> (8 * b));
    }
    return note(c, st);
}

/* got/want (at the first bad element, else the worst) and the hashes of small outputs. */
static enum kevo_status judge_values(struct cuda_ctx *c, const struct kevo_judge_req *rq,
                                     struct kevo_judge_res *res, struct kevo_buf *err)
{
    uint64_t a[KEVO_VERIFY_SMALL], ref[KEVO_VERIFY_SMALL];
    const int64_t at = res->cmp.first_bad >= 0 ? res->cmp.first_bad : res->cmp.worst;
    const size_t esz = kevo_dtype_size(rq->dt);
    enum kevo_status st = KEVO_OK;

    if (rq->n <= KEVO_VERIFY_SMALL && rq->n > 0) {
        st = judge_fetch(c, rq, 0, rq->n, a, ref, err);
        res->hash_a = kevo_verify_hash(a, (size_t)rq->n * esz);
        res->hash_ref = kevo_verify_hash(ref, (size_t)rq->n * esz);
        if (!st && at >= 0) {
            res->cmp.got = kevo_dt_load(rq->dt, a, at);
            res->cmp.want = kevo_dt_load(rq->dt, ref, at);
        }
        return st;
    }
    if (rq->n <= 0) {   /* what kevo_verify_hash gives for no bytes */
        res->hash_a = res->hash_ref = kevo_verify_hash(a, 0);
        return KEVO_OK;
    }
    if (at >= 0)
        st = judge_fetch(c, rq, at, 1, a, ref, err);
    if (!st && at >= 0) {
        res->cmp.got = kevo_dt_load(rq->dt, a, 0);
        res->cmp.want = kevo_dt_load(rq->dt, ref, 0);
    }
    return st;
}

static enum kevo_status cuda_judge(void *ctx, const struct kevo_judge_req *rq,
                                   struct kevo_judge_res *res, struct kevo_buf *err)
{
    struct cuda_ctx *c = ctx;
    const int64_t n = rq->n > 0 ? rq->n : 0;
    int64_t g = (n + JUDGE_PER_BLOCK - 1) / JUDGE_PER_BLOCK;
    struct kevo_judge_part *parts = c->vhost;
    enum kevo_status st;

    memset(res, 0, sizeof *res);
    g = g < 1 ? 1 : g > JUDGE_MAX_BLOCKS ? JUDGE_MAX_BLOCKS : g;
    const struct kevo_val args[12] = {
        vptr(rq->a), vptr(rq->b), vptr(rq->ref), vptr(c->vdev), vint(rq->dt), vint(n),
        vint((int64_t)rq->ref_key), vflt(rq->rtol), vflt(rq->atol), vint((int64_t)rq->pe_a),
        vint((int64_t)rq->pe_b), vint((n + g - 1) / g)};
    st = vrun(c, HENT_JUDGE, (uint32_t)g, args, 12, err);
    if (!st)
        st = note(c, KEVO_CU(c->d, err, c->d->cuMemcpyDtoH(parts, c->vdev,
                                                           (size_t)g * sizeof *parts)));
    if (st)
        return st;
    kevo_backend_cuda_judge_merge(rq, parts, g, res);
    return judge_values(c, rq, res, err);
}

/* ---- open and close ---- */

/* ---- page-locked host memory ---- */

static enum kevo_status cuda_host_alloc(void *ctx, size_t bytes, void **out)
{
    struct cuda_ctx *c = ctx;
    struct pinned *b;

    *out = NULL;
    for (b = c->pinned; b; b = b->next) {
        if (!b->in_use && b->bytes >= bytes && b->bytes / 2 <= bytes) {
            b->in_use = 1;
            *out = b->p;
            return KEVO_OK;
        }
    }
    b = kevo_calloc(1, sizeof *b);
    if (!b)
        return KEVO_ERR_NOMEM;
    kevo_buf_reset(&c->msg);
    if (KEVO_CU(c->d, &c->msg, c->d->cuMemHostAlloc(&b->p, bytes ? bytes : 1, 0)) != KEVO_OK) {
        kevo_free(b);
        return KEVO_ERR_NOMEM;           /* the caller falls back to pageable memory */
    }
    b->bytes = bytes;
    b->in_use = 1;
    b->next = c->pinned;
    c->pinned = b;
    *out = b->p;
    return KEVO_OK;
}

/* Unpin blocks that are free, newest first, until at most `keep` bytes stay pinned. */
static void pinned_trim(struct cuda_ctx *c, size_t keep)
{
    size_t total = 0;
    for (struct pinned *b = c->pinned; b; b = b->next)
        total += b->bytes;
    for (struct pinned **pp = &c->pinned; *pp && total > keep;) {
        struct pinned *b = *pp;
        if (b->in_use) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        total -= b->bytes;
        if (!c->lost)
            (void)c->d->cuMemFreeHost(b->p);
        kevo_free(b);
    }
}

static int cuda_host_free(void *ctx, void *p)
{
    struct cuda_ctx *c = ctx;
    int mine = 0;
    for (struct pinned *b = c->pinned; p && b; b = b->next) {
        if (b->p == p) {
            if (!b->in_use)
                KEVO_WARN("backend_cuda: pinned block %p freed twice", p);
            b->in_use = 0;
            mine = 1;        /* ours either way: never hand it to free() */
        }
    }
    if (mine)
        pinned_trim(c, PINNED_KEEP);
    return mine;
}

/* Free everything; every step tolerates a half-opened backend and a lost context. */
static void cuda_destroy(void *ctx)
{
    struct cuda_ctx *c = ctx;

    if (!c)
        return;
    for (struct pinned *b = c->pinned; b; b = b->next)
        b->in_use = 0;
    if (c->ctx) {
        const struct kevo_cudrv *d = c->d;
        int live = d->cuCtxSetCurrent(c->ctx) == CUDA_SUCCESS;
        if (live)
            pinned_trim(c, 0);
        if (live && c->stream && !c->lost)
            (void)d->cuStreamSynchronize(c->stream);
        module_free(c, c->harness);
        kevo_vmm_close(c->vmm, !live || c->lost);   /* flush and vdev are its blocks */
        if (live && c->host_words)
            (void)d->cuMemFreeHost(c->host_words);
        if (live && c->vhost)
            (void)d->cuMemFreeHost(c->vhost);
        if (live && c->ev0)
            (void)d->cuEventDestroy(c->ev0);
        if (live && c->ev1)
            (void)d->cuEventDestroy(c->ev1);
        if (live && c->stream)
            (void)d->cuStreamDestroy(c->stream);
        (void)d->cuDevicePrimaryCtxRelease(c->dev);
    }
    while (c->pinned) {                  /* a lost context took the pinned pages with it */
        struct pinned *b = c->pinned;
        c->pinned = b->next;
        kevo_free(b);
    }
    kevo_buf_free(&c->msg);
    kevo_free(c);
}

/* Context limits: a small device heap and printf FIFO (candidates get no big hidden
 * allocations), and no persisting-L2 carve-out (no line survives the flush). */
static enum kevo_status set_limits(struct cuda_ctx *c, struct kevo_buf *err)
{
    const struct kevo_cudrv *d = c->d;
    CUresult r;

    if (KEVO_CU(d, err, d->cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, MALLOC_HEAP_BYTES)) ||
        KEVO_CU(d, err, d->cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, PRINTF_FIFO_BYTES)))
        return KEVO_ERR_CUDA;
    r = d->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_UNSUPPORTED_LIMIT && r != CUDA_ERROR_NOT_SUPPORTED)
        return KEVO_CU(d, err, r);
    return KEVO_OK;
}

/* The harness's own resources: stream, flush buffer, host-mapped words, events, and the
 * compiled kernels/harness.cu. */
static enum kevo_status harness_init(struct cuda_ctx *c, struct kevo_buf *err)
{
    static const char *const entries[] = {"kevo_harness_block", "kevo_harness_timestamp",
                                           "kevo_harness_gen", "kevo_harness_seal",
                                           "kevo_harness_judge", "kevo_harness_evict",
                                           "kevo_harness_discard"};
    const int n_ent = (int)(sizeof entries / sizeof entries[0]);
    const struct kevo_cudrv *d = c->d;
    const struct kevo_compile_req req = {
        .path = "kernels/harness.cu", .source = kevo_kernel_harness_cu,
        .source_len = sizeof kevo_kernel_harness_cu - 1, .n_entries = n_ent, .entries = entries};
    enum kevo_status st;
    void *cubin = NULL;
    size_t size = 0;

    c->flush_bytes = c->info.l2_bytes > 0 ? 2 * (size_t)c->info.l2_bytes : (size_t)256 << 20;
    st = kevo_vmm_open(d, c->dev, &c->vmm, err);
    if (!st) {
        c->info.alloc_granule = (int64_t)kevo_vmm_granule(c->vmm);
        st = kevo_vmm_alloc(c->vmm, c->flush_bytes, &c->flush, err);
    }
    if (!st)
        st = kevo_vmm_alloc(c->vmm, VDEV_BYTES, &c->vdev, err);
    if (!st)
        st = kevo_vmm_alloc(c->vmm, 256, &c->sink, err);
    if (st)
        return st;
    if (KEVO_CU(d, err, d->cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING)) ||
        KEVO_CU(d, err, d->cuMemHostAlloc(&c->host_words, HOST_WORDS_BYTES,
                                          CU_MEMHOSTALLOC_DEVICEMAP)) ||
        KEVO_CU(d, err, d->cuMemHostGetDevicePointer(&c->dev_words, c->host_words, 0)) ||
        KEVO_CU(d, err, d->cuEventCreate(&c->ev0, CU_EVENT_DEFAULT)) ||
        KEVO_CU(d, err, d->cuEventCreate(&c->ev1, CU_EVENT_DEFAULT)) ||
        KEVO_CU(d, err, d->cuMemHostAlloc(&c->vhost, VDEV_BYTES, 0)) ||
        /* zeros: the evict kernel's XOR is 0, never its key, so it never writes */
        KEVO_CU(d, err, d->cuMemsetD32Async(c->flush, 0, c->flush_bytes / 4, c->stream)) ||
        KEVO_CU(d, err, d->cuStreamSynchronize(c->stream)))
        return KEVO_ERR_CUDA;
    memset(c->host_words, 0, HOST_WORDS_BYTES);
    st = kevo_rtc_compile(&req, c->info.arch, &cubin, &size, err, NULL);
    if (!st)
        st = module_load(c, cubin, n_ent, entries, &c->harness, err);
    kevo_free(cubin);
    if (st)
        kevo_buf_say(err, "\ncuda: the timing harness (kernels/harness.cu) did not build for %s",
             c->info.arch);
    return st;
}

static const struct kevo_backend_ops cuda_ops = {
    .name = "cuda",
    .info = cuda_info,
    .compile = cuda_compile,
    .func_info = cuda_func_info,
    .occupancy = cuda_occupancy,
    .module_free = cuda_module_free,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .fill32 = cuda_fill32,
    .copy = cuda_copy,
    .gen = cuda_gen,
    .gen_check = cuda_gen_check,
    .seal = cuda_seal,
    .judge = cuda_judge,
    .launch = cuda_launch,
    .sync = cuda_sync,
    .time = cuda_time,
    .destroy = cuda_destroy,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
};

/* Driver, device and primary context; KEVO_ERR_NODEV when there is no such device. */
static enum kevo_status open_device(struct cuda_ctx *c, int device, struct kevo_buf *err)
{
    const struct kevo_cudrv *d = c->d;
    enum kevo_status st;
    int count = 0;

    st = KEVO_CU(d, err, d->cuInit(0));
    if (!st)
        st = KEVO_CU(d, err, d->cuDeviceGetCount(&count));
    if (st)
        return st;
    if (device < 0 || device >= count) {
        kevo_buf_say(err, "no CUDA device %d (%d present)", device, count);
        return KEVO_ERR_NODEV;
    }
    st = KEVO_CU(d, err, d->cuDeviceGet(&c->dev, device));
    if (!st)
        st = KEVO_CU(d, err, d->cuDevicePrimaryCtxRetain(&c->ctx, c->dev));
    if (!st)
        st = KEVO_CU(d, err, d->cuCtxSetCurrent(c->ctx));
    return st;
}

enum kevo_status kevo_backend_open_cuda(int device, struct kevo_backend *out, struct kevo_buf *err)
{
    enum kevo_status st;
    struct cuda_ctx *c = NULL;

    out->ops = NULL;
    out->ctx = NULL;
    c = kevo_calloc(1, sizeof *c);
    if (!c)
        return KEVO_ERR_NOMEM;
    kevo_buf_init(&c->msg, 1u << 16);
    st = kevo_cudrv_load(&c->d, err);
    if (!st)
        st = open_device(c, device, err);
    if (!st)
        st = query_device(c, err);
    if (!st)
        st = set_limits(c, err);
    if (!st)
        st = harness_init(c, err);
    if (st) {
        cuda_destroy(c);
        return st;
    }
    out->ops = &cuda_ops;
    out->ctx = c;
    return KEVO_OK;
}

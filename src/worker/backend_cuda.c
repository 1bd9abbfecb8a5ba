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
#include "worker/backend_cuda_int.h"

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



/* ---- messages ---- */

/* For calls with no err buffer: keep the message in c->msg and log it. */
static enum kevo_status report(struct cuda_ctx *c, enum kevo_status st)
{
    if (st)
        KEVO_ERROR("cuda: %s", kevo_buf_str(&c->msg));
    return kevo_cuda_note(c, st);
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
    st = kevo_cuda_note(c, load_status(KEVO_CU(d, log, d->cuModuleLoadData(&m->mod, cubin))));
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
        st = kevo_cuda_note(c, load_status(KEVO_CU(d, log, r)));
        if (!st)
            st = kevo_cuda_note(c, entry_info(c, e, log));
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
    st = kevo_cuda_bind(c, log);
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
    st = kevo_cuda_bind(c, &c->msg);
    if (!st)
        st = kevo_cuda_raise_smem(c, &m->e[entry], (unsigned)smem, &c->msg);
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
    st = kevo_cuda_bind(c, &c->msg);
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

static enum kevo_status cuda_upload(void *ctx, uint64_t dst, const void *src, size_t n)
{
    struct cuda_ctx *c = ctx;
    enum kevo_status st;

    kevo_buf_reset(&c->msg);
    st = kevo_cuda_drain(c, &c->msg);
    /* On the harness stream, then waited for: a synchronous copy from pageable memory may
     * return before its DMA lands, and nothing would order it before the next launch on
     * the (non-blocking) harness stream. */
    if (!st && n)
        st = KEVO_CU(c->d, &c->msg,
                     c->d->cuMemcpyHtoDAsync((CUdeviceptr)dst, src, n, c->stream));
    if (!st && n)
        st = kevo_cuda_drain(c, &c->msg);
    return report(c, st);
}

static enum kevo_status cuda_download(void *ctx, void *dst, uint64_t src, size_t n)
{
    struct cuda_ctx *c = ctx;
    enum kevo_status st;

    kevo_buf_reset(&c->msg);
    st = kevo_cuda_drain(c, &c->msg);
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
    st = kevo_cuda_bind(c, &c->msg);
    if (!st && words)
        st = KEVO_CU(d, &c->msg, d->cuMemsetD32Async((CUdeviceptr)dst, pattern, words, c->stream));
    for (size_t i = 0; !st && i < n % 4; i++) {
        unsigned char byte = (unsigned char)(pattern >> (8 * i));
        st = KEVO_CU(d, &c->msg, d->cuMemsetD8Async((CUdeviceptr)(dst + 4 * words + i), byte, 1,
                                                    c->stream));
    }
    return report(c, st);
}

static enum kevo_status cuda_launch(void *ctx, struct kevo_module *m,
                                    const struct kevo_call *calls, int n_calls,
                                    struct kevo_buf *err)
{
    struct cuda_ctx *c = ctx;
    struct prepared *p = NULL;
    enum kevo_status st = kevo_cuda_bind(c, err);

    if (!st)
        st = kevo_cuda_prepare(c, m, calls, n_calls, &p, err);
    for (int i = 0; !st && i < n_calls; i++)
        st = kevo_cuda_enqueue(c, &p[i], err);
    kevo_free(p);
    return st;
}

static enum kevo_status cuda_sync(void *ctx, struct kevo_buf *err)
{
    return kevo_cuda_drain(ctx, err);
}

/* ---- copies and verification on the device (kernels/harness.cu) ---- */

static enum kevo_status cuda_copy(void *ctx, uint64_t dst, uint64_t src, size_t n)
{
    struct cuda_ctx *c = ctx;
    enum kevo_status st;

    kevo_buf_reset(&c->msg);
    st = kevo_cuda_bind(c, &c->msg);
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

/* Launch harness entry `entry` (grid x V_THREADS) and wait for it. */
static enum kevo_status vrun(struct cuda_ctx *c, int entry, uint32_t grid,
                             const struct kevo_val *args, int n_args, struct kevo_buf *err)
{
    struct kevo_call call = {.entry = entry, .grid = {grid, 1, 1}, .block = {V_THREADS, 1, 1},
                             .n_args = n_args};
    struct prepared p;
    enum kevo_status st = kevo_cuda_bind(c, err);

    memcpy(call.args, args, (size_t)n_args * sizeof *args);
    if (!st)
        st = kevo_cuda_prepare_one(c, c->harness, &call, 0, &p, err);
    if (!st)
        st = kevo_cuda_enqueue(c, &p, err);
    if (!st)
        st = kevo_cuda_note(c, KEVO_CU(c->d, err, c->d->cuStreamSynchronize(c->stream)));
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
    return vrun(c, HENT_GEN, kevo_cuda_stride_grid(c, (n + 1) / 2), args, 11, err);
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
    st = kevo_cuda_bind(c, err);
    if (!st)   /* ~0: nothing found yet; the kernel lowers it with atomicMin */
        st = KEVO_CU(c->d, err, c->d->cuMemsetD32Async(word, 0xFFFFFFFFu, 2, c->stream));
    if (!st)
        st = gen_run(c, 0, buf, g, seed, stream, n, err);
    if (!st)
        st = kevo_cuda_note(c, KEVO_CU(c->d, err, c->d->cuMemcpyDtoH(&v, word, 8)));
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
    return vrun(ctx, HENT_SEAL, kevo_cuda_stride_grid(ctx, n), args, 4, err);
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
    return kevo_cuda_note(c, st);
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
        st = kevo_cuda_note(c, KEVO_CU(c->d, err, c->d->cuMemcpyDtoH(parts, c->vdev,
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
        kevo_cupti_close(c->cupti);   /* before the context goes: it flushes */
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
                                           "kevo_harness_discard", "kevo_harness_icache"};
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
    .time = kevo_cuda_time,
    .profile = kevo_cuda_profile,
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
    const char *warm = getenv("KEVO_WARM_ICACHE");
    c->warm_icache = warm && strcmp(warm, "1") == 0;
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
    kevo_cuda_cupti_open(c, device);
    out->ops = &cuda_ops;
    out->ctx = c;
    return KEVO_OK;
}

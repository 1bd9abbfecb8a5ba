/*
 * backend_cuda_launch - the CUDA backend's launch path: binding the context, marshalling
 * arguments at the width each kernel declares, checking a plan against the device's
 * limits before anything is enqueued, and enqueueing fills, evicts and kernels on the
 * harness stream. Shared by the backend's ops (backend_cuda.c) and its timed samples and
 * counters (backend_cuda_time.c); see backend_cuda_int.h.
 */
#include "worker/backend_cuda_int.h"

#include "base/log.h"
#include "base/mem.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Note a status: a sticky fault marks the context lost. Returns st. */
enum kevo_status kevo_cuda_note(struct cuda_ctx *c, enum kevo_status st)
{
    if (st == KEVO_ERR_DEVICE)
        c->lost = 1;
    return st;
}

/* Make the context current on this thread; KEVO_ERR_DEVICE once it is lost. */
enum kevo_status kevo_cuda_bind(struct cuda_ctx *c, struct kevo_buf *err)
{
    if (c->lost) {
        kevo_buf_say(err, "the CUDA context was lost to an earlier device fault");
        return KEVO_ERR_DEVICE;
    }
    return kevo_cuda_note(c, KEVO_CU(c->d, err, c->d->cuCtxSetCurrent(c->ctx)));
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
    case KEVO_VAL_TMAP:   /* the bytes come from the encoder (kevo_cuda_prepare_one) */
        if (param_size == KEVO_TMAP_BYTES)
            return KEVO_OK;
        kevo_buf_say(err, "kernel '%s': argument %d is a tensor map (%d bytes, "
                     "const __grid_constant__ CUtensorMap) but the parameter is %d bytes",
                     kernel, index, KEVO_TMAP_BYTES, param_size);
        return KEVO_ERR_LAUNCH;
    }
    kevo_buf_say(err, "kernel '%s': argument %d has an unknown kind %d", kernel, index, (int)v->kind);
    return KEVO_ERR_LAUNCH;
}


/* Let e take smem bytes of dynamic shared memory (the opt-in above 48 KiB). */
enum kevo_status kevo_cuda_raise_smem(struct cuda_ctx *c, struct cuda_entry *e, unsigned smem,
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
    return kevo_cuda_note(c, st);
}


/* Copies are synchronous with respect to the harness stream: the stream is drained
 * first, since a non-blocking stream does not order against the copy's stream. */
enum kevo_status kevo_cuda_drain(struct cuda_ctx *c, struct kevo_buf *err)
{
    enum kevo_status st = kevo_cuda_bind(c, err);

    if (!st)
        st = kevo_cuda_note(c, KEVO_CU(c->d, err, c->d->cuStreamSynchronize(c->stream)));
    return st;
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


/* The harness's evict kernel over [buf, buf + bytes) (its sink: c->sink), then its
 * discard kernel over the same lines: cold, clean and then invalid, as under ncu's cache
 * control (bench/results/2026-11-25-h100-ncu-fidelity.json: with the evict alone, L2 full
 * of clean lines, a latency-bound softmax read +3.4 % against ncu; with the discard +1.7 %). */
static enum kevo_status prepare_evict(struct cuda_ctx *c, uint64_t buf, uint64_t bytes, int i,
                                      struct prepared *p, struct kevo_buf *err)
{
    struct kevo_call k = {.entry = HENT_EVICT, .block = {V_THREADS, 1, 1}, .n_args = 4};
    k.grid[0] = kevo_cuda_stride_grid(c, (int64_t)(bytes / 16));
    k.grid[1] = k.grid[2] = 1;
    k.args[0] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = buf};
    k.args[1] = (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I64,
                                  .i = (int64_t)(bytes / 16)};
    k.args[2] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = (uint64_t)c->sink};
    k.args[3] = (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = EVICT_KEY};
    enum kevo_status st = kevo_cuda_prepare_one(c, c->harness, &k, i, p, err);
    if (st)
        return st;
    if (!c->warm_icache) {
        float a = 0.999f, b = 0.5f, key = -1.0f;   /* x stays positive: never key */
        p->icache = c->harness->e[HENT_ICACHE].f;
        p->icache_grid = (uint32_t)(c->info.n_sms > 0 ? c->info.n_sms : 1);
        p->argv3[0] = (uint64_t)c->sink;
        memcpy(&p->argv3[1], &a, sizeof a);
        memcpy(&p->argv3[2], &b, sizeof b);
        memcpy(&p->argv3[3], &key, sizeof key);
        for (int j = 0; j < 4; j++)
            p->argp3[j] = &p->argv3[j];
    }
    p->discard = c->harness->e[HENT_DISCARD].f;
    p->discard_grid = kevo_cuda_stride_grid(c, (int64_t)(bytes / 128));
    p->argv2[0] = buf;
    p->argv2[1] = bytes / 128;
    p->argp2[0] = &p->argv2[0];
    p->argp2[1] = &p->argv2[1];
    return KEVO_OK;
}

static CUtensorMapDataType tmap_dtype(enum kevo_dtype t)
{
    switch (t) {
    case KEVO_F64:  return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case KEVO_F32:  return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case KEVO_F16:  return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case KEVO_BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case KEVO_I64:  return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case KEVO_I32:  return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case KEVO_I16:  return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    default:        return CU_TENSOR_MAP_DATA_TYPE_UINT8;   /* 1-byte types: the bytes */
    }
}

/* The 128 bytes of tensor map t of the buffer at ptr into out: zeros for rank 0 (a tensor
 * the TMA unit cannot describe), else the driver's encoding; its refusal is the launch's. */
static enum kevo_status encode_tmap(struct cuda_ctx *c, const struct kevo_tmap_spec *t,
                                    uint64_t ptr, const char *kernel, int a, uint64_t out[16],
                                    struct kevo_buf *err)
{
    static const CUtensorMapSwizzle sw[] = { CU_TENSOR_MAP_SWIZZLE_NONE,
        CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B };
    cuuint32_t one[KEVO_TMAP_MAX_RANK] = { 1, 1, 1, 1, 1 };
    CUtensorMap m;
    CUresult r;

    memset(out, 0, KEVO_TMAP_BYTES);
    if (t->rank == 0)
        return KEVO_OK;
    r = c->d->cuTensorMapEncodeTiled(&m, tmap_dtype(t->dtype), (cuuint32_t)t->rank,
                                     (void *)(uintptr_t)ptr, t->dims, t->strides, t->box,
                                     one, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                     sw[t->swizzle == 128 ? 3 : t->swizzle / 32],
                                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        kevo_buf_say(err, "kernel '%s': argument %d: the driver refused the tensor map "
                     "(cuTensorMapEncodeTiled: error %d)", kernel, a, (int)r);
        return KEVO_ERR_LAUNCH;
    }
    memcpy(out, &m, KEVO_TMAP_BYTES);
    return KEVO_OK;
}

/* Check and marshal call i of m into p (which must not move afterwards: argp points
 * into it). */
enum kevo_status kevo_cuda_prepare_one(struct cuda_ctx *c, struct kevo_module *m,
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
        const struct kevo_val *v = &call->args[a];
        st = kevo_backend_cuda_marshal_arg(v, e->fi.param_size[a], e->name, a, &p->argv[a], err);
        if (!st && v->kind == KEVO_VAL_TMAP && (v->i < 0 || v->i >= call->n_tm)) {
            kevo_buf_say(err, "kernel '%s': argument %d names no tensor map", e->name, a);
            st = KEVO_ERR_LAUNCH;
        } else if (!st && v->kind == KEVO_VAL_TMAP) {
            st = encode_tmap(c, &call->tm[v->i], v->ptr, e->name, a, p->tmap[v->i], err);
        }
        if (st)
            return st;
        p->argp[a] = v->kind == KEVO_VAL_TMAP ? (void *)p->tmap[v->i] : (void *)&p->argv[a];
    }
    st = kevo_cuda_raise_smem(c, e, call->smem, err);
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
enum kevo_status kevo_cuda_prepare(struct cuda_ctx *c, struct kevo_module *m,
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
        st = kevo_cuda_prepare_one(c, m, &calls[i], i, &p[i], err);
    if (st) {
        kevo_free(p);
        return st;
    }
    *out = p;
    return KEVO_OK;
}

enum kevo_status kevo_cuda_enqueue(struct cuda_ctx *c, const struct prepared *p,
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
        return kevo_cuda_note(c, st);
    }
    if (p->icache) {
        st = KEVO_CU_LAUNCH(d, err, d->cuLaunchKernel(p->icache, p->icache_grid, 1, 1,
                                                      ICACHE_THREADS, 1, 1, 0, c->stream,
                                                      (void **)p->argp3, NULL));
        c->kseq += !st;
        if (st)
            return kevo_cuda_note(c, st);
    }
    st = KEVO_CU_LAUNCH(
        d, err, d->cuLaunchKernel(p->f, p->grid[0], p->grid[1], p->grid[2], p->block[0],
                                  p->block[1], p->block[2], p->smem, c->stream,
                                  (void **)p->argp, NULL));
    if (st && err && err->len > before)
        kevo_buf_say(err, " (kernel '%s')", p->name);
    c->kseq += !st;
    if (!st && p->discard)
        st = KEVO_CU_LAUNCH(d, err, d->cuLaunchKernel(p->discard, p->discard_grid, 1, 1, V_THREADS,
                                                      1, 1, 0, c->stream, (void **)p->argp2, NULL));
    c->kseq += !st && p->discard;
    return kevo_cuda_note(c, st);
}


/* Enough blocks of V_THREADS for `items` grid-stride items, at most 16 per SM. */
uint32_t kevo_cuda_stride_grid(const struct cuda_ctx *c, int64_t items)
{
    int64_t blocks = (items + V_THREADS - 1) / V_THREADS;
    int64_t cap = 16 * (int64_t)(c->info.n_sms > 0 ? c->info.n_sms : 1);
    blocks = blocks < cap ? blocks : cap;
    return blocks < 1 ? 1 : (uint32_t)blocks;
}


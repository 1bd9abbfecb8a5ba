/*
 * fake_backend - an in-process test double of struct kevo_backend_ops (src/backend.h), so
 * eval can be driven end to end without a device.
 *
 * "Device memory" is host memory: alloc returns 256-byte aligned addresses, and every
 * upload/download/fill is checked to lie inside one live allocation (a harness bug that
 * strays outside its own buffers fails the call with KEVO_ERR_INVALID instead of silently
 * corrupting the test). "Kernels" are C functions registered by name; compile resolves the
 * module's entries against the registry (a source containing "#error" fails to compile).
 * A kernel returns 0, or a status: KEVO_ERR_LAUNCH is returned by launch at once, anything
 * else (KEVO_ERR_DEVICE, KEVO_ERR_TIMEOUT) is reported by the next sync, like a sticky
 * fault. time() runs the plan `batch` times and reports the registered per-call seconds
 * (the real elapsed time when 0). The verification ops (gen, gen_check, seal, judge) run
 * verify.c's host functions on the "device" memory in place, as backend_cpu does.
 *
 * Header-only (static functions): include it in one test program.
 */
#ifndef KEVO_FAKE_BACKEND_H
#define KEVO_FAKE_BACKEND_H

#include "worker/backend.h"
#include "base/mem.h"
#include "base/clock.h"

#include <stdio.h>
#include <string.h>

typedef int (*fake_kernel_fn)(const struct kevo_val *args, int n, void *user);

#define FAKE_MAX_KERNELS 64
#define FAKE_MAX_ALLOCS 4096

struct fake_kernel {
    const char *name;
    fake_kernel_fn fn;
    void *user;
    double seconds;              /* per call for time(); 0 = measure */
    int n_params;
};

struct fake_alloc {
    uint64_t addr;
    size_t bytes;
    void *raw;
};

struct fake {
    struct fake_kernel k[FAKE_MAX_KERNELS];
    int n_k;
    struct fake_alloc a[FAKE_MAX_ALLOCS];
    int n_a;
    int n_modules;               /* live */
    int n_compiles, n_launches, n_time_calls, n_frees;
    int max_threads;
    int pending;                 /* status a kernel raised, reported by sync */
    int stray;                   /* accesses outside any allocation (harness bugs) */
    int64_t last_define;         /* value of the first -D of the last compile */
    int no_occupancy;
    int fail_copy;               /* downloads fail as after a sticky fault */
};

struct fake_module {
    int n;
    int kidx[FAKE_MAX_KERNELS];
};

static struct fake_kernel *fake_find(struct fake *f, const char *name)
{
    for (int i = 0; i < f->n_k; i++) {
        if (!strcmp(f->k[i].name, name))
            return &f->k[i];
    }
    return NULL;
}

static void fake_register(struct fake *f, const char *name, fake_kernel_fn fn, void *user,
                          double seconds)
{
    struct fake_kernel *k = fake_find(f, name);
    if (!k)
        k = &f->k[f->n_k++];
    k->name = name;
    k->fn = fn;
    k->user = user;
    k->seconds = seconds;
    k->n_params = 5;
}

static struct fake_alloc *fake_owner(struct fake *f, uint64_t p, size_t n)
{
    for (int i = 0; i < f->n_a; i++) {
        struct fake_alloc *a = &f->a[i];
        if (p >= a->addr && n <= a->bytes && p - a->addr <= a->bytes - n)
            return a;
    }
    f->stray++;
    return NULL;
}

static enum kevo_status fake_info(void *ctx, struct kevo_device_info *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "fake device");
    snprintf(out->arch, sizeof out->arch, "fake");
    out->n_sms = 4;
    out->l2_bytes = 256 << 10;
    out->mem_bytes = 1ll << 30;
    out->max_threads_per_block = 1024;
    out->clock_mhz = 1500;
    return KEVO_OK;
}

static enum kevo_status fake_compile(void *ctx, const struct kevo_compile_req *req,
                                     struct kevo_module **out, struct kevo_buf *log)
{
    struct fake *f = ctx;
    struct fake_module *m;
    enum kevo_status st = KEVO_OK;

    *out = NULL;
    f->n_compiles++;
    f->last_define = req->n_defines ? req->define_values[0] : -1;
    if (strstr(req->source, "#error")) {
        st = kevo_buf_addf(log, "%s:1: error: #error directive\n", req->path);
        return st ? st : KEVO_ERR_COMPILE;
    }
    m = kevo_calloc(1, sizeof *m);
    if (!m)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < req->n_entries; i++) {
        struct fake_kernel *k = fake_find(f, req->entries[i]);
        if (!k) {
            kevo_free(m);
            st = kevo_buf_addf(log, "%s: error: no kernel named %s\n", req->path,
                               req->entries[i]);
            return st ? st : KEVO_ERR_COMPILE;
        }
        m->kidx[m->n++] = (int)(k - f->k);
    }
    st = kevo_buf_adds(log, "fake: compiled\n");
    if (st) {
        kevo_free(m);
        return st;
    }
    f->n_modules++;
    *out = (struct kevo_module *)m;
    return KEVO_OK;
}

static enum kevo_status fake_func_info(void *ctx, struct kevo_module *mod, int entry,
                                       struct kevo_func_info *out)
{
    struct fake *f = ctx;
    struct fake_module *m = (struct fake_module *)mod;
    memset(out, 0, sizeof *out);
    if (entry < 0 || entry >= m->n)
        return KEVO_ERR_NOTFOUND;
    out->n_params = f->k[m->kidx[entry]].n_params;
    out->num_regs = 32;
    out->static_smem = 0;
    out->local_bytes = 0;
    out->max_threads_per_block = 1024;
    return KEVO_OK;
}

static enum kevo_status fake_occupancy(void *ctx, struct kevo_module *m, int entry,
                                       int block_threads, int smem, int *out_blocks)
{
    struct fake *f = ctx;
    (void)m;
    (void)entry;
    (void)smem;
    *out_blocks = 0;
    if (f->no_occupancy)
        return KEVO_ERR_UNSUPPORTED;
    *out_blocks = block_threads > 0 ? 2048 / block_threads : 0;
    return KEVO_OK;
}

static void fake_module_free(void *ctx, struct kevo_module *m)
{
    struct fake *f = ctx;
    if (!m)
        return;
    f->n_modules--;
    kevo_free(m);
}

static enum kevo_status fake_alloc_fn(void *ctx, size_t bytes, uint64_t *out)
{
    struct fake *f = ctx;
    void *raw;
    *out = 0;
    if (f->n_a >= FAKE_MAX_ALLOCS)
        return KEVO_ERR_NOMEM;
    raw = kevo_malloc(bytes + 256);
    if (!raw)
        return KEVO_ERR_NOMEM;
    f->a[f->n_a].raw = raw;
    f->a[f->n_a].addr = ((uint64_t)(uintptr_t)raw + 255) & ~(uint64_t)255;
    f->a[f->n_a].bytes = bytes;
    *out = f->a[f->n_a++].addr;
    return KEVO_OK;
}

static void fake_free_fn(void *ctx, uint64_t addr)
{
    struct fake *f = ctx;
    if (!addr)
        return;
    for (int i = 0; i < f->n_a; i++) {
        if (f->a[i].addr == addr) {
            kevo_free(f->a[i].raw);
            f->a[i] = f->a[--f->n_a];
            f->n_frees++;
            return;
        }
    }
    f->stray++;
}

static enum kevo_status fake_upload(void *ctx, uint64_t dst, const void *src, size_t n)
{
    if (!fake_owner(ctx, dst, n))
        return KEVO_ERR_INVALID;
    memcpy((void *)(uintptr_t)dst, src, n);
    return KEVO_OK;
}

static enum kevo_status fake_download(void *ctx, void *dst, uint64_t src, size_t n)
{
    if (((struct fake *)ctx)->fail_copy)
        return KEVO_ERR_DEVICE;
    if (!fake_owner(ctx, src, n))
        return KEVO_ERR_INVALID;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return KEVO_OK;
}

static enum kevo_status fake_fill32(void *ctx, uint64_t dst, uint32_t pattern, size_t n)
{
    unsigned char *p = (unsigned char *)(uintptr_t)dst;
    if (!fake_owner(ctx, dst, n))
        return KEVO_ERR_INVALID;
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(pattern >> (8 * (i & 3)));
    return KEVO_OK;
}

static enum kevo_status fake_copy(void *ctx, uint64_t dst, uint64_t src, size_t n)
{
    if (((struct fake *)ctx)->fail_copy)
        return KEVO_ERR_DEVICE;
    if (!fake_owner(ctx, dst, n) || !fake_owner(ctx, src, n))
        return KEVO_ERR_INVALID;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return KEVO_OK;
}

/* n elements of dt at p inside one live allocation (and the context alive)? */
static enum kevo_status fake_elems(void *ctx, uint64_t p, enum kevo_dtype dt, int64_t n)
{
    if (((struct fake *)ctx)->fail_copy)
        return KEVO_ERR_DEVICE;
    if (n < 0 || !fake_owner(ctx, p, (size_t)n * kevo_dtype_size(dt)))
        return KEVO_ERR_INVALID;
    return KEVO_OK;
}

static enum kevo_status fake_gen(void *ctx, uint64_t dst, const struct kevo_gen *g, uint64_t seed,
                                 uint64_t stream, int64_t n, struct kevo_buf *err)
{
    enum kevo_status st = fake_elems(ctx, dst, g->dtype, n);
    (void)err;
    if (!st)
        kevo_verify_generate(g, seed, stream, (void *)(uintptr_t)dst, n);
    return st;
}

static enum kevo_status fake_gen_check(void *ctx, uint64_t buf, const struct kevo_gen *g,
                                       uint64_t seed, uint64_t stream, int64_t n, int64_t *first,
                                       struct kevo_buf *err)
{
    enum kevo_status st = fake_elems(ctx, buf, g->dtype, n);
    (void)err;
    *first = st ? -1 : kevo_verify_gen_check(g, seed, stream, (const void *)(uintptr_t)buf, n);
    return st;
}

static enum kevo_status fake_seal(void *ctx, uint64_t buf, enum kevo_dtype dt, int64_t n,
                                  uint64_t key, struct kevo_buf *err)
{
    enum kevo_status st = fake_elems(ctx, buf, dt, n);
    (void)err;
    if (!st)
        kevo_verify_seal(dt, (void *)(uintptr_t)buf, n, key);
    return st;
}

static enum kevo_status fake_judge(void *ctx, const struct kevo_judge_req *rq,
                                   struct kevo_judge_res *res, struct kevo_buf *err)
{
    enum kevo_status st = fake_elems(ctx, rq->a, rq->dt, rq->n);
    (void)err;
    if (!st && rq->b)
        st = fake_elems(ctx, rq->b, rq->dt, rq->n);
    if (!st)
        st = fake_elems(ctx, rq->ref, rq->dt, rq->n);
    if (!st)
        kevo_verify_judge_sealed(rq, (const void *)(uintptr_t)rq->a,
                                 rq->b ? (const void *)(uintptr_t)rq->b : NULL,
                                 (void *)(uintptr_t)rq->ref, res);
    return st;
}

static enum kevo_status fake_launch(void *ctx, struct kevo_module *mod,
                                    const struct kevo_call *calls, int n_calls,
                                    struct kevo_buf *err)
{
    struct fake *f = ctx;
    struct fake_module *m = (struct fake_module *)mod;
    enum kevo_status st;

    for (int i = 0; i < n_calls; i++) {
        const struct kevo_call *c = &calls[i];
        uint64_t threads = (uint64_t)c->block[0] * c->block[1] * c->block[2];
        if (c->entry == KEVO_ENTRY_FILL) {   /* a re-poison inside a timed batch */
            st = fake_fill32(ctx, c->args[0].ptr, (uint32_t)c->args[2].i, (size_t)c->args[1].i);
            if (st)
                return st;
            continue;
        }
        if (c->entry < 0 || c->entry >= m->n)
            return KEVO_ERR_INVALID;
        if (threads > (uint64_t)f->max_threads || !c->grid[0] || !threads) {
            st = kevo_buf_addf(err, "block of %llu threads is more than %d",
                               (unsigned long long)threads, f->max_threads);
            return st ? st : KEVO_ERR_LAUNCH;
        }
        struct fake_kernel *k = &f->k[m->kidx[c->entry]];
        f->n_launches++;
        int rc = k->fn(c->args, c->n_args, k->user);
        if (rc == KEVO_ERR_LAUNCH) {
            st = kevo_buf_adds(err, "fake: launch refused by the kernel");
            return st ? st : KEVO_ERR_LAUNCH;
        }
        if (rc && !f->pending)
            f->pending = rc;
    }
    return KEVO_OK;
}

static enum kevo_status fake_sync(void *ctx, struct kevo_buf *err)
{
    struct fake *f = ctx;
    enum kevo_status st = (enum kevo_status)f->pending;
    if (st && kevo_buf_adds(err, "fake: illegal address"))
        return KEVO_ERR_NOMEM;
    return st;
}

static enum kevo_status fake_time(void *ctx, struct kevo_module *mod,
                                  const struct kevo_call *calls, int n_calls, int batch,
                                  int flush, struct kevo_sample *out, struct kevo_buf *err)
{
    struct fake *f = ctx;
    struct fake_module *m = (struct fake_module *)mod;
    double t0 = kevo_now(), per = 0.0;
    enum kevo_status st = KEVO_OK;

    (void)flush;
    f->n_time_calls++;
    for (int b = 0; b < batch && !st; b++)
        st = fake_launch(ctx, mod, calls, n_calls, err);
    if (!st)
        st = fake_sync(ctx, err);
    int kernels = 0;
    for (int i = 0; i < n_calls; i++)
        if (calls[i].entry != KEVO_ENTRY_FILL) {
            per += f->k[m->kidx[calls[i].entry]].seconds;
            kernels++;
        }
    /* fills cost nothing on the fake, so the batch's difference is the kernels' time */
    out->seconds = per > 0 ? per * batch : kernels ? kevo_now() - t0 : 0.0;
    out->sm_clock_mhz = 1500;
    return st;
}

static void fake_destroy(void *ctx)
{
    struct fake *f = ctx;
    for (int i = 0; i < f->n_a; i++)
        kevo_free(f->a[i].raw);
    f->n_a = 0;
}

static const struct kevo_backend_ops fake_ops = {
    .name = "fake",
    .info = fake_info,
    .compile = fake_compile,
    .func_info = fake_func_info,
    .occupancy = fake_occupancy,
    .module_free = fake_module_free,
    .alloc = fake_alloc_fn,
    .free = fake_free_fn,
    .upload = fake_upload,
    .download = fake_download,
    .fill32 = fake_fill32,
    .copy = fake_copy,
    .gen = fake_gen,
    .gen_check = fake_gen_check,
    .seal = fake_seal,
    .judge = fake_judge,
    .launch = fake_launch,
    .sync = fake_sync,
    .time = fake_time,
    .destroy = fake_destroy,
};

static void fake_open(struct fake *f, struct kevo_backend *b)
{
    memset(f, 0, sizeof *f);
    f->max_threads = 1024;
    b->ops = &fake_ops;
    b->ctx = f;
}

/* Tensor and scalar arguments inside a fake kernel. */
#define FAKE_PTR(args, k, type) ((type *)(uintptr_t)(args)[k].ptr)
#define FAKE_INT(args, k) ((args)[k].i)
#define FAKE_FLT(args, k) ((args)[k].f)

#endif

/*
 * calibrate - measure the device's speed of light through the backend vtable only (so the
 * same code measures a GPU and the CPU): achievable bandwidth from read, write and copy
 * kernels, the fp32 FMA peak, the tensor-core peaks (fp16, bf16, tf32 via mma.sync on
 * sm_80+) and the launch floor; the result is cached per device. core/sol.h turns the
 * figures into a floor. The kernels are kernels/calibrate.cu and kernels/calibrate_cpu.c,
 * embedded at build time.
 *
 * Invariant: the floor must stay a lower bound on any honest kernel's time, since a time
 * below it is judged `implausible`. So a peak with a datasheet figure uses
 * max(measured, datasheet): mma.sync cannot reach Hopper's wgmma peak, and a candidate
 * that does must not be flagged.
 *
 * Thread-safety: the backend is single-threaded, and so is a calibration.
 */
#include "worker/calibrate.h"

#include "core/sol.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calibrate.cu.inc"      /* kevo_kernel_calibrate_cu[] */
#include "calibrate_cpu.c.inc"   /* kevo_kernel_calibrate_cpu_c[] */

#define SOL_FORMAT 2             /* bump when the cache layout or the method changes */

/* FLOP-count constants, passed to the kernels as -D defines so both sides agree. */
#define CAL_FMA_CHAINS 8
#define CAL_FMA_UNROLL 32
#define CAL_MMA_ACC 8
#define CAL_CPU_ACC 192

/* Launch plans. GPU: 256-thread blocks, 8 per SM (2048 threads: a full SM) for the
 * streaming and FMA kernels, 4 per SM (32 warps) for mma. Sizes give ~1-10 ms a run. */
#define GPU_BLOCK 256
#define GPU_BLOCKS_PER_SM 8
#define GPU_MMA_BLOCKS_PER_SM 4
#define GPU_FMA_ITERS 4096
#define GPU_MMA_ITERS 16384
#define GPU_BUF_MAX ((size_t)1 << 30)
#define CPU_ITEMS_PER_CORE 4
#define CPU_FMA_ITERS (1L << 21)
#define CPU_BUF_MAX ((size_t)256 << 20)
#define BUF_MIN ((size_t)16 << 20)
/* The launch-floor batch stays under the 24 launches backend_cuda queues behind its
 * blocking kernel, so it times the GPU's back-to-back rate, never host launch gaps: the
 * smallest per-launch time any protocol can show, hence a safe lower bound. */
#define LAUNCH_BATCH 20
#define GPU_SAMPLES 11
#define CPU_SAMPLES 9
/* implausible only below the floor by more than this (see result_json) */
#define SOL_MARGIN_GPU 0.03
#define SOL_MARGIN_CPU 0.25

enum cal_entry {
    E_READ = 0, E_WRITE, E_COPY, E_EMPTY, E_FMA,   /* both backends */
    E_MMA_FP16, E_MMA_BF16, E_MMA_TF32,            /* CUDA only */
    E_COUNT
};
#define CPU_N_ENTRIES (E_FMA + 1)
static const char *const entry_names[E_COUNT] = {
    "bw_read", "bw_write", "bw_copy", "empty", "fma_fp32", "mma_fp16", "mma_bf16", "mma_tf32",
};


/*
 * Datasheet throughput, dense FLOP per clock per SM, by compute capability, in enum
 * kevo_unit order (fp32, fp64, tf32, fp16, bf16, fp8). Peak = this x SMs x nominal max clock.
 * fp64 is the tensor-core (DMMA) rate: the fastest way a kernel can do fp64 math, so the
 * floor stays a lower bound. 0 = the unit does not exist there.
 */
struct spec_row {
    int cc_major, cc_minor;
    double per_clk[KEVO_UNIT_COUNT];
};
static const struct spec_row spec_rows[] = {
    /* A100: 19.5 TF fp32 and fp64 tensor, 156 TF tf32, 312 TF fp16/bf16; 108 SMs, 1410 MHz */
    { 8, 0, { 128, 128, 1024, 2048, 2048, 0 } },
    /* H100/H200: 66.9 TF fp32, 66.9 TF fp64 tensor, 495/989/1979 TF tf32/16-bit/fp8 */
    { 9, 0, { 256, 256, 2048, 4096, 4096, 8192 } },
};

/* One calibration run's state: the backend, the compiled module, the buffers. */
struct cal {
    struct kevo_backend *b;
    const struct kevo_device_info *info;
    int cuda;                 /* 1: kernels/calibrate.cu; 0: kernels/calibrate_cpu.c */
    struct kevo_module *mod;
    uint64_t x, y, sink;      /* two streaming buffers, one small result buffer */
    size_t buf_bytes, sink_bytes;
    int n_samples;
    struct kevo_buf *err;
};

/* ---- small helpers ---- */

/* Forget what a failed attempt appended, once a retry has succeeded. */
static void err_truncate(struct kevo_buf *err, size_t len)
{
    if (err->data && len < err->len) {
        err->len = len;
        err->data[len] = '\0';
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v); 0 for n == 0. */
static double median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}


/* ---- launch plans ---- */

static void call_init(struct kevo_call *k, enum cal_entry e, uint32_t grid, uint32_t block)
{
    memset(k, 0, sizeof *k);
    k->entry = (int)e;
    k->grid[0] = grid;
    k->grid[1] = k->grid[2] = 1;
    k->block[0] = block;
    k->block[1] = k->block[2] = 1;
}

static void call_ptr(struct kevo_call *k, uint64_t addr)
{
    struct kevo_val *v = &k->args[k->n_args++];
    v->kind = KEVO_VAL_PTR;
    v->dtype = KEVO_F32;
    v->ptr = addr;
}

static void call_int(struct kevo_call *k, int64_t i)
{
    struct kevo_val *v = &k->args[k->n_args++];
    v->kind = KEVO_VAL_INT;
    v->dtype = KEVO_I64;
    v->i = i;
}

static int64_t n_sms(const struct cal *c)
{
    return c->info->n_sms > 0 ? c->info->n_sms : 1;
}

/* Blocks for a grid of `per_sm` blocks on every SM. */
static uint32_t gpu_grid(const struct cal *c, int per_sm)
{
    int64_t g = n_sms(c) * per_sm;
    return g > INT32_MAX ? INT32_MAX : (uint32_t)g;
}

static int64_t cpu_items(const struct cal *c)
{
    return n_sms(c) * CPU_ITEMS_PER_CORE;
}

/* ---- compile, buffers ---- */

static enum kevo_status cal_compile(struct cal *c)
{
    static const char *const cuda_defs[] = { "CAL_FMA_CHAINS", "CAL_FMA_UNROLL", "CAL_MMA_ACC" };
    static const int64_t cuda_vals[] = { CAL_FMA_CHAINS, CAL_FMA_UNROLL, CAL_MMA_ACC };
    static const char *const cpu_defs[] = { "CAL_CPU_ACC" };
    static const int64_t cpu_vals[] = { CAL_CPU_ACC };
    /* OpenMP is asked for first; a compiler without it still builds the serial version. */
    static const char *const cpu_flags[] = { "-O3", "-march=native", "-fopenmp" };
    struct kevo_compile_req req;
    struct kevo_buf log;
    enum kevo_status st;

    memset(&req, 0, sizeof req);
    req.entries = entry_names;
    if (c->cuda) {
        req.path = "kernels/calibrate.cu";
        req.source = kevo_kernel_calibrate_cu;
        req.source_len = sizeof kevo_kernel_calibrate_cu - 1;
        req.n_defines = 3;
        req.define_names = cuda_defs;
        req.define_values = cuda_vals;
        req.n_entries = E_COUNT;
    } else {
        req.path = "kernels/calibrate_cpu.c";
        req.source = kevo_kernel_calibrate_cpu_c;
        req.source_len = sizeof kevo_kernel_calibrate_cpu_c - 1;
        req.n_defines = 1;
        req.define_names = cpu_defs;
        req.define_values = cpu_vals;
        req.n_flags = 3;
        req.flags = cpu_flags;
        req.n_entries = CPU_N_ENTRIES;
    }
    kevo_buf_init(&log, 1u << 20);
    st = c->b->ops->compile(c->b->ctx, &req, &c->mod, &log);
    if (st == KEVO_ERR_COMPILE && !c->cuda) {
        KEVO_WARN("calibrate: %s did not build with -fopenmp; measuring on one thread",
                  req.path);
        kevo_buf_reset(&log);
        req.n_flags = 2;
        st = c->b->ops->compile(c->b->ctx, &req, &c->mod, &log);
    }
    if (st)
        kevo_buf_say(c->err, "%scalibrate: %s did not compile (%s)%s%s", c->err->len ? "; " : "",
                     req.path, kevo_status_name(st), log.len ? ":\n" : "", kevo_buf_str(&log));
    kevo_buf_free(&log);
    return st;
}

/* Allocate x and y of `want` bytes each, halving on failure down to BUF_MIN. */
static enum kevo_status cal_alloc_pair(struct cal *c, size_t want)
{
    const struct kevo_backend_ops *ops = c->b->ops;
    size_t mark = c->err->len;
    size_t n = want;
    enum kevo_status st;

    for (;;) {
        st = ops->alloc(c->b->ctx, n, &c->x);
        if (!st) {
            st = ops->alloc(c->b->ctx, n, &c->y);
            if (!st)
                break;
            ops->free(c->b->ctx, c->x);
            c->x = 0;
        }
        if (st == KEVO_ERR_DEVICE || n / 2 < BUF_MIN) {
            kevo_buf_say(c->err, "%scalibrate: could not allocate two buffers of %zu bytes",
                         c->err->len ? "; " : "", n);
            return st;
        }
        n /= 2;
    }
    err_truncate(c->err, mark);
    c->buf_bytes = n;
    if (n < want)
        KEVO_WARN("calibrate: streaming buffers reduced to %zu bytes", n);
    if (c->info->l2_bytes > 0 && (int64_t)n < 4 * c->info->l2_bytes)
        KEVO_WARN("calibrate: %zu-byte buffers are under 4x the %lld-byte cache; bandwidth "
                  "may read high", n, (long long)c->info->l2_bytes);
    return KEVO_OK;
}

static enum kevo_status cal_buffers(struct cal *c)
{
    const struct kevo_backend_ops *ops = c->b->ops;
    size_t cap = c->cuda ? GPU_BUF_MAX : CPU_BUF_MAX;
    size_t want = cap;
    enum kevo_status st;

    if (c->info->mem_bytes > 0 && (uint64_t)c->info->mem_bytes / 8 < want)
        want = (size_t)c->info->mem_bytes / 8;
    want &= ~(size_t)4095;                 /* whole 16-byte vectors, whole pages */
    if (want < BUF_MIN)
        want = BUF_MIN;
    st = cal_alloc_pair(c, want);
    if (st)
        return st;
    /* The result buffer holds one float per block (bw_read) or per thread (fma, mma). */
    if (c->cuda)
        c->sink_bytes = (size_t)gpu_grid(c, GPU_BLOCKS_PER_SM) * GPU_BLOCK * sizeof(float);
    else
        c->sink_bytes = (size_t)cpu_items(c) * sizeof(float);
    st = ops->alloc(c->b->ctx, c->sink_bytes, &c->sink);
    /* Touch everything once: pages get mapped now, not inside a timed run, and the read
     * kernels sum finite numbers. */
    if (!st)
        st = ops->fill32(c->b->ctx, c->x, 0x3f800000u, c->buf_bytes);   /* 1.0f */
    if (!st)
        st = ops->fill32(c->b->ctx, c->y, 0, c->buf_bytes);
    if (!st)
        st = ops->fill32(c->b->ctx, c->sink, 0, c->sink_bytes);
    if (!st)
        st = ops->sync(c->b->ctx, c->err);
    if (st)
        kevo_buf_say(c->err, "%scalibrate: preparing buffers failed", c->err->len ? "; " : "");
    return st;
}

static void cal_release(struct cal *c)
{
    const struct kevo_backend_ops *ops = c->b->ops;

    ops->free(c->b->ctx, c->x);
    ops->free(c->b->ctx, c->y);
    ops->free(c->b->ctx, c->sink);
    if (c->mod)
        ops->module_free(c->b->ctx, c->mod);
    c->x = c->y = c->sink = 0;
    c->mod = NULL;
}

/* ---- timing ---- */

/*
 * Best (fastest) seconds of one pass of `k` (a batch of `batch` passes, divided by batch),
 * over c->n_samples samples after one discarded warm-up; caches flushed before each sample.
 * The best, not the median: the figures bound what a kernel can reach, so a sample slowed
 * by a busy machine must not lower them (a lowered figure makes honest kernels look
 * `implausible`). *out_mhz: median SM clock reported by the backend (0 if unknown).
 */
static enum kevo_status cal_time(struct cal *c, const struct kevo_call *k, int batch,
                                 double *out_s, double *out_mhz)
{
    struct kevo_sample s;
    double *t = NULL, *mhz = NULL;
    int n_mhz = 0;
    enum kevo_status st;

    *out_s = 0.0;
    *out_mhz = 0.0;
    t = kevo_calloc((size_t)c->n_samples, sizeof *t);
    mhz = kevo_calloc((size_t)c->n_samples, sizeof *mhz);
    if (!t || !mhz) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    st = c->b->ops->time(c->b->ctx, c->mod, k, 1, batch, 1, &s, c->err);   /* warm-up */
    for (int i = 0; !st && i < c->n_samples; i++) {
        st = c->b->ops->time(c->b->ctx, c->mod, k, 1, batch, 1, &s, c->err);
        /* the clock candidates are timed with, so the floors compare like with like */
        double sec = s.kernel_clock ? s.kernel_seconds + s.kernel_passes * c->info->launch_gap_s
                                    : s.seconds;
        if (!st && !(sec > 0.0 && isfinite(sec))) {
            kevo_buf_say(c->err, "backend reported a time of %g s", sec);
            st = KEVO_ERR_INVALID;
        }
        if (!st) {
            t[i] = sec / batch;
            if (s.sm_clock_mhz > 0.0)
                mhz[n_mhz++] = s.sm_clock_mhz;
        }
    }
    if (st) {
        kevo_buf_say(c->err, "%s(while timing %s for calibration)", c->err->len ? "; " : "",
                     entry_names[k->entry]);
        goto out;
    }
    *out_s = t[0];
    for (int i = 1; i < c->n_samples; i++)
        *out_s = t[i] < *out_s ? t[i] : *out_s;
    *out_mhz = median(mhz, n_mhz);
out:
    kevo_free(t);
    kevo_free(mhz);
    return st;
}

/* ---- the measurements ---- */

struct cal_result {
    double read, write, copy;                  /* bytes/s */
    double launch_floor_s;
    double measured[KEVO_UNIT_COUNT];          /* flops/s, 0 = not measured */
    double fp32_mhz;
};

/* Bytes are counted as moved: read N, write N, copy 2N. */
static enum kevo_status measure_bandwidth(struct cal *c, struct cal_result *r)
{
    struct kevo_call k;
    int64_t n = c->cuda ? (int64_t)(c->buf_bytes / 16) : (int64_t)(c->buf_bytes / 4);
    double bytes = (double)n * (c->cuda ? 16.0 : 4.0);
    uint32_t grid = c->cuda ? gpu_grid(c, GPU_BLOCKS_PER_SM) : 1;
    uint32_t block = c->cuda ? GPU_BLOCK : 1;
    double s, mhz;
    enum kevo_status st;

    call_init(&k, E_READ, grid, block);
    call_ptr(&k, c->x);
    call_ptr(&k, c->sink);
    call_int(&k, n);
    st = cal_time(c, &k, 1, &s, &mhz);
    if (st)
        return st;
    r->read = bytes / s;

    call_init(&k, E_WRITE, grid, block);
    call_ptr(&k, c->y);
    call_int(&k, n);
    st = cal_time(c, &k, 1, &s, &mhz);
    if (st)
        return st;
    r->write = bytes / s;

    call_init(&k, E_COPY, grid, block);
    call_ptr(&k, c->x);
    call_ptr(&k, c->y);
    call_int(&k, n);
    st = cal_time(c, &k, 1, &s, &mhz);
    if (st)
        return st;
    r->copy = 2.0 * bytes / s;
    return KEVO_OK;
}

/* The empty kernel on one warp, as a batch of LAUNCH_BATCH divided by it: what any launch
 * costs at the least. */
static enum kevo_status measure_launch_floor(struct cal *c, struct cal_result *r)
{
    struct kevo_call k;
    double mhz;

    call_init(&k, E_EMPTY, 1, c->cuda ? 32 : 1);
    call_ptr(&k, c->sink);
    return cal_time(c, &k, LAUNCH_BATCH, &r->launch_floor_s, &mhz);
}

static enum kevo_status measure_fp32(struct cal *c, struct cal_result *r)
{
    struct kevo_call k;
    double flops, s;
    enum kevo_status st;

    if (c->cuda) {
        uint32_t grid = gpu_grid(c, GPU_BLOCKS_PER_SM);
        call_init(&k, E_FMA, grid, GPU_BLOCK);
        call_ptr(&k, c->sink);
        call_int(&k, GPU_FMA_ITERS);
        flops = 2.0 * CAL_FMA_CHAINS * CAL_FMA_UNROLL * GPU_FMA_ITERS * (double)grid * GPU_BLOCK;
    } else {
        call_init(&k, E_FMA, 1, 1);
        call_ptr(&k, c->sink);
        call_int(&k, cpu_items(c));
        call_int(&k, CPU_FMA_ITERS);
        flops = 2.0 * CAL_CPU_ACC * (double)CPU_FMA_ITERS * (double)cpu_items(c);
    }
    st = cal_time(c, &k, 1, &s, &r->fp32_mhz);
    if (!st)
        r->measured[KEVO_UNIT_FP32] = flops / s;
    return st;
}

/* mma.sync peaks: FLOPs per warp per instruction = 2*M*N*K. sm_80+ only. */
static enum kevo_status measure_mma(struct cal *c, struct cal_result *r)
{
    static const struct { enum cal_entry e; enum kevo_unit u; double mnk; } mma[] = {
        { E_MMA_FP16, KEVO_UNIT_FP16, 16.0 * 8 * 16 },
        { E_MMA_BF16, KEVO_UNIT_BF16, 16.0 * 8 * 16 },
        { E_MMA_TF32, KEVO_UNIT_TF32, 16.0 * 8 * 8 },
    };
    uint32_t grid = gpu_grid(c, GPU_MMA_BLOCKS_PER_SM);
    double warps = (double)grid * (GPU_BLOCK / 32);
    struct kevo_call k;
    double s, mhz;
    enum kevo_status st;

    if (!c->cuda || c->info->cc_major < 8)
        return KEVO_OK;
    for (size_t i = 0; i < sizeof mma / sizeof mma[0]; i++) {
        call_init(&k, mma[i].e, grid, GPU_BLOCK);
        call_ptr(&k, c->sink);
        call_int(&k, GPU_MMA_ITERS);
        st = cal_time(c, &k, 1, &s, &mhz);
        if (st)
            return st;
        r->measured[mma[i].u] = 2.0 * mma[i].mnk * CAL_MMA_ACC * GPU_MMA_ITERS * warps / s;
    }
    return KEVO_OK;
}

static enum kevo_status cal_run(struct cal *c, struct cal_result *r)
{
    enum kevo_status st;

    st = cal_compile(c);
    if (!st)
        st = cal_buffers(c);
    if (!st)
        st = measure_bandwidth(c, r);
    if (!st)
        st = measure_launch_floor(c, r);
    if (!st)
        st = measure_fp32(c, r);
    if (!st)
        st = measure_mma(c, r);
    return st;
}

/* ---- the result document ---- */

static void spec_peaks(const struct kevo_device_info *info, int cuda,
                       double out[KEVO_UNIT_COUNT])
{
    memset(out, 0, sizeof(double) * KEVO_UNIT_COUNT);
    if (!cuda || info->clock_mhz <= 0 || info->n_sms <= 0)
        return;
    for (size_t i = 0; i < sizeof spec_rows / sizeof spec_rows[0]; i++) {
        const struct spec_row *row = &spec_rows[i];
        if (row->cc_major != info->cc_major || row->cc_minor != info->cc_minor)
            continue;
        for (int u = 0; u < KEVO_UNIT_COUNT; u++)
            out[u] = row->per_clk[u] * info->n_sms * info->clock_mhz * 1e6;
    }
}


static json_t *peaks_json(const struct cal_result *r, const double spec[KEVO_UNIT_COUNT])
{
    json_t *peaks = json_object();
    int bad = !peaks;

    for (int u = 0; !bad && u < KEVO_UNIT_COUNT; u++) {
        double m = r->measured[u], used = m > spec[u] ? m : spec[u];
        json_t *p;
        if (!(used > 0.0))
            continue;
        p = json_object();
        bad = !p || json_object_set_new(peaks, kevo_unit_name((enum kevo_unit)u), p);
        bad = bad || kevo_sol_set_positive(p, "measured_flops_per_s", m);
        bad = bad || kevo_sol_set_positive(p, "spec_flops_per_s", spec[u]);
        bad = bad || kevo_sol_set_positive(p, "used_flops_per_s", used);
        if (!bad && u == KEVO_UNIT_FP32)
            bad = kevo_sol_set_positive(p, "sm_clock_mhz", r->fp32_mhz);
    }
    if (bad) {
        json_decref(peaks);
        return NULL;
    }
    return peaks;
}

static json_t *device_json(const struct kevo_device_info *info, const char *backend)
{
    return json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:i, s:i, s:i}",
                     "name", info->name, "arch", info->arch, "backend", backend,
                     "cc_major", info->cc_major, "cc_minor", info->cc_minor,
                     "sms", info->n_sms, "l2_bytes", (json_int_t)info->l2_bytes,
                     "mem_bytes", (json_int_t)info->mem_bytes, "clock_mhz", info->clock_mhz,
                     "mem_clock_mhz", info->mem_clock_mhz,
                     "bus_width_bits", info->bus_width_bits);
}

static json_t *bandwidth_json(const struct cal *c, const struct cal_result *r)
{
    double best = r->read;
    double spec = 2.0 * c->info->mem_clock_mhz * 1e6 * c->info->bus_width_bits / 8.0;
    json_t *bw;

    best = r->write > best ? r->write : best;
    best = r->copy > best ? r->copy : best;
    bw = json_pack("{s:f, s:f, s:f, s:f, s:I, s:i}", "read_bytes_per_s", r->read,
                   "write_bytes_per_s", r->write, "copy_bytes_per_s", r->copy,
                   "best_bytes_per_s", best, "buffer_bytes", (json_int_t)c->buf_bytes,
                   "samples", c->n_samples);
    /* The datasheet figure (2 x memory clock x bus width) is for reference only: streaming
     * kernels reach ~90 % of it, and the floor uses what was measured. */
    if (bw && kevo_sol_set_positive(bw, "spec_bytes_per_s", c->cuda ? spec : 0.0)) {
        json_decref(bw);
        bw = NULL;
    }
    return bw;
}

static void utc_now(char out[32])
{
    time_t now = time(NULL);
    struct tm tm;

    if (!gmtime_r(&now, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, 32, "1970-01-01T00:00:00Z");
}

static enum kevo_status result_json(const struct cal *c, const struct cal_result *r,
                                    json_t **out)
{
    double spec[KEVO_UNIT_COUNT];
    char when[32];

    spec_peaks(c->info, c->cuda, spec);
    utc_now(when);
    /* On a GPU the harness owns the device and the figures are tight; a CPU is shared with
     * the OS and other processes, and its bandwidth depends on thread placement and on an
     * LLC that can hold much of a workload, so its figures bound far less tightly. */
    *out = json_pack("{s:i, s:o?, s:o?, s:o?, s:f, s:f, s:s, s:s}", "format", SOL_FORMAT,
                     "device", device_json(c->info, c->b->ops->name),
                     "bandwidth", bandwidth_json(c, r), "peaks", peaks_json(r, spec),
                     "launch_floor_s", r->launch_floor_s, "implausible_margin",
                     c->cuda ? SOL_MARGIN_GPU : SOL_MARGIN_CPU, "measured_at", when,
                     "clock", kevo_clock_name(c->info));
    if (*out && c->info->kernel_clock)   /* what each pass of a sample adds (backend.h) */
        json_object_set_new(*out, "launch_gap_s", json_real(c->info->launch_gap_s));
    if (*out && c->info->kernel_clock && c->info->launch_gap_b2b_s > 0)
        json_object_set_new(*out, "launch_gap_b2b_s", json_real(c->info->launch_gap_b2b_s));
    /* `o?` turns a NULL (out of memory) part into null: refuse such a document. */
    if (*out && (!json_is_object(json_object_get(*out, "device")) ||
                 !json_is_object(json_object_get(*out, "bandwidth")) ||
                 !json_is_object(json_object_get(*out, "peaks")))) {
        json_decref(*out);
        *out = NULL;
    }
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

static enum kevo_status measure(struct kevo_backend *b, const struct kevo_device_info *info,
                                json_t **out, struct kevo_buf *err)
{
    struct cal c;
    struct cal_result r;
    enum kevo_status st;

    memset(&c, 0, sizeof c);
    memset(&r, 0, sizeof r);
    c.b = b;
    c.info = info;
    c.cuda = strcmp(b->ops->name, "cuda") == 0;
    if (!c.cuda && strcmp(b->ops->name, "cpu") != 0) {
        kevo_buf_say(err, "%scalibrate: no calibration kernels for backend '%s'",
                     err->len ? "; " : "", b->ops->name);
        return KEVO_ERR_UNSUPPORTED;
    }
    c.n_samples = c.cuda ? GPU_SAMPLES : CPU_SAMPLES;
    c.err = err;
    st = cal_run(&c, &r);
    cal_release(&c);
    if (!st)
        st = result_json(&c, &r, out);
    if (!st)
        KEVO_INFO("calibrate %s: read %.1f, write %.1f, copy %.1f GB/s; fp32 %.2f TFLOP/s; "
                  "launch floor %.2f us", info->name, r.read * 1e-9, r.write * 1e-9,
                  r.copy * 1e-9, r.measured[KEVO_UNIT_FP32] * 1e-12, r.launch_floor_s * 1e6);
    return st;
}

/* ---- the cache ---- */

/* Appends s with every character outside [A-Za-z0-9._-] replaced by '_'. */
static enum kevo_status add_sanitized(struct kevo_buf *p, const char *s)
{
    enum kevo_status st = KEVO_OK;

    for (; *s && !st; s++) {
        int ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                 (*s >= '0' && *s <= '9') || *s == '.' || *s == '-' || *s == '_';
        st = kevo_buf_add(p, ok ? s : "_", 1);
    }
    return st;
}

/* <root>/calibration/<name>_<arch>_<clock>.json; KEVO_ERR_NOTFOUND when there is no cache
 * root. One file per clock: a run under a profiler (which holds CUPTI: events) and the
 * next run with CUPTI each keep their own figures, instead of measuring again and
 * replacing each other's, which gave every eval after an ncu run its own launch latency. */
static enum kevo_status cache_path(const struct kevo_device_info *info, struct kevo_buf *p)
{
    char root[4096];
    enum kevo_status st;

    if (kevo_fs_cache_root(root, sizeof root))
        return KEVO_ERR_NOTFOUND;
    st = kevo_buf_adds(p, root);
    if (!st)
        st = kevo_buf_adds(p, "/calibration/");
    if (!st)
        st = add_sanitized(p, info->name[0] ? info->name : "device");
    if (!st)
        st = kevo_buf_adds(p, "_");
    if (!st)
        st = add_sanitized(p, info->arch);
    if (!st)
        st = kevo_buf_adds(p, "_");
    if (!st)
        st = kevo_buf_adds(p, kevo_clock_name(info));
    if (!st)
        st = kevo_buf_adds(p, ".json");
    return st;
}

static int json_int_is(json_t *o, const char *key, int64_t want)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) == want;
}

static int json_str_is(json_t *o, const char *key, const char *want)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) && strcmp(json_string_value(v), want) == 0;
}

/* An entry is trusted only for the same format and the same device. */
static int cache_matches(json_t *j, const struct kevo_device_info *info)
{
    json_t *dev = json_object_get(j, "device");
    json_t *bw = json_object_get(j, "bandwidth");

    return json_int_is(j, "format", SOL_FORMAT) && json_is_object(dev) &&
           json_str_is(dev, "name", info->name) && json_str_is(dev, "arch", info->arch) &&
           json_int_is(dev, "sms", info->n_sms) && json_int_is(dev, "mem_bytes", info->mem_bytes) &&
           json_number_value(json_object_get(bw, "best_bytes_per_s")) > 0.0 &&
           json_is_number(json_object_get(j, "launch_floor_s")) &&
           json_is_object(json_object_get(j, "peaks")) &&
           json_is_string(json_object_get(j, "measured_at")) &&
           json_str_is(j, "clock", kevo_clock_name(info));   /* floors of the same clock */
}

/* The cached document for this device, or NULL (absent, corrupt or foreign). */
static json_t *cache_load(const char *path, const struct kevo_device_info *info)
{
    json_error_t jerr;
    json_t *j;

    if (access(path, F_OK) != 0)
        return NULL;
    j = json_load_file(path, 0, &jerr);
    if (!j) {
        KEVO_WARN("calibrate: ignoring unreadable cache %s: %s (line %d)", path, jerr.text,
                  jerr.line);
        return NULL;
    }
    if (!json_is_object(j) || !cache_matches(j, info)) {
        KEVO_INFO("calibrate: cache %s is for another device or format; measuring again", path);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* mkdir -p of the directory part of path. */
static int make_parent_dirs(const char *path)
{
    char *d = kevo_strdup(path);
    char *slash = d ? strrchr(d, '/') : NULL;
    int rc = d ? 0 : -1;

    if (slash && slash != d) {
        *slash = '\0';
        rc = kevo_fs_mkdirs(d, 0755);
    }
    kevo_free(d);
    return rc;
}

static int dump_to_buf(const char *text, size_t n, void *data)
{
    return kevo_buf_add(data, text, n) ? -1 : 0;
}

/* Write j to path via a temporary file and rename, so a reader never sees half a file.
 * Failure is only a warning: the figures are still good for this run. */
static void cache_store(const char *path, json_t *j)
{
    struct kevo_buf text, tmp;
    int fd = -1, ok = 0;

    kevo_buf_init(&text, 1u << 20);
    kevo_buf_init(&tmp, 4096);
    if (kevo_buf_addf(&tmp, "%s.tmp.%ld", path, (long)getpid()) ||
        json_dump_callback(j, dump_to_buf, &text, JSON_INDENT(2)) ||
        kevo_buf_adds(&text, "\n") || make_parent_dirs(path))
        goto out;
    fd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || kevo_fs_write_all(fd, text.data, text.len) || fsync(fd))
        goto out;
    if (close(fd) != 0) {
        fd = -1;
        goto out;
    }
    fd = -1;
    ok = rename(tmp.data, path) == 0;
out:
    if (fd >= 0)
        close(fd);
    if (!ok) {
        KEVO_WARN("calibrate: could not write cache %s: %s", path, strerror(errno));
        if (tmp.data)
            unlink(tmp.data);
    }
    kevo_buf_free(&text);
    kevo_buf_free(&tmp);
}

/* ---- public ---- */

KEVO_NODISCARD enum kevo_status kevo_calibrate_run(struct kevo_backend *b, int force,
                                                   json_t **out, struct kevo_buf *err)
{
    struct kevo_device_info info;
    struct kevo_buf path, scratch;
    json_t *j = NULL;
    enum kevo_status st;

    KEVO_ASSERT(b && b->ops && out);
    *out = NULL;
    kevo_buf_init(&path, 4096);
    kevo_buf_init(&scratch, 1u << 16);
    if (!err)
        err = &scratch;
    memset(&info, 0, sizeof info);
    st = b->ops->info(b->ctx, &info);
    if (st) {
        kevo_buf_say(err, "%scalibrate: could not query the device", err->len ? "; " : "");
        goto out;
    }
    st = cache_path(&info, &path);
    if (st == KEVO_ERR_NOTFOUND) {
        KEVO_DEBUG("calibrate: no cache directory (KEVO_CACHE_DIR, XDG_CACHE_HOME, HOME unset)");
        kevo_buf_reset(&path);
    } else if (st) {
        goto out;
    }
    if (!force && path.len)
        j = cache_load(path.data, &info);
    if (j) {
        KEVO_DEBUG("calibrate: using cached figures from %s", path.data);
        st = json_object_set_new(j, "cached", json_true()) ? KEVO_ERR_NOMEM : KEVO_OK;
        goto out;
    }
    st = measure(b, &info, &j, err);
    if (st)
        goto out;
    if (path.len)
        cache_store(path.data, j);
    st = json_object_set_new(j, "cached", json_false()) ? KEVO_ERR_NOMEM : KEVO_OK;
out:
    if (st) {
        json_decref(j);
        j = NULL;
    }
    *out = j;
    kevo_buf_free(&path);
    kevo_buf_free(&scratch);
    return st;
}

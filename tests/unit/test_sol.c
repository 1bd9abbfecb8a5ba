/*
 * test_sol - speed-of-light figures, floors and calibration (src/sol.c).
 *
 * Calibration is tested against a fake backend defined here: host memory bookkeeping, a
 * compile() that records the request, and a time() that returns deterministic synthetic
 * seconds per kernel, so every figure can be checked exactly against bytes or FLOPs over
 * that time. The embedded kernels are also compiled for real (NVRTC for CUDA, cc for the
 * CPU file, whose functions are then called and checked), and, when the CPU backend can be
 * opened, a whole calibration runs on it.
 */
#include "testutil.h"

#include "worker/backend.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/sol.h"
#include "worker/calibrate.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calibrate.cu.inc"
#include "calibrate_cpu.c.inc"

extern char **environ;

#include <nvrtc.h>

#define GIB ((int64_t)1 << 30)
#define MIB ((int64_t)1 << 20)

/* ---- log capture ---- */

static char log_text[1 << 14];

static void capture_log(enum kevo_log_level lvl, const char *msg, void *user)
{
    size_t n = strlen(log_text);
    (void)user;
    snprintf(log_text + n, sizeof log_text - n, "[%d] %s\n", (int)lvl, msg);
}

static void log_clear(void) { log_text[0] = '\0'; }

/* ---- fake backend ---- */

#define FAKE_MAX_ENTRIES 16

struct kevo_module {
    int n_entries;
    const char *entries[FAKE_MAX_ENTRIES];   /* borrowed from sol.c's static table */
};

struct fake {
    struct kevo_device_info info;
    size_t max_alloc;           /* larger allocations fail with KEVO_ERR_NOMEM */
    int fail_info, fail_compile, reject_openmp, zero_time;
    const char *fail_time_entry;    /* time() of this kernel returns KEVO_ERR_DEVICE */
    int n_compiles, n_times, live_allocs, live_modules;
    uint64_t next_addr;
    /* the last compile request */
    char path[128];
    size_t source_len;
    int has_source_text;
    int n_entries, n_flags, saw_openmp;
    char def_names[8][32];
    int64_t def_values[8];
    int n_defines;
    /* the last timed call and batch of each kernel, by name */
    struct { const char *name; struct kevo_call call; int batch; } timed[FAKE_MAX_ENTRIES];
    int n_timed;
};

/* Synthetic seconds of one pass of each kernel. */
static double fake_seconds(const char *entry)
{
    static const struct { const char *name; double s; } t[] = {
        { "bw_read", 1.0e-3 }, { "bw_write", 2.0e-3 }, { "bw_copy", 1.5e-3 },
        { "empty", 3.0e-6 }, { "fma_fp32", 5.0e-3 }, { "mma_fp16", 8.0e-3 },
        { "mma_bf16", 16.0e-3 }, { "mma_tf32", 12.0e-3 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(t[i].name, entry) == 0)
            return t[i].s;
    return 1.0;
}

static enum kevo_status fake_info(void *ctx, struct kevo_device_info *out)
{
    struct fake *f = ctx;
    if (f->fail_info)
        return KEVO_ERR_NODEV;
    *out = f->info;
    return KEVO_OK;
}

static void fake_record_req(struct fake *f, const struct kevo_compile_req *req)
{
    snprintf(f->path, sizeof f->path, "%s", req->path);
    f->source_len = req->source_len;
    f->has_source_text = req->source_len > 0 && strlen(req->source) == req->source_len &&
                         strstr(req->source, "fma_fp32") != NULL;
    f->n_entries = req->n_entries;
    f->n_flags = req->n_flags;
    f->saw_openmp = 0;
    for (int i = 0; i < req->n_flags; i++)
        f->saw_openmp |= strcmp(req->flags[i], "-fopenmp") == 0;
    f->n_defines = req->n_defines < 8 ? req->n_defines : 8;
    for (int i = 0; i < f->n_defines; i++) {
        snprintf(f->def_names[i], sizeof f->def_names[i], "%s", req->define_names[i]);
        f->def_values[i] = req->define_values[i];
    }
}

static enum kevo_status fake_compile(void *ctx, const struct kevo_compile_req *req,
                                     struct kevo_module **out, struct kevo_buf *log)
{
    struct fake *f = ctx;
    struct kevo_module *m;

    *out = NULL;
    f->n_compiles++;
    fake_record_req(f, req);
    if (f->fail_compile || (f->reject_openmp && f->saw_openmp)) {
        if (kevo_buf_adds(log, "fake.c:1: error: boom"))
            return KEVO_ERR_NOMEM;
        return KEVO_ERR_COMPILE;
    }
    m = kevo_calloc(1, sizeof *m);
    if (!m)
        return KEVO_ERR_NOMEM;
    m->n_entries = req->n_entries < FAKE_MAX_ENTRIES ? req->n_entries : FAKE_MAX_ENTRIES;
    for (int i = 0; i < m->n_entries; i++)
        m->entries[i] = req->entries[i];
    f->live_modules++;
    *out = m;
    return KEVO_OK;
}

static enum kevo_status fake_func_info(void *ctx, struct kevo_module *m, int entry,
                                       struct kevo_func_info *out)
{
    memset(out, 0, sizeof *out);
    return entry >= 0 && entry < m->n_entries ? KEVO_OK : KEVO_ERR_NOTFOUND;
}

static void fake_module_free(void *ctx, struct kevo_module *m)
{
    struct fake *f = ctx;
    if (m) {
        f->live_modules--;
        kevo_free(m);
    }
}

static enum kevo_status fake_alloc(void *ctx, size_t bytes, uint64_t *out)
{
    struct fake *f = ctx;
    *out = 0;
    if (bytes > f->max_alloc)
        return KEVO_ERR_NOMEM;
    f->live_allocs++;
    f->next_addr += (bytes + 255) & ~(uint64_t)255;
    *out = f->next_addr;
    return KEVO_OK;
}

static void fake_free(void *ctx, uint64_t addr)
{
    struct fake *f = ctx;
    if (addr)
        f->live_allocs--;
}

static enum kevo_status fake_fill32(void *ctx, uint64_t dst, uint32_t pattern, size_t n)
{
    return dst ? KEVO_OK : KEVO_ERR_INVALID;
}

static enum kevo_status fake_sync(void *ctx, struct kevo_buf *err) { return KEVO_OK; }

static void fake_remember(struct fake *f, const char *name, const struct kevo_call *k, int batch)
{
    int i = 0;
    while (i < f->n_timed && strcmp(f->timed[i].name, name) != 0)
        i++;
    if (i == FAKE_MAX_ENTRIES)
        return;
    if (i == f->n_timed)
        f->n_timed++;
    f->timed[i].name = name;
    f->timed[i].call = *k;
    f->timed[i].batch = batch;
}

static enum kevo_status fake_time(void *ctx, struct kevo_module *m, const struct kevo_call *calls,
                                  int n_calls, int batch, int flush, struct kevo_sample *out,
                                  struct kevo_buf *err)
{
    struct fake *f = ctx;
    const char *name;

    memset(out, 0, sizeof *out);
    assert_int_equal(n_calls, 1);
    assert_true(flush);
    assert_true(calls[0].entry >= 0 && calls[0].entry < m->n_entries);
    name = m->entries[calls[0].entry];
    f->n_times++;
    if (f->fail_time_entry && strcmp(name, f->fail_time_entry) == 0) {
        if (kevo_buf_adds(err, "fake: illegal address"))
            return KEVO_ERR_NOMEM;
        return KEVO_ERR_DEVICE;
    }
    fake_remember(f, name, &calls[0], batch);
    out->seconds = f->zero_time ? 0.0 : batch * fake_seconds(name);
    out->sm_clock_mhz = 1500.0;
    return KEVO_OK;
}

static const struct kevo_backend_ops fake_cuda_ops = {
    .name = "cuda", .info = fake_info, .compile = fake_compile, .func_info = fake_func_info,
    .module_free = fake_module_free, .alloc = fake_alloc, .free = fake_free,
    .fill32 = fake_fill32, .sync = fake_sync, .time = fake_time,
};
static const struct kevo_backend_ops fake_cpu_ops = {
    .name = "cpu", .info = fake_info, .compile = fake_compile, .func_info = fake_func_info,
    .module_free = fake_module_free, .alloc = fake_alloc, .free = fake_free,
    .fill32 = fake_fill32, .sync = fake_sync, .time = fake_time,
};

static void fake_init_gpu(struct fake *f, struct kevo_backend *b)
{
    memset(f, 0, sizeof *f);
    snprintf(f->info.name, sizeof f->info.name, "Fake GPU/9000");
    snprintf(f->info.arch, sizeof f->info.arch, "sm_90a");
    f->info.cc_major = 9;
    f->info.n_sms = 4;
    f->info.l2_bytes = 4 * MIB;
    f->info.mem_bytes = 1 * GIB;     /* buffers: mem/8 = 128 MiB */
    f->info.clock_mhz = 1000;
    f->info.mem_clock_mhz = 1000;
    f->info.bus_width_bits = 1024;
    f->max_alloc = (size_t)GIB;
    f->next_addr = 1 << 20;
    b->ops = &fake_cuda_ops;
    b->ctx = f;
}

static void fake_init_cpu(struct fake *f, struct kevo_backend *b)
{
    fake_init_gpu(f, b);
    snprintf(f->info.name, sizeof f->info.name, "Fake CPU");
    snprintf(f->info.arch, sizeof f->info.arch, "x86_64");
    f->info.cc_major = 0;
    f->info.n_sms = 2;
    f->info.clock_mhz = 0;
    b->ops = &fake_cpu_ops;
}

static const struct kevo_call *fake_timed(const struct fake *f, const char *name, int *batch)
{
    for (int i = 0; i < f->n_timed; i++)
        if (strcmp(f->timed[i].name, name) == 0) {
            if (batch)
                *batch = f->timed[i].batch;
            return &f->timed[i].call;
        }
    fail_msg("kernel %s was never timed", name);
    return NULL;
}

static int64_t fake_define(const struct fake *f, const char *name)
{
    for (int i = 0; i < f->n_defines; i++)
        if (strcmp(f->def_names[i], name) == 0)
            return f->def_values[i];
    fail_msg("define %s was not passed to the compiler", name);
    return 0;
}

/* ---- helpers ---- */

static double num(json_t *o, const char *path)
{
    char key[64];
    const char *dot;

    while ((dot = strchr(path, '.')) != NULL) {
        snprintf(key, sizeof key, "%.*s", (int)(dot - path), path);
        o = json_object_get(o, key);
        path = dot + 1;
    }
    o = json_object_get(o, path);
    if (!json_is_number(o))
        fail_msg("%s is not a number", path);
    return json_number_value(o);
}

static void assert_close(double got, double want)
{
    if (!(fabs(got - want) <= 1e-12 * fabs(want)))
        fail_msg("got %.17g, want %.17g", got, want);
}

static char cache_dir[256];

static int setup_cache(void **state)
{
    snprintf(cache_dir, sizeof cache_dir, "/tmp/kevo_test_sol_XXXXXX");
    assert_non_null(mkdtemp(cache_dir));
    assert_int_equal(setenv("KEVO_CACHE_DIR", cache_dir, 1), 0);
    kevo_log_set(capture_log, NULL, KEVO_LOG_DEBUG);
    log_clear();
    return 0;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0)
            remove_tree(p);
    }
    closedir(d);
    rmdir(dir);
}

static int teardown_cache(void **state)
{
    remove_tree(cache_dir);
    unsetenv("KEVO_CACHE_DIR");
    kevo_log_set(NULL, NULL, KEVO_LOG_INFO);
    return 0;
}

static json_t *calibrate_ok(struct kevo_backend *b, int force)
{
    struct kevo_buf err;
    json_t *j = NULL;
    enum kevo_status st;

    kevo_buf_init(&err, 1 << 16);
    st = kevo_calibrate_run(b, force, &j, &err);
    if (st)
        fail_msg("calibrate: %s: %s", kevo_status_name(st), kevo_buf_str(&err));
    kevo_buf_free(&err);
    assert_non_null(j);
    return j;
}

/* ---- floors ---- */

static void test_floor_bytes_bound(void **state)
{
    struct kevo_sol_figures f = { .bw_bytes_per_s = 1e12, .launch_floor_s = 2e-6 };
    f.peak_flops[KEVO_UNIT_FP32] = 1e14;

    assert_close(kevo_sol_floor(&f, 1e9, 1e9, KEVO_UNIT_FP32), 1e-3);   /* 1 ms > 10 us */
}

static void test_floor_flops_bound_per_unit(void **state)
{
    struct kevo_sol_figures f = { .bw_bytes_per_s = 1e12, .launch_floor_s = 2e-6 };
    f.peak_flops[KEVO_UNIT_FP32] = 1e14;
    f.peak_flops[KEVO_UNIT_FP16] = 1e15;
    f.peak_flops[KEVO_UNIT_TF32] = 5e14;

    assert_close(kevo_sol_floor(&f, 1e6, 1e13, KEVO_UNIT_FP32), 0.1);
    assert_close(kevo_sol_floor(&f, 1e6, 1e13, KEVO_UNIT_FP16), 0.01);
    assert_close(kevo_sol_floor(&f, 1e6, 1e13, KEVO_UNIT_TF32), 0.02);
}

static void test_floor_launch_bound(void **state)
{
    struct kevo_sol_figures f = { .bw_bytes_per_s = 1e12, .launch_floor_s = 2e-6 };
    f.peak_flops[KEVO_UNIT_FP32] = 1e14;

    assert_close(kevo_sol_floor(&f, 4096, 1000, KEVO_UNIT_FP32), 2e-6);
    assert_close(kevo_sol_floor(&f, 0, 0, KEVO_UNIT_FP32), 2e-6);
}

static void test_floor_unknowns_skipped(void **state)
{
    struct kevo_sol_figures f = { .bw_bytes_per_s = 1e12 };
    struct kevo_sol_figures none = { 0 };

    /* no fp8 peak: only the bytes term counts, however many flops */
    assert_close(kevo_sol_floor(&f, 1e9, 1e30, KEVO_UNIT_FP8), 1e-3);
    /* unknown bandwidth: only the flops term */
    f.bw_bytes_per_s = 0;
    f.peak_flops[KEVO_UNIT_BF16] = 1e15;
    assert_close(kevo_sol_floor(&f, 1e12, 1e12, KEVO_UNIT_BF16), 1e-3);
    /* a unit out of range is skipped, never read past the array */
    assert_true(kevo_sol_floor(&f, 1e12, 1e12, KEVO_UNIT_COUNT) == 0.0);
    assert_true(kevo_sol_floor(&none, 1e12, 1e12, KEVO_UNIT_FP32) == 0.0);
    assert_true(kevo_sol_floor(NULL, 1e12, 1e12, KEVO_UNIT_FP32) == 0.0);
}

/* ---- figures <-> JSON ---- */

static void test_figures_round_trip(void **state)
{
    struct kevo_sol_figures f = { .bw_bytes_per_s = 3.1e12, .launch_floor_s = 2.5e-6,
                                  .margin = 0.25 };
    struct kevo_sol_figures g;
    json_t *j, *peaks;

    f.peak_flops[KEVO_UNIT_FP32] = 6.7e13;
    f.peak_flops[KEVO_UNIT_BF16] = 1.0e15;
    f.peak_flops[KEVO_UNIT_FP8] = 2.0e15;
    j = kevo_sol_figures_to_json(&f);
    assert_non_null(j);
    assert_close(num(j, "bw"), 3.1e12);
    assert_close(num(j, "launch_floor_s"), 2.5e-6);
    peaks = json_object_get(j, "peaks");
    assert_int_equal(json_object_size(peaks), 3);          /* unknown units are left out */
    assert_close(num(j, "peaks.bf16"), 1.0e15);
    kevo_sol_figures_from_json(j, &g);
    assert_memory_equal(&f, &g, sizeof f);
    json_decref(j);
}

static void test_figures_from_calibration_object(void **state)
{
    struct kevo_sol_figures g;
    json_t *j = json_pack("{s:{s:f, s:f}, s:{s:{s:f, s:f}, s:{s:f, s:f, s:f}}, s:f, s:b}",
                          "bandwidth", "read_bytes_per_s", 2.9e12, "best_bytes_per_s", 3.0e12,
                          "peaks", "fp32", "measured_flops_per_s", 6e13, "used_flops_per_s", 6e13,
                          "fp16", "measured_flops_per_s", 6e14, "spec_flops_per_s", 9.9e14,
                          "used_flops_per_s", 9.9e14, "launch_floor_s", 2e-6, "cached", 1);

    assert_non_null(j);
    kevo_sol_figures_from_json(j, &g);
    assert_close(g.bw_bytes_per_s, 3.0e12);
    assert_close(g.peak_flops[KEVO_UNIT_FP32], 6e13);
    assert_close(g.peak_flops[KEVO_UNIT_FP16], 9.9e14);    /* "used", not "measured" */
    assert_true(g.peak_flops[KEVO_UNIT_TF32] == 0.0);
    assert_close(g.launch_floor_s, 2e-6);
    json_decref(j);
}

static void test_figures_from_bad_json(void **state)
{
    struct kevo_sol_figures g;
    json_t *j = json_pack("{s:f, s:{s:s, s:f, s:n}, s:s}", "bw", -5.0, "peaks", "fp32", "fast",
                          "fp16", -1.0, "bf16", "launch_floor_s", "soon");

    memset(&g, 0x55, sizeof g);
    kevo_sol_figures_from_json(NULL, &g);
    assert_true(g.bw_bytes_per_s == 0.0 && g.launch_floor_s == 0.0);
    assert_non_null(j);
    kevo_sol_figures_from_json(j, &g);
    assert_true(g.bw_bytes_per_s == 0.0);
    for (int u = 0; u < KEVO_UNIT_COUNT; u++)
        assert_true(g.peak_flops[u] == 0.0);
    assert_true(g.launch_floor_s == 0.0);
    json_decref(j);
}

/* ---- calibration on the fake backend ---- */

static void test_calibrate_gpu_figures(void **state)
{
    struct fake f;
    struct kevo_backend b;
    const struct kevo_call *k;
    json_t *j;
    double buf, flops, warps, spec, fp16;
    int batch = 0;

    fake_init_gpu(&f, &b);
    j = calibrate_ok(&b, 1);
    assert_true(json_is_false(json_object_get(j, "cached")));
    assert_string_equal(f.path, "kernels/calibrate.cu");
    assert_int_equal(f.source_len, sizeof kevo_kernel_calibrate_cu - 1);
    assert_true(f.has_source_text);
    assert_int_equal(f.n_entries, 8);
    assert_int_equal(f.live_allocs, 0);            /* every buffer given back */
    assert_int_equal(f.live_modules, 0);

    buf = num(j, "bandwidth.buffer_bytes");
    assert_close(buf, 128.0 * MIB);                /* mem/8 */
    assert_close(num(j, "bandwidth.read_bytes_per_s"), buf / 1.0e-3);
    assert_close(num(j, "bandwidth.write_bytes_per_s"), buf / 2.0e-3);
    assert_close(num(j, "bandwidth.copy_bytes_per_s"), 2.0 * buf / 1.5e-3);
    assert_close(num(j, "bandwidth.best_bytes_per_s"), 2.0 * buf / 1.5e-3);
    assert_close(num(j, "bandwidth.spec_bytes_per_s"), 2.0 * 1e9 * 1024 / 8);
    k = fake_timed(&f, "bw_read", NULL);
    assert_int_equal(k->args[2].i * 16, (int64_t)buf);

    /* launch floor: a batch of empty kernels on one warp, divided by the batch */
    k = fake_timed(&f, "empty", &batch);
    assert_true(batch >= 10 && batch <= 24);   /* all queued behind backend_cuda's blocker */
    assert_int_equal(k->grid[0], 1);
    assert_int_equal(k->block[0], 32);
    assert_close(num(j, "launch_floor_s"), 3.0e-6);

    /* fp32: FLOPs = 2 * chains * unroll * iters per thread */
    k = fake_timed(&f, "fma_fp32", NULL);
    flops = 2.0 * fake_define(&f, "CAL_FMA_CHAINS") * fake_define(&f, "CAL_FMA_UNROLL") *
            (double)k->args[1].i * k->grid[0] * k->block[0];
    assert_close(num(j, "peaks.fp32.measured_flops_per_s"), flops / 5.0e-3);
    spec = 256.0 * 4 * 1e9;
    assert_close(num(j, "peaks.fp32.spec_flops_per_s"), spec);
    assert_true(flops / 5.0e-3 > spec);        /* measured above the datasheet: it is used */
    assert_close(num(j, "peaks.fp32.used_flops_per_s"), flops / 5.0e-3);
    assert_close(num(j, "peaks.fp32.sm_clock_mhz"), 1500.0);

    /* fp16 mma: FLOPs = 2*16*8*16 per instruction per warp */
    k = fake_timed(&f, "mma_fp16", NULL);
    warps = (double)k->grid[0] * k->block[0] / 32;
    fp16 = 2.0 * 16 * 8 * 16 * fake_define(&f, "CAL_MMA_ACC") * (double)k->args[1].i * warps;
    assert_close(num(j, "peaks.fp16.measured_flops_per_s"), fp16 / 8.0e-3);
    assert_close(num(j, "peaks.bf16.measured_flops_per_s"), fp16 / 16.0e-3);
    assert_close(num(j, "peaks.tf32.measured_flops_per_s"), fp16 / 2 / 12.0e-3);
    assert_true(fp16 / 8.0e-3 < 4096.0 * 4 * 1e9);
    /* the datasheet wins where mma.sync falls short: the floor stays a lower bound */
    assert_close(num(j, "peaks.fp16.spec_flops_per_s"), 4096.0 * 4 * 1e9);
    assert_close(num(j, "peaks.fp16.used_flops_per_s"), 4096.0 * 4 * 1e9);
    assert_close(num(j, "peaks.fp8.used_flops_per_s"), 8192.0 * 4 * 1e9);
    assert_null(json_object_get(json_object_get(json_object_get(j, "peaks"), "fp8"),
                                "measured_flops_per_s"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "device"), "arch")),
                        "sm_90a");
    assert_true(json_is_string(json_object_get(j, "measured_at")));
    json_decref(j);
}

static void test_calibrate_unknown_arch_uses_measured(void **state)
{
    struct fake f;
    struct kevo_backend b;
    json_t *j;

    fake_init_gpu(&f, &b);
    f.info.cc_major = 12;                      /* not in the datasheet table */
    f.info.cc_minor = 7;
    j = calibrate_ok(&b, 1);
    assert_null(json_object_get(json_object_get(json_object_get(j, "peaks"), "fp16"),
                                "spec_flops_per_s"));
    assert_close(num(j, "peaks.fp16.used_flops_per_s"),
                 num(j, "peaks.fp16.measured_flops_per_s"));
    assert_null(json_object_get(json_object_get(j, "peaks"), "fp8"));
    json_decref(j);

    f.info.cc_major = 7;                       /* before sm_80: no mma units timed */
    f.info.cc_minor = 5;
    j = calibrate_ok(&b, 1);
    assert_null(json_object_get(json_object_get(j, "peaks"), "fp16"));
    assert_non_null(json_object_get(json_object_get(j, "peaks"), "fp32"));
    json_decref(j);
}

static void test_calibrate_cpu_flavour(void **state)
{
    struct fake f;
    struct kevo_backend b;
    const struct kevo_call *k;
    json_t *j;
    double buf, flops;

    fake_init_cpu(&f, &b);
    f.info.mem_bytes = 64 * GIB;               /* buffers capped at 256 MiB */
    j = calibrate_ok(&b, 1);
    assert_string_equal(f.path, "kernels/calibrate_cpu.c");
    assert_int_equal(f.source_len, sizeof kevo_kernel_calibrate_cpu_c - 1);
    assert_int_equal(f.n_entries, 5);
    assert_true(f.saw_openmp);
    buf = num(j, "bandwidth.buffer_bytes");
    assert_close(buf, 256.0 * MIB);
    k = fake_timed(&f, "bw_copy", NULL);
    assert_int_equal(k->args[2].i * 4, (int64_t)buf);    /* CPU functions count floats */
    assert_close(num(j, "bandwidth.copy_bytes_per_s"), 2.0 * buf / 1.5e-3);
    k = fake_timed(&f, "fma_fp32", NULL);
    flops = 2.0 * fake_define(&f, "CAL_CPU_ACC") * (double)k->args[1].i * (double)k->args[2].i;
    assert_close(num(j, "peaks.fp32.used_flops_per_s"), flops / 5.0e-3);
    assert_null(json_object_get(json_object_get(json_object_get(j, "peaks"), "fp32"),
                                "spec_flops_per_s"));
    assert_int_equal(json_object_size(json_object_get(j, "peaks")), 1);
    assert_null(json_object_get(json_object_get(j, "bandwidth"), "spec_bytes_per_s"));
    json_decref(j);

    /* a compiler without OpenMP: built again without -fopenmp, with a warning */
    f.reject_openmp = 1;
    log_clear();
    j = calibrate_ok(&b, 1);
    assert_false(f.saw_openmp);
    assert_non_null(strstr(log_text, "-fopenmp"));
    json_decref(j);
}

static void test_calibrate_buffers_shrink(void **state)
{
    struct fake f;
    struct kevo_backend b;
    struct kevo_buf err;
    json_t *j = NULL;

    fake_init_gpu(&f, &b);
    f.max_alloc = 40 * MIB;                    /* 128 MiB fails, 64 fails, 32 fits */
    log_clear();
    kevo_buf_init(&err, 4096);
    assert_int_equal(kevo_calibrate_run(&b, 1, &j, &err), KEVO_OK);
    assert_int_equal(err.len, 0);              /* the failed attempts leave no message */
    assert_close(num(j, "bandwidth.buffer_bytes"), 32.0 * MIB);
    assert_non_null(strstr(log_text, "reduced"));
    assert_int_equal(f.live_allocs, 0);
    json_decref(j);

    f.max_alloc = 1 * MIB;                     /* nothing useful fits */
    j = NULL;
    assert_int_equal(kevo_calibrate_run(&b, 1, &j, &err), KEVO_ERR_NOMEM);
    assert_null(j);
    assert_non_null(strstr(kevo_buf_str(&err), "could not allocate"));
    assert_int_equal(f.live_allocs, 0);
    assert_int_equal(f.live_modules, 0);
    kevo_buf_free(&err);
}

static void test_calibrate_failures(void **state)
{
    struct fake f;
    struct kevo_backend b;
    struct kevo_buf err;
    json_t *j = NULL;

    fake_init_gpu(&f, &b);
    kevo_buf_init(&err, 1 << 16);

    f.fail_compile = 1;
    assert_int_equal(kevo_calibrate_run(&b, 1, &j, &err), KEVO_ERR_COMPILE);
    assert_null(j);
    assert_non_null(strstr(kevo_buf_str(&err), "kernels/calibrate.cu did not compile"));
    assert_non_null(strstr(kevo_buf_str(&err), "boom"));
    f.fail_compile = 0;

    kevo_buf_reset(&err);
    f.fail_time_entry = "bw_copy";
    assert_int_equal(kevo_calibrate_run(&b, 1, &j, &err), KEVO_ERR_DEVICE);
    assert_null(j);
    assert_non_null(strstr(kevo_buf_str(&err), "illegal address"));
    assert_non_null(strstr(kevo_buf_str(&err), "bw_copy"));
    assert_int_equal(f.live_allocs, 0);
    assert_int_equal(f.live_modules, 0);
    f.fail_time_entry = NULL;

    kevo_buf_reset(&err);
    f.zero_time = 1;
    assert_int_equal(kevo_calibrate_run(&b, 1, &j, &err), KEVO_ERR_INVALID);
    assert_non_null(strstr(kevo_buf_str(&err), "time of 0"));
    f.zero_time = 0;

    kevo_buf_reset(&err);
    f.fail_info = 1;
    assert_int_equal(kevo_calibrate_run(&b, 0, &j, &err), KEVO_ERR_NODEV);
    assert_non_null(strstr(kevo_buf_str(&err), "could not query the device"));
    f.fail_info = 0;

    /* a backend with no calibration kernels */
    {
        struct kevo_backend_ops other = fake_cuda_ops;
        struct kevo_backend ob = { &other, &f };
        other.name = "opencl";
        kevo_buf_reset(&err);
        assert_int_equal(kevo_calibrate_run(&ob, 1, &j, &err), KEVO_ERR_UNSUPPORTED);
        assert_non_null(strstr(kevo_buf_str(&err), "'opencl'"));
    }

    /* a NULL err buffer is allowed */
    f.fail_compile = 1;
    assert_int_equal(kevo_calibrate_run(&b, 1, &j, NULL), KEVO_ERR_COMPILE);
    kevo_buf_free(&err);
}

static void test_calibrate_out_of_memory(void **state)
{
    struct fake f;
    struct kevo_backend b;
    json_t *j;
    int n_ok = 0, n_nomem = 0;

    fake_init_gpu(&f, &b);
    for (long n = 1; n <= 60; n++) {
        enum kevo_status st;
        j = NULL;
        kevo_mem_fail_after(n);
        st = kevo_calibrate_run(&b, 1, &j, NULL);
        kevo_mem_fail_after(0);
        assert_true(st == KEVO_OK || st == KEVO_ERR_NOMEM);
        assert_true((st == KEVO_OK) == (j != NULL));
        assert_int_equal(f.live_allocs, 0);
        assert_int_equal(f.live_modules, 0);
        n_ok += st == KEVO_OK;
        n_nomem += st == KEVO_ERR_NOMEM;
        json_decref(j);
    }
    assert_true(n_nomem > 0);
    assert_true(n_ok > 0);                     /* late failures only hit the cache write */
}

/* ---- the cache ---- */

static void cache_file(char *out, size_t n, const char *file)
{
    snprintf(out, n, "%s/calibration/%s", cache_dir, file);
}

static void test_cache_write_and_reuse(void **state)
{
    struct fake f;
    struct kevo_backend b;
    char path[512];
    json_t *j1, *j2, *disk;
    struct kevo_sol_figures g1, g2;
    int n_times;
    DIR *d;
    struct dirent *e;

    fake_init_gpu(&f, &b);
    j1 = calibrate_ok(&b, 0);
    assert_true(json_is_false(json_object_get(j1, "cached")));
    cache_file(path, sizeof path, "Fake_GPU_9000_sm_90a_events.json");     /* name sanitized */
    disk = json_load_file(path, 0, NULL);
    assert_non_null(disk);
    assert_null(json_object_get(disk, "cached"));
    json_decref(disk);

    n_times = f.n_times;
    j2 = calibrate_ok(&b, 0);
    assert_true(json_is_true(json_object_get(j2, "cached")));
    assert_int_equal(f.n_times, n_times);                         /* nothing re-measured */
    kevo_sol_figures_from_json(j1, &g1);
    kevo_sol_figures_from_json(j2, &g2);
    assert_memory_equal(&g1, &g2, sizeof g1);
    assert_string_equal(json_string_value(json_object_get(j1, "measured_at")),
                        json_string_value(json_object_get(j2, "measured_at")));
    json_decref(j2);

    j2 = calibrate_ok(&b, 1);                                     /* force */
    assert_true(json_is_false(json_object_get(j2, "cached")));
    assert_true(f.n_times > n_times);
    json_decref(j2);
    json_decref(j1);

    /* no temporary file is left beside the entry */
    snprintf(path, sizeof path, "%s/calibration", cache_dir);
    d = opendir(path);
    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        assert_null(strstr(e->d_name, ".tmp"));
    closedir(d);
}

static void test_cache_invalidated_by_device_change(void **state)
{
    struct fake f;
    struct kevo_backend b;
    json_t *j;
    int n_times;

    fake_init_gpu(&f, &b);
    json_decref(calibrate_ok(&b, 0));
    n_times = f.n_times;
    f.info.n_sms = 8;                           /* same name and arch, other SM count */
    j = calibrate_ok(&b, 0);
    assert_true(json_is_false(json_object_get(j, "cached")));
    assert_true(f.n_times > n_times);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "device"), "sms")), 8);
    json_decref(j);

    n_times = f.n_times;
    f.info.mem_bytes = 2 * GIB;                 /* other memory size */
    j = calibrate_ok(&b, 0);
    assert_true(json_is_false(json_object_get(j, "cached")));
    assert_true(f.n_times > n_times);
    json_decref(j);

    j = calibrate_ok(&b, 0);                    /* and the new entry is then reused */
    assert_true(json_is_true(json_object_get(j, "cached")));
    json_decref(j);
}

/* One cache file per clock: a run without CUPTI (under a profiler: events) and the next
 * with it each keep their own figures, so neither measures again after the other; the
 * CUPTI entry carries both launch latencies. */
static void test_cache_per_clock(void **state)
{
    struct fake f;
    struct kevo_backend b;
    char path[512];
    json_t *j;
    int n_times;

    fake_init_gpu(&f, &b);
    json_decref(calibrate_ok(&b, 0));                   /* events */
    f.info.kernel_clock = 1;
    f.info.launch_gap_s = 1.2e-6;
    f.info.launch_gap_b2b_s = 0.9e-6;
    n_times = f.n_times;
    j = calibrate_ok(&b, 0);                            /* cupti: its own entry */
    assert_true(json_is_false(json_object_get(j, "cached")));
    assert_true(f.n_times > n_times);
    assert_string_equal(json_string_value(json_object_get(j, "clock")), "cupti");
    assert_true(json_real_value(json_object_get(j, "launch_gap_s")) == 1.2e-6);
    assert_true(json_real_value(json_object_get(j, "launch_gap_b2b_s")) == 0.9e-6);
    json_decref(j);
    cache_file(path, sizeof path, "Fake_GPU_9000_sm_90a_cupti.json");
    assert_int_equal(access(path, F_OK), 0);
    cache_file(path, sizeof path, "Fake_GPU_9000_sm_90a_events.json");
    assert_int_equal(access(path, F_OK), 0);

    f.info.kernel_clock = 0;                            /* events again: still cached */
    n_times = f.n_times;
    j = calibrate_ok(&b, 0);
    assert_true(json_is_true(json_object_get(j, "cached")));
    assert_int_equal(f.n_times, n_times);
    assert_null(json_object_get(j, "launch_gap_s"));    /* events time whole batches */
    json_decref(j);
    f.info.kernel_clock = 1;
    j = calibrate_ok(&b, 0);
    assert_true(json_is_true(json_object_get(j, "cached")));
    assert_true(json_real_value(json_object_get(j, "launch_gap_s")) == 1.2e-6);
    json_decref(j);
}

static void test_cache_corrupt_ignored(void **state)
{
    struct fake f;
    struct kevo_backend b;
    char path[512];
    FILE *fp;
    json_t *j, *disk;

    fake_init_gpu(&f, &b);
    json_decref(calibrate_ok(&b, 0));
    cache_file(path, sizeof path, "Fake_GPU_9000_sm_90a_events.json");
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("{\"format\": 1, \"device\": {\"name\": tru", fp);
    fclose(fp);
    log_clear();
    j = calibrate_ok(&b, 0);
    assert_true(json_is_false(json_object_get(j, "cached")));
    assert_non_null(strstr(log_text, "ignoring unreadable cache"));
    json_decref(j);
    disk = json_load_file(path, 0, NULL);      /* rewritten whole */
    assert_non_null(disk);
    json_decref(disk);

    /* well-formed JSON of the wrong shape is not trusted either */
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("{\"format\": 1, \"device\": {\"name\": \"Fake GPU/9000\", \"arch\": \"sm_90a\", "
          "\"sms\": 4, \"mem_bytes\": 1073741824}}", fp);
    fclose(fp);
    j = calibrate_ok(&b, 0);
    assert_true(json_is_false(json_object_get(j, "cached")));
    json_decref(j);
}

static void test_cache_write_failure_is_warning(void **state)
{
    struct fake f;
    struct kevo_backend b;
    char file[512];
    FILE *fp;
    json_t *j;

    snprintf(file, sizeof file, "%s/not_a_dir", cache_dir);
    fp = fopen(file, "w");
    assert_non_null(fp);
    fclose(fp);
    assert_int_equal(setenv("KEVO_CACHE_DIR", file, 1), 0);
    fake_init_gpu(&f, &b);
    log_clear();
    j = calibrate_ok(&b, 0);
    assert_true(json_is_false(json_object_get(j, "cached")));
    assert_non_null(strstr(log_text, "could not write cache"));
    json_decref(j);
}

static void test_cache_root_fallbacks(void **state)
{
    struct fake f;
    struct kevo_backend b;
    char path[512], home[512];
    json_t *j;

    snprintf(home, sizeof home, "%s", getenv("HOME") ? getenv("HOME") : "");
    unsetenv("KEVO_CACHE_DIR");
    assert_int_equal(setenv("XDG_CACHE_HOME", cache_dir, 1), 0);
    fake_init_gpu(&f, &b);
    json_decref(calibrate_ok(&b, 0));
    snprintf(path, sizeof path, "%s/kevo/calibration/Fake_GPU_9000_sm_90a_events.json", cache_dir);
    assert_int_equal(access(path, F_OK), 0);

    unsetenv("XDG_CACHE_HOME");
    assert_int_equal(setenv("HOME", cache_dir, 1), 0);
    json_decref(calibrate_ok(&b, 0));
    snprintf(path, sizeof path, "%s/.cache/kevo/calibration/Fake_GPU_9000_sm_90a_events.json",
             cache_dir);
    assert_int_equal(access(path, F_OK), 0);

    unsetenv("HOME");                           /* no root at all: measure, cache nothing */
    j = calibrate_ok(&b, 0);
    assert_true(json_is_false(json_object_get(j, "cached")));
    json_decref(j);
    if (home[0])
        assert_int_equal(setenv("HOME", home, 1), 0);
}

/* ---- the kernels themselves ---- */

static char *nvrtc_output(const char *arch, int ptx)
{
    char opt[64];
    const char *opts[] = { opt, "-default-device", "--std=c++17" };
    nvrtcProgram p;
    size_t n = 0;
    char *out = NULL;

    snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch);
    assert_int_equal(nvrtcCreateProgram(&p, kevo_kernel_calibrate_cu, "kernels/calibrate.cu",
                                        0, NULL, NULL), NVRTC_SUCCESS);
    if (nvrtcCompileProgram(p, 3, opts) != NVRTC_SUCCESS) {
        char log[8192] = "";
        size_t ln = 0;
        if (nvrtcGetProgramLogSize(p, &ln) == NVRTC_SUCCESS && ln < sizeof log)
            (void)nvrtcGetProgramLog(p, log);
        fail_msg("calibrate.cu does not compile for %s:\n%s", arch, log);
    }
    assert_int_equal(ptx ? nvrtcGetPTXSize(p, &n) : nvrtcGetCUBINSize(p, &n), NVRTC_SUCCESS);
    out = kevo_calloc(1, n + 1);
    assert_non_null(out);
    assert_int_equal(ptx ? nvrtcGetPTX(p, out) : nvrtcGetCUBIN(p, out), NVRTC_SUCCESS);
    nvrtcDestroyProgram(&p);
    return out;
}

static void test_cuda_kernels_compile(void **state)
{
    char *ptx = nvrtc_output("compute_90a", 1);

    /* 16-byte vector loads for the bandwidth kernels; the tensor-core instructions */
    assert_non_null(strstr(ptx, "ld.global.nc.v4.f32"));
    assert_non_null(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    assert_non_null(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
    assert_non_null(strstr(ptx, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
    assert_non_null(strstr(ptx, "fma.rn.f32"));
    kevo_free(ptx);
    kevo_free(nvrtc_output("sm_90a", 0));     /* and to a real cubin */
    ptx = nvrtc_output("compute_75", 1);       /* older archs: mma kernels are no-ops */
    assert_null(strstr(ptx, "mma.sync"));
    assert_non_null(strstr(ptx, ".entry mma_fp16"));
    kevo_free(ptx);
}

/* Build kernels/calibrate_cpu.c as the CPU backend would, into dir/cal.so. */
static int build_cpu_kernels(const char *dir, char *so, size_t n)
{
    char src[512];
    FILE *fp;
    pid_t pid;
    int status;

    snprintf(src, sizeof src, "%s/calibrate_cpu.c", dir);
    snprintf(so, n, "%s/cal.so", dir);
    fp = fopen(src, "w");
    assert_non_null(fp);
    fputs(kevo_kernel_calibrate_cpu_c, fp);
    fclose(fp);
    char *argv[] = { "cc", "-std=c11", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC",
                     "-Wall", "-Wextra", "-Werror", "-DCAL_CPU_ACC=192", "-o", so, src, NULL };
    if (posix_spawnp(&pid, "cc", NULL, NULL, argv, environ) != 0)
        return -1;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -2;
    return 0;
}

static void test_cpu_kernels_compute(void **state)
{
    char so[512];
    void *h;
    void (*rd)(const float *, float *, long), (*wr)(float *, long), (*empty)(float *);
    void (*cp)(const float *, float *, long), (*fma_k)(float *, long, long);
    long n = 100003;                            /* not a multiple of any chunk or vector */
    float *x = kevo_calloc((size_t)n, sizeof *x), *y = kevo_calloc((size_t)n, sizeof *y);
    float sink[4] = { 0 }, out[3];
    int rc = build_cpu_kernels(cache_dir, so, sizeof so);

    if (rc == -1)
        skip();                                 /* no system compiler */
    assert_int_equal(rc, 0);                    /* compiles -Wall -Wextra -Werror */
    /* NODELETE: unloading libgomp under its parked worker threads would crash them */
    h = dlopen(so, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    assert_non_null(h);
    *(void **)&rd = dlsym(h, "bw_read");
    *(void **)&wr = dlsym(h, "bw_write");
    *(void **)&cp = dlsym(h, "bw_copy");
    *(void **)&empty = dlsym(h, "empty");
    *(void **)&fma_k = dlsym(h, "fma_fp32");
    assert_true(rd && wr && cp && empty && fma_k);

    wr(x, n);
    for (long i = 0; i < n; i++)
        assert_true(x[i] == (float)(i & 0xffffff));
    cp(x, y, n);
    assert_memory_equal(x, y, (size_t)n * sizeof *x);
    for (long i = 0; i < n; i++)
        x[i] = 0.5f;
    rd(x, sink, n);
    assert_true(sink[0] == 0.5f * n);           /* exact: every partial sum is a multiple of .5 */
    empty(sink);
    fma_k(out, 3, 7);
    for (long w = 0; w < 3; w++) {              /* the same arithmetic, in the same order */
        float t = 0.0f;
        for (int j = 0; j < 192; j++) {
            float a = (float)(w + j) * 1.0e-3f;
            for (int it = 0; it < 7; it++)
                a = fmaf(a, 0.999f, 1.0e-3f);
            t += a;
        }
        assert_true(fabsf(out[w] - t) <= 1e-5f * fabsf(t));
    }
    dlclose(h);
    kevo_free(x);
    kevo_free(y);
}

/* ---- end to end on the real CPU backend ---- */

static void test_calibrate_real_cpu_backend(void **state)
{
    struct kevo_backend b;
    struct kevo_buf err;
    json_t *j = NULL;
    enum kevo_status st;

    kevo_buf_init(&err, 1 << 16);
    if (kevo_backend_open_cpu(&b, &err) != KEVO_OK) {
        kevo_buf_free(&err);
        skip();
    }
    st = kevo_calibrate_run(&b, 1, &j, &err);
    if (st)
        fail_msg("real CPU calibration: %s: %s", kevo_status_name(st), kevo_buf_str(&err));
    assert_true(num(j, "bandwidth.best_bytes_per_s") > 1e8);      /* >100 MB/s, <100 TB/s */
    assert_true(num(j, "bandwidth.best_bytes_per_s") < 1e14);
    assert_true(num(j, "peaks.fp32.measured_flops_per_s") > 1e8);
    assert_true(num(j, "peaks.fp32.measured_flops_per_s") < 1e15);
    assert_true(num(j, "launch_floor_s") > 0 && num(j, "launch_floor_s") < 1e-2);
    assert_true(json_is_false(json_object_get(j, "cached")));
    json_decref(j);
    j = NULL;
    assert_int_equal(kevo_calibrate_run(&b, 0, &j, &err), KEVO_OK);
    assert_true(json_is_true(json_object_get(j, "cached")));
    json_decref(j);
    b.ops->destroy(b.ctx);
    kevo_buf_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor_bytes_bound),
        cmocka_unit_test(test_floor_flops_bound_per_unit),
        cmocka_unit_test(test_floor_launch_bound),
        cmocka_unit_test(test_floor_unknowns_skipped),
        cmocka_unit_test(test_figures_round_trip),
        cmocka_unit_test(test_figures_from_calibration_object),
        cmocka_unit_test(test_figures_from_bad_json),
        cmocka_unit_test_setup_teardown(test_calibrate_gpu_figures, setup_cache, teardown_cache),
        cmocka_unit_test_setup_teardown(test_calibrate_unknown_arch_uses_measured, setup_cache,
                                        teardown_cache),
        cmocka_unit_test_setup_teardown(test_calibrate_cpu_flavour, setup_cache, teardown_cache),
        cmocka_unit_test_setup_teardown(test_calibrate_buffers_shrink, setup_cache,
                                        teardown_cache),
        cmocka_unit_test_setup_teardown(test_calibrate_failures, setup_cache, teardown_cache),
        cmocka_unit_test_setup_teardown(test_calibrate_out_of_memory, setup_cache,
                                        teardown_cache),
        cmocka_unit_test_setup_teardown(test_cache_write_and_reuse, setup_cache, teardown_cache),
        cmocka_unit_test_setup_teardown(test_cache_invalidated_by_device_change, setup_cache,
                                        teardown_cache),
        cmocka_unit_test_setup_teardown(test_cache_corrupt_ignored, setup_cache, teardown_cache),
        cmocka_unit_test_setup_teardown(test_cache_write_failure_is_warning, setup_cache,
                                        teardown_cache),
        cmocka_unit_test_setup_teardown(test_cache_root_fallbacks, setup_cache, teardown_cache),
        cmocka_unit_test_setup_teardown(test_cache_per_clock, setup_cache, teardown_cache),
        cmocka_unit_test(test_cuda_kernels_compile),
        cmocka_unit_test_setup_teardown(test_calibrate_real_cpu_backend, setup_cache,
                                        teardown_cache),
        /* after the real backend: it runs OpenMP in this process, and a fork after that
         * (the CPU backend's spawner) inherits a libgomp that deadlocks */
        cmocka_unit_test_setup_teardown(test_cpu_kernels_compute, setup_cache, teardown_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

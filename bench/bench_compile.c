/*
 * bench_compile - how fast a candidate goes from source to a loaded kernel on the CUDA
 * backend: NVRTC compile + cuModuleLoadData uncached (a source never seen), cached on disk
 * (in-memory cache dropped before each sample) and cached in memory; NVRTC alone too.
 * A benchmark, not a test: it prints medians; targets are in bench/README.md.
 * Usage: bench_compile FILE.cu ENTRY [N]
 */
#include "worker/backend.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/mem.h"
#include "worker/nvrtc_cache.h"
#include "worker/rtc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) { return kevo_now() * 1e3; }

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = kevo_malloc((size_t)n + 64);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        kevo_free(s);
        s = NULL;
    }
    if (s)
        s[n] = '\0';
    fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    struct kevo_backend b;
    struct kevo_buf err, log;
    int n = argc > 3 ? atoi(argv[3]) : 20;
    if (argc < 3 || n < 1 || n > 1000) {
        fprintf(stderr, "usage: bench_compile FILE.cu ENTRY [N]\n");
        return 2;
    }
    char *base = slurp(argv[1]);
    if (!base) {
        perror(argv[1]);
        return 1;
    }
    kevo_buf_init(&err, 1 << 16);
    kevo_buf_init(&log, 1 << 20);
    if (kevo_backend_open_cuda(0, &b, &err) != KEVO_OK) {
        fprintf(stderr, "no CUDA backend: %s\n", kevo_buf_str(&err));
        return 1;
    }
    struct kevo_device_info info;
    if (b.ops->info(b.ctx, &info) != KEVO_OK)
        return 1;
    const char *entries[] = {argv[2]};
    size_t blen = strlen(base);
    char *src = kevo_malloc(blen + 64);
    double *t_unc = kevo_calloc((size_t)n, sizeof(double)), *t_rtc = kevo_calloc((size_t)n, sizeof(double));
    double *t_disk = kevo_calloc((size_t)n, sizeof(double)), *t_mem = kevo_calloc((size_t)n, sizeof(double));
    struct kevo_compile_req req = {.path = argv[1], .source = src, .n_entries = 1, .entries = entries};
    struct kevo_module *m = NULL;
    unsigned salt = (unsigned)time(NULL);

    /* warm NVRTC and the driver once, outside the figures */
    snprintf(src, blen + 64, "%s\n// warm %u\n", base, salt);
    req.source_len = strlen(src);
    if (b.ops->compile(b.ctx, &req, &m, &log) != KEVO_OK) {
        fprintf(stderr, "compile failed:\n%s\n", kevo_buf_str(&log));
        return 1;
    }
    b.ops->module_free(b.ctx, m);
    for (int i = 0; i < n; i++) {        /* uncached: a source never seen */
        snprintf(src, blen + 64, "%s\n// uncached %u %d\n", base, salt, i);
        req.source_len = strlen(src);
        double t0 = now_ms();
        if (b.ops->compile(b.ctx, &req, &m, &log) != KEVO_OK)
            return 1;
        t_unc[i] = now_ms() - t0;
        b.ops->module_free(b.ctx, m);
    }
    for (int i = 0; i < n; i++) {        /* NVRTC alone, uncached */
        void *cubin = NULL;
        size_t sz = 0;
        snprintf(src, blen + 64, "%s\n// rtc %u %d\n", base, salt, i);
        req.source_len = strlen(src);
        double t0 = now_ms();
        if (kevo_rtc_compile(&req, info.arch, &cubin, &sz, &log, NULL) != KEVO_OK)
            return 1;
        t_rtc[i] = now_ms() - t0;
        kevo_free(cubin);
    }
    snprintf(src, blen + 64, "%s\n// cached %u\n", base, salt);
    req.source_len = strlen(src);
    if (b.ops->compile(b.ctx, &req, &m, &log) != KEVO_OK)
        return 1;
    b.ops->module_free(b.ctx, m);
    for (int i = 0; i < n; i++) {        /* disk hit + module load */
        kevo_nvrtc_cache_drop_memory();
        double t0 = now_ms();
        if (b.ops->compile(b.ctx, &req, &m, &log) != KEVO_OK)
            return 1;
        t_disk[i] = now_ms() - t0;
        b.ops->module_free(b.ctx, m);
    }
    for (int i = 0; i < n; i++) {        /* memory hit + module load */
        double t0 = now_ms();
        if (b.ops->compile(b.ctx, &req, &m, &log) != KEVO_OK)
            return 1;
        t_mem[i] = now_ms() - t0;
        b.ops->module_free(b.ctx, m);
    }
    printf("device: %s (%s), NVRTC %s, source %s (%zu bytes), %d samples each\n", info.name,
           info.arch, kevo_rtc_version(), argv[1], blen, n);
    printf("compile+load uncached (NVRTC + cuModuleLoadData): median %.2f ms\n", median(t_unc, n));
    printf("NVRTC alone, uncached:                            median %.2f ms\n", median(t_rtc, n));
    printf("compile+load, disk cache hit:                     median %.3f ms\n", median(t_disk, n));
    printf("compile+load, memory cache hit:                   median %.3f ms\n", median(t_mem, n));
    kevo_backend_close(&b);
    return 0;
}

/*
 * bench_sample - what one timing sample costs on the host, for a tiny kernel: the wall
 * time of ops->time() at several batch lengths with and without the L2 flush, beside
 * plain launch+sync and a poison fill+sync, so the overhead of the protocol is visible.
 * A benchmark, not a test. Usage: bench_sample [N]
 */
#include "worker/backend.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char src[] =
    "extern \"C\" __global__ void tiny(float *y, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2.0f * i; }\n";

static double now_us(void) { return kevo_now() * 1e6; }

int main(int argc, char **argv)
{
    struct kevo_backend b;
    struct kevo_buf err, log;
    struct kevo_module *m = NULL;
    struct kevo_sample smp;
    const char *entries[] = {"tiny"};
    int n = argc > 1 ? atoi(argv[1]) : 200;
    uint64_t y = 0;

    kevo_buf_init(&err, 1 << 16);
    kevo_buf_init(&log, 1 << 16);
    if (n < 1 || kevo_backend_open_cuda(0, &b, &err) != KEVO_OK) {
        fprintf(stderr, "no CUDA backend: %s\n", kevo_buf_str(&err));
        return 1;
    }
    struct kevo_compile_req req = {.path = "tiny.cu", .source = src, .source_len = strlen(src),
                                   .n_entries = 1, .entries = entries};
    if (b.ops->compile(b.ctx, &req, &m, &log) || b.ops->alloc(b.ctx, 4 << 20, &y))
        return 1;
    struct kevo_call call = {.entry = 0, .grid = {4096, 1, 1}, .block = {256, 1, 1},
                             .n_args = 2};
    call.args[0] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = y};
    call.args[1] = (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I32, .i = 1 << 20};
    int batches[] = {1, 25, 100};
    for (int f = 0; f < 2; f++) {
        for (int k = 0; k < 3; k++) {
            double t0 = now_us(), dev = 0;
            for (int i = 0; i < n; i++) {
                if (b.ops->time(b.ctx, m, &call, 1, batches[k], f, &smp, &err))
                    return 1;
                dev += smp.seconds;
            }
            printf("time() batch %3d flush %d: %8.1f us wall per sample, %8.2f us device "
                   "per call\n", batches[k], f, (now_us() - t0) / n, dev / n / batches[k] * 1e6);
        }
    }
    double t0 = now_us();
    for (int i = 0; i < n; i++)
        if (b.ops->launch(b.ctx, m, &call, 1, &err) || b.ops->sync(b.ctx, &err))
            return 1;
    printf("launch + sync:              %8.1f us wall\n", (now_us() - t0) / n);
    t0 = now_us();
    for (int i = 0; i < n; i++)
        if (b.ops->fill32(b.ctx, y, 0x7fa5a5a5u, 4 << 20) || b.ops->sync(b.ctx, &err))
            return 1;
    printf("fill32 4 MiB + sync:        %8.1f us wall\n", (now_us() - t0) / n);
    b.ops->free(b.ctx, y);
    b.ops->module_free(b.ctx, m);
    kevo_backend_close(&b);
    return 0;
}

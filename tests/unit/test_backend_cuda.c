/*
 * test_backend_cuda - the CUDA backend (src/backend_cuda.c, src/cudrv.c).
 *
 * Two parts. The first runs everywhere: error classification, messages, arch names and
 * argument marshalling need no GPU. The second also checks the verification ops (gen,
 * gen_check, seal, judge: kernels/harness.cu) against their host oracle in verify.c. The second needs a GPU and a driver: each of its tests
 * calls skip() when kevo_backend_open_cuda answers KEVO_ERR_NODEV (no libcuda.so.1, no
 * device), and really runs otherwise. KEVO_TEST_CUDA_DEVICE picks the device (default 0).
 *
 * The LAST test provokes an illegal address on purpose: it loses the CUDA context for the
 * rest of this process, so it must stay at the end of the list (the backend is only
 * destroyed after it, which must still work on a lost context).
 */
#include "testutil.h"

#include "worker/backend.h"
#include "worker/backend_cuda.h"
#include "worker/cudrv.h"
#include "core/dtype_conv.h"
#include "judge_cases.h"
#include "base/mem.h"
#include "core/verify.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- no GPU needed ---- */

static void test_classification(void **state)
{
    (void)state;
    assert_int_equal(kevo_cudrv_classify(CUDA_SUCCESS, 0), KEVO_OK);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_ILLEGAL_ADDRESS, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_LAUNCH_FAILED, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_ILLEGAL_INSTRUCTION, 1), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_MISALIGNED_ADDRESS, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_INVALID_ADDRESS_SPACE, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_INVALID_PC, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_HARDWARE_STACK_ERROR, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_ASSERT, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_LAUNCH_TIMEOUT, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_ECC_UNCORRECTABLE, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_CONTEXT_IS_DESTROYED, 0), KEVO_ERR_DEVICE);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 1), KEVO_ERR_LAUNCH);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_INVALID_IMAGE, 0), KEVO_ERR_LAUNCH);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_INVALID_VALUE, 1), KEVO_ERR_LAUNCH);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_INVALID_VALUE, 0), KEVO_ERR_CUDA);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_NO_DEVICE, 0), KEVO_ERR_NODEV);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_INVALID_DEVICE, 0), KEVO_ERR_NODEV);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_OUT_OF_MEMORY, 0), KEVO_ERR_CUDA);
    assert_int_equal(kevo_cudrv_classify(CUDA_ERROR_NOT_FOUND, 0), KEVO_ERR_CUDA);
    assert_true(kevo_cudrv_is_sticky(CUDA_ERROR_ILLEGAL_ADDRESS));
    assert_false(kevo_cudrv_is_sticky(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES));
}

static void test_check_message_names_call_and_place(void **state)
{
    struct kevo_buf msg;

    (void)state;
    kevo_buf_init(&msg, 4096);
    assert_int_equal(KEVO_CU(NULL, &msg, CUDA_SUCCESS), KEVO_OK);
    assert_int_equal(msg.len, 0);
    assert_int_equal(KEVO_CU_LAUNCH(NULL, &msg, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
                     KEVO_ERR_LAUNCH);
    assert_non_null(strstr(kevo_buf_str(&msg), "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"));
    assert_non_null(strstr(kevo_buf_str(&msg), "[code 701]"));
    assert_non_null(strstr(kevo_buf_str(&msg), "test_backend_cuda.c:"));
    kevo_buf_free(&msg);
}

static void test_arch_names(void **state)
{
    char a[32];

    (void)state;
    kevo_cudrv_arch_name(9, 0, a, sizeof a);
    assert_string_equal(a, "sm_90a");
    kevo_cudrv_arch_name(10, 0, a, sizeof a);
    assert_string_equal(a, "sm_100a");
    kevo_cudrv_arch_name(12, 0, a, sizeof a);
    assert_string_equal(a, "sm_120a");
    kevo_cudrv_arch_name(8, 9, a, sizeof a);
    assert_string_equal(a, "sm_89");
    kevo_cudrv_arch_name(8, 0, a, sizeof a);
    assert_string_equal(a, "sm_80");
    kevo_cudrv_arch_name(10, 3, a, sizeof a);
    assert_string_equal(a, "sm_103");
}

/* Marshal v into a parameter of size bytes; returns the status, bytes in out. */
static enum kevo_status marshal(struct kevo_val v, int size, uint64_t *out, struct kevo_buf *err)
{
    kevo_buf_reset(err);
    *out = 0;
    return kevo_backend_cuda_marshal_arg(&v, size, "kern", 2, out, err);
}

static struct kevo_val int_val(int64_t i)
{
    return (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = i};
}
static struct kevo_val flt_val(double f, enum kevo_dtype t)
{
    return (struct kevo_val){.kind = KEVO_VAL_FLOAT, .dtype = t, .f = f};
}

static void test_marshal_integers(void **state)
{
    struct kevo_buf err;
    uint64_t out;
    int32_t i32;
    int16_t i16;
    int8_t i8;

    (void)state;
    kevo_buf_init(&err, 4096);
    assert_int_equal(marshal(int_val(-5), 4, &out, &err), KEVO_OK);
    memcpy(&i32, &out, 4);
    assert_int_equal(i32, -5);
    assert_int_equal(marshal(int_val(INT32_MAX), 4, &out, &err), KEVO_OK);
    assert_int_equal(marshal(int_val((int64_t)1 << 40), 4, &out, &err), KEVO_ERR_LAUNCH);
    assert_non_null(strstr(kevo_buf_str(&err), "kernel 'kern'"));
    assert_non_null(strstr(kevo_buf_str(&err), "argument 2"));
    assert_non_null(strstr(kevo_buf_str(&err), "1099511627776"));
    assert_non_null(strstr(kevo_buf_str(&err), "4-byte"));
    /* Unsigned values above the signed maximum are refused (signedness is unknown). */
    assert_int_equal(marshal(int_val((int64_t)1 << 31), 4, &out, &err), KEVO_ERR_LAUNCH);
    assert_int_equal(marshal(int_val(INT32_MIN), 4, &out, &err), KEVO_OK);
    assert_int_equal(marshal(int_val((int64_t)INT32_MIN - 1), 4, &out, &err), KEVO_ERR_LAUNCH);
    assert_int_equal(marshal(int_val(-32768), 2, &out, &err), KEVO_OK);
    memcpy(&i16, &out, 2);
    assert_int_equal(i16, -32768);
    assert_int_equal(marshal(int_val(40000), 2, &out, &err), KEVO_ERR_LAUNCH);
    assert_int_equal(marshal(int_val(127), 1, &out, &err), KEVO_OK);
    memcpy(&i8, &out, 1);
    assert_int_equal(i8, 127);
    assert_int_equal(marshal(int_val(-129), 1, &out, &err), KEVO_ERR_LAUNCH);
    assert_int_equal(marshal(int_val(INT64_MIN), 8, &out, &err), KEVO_OK);
    assert_int_equal((int64_t)out, INT64_MIN);
    assert_int_equal(marshal(int_val(1), 3, &out, &err), KEVO_ERR_LAUNCH);
    assert_int_equal(marshal(int_val(1), 16, &out, &err), KEVO_ERR_LAUNCH);
    kevo_buf_free(&err);
}

static void test_marshal_pointers_and_floats(void **state)
{
    struct kevo_buf err;
    struct kevo_val p = {.kind = KEVO_VAL_PTR, .ptr = 0x7f0000001000ull};
    uint64_t out;
    float f;
    double d;

    (void)state;
    kevo_buf_init(&err, 4096);
    assert_int_equal(marshal(p, 8, &out, &err), KEVO_OK);
    assert_int_equal(out, 0x7f0000001000ull);
    assert_int_equal(marshal(p, 4, &out, &err), KEVO_ERR_LAUNCH);
    assert_non_null(strstr(kevo_buf_str(&err), "pointer"));
    assert_int_equal(marshal(flt_val(1.5, KEVO_F32), 4, &out, &err), KEVO_OK);
    memcpy(&f, &out, 4);
    assert_true(f == 1.5f);
    assert_int_equal(marshal(flt_val(0.1, KEVO_F64), 8, &out, &err), KEVO_OK);
    memcpy(&d, &out, 8);
    assert_true(d == 0.1);
    assert_int_equal(marshal(flt_val(1e300, KEVO_F32), 4, &out, &err), KEVO_ERR_LAUNCH);
    assert_non_null(strstr(kevo_buf_str(&err), "overflows"));
    assert_int_equal(marshal(flt_val(INFINITY, KEVO_F32), 4, &out, &err), KEVO_OK);
    assert_int_equal(marshal(flt_val(1.0, KEVO_F16), 2, &out, &err), KEVO_OK);
    assert_int_equal(out, 0x3c00);
    assert_int_equal(marshal(flt_val(1.0, KEVO_BF16), 2, &out, &err), KEVO_OK);
    assert_int_equal(out, 0x3f80);
    assert_int_equal(marshal(flt_val(65520.0, KEVO_F16), 2, &out, &err), KEVO_ERR_LAUNCH);
    assert_int_equal(marshal(flt_val(1.0, KEVO_F32), 1, &out, &err), KEVO_ERR_LAUNCH);
    /* a tensor map: a 128-byte parameter, its bytes left to the encoder */
    struct kevo_val tm = {.kind = KEVO_VAL_TMAP, .ptr = 0x7f0000001000ull};
    assert_int_equal(marshal(tm, 128, &out, &err), KEVO_OK);
    assert_int_equal(marshal(tm, 8, &out, &err), KEVO_ERR_LAUNCH);
    assert_non_null(strstr(kevo_buf_str(&err), "tensor map (128 bytes"));
    kevo_buf_free(&err);
}

static void test_half_and_bf16_rounding(void **state)
{
    (void)state;
    assert_int_equal(kevo_backend_cuda_half_bits(0.0), 0x0000);
    assert_int_equal(kevo_backend_cuda_half_bits(-0.0), 0x8000);
    assert_int_equal(kevo_backend_cuda_half_bits(-2.0), 0xc000);
    assert_int_equal(kevo_backend_cuda_half_bits(65504.0), 0x7bff);          /* largest finite */
    assert_int_equal(kevo_backend_cuda_half_bits(65519.0), 0x7bff);          /* rounds down */
    assert_int_equal(kevo_backend_cuda_half_bits(65520.0), 0x7c00);          /* rounds to inf */
    assert_int_equal(kevo_backend_cuda_half_bits(ldexp(1.0, -24)), 0x0001);  /* min subnormal */
    assert_int_equal(kevo_backend_cuda_half_bits(ldexp(1.0, -14)), 0x0400);  /* min normal */
    /* Ties go to the even neighbour: down from 1+2^-11, up from 1+3*2^-11. */
    assert_int_equal(kevo_backend_cuda_half_bits(1.0 + ldexp(1.0, -11)), 0x3c00);
    assert_int_equal(kevo_backend_cuda_half_bits(1.0 + 3 * ldexp(1.0, -11)), 0x3c02);
    assert_int_equal(kevo_backend_cuda_half_bits(-INFINITY), 0xfc00);
    assert_int_equal(kevo_backend_cuda_half_bits(NAN) & 0x7c00, 0x7c00);
    assert_true((kevo_backend_cuda_half_bits(NAN) & 0x03ff) != 0);
    assert_int_equal(kevo_backend_cuda_bf16_bits(3.140625), 0x4049);
    assert_int_equal(kevo_backend_cuda_bf16_bits(-1.0), 0xbf80);
    assert_int_equal(kevo_backend_cuda_bf16_bits(1e39), 0x7f80);             /* beyond bf16 max */
    assert_int_equal(kevo_backend_cuda_bf16_bits(ldexp(1.0, -133)), 0x0001); /* min subnormal */
}

static void test_driver_load_is_clean(void **state)
{
    const struct kevo_cudrv *d = NULL;
    struct kevo_buf err;

    (void)state;
    kevo_buf_init(&err, 4096);
    enum kevo_status st = kevo_cudrv_load(&d, &err);
    if (st == KEVO_OK) {
        assert_non_null(d);
        assert_true(d->driver_version >= 12000);
        assert_non_null(d->cuLaunchKernel);
    } else {
        assert_int_equal(st, KEVO_ERR_NODEV);    /* never a crash or another status */
        assert_null(d);
        assert_true(err.len > 0);
        /* Asking again answers the same without trying again. */
        kevo_buf_reset(&err);
        assert_int_equal(kevo_cudrv_load(&d, &err), KEVO_ERR_NODEV);
        assert_true(err.len > 0);
    }
    kevo_buf_free(&err);
}

/* ---- GPU: skipped without a driver or device ---- */

static struct kevo_backend g_be;
static int g_opened;          /* 1 open, -1 no GPU, 0 not tried */

/* The backend, opened once; skips the calling test when there is no GPU. */
static struct kevo_backend *gpu(void)
{
    if (g_opened == 0) {
        struct kevo_buf err;
        const char *dev = getenv("KEVO_TEST_CUDA_DEVICE");
        kevo_buf_init(&err, 1 << 16);
        enum kevo_status st = kevo_backend_open_cuda(dev ? (int)strtol(dev, NULL, 10) : 0,
                                                     &g_be, &err);
        if (st == KEVO_ERR_NODEV) {
            print_message("[ SKIP     ] no CUDA device: %s\n", kevo_buf_str(&err));
            g_opened = -1;
        } else {
            if (st)
                print_error("kevo_backend_open_cuda: %s\n", kevo_buf_str(&err));
            assert_int_equal(st, KEVO_OK);
            g_opened = 1;
        }
        kevo_buf_free(&err);
    }
    if (g_opened < 0)
        skip();
    return &g_be;
}

/* y[i] = a * x[i] + m, for the argument-width tests: params {8, 8, 4, 4, 8}. */
static const char k_axpb[] =
    "extern \"C\" __global__ void axpb(const float *x, float *y, int n, float a, long long m)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + (float)m;\n"
    "}\n"
    "extern \"C\" __global__ void big_smem(float *y)\n"
    "{\n"
    "    extern __shared__ float s[];\n"
    "    s[threadIdx.x * 200] = threadIdx.x;\n"
    "    __syncthreads();\n"
    "    y[threadIdx.x] = s[(blockDim.x - 1 - threadIdx.x) * 200];\n"
    "}\n"
    "extern \"C\" __global__ void bad_store(float *never_valid)\n"
    "{\n"
    "    never_valid[threadIdx.x] = 1.0f;\n"
    "}\n";

static struct kevo_module *g_mod;   /* k_axpb, compiled once */

static struct kevo_module *axpb_module(struct kevo_backend *b)
{
    static const char *const entries[] = {"axpb", "big_smem", "bad_store"};
    struct kevo_compile_req req = {.path = "tests/axpb.cu", .source = k_axpb,
                                   .source_len = sizeof k_axpb - 1, .n_entries = 3,
                                   .entries = entries};
    struct kevo_buf log;

    if (g_mod)
        return g_mod;
    kevo_buf_init(&log, 1 << 20);
    enum kevo_status st = b->ops->compile(b->ctx, &req, &g_mod, &log);
    if (st)
        print_error("compile: %s\n", kevo_buf_str(&log));
    assert_int_equal(st, KEVO_OK);
    kevo_buf_free(&log);
    return g_mod;
}

/* A launch of axpb over n elements. */
static struct kevo_call axpb_call(uint64_t x, uint64_t y, int64_t n, double a, int64_t m)
{
    struct kevo_call c = {.entry = 0, .grid = {(uint32_t)((n + 255) / 256), 1, 1},
                          .block = {256, 1, 1}, .n_args = 5};
    c.args[0] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = x};
    c.args[1] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = y};
    c.args[2] = int_val(n);
    c.args[3] = flt_val(a, KEVO_F32);
    c.args[4] = int_val(m);
    return c;
}

static void test_gpu_info(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_device_info in;

    (void)state;
    assert_int_equal(b->ops->info(b->ctx, &in), KEVO_OK);
    print_message("[ info     ] %s %s: %d SMs, L2 %lld B, %lld MiB, smem opt-in %lld, "
                  "%d/%d MHz, %d-bit\n", in.name, in.arch, in.n_sms, (long long)in.l2_bytes,
                  (long long)(in.mem_bytes >> 20), (long long)in.smem_per_block_optin,
                  in.clock_mhz, in.mem_clock_mhz, in.bus_width_bits);
    assert_true(in.n_sms > 0);
    assert_int_equal(strncmp(in.arch, "sm_", 3), 0);
    assert_true(in.cc_major >= 5);
    assert_true(in.name[0] != '\0');
    assert_true(in.l2_bytes > 0);
    assert_true(in.mem_bytes > 0);
    assert_true(in.smem_per_block_optin >= 48 * 1024);
    assert_true(in.smem_per_sm >= in.smem_per_block_optin);
    assert_true(in.max_threads_per_block >= 512);
    assert_true(in.clock_mhz > 0);
}

static void test_gpu_round_trip_and_fill(void **state)
{
    struct kevo_backend *b = gpu();
    const size_t n = 1 << 20;
    unsigned char *src = kevo_malloc(n), *dst = kevo_malloc(n);
    uint64_t buf = 0;

    (void)state;
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 131 + 7);
    assert_int_equal(b->ops->alloc(b->ctx, n, &buf), KEVO_OK);
    assert_true(buf != 0 && buf % 256 == 0);
    assert_int_equal(b->ops->upload(b->ctx, buf, src, n), KEVO_OK);
    assert_int_equal(b->ops->download(b->ctx, dst, buf, n), KEVO_OK);
    assert_memory_equal(src, dst, n);
    /* 10 bytes: two whole words and a 2-byte tail of the little-endian pattern. */
    assert_int_equal(b->ops->fill32(b->ctx, buf, 0xdeadbeefu, 10), KEVO_OK);
    assert_int_equal(b->ops->download(b->ctx, dst, buf, 16), KEVO_OK);
    const unsigned char want[10] = {0xef, 0xbe, 0xad, 0xde, 0xef, 0xbe, 0xad, 0xde, 0xef, 0xbe};
    assert_memory_equal(dst, want, 10);
    assert_memory_equal(dst + 10, src + 10, 6);   /* untouched past n */
    assert_int_equal(b->ops->fill32(b->ctx, buf + 2, 0, 4), KEVO_ERR_INVALID);   /* unaligned */
    b->ops->free(b->ctx, buf);
    b->ops->free(b->ctx, 0);
    kevo_free(src);
    kevo_free(dst);
}

/* Pinned host blocks: a round trip through them, reuse of a freed block for a similar
 * size, and host_free telling its own blocks from others. */
static void test_gpu_pinned_host_memory(void **state)
{
    struct kevo_backend *b = gpu();
    const size_t n = 3 << 20;
    void *p = NULL, *q = NULL;
    unsigned char other[16];
    uint64_t buf = 0;

    (void)state;
    assert_non_null(b->ops->host_alloc);
    assert_int_equal(b->ops->host_alloc(b->ctx, n, &p), KEVO_OK);
    assert_non_null(p);
    memset(p, 0x5a, n);
    assert_int_equal(b->ops->alloc(b->ctx, n, &buf), KEVO_OK);
    assert_int_equal(b->ops->upload(b->ctx, buf, p, n), KEVO_OK);
    memset(p, 0, n);
    assert_int_equal(b->ops->download(b->ctx, p, buf, n), KEVO_OK);
    assert_int_equal(((unsigned char *)p)[n - 1], 0x5a);
    assert_int_equal(b->ops->host_free(b->ctx, p), 1);
    assert_int_equal(b->ops->host_alloc(b->ctx, n - 4096, &q), KEVO_OK);
    assert_ptr_equal(p, q);                         /* kept pinned and handed out again */
    assert_int_equal(b->ops->host_free(b->ctx, q), 1);
    assert_int_equal(b->ops->host_free(b->ctx, q), 1);   /* twice: still ours, not free()'d */
    assert_int_equal(b->ops->host_free(b->ctx, other), 0);
    assert_int_equal(b->ops->host_free(b->ctx, NULL), 0);
    b->ops->free(b->ctx, buf);
}

static void test_gpu_kernel_computes(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_module *m = axpb_module(b);
    const int n = 100000;
    float *x = kevo_malloc(n * sizeof *x), *y = kevo_malloc(n * sizeof *y);
    uint64_t dx = 0, dy = 0;
    struct kevo_buf err;

    (void)state;
    kevo_buf_init(&err, 1 << 16);
    for (int i = 0; i < n; i++)
        x[i] = (float)(i % 1000) * 0.25f;
    assert_int_equal(b->ops->alloc(b->ctx, n * sizeof *x, &dx), KEVO_OK);
    assert_int_equal(b->ops->alloc(b->ctx, n * sizeof *y, &dy), KEVO_OK);
    assert_int_equal(b->ops->upload(b->ctx, dx, x, n * sizeof *x), KEVO_OK);
    assert_int_equal(b->ops->fill32(b->ctx, dy, 0x7fc00000u, n * sizeof *y), KEVO_OK);
    struct kevo_call c = axpb_call(dx, dy, n, 3.0, 1000000);
    enum kevo_status st = b->ops->launch(b->ctx, m, &c, 1, &err);
    if (st)
        print_error("launch: %s\n", kevo_buf_str(&err));
    assert_int_equal(st, KEVO_OK);
    assert_int_equal(b->ops->sync(b->ctx, &err), KEVO_OK);
    assert_int_equal(b->ops->download(b->ctx, y, dy, n * sizeof *y), KEVO_OK);
    for (int i = 0; i < n; i++)
        assert_true(y[i] == 3.0f * x[i] + 1000000.0f);
    b->ops->free(b->ctx, dx);
    b->ops->free(b->ctx, dy);
    kevo_free(x);
    kevo_free(y);
    kevo_buf_free(&err);
}

static void test_gpu_func_info(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_module *m = axpb_module(b);
    struct kevo_func_info fi;
    const int want[5] = {8, 8, 4, 4, 8};
    int blocks = 0;

    (void)state;
    assert_int_equal(b->ops->func_info(b->ctx, m, 0, &fi), KEVO_OK);
    assert_int_equal(fi.n_params, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(fi.param_size[i], want[i]);
    assert_true(fi.num_regs > 0);
    assert_int_equal(fi.static_smem, 0);
    assert_int_equal(fi.local_bytes, 0);
    assert_true(fi.max_threads_per_block >= 256);
    assert_int_equal(b->ops->func_info(b->ctx, m, 3, &fi), KEVO_ERR_NOTFOUND);
    assert_int_equal(b->ops->occupancy(b->ctx, m, 0, 256, 0, &blocks), KEVO_OK);
    assert_true(blocks > 0);
}

/* Launch a (bad) call; expect KEVO_ERR_LAUNCH and a message holding `needle`. */
static void expect_refused(struct kevo_backend *b, struct kevo_module *m, struct kevo_call c,
                           const char *needle)
{
    struct kevo_buf err;

    kevo_buf_init(&err, 1 << 16);
    assert_int_equal(b->ops->launch(b->ctx, m, &c, 1, &err), KEVO_ERR_LAUNCH);
    print_message("[ refused  ] %s\n", kevo_buf_str(&err));
    assert_non_null(strstr(kevo_buf_str(&err), needle));
    kevo_buf_free(&err);
}

static void test_gpu_refused_launches(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_module *m = axpb_module(b);
    struct kevo_device_info in;
    struct kevo_buf err;
    uint64_t dy = 0;

    (void)state;
    kevo_buf_init(&err, 1 << 16);
    assert_int_equal(b->ops->info(b->ctx, &in), KEVO_OK);
    assert_int_equal(b->ops->alloc(b->ctx, 4096, &dy), KEVO_OK);
    struct kevo_call c = axpb_call(dy, dy, (int64_t)1 << 40, 1.0, 0);   /* n is an int */
    c.grid[0] = 1;
    expect_refused(b, m, c, "argument 2");
    c = axpb_call(dy, dy, 16, 1.0, 0);
    c.n_args = 4;                                                     /* one missing */
    expect_refused(b, m, c, "4 arguments given, the kernel takes 5");
    c = axpb_call(dy, dy, 16, 1.0, 0);
    c.smem = (uint32_t)in.smem_per_block_optin + 1;                   /* above opt-in */
    expect_refused(b, m, c, "shared memory");
    c = axpb_call(dy, dy, 16, 1.0, 0);
    c.block[0] = 2048;                                                /* too many threads */
    expect_refused(b, m, c, "block.x = 2048");
    c.block[0] = 64;
    c.block[1] = 32;                                                  /* 2048 in 2-D */
    expect_refused(b, m, c, "2048 threads per block");
    c = axpb_call(dy, dy, 16, 1.0, 0);
    c.grid[1] = 0;                                                    /* empty grid */
    expect_refused(b, m, c, "grid.y");
    c = axpb_call(dy, dy, 16, 1.0, 0);
    c.entry = 7;
    expect_refused(b, m, c, "entry 7");
    /* The context is fine after refusals: a good launch still works. */
    c = axpb_call(dy, dy, 16, 1.0, 0);
    assert_int_equal(b->ops->launch(b->ctx, m, &c, 1, &err), KEVO_OK);
    assert_int_equal(b->ops->sync(b->ctx, &err), KEVO_OK);
    b->ops->free(b->ctx, dy);
    kevo_buf_free(&err);
}

static void test_gpu_large_dynamic_smem(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_module *m = axpb_module(b);
    struct kevo_device_info in;
    struct kevo_buf err;
    float y[256];
    uint64_t dy = 0;
    const uint32_t smem = 256 * 200 * sizeof(float);   /* 200 KiB: needs the opt-in */

    (void)state;
    assert_int_equal(b->ops->info(b->ctx, &in), KEVO_OK);
    if (in.smem_per_block_optin < (int64_t)smem)
        skip();
    kevo_buf_init(&err, 1 << 16);
    assert_int_equal(b->ops->alloc(b->ctx, sizeof y, &dy), KEVO_OK);
    struct kevo_call c = {.entry = 1, .grid = {1, 1, 1}, .block = {256, 1, 1},
                          .smem = smem, .n_args = 1};
    c.args[0] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = dy};
    enum kevo_status st = b->ops->launch(b->ctx, m, &c, 1, &err);
    if (st)
        print_error("launch: %s\n", kevo_buf_str(&err));
    assert_int_equal(st, KEVO_OK);
    assert_int_equal(b->ops->sync(b->ctx, &err), KEVO_OK);
    assert_int_equal(b->ops->download(b->ctx, y, dy, sizeof y), KEVO_OK);
    for (int i = 0; i < 256; i++)
        assert_true(y[i] == (float)(255 - i));
    b->ops->free(b->ctx, dy);
    kevo_buf_free(&err);
}

static void test_gpu_compile_errors(void **state)
{
    struct kevo_backend *b = gpu();
    static const char *const missing[] = {"not_there"};
    static const char *const entries[] = {"k"};
    const char *bad = "extern \"C\" __global__ void k(float *x) { x[0] = 1 }\n";
    struct kevo_compile_req req = {.path = "tests/axpb.cu", .source = k_axpb,
                                   .source_len = sizeof k_axpb - 1, .n_entries = 1,
                                   .entries = missing};
    struct kevo_module *m = NULL;
    struct kevo_buf log;

    (void)state;
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(b->ops->compile(b->ctx, &req, &m, &log), KEVO_ERR_COMPILE);
    assert_null(m);
    assert_non_null(strstr(kevo_buf_str(&log),
                           "kernel 'not_there' not found; is it extern \"C\"?"));
    kevo_buf_reset(&log);
    req = (struct kevo_compile_req){.path = "tests/bad.cu", .source = bad,
                                    .source_len = strlen(bad), .n_entries = 1,
                                    .entries = entries};
    assert_int_equal(b->ops->compile(b->ctx, &req, &m, &log), KEVO_ERR_COMPILE);
    assert_non_null(strstr(kevo_buf_str(&log), "tests/bad.cu(1)"));
    kevo_buf_free(&log);
}

/* One timed sample of `batch` passes; checks the result is plausible. */
static void timed(struct kevo_backend *b, struct kevo_module *m, const struct kevo_call *c,
                  int batch, int flush, struct kevo_sample *s)
{
    struct kevo_buf err;

    kevo_buf_init(&err, 1 << 16);
    enum kevo_status st = b->ops->time(b->ctx, m, c, 1, batch, flush, s, &err);
    if (st)
        print_error("time: %s\n", kevo_buf_str(&err));
    assert_int_equal(st, KEVO_OK);
    print_message("[ timing   ] batch %d flush %d: %.3f us total, %.3f us each, SM %.0f MHz\n",
                  batch, flush, s->seconds * 1e6, s->seconds * 1e6 / batch, s->sm_clock_mhz);
    assert_true(s->seconds > 0 && s->seconds < 5.0);
    assert_true(s->sm_clock_mhz > 200 && s->sm_clock_mhz < 5000);
    kevo_buf_free(&err);
}

static void test_gpu_time(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_module *m = axpb_module(b);
    const int n = 1 << 24;    /* 64 MiB per buffer: a few tens of microseconds */
    uint64_t dx = 0, dy = 0;
    struct kevo_sample s1, s2, s3;
    float y[4];

    (void)state;
    assert_int_equal(b->ops->alloc(b->ctx, (size_t)n * 4, &dx), KEVO_OK);
    assert_int_equal(b->ops->alloc(b->ctx, (size_t)n * 4, &dy), KEVO_OK);
    assert_int_equal(b->ops->fill32(b->ctx, dx, 0x3f800000u, (size_t)n * 4), KEVO_OK);  /* 1.0f */
    struct kevo_call c = axpb_call(dx, dy, n, 2.0, 5);
    timed(b, m, &c, 1, 1, &s1);
    timed(b, m, &c, 10, 1, &s2);
    timed(b, m, &c, 100, 0, &s3);          /* more launches than are queued behind the blocker */
    assert_true(s2.seconds > s1.seconds);  /* ten passes take longer than one */
    assert_true(s3.seconds > s2.seconds);
    assert_int_equal(b->ops->download(b->ctx, y, dy + 4 * 1000, sizeof y), KEVO_OK);
    for (int i = 0; i < 4; i++)
        assert_true(y[i] == 7.0f);         /* the timed runs did the work */
    struct kevo_sample bad;
    struct kevo_buf err;
    kevo_buf_init(&err, 1 << 16);
    c.n_args = 2;                          /* refused before anything is queued */
    assert_int_equal(b->ops->time(b->ctx, m, &c, 1, 5, 1, &bad, &err), KEVO_ERR_LAUNCH);
    c.n_args = 5;
    assert_int_equal(b->ops->time(b->ctx, m, &c, 1, 0, 1, &bad, &err), KEVO_ERR_INVALID);
    timed(b, m, &c, 3, 1, &s1);            /* and timing still works afterwards */
    /* fill calls run in plan order in every pass: [kernel, fill 2.0f] ends with 2.0,
     * [fill 0, kernel] with 7 again, and a 7-byte fill writes the pattern's bytes */
    struct kevo_call plan[2] = { c, kevo_call_fill(dy, (size_t)n * 4, 0x40000000u) };
    assert_int_equal(b->ops->time(b->ctx, m, plan, 2, 2, 1, &s1, &err), KEVO_OK);
    assert_int_equal(b->ops->download(b->ctx, y, dy + 4 * 1000, sizeof y), KEVO_OK);
    assert_true(y[0] == 2.0f && y[3] == 2.0f);
    plan[0] = kevo_call_fill(dy, (size_t)n * 4, 0);
    plan[1] = c;
    assert_int_equal(b->ops->time(b->ctx, m, plan, 2, 4, 1, &s1, &err), KEVO_OK);
    assert_int_equal(b->ops->download(b->ctx, y, dy + 4 * 1000, sizeof y), KEVO_OK);
    assert_true(y[0] == 7.0f && y[3] == 7.0f);
    unsigned char bytes[8] = { 0 };
    plan[0] = kevo_call_fill(dy, 7, 0x44332211u);
    assert_int_equal(b->ops->launch(b->ctx, m, plan, 1, &err), KEVO_OK);
    assert_int_equal(b->ops->sync(b->ctx, &err), KEVO_OK);
    assert_int_equal(b->ops->download(b->ctx, bytes, dy, 8), KEVO_OK);
    assert_memory_equal(bytes, "\x11\x22\x33\x44\x11\x22\x33", 7);
    kevo_buf_free(&err);
    b->ops->free(b->ctx, dx);
    b->ops->free(b->ctx, dy);
}

/* The two launch latencies measured when CUPTI opened: the isolated one that each timed
 * pass adds (as ncu counts a launch) and, for the record, the back-to-back one, which
 * overlaps the kernel before it. Both a microsecond or so on any recent GPU; none without
 * CUPTI, where events time whole batches. */
static void test_gpu_launch_latency(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_device_info info;
    (void)state;

    assert_int_equal(b->ops->info(b->ctx, &info), KEVO_OK);
    print_message("[ latency  ] isolated %.3f us, back to back %.3f us\n",
                  info.launch_gap_s * 1e6, info.launch_gap_b2b_s * 1e6);
    if (!info.kernel_clock) {
        assert_true(info.launch_gap_s == 0 && info.launch_gap_b2b_s == 0);
        return;
    }
    assert_true(info.launch_gap_s > 0.1e-6 && info.launch_gap_s < 20e-6);
    assert_true(info.launch_gap_b2b_s > 0 && info.launch_gap_b2b_s < 20e-6);
}

/* Counters through CUPTI (where the worker has it): the launch is counted whole, with the
 * kernel records' instrumentation stopped meanwhile, and the records restart afterwards,
 * so the next sample is timed by the kernels' own timestamps again. */
static void test_gpu_profile(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_device_info info;
    (void)state;

    assert_int_equal(b->ops->info(b->ctx, &info), KEVO_OK);
    if (!info.kernel_clock) {
        print_message("[ profile  ] no CUPTI in this process: nothing to check\n");
        return;
    }
    struct kevo_module *m = axpb_module(b);
    const int n = 1 << 22;
    uint64_t dx = 0, dy = 0;
    assert_int_equal(b->ops->alloc(b->ctx, (size_t)n * 4, &dx), KEVO_OK);
    assert_int_equal(b->ops->alloc(b->ctx, (size_t)n * 4, &dy), KEVO_OK);
    struct kevo_call c = axpb_call(dx, dy, n, 2.0, 5);
    const char *metrics[] = {"smsp__warps_launched.sum", "smsp__inst_executed.sum",
                             "gpu__time_duration.sum"};
    double v[3] = {0};
    int passes = 0;
    struct kevo_buf err;
    kevo_buf_init(&err, 1 << 16);
    enum kevo_status st = b->ops->profile(b->ctx, m, NULL, 0, &c, 1, metrics, 3, v, &passes,
                                          &err);
    if (st)
        print_error("profile: %s\n", kevo_buf_str(&err));
    assert_int_equal(st, KEVO_OK);
    print_message("[ profile  ] %d passes: %.0f warps, %.1f instructions per warp, %.0f ns\n",
                  passes, v[0], v[1] / v[0], v[2]);
    assert_true(passes >= 1);
    assert_true(v[0] == (double)n / 32);   /* every warp of the launch, counted once */
    assert_true(v[1] > v[0] && v[2] > 0);
    struct kevo_sample s;
    timed(b, m, &c, 3, 1, &s);
    assert_true(s.kernel_clock);           /* the kernel records are back */
    kevo_buf_free(&err);
    b->ops->free(b->ctx, dx);
    b->ops->free(b->ctx, dy);
}

/* ---- GPU: the verification ops against their host oracle (src/verify.c) ---- */

static uint64_t dev_alloc(struct kevo_backend *b, size_t bytes)
{
    uint64_t d = 0;
    assert_int_equal(b->ops->alloc(b->ctx, bytes, &d), KEVO_OK);
    return d;
}

static void dev_put(struct kevo_backend *b, uint64_t d, const void *p, size_t n)
{
    assert_int_equal(b->ops->upload(b->ctx, d, p, n), KEVO_OK);
}

static void dev_get(struct kevo_backend *b, void *p, uint64_t d, size_t n)
{
    assert_int_equal(b->ops->download(b->ctx, p, d, n), KEVO_OK);
}

/* Units in the last place between two elements of a narrow float type (sign-magnitude
 * bits mapped onto a line). */
static int64_t ulp_dist(enum kevo_dtype dt, uint64_t x, uint64_t y)
{
    const uint64_t sign = 1ull << (8 * kevo_dtype_size(dt) - 1);
    int64_t ox = x & sign ? -(int64_t)(x & ~sign) : (int64_t)x;
    int64_t oy = y & sign ? -(int64_t)(y & ~sign) : (int64_t)y;
    return ox > oy ? ox - oy : oy - ox;
}

/* Normal inputs may differ from the host in the last bit of log/cos/sin: within one unit
 * of the dtype, or (f64, where that bit is the dtype's) 1e-14 of the distribution's scale;
 * integers by one (a rounding tie moved). Everything else must match bit for bit. */
static void gen_close(const struct kevo_gen *g, const void *dev, const void *host, int64_t i)
{
    enum kevo_dtype dt = g->dtype;
    uint64_t db = kevo_dt_bits(dt, dev, i), hb = kevo_dt_bits(dt, host, i);
    double dv = kevo_dt_load(dt, dev, i), hv = kevo_dt_load(dt, host, i);
    int ok;

    if (g->kind != KEVO_INIT_NORMAL)
        ok = 0;
    else if (dt == KEVO_F64)
        ok = fabs(dv - hv) <= 1e-14 * (fabs(g->a) + fabs(g->b));
    else if (kevo_dtype_is_float(dt))
        ok = ulp_dist(dt, db, hb) <= 1;
    else
        ok = fabs(dv - hv) <= 1.0;
    if (!ok)
        fail_msg("gen %s kind %d (%g, %g | %lld, %lld) element %lld: device %#llx (%.17g), "
                 "host %#llx (%.17g)", kevo_dtype_name(dt), (int)g->kind, g->a, g->b,
                 (long long)g->lo, (long long)g->hi, (long long)i, (unsigned long long)db, dv,
                 (unsigned long long)hb, hv);
}

/* Device gen of n elements vs kevo_verify_generate, and gen_check of its own output. */
static void check_gen(struct kevo_backend *b, const struct kevo_gen *g, int64_t n)
{
    size_t bytes = (size_t)n * kevo_dtype_size(g->dtype);
    void *host = kevo_malloc(bytes), *got = kevo_malloc(bytes);
    uint64_t d = dev_alloc(b, bytes);
    int64_t first = 0, off = 0;
    struct kevo_buf err;

    kevo_buf_init(&err, 1 << 16);
    kevo_verify_generate(g, 0x5EED5EEDull, 7, host, n);
    enum kevo_status st = b->ops->gen(b->ctx, d, g, 0x5EED5EEDull, 7, n, &err);
    if (st)
        print_error("gen: %s\n", kevo_buf_str(&err));
    assert_int_equal(st, KEVO_OK);
    dev_get(b, got, d, bytes);
    for (int64_t i = 0; i < n; i++) {
        if (kevo_dt_bits(g->dtype, got, i) != kevo_dt_bits(g->dtype, host, i)) {
            gen_close(g, got, host, i);
            off++;
        }
    }
    if (off)
        print_message("[ gen      ] %s normal(%g,%g): %lld of %lld elements one unit off\n",
                      kevo_dtype_name(g->dtype), g->a, g->b, (long long)off, (long long)n);
    assert_int_equal(b->ops->gen_check(b->ctx, d, g, 0x5EED5EEDull, 7, n, &first, &err),
                     KEVO_OK);
    assert_int_equal(first, -1);
    b->ops->free(b->ctx, d);
    kevo_free(host);
    kevo_free(got);
    kevo_buf_free(&err);
}

static void test_gpu_gen_matches_host(void **state)
{
    struct kevo_backend *b = gpu();
    const int64_t n = 100001;             /* odd: the last normal pair is cut */
    const struct kevo_gen fl[] = {
        {.kind = KEVO_INIT_NORMAL, .a = 0, .b = 1},
        {.kind = KEVO_INIT_NORMAL, .a = 2, .b = 0.5},
        {.kind = KEVO_INIT_NORMAL, .a = 0, .b = 3e4},        /* past f16/fp8 range */
        {.kind = KEVO_INIT_UNIFORM, .a = -1, .b = 1},
        {.kind = KEVO_INIT_UNIFORM, .a = -1e6, .b = 1e6},    /* overflow and saturation */
        {.kind = KEVO_INIT_UNIFORM, .a = -1e-6, .b = 1e-6},  /* subnormals of the narrow types */
        {.kind = KEVO_INIT_RANDINT, .lo = -1000, .hi = 1000},
        {.kind = KEVO_INIT_RANDINT, .lo = -(1ll << 62), .hi = 1ll << 62},
    };
    const struct kevo_gen in[] = {
        {.kind = KEVO_INIT_RANDINT, .lo = -1000, .hi = 1000},  /* clamped for 8 bits, bool */
        {.kind = KEVO_INIT_RANDINT, .lo = INT64_MIN / 2, .hi = INT64_MAX / 2},
        {.kind = KEVO_INIT_UNIFORM, .a = -300.5, .b = 300.5},
        {.kind = KEVO_INIT_NORMAL, .a = 0, .b = 100},
    };

    (void)state;
    for (int d = 0; d < JC_N_DTYPES; d++) {
        int is_f = kevo_dtype_is_float(JC_DTYPES[d]);
        const struct kevo_gen *set = is_f ? fl : in;
        int cnt = is_f ? (int)(sizeof fl / sizeof fl[0]) : (int)(sizeof in / sizeof in[0]);
        for (int c = 0; c < cnt; c++) {
            struct kevo_gen g = set[c];
            g.dtype = JC_DTYPES[d];
            check_gen(b, &g, n);
        }
    }
}

/* gen_check names the smallest changed index. */
static void test_gpu_gen_check_finds_flips(void **state)
{
    struct kevo_backend *b = gpu();
    const struct kevo_gen gs[] = {
        {.kind = KEVO_INIT_NORMAL, .dtype = KEVO_F32, .a = 0, .b = 1},
        {.kind = KEVO_INIT_RANDINT, .dtype = KEVO_U8, .lo = 0, .hi = 256},
        {.kind = KEVO_INIT_UNIFORM, .dtype = KEVO_F64, .a = -1, .b = 1},
    };
    const int64_t n = 1000003;
    struct kevo_buf err;

    (void)state;
    kevo_buf_init(&err, 1 << 16);
    for (size_t c = 0; c < sizeof gs / sizeof gs[0]; c++) {
        size_t esz = kevo_dtype_size(gs[c].dtype);
        uint64_t d = dev_alloc(b, (size_t)n * esz), v = 0;
        int64_t first = 0;
        assert_int_equal(b->ops->gen(b->ctx, d, &gs[c], 42, 1, n, &err), KEVO_OK);
        const int64_t flips[] = {n - 1, 777777, 5};
        for (int f = 0; f < 3; f++) {
            dev_get(b, &v, d + (uint64_t)flips[f] * esz, esz);
            v ^= 1;
            dev_put(b, d + (uint64_t)flips[f] * esz, &v, esz);
            assert_int_equal(b->ops->gen_check(b->ctx, d, &gs[c], 42, 1, n, &first, &err),
                             KEVO_OK);
            assert_int_equal(first, flips[f]);
        }
        /* Another seed or stream is another tensor: element 0 already differs. */
        assert_int_equal(b->ops->gen_check(b->ctx, d, &gs[c], 43, 1, n, &first, &err), KEVO_OK);
        assert_int_equal(first, gs[c].dtype == KEVO_U8 ? first : 0);
        b->ops->free(b->ctx, d);
    }
    kevo_buf_free(&err);
}

/* seal equals the host's, changes the bits, and undoes itself; key 0 changes nothing. */
static void test_gpu_seal_round_trip(void **state)
{
    struct kevo_backend *b = gpu();
    const enum kevo_dtype dts[] = {KEVO_U8, KEVO_BF16, KEVO_F32, KEVO_I64};
    const int64_t n = 100003;
    const uint64_t key = 0xC0FFEE1234567891ull;
    struct kevo_buf err;

    (void)state;
    kevo_buf_init(&err, 1 << 16);
    for (size_t c = 0; c < sizeof dts / sizeof dts[0]; c++) {
        size_t bytes = (size_t)n * kevo_dtype_size(dts[c]);
        unsigned char *orig = kevo_malloc(bytes), *want = kevo_malloc(bytes);
        unsigned char *got = kevo_malloc(bytes);
        uint64_t d = dev_alloc(b, bytes);
        int64_t same = 0;
        for (size_t i = 0; i < bytes; i++)
            orig[i] = (unsigned char)(kevo_verify_mix64(i) >> 13);
        memcpy(want, orig, bytes);
        kevo_verify_seal(dts[c], want, n, key);
        dev_put(b, d, orig, bytes);
        assert_int_equal(b->ops->seal(b->ctx, d, dts[c], n, key, &err), KEVO_OK);
        dev_get(b, got, d, bytes);
        assert_memory_equal(got, want, bytes);
        for (int64_t i = 0; i < n; i++)
            same += kevo_dt_bits(dts[c], got, i) == kevo_dt_bits(dts[c], orig, i);
        assert_true(same < n / 100);
        assert_int_equal(b->ops->seal(b->ctx, d, dts[c], n, key, &err), KEVO_OK);
        dev_get(b, got, d, bytes);
        assert_memory_equal(got, orig, bytes);
        assert_int_equal(b->ops->seal(b->ctx, d, dts[c], n, 0, &err), KEVO_OK);
        dev_get(b, got, d, bytes);
        assert_memory_equal(got, orig, bytes);
        b->ops->free(b->ctx, d);
        kevo_free(orig);
        kevo_free(want);
        kevo_free(got);
    }
    kevo_buf_free(&err);
}

/* Doubles equal bit for bit, or both NaN. */
static void same_double(const char *what, double x, double y)
{
    if (!(x == y || (isnan(x) && isnan(y))) || signbit(x) != signbit(y))
        fail_msg("%s: device %.17g, host %.17g", what, x, y);
}

static void near_double(const char *what, double x, double y)
{
    if (!(x == y || fabs(x - y) <= 1e-12 * fabs(y)))
        fail_msg("%s: device %.17g, host %.17g", what, x, y);
}

/* Every field of the device judge equals the host oracle's (sums: within 1e-12). */
static void same_res(const struct kevo_judge_res *g, const struct kevo_judge_res *w)
{
    assert_int_equal(g->cmp.n, w->cmp.n);
    assert_int_equal(g->cmp.n_bad, w->cmp.n_bad);
    assert_int_equal(g->cmp.first_bad, w->cmp.first_bad);
    assert_int_equal(g->cmp.worst, w->cmp.worst);
    same_double("got", g->cmp.got, w->cmp.got);
    same_double("want", g->cmp.want, w->cmp.want);
    same_double("max_abs", g->cmp.max_abs, w->cmp.max_abs);
    same_double("max_rel", g->cmp.max_rel, w->cmp.max_rel);
    near_double("rel_l2", g->cmp.rel_l2, w->cmp.rel_l2);
    near_double("ref_norm", g->cmp.ref_norm, w->cmp.ref_norm);
    assert_int_equal(g->cmp.l2_fail, w->cmp.l2_fail);
    assert_int_equal(g->cmp.pass, w->cmp.pass);
    assert_int_equal(g->unw_a, w->unw_a);
    assert_int_equal(g->unw_a_first, w->unw_a_first);
    assert_int_equal(g->unw_b, w->unw_b);
    assert_int_equal(g->unw_b_first, w->unw_b_first);
    assert_int_equal(g->diff_first, w->diff_first);
    assert_int_equal(g->a_constant, w->a_constant);
    assert_int_equal(g->ref_spread, w->ref_spread);
    assert_int_equal(g->hash_a, w->hash_a);
    assert_int_equal(g->hash_ref, w->hash_ref);
}

/* One judge on the device against kevo_verify_judge, twice (the same bits both times). */
static void judge_case(struct kevo_backend *b, enum kevo_dtype dt, int64_t n, int variant,
                       int with_b)
{
    const size_t bytes = (size_t)n * kevo_dtype_size(dt), hb = bytes ? bytes : 1;
    void *a = kevo_malloc(hb), *bb = kevo_malloc(hb), *ref = kevo_malloc(hb);
    void *sealed = kevo_malloc(hb), *back = kevo_malloc(hb);
    struct kevo_judge_req rq = jc_req(dt, n);
    struct kevo_judge_res want, got, again;
    struct kevo_buf err;

    kevo_buf_init(&err, 1 << 16);
    jc_craft(dt, n, variant, a, bb, ref);
    kevo_verify_judge(&rq, a, with_b ? bb : NULL, ref, &want);
    memcpy(sealed, ref, bytes);
    kevo_verify_seal(dt, sealed, n, rq.ref_key);
    rq.a = dev_alloc(b, bytes);
    rq.b = with_b ? dev_alloc(b, bytes) : 0;
    rq.ref = dev_alloc(b, bytes);
    dev_put(b, rq.a, a, bytes);
    if (with_b)
        dev_put(b, rq.b, bb, bytes);
    dev_put(b, rq.ref, sealed, bytes);
    enum kevo_status st = b->ops->judge(b->ctx, &rq, &got, &err);
    if (st)
        print_error("judge: %s\n", kevo_buf_str(&err));
    assert_int_equal(st, KEVO_OK);
    print_message("[ judge    ] %-7s n=%-8lld variant %d b %d: n_bad %lld first %lld worst %lld "
                  "unw %lld/%lld diff %lld const %d spread %d\n", kevo_dtype_name(dt),
                  (long long)n, variant, with_b, (long long)got.cmp.n_bad,
                  (long long)got.cmp.first_bad, (long long)got.cmp.worst, (long long)got.unw_a,
                  (long long)got.unw_b, (long long)got.diff_first, got.a_constant,
                  got.ref_spread);
    same_res(&got, &want);
    assert_int_equal(b->ops->judge(b->ctx, &rq, &again, &err), KEVO_OK);
    assert_memory_equal(&again.cmp.rel_l2, &got.cmp.rel_l2, sizeof got.cmp.rel_l2);
    dev_get(b, back, rq.ref, bytes);
    assert_memory_equal(back, sealed, bytes);      /* still sealed */
    b->ops->free(b->ctx, rq.a);
    b->ops->free(b->ctx, rq.b);
    b->ops->free(b->ctx, rq.ref);
    kevo_free(a);
    kevo_free(bb);
    kevo_free(ref);
    kevo_free(sealed);
    kevo_free(back);
    kevo_buf_free(&err);
}

static void test_gpu_judge_matches_host(void **state)
{
    struct kevo_backend *b = gpu();

    (void)state;
    for (int d = 0; d < JC_N_DTYPES; d++) {
        for (int v = 0; v < JC_N_VARIANTS; v++)
            judge_case(b, JC_DTYPES[d], 20011, v, 1);
        judge_case(b, JC_DTYPES[d], 20011, 0, 0);
        judge_case(b, JC_DTYPES[d], 3, JC_MIXED, 1);       /* small: hashed */
        judge_case(b, JC_DTYPES[d], 1, JC_EXACT, 1);
        judge_case(b, JC_DTYPES[d], 0, JC_EXACT, 1);
    }
    /* Many blocks, each a chunk of its own. */
    judge_case(b, KEVO_F32, (1 << 22) + 12345, JC_MIXED, 1);
    judge_case(b, KEVO_BF16, (1 << 21) + 7, JC_MIXED, 1);
    judge_case(b, KEVO_I32, (1 << 21) + 7, JC_MIXED, 1);
    judge_case(b, KEVO_F64, (1 << 20) + 1, JC_EXACT, 1);
}

/* LAST: a sticky fault. Nothing CUDA works in this process afterwards. */
static void test_gpu_illegal_address_is_device_error(void **state)
{
    struct kevo_backend *b = gpu();
    struct kevo_module *m = axpb_module(b);
    struct kevo_buf err;
    uint64_t p = 0;

    (void)state;
    kevo_buf_init(&err, 1 << 16);
    struct kevo_call c = {.entry = 2, .grid = {1, 1, 1}, .block = {32, 1, 1}, .n_args = 1};
    c.args[0] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = 0x10};   /* never mapped */
    assert_int_equal(b->ops->launch(b->ctx, m, &c, 1, &err), KEVO_OK);
    assert_int_equal(b->ops->sync(b->ctx, &err), KEVO_ERR_DEVICE);
    print_message("[ fault    ] %s\n", kevo_buf_str(&err));
    assert_non_null(strstr(kevo_buf_str(&err), "CUDA_ERROR_ILLEGAL_ADDRESS"));
    /* Every later call answers at once with the same class. */
    kevo_buf_reset(&err);
    assert_int_equal(b->ops->launch(b->ctx, m, &c, 1, &err), KEVO_ERR_DEVICE);
    assert_int_equal(b->ops->alloc(b->ctx, 64, &p), KEVO_ERR_DEVICE);
    kevo_buf_free(&err);
}

static int teardown_gpu(void **state)
{
    (void)state;
    if (g_opened > 0) {
        g_be.ops->module_free(g_be.ctx, g_mod);   /* must not crash on a lost context */
        g_be.ops->destroy(g_be.ctx);
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classification),
        cmocka_unit_test(test_check_message_names_call_and_place),
        cmocka_unit_test(test_arch_names),
        cmocka_unit_test(test_marshal_integers),
        cmocka_unit_test(test_marshal_pointers_and_floats),
        cmocka_unit_test(test_half_and_bf16_rounding),
        cmocka_unit_test(test_driver_load_is_clean),
        cmocka_unit_test(test_gpu_info),
        cmocka_unit_test(test_gpu_round_trip_and_fill),
        cmocka_unit_test(test_gpu_pinned_host_memory),
        cmocka_unit_test(test_gpu_kernel_computes),
        cmocka_unit_test(test_gpu_func_info),
        cmocka_unit_test(test_gpu_refused_launches),
        cmocka_unit_test(test_gpu_large_dynamic_smem),
        cmocka_unit_test(test_gpu_compile_errors),
        cmocka_unit_test(test_gpu_time),
        cmocka_unit_test(test_gpu_profile),
        cmocka_unit_test(test_gpu_launch_latency),
        cmocka_unit_test(test_gpu_gen_matches_host),
        cmocka_unit_test(test_gpu_gen_check_finds_flips),
        cmocka_unit_test(test_gpu_seal_round_trip),
        cmocka_unit_test(test_gpu_judge_matches_host),
        /* keep last: it loses the CUDA context on purpose */
        cmocka_unit_test(test_gpu_illegal_address_is_device_error),
    };

    return cmocka_run_group_tests(tests, NULL, teardown_gpu);
}

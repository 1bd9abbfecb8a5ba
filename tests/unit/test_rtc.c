/*
 * test_nvrtc - NVRTC to CUBIN and the compile cache (src/nvrtc.c, src/nvrtc_cache.c).
 * Needs the CUDA toolkit's NVRTC and headers, but no GPU and no driver. Every test gets
 * a fresh KEVO_CACHE_DIR under a private temporary directory, removed at the end.
 */
#include "testutil.h"

#include "base/clock.h"
#include "base/mem.h"
#include "worker/rtc.h"
#include "worker/nvrtc_cache.h"
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.cu.inc"

static char g_root[256];   /* private temp dir of this run (short: paths are built on it) */
static int g_seq;

static const char k_simple[] =
    "extern \"C\" __global__ void scale(float *x, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        x[i] *= 2.0f;\n"
    "}\n";

/* ---- helpers ---- */

static void rm_tree(const char *path)
{
    struct stat sb;
    DIR *d;
    struct dirent *de;
    char child[PATH_MAX];

    if (lstat(path, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode)) {
        unlink(path);
        return;
    }
    d = opendir(path);
    for (de = d ? readdir(d) : NULL; de; de = readdir(d)) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(child, sizeof child, "%s/%s", path, de->d_name);
        rm_tree(child);
    }
    if (d)
        closedir(d);
    rmdir(path);
}

/* A fresh, not yet existing cache directory for this test; KEVO_CACHE_DIR points at it. */
static const char *fresh_cache(char *out, size_t n)
{
    snprintf(out, n, "%s/cache%d/sub", g_root, ++g_seq);
    setenv("KEVO_CACHE_DIR", out, 1);
    unsetenv("KEVO_NO_CACHE");
    kevo_nvrtc_cache_drop_memory();
    return out;
}

static struct kevo_compile_req req_of(const char *path, const char *src)
{
    struct kevo_compile_req r = {.path = path, .source = src, .source_len = strlen(src)};
    return r;
}

/* Compile; returns the status and fills the outputs (cubin freed by the caller). */
static enum kevo_status compile(const struct kevo_compile_req *r, const char *arch, void **cubin,
                                size_t *size, int *hit, struct kevo_buf *log)
{
    kevo_buf_reset(log);
    return kevo_rtc_compile(r, arch, cubin, size, log, hit);
}

/* The single *.cubin entry in dir into out; fails the test unless there is exactly one. */
static void only_entry(const char *dir, char *out, size_t n)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int count = 0;

    assert_non_null(d);
    for (de = readdir(d); de; de = readdir(d)) {
        size_t len = strlen(de->d_name);
        if (len > 6 && strcmp(de->d_name + len - 6, ".cubin") == 0) {
            int w = snprintf(out, n, "%s/%s", dir, de->d_name);
            assert_true(w > 0 && (size_t)w < n);
            count++;
        }
    }
    closedir(d);
    assert_int_equal(count, 1);
}

/* ---- compile ---- */

static void test_simple_kernel_is_cubin(void **state)
{
    char dir[PATH_MAX];
    struct kevo_compile_req r = req_of("tasks/scale.cu", k_simple);
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;
    int hit = -1;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, &hit, &log), KEVO_OK);
    assert_int_equal(hit, 0);
    assert_true(size > 64);
    assert_memory_equal(cubin, "\x7f" "ELF", 4);   /* CUBIN is an ELF image; PTX is text */
    kevo_free(cubin);
    kevo_buf_free(&log);
}

static void test_syntax_error_names_path_and_line(void **state)
{
    char dir[PATH_MAX];
    const char *src = "extern \"C\" __global__ void k(float *x)\n"
                      "{\n"
                      "    x[0] = 1.0f   /* missing semicolon */\n"
                      "}\n";
    struct kevo_compile_req r = req_of("tasks/broken_kernel.cu", src);
    struct kevo_buf log;
    void *cubin = (void *)1;
    size_t size = 7;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, NULL, &log), KEVO_ERR_COMPILE);
    assert_null(cubin);
    assert_int_equal(size, 0);
    assert_non_null(strstr(kevo_buf_str(&log), "tasks/broken_kernel.cu("));
    assert_non_null(strstr(kevo_buf_str(&log), "error"));
    /* NVRTC reports the error where the statement ends: line 3 or 4, never elsewhere. */
    assert_true(strstr(kevo_buf_str(&log), "broken_kernel.cu(3)") ||
                strstr(kevo_buf_str(&log), "broken_kernel.cu(4)"));
    kevo_buf_free(&log);
}

static void test_fp16_bf16_and_cccl_headers(void **state)
{
    char dir[PATH_MAX];
    const char *src =
        "#include <cuda_fp16.h>\n"
        "#include <cuda_bf16.h>\n"
        "#include <cuda/std/cstdint>\n"
        "extern \"C\" __global__ void mix(const __half *a, const __nv_bfloat16 *b, float *out,\n"
        "                                 cuda::std::int64_t n)\n"
        "{\n"
        "    cuda::std::int64_t i = blockIdx.x * (cuda::std::int64_t)blockDim.x + threadIdx.x;\n"
        "    if (i >= n)\n"
        "        return;\n"
        "    __half h = a[i] * a[i] + __float2half(1.0f);\n"
        "    __nv_bfloat16 g = b[i] + b[i] * __float2bfloat16(0.5f);\n"
        "    out[i] = __half2float(h) + __bfloat162float(g);\n"
        "}\n";
    struct kevo_compile_req r = req_of("tasks/mix.cu", src);
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    enum kevo_status st = compile(&r, "sm_90a", &cubin, &size, NULL, &log);
    if (st)
        print_error("log:\n%s\n", kevo_buf_str(&log));
    assert_int_equal(st, KEVO_OK);
    assert_true(size > 0);
    kevo_free(cubin);
    kevo_buf_free(&log);
}

static void test_defines_reach_the_source(void **state)
{
    char dir[PATH_MAX];
    const char *src = "#if BLOCK != 128\n#error BLOCK must be 128\n#endif\n"
                      "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] = BLOCK; }\n";
    const char *names[] = {"BLOCK"};
    int64_t good[] = {128}, bad[] = {64};
    struct kevo_compile_req r = req_of("tasks/def.cu", src);
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    r.n_defines = 1;
    r.define_names = names;
    r.define_values = good;
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, NULL, &log), KEVO_OK);
    kevo_free(cubin);
    r.define_values = bad;
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, NULL, &log), KEVO_ERR_COMPILE);
    assert_non_null(strstr(kevo_buf_str(&log), "BLOCK must be 128"));
    kevo_buf_free(&log);
}

static void test_nvcc_flag_spellings_are_accepted_and_matter(void **state)
{
    char dir[PATH_MAX];
    const char *src = "extern \"C\" __global__ void k(float *x, float y)\n"
                      "{ x[threadIdx.x] = expf(x[threadIdx.x]) / y + sqrtf(y); }\n";
    const char *flags[] = {"-use_fast_math", "-maxrregcount=32", "-ftz=true",
                           "-prec-div=false", "-prec-sqrt=false", "-fmad=true",
                           "-lineinfo", "-restrict", "-extra-device-vectorization"};
    struct kevo_compile_req r = req_of("tasks/fast.cu", src);
    struct kevo_buf log;
    void *plain = NULL, *fast = NULL;
    size_t n_plain = 0, n_fast = 0;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(&r, "sm_90a", &plain, &n_plain, NULL, &log), KEVO_OK);
    r.n_flags = (int)(sizeof flags / sizeof flags[0]);
    r.flags = flags;
    enum kevo_status st = compile(&r, "sm_90a", &fast, &n_fast, NULL, &log);
    if (st)
        print_error("log:\n%s\n", kevo_buf_str(&log));
    assert_int_equal(st, KEVO_OK);
    /* Fast math replaces expf/division/sqrt sequences: the code must differ. */
    assert_true(n_plain != n_fast || memcmp(plain, fast, n_plain) != 0);
    kevo_free(plain);
    kevo_free(fast);
    kevo_buf_free(&log);
}

static void test_refused_option_is_reported(void **state)
{
    char dir[PATH_MAX];
    const char *flags[] = {"--no-such-nvrtc-option"};
    struct kevo_compile_req r = req_of("tasks/scale.cu", k_simple);
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    r.n_flags = 1;
    r.flags = flags;
    enum kevo_status st = compile(&r, "sm_90a", &cubin, &size, NULL, &log);
    assert_true(st == KEVO_ERR_COMPILE || st == KEVO_ERR_NVRTC);
    assert_null(cubin);
    assert_non_null(strstr(kevo_buf_str(&log), "no-such-nvrtc-option"));
    kevo_buf_free(&log);
}

static void test_bad_requests(void **state)
{
    struct kevo_compile_req r = req_of("x.cu", k_simple);
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;

    (void)state;
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(&r, "", &cubin, &size, NULL, &log), KEVO_ERR_INVALID);
    assert_int_equal(compile(NULL, "sm_90a", &cubin, &size, NULL, &log), KEVO_ERR_INVALID);
    assert_true(log.len > 0);
    const char *null_flag[] = {NULL};
    r.n_flags = 1;
    r.flags = null_flag;
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, NULL, &log), KEVO_ERR_INVALID);
    r.n_flags = 0;
    r.n_defines = 1;                               /* names and values missing */
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, NULL, &log), KEVO_ERR_INVALID);
    r.n_defines = 0;
    /* A virtual arch yields PTX, which kevo never accepts as a CUBIN. */
    setenv("KEVO_NO_CACHE", "1", 1);
    enum kevo_status st = compile(&r, "compute_90", &cubin, &size, NULL, &log);
    unsetenv("KEVO_NO_CACHE");
    assert_int_not_equal(st, KEVO_OK);
    assert_null(cubin);
    kevo_buf_free(&log);
}

static void test_version_string(void **state)
{
    const char *v = kevo_rtc_version();
    int major = 0, minor = -1;

    (void)state;
    assert_int_equal(sscanf(v, "%d.%d", &major, &minor), 2);
    assert_true(major >= 11);
    assert_true(minor >= 0);
}

static void test_harness_kernels_compile(void **state)
{
    char dir[PATH_MAX];
    struct kevo_compile_req r = req_of("kernels/harness.cu", kevo_kernel_harness_cu);
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    enum kevo_status st = compile(&r, "sm_90a", &cubin, &size, NULL, &log);
    if (st)
        print_error("log:\n%s\n", kevo_buf_str(&log));
    assert_int_equal(st, KEVO_OK);
    assert_memory_equal(cubin, "\x7f" "ELF", 4);
    kevo_free(cubin);
    kevo_buf_free(&log);
}

/* ---- cache ---- */

static void test_second_compile_hits_with_identical_bytes(void **state)
{
    char dir[PATH_MAX];
    struct kevo_compile_req r = req_of("tasks/scale.cu", k_simple);
    struct kevo_nvrtc_cache_stats s0, s1;
    struct kevo_buf log;
    void *a = NULL, *b = NULL, *c = NULL;
    size_t na = 0, nb = 0, nc = 0;
    int hit = -1;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(&r, "sm_90a", &a, &na, &hit, &log), KEVO_OK);
    assert_int_equal(hit, 0);
    kevo_nvrtc_cache_stats(&s0);
    assert_int_equal(compile(&r, "sm_90a", &b, &nb, &hit, &log), KEVO_OK);   /* LRU */
    assert_int_equal(hit, 1);
    kevo_nvrtc_cache_drop_memory();
    assert_int_equal(compile(&r, "sm_90a", &c, &nc, &hit, &log), KEVO_OK);   /* disk */
    assert_int_equal(hit, 1);
    kevo_nvrtc_cache_stats(&s1);
    assert_int_equal(s1.mem_hits - s0.mem_hits, 1);
    assert_int_equal(s1.disk_hits - s0.disk_hits, 1);
    assert_int_equal(na, nb);
    assert_int_equal(na, nc);
    assert_memory_equal(a, b, na);
    assert_memory_equal(a, c, na);
    kevo_free(a);
    kevo_free(b);
    kevo_free(c);
    kevo_buf_free(&log);
}

/* Compile r on arch and say whether the cache answered. */
static int hit_of(const struct kevo_compile_req *r, const char *arch)
{
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;
    int hit = -1;

    kevo_buf_init(&log, 1 << 20);
    enum kevo_status st = compile(r, arch, &cubin, &size, &hit, &log);
    if (st)
        print_error("log:\n%s\n", kevo_buf_str(&log));
    assert_int_equal(st, KEVO_OK);
    kevo_free(cubin);
    kevo_buf_free(&log);
    return hit;
}

static void test_every_input_changes_the_key(void **state)
{
    char dir[PATH_MAX];
    const char *src = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] = V; }\n";
    const char *src2 = "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] = V;  }\n";
    const char *names[] = {"V"};
    int64_t v1[] = {1}, v2[] = {2};
    const char *flags[] = {"-use_fast_math"};
    struct kevo_compile_req r = req_of("tasks/k.cu", src);

    (void)state;
    fresh_cache(dir, sizeof dir);
    r.n_defines = 1;
    r.define_names = names;
    r.define_values = v1;
    assert_int_equal(hit_of(&r, "sm_90a"), 0);
    assert_int_equal(hit_of(&r, "sm_90a"), 1);
    r.define_values = v2;                          /* define value */
    assert_int_equal(hit_of(&r, "sm_90a"), 0);
    r.define_values = v1;
    r.n_flags = 1;                                 /* flag */
    r.flags = flags;
    assert_int_equal(hit_of(&r, "sm_90a"), 0);
    r.n_flags = 0;
    assert_int_equal(hit_of(&r, "sm_80"), 0);      /* arch */
    r.source = src2;                               /* one more space in the source */
    r.source_len = strlen(src2);
    assert_int_equal(hit_of(&r, "sm_90a"), 0);
    r.source = src;
    r.source_len = strlen(src);
    assert_int_equal(hit_of(&r, "sm_90a"), 1);     /* the original is still there */
}

static void test_key_separates_strings(void **state)
{
    const char *ab_c[] = {"ab", "c"}, *a_bc[] = {"a", "bc"}, *c_ab[] = {"c", "ab"};
    uint8_t k1[KEVO_NVRTC_KEY_BYTES], k2[KEVO_NVRTC_KEY_BYTES], k3[KEVO_NVRTC_KEY_BYTES];
    uint8_t k4[KEVO_NVRTC_KEY_BYTES], k5[KEVO_NVRTC_KEY_BYTES];

    (void)state;
    assert_int_equal(kevo_nvrtc_cache_key("13.0", "sm_90a", 2, ab_c, "s", 1, k1), KEVO_OK);
    assert_int_equal(kevo_nvrtc_cache_key("13.0", "sm_90a", 2, a_bc, "s", 1, k2), KEVO_OK);
    assert_int_equal(kevo_nvrtc_cache_key("13.0", "sm_90a", 2, c_ab, "s", 1, k3), KEVO_OK);
    assert_int_equal(kevo_nvrtc_cache_key("13.1", "sm_90a", 2, ab_c, "s", 1, k4), KEVO_OK);
    assert_int_equal(kevo_nvrtc_cache_key("13.0", "sm_90a", 2, ab_c, "s", 1, k5), KEVO_OK);
    assert_memory_not_equal(k1, k2, sizeof k1);    /* option boundaries count */
    assert_memory_not_equal(k1, k3, sizeof k1);    /* option order counts */
    assert_memory_not_equal(k1, k4, sizeof k1);    /* NVRTC version counts */
    assert_memory_equal(k1, k5, sizeof k1);        /* and the key is deterministic */
}

/* Overwrite the byte at offset `at` of path (negative: from the end). */
static void flip_byte(const char *path, long at)
{
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    struct stat sb;

    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &sb), 0);
    off_t off = at >= 0 ? at : sb.st_size + at;
    assert_int_equal(pread(fd, &c, 1, off), 1);
    c ^= 0x5a;
    assert_int_equal(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

/* Damage the single entry in dir with `damage`, then check a compile misses, gives the
 * right bytes, and leaves a good entry behind. */
static void check_damage_recovers(const char *dir, const struct kevo_compile_req *r,
                                  const void *good, size_t n_good, int damage)
{
    char entry[PATH_MAX];
    struct kevo_nvrtc_cache_stats s0, s1;
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;
    int hit = -1;

    char cdir[PATH_MAX];
    kevo_nvrtc_cache_dir(cdir, sizeof cdir);      /* <KEVO_CACHE_DIR>/cubin */
    assert_non_null(strstr(cdir, dir));
    only_entry(cdir, entry, sizeof entry);
    if (damage == 0)
        flip_byte(entry, -10);                           /* inside the cubin */
    else if (damage == 1)
        assert_int_equal(truncate(entry, 100), 0);        /* cut short */
    else
        flip_byte(entry, 0);                             /* magic */
    kevo_nvrtc_cache_drop_memory();
    kevo_nvrtc_cache_stats(&s0);
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(r, "sm_90a", &cubin, &size, &hit, &log), KEVO_OK);
    kevo_nvrtc_cache_stats(&s1);
    assert_int_equal(hit, 0);
    assert_int_equal(s1.bad_entries - s0.bad_entries, 1);
    assert_int_equal(s1.writes - s0.writes, 1);
    assert_int_equal(size, n_good);
    assert_memory_equal(cubin, good, n_good);
    kevo_free(cubin);
    kevo_nvrtc_cache_drop_memory();
    assert_int_equal(hit_of(r, "sm_90a"), 1);            /* rewritten and valid again */
    kevo_buf_free(&log);
}

static void test_corrupt_entries_are_ignored_and_rewritten(void **state)
{
    char dir[PATH_MAX];
    struct kevo_compile_req r = req_of("tasks/scale.cu", k_simple);
    struct kevo_buf log;
    void *good = NULL;
    size_t n_good = 0;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(&r, "sm_90a", &good, &n_good, NULL, &log), KEVO_OK);
    for (int damage = 0; damage < 3; damage++)
        check_damage_recovers(dir, &r, good, n_good, damage);
    kevo_free(good);
    kevo_buf_free(&log);
}

static void test_unwritable_cache_still_compiles(void **state)
{
    char file[512], dir[PATH_MAX];
    struct kevo_compile_req r = req_of("tasks/scale.cu", k_simple);
    struct kevo_nvrtc_cache_stats s0, s1;
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;

    (void)state;
    /* A directory under a regular file cannot be created, even by root. */
    snprintf(file, sizeof file, "%s/not-a-dir", g_root);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(dir, sizeof dir, "%s/cache", file);
    setenv("KEVO_CACHE_DIR", dir, 1);
    kevo_nvrtc_cache_drop_memory();
    kevo_nvrtc_cache_stats(&s0);
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, NULL, &log), KEVO_OK);
    kevo_nvrtc_cache_stats(&s1);
    assert_true(size > 0);
    assert_int_equal(s1.write_failures - s0.write_failures, 1);
    kevo_free(cubin);
    kevo_buf_free(&log);
}

static void test_no_cache_env_disables_both_levels(void **state)
{
    char dir[PATH_MAX];
    struct kevo_compile_req r = req_of("tasks/scale.cu", k_simple);

    (void)state;
    fresh_cache(dir, sizeof dir);
    setenv("KEVO_NO_CACHE", "1", 1);
    assert_int_equal(hit_of(&r, "sm_90a"), 0);
    assert_int_equal(hit_of(&r, "sm_90a"), 0);
    assert_int_equal(access(dir, F_OK), -1);      /* nothing was written */
    setenv("KEVO_NO_CACHE", "0", 1);              /* "0" means enabled */
    assert_int_equal(hit_of(&r, "sm_90a"), 0);
    assert_int_equal(hit_of(&r, "sm_90a"), 1);
    unsetenv("KEVO_NO_CACHE");
}

static void test_lru_evicts_to_disk(void **state)
{
    char dir[PATH_MAX];
    uint8_t key[KEVO_NVRTC_KEY_BYTES];
    struct kevo_nvrtc_cache_stats s0, s1;
    char payload[32];
    void *cubin = NULL;
    size_t size = 0;
    char *log = NULL;

    (void)state;
    fresh_cache(dir, sizeof dir);
    for (int i = 0; i < 70; i++) {                /* more than the 64 LRU slots */
        memset(key, 0, sizeof key);
        key[0] = (uint8_t)i;
        snprintf(payload, sizeof payload, "cubin number %d", i);
        kevo_nvrtc_cache_put(key, payload, strlen(payload) + 1, i % 2 ? "warning" : "");
    }
    kevo_nvrtc_cache_stats(&s0);
    memset(key, 0, sizeof key);                   /* entry 0: evicted, still on disk */
    assert_int_equal(kevo_nvrtc_cache_get(key, &cubin, &size, &log), KEVO_OK);
    assert_string_equal((char *)cubin, "cubin number 0");
    assert_string_equal(log, "");
    kevo_free(cubin);
    kevo_free(log);
    key[0] = 69;                                  /* the newest: still in memory */
    assert_int_equal(kevo_nvrtc_cache_get(key, &cubin, &size, &log), KEVO_OK);
    assert_string_equal((char *)cubin, "cubin number 69");
    assert_string_equal(log, "warning");          /* the log travels with the entry */
    kevo_free(cubin);
    kevo_free(log);
    key[0] = 200;                                 /* never stored */
    assert_int_equal(kevo_nvrtc_cache_get(key, &cubin, &size, &log), KEVO_ERR_NOTFOUND);
    assert_null(cubin);
    kevo_nvrtc_cache_stats(&s1);
    assert_int_equal(s1.disk_hits - s0.disk_hits, 1);
    assert_int_equal(s1.mem_hits - s0.mem_hits, 1);
    assert_int_equal(s1.misses - s0.misses, 1);
}

static void test_cached_path_survives_allocation_failures(void **state)
{
    char dir[PATH_MAX];
    struct kevo_compile_req r = req_of("tasks/scale.cu", k_simple);
    struct kevo_buf log;
    void *good = NULL, *cubin = NULL;
    size_t n_good = 0, size = 0;
    int saw_nomem = 0;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    assert_int_equal(compile(&r, "sm_90a", &good, &n_good, NULL, &log), KEVO_OK);
    for (long n = 1; n <= 40; n++) {
        kevo_mem_fail_after(n);
        enum kevo_status st = compile(&r, "sm_90a", &cubin, &size, NULL, &log);
        kevo_mem_fail_after(0);
        assert_true(st == KEVO_OK || st == KEVO_ERR_NOMEM);
        saw_nomem |= st == KEVO_ERR_NOMEM;
        if (st == KEVO_OK) {
            assert_int_equal(size, n_good);       /* never a wrong or partial binary */
            assert_memory_equal(cubin, good, n_good);
        } else {
            assert_null(cubin);
        }
        kevo_free(cubin);
        cubin = NULL;
    }
    assert_true(saw_nomem);
    kevo_free(good);
    kevo_buf_free(&log);
}

/* ---- timing ---- */

/* A row softmax of typical candidate size (~80 lines with the helpers). */
static const char k_softmax[] =
    "#include <cuda/std/cstdint>\n"
    "#ifndef THREADS\n#define THREADS 256\n#endif\n"
    "#define NEG_INF (-__int_as_float(0x7f800000))\n"
    "__device__ __forceinline__ float warp_max(float v)\n"
    "{\n"
    "    for (int o = 16; o > 0; o >>= 1)\n"
    "        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "    return v;\n"
    "}\n"
    "__device__ __forceinline__ float warp_sum(float v)\n"
    "{\n"
    "    for (int o = 16; o > 0; o >>= 1)\n"
    "        v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "    return v;\n"
    "}\n"
    "__device__ float block_max(float v, float *red)\n"
    "{\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    v = warp_max(v);\n"
    "    if (lane == 0)\n"
    "        red[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = threadIdx.x < THREADS / 32 ? red[lane] : NEG_INF;\n"
    "    v = warp_max(v);\n"
    "    __syncthreads();\n"
    "    return v;\n"
    "}\n"
    "__device__ float block_sum(float v, float *red)\n"
    "{\n"
    "    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    v = warp_sum(v);\n"
    "    if (lane == 0)\n"
    "        red[warp] = v;\n"
    "    __syncthreads();\n"
    "    v = threadIdx.x < THREADS / 32 ? red[lane] : 0.0f;\n"
    "    v = warp_sum(v);\n"
    "    __syncthreads();\n"
    "    return v;\n"
    "}\n"
    "extern \"C\" __global__ void __launch_bounds__(THREADS)\n"
    "softmax_rows(const float *__restrict__ x, float *__restrict__ y, int n)\n"
    "{\n"
    "    __shared__ float red[32];\n"
    "    const cuda::std::int64_t row = blockIdx.x;\n"
    "    const float4 *xr = reinterpret_cast<const float4 *>(x + row * n);\n"
    "    float4 *yr = reinterpret_cast<float4 *>(y + row * n);\n"
    "    const int n4 = n / 4;\n"
    "    float m = NEG_INF;\n"
    "    for (int i = threadIdx.x; i < n4; i += THREADS) {\n"
    "        float4 v = xr[i];\n"
    "        m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));\n"
    "    }\n"
    "    for (int i = 4 * n4 + threadIdx.x; i < n; i += THREADS)\n"
    "        m = fmaxf(m, x[row * n + i]);\n"
    "    m = block_max(m, red);\n"
    "    float s = 0.0f;\n"
    "    for (int i = threadIdx.x; i < n4; i += THREADS) {\n"
    "        float4 v = xr[i];\n"
    "        s += __expf(v.x - m) + __expf(v.y - m) + __expf(v.z - m) + __expf(v.w - m);\n"
    "    }\n"
    "    for (int i = 4 * n4 + threadIdx.x; i < n; i += THREADS)\n"
    "        s += __expf(x[row * n + i] - m);\n"
    "    s = block_sum(s, red);\n"
    "    const float inv = 1.0f / s;\n"
    "    for (int i = threadIdx.x; i < n4; i += THREADS) {\n"
    "        float4 v = xr[i];\n"
    "        v.x = __expf(v.x - m) * inv;\n"
    "        v.y = __expf(v.y - m) * inv;\n"
    "        v.z = __expf(v.z - m) * inv;\n"
    "        v.w = __expf(v.w - m) * inv;\n"
    "        yr[i] = v;\n"
    "    }\n"
    "    for (int i = 4 * n4 + threadIdx.x; i < n; i += THREADS)\n"
    "        y[row * n + i] = __expf(x[row * n + i] - m) * inv;\n"
    "}\n";

static void test_compile_time_uncached_vs_cached(void **state)
{
    char dir[PATH_MAX];
    struct kevo_compile_req r = req_of("tasks/softmax_rows.cu", k_softmax);
    const char *names[] = {"THREADS"};
    int64_t threads[] = {512};
    struct kevo_buf log;
    void *cubin = NULL;
    size_t size = 0;
    int hit = -1;
    double t0, t1, t2, t3;

    (void)state;
    fresh_cache(dir, sizeof dir);
    kevo_buf_init(&log, 1 << 20);
    r.n_defines = 1;
    r.define_names = names;
    r.define_values = threads;
    t0 = kevo_now();
    enum kevo_status st = compile(&r, "sm_90a", &cubin, &size, &hit, &log);
    t1 = kevo_now();
    if (st)
        print_error("log:\n%s\n", kevo_buf_str(&log));
    assert_int_equal(st, KEVO_OK);
    assert_int_equal(hit, 0);
    kevo_free(cubin);
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, &hit, &log), KEVO_OK);
    t2 = kevo_now();
    assert_int_equal(hit, 1);
    kevo_free(cubin);
    kevo_nvrtc_cache_drop_memory();
    assert_int_equal(compile(&r, "sm_90a", &cubin, &size, &hit, &log), KEVO_OK);
    t3 = kevo_now();
    assert_int_equal(hit, 1);
    kevo_free(cubin);
    printf("[ timing ] softmax (%zu-byte cubin): NVRTC %.1f ms, memory hit %.3f ms, "
           "disk hit %.3f ms\n", size, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3);
    assert_true(t2 - t1 < t1 - t0);
    assert_true(t3 - t2 < t1 - t0);
    kevo_buf_free(&log);
}

/* ---- main ---- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_kernel_is_cubin),
        cmocka_unit_test(test_syntax_error_names_path_and_line),
        cmocka_unit_test(test_fp16_bf16_and_cccl_headers),
        cmocka_unit_test(test_defines_reach_the_source),
        cmocka_unit_test(test_nvcc_flag_spellings_are_accepted_and_matter),
        cmocka_unit_test(test_refused_option_is_reported),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_version_string),
        cmocka_unit_test(test_harness_kernels_compile),
        cmocka_unit_test(test_second_compile_hits_with_identical_bytes),
        cmocka_unit_test(test_every_input_changes_the_key),
        cmocka_unit_test(test_key_separates_strings),
        cmocka_unit_test(test_corrupt_entries_are_ignored_and_rewritten),
        cmocka_unit_test(test_unwritable_cache_still_compiles),
        cmocka_unit_test(test_no_cache_env_disables_both_levels),
        cmocka_unit_test(test_lru_evicts_to_disk),
        cmocka_unit_test(test_cached_path_survives_allocation_failures),
        cmocka_unit_test(test_compile_time_uncached_vs_cached),
    };
    int rc;

    snprintf(g_root, sizeof g_root, "%s/kevo-test-nvrtc-XXXXXX",
             getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    rm_tree(g_root);
    return rc;
}

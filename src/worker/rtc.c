/*
 * rtc - CUDA source to CUBIN with NVRTC, in-process, behind the compile cache
 * (nvrtc_cache.c). See rtc.h for the contract and docs/internals/backend_cuda.md.
 *
 * Every compile gets the same fixed options (a real sm_XX[a] target so the result is a
 * CUBIN, never PTX; device code by default; C++17; line info; the toolkit's include dirs),
 * then -D<name>=<value> per define, then the request's flags with nvcc spellings mapped to
 * NVRTC's. The option list, exactly as passed to NVRTC, is part of the cache key.
 * The program is named after req->path, so the log points at the user's file and line.
 *
 * Thread-safety: kevo_rtc_compile may run on several threads at once (NVRTC programs
 * are independent; the cache has its own lock).
 */
#include "worker/rtc.h"

#include "base/log.h"
#include "base/mem.h"
#include "worker/nvrtc_cache.h"
#include <nvrtc.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KEVO_CUDA_HOME
#define KEVO_CUDA_HOME "/usr/local/cuda"
#endif

#define N_FIXED_OPTS 6      /* arch, -default-device, --std, -lineinfo, 2 x -I */

static char g_version[32] = "unknown";
static pthread_once_t g_version_once = PTHREAD_ONCE_INIT;

static void version_once(void)
{
    int major = 0, minor = 0;

    if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS)
        snprintf(g_version, sizeof g_version, "%d.%d", major, minor);
}

const char *kevo_rtc_version(void)
{
    pthread_once(&g_version_once, version_once);
    return g_version;
}

/* ---- options ---- */

/* The toolkit whose headers NVRTC sees: the first non-empty of $KEVO_CUDA_HOME,
 * $CUDA_HOME, $CUDA_PATH, then the build's KEVO_CUDA_HOME. */
static const char *cuda_home(void)
{
    static const char *const vars[] = {"KEVO_CUDA_HOME", "CUDA_HOME", "CUDA_PATH"};

    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return v;
    }
    return KEVO_CUDA_HOME;
}

/* nvcc spells these with one dash, NVRTC with two. `value`: the flag takes "=X". */
static const struct {
    const char *name;
    int value;
} g_dash_map[] = {
    {"use_fast_math", 0}, {"maxrregcount", 1}, {"ftz", 1}, {"prec-div", 1},
    {"prec-sqrt", 1}, {"fmad", 1}, {"restrict", 0}, {"extra-device-vectorization", 0},
};

/* The NVRTC spelling of flag (a new string, kevo_free), or NULL without memory. */
static char *map_flag(const char *flag)
{
    struct kevo_buf b;

    kevo_buf_init(&b, 4096);
    if (flag[0] == '-' && flag[1] != '-') {
        for (size_t i = 0; i < sizeof g_dash_map / sizeof g_dash_map[0]; i++) {
            size_t n = strlen(g_dash_map[i].name);
            if (strncmp(flag + 1, g_dash_map[i].name, n) != 0)
                continue;
            if (flag[1 + n] == '\0' || (g_dash_map[i].value && flag[1 + n] == '=')) {
                if (kevo_buf_addf(&b, "-%s", flag))
                    goto fail;
                return kevo_buf_take(&b);
            }
        }
    }
    if (kevo_buf_adds(&b, flag))
        goto fail;
    return kevo_buf_take(&b);
fail:
    kevo_buf_free(&b);
    return NULL;
}

struct opts {
    int n;
    char **v;
};

static void opts_free(struct opts *o)
{
    for (int i = 0; i < o->n; i++)
        kevo_free(o->v[i]);
    kevo_free(o->v);
    o->v = NULL;
    o->n = 0;
}

/* Append a formatted option; KEVO_ERR_NOMEM when out of memory. */
static enum kevo_status opts_addf(struct opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static enum kevo_status opts_addf(struct opts *o, const char *fmt, ...)
{
    struct kevo_buf b;
    enum kevo_status st;
    va_list ap;

    kevo_buf_init(&b, 1u << 16);
    va_start(ap, fmt);
    st = kevo_buf_vaddf(&b, fmt, ap);
    va_end(ap);
    if (st) {
        kevo_buf_free(&b);
        return st;
    }
    o->v[o->n] = kevo_buf_take(&b);
    if (!o->v[o->n])
        return KEVO_ERR_NOMEM;
    o->n++;
    return KEVO_OK;
}

/* The full option list for req on arch, in the order NVRTC gets it. */
static enum kevo_status build_opts(const struct kevo_compile_req *req, const char *arch,
                                   struct opts *o)
{
    enum kevo_status st = KEVO_OK;
    const char *home = cuda_home();

    o->n = 0;
    o->v = kevo_calloc((size_t)N_FIXED_OPTS + (size_t)req->n_defines + (size_t)req->n_flags,
                       sizeof *o->v);
    if (!o->v)
        return KEVO_ERR_NOMEM;
    st = opts_addf(o, "--gpu-architecture=%s", arch);   /* sm_*: CUBIN; compute_*: PTX */
    if (!st)
        st = opts_addf(o, "-default-device");
    if (!st)
        st = opts_addf(o, "--std=c++17");
    if (!st)
        st = opts_addf(o, "-lineinfo");
    if (!st)
        st = opts_addf(o, "-I%s/include", home);
    if (!st)   /* CUDA 13 moved CCCL here; cuda_fp16.h needs its <nv/target> */
        st = opts_addf(o, "-I%s/include/cccl", home);
    if (st)
        return st;
    for (int i = 0; i < req->n_defines; i++) {
        st = opts_addf(o, "-D%s=%" PRId64, req->define_names[i], req->define_values[i]);
        if (st)
            return st;
    }
    for (int i = 0; i < req->n_flags; i++) {
        o->v[o->n] = map_flag(req->flags[i]);
        if (!o->v[o->n])
            return KEVO_ERR_NOMEM;
        o->n++;
    }
    return KEVO_OK;
}

/* ---- compiling ---- */

static void log_add(struct kevo_buf *log, const char *text)
{
    if (text && *text)
        kevo_buf_say(log, "%s", text);
}

/* Say which option list NVRTC refused (it names the bad option only sometimes). */
static void log_options(struct kevo_buf *log, nvrtcResult r, const struct opts *o)
{
    kevo_buf_say(log, "nvrtc: %s; options were:", nvrtcGetErrorString(r));
    for (int i = 0; i < o->n; i++)
        kevo_buf_say(log, " %s", o->v[i]);
    kevo_buf_say(log, "\n");
}

/* Append "<what>: <NVRTC error text>" to log; the status for an NVRTC-side failure. */
static enum kevo_status nvrtc_fail(struct kevo_buf *log, const char *what, nvrtcResult r)
{
    if (log)
        kevo_buf_say(log, "%snvrtc: %s failed: %s\n",
                     log->len && log->data[log->len - 1] != '\n' ? "\n" : "", what,
                     nvrtcGetErrorString(r));
    return KEVO_ERR_NVRTC;
}

/* The program's log into *out (kevo_free; "" when empty). */
static enum kevo_status program_log(nvrtcProgram p, char **out)
{
    size_t n = 0;

    *out = NULL;
    if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n == 0)
        n = 1;
    *out = kevo_calloc(n, 1);
    if (!*out)
        return KEVO_ERR_NOMEM;
    if (n > 1 && nvrtcGetProgramLog(p, *out) != NVRTC_SUCCESS)
        (*out)[0] = '\0';
    return KEVO_OK;
}

/* Run NVRTC on req with options o. The program log is appended to *log and also returned
 * in *out_log (kevo_free, for the cache) whenever a program was compiled; kevo's own
 * messages follow it in *log. */
static enum kevo_status run_nvrtc(const struct kevo_compile_req *req, const struct opts *o,
                                  void **out_cubin, size_t *out_size, char **out_log,
                                  struct kevo_buf *log)
{
    enum kevo_status st = KEVO_OK;
    nvrtcProgram p = NULL;
    char *src = NULL;
    void *cubin = NULL;
    size_t size = 0;
    nvrtcResult r;

    src = kevo_malloc(req->source_len + 1);   /* NVRTC wants a NUL-terminated string */
    if (!src)
        return KEVO_ERR_NOMEM;
    memcpy(src, req->source, req->source_len);
    src[req->source_len] = '\0';
    r = nvrtcCreateProgram(&p, src, req->path ? req->path : "kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        st = r == NVRTC_ERROR_OUT_OF_MEMORY ? KEVO_ERR_NOMEM
                                            : nvrtc_fail(log, "nvrtcCreateProgram", r);
        goto out;
    }
    r = nvrtcCompileProgram(p, o->n, (const char *const *)o->v);
    st = program_log(p, out_log);
    if (st)
        goto out;
    log_add(log, *out_log);
    if (r == NVRTC_ERROR_COMPILATION) {
        st = KEVO_ERR_COMPILE;
        goto out;
    }
    if (r == NVRTC_ERROR_INVALID_OPTION) {
        /* The candidate's flags (or a define) were refused: a compile verdict too. */
        log_options(log, r, o);
        st = KEVO_ERR_COMPILE;
        goto out;
    }
    if (r != NVRTC_SUCCESS) {
        st = nvrtc_fail(log, "nvrtcCompileProgram", r);
        goto out;
    }
    r = nvrtcGetCUBINSize(p, &size);
    if (r != NVRTC_SUCCESS || size == 0) {
        st = nvrtc_fail(log, "nvrtcGetCUBINSize (is the arch a real sm_ target?)",
                        r != NVRTC_SUCCESS ? r : NVRTC_ERROR_INVALID_OPTION);
        goto out;
    }
    cubin = kevo_malloc(size);
    if (!cubin) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    r = nvrtcGetCUBIN(p, cubin);
    if (r != NVRTC_SUCCESS) {
        st = nvrtc_fail(log, "nvrtcGetCUBIN", r);
        goto out;
    }
    *out_cubin = cubin;
    *out_size = size;
    cubin = NULL;
out:
    if (p)
        nvrtcDestroyProgram(&p);
    kevo_free(src);
    kevo_free(cubin);
    return st;
}

/* Programmer errors in a request: caught here rather than crashing in build_opts. */
static int req_ok(const struct kevo_compile_req *req, const char *arch)
{
    if (!req || !req->source || !arch || !*arch || req->n_defines < 0 || req->n_flags < 0)
        return 0;
    if (req->n_defines > 0 && (!req->define_names || !req->define_values))
        return 0;
    if (req->n_flags > 0 && !req->flags)
        return 0;
    for (int i = 0; i < req->n_defines; i++) {
        if (!req->define_names[i] || !*req->define_names[i])
            return 0;
    }
    for (int i = 0; i < req->n_flags; i++) {
        if (!req->flags[i])
            return 0;
    }
    return 1;
}

enum kevo_status kevo_rtc_compile(const struct kevo_compile_req *req, const char *arch,
                                    void **out_cubin, size_t *out_size, struct kevo_buf *log,
                                    int *out_cache_hit)
{
    enum kevo_status st = KEVO_OK;
    struct opts o = {0, NULL};
    uint8_t key[KEVO_NVRTC_KEY_BYTES];
    int use_cache = kevo_nvrtc_cache_enabled();
    char *text = NULL;

    *out_cubin = NULL;
    *out_size = 0;
    if (out_cache_hit)
        *out_cache_hit = 0;
    if (!req_ok(req, arch)) {
        log_add(log, "nvrtc: invalid compile request (no source, no arch, or a NULL "
                     "define or flag)\n");
        return KEVO_ERR_INVALID;
    }
    st = build_opts(req, arch, &o);
    if (st)
        goto out;
    if (use_cache) {
        st = kevo_nvrtc_cache_key(kevo_rtc_version(), arch, o.n, (const char *const *)o.v,
                                  req->source, req->source_len, key);
        if (st)
            goto out;
        if (kevo_nvrtc_cache_get(key, out_cubin, out_size, &text) == KEVO_OK) {
            if (out_cache_hit)
                *out_cache_hit = 1;
            log_add(log, text);   /* the warnings of the compile that made the entry */
            goto out;
        }
    }
    st = run_nvrtc(req, &o, out_cubin, out_size, &text, log);
    if (!st && use_cache)
        kevo_nvrtc_cache_put(key, *out_cubin, *out_size, text);
out:
    kevo_free(text);
    opts_free(&o);
    return st;
}

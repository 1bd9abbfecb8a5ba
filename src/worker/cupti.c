/*
 * cupti - CUPTI loaded with dlopen: kernel timestamps from activity records and hardware
 * counters from the range profiler. See cupti.h for the contract.
 *
 * Activity records arrive in buffers CUPTI asks for and hands back (buf_requested,
 * buf_completed, possibly on CUPTI's own thread); the kernel records are copied into one
 * process-wide list under a mutex, which kevo_cupti_mark empties and kevo_cupti_kernels
 * reads, each after a forced flush with the device idle, so the list holds exactly the
 * kernels launched in between.
 */
#include "worker/cupti.h"

#include "base/log.h"
#include "base/mem.h"
#include <cupti_activity.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KEVO_CUDA_HOME
#define KEVO_CUDA_HOME "/usr/local/cuda"
#endif

/*
 * The profiler host API's parameter blocks. Its header (cupti_profiler_host.h) includes
 * C++'s <string>, so they are declared here, field for field as that header documents
 * them; CUPTI reads structSize to know which fields a caller passes.
 */
enum { HOST_RANGE_PROFILER = 0 };   /* CUPTI_PROFILER_TYPE_RANGE_PROFILER */
struct host_init {
    size_t structSize;
    void *pPriv;
    int profilerType;
    const char *pChipName;
    const uint8_t *pCounterAvailabilityImage;
    void *pHostObject;
};
struct host_deinit {
    size_t structSize;
    void *pPriv;
    void *pHostObject;
};
struct host_props {
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    const char *pMetricName;
    const char *pDescription, *pHwUnit, *pDimUnit;
    int metricType;
};
struct host_add {
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    const char **ppMetricNames;
    size_t numMetrics;
};
struct host_image_size {
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    size_t configImageSize;
};
struct host_image {
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    size_t configImageSize;
    uint8_t *pConfigImage;
};
struct host_eval {
    size_t structSize;
    void *pPriv;
    void *pHostObject;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t rangeIndex;
    const char **ppMetricNames;
    size_t numMetrics;
    double *pMetricValues;
};
#define HSIZE(t, f) (offsetof(struct t, f) + sizeof(((struct t *)0)->f))

/* The entry points: activity ones are required, the profiler's optional (CUDA 12.6+). */
#define ACT_FUNCS(X)                                                                     \
    X(cuptiGetResultString) X(cuptiActivityRegisterCallbacks) X(cuptiActivityEnable)    \
    X(cuptiActivityDisable) X(cuptiActivityFlushAll) X(cuptiActivityGetNextRecord)      \
    X(cuptiActivityGetNumDroppedRecords)
#define PROF_FUNCS(X)                                                                    \
    X(cuptiProfilerInitialize) X(cuptiDeviceGetChipName)                                 \
    X(cuptiProfilerGetCounterAvailability) X(cuptiRangeProfilerEnable)                   \
    X(cuptiRangeProfilerDisable) X(cuptiRangeProfilerGetCounterDataSize)                 \
    X(cuptiRangeProfilerCounterDataImageInitialize) X(cuptiRangeProfilerSetConfig)       \
    X(cuptiRangeProfilerStart) X(cuptiRangeProfilerStop) X(cuptiRangeProfilerDecodeData)  \
    X(cuptiRangeProfilerGetCounterDataInfo)
#define HOST_FUNCS(X)                                                                    \
    X(cuptiProfilerHostInitialize, host_init) X(cuptiProfilerHostDeinitialize, host_deinit) \
    X(cuptiProfilerHostGetMetricProperties, host_props)                                  \
    X(cuptiProfilerHostConfigAddMetrics, host_add)                                       \
    X(cuptiProfilerHostGetConfigImageSize, host_image_size)                              \
    X(cuptiProfilerHostGetConfigImage, host_image)                                       \
    X(cuptiProfilerHostEvaluateToGpuValues, host_eval)

#define DECL_FN(name) __typeof__(name) *name;
#define DECL_HOST(name, type) CUptiResult (*name)(struct type *);
static struct {
    ACT_FUNCS(DECL_FN)
    PROF_FUNCS(DECL_FN)
    HOST_FUNCS(DECL_HOST)
    int prof;                 /* every profiler entry point resolved */
} api;
#undef DECL_FN
#undef DECL_HOST

struct kevo_cupti {
    CUcontext ctx;
    int device;
    int prof_init;            /* cuptiProfilerInitialize done */
};

/* The kernel records since the last mark (process-wide: CUPTI's callbacks are). */
#define ACT_BUF_BYTES ((size_t)1 << 20)
#define MAX_RECORDS (1 << 22)
static struct {
    pthread_mutex_t mu;
    struct kevo_cupti_kernel *k;
    int n, cap;
    int lost;                 /* records dropped or not kept: the list is incomplete */
} rec = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- messages ---- */

static enum kevo_status say(struct kevo_buf *err, const char *call, CUptiResult r)
{
    const char *s = NULL;

    if (!api.cuptiGetResultString || api.cuptiGetResultString(r, &s) != CUPTI_SUCCESS)
        s = NULL;
    kevo_buf_say(err, "CUPTI: %s: %s [code %d]", call, s ? s : "error", (int)r);
    return KEVO_ERR_CUDA;
}
#define CHECK(call, params) \
    do { CUptiResult r_ = api.call(params); if (r_ != CUPTI_SUCCESS) return say(err, #call, r_); } while (0)

/* ---- loading ---- */

static int resolve(void *lib, const char *name, void *slot)
{
    void *sym = dlsym(lib, name);
    memcpy(slot, &sym, sizeof sym);   /* C11 has no object-to-function pointer cast */
    return sym ? 0 : -1;
}

static int resolve_all(void *lib, const char **missing)
{
#define RES_FN(name) if (resolve(lib, #name, &api.name)) { *missing = #name; return -1; }
    ACT_FUNCS(RES_FN)
    api.prof = 1;
#undef RES_FN
#define RES_OPT(name) if (resolve(lib, #name, &api.name)) api.prof = 0;
#define RES_HOST(name, type) RES_OPT(name)
    PROF_FUNCS(RES_OPT)
    HOST_FUNCS(RES_HOST)
#undef RES_OPT
#undef RES_HOST
    return 0;
}

/* dlopen libcupti once; the outcome is kept (kevo_buf message included). */
static enum kevo_status load(struct kevo_buf *err)
{
    static int done;
    static enum kevo_status st = KEVO_ERR_NOTFOUND;
    static char msg[512];
    const char *env = getenv("KEVO_CUPTI"), *missing = NULL;
    const char *paths[] = { env, "libcupti.so.13", "libcupti.so", KEVO_CUDA_HOME "/lib64/libcupti.so",
                            KEVO_CUDA_HOME "/extras/CUPTI/lib64/libcupti.so",
                            "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so" };
    void *lib = NULL;

    if (done)
        goto out;
    done = 1;
    if (env && (!strcmp(env, "0") || !strcmp(env, "off"))) {
        snprintf(msg, sizeof msg, "CUPTI disabled (KEVO_CUPTI=%s)", env);
        goto out;
    }
    for (size_t i = env ? 0 : 1; i < sizeof paths / sizeof *paths && !lib; i++) {
        lib = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL);
        if (env)   /* a path given is the only one tried */
            break;
    }
    if (!lib) {
        snprintf(msg, sizeof msg, "no libcupti (%s%s)", env ? "KEVO_CUPTI=" : "searched the loader path and ",
                 env ? env : KEVO_CUDA_HOME);
        goto out;
    }
    if (resolve_all(lib, &missing)) {
        snprintf(msg, sizeof msg, "libcupti lacks %s", missing);
        st = KEVO_ERR_CUDA;
        goto out;
    }
    st = KEVO_OK;
out:
    if (st)
        kevo_buf_say(err, "%s", msg);
    return st;
}

/* ---- activity records ---- */

static void CUPTIAPI buf_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = kevo_malloc(ACT_BUF_BYTES);   /* 16-byte aligned: CUPTI needs 8 */
    *size = *buffer ? ACT_BUF_BYTES : 0;
    *max_records = 0;
}

/* Keep one kernel record (rec.mu held). */
static void keep(const CUpti_ActivityKernel10 *k)
{
    if (rec.n == rec.cap) {
        int cap = rec.cap ? 2 * rec.cap : 4096;
        struct kevo_cupti_kernel *m = cap <= MAX_RECORDS
                                          ? kevo_reallocarray(rec.k, (size_t)cap, sizeof *m) : NULL;
        if (!m) {
            rec.lost = 1;
            return;
        }
        rec.k = m;
        rec.cap = cap;
    }
    rec.k[rec.n++] = (struct kevo_cupti_kernel){ .start = k->start, .end = k->end,
                                                 .corr = k->correlationId };
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                   size_t valid)
{
    CUpti_Activity *r = NULL;
    size_t dropped = 0;

    (void)size;
    pthread_mutex_lock(&rec.mu);
    while (buf && api.cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        /* only fields every record version since CUDA 11 has at the same offsets */
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL)
            keep((const CUpti_ActivityKernel10 *)(const void *)r);
    }
    if (api.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        rec.lost = 1;
    pthread_mutex_unlock(&rec.mu);
    kevo_free(buf);
}

enum kevo_status kevo_cupti_open(CUcontext ctx, int device, struct kevo_cupti **out,
                                 struct kevo_buf *err)
{
    enum kevo_status st = load(err);
    CUptiResult r;

    *out = NULL;
    if (st)
        return st;
    r = api.cuptiActivityRegisterCallbacks(buf_requested, buf_completed);
    if (r != CUPTI_SUCCESS)
        return say(err, "cuptiActivityRegisterCallbacks", r);
    r = api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS)
        return say(err, "cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    *out = kevo_calloc(1, sizeof **out);
    if (!*out) {
        (void)api.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        return KEVO_ERR_NOMEM;
    }
    (*out)->ctx = ctx;
    (*out)->device = device;
    return KEVO_OK;
}

void kevo_cupti_close(struct kevo_cupti *c)
{
    if (!c)
        return;
    (void)api.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    (void)api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&rec.mu);
    kevo_free(rec.k);
    rec.k = NULL;
    rec.n = rec.cap = rec.lost = 0;
    pthread_mutex_unlock(&rec.mu);
    kevo_free(c);
}

enum kevo_status kevo_cupti_trace(struct kevo_cupti *c, int on, struct kevo_buf *err)
{
    CUptiResult r;

    (void)c;
    if (on) {
        r = api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        return r == CUPTI_SUCCESS ? KEVO_OK : say(err, "cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    }
    r = api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS)
        return say(err, "cuptiActivityFlushAll", r);
    r = api.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    return r == CUPTI_SUCCESS ? KEVO_OK : say(err, "cuptiActivityDisable(CONCURRENT_KERNEL)", r);
}

enum kevo_status kevo_cupti_mark(struct kevo_cupti *c, struct kevo_buf *err)
{
    CUptiResult r = api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);

    (void)c;
    pthread_mutex_lock(&rec.mu);
    rec.n = 0;
    rec.lost = 0;
    pthread_mutex_unlock(&rec.mu);
    return r == CUPTI_SUCCESS ? KEVO_OK : say(err, "cuptiActivityFlushAll", r);
}

static int by_corr(const void *a, const void *b)
{
    uint32_t x = ((const struct kevo_cupti_kernel *)a)->corr;
    uint32_t y = ((const struct kevo_cupti_kernel *)b)->corr;
    return (x > y) - (x < y);
}

enum kevo_status kevo_cupti_kernels(struct kevo_cupti *c, const struct kevo_cupti_kernel **out,
                                    int *n, struct kevo_buf *err)
{
    CUptiResult r = api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    enum kevo_status st = KEVO_OK;

    (void)c;
    *out = NULL;
    *n = 0;
    if (r != CUPTI_SUCCESS)
        return say(err, "cuptiActivityFlushAll", r);
    pthread_mutex_lock(&rec.mu);
    if (rec.lost) {
        kevo_buf_say(err, "CUPTI: kernel records were dropped");
        st = KEVO_ERR_CUDA;
    } else {
        /* correlation ids follow the launch calls; records may come back in any order */
        qsort(rec.k, (size_t)rec.n, sizeof *rec.k, by_corr);
        *out = rec.k;
        *n = rec.n;
    }
    pthread_mutex_unlock(&rec.mu);
    return st;
}

double kevo_cupti_spans(const struct kevo_cupti_kernel *k, int n, const int *first,
                        const int *last, int n_pass, double launch_s)
{
    double ns = 0, passes = 0;

    for (int p = 0; p < n_pass; p++) {
        if (first[p] < 0)
            continue;
        if (first[p] >= n || last[p] < first[p] || last[p] >= n ||
            k[last[p]].end < k[first[p]].start)
            return -1;
        ns += (double)(k[last[p]].end - k[first[p]].start);
        passes++;
    }
    return ns * 1e-9 + passes * launch_s;
}

double kevo_cupti_gap(const struct kevo_cupti_kernel *k, int from, int to)
{
    double *g = kevo_calloc((size_t)(to > from ? to - from : 1), sizeof *g), m = -1;
    int n = 0;

    for (int i = from + 1; g && i < to; i++)
        g[n++] = k[i].start >= k[i - 1].end ? (double)(k[i].start - k[i - 1].end) : 0.0;
    for (int i = 1; i < n; i++) {   /* insertion sort: a few dozen gaps */
        double v = g[i];
        int j = i - 1;
        for (; j >= 0 && g[j] > v; j--)
            g[j + 1] = g[j];
        g[j + 1] = v;
    }
    if (n)
        m = (n % 2 ? g[n / 2] : (g[n / 2 - 1] + g[n / 2]) / 2) * 1e-9;
    kevo_free(g);
    return m;
}

static int plausible_latency(double s) { return s >= 0 && s < 1e-4; }

double kevo_cupti_pick_latency(double iso_s, double b2b_s)
{
    if (!plausible_latency(b2b_s))
        return -1;
    return plausible_latency(iso_s) ? iso_s : b2b_s;
}

/* ---- the range profiler ---- */

struct kevo_cupti_prof {
    struct kevo_cupti *c;
    CUpti_RangeProfiler_Object *obj;
    void *host;
    int n_metrics, n_kept, n_ranges;
    const char **kept;        /* [n_kept] borrowed names */
    int *idx;                 /* [n_kept] their index among the caller's */
    double *vals;             /* [n_kept] */
    uint8_t *avail, *config, *data;
    size_t config_size, data_size;
};

/* The host object for this device's chip and counter availability. */
static enum kevo_status host_open(struct kevo_cupti_prof *p, struct kevo_buf *err)
{
    CUpti_Device_GetChipName_Params chip = { .structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE };
    CUpti_Profiler_GetCounterAvailability_Params av = {
        .structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE };
    struct host_init hi = { .structSize = HSIZE(host_init, pHostObject) };

    if (!p->c->prof_init) {
        CUpti_Profiler_Initialize_Params ip = { .structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE };
        CHECK(cuptiProfilerInitialize, &ip);
        p->c->prof_init = 1;
    }
    chip.deviceIndex = (size_t)p->c->device;
    CHECK(cuptiDeviceGetChipName, &chip);
    av.ctx = p->c->ctx;
    CHECK(cuptiProfilerGetCounterAvailability, &av);
    p->avail = kevo_malloc(av.counterAvailabilityImageSize ? av.counterAvailabilityImageSize : 1);
    if (!p->avail)
        return KEVO_ERR_NOMEM;
    av.pCounterAvailabilityImage = p->avail;
    CHECK(cuptiProfilerGetCounterAvailability, &av);
    hi.profilerType = HOST_RANGE_PROFILER;
    hi.pChipName = chip.pChipName;
    hi.pCounterAvailabilityImage = p->avail;
    CHECK(cuptiProfilerHostInitialize, &hi);
    p->host = hi.pHostObject;
    return KEVO_OK;
}

/* Keep the metrics the chip knows, then the config image for them. */
static enum kevo_status host_config(struct kevo_cupti_prof *p, const char *const *metrics,
                                    struct kevo_buf *err)
{
    struct host_add ad = { .structSize = HSIZE(host_add, numMetrics) };
    struct host_image_size is = { .structSize = HSIZE(host_image_size, configImageSize) };
    struct host_image im = { .structSize = HSIZE(host_image, pConfigImage) };

    for (int i = 0; i < p->n_metrics; i++) {
        struct host_props pr = { .structSize = HSIZE(host_props, metricType) };
        pr.pHostObject = p->host;
        pr.pMetricName = metrics[i];
        if (api.cuptiProfilerHostGetMetricProperties(&pr) != CUPTI_SUCCESS) {
            KEVO_DEBUG("cupti: metric %s is not known on this device", metrics[i]);
            continue;
        }
        p->kept[p->n_kept] = metrics[i];
        p->idx[p->n_kept++] = i;
    }
    if (!p->n_kept) {
        kevo_buf_say(err, "CUPTI: none of the %d metrics is known on this device", p->n_metrics);
        return KEVO_ERR_NOTFOUND;
    }
    ad.pHostObject = p->host;
    ad.ppMetricNames = p->kept;
    ad.numMetrics = (size_t)p->n_kept;
    CHECK(cuptiProfilerHostConfigAddMetrics, &ad);
    is.pHostObject = p->host;
    CHECK(cuptiProfilerHostGetConfigImageSize, &is);
    p->config_size = is.configImageSize;
    p->config = kevo_malloc(p->config_size ? p->config_size : 1);
    if (!p->config)
        return KEVO_ERR_NOMEM;
    im.pHostObject = p->host;
    im.configImageSize = p->config_size;
    im.pConfigImage = p->config;
    CHECK(cuptiProfilerHostGetConfigImage, &im);
    return KEVO_OK;
}

/* The range profiler on the context, its counter data image, and the configuration. */
static enum kevo_status target_config(struct kevo_cupti_prof *p, struct kevo_buf *err)
{
    CUpti_RangeProfiler_Enable_Params en = { .structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE };
    CUpti_RangeProfiler_GetCounterDataSize_Params sz = {
        .structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE };
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ci = {
        .structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE };
    CUpti_RangeProfiler_SetConfig_Params sc = { .structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE };

    en.ctx = p->c->ctx;
    CHECK(cuptiRangeProfilerEnable, &en);
    p->obj = en.pRangeProfilerObject;
    sz.pRangeProfilerObject = p->obj;
    sz.pMetricNames = p->kept;
    sz.numMetrics = (size_t)p->n_kept;
    sz.maxNumOfRanges = (size_t)p->n_ranges;
    sz.maxNumRangeTreeNodes = (uint32_t)p->n_ranges;
    CHECK(cuptiRangeProfilerGetCounterDataSize, &sz);
    p->data_size = sz.counterDataSize;
    p->data = kevo_malloc(p->data_size ? p->data_size : 1);
    if (!p->data)
        return KEVO_ERR_NOMEM;
    ci.pRangeProfilerObject = p->obj;
    ci.counterDataSize = p->data_size;
    ci.pCounterData = p->data;
    CHECK(cuptiRangeProfilerCounterDataImageInitialize, &ci);
    sc.pRangeProfilerObject = p->obj;
    sc.configSize = p->config_size;
    sc.pConfig = p->config;
    sc.counterDataImageSize = p->data_size;
    sc.pCounterDataImage = p->data;
    sc.range = CUPTI_AutoRange;           /* a range per kernel launch, bounded by the kernel */
    sc.replayMode = CUPTI_UserReplay;     /* the caller replays: poison, evict, launch */
    sc.maxRangesPerPass = (size_t)p->n_ranges;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    CHECK(cuptiRangeProfilerSetConfig, &sc);
    return KEVO_OK;
}

enum kevo_status kevo_cupti_prof_open(struct kevo_cupti *c, const char *const *metrics,
                                      int n_metrics, int n_ranges, struct kevo_cupti_prof **out,
                                      struct kevo_buf *err)
{
    struct kevo_cupti_prof *p = NULL;
    enum kevo_status st = KEVO_ERR_NOMEM;

    *out = NULL;
    if (!api.prof) {
        kevo_buf_say(err, "CUPTI: this libcupti has no range profiler (CUDA 12.6 or later needed)");
        return KEVO_ERR_NOTFOUND;
    }
    if (n_metrics < 1 || n_ranges < 1) {
        kevo_buf_say(err, "CUPTI: %d metrics over %d ranges", n_metrics, n_ranges);
        return KEVO_ERR_INVALID;
    }
    p = kevo_calloc(1, sizeof *p);
    if (!p)
        return KEVO_ERR_NOMEM;
    p->c = c;
    p->n_metrics = n_metrics;
    p->n_ranges = n_ranges;
    p->kept = kevo_calloc((size_t)n_metrics, sizeof *p->kept);
    p->idx = kevo_calloc((size_t)n_metrics, sizeof *p->idx);
    p->vals = kevo_calloc((size_t)n_metrics, sizeof *p->vals);
    if (!p->kept || !p->idx || !p->vals)
        goto out;
    st = host_open(p, err);
    if (!st)
        st = host_config(p, metrics, err);
    if (!st)
        st = target_config(p, err);
out:
    if (st)
        kevo_cupti_prof_close(p);
    else
        *out = p;
    return st;
}

enum kevo_status kevo_cupti_prof_start(struct kevo_cupti_prof *p, struct kevo_buf *err)
{
    CUpti_RangeProfiler_Start_Params sp = { .structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE };
    sp.pRangeProfilerObject = p->obj;
    CHECK(cuptiRangeProfilerStart, &sp);
    return KEVO_OK;
}

enum kevo_status kevo_cupti_prof_stop(struct kevo_cupti_prof *p, int *all_done,
                                      struct kevo_buf *err)
{
    CUpti_RangeProfiler_Stop_Params sp = { .structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE };
    sp.pRangeProfilerObject = p->obj;
    *all_done = 0;
    CHECK(cuptiRangeProfilerStop, &sp);
    *all_done = sp.isAllPassSubmitted != 0;
    return KEVO_OK;
}

enum kevo_status kevo_cupti_prof_decode(struct kevo_cupti_prof *p, int *n_ranges,
                                        struct kevo_buf *err)
{
    CUpti_RangeProfiler_DecodeData_Params dp = { .structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE };
    CUpti_RangeProfiler_GetCounterDataInfo_Params ip = {
        .structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE };

    *n_ranges = 0;
    dp.pRangeProfilerObject = p->obj;
    CHECK(cuptiRangeProfilerDecodeData, &dp);
    if (dp.numOfRangeDropped)
        KEVO_WARN("cupti: %zu profiled ranges were dropped", dp.numOfRangeDropped);
    ip.pCounterDataImage = p->data;
    ip.counterDataImageSize = p->data_size;
    CHECK(cuptiRangeProfilerGetCounterDataInfo, &ip);
    *n_ranges = (int)ip.numTotalRanges;
    return KEVO_OK;
}

enum kevo_status kevo_cupti_prof_values(struct kevo_cupti_prof *p, int r, double *values,
                                        struct kevo_buf *err)
{
    struct host_eval ev = { .structSize = HSIZE(host_eval, pMetricValues) };

    for (int i = 0; i < p->n_metrics; i++)
        values[i] = NAN;
    ev.pHostObject = p->host;
    ev.pCounterDataImage = p->data;
    ev.counterDataImageSize = p->data_size;
    ev.rangeIndex = (size_t)r;
    ev.ppMetricNames = p->kept;
    ev.numMetrics = (size_t)p->n_kept;
    ev.pMetricValues = p->vals;
    CHECK(cuptiProfilerHostEvaluateToGpuValues, &ev);
    for (int i = 0; i < p->n_kept; i++)
        values[p->idx[i]] = p->vals[i];
    return KEVO_OK;
}

void kevo_cupti_prof_close(struct kevo_cupti_prof *p)
{
    if (!p)
        return;
    if (p->obj) {
        CUpti_RangeProfiler_Disable_Params dp = { .structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE };
        dp.pRangeProfilerObject = p->obj;
        (void)api.cuptiRangeProfilerDisable(&dp);
    }
    if (p->host) {
        struct host_deinit hd = { .structSize = HSIZE(host_deinit, pHostObject) };
        hd.pHostObject = p->host;
        (void)api.cuptiProfilerHostDeinitialize(&hd);
    }
    kevo_free(p->kept);
    kevo_free(p->idx);
    kevo_free(p->vals);
    kevo_free(p->avail);
    kevo_free(p->config);
    kevo_free(p->data);
    kevo_free(p);
}

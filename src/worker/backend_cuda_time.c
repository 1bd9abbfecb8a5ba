/*
 * backend_cuda_time - the CUDA backend's timed samples and hardware counters
 * (docs/harness.md "Timing", docs/internals/backend_cuda.md).
 *
 * A sample: drain, cold start (evict + discard of 2 x L2), a blocking kernel that holds
 * the GPU while up to QUEUE_CAP launches are queued behind it, clock stamps and events
 * around the batch. With CUPTI (cupti.h) each kernel's own GPU timestamps are recorded
 * too, and the sample's kernel_seconds is the sum over its passes of the span from the start
 * of the plan's first kernel to the end of its last, plus the latency of an isolated launch,
 * measured once when CUPTI opens (kevo_cupti_spans, measure_gap): what Nsight Compute's
 * gpu__time_duration reads, free of the events' overhead, of the fills and evicts between
 * passes, and of the gap before a kernel, which varies with whatever ran before it.
 *
 * Counters: the range profiler replays the cold start and the plan, each plan kernel its
 * own range, until every pass the metrics need is collected.
 */
#include "worker/backend_cuda_int.h"

#include "base/log.h"
#include "base/mem.h"
#include "core/timing.h"
#include <stdio.h>
#include <string.h>

/* Where the plan's kernels of each pass are among the sample's launches (NULL: no CUPTI). */
struct spans {
    int *first, *last;        /* [batch] kernel indices since the mark; -1: none */
};

/* ---- timed samples ---- */

static volatile int *host_flags(struct cuda_ctx *c) { return (volatile int *)c->host_words; }

static volatile uint64_t *host_stamps(struct cuda_ctx *c)
{
    return (volatile uint64_t *)((char *)c->host_words + HOST_TS_OFFSET);
}

/* The blocking kernel (harness entry 0), giving up after timeout_ns. */
static struct kevo_call blocker_call(const struct cuda_ctx *c, uint64_t timeout_ns)
{
    const uint64_t w = (uint64_t)c->dev_words;
    struct kevo_call b = {
        .entry = 0, .grid = {1, 1, 1}, .block = {1, 1, 1}, .n_args = 3,
        .args = {{.kind = KEVO_VAL_PTR, .ptr = w + 4 * HOST_FLAG_RELEASE},
                 {.kind = KEVO_VAL_PTR, .ptr = w + 4 * HOST_FLAG_TIMEOUT},
                 {.kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = (int64_t)timeout_ns}}};
    return b;
}

/* The harness launches of one sample: the blocker and the two clock stamps. */
static enum kevo_status prepare_harness(struct cuda_ctx *c, struct prepared h[3],
                                        struct kevo_buf *err)
{
    const uint64_t w = (uint64_t)c->dev_words;
    const uint32_t stamp_blocks = (uint32_t)(4 * c->info.n_sms < c->max_grid[0]
                                                 ? 4 * c->info.n_sms : c->max_grid[0]);
    struct kevo_call calls[3] = {
        blocker_call(c, BLOCK_TIMEOUT_NS),
        {.entry = 1, .grid = {stamp_blocks, 1, 1}, .block = {32, 1, 1}, .n_args = 1,
         .args = {{.kind = KEVO_VAL_PTR, .ptr = w + HOST_TS_OFFSET}}},
        {.entry = 1, .grid = {stamp_blocks, 1, 1}, .block = {32, 1, 1}, .n_args = 1,
         .args = {{.kind = KEVO_VAL_PTR, .ptr = w + HOST_TS_OFFSET + 16}}},
    };
    enum kevo_status st = KEVO_OK;

    for (int i = 0; i < 3 && !st; i++)
        st = kevo_cuda_prepare_one(c, c->harness, &calls[i], i, &h[i], err);
    return st;
}

/* Before the timed region: persisting-L2 lines dropped, then (cold) the flush buffer
 * read so nothing the candidate reads is left in L2, and nothing dirty either. */
static enum kevo_status begin_sample(struct cuda_ctx *c, int flush, struct kevo_buf *err)
{
    const struct kevo_cudrv *d = c->d;
    CUresult r = d->cuCtxResetPersistingL2Cache();

    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_UNSUPPORTED_LIMIT)
        return kevo_cuda_note(c, KEVO_CU(d, err, r));
    if (!flush)
        return KEVO_OK;
    struct prepared ev;
    struct kevo_call k = kevo_call_evict((uint64_t)c->flush, c->flush_bytes);
    enum kevo_status st = kevo_cuda_prepare_one(c, NULL, &k, 0, &ev, err);
    return st ? st : kevo_cuda_enqueue(c, &ev, err);
}

static void release(struct cuda_ctx *c)
{
    __atomic_store_n(&host_flags(c)[HOST_FLAG_RELEASE], 1, __ATOMIC_SEQ_CST);
}

/* The plan `batch` times between the events; the blocker holds the GPU until QUEUE_CAP
 * launches are queued (or all of them are). */
static enum kevo_status timed_region(struct cuda_ctx *c, const struct prepared *p, int n_calls,
                                     int batch, const struct prepared h[3], int *released,
                                     struct spans *sp, struct kevo_buf *err)
{
    const struct kevo_cudrv *d = c->d;
    enum kevo_status st = kevo_cuda_enqueue(c, &h[1], err);
    long queued = 0;

    if (!st)
        st = kevo_cuda_note(c, KEVO_CU(d, err, d->cuEventRecord(c->ev0, c->stream)));
    for (int b = 0; b < batch && !st; b++) {
        for (int i = 0; i < n_calls && !st; i++) {
            if (!*released && queued == QUEUE_CAP) {
                release(c);
                *released = 1;
            }
            if (sp->first && !p[i].fill && !p[i].discard) {   /* a plan kernel */
                if (sp->first[b] < 0)
                    sp->first[b] = (int)c->kseq;
                sp->last[b] = (int)c->kseq;
            }
            st = kevo_cuda_enqueue(c, &p[i], err);
            queued++;
        }
    }
    if (!st)
        st = kevo_cuda_note(c, KEVO_CU(d, err, d->cuEventRecord(c->ev1, c->stream)));
    if (!st)
        st = kevo_cuda_enqueue(c, &h[2], err);
    return st;
}

/* Seconds between the events, and the SM clock from the two stamps (0 if unknown). */
static enum kevo_status read_sample(struct cuda_ctx *c, struct kevo_sample *out,
                                    struct kevo_buf *err)
{
    volatile uint64_t *ts = host_stamps(c);
    float ms = 0;
    enum kevo_status st = KEVO_CU(c->d, err, c->d->cuEventElapsedTime(&ms, c->ev0, c->ev1));

    if (st)
        return kevo_cuda_note(c, st);
    out->seconds = ms / 1e3;
    if (ts[0] && ts[2] > ts[0] && ts[3] > ts[1])
        out->sm_clock_mhz = (double)(ts[3] - ts[1]) / (double)(ts[2] - ts[0]) * 1e3;
    if (host_flags(c)[HOST_FLAG_TIMEOUT])
        KEVO_WARN("cuda: the blocking kernel timed out before the sample was queued; "
                  "this sample includes host launch gaps");
    return KEVO_OK;
}

/* Where each pass's plan kernels are among the kernels launched since the mark. */
static enum kevo_status spans_begin(struct cuda_ctx *c, int batch, struct spans *sp)
{
    memset(sp, 0, sizeof *sp);
    if (!c->cupti)
        return KEVO_OK;
    sp->first = kevo_calloc((size_t)batch, sizeof *sp->first);
    sp->last = kevo_calloc((size_t)batch, sizeof *sp->last);
    if (!sp->first || !sp->last)
        return KEVO_ERR_NOMEM;
    for (int b = 0; b < batch; b++)
        sp->first[b] = sp->last[b] = -1;
    if (kevo_cupti_mark(c->cupti, &c->msg)) {   /* then events, this sample */
        kevo_free(sp->first);
        sp->first = NULL;
    }
    c->kseq = 0;
    return KEVO_OK;
}

/* The sample's kernel_seconds from the GPU's timestamps, when every kernel launched since
 * the mark has its record (else the events' figure stands, said once). */
static void spans_end(struct cuda_ctx *c, int batch, struct spans *sp, struct kevo_sample *out)
{
    static int warned;
    const struct kevo_cupti_kernel *k = NULL;
    int n = 0;
    double s = -1;

    if (!sp->first)
        goto out;
    kevo_buf_reset(&c->msg);
    if (!kevo_cupti_kernels(c->cupti, &k, &n, &c->msg) && n == c->kseq)
        s = kevo_cupti_spans(k, n, sp->first, sp->last, batch, 0);
    if (s >= 0) {
        out->kernel_seconds = s;
        out->kernel_clock = 1;
        for (int b = 0; b < batch; b++)
            out->kernel_passes += sp->first[b] >= 0;
    } else if (!warned++) {
        KEVO_WARN("cuda: a sample's kernel records did not match its launches (%d records, "
                  "%ld launches%s%s): timed with events", n, c->kseq,
                  kevo_buf_str(&c->msg)[0] ? "; " : "", kevo_buf_str(&c->msg));
    }
out:
    kevo_free(sp->first);
    kevo_free(sp->last);
}

enum kevo_status kevo_cuda_time(void *ctx, struct kevo_module *m, const struct kevo_call *calls,
                                int n_calls, int batch, int flush, struct kevo_sample *out,
                                struct kevo_buf *err)
{
    struct cuda_ctx *c = ctx;
    struct prepared *p = NULL;
    struct prepared h[3];
    struct spans sp = { 0 };
    int blocked = 0, released = 0;
    enum kevo_status st;

    memset(out, 0, sizeof *out);
    if (batch < 1) {
        kevo_buf_say(err, "time: batch must be >= 1 (got %d)", batch);
        return KEVO_ERR_INVALID;
    }
    st = kevo_cuda_drain(c, err);   /* the blocker must not wait behind earlier work */
    if (!st)
        st = kevo_cuda_prepare(c, m, calls, n_calls, &p, err);
    if (!st)
        st = prepare_harness(c, h, err);
    if (!st)
        st = spans_begin(c, batch, &sp);
    if (st)
        goto out;
    memset(c->host_words, 0, HOST_WORDS_BYTES);
    st = begin_sample(c, flush, err);
    if (!st)
        st = kevo_cuda_enqueue(c, &h[0], err);
    if (st)
        goto out;
    blocked = 1;
    st = timed_region(c, p, n_calls, batch, h, &released, &sp, err);
out:
    if (blocked) {
        if (!released)
            release(c);
        enum kevo_status st2 = kevo_cuda_drain(c, st ? NULL : err);   /* keep the first message */
        if (!st)
            st = st2;
    }
    if (!st)
        st = read_sample(c, out, err);
    if (!st)
        spans_end(c, batch, &sp, out);
    else {
        kevo_free(sp.first);
        kevo_free(sp.last);
    }
    kevo_free(p);
    return st;
}

/* ---- hardware counters ---- */

#define MAX_PASSES 256   /* a metric set needing more is refused rather than replayed on */

/* One pass: the cold start outside the profiled session, then the plan, each kernel its
 * own range (auto ranges: bounded by the kernel, as Nsight Compute counts one; user
 * ranges pushed around each launch read ~60 % longer times on an H100, their bounds
 * included). */
static enum kevo_status profile_pass(struct cuda_ctx *c, struct kevo_cupti_prof *pr,
                                     const struct prepared *pre, int n_pre,
                                     const struct prepared *pc, int n_calls, int *done,
                                     struct kevo_buf *err)
{
    enum kevo_status st = KEVO_OK;

    for (int i = 0; i < n_pre && !st; i++)
        st = kevo_cuda_enqueue(c, &pre[i], err);
    if (!st)
        st = kevo_cupti_prof_start(pr, err);
    for (int i = 0; i < n_calls && !st; i++)
        st = kevo_cuda_enqueue(c, &pc[i], err);
    if (!st)
        st = kevo_cupti_prof_stop(pr, done, err);
    if (!st)
        st = kevo_cuda_drain(c, err);
    return st;
}

/* Every range's values, in push order. */
static enum kevo_status profile_values(struct kevo_cupti_prof *pr, int n_calls, int n_metrics,
                                       double *values, struct kevo_buf *err)
{
    int n_ranges = 0;
    enum kevo_status st = kevo_cupti_prof_decode(pr, &n_ranges, err);

    if (!st && n_ranges != n_calls) {
        kevo_buf_say(err, "CUPTI: %d ranges profiled for %d launches", n_ranges, n_calls);
        st = KEVO_ERR_CUDA;
    }
    for (int r = 0; r < n_calls && !st; r++)
        st = kevo_cupti_prof_values(pr, r, values + (size_t)r * (size_t)n_metrics, err);
    return st;
}

enum kevo_status kevo_cuda_profile(void *ctx, struct kevo_module *m, const struct kevo_call *pre,
                                   int n_pre, const struct kevo_call *calls, int n_calls,
                                   const char *const *metrics, int n_metrics, double *values,
                                   int *passes, struct kevo_buf *err)
{
    struct cuda_ctx *c = ctx;
    struct prepared *pp = NULL, *pc = NULL;
    struct kevo_cupti_prof *pr = NULL;
    int done = 0, pass = 0, paused = 0;
    enum kevo_status st;

    *passes = 0;
    if (!c->cupti) {
        kevo_buf_say(err, "no hardware counters in the worker: %s", c->cupti_why);
        return KEVO_ERR_NOTFOUND;
    }
    st = kevo_cuda_drain(c, err);
    if (!st)   /* the kernel records' instrumentation off: counted, it moves the counters */
        st = kevo_cupti_trace(c->cupti, 0, err);
    paused = !st;
    if (!st)
        st = kevo_cuda_prepare(c, m, pre, n_pre, &pp, err);
    if (!st)
        st = kevo_cuda_prepare(c, m, calls, n_calls, &pc, err);
    if (!st)
        st = kevo_cupti_prof_open(c->cupti, metrics, n_metrics, n_calls, &pr, err);
    for (pass = 0; !st && !done && pass < MAX_PASSES; pass++)
        st = profile_pass(c, pr, pp, n_pre, pc, n_calls, &done, err);
    if (!st && !done) {
        kevo_buf_say(err, "CUPTI: the metrics need more than %d passes", MAX_PASSES);
        st = KEVO_ERR_CUDA;
    }
    if (!st)
        st = profile_values(pr, n_calls, n_metrics, values, err);
    *passes = pass;
    kevo_cupti_prof_close(pr);
    kevo_free(pp);
    kevo_free(pc);
    if (paused) {
        enum kevo_status st2 = kevo_cuda_drain(c, err);
        if (!st2)
            st2 = kevo_cupti_trace(c->cupti, 1, err);
        st = st ? st : st2;
    }
    return kevo_cuda_note(c, st);
}

#define GAP_PAIRS 10   /* 2 x 10 kernels, fewer than QUEUE_CAP: all queued before the
                          blocker lets go */
#define GAP_TRIES 6    /* the first warms up; the least median of the others is kept */
#define ISO_WARM 3     /* isolated launches: the first few warm up */
#define ISO_SAMPLES 41 /* then this many of each kind (with and without the kernel) */
#define SPIN_NS 50000000ull   /* the GPU kept busy this long before the latencies are measured */

/* The two empty harness kernels the latencies are measured on: discard and evict of
 * nothing (one block each). */
static void empty_calls(const struct cuda_ctx *c, struct kevo_call k[2])
{
    k[0] = (struct kevo_call){.entry = HENT_DISCARD, .grid = {1, 1, 1},
                              .block = {V_THREADS, 1, 1}, .n_args = 2};
    k[1] = (struct kevo_call){.entry = HENT_EVICT, .grid = {1, 1, 1},
                              .block = {V_THREADS, 1, 1}, .n_args = 4};
    k[0].args[0] = (struct kevo_val){.kind = KEVO_VAL_PTR, .ptr = (uint64_t)c->sink};
    k[0].args[1] = (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = 0};
    k[1].args[0] = k[0].args[0];                          /* evict nothing: (buf, 0 x 16 B, */
    k[1].args[1] = k[0].args[1];                          /*  sink, key) */
    k[1].args[2] = k[0].args[0];
    k[1].args[3] = (struct kevo_val){.kind = KEVO_VAL_INT, .dtype = KEVO_I64, .i = 0};
}

/*
 * The back-to-back launch latency (kept for the record: launch_gap_b2b_s): 2 x GAP_PAIRS
 * empty kernels of two different functions, alternating, queued behind the blocker, run
 * back to back; the median idle gap between one's end and the next one's start, the least
 * over GAP_TRIES - 1 tries after a first that warms up. Back to back, part of a launch's
 * processing overlaps the kernel before it, and the figure is bimodal from one process to
 * the next (H100: 0.93/0.96 or 1.15/1.18 us, bench/results/2026-11-25-h100-ncu-fidelity-9/),
 * which is why it is no longer what a sample adds (measure_iso).
 */
static enum kevo_status measure_b2b(struct cuda_ctx *c, double *gap_s, struct kevo_buf *err)
{
    struct kevo_call k[2];
    const struct kevo_cupti_kernel *r = NULL;
    struct kevo_sample smp;
    enum kevo_status st = KEVO_OK;
    double best = -1;
    int n = 0;

    empty_calls(c, k);
    for (int i = 0; i < GAP_TRIES && !st; i++) {
        st = kevo_cuda_time(c, c->harness, k, 2, GAP_PAIRS, 0, &smp, err);
        if (!st && !smp.kernel_clock) {
            kevo_buf_say(err, "the kernel records did not match the launches");
            st = KEVO_ERR_CUDA;
        }
        if (!st)   /* the list the sample was read from: the plan's kernels, then the stamp */
            st = kevo_cupti_kernels(c->cupti, &r, &n, err);
        double g = !st && i > 0 && n >= 2 * GAP_PAIRS + 1
                       ? kevo_cupti_gap(r, n - 1 - 2 * GAP_PAIRS, n - 1) : -1;
        if (g >= 0 && (best < 0 || g < best))
            best = g;
    }
    *gap_s = best;
    return st;
}

/* One isolated launch of p (NULL: none) between the two events, both queued behind the
 * blocker so the host's own pace is out of it: the events' seconds, and p's span from its
 * kernel record (0 without p). */
static enum kevo_status iso_sample(struct cuda_ctx *c, const struct prepared *blk,
                                   const struct prepared *p, double *ev_s, double *span_s,
                                   struct kevo_buf *err)
{
    const struct kevo_cudrv *d = c->d;
    const struct kevo_cupti_kernel *r = NULL;
    enum kevo_status st = kevo_cuda_drain(c, err);
    float ms = 0;
    int n = 0, blocked = 0;

    if (!st)
        st = kevo_cupti_mark(c->cupti, err);
    c->kseq = 0;
    memset(c->host_words, 0, HOST_WORDS_BYTES);
    if (!st)
        st = kevo_cuda_enqueue(c, blk, err);
    blocked = !st;
    if (!st)
        st = kevo_cuda_note(c, KEVO_CU(d, err, d->cuEventRecord(c->ev0, c->stream)));
    if (!st && p)
        st = kevo_cuda_enqueue(c, p, err);
    if (!st)
        st = kevo_cuda_note(c, KEVO_CU(d, err, d->cuEventRecord(c->ev1, c->stream)));
    if (blocked)
        release(c);
    enum kevo_status st2 = kevo_cuda_drain(c, st ? NULL : err);
    st = st ? st : st2;
    if (!st)
        st = kevo_cuda_note(c, KEVO_CU(d, err, d->cuEventElapsedTime(&ms, c->ev0, c->ev1)));
    if (!st)
        st = kevo_cupti_kernels(c->cupti, &r, &n, err);
    if (!st && (n != c->kseq || (p && n < 2) || r[n - 1].end < r[n - 1].start)) {
        kevo_buf_say(err, "isolated launch latency: %d kernel records for %ld launches", n,
                     c->kseq);
        st = KEVO_ERR_CUDA;
    }
    if (!st) {
        *ev_s = ms / 1e3;
        *span_s = p ? (double)(r[n - 1].end - r[n - 1].start) * 1e-9 : 0;
    }
    return st;
}

/*
 * The GPU's launch latency as Nsight Compute counts it, which a kernel's own timestamps
 * leave out: ncu serializes every kernel, so its gpu__time_duration holds the whole of
 * the launch's processing and of the wait for the kernel's end. Here an empty kernel is
 * launched alone between two events, the front end idle before it (the first event waits
 * for the blocker's end): the events' time less the kernel's own span is what an isolated
 * launch adds, and the events' time with no kernel between them (the second event's own
 * processing) is taken off it. Interquartile means of ISO_SAMPLES, interleaved.
 */
static enum kevo_status measure_iso(struct cuda_ctx *c, double *gap_s, double *pair_s,
                                    struct kevo_buf *err)
{
    struct kevo_call k[2];
    struct prepared h[3], e;
    double with[ISO_SAMPLES], without[ISO_SAMPLES], ev = 0, span = 0;
    struct kevo_stats sw, so;
    enum kevo_status st;

    empty_calls(c, k);
    st = prepare_harness(c, h, err);
    if (!st)
        st = kevo_cuda_prepare_one(c, c->harness, &k[0], 0, &e, err);
    for (int i = 0; i < ISO_WARM + ISO_SAMPLES && !st; i++) {
        st = iso_sample(c, &h[0], &e, &ev, &span, err);
        if (!st && i >= ISO_WARM)
            with[i - ISO_WARM] = ev - span;
        if (!st)
            st = iso_sample(c, &h[0], NULL, &ev, &span, err);
        if (!st && i >= ISO_WARM)
            without[i - ISO_WARM] = ev;
    }
    if (!st)
        st = kevo_timing_stats(with, ISO_SAMPLES, &sw);
    if (!st)
        st = kevo_timing_stats(without, ISO_SAMPLES, &so);
    if (!st) {   /* interquartile means: the events tick in 32 ns, a median sits on a tick */
        *pair_s = so.iqm;
        *gap_s = sw.iqm - so.iqm;
    }
    return st;
}

/* The blocker alone for SPIN_NS (it times out, never released): an idle GPU's first
 * launches run slower, and a process that measured its latency on them read up to 0.2 us
 * more than the next one (H200: 1.056-1.280 us without it, 1.024-1.184 with it,
 * bench/results/2026-11-28-h200-session10/README.md). */
static enum kevo_status spin(struct cuda_ctx *c, struct kevo_buf *err)
{
    struct kevo_call b = blocker_call(c, SPIN_NS);
    struct prepared p;
    enum kevo_status st = kevo_cuda_prepare_one(c, c->harness, &b, 0, &p, err);

    memset(c->host_words, 0, HOST_WORDS_BYTES);
    if (!st)
        st = kevo_cuda_enqueue(c, &p, err);
    if (!st)
        st = kevo_cuda_drain(c, err);
    memset(c->host_words, 0, HOST_WORDS_BYTES);   /* its timed-out flag */
    return st;
}

/* Both latencies; the isolated one is what each timed pass adds to its span, unless it
 * cannot be read sensibly (kevo_cupti_pick_latency): then the back-to-back one, said once,
 * rather than losing the kernel clock. */
static enum kevo_status measure_gap(struct cuda_ctx *c, struct kevo_buf *err)
{
    double b2b = -1, iso = -1, pair = -1, pick = -1;
    enum kevo_status st = spin(c, err);

    if (!st)
        st = measure_b2b(c, &b2b, err);
    if (!st)
        st = measure_iso(c, &iso, &pair, err);
    if (!st)
        pick = kevo_cupti_pick_latency(iso, b2b);
    if (!st && pick < 0) {
        kevo_buf_say(err, "implausible launch latency: %g s isolated, %g s back to back",
                     iso, b2b);
        st = KEVO_ERR_CUDA;
    } else if (!st && pick != iso) {
        KEVO_WARN("cuda: isolated launch latency %g s is implausible (events %g s apart with "
                  "nothing between them); kernel times add the back-to-back %g s instead",
                  iso, pair, b2b);
    } else if (!st) {
        KEVO_INFO("cuda: launch latency %.3f us isolated (events %.3f us apart with nothing "
                  "between them), %.3f us back to back", iso * 1e6, pair * 1e6, b2b * 1e6);
    }
    c->launch_gap_s = st ? -1 : pick;
    c->info.launch_gap_b2b_s = st ? 0 : b2b;
    return st;
}

void kevo_cuda_cupti_open(struct cuda_ctx *c, int device)
{
    struct kevo_buf why;

    kevo_buf_init(&why, sizeof c->cupti_why);
    if (!kevo_cupti_open(c->ctx, device, &c->cupti, &why) && measure_gap(c, &why)) {
        kevo_cupti_close(c->cupti);   /* a clock that cannot be trusted is no clock */
        c->cupti = NULL;
    }
    if (!c->cupti) {
        snprintf(c->cupti_why, sizeof c->cupti_why, "%s", kevo_buf_str(&why));
        KEVO_INFO("cuda: kernel times from events, no hardware counters (%s)", c->cupti_why);
        c->launch_gap_s = 0;
        c->info.launch_gap_b2b_s = 0;
    }
    c->info.kernel_clock = c->cupti != NULL;
    c->info.launch_gap_s = c->launch_gap_s;
    kevo_buf_free(&why);
}

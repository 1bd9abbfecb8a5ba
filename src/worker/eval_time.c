/*
 * eval_time - the timing phase of an evaluation (docs/harness.md "Timing"): K rotating input
 * sets with fresh inputs and fresh buffers, warm-up, batch sizing for short kernels,
 * interleaved candidate/reference samples through timing.c's stop rule, then a re-check
 * of what the timed runs left behind (outputs, guards, inputs) and the SOL figures.
 *
 * Nothing is kept on the host: each set's inputs are generated on the device, and the
 * re-check runs the reference on set k again (on its own set, or on x->ref with set k's
 * inputs regenerated) and judges the candidate's set-k outputs against it there.
 */
#include "worker/eval_int.h"
#include "base/clock.h"
#include "base/mem.h"
#include "core/sol.h"
#include "core/timing.h"

#include <math.h>
#include <string.h>

struct tctx {
    struct kevo_ev *e;
    struct kevo_wl *x;
    int K;                     /* input sets */
    struct kevo_side *cs, *rs; /* [K] candidate sets (cs[0] is x->cand); reference sets */
    unsigned char *launched;   /* [K] the candidate ran on the set */
    int batch[KEVO_TIMING_MAX_ARMS];
    int failed_arm;
    int warmup;
    uint64_t flush;            /* a 2x-L2 buffer read after the fills of each pass */
    size_t flush_bytes;        /*   (GPU only; 0: none) */
    int samples[KEVO_TIMING_MAX_ARMS];   /* samples taken, and how many of them ... */
    int gpu_clock[KEVO_TIMING_MAX_ARMS]; /* ... the GPU's kernel timestamps timed */
};

/* Seed of timing set k: secret, and never one of the correctness trials'. */
static uint64_t set_seed(const struct kevo_ev *e, const struct kevo_wl *x, int k)
{
    return kevo_verify_derive(e->req->seed ^ TIMING_SALT, (uint64_t)x->w, (uint64_t)k);
}

/* The key the reference's outputs for set k are sealed with. */
static uint64_t set_key(const struct kevo_ev *e, const struct kevo_wl *x, int k)
{
    return kevo_verify_derive(e->req->seed ^ TIMING_SALT ^ SEAL_SALT, (uint64_t)x->w,
                              (uint64_t)k);
}

/*
 * Rotating sets give every sample fresh inputs at fresh addresses. The cache is already
 * cold at each sample (the backend flushes 2x L2 before it), and inside a batch the calls
 * reuse one set whatever K is, so more sets than MAX_SETS would only cost set-up time
 * (each set is generated, run through the reference and re-checked). Within ~25 % of
 * device memory (4 GiB at most); never fewer than 2.
 */
static int pick_sets(const struct kevo_ev *e, const struct kevo_wl *x, int with_ref)
{
    size_t io = 0, per_set = 0;
    int64_t l2 = e->info.l2_bytes > 0 ? e->info.l2_bytes : 50ll << 20;
    int64_t budget = e->info.mem_bytes > 0 ? e->info.mem_bytes / 4 : 4ll << 30;
    int64_t k;

    for (int t = 0; t < x->n_t; t++) {
        size_t b = x->t[t].bytes + 2 * GUARD_BYTES + 256;
        per_set += b * (with_ref && t < x->n_task ? 2 : 1);
        if (t < x->n_task && x->t[t].decl->role != KEVO_ROLE_SCRATCH)
            io += x->t[t].bytes;
    }
    budget = budget > (4ll << 30) ? 4ll << 30 : budget;
    k = io ? (2 * l2 + (int64_t)io - 1) / (int64_t)io : MAX_SETS;
    k = k > MAX_SETS ? MAX_SETS : k;
    if (per_set && k * (int64_t)per_set > budget)
        k = budget / (int64_t)per_set;
    return k < 2 ? 2 : (int)k;
}

/*
 * A batch of passes of side s's plan, each pass preceded by the poison fill of every
 * output and scratch buffer, then the same fills alone; the difference is the plan's own
 * time. Without the fills, passes 2..B of a batch would find the outputs already right
 * and a kernel could notice that and skip its work.
 */
/*
 * On a GPU every pass must start as a kernel measured alone by a profiler does: its inputs
 * not in L2 (a workload that fits would stay there from one pass to the next, and a warm
 * pass can beat the DRAM floor) and nothing dirty in L2 (the poison fills just wrote the
 * outputs: the kernel would pay for writing those lines back). So after the fills, a
 * buffer of twice the L2 is read (KEVO_ENTRY_EVICT), which writes back and evicts both; its
 * time is part of the fills, subtracted with them. Not on the CPU backend, whose
 * last-level cache flush would cost milliseconds per pass and whose floor has a wide
 * margin.
 */
static enum kevo_status batch_flush(struct tctx *c)
{
    struct kevo_ev *e = c->e;

    if (c->flush || e->info.cc_major <= 0 || e->info.l2_bytes <= 0)
        return KEVO_OK;
    c->flush_bytes = (size_t)e->info.l2_bytes * 2 / 256 * 256;
    enum kevo_status st = e->b->ops->alloc(e->b->ctx, c->flush_bytes, &c->flush);
    if (!st)   /* zeros: the evict kernel then never writes (its XOR is never its key) */
        st = e->b->ops->fill32(e->b->ctx, c->flush, 0, c->flush_bytes);
    if (st && c->flush)
        e->b->ops->free(e->b->ctx, c->flush);
    if (st)
        c->flush = 0, c->flush_bytes = 0;
    /* no room (host or device: CUDA says KEVO_ERR_CUDA): warm passes, reported as such */
    return st == KEVO_ERR_DEVICE ? st : KEVO_OK;
}

static enum kevo_status time_batch(struct tctx *c, const struct kevo_plan *p,
                                   struct kevo_side *s, int batch, struct kevo_sample *smp)
{
    struct kevo_ev *e = c->e;
    struct kevo_wl *x = c->x;
    struct kevo_call *plan = kevo_calloc((size_t)(x->n_t + s->n_calls) + 2, sizeof *plan);
    struct kevo_sample fills = { 0 };
    enum kevo_status st = plan ? batch_flush(c) : KEVO_ERR_NOMEM;
    int nf = 0;

    if (st) {
        kevo_free(plan);
        return st;
    }
    for (int k = 0; k < x->n_t; k++) {
        if (s->buf[k].base && !is_in(&x->t[k]) && s->buf[k].bytes)
            plan[nf++] = kevo_call_fill(s->buf[k].data, s->buf[k].bytes,
                                        kevo_verify_poison(x->t[k].decl->dtype, 0));
    }
    if (c->flush)   /* last: it also takes the poison's dirty lines out of L2 */
        plan[nf++] = kevo_call_evict(c->flush, c->flush_bytes);
    memcpy(plan + nf, s->calls, (size_t)s->n_calls * sizeof *plan);
    kevo_buf_reset(&e->err);
    /* With the GPU's own kernel timestamps the plan's kernels are timed alone, whatever
     * runs between them: no subtraction (and none of its noise). */
    if (e->info.kernel_clock) {
        st = e->b->ops->time(e->b->ctx, p->mod, plan, nf + s->n_calls, batch, 1, smp, &e->err);
        if (st || smp->kernel_clock)
            goto out;
    }
    /* the fills alone first: the buffers must end holding what the plan's last pass wrote */
    st = nf ? e->b->ops->time(e->b->ctx, p->mod, plan, nf, batch, 1, &fills, &e->err) : KEVO_OK;
    if (!st)
        st = e->b->ops->time(e->b->ctx, p->mod, plan, nf + s->n_calls, batch, 1, smp, &e->err);
    if (!st)
        smp->seconds = smp->seconds > fills.seconds ? smp->seconds - fills.seconds : 0.0;
    smp->kernel_clock = 0;
out:
    kevo_free(plan);
    return st;
}

/* The launch latency each pass timed with kernel timestamps adds: the device's, from its
 * calibration (one figure for every run on it: a worker's own measurement moves by up to
 * 0.3 us from one worker to the next on an H100, every small kernel with it), else this
 * worker's. */
static double launch_gap(const struct kevo_ev *e)
{
    return e->req->sol.launch_gap_s > 0 ? e->req->sol.launch_gap_s : e->info.launch_gap_s;
}

/* One sample of arm `arm` (0 candidate, 1 reference) on set i % K (timing.c callback). */
static enum kevo_status t_sample(void *user, int arm, int i, double *sec, double *mhz)
{
    struct tctx *c = user;
    struct kevo_ev *e = c->e;
    int k = i % c->K;
    struct kevo_side *s = arm ? &c->rs[k] : &c->cs[k];
    const struct kevo_plan *p = arm ? &e->ref : &e->can;
    struct kevo_sample smp = { 0 };
    enum kevo_status st;

    /* Poison before every sample, so each set ends up holding what its last timed run
     * wrote: a run that skips work while timed leaves poison for the re-check to see. */
    c->failed_arm = arm;
    st = kevo_eval_poison(e, c->x, s, 0);
    if (st)
        return st;
    kevo_buf_reset(&e->err);
    if (c->batch[arm] > 1)
        st = time_batch(c, p, s, c->batch[arm], &smp);
    else
        st = e->b->ops->time(e->b->ctx, p->mod, s->calls, s->n_calls, 1, 1, &smp, &e->err);
    if (st)
        return st;
    if (arm) {             /* the reference's output must not wait in memory for the candidate */
        st = kevo_eval_poison(e, c->x, s, 1);
        if (st)
            return st;
    }
    if (!arm)
        c->launched[k] = 1;
    c->samples[arm]++;
    c->gpu_clock[arm] += smp.kernel_clock;
    *sec = (smp.kernel_clock ? smp.kernel_seconds + smp.kernel_passes * launch_gap(e)
                             : smp.seconds) / c->batch[arm];
    *mhz = smp.sm_clock_mhz;
    return KEVO_OK;
}

/* Did side s stop at one of the candidate's scratch buffers? The buffer whose allocation
 * failed has its size set but no address (gbuf_alloc). */
static int stopped_at_scratch(const struct kevo_wl *x, const struct kevo_side *s)
{
    for (int t = 0; s->buf && t < x->n_t; t++) {
        if (s->buf[t].total && !s->buf[t].base)
            return t >= x->n_task ? t : 0;
    }
    return 0;
}

/* Set k could not be allocated (st, not a lost device). Past 2 sets that just means fewer.
 * Without a second set there is no timing: the candidate's failure when its scratch is
 * what did not fit a second time (scratch: its index, else 0), else kevo's. */
static enum kevo_status sets_short(struct tctx *c, int k, enum kevo_status st, int scratch)
{
    struct kevo_ev *e = c->e;
    struct kevo_wl *x = c->x;

    kevo_eval_side_free(e, x, &c->cs[k]);
    if (c->rs)
        kevo_eval_side_free(e, x, &c->rs[k]);
    kevo_buf_reset(&e->msg);
    if (k >= 2) {
        c->K = k;
        return KEVO_OK;
    }
    if (!scratch)
        return kevo_eval_error(e, st, "cannot allocate a second set of buffers for timing at "
                               "%s: %s", x->desc, kevo_status_name(st));
    kevo_eval_wl_fail(x, KEVO_VERDICT_LAUNCH_ERROR,
                      json_pack("{s:s, s:I}", "scratch", x->t[scratch].decl->name, "bytes",
                                (json_int_t)x->t[scratch].bytes),
                      "line %d: cannot allocate scratch %s (%zu bytes) a second time, for timing, "
                      "at %s: %s", x->t[scratch].decl->line, x->t[scratch].decl->name,
                      x->t[scratch].bytes, x->desc, kevo_status_name(st));
    return KEVO_OK;
}

/* Allocate sets 1..K-1 (set 0 is the correctness sides, the candidate's and the
 * reference's, reused) and fill each with fresh inputs, generated on the device. */
static enum kevo_status sets_init(struct tctx *c)
{
    struct kevo_ev *e = c->e;
    struct kevo_wl *x = c->x;
    enum kevo_status st = KEVO_OK;

    c->cs[0] = x->cand;
    if (c->rs)
        c->rs[0] = x->ref;
    for (int k = 0; k < c->K && !st && !x->verdict; k++) {
        if (k > 0)
            st = kevo_eval_side_alloc(e, x, &c->cs[k], 0, 1);
        if (st && st != KEVO_ERR_DEVICE)
            return sets_short(c, k, st, stopped_at_scratch(x, &c->cs[k]));
        if (k > 0 && !st && !x->verdict && c->rs)
            st = kevo_eval_side_alloc(e, x, &c->rs[k], 1, 1);
        if (st && st != KEVO_ERR_DEVICE)
            return sets_short(c, k, st, 0);
        if (!st && !x->verdict)
            st = kevo_eval_put_inputs(e, x, set_seed(e, x, k), &c->cs[k],
                                      c->rs ? &c->rs[k] : NULL);
    }
    return st;
}

/* Median of n values (0 if it cannot be computed). */
static double median_of(double *v, int n)
{
    struct kevo_stats s;
    return kevo_timing_stats(v, n, &s) ? 0.0 : s.median;
}

/* >= 3 runs and >= 10 ms, every set at least once (unless the time cap runs out first);
 * then the batch length from the per-call estimate. */
static enum kevo_status warm_up(struct tctx *c, int n_arms, double cap_s)
{
    double est[2][64], t0 = kevo_now(), el = 0.0, sec, mhz;
    int i = 0;
    enum kevo_status st;

    c->batch[0] = c->batch[1] = 1;
    for (;;) {
        for (int a = 0; a < n_arms; a++) {
            st = t_sample(c, a, i, &sec, &mhz);
            if (st)
                return st;
            est[a][i % 64] = sec;
        }
        i++;
        el = kevo_now() - t0;
        if ((i >= 3 && i >= c->K && el >= 10e-3) || (i >= 3 && el >= cap_s) || i >= 10000)
            break;
    }
    c->warmup = i;
    for (int a = 0; a < n_arms; a++) {
        int n = i > 64 ? 64 : i;
        /* The first run pays for module loading: leave it out when there are others. */
        double m = n > 1 ? median_of(est[a] + 1, n - 1) : est[a][0];
        c->batch[a] = kevo_timing_pick_batch(m);
    }
    return KEVO_OK;
}

/* The reference's answer for set k, sealed: on its own set when there are reference
 * sets, else on x->ref with set k's inputs generated again. */
static enum kevo_status ref_for_set(struct tctx *c, int k, struct kevo_side **out)
{
    struct kevo_ev *e = c->e;
    struct kevo_wl *x = c->x;
    enum kevo_status st = KEVO_OK;

    *out = c->rs ? &c->rs[k] : &x->ref;
    if (!c->rs)
        st = kevo_eval_put_inputs(e, x, set_seed(e, x, k), &x->ref, NULL);
    if (!st && !x->verdict)
        st = kevo_eval_run_ref(e, x, *out, set_key(e, x, k));
    return st;
}

/* What the timed runs left behind must be as right as what was verified. */
static enum kevo_status recheck(struct tctx *c)
{
    struct kevo_ev *e = c->e;
    struct kevo_wl *x = c->x;
    enum kevo_status st = KEVO_OK;
    struct kevo_side *rside = NULL;

    for (int k = 0; k < c->K && !st && !x->verdict; k++) {
        if (!c->launched[k])
            continue;
        st = kevo_eval_check_guards(e, x, &c->cs[k], "timed run");
        if (!st && !x->verdict)
            st = kevo_eval_check_inputs(e, x, &c->cs[k], set_seed(e, x, k), "timed run");
        if (!st && !x->verdict)
            st = ref_for_set(c, k, &rside);
        for (int t = 0; t < x->n_task && !st && !x->verdict; t++) {
            if (!is_out(&x->t[t]))
                continue;
            st = kevo_eval_judge(e, x, t, c->cs[k].buf[t].data, 0, rside, &x->jr[t]);
            if (!st && !x->verdict &&
                kevo_eval_judge_fail(e, x, t, &x->jr[t].cmp, "timed run output differs"))
                json_object_set_new(x->evidence, "set", json_integer(k));
        }
    }
    return st;
}

/* What timed an arm's samples: "cupti" (the GPU's kernel timestamps), "events" or "wall"
 * (kevo_clock_name of a device without them), or "mixed" when some samples' records could
 * not be matched to their launches. */
static const char *clock_name(const struct tctx *c, int arm)
{
    struct kevo_device_info none = c->e->info;

    none.kernel_clock = 0;
    return c->gpu_clock[arm] == 0 ? kevo_clock_name(&none)
           : c->gpu_clock[arm] == c->samples[arm] ? "cupti" : "mixed";
}

/* The "time"/"ref_time" object of one arm. */
static json_t *time_json(const struct kevo_stats *s, const struct kevo_timing_result *r, int arm,
                         const struct tctx *c)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:b, s:i, s:o, s:i, s:i, s:b, "
                     "s:s, s:o*}",
                     "median_s", kevo_eval_jnum(s->median), "min_s", kevo_eval_jnum(s->min),
                     "p20_s", kevo_eval_jnum(s->p20), "p80_s", kevo_eval_jnum(s->p80),
                     "median_ci95_lo_s", kevo_eval_jnum(s->ci_lo), "median_ci95_hi_s",
                     kevo_eval_jnum(s->ci_hi), "noise",
                     kevo_eval_jnum(s->noise), "count", s->count, "capped", r->capped, "batch",
                     c->batch[arm], "sm_clock_mhz", kevo_eval_jnum(r->sm_clock_mhz[arm]), "sets",
                     c->K, "warmup", c->warmup, "batch_cold", c->batch[arm] > 1 && c->flush,
                     "clock", clock_name(c, arm), "launch_gap_s",
                     c->gpu_clock[arm] ? kevo_eval_jnum(launch_gap(c->e)) : NULL);
}

/* The task's bytes/flops expression at this workload; 0 when absent. */
static double task_amount(const struct kevo_wl *x, const char *text)
{
    int64_t v = 0;
    if (!text || kevo_eval_env_value(&x->env_ref, text, &v))
        return 0.0;
    return (double)v;
}

/* The output bytes a GPU kernel may leave dirty in L2 when it ends, written back to DRAM
 * after its clock stopped (by whatever runs next): at most the L2. A kernel whose outputs
 * fit there can beat bytes / bandwidth honestly (a 28 MB SwiGLU output on an H100's 50 MB
 * L2: 24.6 us against a 26.7 us floor), so the plausibility floor leaves them out. */
static double l2_write_slack(const struct kevo_ev *e, const struct kevo_wl *x)
{
    double out = 0, l2 = e->info.cc_major > 0 && e->info.l2_bytes > 0 ? (double)e->info.l2_bytes
                                                                        : 0;

    for (int k = 0; k < x->n_task; k++)
        out += is_out(&x->t[k]) ? (double)x->t[k].bytes : 0;
    return out < l2 ? out : l2;
}

/* gbps, tflops, the SOL floor and its fraction; implausible when faster than the floor
 * by more than the noise (at least SOL_MARGIN: calibration measures what is achievable,
 * which a very good kernel may slightly beat, not a hard physical bound), the floor of
 * the bytes a kernel must move before it ends (l2_write_slack). */
static void metrics(struct kevo_ev *e, struct kevo_wl *x, const struct kevo_stats *s)
{
    double bytes = task_amount(x, e->task->bytes), flops = task_amount(x, e->task->flops);
    double med = s->median;
    double tsol = kevo_sol_floor(&e->req->sol, bytes, flops, e->task->flops_unit);
    double slack = l2_write_slack(e, x);
    double tmin = kevo_sol_floor(&e->req->sol, bytes > slack ? bytes - slack : 0, flops,
                                 e->task->flops_unit);
    double base = e->req->sol.margin > 0 ? e->req->sol.margin : SOL_MARGIN;
    double margin = s->noise > base ? s->noise : base;

    json_object_set_new(x->j, "bytes", kevo_eval_jnum(bytes));
    json_object_set_new(x->j, "flops", kevo_eval_jnum(flops));
    json_object_set_new(x->j, "gbps", kevo_eval_jnum(med > 0 ? bytes / med / 1e9 : 0.0));
    json_object_set_new(x->j, "tflops", kevo_eval_jnum(med > 0 ? flops / med / 1e12 : 0.0));
    json_object_set_new(x->j, "t_sol_s", kevo_eval_jnum(tsol));
    json_object_set_new(x->j, "sol_fraction",
                        kevo_eval_jnum(med > 0 && tsol > 0 ? tsol / med : 0.0));
    if (tmin > 0 && med * (1.0 + margin) < tmin)
        kevo_eval_wl_fail(
            x, KEVO_VERDICT_IMPLAUSIBLE,
            json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "t_sol_s", kevo_eval_jnum(tsol),
                      "t_floor_s", kevo_eval_jnum(tmin), "l2_write_slack_bytes",
                      kevo_eval_jnum(slack), "median_s", kevo_eval_jnum(med), "noise",
                      kevo_eval_jnum(s->noise), "margin", kevo_eval_jnum(margin)),
            "median time %.4g s is below the speed-of-light floor %.4g s (margin %.0f%%) "
            "at %s",
            med, tmin, margin * 100, x->desc);
}

/* Warm-up, samples until the stop rule, results, re-check and metrics. */
static enum kevo_status time_loop(struct tctx *c, int n_arms)
{
    struct kevo_ev *e = c->e;
    struct kevo_wl *x = c->x;
    double cap = e->req->time_cap_s > 0 ? e->req->time_cap_s : DEFAULT_CAP_S;
    struct kevo_timing_cfg cfg;
    struct kevo_timing_result r;
    enum kevo_status st;

    kevo_timing_cfg_default(&cfg);
    cfg.n_arms = n_arms;
    cfg.cap_s = cap * n_arms;
    st = warm_up(c, n_arms, cap);
    if (!st)
        st = kevo_timing_run(&cfg, t_sample, c, &r);
    if (st)
        return c->failed_arm ? kevo_eval_ref_fail(e, x, st, "timing")
                             : kevo_eval_cand_fail(e, x, st, "timing");
    json_object_set_new(x->j, "time", time_json(&r.arm[0], &r, 0, c));
    if (n_arms > 1) {
        json_object_set_new(x->j, "ref_time", time_json(&r.arm[1], &r, 1, c));
        json_object_set_new(
            x->j, "speedup",
            kevo_eval_jnum(r.arm[0].median > 0 ? r.arm[1].median / r.arm[0].median : 0));
    }
    st = recheck(c);
    if (!st && !x->verdict)
        metrics(e, x, &r.arm[0]);
    return st;
}

enum kevo_status kevo_eval_wl_time(struct kevo_ev *e, struct kevo_wl *x)
{
    int with_ref = e->req->time_reference && !e->self;
    struct tctx c = { .e = e, .x = x };
    enum kevo_status st = KEVO_ERR_NOMEM;
    int K = pick_sets(e, x, with_ref);

    c.K = K;
    c.cs = kevo_calloc((size_t)K, sizeof *c.cs);
    c.rs = with_ref ? kevo_calloc((size_t)K, sizeof *c.rs) : NULL;
    c.launched = kevo_calloc((size_t)K, 1);
    if (!c.cs || (with_ref && !c.rs) || !c.launched)
        goto out;
    st = sets_init(&c);
    x->sets = c.cs;   /* a fault while timing is located among every set */
    x->rsets = c.rs;
    x->n_sets = c.K;
    if (!st && !x->verdict)
        st = time_loop(&c, with_ref ? 2 : 1);
    x->sets = x->rsets = NULL;
    x->n_sets = 0;
out:
    if (c.flush)
        e->b->ops->free(e->b->ctx, c.flush);
    for (int k = 1; c.cs && k < K; k++)
        kevo_eval_side_free(e, x, &c.cs[k]);
    for (int k = 1; c.rs && k < K; k++)       /* rs[0] is x->ref, freed with x */
        kevo_eval_side_free(e, x, &c.rs[k]);
    kevo_free(c.cs);
    kevo_free(c.rs);
    kevo_free(c.launched);
    return st;
}

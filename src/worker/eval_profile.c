/*
 * eval_profile - hardware counters of a candidate that passed (`"profile": 1` in the eval
 * request), collected in the worker through the backend's profile op (CUDA with CUPTI):
 * on one workload, with fresh inputs, every pass starting as a timed run does (outputs
 * and scratch poisoned, caches cold: nothing the kernel reads in L2, nothing dirty), each
 * launch of the plan its own range. The result's "profile" holds the raw per-launch
 * counters (core/counters.h); the controller turns them into kernel figures and a
 * diagnosis (ctl/profile.h). A collection that cannot run is reported in "profile" and
 * leaves the verdict alone; a fault while profiling is the candidate's crash.
 * KEVO_PROFILE_EXTRA="metric,metric" adds counters of one's own choice (raw Nsight Compute
 * names, at most KEVO_COUNTERS_EXTRA_MAX), reported as they are: a probe, e.g. of a figure's
 * numerator and denominator (bench/scripts/stall_probe.sh).
 */
#include "worker/eval_int.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/counters.h"

#include <math.h>
#include <stdlib.h>

#define PROFILE_SALT 0x9F0F11E5C0A7E125ull   /* the profiled inputs are no trial's */

/* One launch's {"name", "grid", "block", "m": {metric: value}} (NaN values left out). */
static json_t *launch_json(const struct kevo_ev *e, const struct kevo_call *c,
                           const struct kevo_counter_list *ml, const double *v)
{
    json_t *m = json_object();

    for (int k = 0; m && k < ml->n; k++) {
        if (isfinite(v[k]))
            json_object_set_new(m, ml->name[k], json_real(v[k]));
    }
    return json_pack("{s:s, s:[I, I, I], s:[I, I, I], s:o}", "name", e->can.ent[c->entry],
                     "grid", (json_int_t)c->grid[0], (json_int_t)c->grid[1],
                     (json_int_t)c->grid[2], "block", (json_int_t)c->block[0],
                     (json_int_t)c->block[1], (json_int_t)c->block[2], "m", m);
}

/* The cold start of a pass: poison every output and scratch buffer, then (GPU) read a
 * 2 x L2 buffer, which also drops the poison's dirty lines. *evict: that buffer (0: none). */
static int pre_calls(struct kevo_ev *e, struct kevo_wl *x, struct kevo_call *pre,
                     uint64_t *evict)
{
    size_t bytes = e->info.l2_bytes > 0 ? (size_t)e->info.l2_bytes * 2 / 256 * 256 : 0;
    int n = 0;

    for (int k = 0; k < x->n_t; k++) {
        const struct kevo_gbuf *g = &x->cand.buf[k];
        if (g->base && !is_in(&x->t[k]) && g->bytes)
            pre[n++] = kevo_call_fill(g->data, g->bytes, kevo_verify_poison(x->t[k].decl->dtype, 0));
    }
    *evict = 0;
    if (bytes && !e->b->ops->alloc(e->b->ctx, bytes, evict)) {
        if (e->b->ops->fill32(e->b->ctx, *evict, 0, bytes)) {
            e->b->ops->free(e->b->ctx, *evict);
            *evict = 0;
        } else {
            pre[n++] = kevo_call_evict(*evict, bytes);
        }
    }
    return n;
}

/* The raw profile of x's candidate plan, or {"tool", "error"} when it cannot be collected. */
static enum kevo_status collect(struct kevo_ev *e, struct kevo_wl *x, json_t **out)
{
    const struct kevo_side *s = &x->cand;
    struct kevo_counter_list ml;
    if (kevo_counters_list(&ml, getenv("KEVO_PROFILE_EXTRA")))
        KEVO_WARN("KEVO_PROFILE_EXTRA: some entries are no metric names, or past %d; left out",
                  KEVO_COUNTERS_EXTRA_MAX);
    struct kevo_call *pre = kevo_calloc((size_t)x->n_t + 1, sizeof *pre);
    double *v = kevo_calloc((size_t)s->n_calls * (size_t)ml.n + 1, sizeof *v);
    uint64_t evict = 0;
    int passes = 0, n_pre;
    json_t *launches = json_array();
    enum kevo_status st = pre && v && launches ? KEVO_OK : KEVO_ERR_NOMEM;

    if (st)
        goto out;
    n_pre = pre_calls(e, x, pre, &evict);
    kevo_buf_reset(&e->err);
    st = e->b->ops->profile(e->b->ctx, e->can.mod, pre, n_pre, s->calls, s->n_calls,
                            ml.name, ml.n, v, &passes, &e->err);
    for (int i = 0; !st && i < s->n_calls; i++)
        json_array_append_new(launches,
                              launch_json(e, &s->calls[i], &ml, v + (size_t)i * (size_t)ml.n));
    if (!st)
        *out = json_pack("{s:s, s:O, s:i}", "tool", "cupti", "launches", launches, "passes", passes);
out:
    if (evict)
        e->b->ops->free(e->b->ctx, evict);
    json_decref(launches);
    kevo_free(pre);
    kevo_free(v);
    return st;
}

enum kevo_status kevo_eval_wl_profile(struct kevo_ev *e, struct kevo_wl *x, json_t **out)
{
    double t0 = kevo_now();
    uint64_t seed = kevo_verify_derive(e->req->seed ^ PROFILE_SALT, (uint64_t)x->w, 0);
    enum kevo_status st = KEVO_OK;

    *out = NULL;
    if (!e->b->ops->profile) {
        *out = json_pack("{s:s, s:s, s:b}", "tool", e->b->ops->name, "error",
                         "this backend has no hardware counters", "unavailable", 1);
        return KEVO_OK;
    }
    st = kevo_eval_put_inputs(e, x, seed, &x->cand, NULL);
    if (!st && !x->verdict)
        st = collect(e, x, out);
    if (st == KEVO_ERR_DEVICE || st == KEVO_ERR_TIMEOUT)
        return kevo_eval_cand_fail(e, x, st, "profiling");
    if (x->verdict)
        return st;
    if (st) {   /* kevo's own failure to count: reported, the verdict stands */
        *out = json_pack("{s:s, s:s, s:b}", "tool", "cupti", "error",
                         kevo_buf_str(&e->err)[0] ? kevo_buf_str(&e->err) : kevo_status_name(st),
                         "unavailable", st == KEVO_ERR_NOTFOUND);
        st = KEVO_OK;
    }
    if (*out) {
        json_object_set_new(*out, "workload", json_pack("{s:i, s:o}", "index", x->w, "sizes",
                                                        kevo_eval_wl_sizes(e, x)));
        json_object_set_new(*out, "cost_s", json_real(kevo_now() - t0));
    }
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

/*
 * eval_record - how an evaluation records what happened (eval_int.h): a workload's or the
 * whole evaluation's verdict (the first one wins), kevo's own failures, and the JSON
 * helpers every part of the evaluation writes its result with. Below eval_wl.c,
 * eval_time.c and eval_dump.c, which all record through it.
 */
#include "worker/eval_int.h"
#include "base/log.h"
#include "base/mem.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- JSON helpers ---- */

/* JSON has no NaN/Inf: such values travel as the strings "nan", "inf", "-inf". */
json_t *kevo_eval_jnum(double v)
{
    if (isfinite(v))
        return json_real(v);
    return json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

json_t *kevo_eval_jdims(const int64_t *d, int n)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(d[i]));
    return a;
}

/* Evaluate text under env; 0 on success (the message of a failure is dropped). */
int kevo_eval_env_value(const struct kevo_env *env, const char *text, int64_t *out)
{
    char *m = NULL;
    enum kevo_status st = kevo_env_eval(env, text, out, &m);
    kevo_free(m);
    return st != KEVO_OK;
}

/* ---- verdicts and statuses ---- */

/* A verdict's message is a headline, cut at MESSAGE_MAX bytes: the long text (a compile
 * error, a backend's message) travels whole in its evidence. NULL when out of memory. */
#define MESSAGE_MAX 1023

static char *headline(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static char *headline(const char *fmt, va_list ap)
{
    char *m = kevo_vstrdupf(fmt, ap);

    if (m && strlen(m) > MESSAGE_MAX)
        m[MESSAGE_MAX] = '\0';
    return m;
}

/* Record a workload verdict; the first one wins. Takes ownership of evidence. */
void kevo_eval_wl_fail(struct kevo_wl *x, enum kevo_verdict v, json_t *evidence, const char *fmt,
                       ...)
{
    va_list ap;
    if (x->verdict != KEVO_VERDICT_OK) {
        json_decref(evidence);
        return;
    }
    x->verdict = v;
    x->evidence = evidence ? evidence : json_object();
    va_start(ap, fmt);
    x->message = headline(fmt, ap);
    va_end(ap);
}

void kevo_eval_fail(struct kevo_ev *e, enum kevo_verdict v, json_t *evidence, const char *fmt, ...)
{
    va_list ap;
    if (e->verdict != KEVO_VERDICT_OK) {
        json_decref(evidence);
        return;
    }
    e->verdict = v;
    e->evidence = evidence ? evidence : json_object();
    va_start(ap, fmt);
    e->message = headline(fmt, ap);
    va_end(ap);
}

enum kevo_status kevo_eval_error(struct kevo_ev *e, enum kevo_status st, const char *fmt, ...)
{
    va_list ap;
    kevo_buf_reset(&e->msg);
    va_start(ap, fmt);
    if (kevo_buf_vaddf(&e->msg, fmt, ap) != KEVO_OK)
        KEVO_DEBUG("eval: error message truncated");
    va_end(ap);
    return st;
}

/* ---- faults the backend located ---- */

/* How far addr lies outside side s's tensor k: the distance and which side of it. */
static uint64_t gbuf_dist(const struct kevo_gbuf *g, uint64_t addr, int *after)
{
    *after = addr >= g->data;
    if (!*after)
        return g->data - addr;
    return addr >= g->data + g->bytes ? addr - (g->data + g->bytes) : 0;
}

/* Consider every tensor of side s for the one nearest addr. */
static void nearest_in(const struct kevo_wl *x, const struct kevo_side *s, uint64_t addr,
                       int *best_k, uint64_t *best_d, int *best_after)
{
    for (int k = 0; s && s->buf && k < x->n_t; k++) {
        int after;
        if (!s->buf[k].base)
            continue;
        uint64_t d = gbuf_dist(&s->buf[k], addr, &after);
        if (*best_k < 0 || d < *best_d) {
            *best_k = k;
            *best_d = d;
            *best_after = after;
        }
    }
}

/*
 * A memory fault at a known address (guarded memory: outside every buffer the call was
 * given) as an out_of_bounds verdict naming the nearest tensor and the side. Gaps between
 * buffers are wider than a 32-bit index reaches, so the nearest tensor is the one the
 * stray index came from. 0 if the backend cannot say where.
 */
static int fault_verdict(struct kevo_ev *e, struct kevo_wl *x, const char *phase)
{
    uint64_t addr = 0, d = 0;
    int write = -1, k = -1, after = 0;

    if (!e->b->ops->fault || !e->b->ops->fault(e->b->ctx, &addr, &write))
        return 0;
    nearest_in(x, &x->cand, addr, &k, &d, &after);
    nearest_in(x, &x->ref, addr, &k, &d, &after);
    for (int i = 0; i < x->n_sets; i++) {
        nearest_in(x, x->sets ? &x->sets[i] : NULL, addr, &k, &d, &after);
        nearest_in(x, x->rsets ? &x->rsets[i] : NULL, addr, &k, &d, &after);
    }
    if (k < 0 || d > ((uint64_t)1 << 40))
        return 0;
    const char *access = write == 1 ? "store" : write == 0 ? "load" : "access";
    const char *name = x->t[k].decl->name;
    kevo_eval_wl_fail(x, KEVO_VERDICT_OUT_OF_BOUNDS,
                      json_pack("{s:s, s:s, s:I, s:s, s:s}", "tensor", name, "side",
                                after ? "back" : "front", "offset",
                                (json_int_t)(after ? (int64_t)d : -(int64_t)d), "access", access,
                                "phase", phase),
                      "a %s %llu bytes %s %s faulted during %s at %s (guarded memory: nothing "
                      "is mapped there)", access, (unsigned long long)d,
                      after ? "past the end of" : "before the start of", name, phase, x->desc);
    return 1;
}

/*
 * A backend failure while running the candidate becomes the workload's verdict. Returns
 * KEVO_OK for a verdict the worker survives (the caller stops the workload), KEVO_ERR_DEVICE
 * when the context is lost, or st itself when kevo, not the candidate, failed.
 */
enum kevo_status kevo_eval_cand_fail(struct kevo_ev *e, struct kevo_wl *x, enum kevo_status st,
                                     const char *phase)
{
    const char *m = kevo_buf_str(&e->err);
    json_t *evd = json_pack("{s:s, s:s}", "phase", phase, "message", m);

    switch (st) {
    case KEVO_ERR_LAUNCH:
    case KEVO_ERR_CUDA:   /* e.g. out of memory for a kernel's local memory: its doing */
        kevo_eval_wl_fail(x, KEVO_VERDICT_LAUNCH_ERROR, evd, "launch refused during %s at %s: %s",
                          phase, x->desc, m);
        return KEVO_OK;
    case KEVO_ERR_COMPILE:
        kevo_eval_wl_fail(x, KEVO_VERDICT_COMPILE_ERROR, evd, "compile error: %s", m);
        return KEVO_OK;
    case KEVO_ERR_TIMEOUT:
        kevo_eval_wl_fail(x, KEVO_VERDICT_TIMEOUT, evd, "timed out during %s at %s", phase,
                          x->desc);
        return KEVO_ERR_DEVICE;
    case KEVO_ERR_DEVICE:
        if (fault_verdict(e, x, phase)) {
            json_decref(evd);
            return KEVO_ERR_DEVICE;
        }
        kevo_eval_wl_fail(x, KEVO_VERDICT_CRASH, evd, "device fault during %s at %s: %s", phase,
                          x->desc, m);
        return KEVO_ERR_DEVICE;
    default:
        json_decref(evd);
        return kevo_eval_error(e, st, "%s failed at %s: %s (%s)", phase, x->desc,
                               kevo_status_name(st), m);
    }
}

/* The same for the reference: a broken reference is the task's fault, not the
 * candidate's, unless the reference is the one being evaluated. */
enum kevo_status kevo_eval_ref_fail(struct kevo_ev *e, struct kevo_wl *x, enum kevo_status st,
                                    const char *phase)
{
    char ph[96];
    snprintf(ph, sizeof ph, "reference %s", phase);
    if (e->self || st == KEVO_ERR_TIMEOUT || st == KEVO_ERR_DEVICE)
        return kevo_eval_cand_fail(e, x, st, ph);
    if (st == KEVO_ERR_LAUNCH || st == KEVO_ERR_COMPILE)
        st = KEVO_ERR_INVALID;
    return kevo_eval_error(e, st, "the task's reference failed (%s) at %s: %s", phase, x->desc,
                           kevo_buf_str(&e->err));
}

json_t *kevo_eval_wl_sizes(const struct kevo_ev *e, const struct kevo_wl *x)
{
    const struct kevo_workload *wd = &e->task->workloads[x->w];
    json_t *o = json_object();
    for (int i = 0; o && i < wd->n; i++) {
        int64_t v = 0;
        if (!kevo_eval_env_value(&x->env_ref, wd->names[i], &v))
            json_object_set_new(o, wd->names[i], json_integer(v));
    }
    return o;
}

/*
 * eval_wl - one workload of an evaluation (eval_int.h): its tensors and guarded buffers,
 * the resolved launch plans of both sides, the reference and candidate runs, and the
 * correctness checks of docs/harness.md in their fixed order. The rules themselves (poison
 * patterns, tolerance, degenerate) are in verify.c; the backend applies them where the
 * data lives (gen, gen_check, seal, judge), and this file turns the summaries into
 * verdicts. Device memory per workload: both sides, plus a copy of the candidate's
 * outputs (run A's, kept while run B reuses the buffers).
 */
#include "worker/eval_int.h"
#include "core/dtype_conv.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- guarded buffers ---- */

/*
 * [front guard | data | back guard], the whole a multiple of the backend's allocation
 * granule, so the allocation is exactly its own mapping (guarded memory, backend.h): the
 * back guard ends where the mapping ends, and the front guard takes up the rest, so a
 * stray store anywhere in the mapping outside the data changes a guard.
 */
static enum kevo_status gbuf_alloc(struct kevo_ev *e, size_t bytes, struct kevo_gbuf *g)
{
    const struct kevo_backend_ops *o = e->b->ops;
    size_t body = (bytes + 255) & ~(size_t)255;
    size_t gran = e->info.alloc_granule >= 256 ? (size_t)e->info.alloc_granule : 256;
    enum kevo_status st;

    memset(g, 0, sizeof *g);
    if (body < bytes || body > SIZE_MAX - 2 * GUARD_BYTES - gran)
        return KEVO_ERR_TOOBIG;
    g->total = (body + 2 * GUARD_BYTES + gran - 1) / gran * gran;
    st = o->alloc(e->b->ctx, g->total, &g->base);
    if (st)
        return st;
    g->data = g->base + (g->total - GUARD_BYTES - body);
    g->bytes = bytes;
    /* The whole allocation gets the canary; data is overwritten by inputs or poison. */
    return o->fill32(e->b->ctx, g->base, e->canary, g->total);
}

/* Free g (no-op for a zeroed one) and zero it. */
static void gbuf_free(struct kevo_ev *e, struct kevo_gbuf *g)
{
    if (g->base)
        e->b->ops->free(e->b->ctx, g->base);
    memset(g, 0, sizeof *g);
}

/* Fill the data with a 4-byte pattern: fill32 on whole words, the tail by upload, so
 * the back guard is never touched whatever the backend does with a ragged length. */
static enum kevo_status gbuf_fill(struct kevo_ev *e, const struct kevo_gbuf *g, uint32_t pat)
{
    size_t body = g->bytes & ~(size_t)3, tail = g->bytes - body;
    unsigned char t[4];
    enum kevo_status st = KEVO_OK;

    if (body)
        st = e->b->ops->fill32(e->b->ctx, g->data, pat, body);
    if (!st && tail) {
        for (size_t j = 0; j < tail; j++)
            t[j] = (unsigned char)(pat >> (8 * j));
        st = e->b->ops->upload(e->b->ctx, g->data + body, t, tail);
    }
    return st;
}

/* The first changed byte of the front guard [base, data), or -1: a download when it is
 * small, else a compare where it lives (up to a granule, 2 MiB on a GPU). */
static enum kevo_status front_check(struct kevo_ev *e, struct kevo_wl *x, const struct kevo_gbuf *g,
                                    size_t front, int64_t *r)
{
    struct kevo_gen c = { .kind = KEVO_INIT_RANDINT, .dtype = KEVO_I32 };
    int64_t first = -1;
    enum kevo_status st;

    if (front <= sizeof x->tmp) {
        st = e->b->ops->download(e->b->ctx, x->tmp, g->base, front);
        *r = st ? -1 : kevo_verify_guard_check(x->tmp, front, 0, e->canary);
        return st;
    }
    /* randint [c, c+1) is the constant c: the canary word, checked by gen_check */
    c.lo = (int32_t)e->canary;
    c.hi = c.lo + 1;
    kevo_buf_reset(&e->err);
    st = e->b->ops->gen_check(e->b->ctx, g->base, &c, 0, 0, (int64_t)(front / 4), &first,
                              &e->err);
    *r = first >= 0 ? 4 * first : -1;
    return st;
}

/* Check both guards; *side is NULL when intact, else "front"/"back" with the offset of
 * the first changed byte relative to the data start (front: negative) or end (back). */
static enum kevo_status gbuf_check(struct kevo_ev *e, struct kevo_wl *x, const struct kevo_gbuf *g,
                                   const char **side, int64_t *off)
{
    size_t front = (size_t)(g->data - g->base);
    size_t back = g->total - front - g->bytes;
    enum kevo_status st;
    int64_t r;

    *side = NULL;
    st = front_check(e, x, g, front, &r);
    if (st)
        return st;
    if (r >= 0) {
        *side = "front";
        *off = r - (int64_t)front;
        return KEVO_OK;
    }
    st = e->b->ops->download(e->b->ctx, x->tmp, g->data + g->bytes, back);
    if (st)
        return st;
    r = kevo_verify_guard_check(x->tmp, back, GUARD_BYTES + g->bytes, e->canary);
    if (r >= 0) {
        *side = "back";
        *off = r;
    }
    return KEVO_OK;
}

/* ---- tensors and plans ---- */

static enum kevo_status tensor_shape(const struct kevo_env *env, const struct kevo_tensor_decl *d,
                                     struct kevo_tinfo *t, char **msg)
{
    enum kevo_status st;
    size_t esz = kevo_dtype_size(d->dtype);

    t->decl = d;
    t->numel = 1;
    for (int i = 0; i < d->ndim; i++) {
        st = kevo_env_eval(env, d->shape[i], &t->dims[i], msg);
        if (st)
            return st;
        if (t->dims[i] < 0 || __builtin_mul_overflow(t->numel, t->dims[i], &t->numel))
            return KEVO_ERR_OVERFLOW;
    }
    if (__builtin_mul_overflow((size_t)t->numel, esz, &t->bytes) || t->bytes > (1ull << 40))
        return KEVO_ERR_TOOBIG;
    return KEVO_OK;
}

/* Evaluate a grid/block/smem expression into a 32-bit value in [lo, UINT32_MAX]; text
 * NULL means lo. On failure *why says what and why. */
static enum kevo_status eval_dim(const struct kevo_env *env, const char *text, int64_t lo,
                                 uint32_t *out, const char *what, char *why, size_t whylen)
{
    int64_t v = 0;
    char *m = NULL;
    enum kevo_status st = text ? kevo_env_eval(env, text, &v, &m) : KEVO_OK;

    if (!text)
        v = lo; /* absent: grid/block dims are 1, smem 0 */
    if (st) {
        snprintf(why, whylen, "%s: %s", what, m ? m : kevo_status_name(st));
        kevo_free(m);
        return st;
    }
    if (v < lo || v > (int64_t)UINT32_MAX) {
        snprintf(why, whylen, "%s = %lld is out of range [%lld, 4294967295]", what, (long long)v,
                 (long long)lo);
        return KEVO_ERR_INVALID;
    }
    *out = (uint32_t)v;
    return KEVO_OK;
}

/* A tensor map: its tensor's data address on side s, its description in the call's table. */
static enum kevo_status resolve_tmap(const struct kevo_ev *e, const struct kevo_wl *x,
                                     const struct kevo_side *s, const struct kevo_task *src,
                                     const struct kevo_env *env, const struct kevo_arg *a,
                                     struct kevo_call *c, char *why, size_t whylen)
{
    const struct kevo_tmap *m = &src->tmaps[a->index];
    struct kevo_val *v = &c->args[c->n_args];

    if (c->n_tm >= KEVO_CALL_MAX_TMAPS) {
        snprintf(why, whylen, "more than %d tensor maps in one launch", KEVO_CALL_MAX_TMAPS);
        return KEVO_ERR_INVALID;
    }
    if (m->tensor_index < 0 || m->tensor_index >= x->n_t || !s->buf[m->tensor_index].base) {
        snprintf(why, whylen, "tensor map %s: %s is not a tensor of this plan", a->text,
                 m->tensor);
        return KEVO_ERR_INVALID;
    }
    if (kevo_rules_tmap(e->task, src, a->index, env, &c->tm[c->n_tm], why, whylen))
        return KEVO_ERR_INVALID;
    v->kind = KEVO_VAL_TMAP;
    v->ptr = s->buf[m->tensor_index].data;
    v->dtype = c->tm[c->n_tm].dtype;
    v->i = c->n_tm++;
    return KEVO_OK;
}

/* One launch argument: a tensor becomes its buffer's data address on side s, a scalar its
 * value with its dtype, an expression a 64-bit integer. */
static enum kevo_status resolve_arg(const struct kevo_ev *e, const struct kevo_wl *x,
                                    const struct kevo_side *s, const struct kevo_env *env,
                                    const struct kevo_arg *a, struct kevo_val *v, char *why,
                                    size_t whylen)
{
    char *m = NULL;
    enum kevo_status st;

    memset(v, 0, sizeof *v);
    if (a->kind == KEVO_ARG_TENSOR) {
        if (a->index < 0 || a->index >= x->n_t || !s->buf[a->index].base) {
            snprintf(why, whylen, "argument %s is not a tensor of this plan", a->text);
            return KEVO_ERR_INVALID;
        }
        v->kind = KEVO_VAL_PTR;
        v->ptr = s->buf[a->index].data;
        v->dtype = x->t[a->index].decl->dtype;
        return KEVO_OK;
    }
    if (a->kind == KEVO_ARG_SCALAR) {
        const struct kevo_scalar_decl *sc = &e->task->scalars[a->index];
        v->dtype = sc->dtype;
        v->kind = kevo_dtype_is_float(sc->dtype) ? KEVO_VAL_FLOAT : KEVO_VAL_INT;
        v->f = sc->value;
        v->i = sc->ivalue;
        return KEVO_OK;
    }
    v->kind = KEVO_VAL_INT;
    v->dtype = KEVO_I64;
    st = kevo_env_eval(env, a->text, &v->i, &m);
    if (st)
        snprintf(why, whylen, "argument %s: %s", a->text, m ? m : kevo_status_name(st));
    kevo_free(m);
    return st;
}

int kevo_eval_entry_of(const struct kevo_plan *p, const char *name)
{
    for (int i = 0; i < p->n_ent; i++) {
        if (!strcmp(p->ent[i], name))
            return i;
    }
    return -1;
}

/* One launch with every expression evaluated under env. */
static enum kevo_status resolve_call(const struct kevo_ev *e, const struct kevo_wl *x,
                                     const struct kevo_side *s, const struct kevo_plan *p,
                                     const struct kevo_env *env, const struct kevo_launch *l,
                                     struct kevo_call *c, char *why, size_t whylen)
{
    static const char *const gn[3] = { "grid.x", "grid.y", "grid.z" };
    static const char *const bn[3] = { "block.x", "block.y", "block.z" };
    enum kevo_status st = KEVO_OK;

    c->entry = kevo_eval_entry_of(p, l->kernel);
    for (int d = 0; d < 3 && !st; d++) {
        st = eval_dim(env, l->grid[d], 1, &c->grid[d], gn[d], why, whylen);
        if (!st)
            st = eval_dim(env, l->block[d], 1, &c->block[d], bn[d], why, whylen);
    }
    if (!st)
        st = eval_dim(env, l->smem, 0, &c->smem, "smem", why, whylen);
    c->n_tm = 0;
    for (c->n_args = 0; c->n_args < l->n_args && !st; c->n_args++) {
        const struct kevo_arg *a = &l->args[c->n_args];
        memset(&c->args[c->n_args], 0, sizeof c->args[c->n_args]);
        if (a->kind == KEVO_ARG_TMAP)   /* a tensor map: the candidate's own directive */
            st = resolve_tmap(e, x, s, p->src, env, a, c, why, whylen);
        else
            st = resolve_arg(e, x, s, env, a, &c->args[c->n_args], why, whylen);
    }
    return st;
}

/* Evaluate a plan against side s's buffers. On a bad plan: a launch_error verdict for the
 * candidate, KEVO_ERR_INVALID for the task's reference. */
static enum kevo_status side_plan(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                  int is_ref)
{
    const struct kevo_plan *p = is_ref ? &e->ref : &e->can;
    const struct kevo_env *env = is_ref ? &x->env_ref : &x->env_cand;
    char why[300];

    s->calls = kevo_calloc((size_t)p->src->n_launches + 1, sizeof *s->calls);
    if (!s->calls)
        return KEVO_ERR_NOMEM;
    s->n_calls = p->src->n_launches;
    for (int i = 0; i < p->src->n_launches; i++) {
        const struct kevo_launch *l = &p->src->launches[i];
        /* the rules `kevo check` applies too (core/rules.h), then the plan itself */
        if (!resolve_call(e, x, s, p, env, l, &s->calls[i], why, sizeof why) &&
            !kevo_rules_launch(e->task, p->src, i, p->protos ? &p->protos[i] : NULL, env, why,
                               sizeof why))
            continue;
        if (is_ref && !e->self)
            return kevo_eval_error(e, KEVO_ERR_INVALID, "%s: line %d: launch %s: %s", x->desc,
                                   l->line, l->kernel, why);
        kevo_eval_wl_fail(
            x, KEVO_VERDICT_LAUNCH_ERROR,
            json_pack("{s:i, s:s, s:s}", "line", l->line, "kernel", l->kernel, "message", why),
            "bad launch plan at %s: line %d: launch %s: %s", x->desc, l->line, l->kernel, why);
        return KEVO_OK;
    }
    return KEVO_OK;
}

/* Allocate side s: every task tensor, plus the candidate's scratch unless is_ref. */
enum kevo_status kevo_eval_side_alloc(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                      int is_ref, int spare)
{
    int n = is_ref ? x->n_task : x->n_t;
    enum kevo_status st;

    s->buf = kevo_calloc((size_t)x->n_t, sizeof *s->buf);
    if (!s->buf)
        return KEVO_ERR_NOMEM;
    for (int k = 0; k < n; k++) {
        st = gbuf_alloc(e, x->t[k].bytes, &s->buf[k]);
        if (st == KEVO_ERR_DEVICE)
            return kevo_eval_cand_fail(e, x, st, "allocation");
        if (st && spare)
            return st;
        if (st && k >= x->n_task) { /* the candidate asked for more than the device has */
            kevo_eval_wl_fail(
                x, KEVO_VERDICT_LAUNCH_ERROR,
                json_pack("{s:s, s:I}", "scratch", x->t[k].decl->name, "bytes",
                          (json_int_t)x->t[k].bytes),
                "line %d: cannot allocate scratch %s (%zu bytes) at %s: %s", x->t[k].decl->line,
                x->t[k].decl->name, x->t[k].bytes, x->desc, kevo_status_name(st));
            return KEVO_OK;
        }
        if (st)
            return kevo_eval_error(e, st, "cannot allocate %s (%zu bytes) at %s",
                                   x->t[k].decl->name, x->t[k].bytes, x->desc);
    }
    return side_plan(e, x, s, is_ref);
}

void kevo_eval_side_free(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s)
{
    for (int k = 0; s->buf && k < x->n_t; k++)
        gbuf_free(e, &s->buf[k]);
    kevo_free(s->buf);
    kevo_free(s->calls);
    memset(s, 0, sizeof *s);
}

/* ---- one workload: setup and teardown ---- */

static void wl_desc(const struct kevo_ev *e, struct kevo_wl *x)
{
    const struct kevo_workload *wd = &e->task->workloads[x->w];
    size_t len = (size_t)snprintf(x->desc, sizeof x->desc, "%sworkload %d (",
                                  wd->holdout ? "holdout " : "", x->w);
    for (int i = 0; i < wd->n && len < sizeof x->desc; i++) {
        int64_t v = 0;
        if (kevo_eval_env_value(&x->env_ref, wd->names[i], &v))
            v = -1;
        len += (size_t)snprintf(x->desc + len, sizeof x->desc - len, "%s%s=%lld", i ? " " : "",
                                wd->names[i], (long long)v);
    }
    if (len < sizeof x->desc)
        snprintf(x->desc + len, sizeof x->desc - len, ")");
}

/* The workload's environments: sizes (reference), sizes + params (candidate). */
static enum kevo_status wl_envs(struct kevo_ev *e, struct kevo_wl *x)
{
    char *m = NULL;
    enum kevo_status st = kevo_task_env(e->task, x->w, NULL, NULL, &x->env_ref, &m);
    if (!st && !e->self)
        st = kevo_task_env(e->task, x->w, e->cand, e->req->params, &x->env_cand, &m);
    else if (!st)
        x->env_cand = x->env_ref;
    if (st)
        st = kevo_eval_error(e, st, "workload %d: %s", x->w, m ? m : kevo_status_name(st));
    kevo_free(m);
    return st;
}

/* Shapes and sizes of every tensor; a candidate scratch that cannot be sized is a
 * launch_error, a task tensor that cannot is the task's fault. */
static enum kevo_status wl_tensors(struct kevo_ev *e, struct kevo_wl *x)
{
    enum kevo_status st;
    char *m = NULL;

    x->n_task = e->task->n_tensors;
    x->n_t = x->n_task + (e->self ? 0 : e->cand->n_tensors);
    x->t = kevo_calloc((size_t)x->n_t + 1, sizeof *x->t);
    if (!x->t)
        return KEVO_ERR_NOMEM;
    for (int k = 0; k < x->n_t; k++) {
        int own = k >= x->n_task;
        const struct kevo_tensor_decl *d =
            own ? &e->cand->tensors[k - x->n_task] : &e->task->tensors[k];
        st = tensor_shape(own ? &x->env_cand : &x->env_ref, d, &x->t[k], &m);
        if (st && own) {
            kevo_eval_wl_fail(x, KEVO_VERDICT_LAUNCH_ERROR, json_pack("{s:s}", "scratch", d->name),
                              "line %d: scratch %s has no valid size at %s: %s", d->line, d->name,
                              x->desc, m ? m : kevo_status_name(st));
            st = KEVO_OK;
        } else if (st) {
            st = kevo_eval_error(e, st, "line %d: tensor %s has no valid size at %s: %s", d->line,
                                 d->name, x->desc, m ? m : kevo_status_name(st));
        }
        kevo_free(m);
        m = NULL;
        if (st || x->verdict)
            return st;
    }
    return KEVO_OK;
}

/* Per-tensor arrays of the workload, and each input's INIT (a bad INIT is the task's
 * fault, found here once rather than at every trial). */
static enum kevo_status wl_arrays(struct kevo_ev *e, struct kevo_wl *x)
{
    size_t n = (size_t)x->n_t + 1;
    char *m = NULL;

    x->gen = kevo_calloc(n, sizeof *x->gen);
    x->ref_key = kevo_calloc(n, sizeof *x->ref_key);
    x->hold = kevo_calloc(n, sizeof *x->hold);
    x->jr = kevo_calloc(n, sizeof *x->jr);
    x->jb = kevo_calloc(n, sizeof *x->jb);
    x->ref_hash = kevo_calloc(n, sizeof(uint64_t));
    x->cand_hash = kevo_calloc(n, sizeof(uint64_t));
    x->ref_changed = kevo_calloc(n, 1);
    x->cand_changed = kevo_calloc(n, 1);
    if (!x->gen || !x->ref_key || !x->hold || !x->jr || !x->jb || !x->ref_hash ||
        !x->cand_hash || !x->ref_changed || !x->cand_changed)
        return KEVO_ERR_NOMEM;
    for (int k = 0; k < x->n_task; k++) {
        if (!is_in(&x->t[k]))
            continue;
        enum kevo_status st = kevo_verify_gen_spec(x->t[k].decl, &x->env_ref, &x->gen[k], &m);
        if (st) {
            st = kevo_eval_error(e, st, "%s at %s", m ? m : kevo_status_name(st), x->desc);
            kevo_free(m);
            return st;
        }
    }
    return KEVO_OK;
}

void kevo_eval_wl_free(struct kevo_ev *e, struct kevo_wl *x)
{
    kevo_eval_side_free(e, x, &x->ref);
    kevo_eval_side_free(e, x, &x->cand);
    for (int k = 0; x->hold && k < x->n_t; k++)
        e->b->ops->free(e->b->ctx, x->hold[k]);
    kevo_free(x->gen);
    kevo_free(x->ref_key);
    kevo_free(x->hold);
    kevo_free(x->jr);
    kevo_free(x->jb);
    kevo_free(x->ref_hash);
    kevo_free(x->cand_hash);
    kevo_free(x->ref_changed);
    kevo_free(x->cand_changed);
    kevo_free(x->t);
    json_decref(x->evidence);
    kevo_free(x->message);
    memset(x, 0, sizeof *x);
}

/* Everything a workload needs, up to resolved plans on both sides. A candidate failure
 * here (a bad plan, an impossible scratch size) is x->verdict with KEVO_OK. */
enum kevo_status kevo_eval_wl_setup(struct kevo_ev *e, struct kevo_wl *x, int w)
{
    enum kevo_status st;

    memset(x, 0, sizeof *x);
    x->w = w;
    snprintf(x->desc, sizeof x->desc, "workload %d", w);
    st = wl_envs(e, x);
    if (st)
        return st;
    wl_desc(e, x);
    st = wl_tensors(e, x);
    if (!st && !x->verdict)
        st = wl_arrays(e, x);
    if (!st && !x->verdict)
        st = kevo_eval_side_alloc(e, x, &x->ref, 1, 0);
    if (!st && !x->verdict)
        st = kevo_eval_side_alloc(e, x, &x->cand, 0, 0);
    return st;
}

/* ---- one run ---- */

/* A failed verification op: a lost context is the candidate's crash (it is the only one
 * that can have done it), anything else kevo's own error. */
static enum kevo_status vop_fail(struct kevo_ev *e, struct kevo_wl *x, enum kevo_status st,
                                 const char *what, const char *name)
{
    if (st == KEVO_ERR_DEVICE || st == KEVO_ERR_TIMEOUT)
        return kevo_eval_cand_fail(e, x, st, what);
    return kevo_eval_error(e, st, "%s of %s failed at %s: %s (%s)", what, name, x->desc,
                           kevo_status_name(st), kevo_buf_str(&e->err));
}

/* Generate every input of side s for seed, on the device. */
static enum kevo_status gen_side(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                 uint64_t seed)
{
    for (int k = 0; k < x->n_task; k++) {
        if (!is_in(&x->t[k]) || !x->t[k].numel)
            continue;
        kevo_buf_reset(&e->err);
        enum kevo_status st = e->b->ops->gen(e->b->ctx, s->buf[k].data, &x->gen[k], seed,
                                             (uint64_t)k, x->t[k].numel, &e->err);
        if (st)
            return vop_fail(e, x, st, "input generation", x->t[k].decl->name);
    }
    return KEVO_OK;
}

enum kevo_status kevo_eval_put_inputs(struct kevo_ev *e, struct kevo_wl *x, uint64_t seed,
                                      struct kevo_side *a, struct kevo_side *b)
{
    enum kevo_status st = gen_side(e, x, a, seed);
    if (!st && !x->verdict && b)
        st = gen_side(e, x, b, seed);
    return st;
}

/* Poison every output and scratch buffer of side s with pattern `which`. */
enum kevo_status kevo_eval_poison(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                  int which)
{
    for (int k = 0; k < x->n_t; k++) {
        if (!s->buf[k].base || is_in(&x->t[k]))
            continue;
        enum kevo_status st =
            gbuf_fill(e, &s->buf[k], kevo_verify_poison(x->t[k].decl->dtype, which));
        if (st)
            return st;
    }
    return KEVO_OK;
}

/* Launch side s's plan and wait; a failure goes through `fail` (kevo_eval_cand_fail or
 * kevo_eval_ref_fail). */
static enum kevo_status launch_sync(struct kevo_ev *e, struct kevo_wl *x, const struct kevo_plan *p,
                                    struct kevo_side *s, const char *phase,
                                    enum kevo_status (*fail)(struct kevo_ev *, struct kevo_wl *,
                                                             enum kevo_status, const char *))
{
    enum kevo_status st;

    kevo_buf_reset(&e->err);
    st = e->b->ops->launch(e->b->ctx, p->mod, s->calls, s->n_calls, &e->err);
    if (!st)
        st = e->b->ops->sync(e->b->ctx, &e->err);
    return st ? fail(e, x, st, phase) : KEVO_OK;
}

/* Seal every output of side s, output k under a key derived from (key, k): never 0,
 * which would mean "in the clear". */
static enum kevo_status seal_outputs(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                     uint64_t key)
{
    for (int k = 0; k < x->n_task; k++) {
        const struct kevo_tinfo *t = &x->t[k];
        if (!is_out(t))
            continue;
        x->ref_key[k] = kevo_verify_derive(key, (uint64_t)k, 0) | 1;
        kevo_buf_reset(&e->err);
        enum kevo_status st = e->b->ops->seal(e->b->ctx, s->buf[k].data, t->decl->dtype,
                                              t->numel, x->ref_key[k], &e->err);
        if (st)
            return vop_fail(e, x, st, "sealing", t->decl->name);
    }
    return KEVO_OK;
}

/* The reference on side s: poison, run, and seal what it wrote. The candidate shares the
 * device's memory and could otherwise scan it for the answer and copy it. */
enum kevo_status kevo_eval_run_ref(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                   uint64_t key)
{
    enum kevo_status st = kevo_eval_poison(e, x, s, 0);
    if (!st)
        st = launch_sync(e, x, &e->ref, s, "run", kevo_eval_ref_fail);
    if (!st && !x->verdict)
        st = seal_outputs(e, x, s, key);
    return st;
}

enum kevo_status kevo_eval_check_guards(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                        const char *run)
{
    for (int k = 0; k < x->n_t; k++) {
        const char *where = NULL;
        int64_t off = 0;
        if (!s->buf[k].base)
            continue;
        enum kevo_status st = gbuf_check(e, x, &s->buf[k], &where, &off);
        if (st)
            return st;
        if (where) {
            kevo_eval_wl_fail(x, KEVO_VERDICT_OUT_OF_BOUNDS,
                              json_pack("{s:s, s:s, s:I, s:s}", "tensor", x->t[k].decl->name,
                                        "side", where, "offset", (json_int_t)off, "run", run),
                              "%s wrote outside %s: %s guard changed at byte offset %lld, at %s",
                              run, x->t[k].decl->name, where, (long long)off, x->desc);
            return KEVO_OK;
        }
    }
    return KEVO_OK;
}

/* Inputs of side s still what seed generated? Checked where they live. */
enum kevo_status kevo_eval_check_inputs(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                        uint64_t seed, const char *run)
{
    for (int k = 0; k < x->n_task; k++) {
        const struct kevo_tinfo *t = &x->t[k];
        int64_t i = -1;
        if (!is_in(t) || !t->numel)
            continue;
        kevo_buf_reset(&e->err);
        enum kevo_status st = e->b->ops->gen_check(e->b->ctx, s->buf[k].data, &x->gen[k], seed,
                                                   (uint64_t)k, t->numel, &i, &e->err);
        if (st)
            return vop_fail(e, x, st, "input check", t->decl->name);
        if (i >= 0) {
            kevo_eval_wl_fail(x, KEVO_VERDICT_INPUT_MUTATED,
                              json_pack("{s:s, s:I, s:s}", "tensor", t->decl->name, "index",
                                        (json_int_t)i, "run", run),
                              "%s changed input %s (first at element %lld) at %s", run,
                              t->decl->name, (long long)i, x->desc);
            return KEVO_OK;
        }
    }
    return KEVO_OK;
}

/* One candidate run on side s with poison `which`, on the inputs of seed. */
static enum kevo_status run_cand(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                 int which, uint64_t seed, const char *run)
{
    enum kevo_status st = kevo_eval_poison(e, x, s, which);
    if (!st)
        st = launch_sync(e, x, &e->can, s, run, kevo_eval_cand_fail);
    if (!st && !x->verdict)
        st = kevo_eval_check_guards(e, x, s, run);
    if (!st && !x->verdict)
        st = kevo_eval_check_inputs(e, x, s, seed, run);
    return st;
}

/* Keep run A's outputs (run B reuses the buffers) in x->hold, allocated at first use. */
static enum kevo_status hold_outputs(struct kevo_ev *e, struct kevo_wl *x)
{
    for (int k = 0; k < x->n_task; k++) {
        const struct kevo_tinfo *t = &x->t[k];
        enum kevo_status st = KEVO_OK;
        if (!is_out(t))
            continue;
        if (!x->hold[k])
            st = e->b->ops->alloc(e->b->ctx, t->bytes, &x->hold[k]);
        if (st)
            return st == KEVO_ERR_DEVICE ? kevo_eval_cand_fail(e, x, st, "allocation")
                                         : kevo_eval_error(e, st, "cannot allocate %zu bytes "
                                                           "for run A's %s at %s", t->bytes,
                                                           t->decl->name, x->desc);
        if (t->bytes)
            st = e->b->ops->copy(e->b->ctx, x->hold[k], x->cand.buf[k].data, t->bytes);
        if (st)
            return st == KEVO_ERR_DEVICE ? kevo_eval_cand_fail(e, x, st, "copy") : st;
    }
    return KEVO_OK;
}

/* ---- judging one trial ---- */

enum kevo_status kevo_eval_judge(struct kevo_ev *e, struct kevo_wl *x, int k, uint64_t a,
                                 uint64_t b, const struct kevo_side *ref,
                                 struct kevo_judge_res *res)
{
    const struct kevo_tinfo *t = &x->t[k];
    struct kevo_judge_req rq = {
        .dt = t->decl->dtype, .n = t->numel, .a = a, .b = b, .ref = ref->buf[k].data,
        .ref_key = x->ref_key[k], .pe_a = kevo_verify_poison_elem(t->decl->dtype, 0),
        .pe_b = kevo_verify_poison_elem(t->decl->dtype, 1)};
    enum kevo_status st;

    kevo_task_tol(e->task, t->decl->name, t->decl->dtype, &rq.rtol, &rq.atol);
    kevo_buf_reset(&e->err);
    st = e->b->ops->judge(e->b->ctx, &rq, res, &e->err);
    return st ? vop_fail(e, x, st, "judging", t->decl->name) : KEVO_OK;
}

/* Element i of output k at device address addr, as a value (evidence only). */
static enum kevo_status elem_value(struct kevo_ev *e, const struct kevo_wl *x, int k,
                                   uint64_t addr, int64_t i, double *v)
{
    enum kevo_dtype dt = x->t[k].decl->dtype;
    size_t esz = kevo_dtype_size(dt);
    uint64_t bits = 0;
    enum kevo_status st = e->b->ops->download(e->b->ctx, &bits, addr + (uint64_t)i * esz, esz);

    *v = st ? NAN : kevo_dt_load(dt, &bits, 0);
    return st;
}

static json_t *where_json(const struct kevo_wl *x, int k, int64_t i)
{
    int64_t mi[KEVO_MAX_DIMS];
    const struct kevo_tinfo *t = &x->t[k];
    kevo_verify_unravel(i, t->dims, t->decl->ndim, mi);
    return json_pack("{s:s, s:I, s:o}", "output", t->decl->name, "index", (json_int_t)i,
                     "multi_index", kevo_eval_jdims(mi, t->decl->ndim));
}

/* Record unwritten for output k: count elements, the first at index first. */
static void fail_unwritten(struct kevo_wl *x, int k, int64_t count, int64_t first, const char *run)
{
    json_t *evd = where_json(x, k, first);
    json_object_set_new(evd, "count", json_integer(count));
    json_object_set_new(evd, "run", json_string(run));
    kevo_eval_wl_fail(x, KEVO_VERDICT_UNWRITTEN, evd,
                      "%s left %lld of %lld elements of %s unwritten (first at %lld) at %s", run,
                      (long long)count, (long long)x->t[k].numel, x->t[k].decl->name,
                      (long long)first, x->desc);
}

/* Evidence of a failed comparison of output k. */
static json_t *cmp_evidence(const struct kevo_wl *x, int k, const struct kevo_cmp *c, double rtol,
                            double atol)
{
    int64_t at = c->first_bad >= 0 ? c->first_bad : c->worst;
    json_t *evd = where_json(x, k, at < 0 ? 0 : at);
    json_object_set_new(evd, "got", kevo_eval_jnum(c->got));
    json_object_set_new(evd, "want", kevo_eval_jnum(c->want));
    json_object_set_new(evd, "max_abs", kevo_eval_jnum(c->max_abs));
    json_object_set_new(evd, "max_rel", kevo_eval_jnum(c->max_rel));
    json_object_set_new(evd, "rel_l2", kevo_eval_jnum(c->rel_l2));
    json_object_set_new(evd, "n_bad", json_integer(c->n_bad));
    json_object_set_new(evd, "n", json_integer(c->n));
    json_object_set_new(evd, "rtol", kevo_eval_jnum(rtol));
    json_object_set_new(evd, "atol", kevo_eval_jnum(atol));
    return evd;
}

int kevo_eval_judge_fail(const struct kevo_ev *e, struct kevo_wl *x, int k,
                         const struct kevo_cmp *c, const char *note)
{
    const struct kevo_tinfo *t = &x->t[k];
    double rtol, atol;

    if (c->pass)
        return 0;
    kevo_task_tol(e->task, t->decl->name, t->decl->dtype, &rtol, &atol);
    json_t *evd = cmp_evidence(x, k, c, rtol, atol);
    int64_t at = c->first_bad >= 0 ? c->first_bad : c->worst;
    if (note)
        json_object_set_new(evd, "message", json_string(note));
    if (c->n_bad)
        kevo_eval_wl_fail(
            x, KEVO_VERDICT_MISMATCH, evd,
            "%s%s%s[%lld] = %.9g, expected %.9g (%lld of %lld elements outside rtol=%g "
            "atol=%g; max abs err %.3g, rel L2 %.3g) at %s",
            note ? note : "", note ? ": " : "", t->decl->name, (long long)at, c->got, c->want,
            (long long)c->n_bad, (long long)c->n, rtol, atol, c->max_abs, c->rel_l2, x->desc);
    else
        kevo_eval_wl_fail(
            x, KEVO_VERDICT_MISMATCH, evd,
            "%s%s%s: relative L2 error %.3g exceeds rtol=%g (worst element [%lld] = %.9g, "
            "expected %.9g) at %s",
            note ? note : "", note ? ": " : "", t->decl->name, c->rel_l2, rtol, (long long)at,
            c->got, c->want, x->desc);
    return 1;
}

/* Judge every output of this trial on the device: run A (kept in x->hold) and run B
 * against the reference into x->jr; with atomics also run B alone into x->jb. */
static enum kevo_status judge_outputs(struct kevo_ev *e, struct kevo_wl *x)
{
    enum kevo_status st = KEVO_OK;
    for (int k = 0; k < x->n_task && !st && !x->verdict; k++) {
        if (!is_out(&x->t[k]))
            continue;
        st = kevo_eval_judge(e, x, k, x->hold[k], x->cand.buf[k].data, &x->ref, &x->jr[k]);
        if (!st && !x->verdict && e->task->atomics)
            st = kevo_eval_judge(e, x, k, x->cand.buf[k].data, 0, &x->ref, &x->jb[k]);
    }
    return st;
}

/* Track whether small output k changed since the last trial (reference and candidate). */
static void judge_small(struct kevo_wl *x, int k, int trial)
{
    uint64_t hr = x->jr[k].hash_ref, hc = x->jr[k].hash_a;
    if (trial > 0) {
        x->ref_changed[k] |= hr != x->ref_hash[k];
        x->cand_changed[k] |= hc != x->cand_hash[k];
    }
    x->ref_hash[k] = hr;
    x->cand_hash[k] = hc;
}

/* Runs A and B differ at element i of output k: nondeterministic, with both values. */
static enum kevo_status fail_nondet(struct kevo_ev *e, struct kevo_wl *x, int k, int64_t i)
{
    const struct kevo_tinfo *t = &x->t[k];
    double a, b;
    enum kevo_status st = elem_value(e, x, k, x->hold[k], i, &a);

    if (!st)
        st = elem_value(e, x, k, x->cand.buf[k].data, i, &b);
    if (st)
        return st;
    json_t *evd = where_json(x, k, i);
    json_object_set_new(evd, "a", kevo_eval_jnum(a));
    json_object_set_new(evd, "b", kevo_eval_jnum(b));
    kevo_eval_wl_fail(x, KEVO_VERDICT_NONDETERMINISTIC, evd,
                      "two runs on the same inputs differ: %s[%lld] = %.9g then %.9g at %s",
                      t->decl->name, (long long)i, a, b, x->desc);
    return KEVO_OK;
}

/* Output k of run A is constant where the reference's varies. */
static enum kevo_status fail_degenerate(struct kevo_ev *e, struct kevo_wl *x, int k)
{
    const struct kevo_tinfo *t = &x->t[k];
    double v;
    enum kevo_status st = elem_value(e, x, k, x->hold[k], 0, &v);

    if (st)
        return st;
    json_t *evd = json_pack("{s:s, s:o, s:s}", "output", t->decl->name, "value",
                            kevo_eval_jnum(v), "reason",
                            "constant output where the reference varies");
    kevo_eval_wl_fail(x, KEVO_VERDICT_DEGENERATE, evd,
                      "%s is constant (%.9g) where the reference's varies, at %s",
                      t->decl->name, v, x->desc);
    return KEVO_OK;
}

/* The checks after runs A and B (run_b: "run B", or the repeat that took its place), in
 * the protocol's order, each over every output. */
static enum kevo_status judge_trial(struct kevo_ev *e, struct kevo_wl *x, int trial,
                                    const char *run_b)
{
    enum kevo_status st = KEVO_OK;

    for (int k = 0; k < x->n_task && !x->verdict; k++) {
        const struct kevo_judge_res *r = &x->jr[k];
        if (!is_out(&x->t[k]))
            continue;
        if (r->unw_a)
            fail_unwritten(x, k, r->unw_a, r->unw_a_first, "run A");
        if (r->unw_b)
            fail_unwritten(x, k, r->unw_b, r->unw_b_first, run_b);
    }
    for (int k = 0; k < x->n_task && !st && !x->verdict; k++) {
        if (!is_out(&x->t[k]))
            continue;
        /* A task with float atomics may reassociate: run B must still match the reference. */
        if (e->task->atomics)
            (void)kevo_eval_judge_fail(e, x, k, &x->jb[k].cmp, run_b);
        else if (x->jr[k].diff_first >= 0)
            st = fail_nondet(e, x, k, x->jr[k].diff_first);
    }
    for (int k = 0; k < x->n_task && !st && !x->verdict; k++) {
        if (is_out(&x->t[k]))
            (void)kevo_eval_judge_fail(e, x, k, &x->jr[k].cmp, NULL);
    }
    for (int k = 0; k < x->n_task && !st && !x->verdict; k++) {
        const struct kevo_tinfo *t = &x->t[k];
        if (!is_out(t))
            continue;
        if (t->numel <= SMALL_OUTPUT)
            judge_small(x, k, trial);
        else if (x->jr[k].a_constant && x->jr[k].ref_spread)
            st = fail_degenerate(e, x, k);
    }
    return st;
}

/* Small outputs (a loss, a norm) must move with the inputs as the reference's do. */
static void judge_across_trials(struct kevo_wl *x)
{
    for (int k = 0; k < x->n_task && !x->verdict; k++) {
        const struct kevo_tinfo *t = &x->t[k];
        if (!is_out(t) || t->numel > SMALL_OUTPUT || !t->numel)
            continue;
        if (x->ref_changed[k] && !x->cand_changed[k])
            kevo_eval_wl_fail(
                x, KEVO_VERDICT_DEGENERATE,
                json_pack("{s:s, s:s}", "output", t->decl->name, "reason",
                          "output never changed across trials while the reference's did"),
                "%s stayed the same over every trial while the reference's changed "
                "with the inputs, at %s",
                t->decl->name, x->desc);
    }
}

/* The inputs of a trial come from a seed derived from (secret seed, workload, trial). */
static uint64_t trial_seed(const struct kevo_ev *e, const struct kevo_wl *x, int trial)
{
    return kevo_verify_derive(e->req->seed, (uint64_t)x->w, (uint64_t)trial);
}

/* One trial: fresh inputs from the trial's seed, the reference (its outputs then sealed),
 * the candidate twice, then the checks. */
static enum kevo_status wl_trial(struct kevo_ev *e, struct kevo_wl *x, int trial)
{
    uint64_t seed = trial_seed(e, x, trial);
    uint64_t key = kevo_verify_derive(e->req->seed ^ SEAL_SALT, (uint64_t)x->w, (uint64_t)trial);
    enum kevo_status st = kevo_eval_put_inputs(e, x, seed, &x->ref, &x->cand);

    if (!st && !x->verdict)
        st = kevo_eval_run_ref(e, x, &x->ref, key);
    if (!st && !x->verdict && trial == 0 && e->self && e->req->dump_dir)
        st = kevo_eval_dump(e, x, &x->ref);
    if (!st && !x->verdict)
        st = run_cand(e, x, &x->cand, 0, seed, "run A");
    if (!st && !x->verdict)
        st = hold_outputs(e, x);
    /* Run A left the inputs as they were (checked), so run B sees the same ones. */
    if (!st && !x->verdict)
        st = run_cand(e, x, &x->cand, 1, seed, "run B");
    if (!st && !x->verdict)
        st = judge_outputs(e, x);
    if (!st && !x->verdict)
        st = judge_trial(e, x, trial, "run B");
    return st;
}

/* One repeat: run B again (poison B, guards), judged against run A like run B was. */
static enum kevo_status wl_repeat(struct kevo_ev *e, struct kevo_wl *x, int trial,
                                  const char *run)
{
    enum kevo_status st = kevo_eval_poison(e, x, &x->cand, 1);

    if (!st)
        st = launch_sync(e, x, &e->can, &x->cand, run, kevo_eval_cand_fail);
    if (!st && !x->verdict)
        st = kevo_eval_check_guards(e, x, &x->cand, run);
    if (!st && !x->verdict)
        st = judge_outputs(e, x);
    if (!st && !x->verdict)
        st = judge_trial(e, x, trial, run);
    return st;
}

/*
 * Repeats: after the last trial passed, the candidate runs again on that trial's inputs,
 * each run judged against run A (kept) as run B was. Two runs a trial catch a race only
 * when it shows in one of the pair: a lost update that shows in one run of four passed
 * every trial in 3 evaluations of 20 (tests/exploits/cpu/race.c on 2 cores).
 * At least REPEAT_MIN, then on while the repeats have taken less time than the trials
 * (t_trials seconds), at most REPEAT_MAX. The inputs are checked once, after the last: a
 * repeat that changed them makes the next one differ, or fails that check.
 */
static enum kevo_status wl_repeats(struct kevo_ev *e, struct kevo_wl *x, int trial,
                                   double t_trials)
{
    double t0 = kevo_now();
    enum kevo_status st = KEVO_OK;
    char run[32];
    int r;

    for (r = 1; r <= REPEAT_MAX && !st && !x->verdict; r++) {
        if (r > REPEAT_MIN && kevo_now() - t0 > t_trials)
            break;
        snprintf(run, sizeof run, "repeat %d", r);
        st = wl_repeat(e, x, trial, run);
    }
    if (x->j)   /* how strong the determinism check was: the result's workloads[].repeats */
        json_object_set_new(x->j, "repeats", json_integer(r - 1));
    if (x->verdict)
        json_object_set_new(x->evidence, "repeat", json_integer(r - 1));
    else if (!st)
        st = kevo_eval_check_inputs(e, x, &x->cand, trial_seed(e, x, trial), "repeats");
    if (x->verdict)
        json_object_set_new(x->evidence, "trial", json_integer(trial));
    return st;
}

/* Correctness of one workload: trials until the first failure, then the repeats. */
enum kevo_status kevo_eval_wl_verify(struct kevo_ev *e, struct kevo_wl *x)
{
    double t0 = kevo_now();
    enum kevo_status st = KEVO_OK;
    int t;

    for (t = 0; t < e->trials && !st && !x->verdict; t++)
        st = wl_trial(e, x, t);
    if (x->verdict) {
        json_object_set_new(x->evidence, "trial", json_integer(t - 1));
        return st;
    }
    if (!st)
        judge_across_trials(x);
    if (!st && !x->verdict)
        st = wl_repeats(e, x, t - 1, kevo_now() - t0);
    return st;
}

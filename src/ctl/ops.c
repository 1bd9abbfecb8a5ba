/*
 * ops - operators that need no LLM (ops.h). Each tries a bounded number of children and
 * gives up with KEVO_ERR_NOTFOUND rather than offer one the run has seen: a duplicate is
 * never evaluated twice, and an operator with nothing new must not stall the run.
 */
#include "ctl/ops.h"
#include "base/mem.h"

#include <string.h>

#define TRIES 16

/* Copy p, apply `edit`, and keep the result when its key is new. */
static enum kevo_status try_child(const struct kevo_op_ctx *c, const struct kevo_genome *p,
                                  struct kevo_genome *out,
                                  enum kevo_status (*edit)(const struct kevo_op_ctx *,
                                                           struct kevo_genome *, void *),
                                  void *arg)
{
    char key[KEVO_HASH_HEX];
    enum kevo_status st;

    for (int t = 0; t < TRIES; t++) {
        st = kevo_genome_copy(p, out);
        if (!st)
            st = edit(c, out, arg);
        if (!st)
            st = kevo_genome_key(out, key);
        if (!st && !c->seen(c->user, key))
            return KEVO_OK;
        kevo_genome_clear(out);
        if (st && st != KEVO_ERR_NOTFOUND)
            return st;
    }
    return KEVO_ERR_NOTFOUND;
}

/* Param i to another value: a neighbour (small steps refine) or anywhere (big ones
 * escape). */
static void move_param(const struct kevo_op_ctx *c, struct kevo_genome *g, int i)
{
    int nv = g->n_values[i], cur = g->choice[i], to;
    if (kevo_rng_unit(c->rng) < 0.5) {
        to = cur + (kevo_rng_below(c->rng, 2) ? 1 : -1);
        to = to < 0 ? 1 : to >= nv ? nv - 2 : to;
    } else {
        to = (cur + 1 + kevo_rng_below(c->rng, nv - 1)) % nv;
    }
    g->choice[i] = to;
}

/* The params that can move (geometry ones when want is 1, the others when 0, any when
 * -1) into idx[64]; how many. */
static int movable(const struct kevo_genome *g, int want, int idx[64])
{
    int n = 0;
    for (int i = 0; i < g->n_params && n < 64; i++)
        if (g->n_values[i] > 1 && (want < 0 || g->geometry[i] == want))
            idx[n++] = i;
    return n;
}

/* Move one param (*arg as movable's want). */
static enum kevo_status edit_param(const struct kevo_op_ctx *c, struct kevo_genome *g, void *arg)
{
    int idx[64], n = movable(g, *(int *)arg, idx);
    if (!n)
        return KEVO_ERR_NOTFOUND;
    move_param(c, g, idx[kevo_rng_below(c->rng, n)]);
    return KEVO_OK;
}

/* Move two params at once: tile shapes and the like are often only faster together
 * (a 64x64 tile beats 32x32, but 64x32 and 32x64 lose to both), a valley that moves of
 * one param cannot cross. */
static enum kevo_status edit_pair(const struct kevo_op_ctx *c, struct kevo_genome *g, void *arg)
{
    int idx[64], n = movable(g, -1, idx);
    (void)arg;
    if (n < 2)
        return KEVO_ERR_NOTFOUND;
    int a = kevo_rng_below(c->rng, n), b = kevo_rng_below(c->rng, n - 1);
    b += b >= a;   /* another one */
    move_param(c, g, idx[a]);
    move_param(c, g, idx[b]);
    return KEVO_OK;
}

static enum kevo_status op_pair(const struct kevo_op_ctx *c, const struct kevo_genome *p1,
                                const struct kevo_genome *p2, struct kevo_genome *out)
{
    (void)p2;
    return try_child(c, p1, out, edit_pair, NULL);
}

static enum kevo_status op_param(const struct kevo_op_ctx *c, const struct kevo_genome *p1,
                                 const struct kevo_genome *p2, struct kevo_genome *out)
{
    int want = 0;
    (void)p2;
    for (int i = 0; i < p1->n_params; i++)
        if (!p1->geometry[i] && p1->n_values[i] > 1)
            return try_child(c, p1, out, edit_param, &want);
    want = -1;   /* only geometry params: move one of them */
    return try_child(c, p1, out, edit_param, &want);
}

static enum kevo_status op_geometry(const struct kevo_op_ctx *c, const struct kevo_genome *p1,
                                    const struct kevo_genome *p2, struct kevo_genome *out)
{
    int want = 1;
    (void)p2;
    return try_child(c, p1, out, edit_param, &want);
}

/* The first value of param i not yet tried with the parent's other choices. */
static enum kevo_status sweep_param(const struct kevo_op_ctx *c, const struct kevo_genome *p,
                                    int i, struct kevo_genome *out)
{
    char key[KEVO_HASH_HEX];
    for (int v = 0; v < p->n_values[i]; v++) {
        if (v == p->choice[i])
            continue;
        enum kevo_status st = kevo_genome_copy(p, out);
        if (st)
            return st;
        out->choice[i] = v;
        st = kevo_genome_key(out, key);
        if (!st && !c->seen(c->user, key))
            return KEVO_OK;
        kevo_genome_clear(out);
        if (st)
            return st;
    }
    return KEVO_ERR_NOTFOUND;
}

static enum kevo_status op_sweep(const struct kevo_op_ctx *c, const struct kevo_genome *p1,
                                 const struct kevo_genome *p2, struct kevo_genome *out)
{
    (void)p2;
    if (!p1->n_params)
        return KEVO_ERR_NOTFOUND;
    int start = kevo_rng_below(c->rng, p1->n_params);
    for (int k = 0; k < p1->n_params; k++) {
        enum kevo_status st = sweep_param(c, p1, (start + k) % p1->n_params, out);
        if (st != KEVO_ERR_NOTFOUND)
            return st;
    }
    return KEVO_ERR_NOTFOUND;
}

static const char *const cuda_flags[] = { "-use_fast_math", "-extra-device-vectorization",
                                          "-restrict", "-ftz=true", "-prec-div=false",
                                          "-maxrregcount=32", "-maxrregcount=64",
                                          "-maxrregcount=128", NULL };
static const char *const c_flags[] = { "-ffast-math", "-funroll-loops", "-march=native",
                                       "-fno-math-errno", "-O3", NULL };

/* Toggle one flag; setting a -maxrregcount removes the other values of it. */
static enum kevo_status edit_flag(const struct kevo_op_ctx *c, struct kevo_genome *g, void *arg)
{
    const char *const *list = g->lang == KEVO_LANG_CUDA ? cuda_flags : c_flags;
    int n = 0;
    (void)arg;
    while (list[n])
        n++;
    const char *f = list[kevo_rng_below(c->rng, n)];
    int on = !kevo_genome_has_flag(g, f);
    if (on && strncmp(f, "-maxrregcount=", 14) == 0) {
        for (int i = g->n_flags - 1; i >= 0; i--)
            if (strncmp(g->flags[i], "-maxrregcount=", 14) == 0) {
                enum kevo_status st = kevo_genome_set_flag(g, g->flags[i], 0);
                if (st)
                    return st;
            }
    }
    return kevo_genome_set_flag(g, f, on);
}

static enum kevo_status op_flags(const struct kevo_op_ctx *c, const struct kevo_genome *p1,
                                 const struct kevo_genome *p2, struct kevo_genome *out)
{
    (void)p2;
    return try_child(c, p1, out, edit_flag, NULL);
}

/* Each param from either parent; both must share the source (params and flags aside). */
static enum kevo_status edit_cross(const struct kevo_op_ctx *c, struct kevo_genome *g, void *arg)
{
    const struct kevo_genome *p2 = arg;
    for (int i = 0; i < g->n_params; i++)
        if (kevo_rng_below(c->rng, 2))
            g->choice[i] = p2->choice[i];
    return KEVO_OK;
}

static enum kevo_status op_crossover(const struct kevo_op_ctx *c, const struct kevo_genome *p1,
                                     const struct kevo_genome *p2, struct kevo_genome *out)
{
    if (!p2 || !p1->n_params || !kevo_genome_same_source(p1, p2))
        return KEVO_ERR_NOTFOUND;
    return try_child(c, p1, out, edit_cross, (void *)p2);
}

static const struct kevo_operator sweep = { .name = "sweep", .n_parents = 1, .prior = 2.0,
                                           .propose = op_sweep };
static const struct kevo_operator param = { .name = "param", .n_parents = 1, .prior = 1.0,
                                           .propose = op_param };
static const struct kevo_operator geometry = { .name = "geometry", .n_parents = 1, .prior = 1.0,
                                           .propose = op_geometry };
static const struct kevo_operator flags = { .name = "flags", .n_parents = 1, .prior = 0.5,
                                           .propose = op_flags };
static const struct kevo_operator crossover = { .name = "crossover", .n_parents = 2, .prior = 0.5,
                                           .propose = op_crossover };
static const struct kevo_operator pair = { .name = "pair", .n_parents = 1, .prior = 0.75,
                                           .propose = op_pair };
static const struct kevo_operator *const builtin[] = { &sweep, &param, &geometry, &flags,
                                                        &crossover, &pair };

const struct kevo_operator *const *kevo_ops_builtin(int *n)
{
    *n = (int)(sizeof builtin / sizeof *builtin);
    return builtin;
}

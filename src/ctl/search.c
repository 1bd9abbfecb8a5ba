/*
 * search - islands, MAP-Elites grids, parent selection, migration and operator weights
 * (search.h, docs/search.md). Pure state: the archive is the truth, and run.c rebuilds
 * this state from it on resume by placing every ok candidate again.
 */
#include "ctl/search.h"
#include "base/mem.h"

#include <limits.h>
#include <string.h>

/* ---- descriptors ---- */

/* The text with comments blanked, so a comment that mentions __shared__ is not a kernel
 * that uses it. */
static char *strip_comments(const char *t, size_t n)
{
    char *o = kevo_malloc(n + 1);
    size_t i = 0;

    if (!o)
        return NULL;
    while (i < n) {
        if (t[i] == '/' && i + 1 < n && t[i + 1] == '/') {
            while (i < n && t[i] != '\n')
                o[i++] = ' ';
        } else if (t[i] == '/' && i + 1 < n && t[i + 1] == '*') {
            o[i] = o[i + 1] = ' ';
            for (i += 2; i < n && !(t[i] == '*' && i + 1 < n && t[i + 1] == '/'); i++)
                o[i] = t[i] == '\n' ? '\n' : ' ';
            if (i < n)
                o[i] = o[i + 1] = ' ', i += 2;
        } else {
            o[i] = t[i];
            i++;
        }
    }
    o[n < i ? n : i] = '\0';
    return o;
}

static int any_of(const char *t, const char *const *words)
{
    for (int i = 0; words[i]; i++)
        if (strstr(t, words[i]))
            return 1;
    return 0;
}

static const char *const w_async[] = { "cp.async", "memcpy_async", "__pipeline_memcpy_async",
                                       "cuda::barrier", "CUtensorMap", "cp.reduce.async", NULL };
static const char *const w_vec[] = { "float4", "float2", "int4", "uint4", "int2", "uint2",
                                     "double2", "__half2", "half2", "__nv_bfloat162", NULL };
static const char *const w_tc[] = { "mma.sync", "wmma::", "wgmma", "mma_sync", "__hmma",
                                    "mma.m16n8", NULL };
static const char *const w_simd[] = { "omp simd", "omp parallel for simd", "_mm", "__m128",
                                      "__m256", "__m512", NULL };

static int max_regs(const struct kevo_result *result)
{
    int64_t m = 0;
    for (int i = 0; result && i < result->n_res; i++)
        m = result->res[i].regs > m ? result->res[i].regs : m;
    return m > INT_MAX ? INT_MAX : (int)m;
}

static void desc_cuda(const char *t, const struct kevo_result *result, struct kevo_desc *d)
{
    int regs = max_regs(result);
    d->mem = any_of(t, w_async) ? 3 : strstr(t, "__shared__") ? 2 : any_of(t, w_vec) ? 1 : 0;
    d->comp = any_of(t, w_tc) ? 2 : strstr(t, "__shfl") ? 1 : 0;
    d->res = regs <= 32 ? 0 : regs <= 64 ? 1 : regs <= 128 ? 2 : 3;
}

static void desc_c(const struct kevo_genome *g, const char *t, struct kevo_desc *d)
{
    int simd = any_of(t, w_simd), par = strstr(t, "omp parallel") != NULL;
    d->mem = simd + 2 * (g->n_params > 0);
    d->comp = par ? (simd ? 2 : 1) : 0;
    d->res = g->n_params ? g->choice[0] * KEVO_DESC_RES / g->n_values[0] : 0;
}

void kevo_desc_of(const struct kevo_genome *g, const struct kevo_result *result,
                  struct kevo_desc *out)
{
    char *t = strip_comments(g->text, g->len);

    memset(out, 0, sizeof *out);
    if (!t)
        return;   /* out of memory: cell 0 is still a valid cell */
    if (g->lang == KEVO_LANG_CUDA)
        desc_cuda(t, result, out);
    else
        desc_c(g, t, out);
    kevo_free(t);
}

int kevo_desc_cell(const struct kevo_desc *d)
{
    return (d->mem * KEVO_DESC_COMP + d->comp) * KEVO_DESC_RES + d->res;
}

json_t *kevo_desc_json(const struct kevo_desc *d, enum kevo_lang lang)
{
    static const char *const mem[2][4] = { { "plain", "vector", "shared", "async" },
                                           { "plain", "simd", "blocked", "blocked+simd" } };
    static const char *const comp[2][3] = { { "scalar", "shuffle", "tensor_core" },
                                            { "serial", "openmp", "openmp+simd" } };
    static const char *const res[2][4] = { { "regs<=32", "regs<=64", "regs<=128", "regs>128" },
                                           { "p0:q1", "p0:q2", "p0:q3", "p0:q4" } };
    int c = lang == KEVO_LANG_C;
    return json_pack("{s:s, s:s, s:s, s:i}", "mem", mem[c][d->mem], "comp", comp[c][d->comp],
                     "res", res[c][d->res], "cell", kevo_desc_cell(d));
}

/* ---- random numbers ---- */

uint64_t kevo_rng_next(struct kevo_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double kevo_rng_unit(struct kevo_rng *r) { return (double)(kevo_rng_next(r) >> 11) * 0x1.0p-53; }

int kevo_rng_below(struct kevo_rng *r, int n)
{
    return n <= 1 ? 0 : (int)((kevo_rng_next(r) >> 11) % (uint64_t)n);
}

/* ---- state ---- */

struct op_stat {
    const char *name;
    double prior;
    int64_t proposed, ok, improved;
};

struct kevo_search {
    struct kevo_search_cfg cfg;
    struct kevo_rng rng;
    struct kevo_elite grid[KEVO_MAX_ISLANDS][KEVO_CELLS];
    struct kevo_elite best;
    int next_island;
    int64_t ticks;
    int n_ops;
    struct op_stat ops[KEVO_MAX_OPS];
};

void kevo_search_cfg_default(struct kevo_search_cfg *c)
{
    c->n_islands = 2;
    c->explore = 0.3;
    c->tournament = 3;
    c->migrate_every = 16;
    c->seed = 0x6B65766Full;
}

enum kevo_status kevo_search_new(const struct kevo_search_cfg *c, struct kevo_search **out)
{
    struct kevo_search *s;

    *out = NULL;
    if (c->n_islands < 1 || c->n_islands > KEVO_MAX_ISLANDS || c->tournament < 1 ||
        c->explore < 0 || c->explore > 1 || c->migrate_every < 0)
        return KEVO_ERR_INVALID;
    s = kevo_calloc(1, sizeof *s);
    if (!s)
        return KEVO_ERR_NOMEM;
    s->cfg = *c;
    s->rng.s = c->seed;
    *out = s;
    return KEVO_OK;
}

void kevo_search_free(struct kevo_search *s) { kevo_free(s); }

int kevo_search_place(struct kevo_search *s, int island, int cell, int64_t id, double score)
{
    if (island < 0 || island >= s->cfg.n_islands || cell < 0 || cell >= KEVO_CELLS || !(score > 0))
        return 0;
    struct kevo_elite *e = &s->grid[island][cell];
    if (!e->id || score < e->score) {
        e->id = id;
        e->score = score;
    }
    if (!s->best.id || score < s->best.score) {
        s->best.id = id;
        s->best.score = score;
        return 1;
    }
    return 0;
}

/* The best elite of an island and its cell, or -1. */
static int island_best(const struct kevo_search *s, int island)
{
    int b = -1;
    for (int c = 0; c < KEVO_CELLS; c++) {
        const struct kevo_elite *e = &s->grid[island][c];
        if (e->id && (b < 0 || e->score < s->grid[island][b].score))
            b = c;
    }
    return b;
}

int kevo_search_migrate(struct kevo_search *s)
{
    int moved = 0, n = s->cfg.n_islands;
    int from[KEVO_MAX_ISLANDS];
    struct kevo_elite who[KEVO_MAX_ISLANDS];

    if (n < 2)
        return 0;
    for (int i = 0; i < n; i++) {   /* decide from the grids before anything moves */
        from[i] = island_best(s, i);
        if (from[i] >= 0)
            who[i] = s->grid[i][from[i]];
    }
    for (int i = 0; i < n; i++) {
        if (from[i] < 0)
            continue;
        struct kevo_elite *dst = &s->grid[(i + 1) % n][from[i]];
        if (!dst->id || who[i].score < dst->score) {
            *dst = who[i];
            moved++;
        }
    }
    return moved;
}

int kevo_search_tick(struct kevo_search *s)
{
    s->ticks++;
    if (s->cfg.migrate_every > 0 && s->ticks % s->cfg.migrate_every == 0)
        return kevo_search_migrate(s);
    return 0;
}

int kevo_search_next_island(struct kevo_search *s)
{
    int i = s->next_island;
    s->next_island = (s->next_island + 1) % s->cfg.n_islands;
    return i;
}

/* Occupied cells of island into cells[]; returns the count. */
static int occupied(const struct kevo_search *s, int island, int *cells)
{
    int n = 0;
    for (int c = 0; c < KEVO_CELLS; c++)
        if (s->grid[island][c].id)
            cells[n++] = c;
    return n;
}

int64_t kevo_search_parent(struct kevo_search *s, int island)
{
    int cells[KEVO_CELLS], n;

    if (island < 0 || island >= s->cfg.n_islands || !(n = occupied(s, island, cells)))
        return 0;
    if (kevo_rng_unit(&s->rng) < s->cfg.explore)
        return s->grid[island][cells[kevo_rng_below(&s->rng, n)]].id;
    int best = cells[kevo_rng_below(&s->rng, n)];
    for (int k = 1; k < s->cfg.tournament; k++) {
        int c = cells[kevo_rng_below(&s->rng, n)];
        if (s->grid[island][c].score < s->grid[island][best].score)
            best = c;
    }
    return s->grid[island][best].id;
}

int64_t kevo_search_mate(struct kevo_search *s, int island, int64_t first)
{
    int cells[KEVO_CELLS], n, k = 0;
    int64_t ids[KEVO_CELLS];

    if (island < 0 || island >= s->cfg.n_islands)
        return 0;
    n = occupied(s, island, cells);
    for (int i = 0; i < n; i++)
        if (s->grid[island][cells[i]].id != first)
            ids[k++] = s->grid[island][cells[i]].id;
    return k ? ids[kevo_rng_below(&s->rng, k)] : 0;
}

int kevo_search_occupied(const struct kevo_search *s, int island)
{
    int cells[KEVO_CELLS];
    return island >= 0 && island < s->cfg.n_islands ? occupied(s, island, cells) : 0;
}

const struct kevo_elite *kevo_search_best(const struct kevo_search *s)
{
    return s->best.id ? &s->best : NULL;
}

const struct kevo_elite *kevo_search_cell(const struct kevo_search *s, int island, int cell)
{
    if (island < 0 || island >= s->cfg.n_islands || cell < 0 || cell >= KEVO_CELLS)
        return NULL;
    return s->grid[island][cell].id ? &s->grid[island][cell] : NULL;
}

struct kevo_rng *kevo_search_rng(struct kevo_search *s) { return &s->rng; }
int kevo_search_islands(const struct kevo_search *s) { return s->cfg.n_islands; }

/* ---- operators ---- */

void kevo_search_op_register(struct kevo_search *s, int i, const char *name, double prior)
{
    if (i < 0 || i >= KEVO_MAX_OPS)
        return;
    s->ops[i] = (struct op_stat){ .name = name, .prior = prior };
    if (i >= s->n_ops)
        s->n_ops = i + 1;
}

/* An operator's weight: its prior times (1 + its smoothed rate of improving children). */
static double op_weight(const struct op_stat *o)
{
    return o->prior * (1.0 + 4.0 * ((double)o->improved + 1.0) / ((double)o->proposed + 4.0));
}

int kevo_search_op_pick(struct kevo_search *s, unsigned exclude)
{
    double total = 0, x;
    for (int i = 0; i < s->n_ops; i++)
        if (s->ops[i].name && !(exclude & (1u << i)))
            total += op_weight(&s->ops[i]);
    if (!(total > 0))
        return -1;
    x = kevo_rng_unit(&s->rng) * total;
    for (int i = 0; i < s->n_ops; i++) {
        if (!s->ops[i].name || (exclude & (1u << i)))
            continue;
        x -= op_weight(&s->ops[i]);
        if (x < 0)
            return i;
    }
    for (int i = s->n_ops - 1; i >= 0; i--)   /* rounding left x >= 0: the last eligible */
        if (s->ops[i].name && !(exclude & (1u << i)))
            return i;
    return -1;
}

void kevo_search_op_proposed(struct kevo_search *s, int i)
{
    if (i >= 0 && i < s->n_ops)
        s->ops[i].proposed++;
}

void kevo_search_op_result(struct kevo_search *s, int i, int ok, int improved)
{
    if (i < 0 || i >= s->n_ops)
        return;
    s->ops[i].ok += ok != 0;
    s->ops[i].improved += improved != 0;
}

json_t *kevo_search_op_json(const struct kevo_search *s)
{
    json_t *o = json_object();
    for (int i = 0; o && i < s->n_ops; i++) {
        const struct op_stat *p = &s->ops[i];
        if (p->name)
            json_object_set_new(o, p->name,
                                json_pack("{s:I, s:I, s:I, s:f}", "proposed",
                                          (json_int_t)p->proposed, "ok", (json_int_t)p->ok,
                                          "improved", (json_int_t)p->improved, "weight",
                                          op_weight(p)));
    }
    return o;
}

/*
 * task_check - passes 2 and 3 of task and candidate parsing (task_int.h), the workload
 * environments and tolerances of task.h, and the dtype and flag vocabulary.
 *
 * Pass 2 runs once every directive is read, so names may be used before the line that
 * declares them. Pass 3 evaluates each remembered expression (struct rec) under every
 * workload: a task under all of its workloads, holdouts included; a candidate under the
 * task's visible workloads only, so that no error message reveals a held-out size.
 */
#include "core/task_int.h"
#include "core/expr.h"

#include <math.h>

/* ---- dtypes, units, flags ---- */

static const struct {
    const char *name;
    size_t size;
    int is_float;
} dtypes[KEVO_DTYPE_COUNT] = {
    [KEVO_F64] = { "f64", 8, 1 },         [KEVO_F32] = { "f32", 4, 1 },
    [KEVO_F16] = { "f16", 2, 1 },         [KEVO_BF16] = { "bf16", 2, 1 },
    [KEVO_FP8E4M3] = { "fp8e4m3", 1, 1 }, [KEVO_FP8E5M2] = { "fp8e5m2", 1, 1 },
    [KEVO_I64] = { "i64", 8, 0 },         [KEVO_I32] = { "i32", 4, 0 },
    [KEVO_I16] = { "i16", 2, 0 },         [KEVO_I8] = { "i8", 1, 0 },
    [KEVO_U8] = { "u8", 1, 0 },           [KEVO_BOOL] = { "bool", 1, 0 },
};

static const char *const unit_names[KEVO_UNIT_COUNT] = {
    [KEVO_UNIT_FP32] = "fp32", [KEVO_UNIT_FP64] = "fp64", [KEVO_UNIT_TF32] = "tf32",
    [KEVO_UNIT_FP16] = "fp16", [KEVO_UNIT_BF16] = "bf16", [KEVO_UNIT_FP8] = "fp8",
};

const char *kevo_dtype_name(enum kevo_dtype t)
{
    return (unsigned)t < KEVO_DTYPE_COUNT ? dtypes[t].name : "unknown";
}

size_t kevo_dtype_size(enum kevo_dtype t)
{
    return (unsigned)t < KEVO_DTYPE_COUNT ? dtypes[t].size : 0;
}

int kevo_dtype_is_float(enum kevo_dtype t)
{
    return (unsigned)t < KEVO_DTYPE_COUNT && dtypes[t].is_float;
}

int kevo_dtype_parse(const char *s, size_t len, enum kevo_dtype *out)
{
    for (int i = 0; i < KEVO_DTYPE_COUNT; i++) {
        if (strlen(dtypes[i].name) == len && !memcmp(dtypes[i].name, s, len)) {
            *out = (enum kevo_dtype)i;
            return 0;
        }
    }
    return -1;
}

const char *kevo_unit_name(enum kevo_unit u)
{
    return (unsigned)u < KEVO_UNIT_COUNT ? unit_names[u] : "unknown";
}

static const char *const cuda_flags[] = {
    "-use_fast_math", "-ftz=true", "-ftz=false", "-prec-div=true", "-prec-div=false",
    "-prec-sqrt=true", "-prec-sqrt=false", "-fmad=true", "-fmad=false", "-lineinfo",
    "-restrict", "-extra-device-vectorization", NULL,
};
static const char *const c_flags[] = {
    "-O1", "-O2", "-O3", "-Ofast", "-march=native", "-mtune=native", "-ffast-math",
    "-funroll-loops", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
    "-fomit-frame-pointer", NULL,
};

/* -maxrregcount=N with N a plain decimal in 16..255. */
static int maxrreg_ok(const char *v)
{
    size_t n = strlen(v);
    int x = 0;
    if (n < 2 || n > 3 || v[0] == '0' || strspn(v, "0123456789") != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        x = x * 10 + (v[i] - '0');
    return x >= 16 && x <= 255;
}

int kevo_flag_allowed(enum kevo_lang lang, const char *flag)
{
    const char *const *list = lang == KEVO_LANG_CUDA ? cuda_flags : c_flags;
    if (!flag)
        return 0;
    if (lang == KEVO_LANG_CUDA && !strncmp(flag, "-maxrregcount=", 14))
        return maxrreg_ok(flag + 14);
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], flag))
            return 1;
    return 0;
}

/* Line `line` (1-based) of text: start and length without the newline or CR. */
static int find_line(const char *text, size_t len, int line, const char **out, size_t *out_len)
{
    size_t off = 0;
    for (int l = 1; off <= len; l++) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (l == line) {
            *out = text + off;
            *out_len = end - off - (end > off && text[end - 1] == '\r');
            return 0;
        }
        if (!nl)
            break;
        off = end + 1;
    }
    return -1;
}

/* kevo_expr_check callback: a size name, or (candidates) a param name. */
static int known_name(void *user, const char *s, size_t n)
{
    struct parser *p = user;
    const struct kevo_workload *w = first_sizes(p);
    for (int i = 0; w && i < w->n; i++)
        if (eq_n(s, n, w->names[i]))
            return 1;
    for (int i = 0; i < p->t->n_params; i++)
        if (eq_n(s, n, p->t->params[i].name))
            return 1;
    p->unknown_name = 1;
    return 0;
}

/* " (expected a size name: M N)" for an unknown-name message; `what` leads, `plural`
 * says whether it ends in "names". */
static void known_list(const struct parser *p, const char *what, int plural, char *out, size_t n)
{
    const struct kevo_workload *w = first_sizes(p);
    size_t o = (size_t)snprintf(out, n, " (expected %s size%s name%s:", what,
                                p->t->n_params ? " or param" : "", plural ? "s" : "");
    for (int i = 0; w && i < w->n && o < n; i++)
        o += (size_t)snprintf(out + o, n - o, " %s", w->names[i]);
    for (int i = 0; i < p->t->n_params && o < n; i++)
        o += (size_t)snprintf(out + o, n - o, " %s", p->t->params[i].name);
    if (o < n)
        snprintf(out + o, n - o, ")");
}
/* ---- pass 2: resolve names ---- */

static const char *rec_text(const struct kevo_task *t, const struct rec *r)
{
    switch (r->kind) {
    case R_SHAPE:   return t->tensors[r->idx].shape[r->sub];
    case R_RAND_LO: return t->tensors[r->idx].init_a;
    case R_RAND_HI: return t->tensors[r->idx].init_b;
    case R_BYTES:   return t->bytes;
    case R_FLOPS:   return t->flops;
    case R_GRID:    return t->launches[r->idx].grid[r->sub];
    case R_BLOCK:   return t->launches[r->idx].block[r->sub];
    case R_SMEM:    return t->launches[r->idx].smem;
    case R_ARG:     return t->launches[r->idx].args[r->sub].text;
    case R_TMAP_BOX:   return t->tmaps[r->idx].box[r->sub];
    case R_TMAP_SHAPE: return t->tmaps[r->idx].shape[r->sub];
    default:        return NULL;
    }
}

static enum kevo_status check_names(struct parser *p, const struct rec *r, const char *text)
{
    struct kevo_expr_err e;
    char hint[512] = "";
    enum kevo_status st;

    p->unknown_name = 0;
    st = kevo_expr_check(text, known_name, p, &e);
    if (!st)
        return KEVO_OK;
    if (p->unknown_name)
        known_list(p, "a", 0, hint, sizeof hint);
    return perr(p, st, r->line, r->col + e.col, "%s%s", e.msg, hint);
}

static enum kevo_status set_arg(struct kevo_arg *a, enum kevo_arg_kind kind, int index)
{
    a->kind = kind;
    a->index = index;
    return KEVO_OK;
}

/* A launch argument: a tensor (the task's, then a candidate's own scratch, numbered after
 * the task's), a scalar (always the task's), or an integer expression. */
static enum kevo_status resolve_arg(struct parser *p, const struct rec *r)
{
    struct kevo_arg *a = &p->t->launches[r->idx].args[r->sub];
    const struct kevo_task *base = p->task ? p->task : p->t;
    size_t n = strlen(a->text);
    char hint[512], b[200];

    if (!is_ident_n(a->text, n))
        return check_names(p, r, a->text);
    for (int i = 0; p->task && i < p->task->n_tensors; i++)
        if (!strcmp(p->task->tensors[i].name, a->text))
            return set_arg(a, KEVO_ARG_TENSOR, i);
    for (int i = 0; i < p->t->n_tensors; i++)
        if (!strcmp(p->t->tensors[i].name, a->text))
            return set_arg(a, KEVO_ARG_TENSOR, (p->task ? p->task->n_tensors : 0) + i);
    for (int i = 0; i < base->n_scalars; i++)
        if (!strcmp(base->scalars[i].name, a->text))
            return set_arg(a, KEVO_ARG_SCALAR, i);
    for (int i = 0; i < p->t->n_tmaps; i++)
        if (!strcmp(p->t->tmaps[i].name, a->text))
            return set_arg(a, KEVO_ARG_TMAP, i);
    if (known_name(p, a->text, n))
        return KEVO_OK;
    known_list(p, "a tensor, a scalar, or an integer expression over the", 1, hint,
               sizeof hint);
    return perr(p, KEVO_ERR_PARSE, r->line, r->col, "unknown argument '%s'%s", q(b, a->text, n),
                hint);
}

/* A tensor map's tensor: the task's, or the candidate's own scratch (numbered after). */
static enum kevo_status resolve_tmap(struct parser *p, const struct rec *r)
{
    struct kevo_tmap *m = &p->t->tmaps[r->idx];
    const struct kevo_tensor_decl *d = NULL;
    int base = p->task ? p->task->n_tensors : 0;
    char b[200];

    for (int i = 0; p->task && !d && i < p->task->n_tensors; i++) {
        if (!strcmp(p->task->tensors[i].name, m->tensor)) {
            d = &p->task->tensors[i];
            m->tensor_index = i;
        }
    }
    for (int i = 0; !d && i < p->t->n_tensors; i++) {
        if (!strcmp(p->t->tensors[i].name, m->tensor)) {
            d = &p->t->tensors[i];
            m->tensor_index = base + i;
        }
    }
    if (!d)
        return perr(p, KEVO_ERR_INVALID, r->line, r->col, "tmap '%s': '%s' is not a tensor of "
                    "the task or a scratch tensor of this file", m->name,
                    q(b, m->tensor, strlen(m->tensor)));
    if (!m->shape[0] && d->ndim != m->rank)
        return perr(p, KEVO_ERR_INVALID, r->line, r->col, "tmap '%s': box has %d entries but "
                    "'%s' has %d dimensions (give shape=[...] to view it otherwise)", m->name,
                    m->rank, d->name, d->ndim);
    return KEVO_OK;
}

static enum kevo_status resolve_tol(struct parser *p, const struct rec *r)
{
    const char *name = p->t->tols[r->idx].name;
    char outs[512];
    size_t o = 0;

    for (int i = 0; i < p->t->n_tensors; i++)
        if (!strcmp(p->t->tensors[i].name, name) && p->t->tensors[i].role == KEVO_ROLE_OUTPUT)
            return KEVO_OK;
    outs[0] = '\0';
    for (int i = 0; i < p->t->n_tensors && o < sizeof outs; i++)
        if (p->t->tensors[i].role == KEVO_ROLE_OUTPUT)
            o += (size_t)snprintf(outs + o, sizeof outs - o, " %s", p->t->tensors[i].name);
    return perr(p, KEVO_ERR_INVALID, r->line, r->col,
                "tol names '%s', which is not an output (outputs:%s)", name, outs);
}

static enum kevo_status resolve_workload(struct parser *p, const struct rec *r)
{
    const struct kevo_workload *w = &p->t->workloads[r->idx];
    const struct kevo_workload *f = &p->t->workloads[p->first_wl];
    char names[512];
    size_t o = 0;

    names[0] = '\0';
    for (int i = 0; i < f->n && o < sizeof names; i++)
        o += (size_t)snprintf(names + o, sizeof names - o, " %s", f->names[i]);
    if (r->kind == R_WL_NAME) {
        for (int i = 0; i < f->n; i++)
            if (!strcmp(f->names[i], w->names[r->sub]))
                return KEVO_OK;
        return perr(p, KEVO_ERR_INVALID, r->line, r->col, "size name '%s' is not declared on "
                    "the first size line (line %d:%s)", w->names[r->sub], f->line, names);
    }
    for (int i = 0; i < f->n; i++) {
        int found = 0;
        for (int j = 0; j < w->n && !found; j++)
            found = !strcmp(f->names[i], w->names[j]);
        if (!found)
            return perr(p, KEVO_ERR_INVALID, r->line, r->col, "size '%s' is missing (every "
                        "size line assigns%s, as the first one at line %d does)", f->names[i],
                        names, f->line);
    }
    return KEVO_OK;
}

enum kevo_status kevo_task_resolve(struct parser *p)
{
    enum kevo_status st = KEVO_OK;
    for (int i = 0; !st && i < p->n_recs; i++) {
        const struct rec *r = &p->recs[i];
        switch (r->kind) {
        case R_NUMEL:   break;
        case R_ARG:     st = resolve_arg(p, r); break;
        case R_TOL:     st = resolve_tol(p, r); break;
        case R_TMAP:    st = resolve_tmap(p, r); break;
        case R_WL_NAME:
        case R_WL_ALL:  st = resolve_workload(p, r); break;
        default:        st = check_names(p, r, rec_text(p->t, r)); break;
        }
    }
    return st;
}

/* ---- environments ---- */

static int env_lookup(void *user, const char *s, size_t n, int64_t *out)
{
    const struct kevo_env *env = user;
    for (int i = 0; i < env->n; i++) {
        if (eq_n(s, n, env->names[i])) {
            *out = env->values[i];
            return 0;
        }
    }
    return -1;
}

/* Column of expression i of workload w, found again in the source (1 if it cannot be). */
static int wl_expr_col(const struct kevo_task *t, int w, int i)
{
    const char *l;
    size_t n, kw, pos;
    struct tok tk;

    if (!t->source || find_line(t->source, t->source_len, t->workloads[w].line, &l, &n) ||
        !directive_at(l, n, &kw))
        return 1;
    pos = kw;
    for (int k = -1; next_tok(l, n, &pos, &tk); k++)
        if (k == i)
            return tk.col + (int)strlen(t->workloads[w].names[i]) + 1;
    return 1;
}

static enum kevo_status env_build(const struct kevo_task *task, int w,
                                  const struct kevo_task *cand, const int64_t *vals,
                                  struct kevo_env *env, struct kevo_buf *msg)
{
    const struct kevo_workload *wl;
    struct kevo_expr_err e;

    memset(env, 0, sizeof *env);
    if (w < 0 || w >= task->n_workloads)
        return bmsg(msg, KEVO_ERR_INVALID, NULL, 0, 0, "no workload %d in %s", w, task->path);
    wl = &task->workloads[w];
    if (wl->n + (cand ? cand->n_params : 0) > TASK_MAX_ENV)
        return bmsg(msg, KEVO_ERR_TOOBIG, NULL, 0, 0, "more than %d sizes and params",
                    TASK_MAX_ENV);
    for (int i = 0; i < wl->n; i++) {
        enum kevo_status st = kevo_expr_eval(wl->exprs[i], env_lookup, env, &env->values[i], &e);
        if (st)
            return bmsg(msg, st, task->path, wl->line, wl_expr_col(task, w, i) + e.col,
                        "size '%s': %s", wl->names[i], e.msg);
        env->names[i] = wl->names[i];
        env->n = i + 1;
    }
    for (int i = 0; cand && i < cand->n_params; i++) {
        env->names[env->n] = cand->params[i].name;
        env->values[env->n++] = vals ? vals[i] : cand->params[i].values[0];
    }
    return KEVO_OK;
}


enum kevo_status kevo_task_env(const struct kevo_task *task, int w, const struct kevo_task *cand,
                               const int64_t *param_values, struct kevo_env *env, char **out_msg)
{
    struct kevo_buf b;
    enum kevo_status st;

    if (out_msg)
        *out_msg = NULL;
    kevo_buf_init(&b, TASK_MSG_MAX);
    st = env_build(task, w, cand, param_values, env, &b);
    if (st && out_msg)
        *out_msg = take_msg(&b, st);
    kevo_buf_free(&b);
    return st;
}

enum kevo_status kevo_env_eval(const struct kevo_env *env, const char *text, int64_t *out,
                               char **out_msg)
{
    struct kevo_expr_err e;
    struct kevo_buf b;
    enum kevo_status st;
    char qb[200];

    if (out_msg)
        *out_msg = NULL;
    st = kevo_expr_eval(text, env_lookup, (void *)env, out, &e);
    if (!st || !out_msg)
        return st;
    kevo_buf_init(&b, TASK_MSG_MAX);
    st = bmsg(&b, st, NULL, 0, 0, "in '%s' at column %d: %s",
              text ? q(qb, text, strlen(text)) : "", e.col + 1, e.msg);
    *out_msg = take_msg(&b, st);
    kevo_buf_free(&b);
    return st;
}

enum kevo_status kevo_tensor_numel(const struct kevo_tensor_decl *t, const struct kevo_env *env,
                                   int64_t *out, char **out_msg)
{
    int64_t n = 1, d;
    struct kevo_buf b;
    enum kevo_status st = KEVO_OK;

    *out = 0;
    if (out_msg)
        *out_msg = NULL;
    kevo_buf_init(&b, TASK_MSG_MAX);
    for (int i = 0; !st && i < t->ndim; i++) {
        struct kevo_expr_err e;
        st = kevo_expr_eval(t->shape[i], env_lookup, (void *)env, &d, &e);
        if (st)
            st = bmsg(&b, st, NULL, 0, 0, "dimension %d of '%s': %s", i + 1, t->name, e.msg);
        else if (d <= 0)
            st = bmsg(&b, KEVO_ERR_INVALID, NULL, 0, 0, "dimension %d of '%s' is %lld; shape "
                      "dimensions must be positive", i + 1, t->name, (long long)d);
        else if (__builtin_mul_overflow(n, d, &n))
            st = bmsg(&b, KEVO_ERR_OVERFLOW, NULL, 0, 0, "the element count of '%s' overflows "
                      "64 bits", t->name);
    }
    if (!st)
        *out = n;
    else if (out_msg)
        *out_msg = take_msg(&b, st);
    kevo_buf_free(&b);
    return st;
}

/* ---- pass 3: evaluate under every workload ---- */

static void rec_what(const struct kevo_task *t, const struct rec *r, char *out, size_t n)
{
    const char *tn = r->kind <= R_RAND_HI ? t->tensors[r->idx].name : NULL;
    const char *kn = r->kind >= R_GRID && r->kind <= R_ARG ? t->launches[r->idx].kernel : NULL;
    switch (r->kind) {
    case R_SHAPE:   snprintf(out, n, "the shape of '%.40s'", tn); break;
    case R_RAND_LO:
    case R_RAND_HI: snprintf(out, n, "randint of '%.40s'", tn); break;
    case R_BYTES:   snprintf(out, n, "'bytes'"); break;
    case R_FLOPS:   snprintf(out, n, "'flops'"); break;
    case R_GRID:    snprintf(out, n, "the grid of '%.40s'", kn); break;
    case R_BLOCK:   snprintf(out, n, "the block of '%.40s'", kn); break;
    case R_SMEM:    snprintf(out, n, "smem of '%.40s'", kn); break;
    case R_ARG:     snprintf(out, n, "argument %d of '%.40s'", r->sub + 1, kn); break;
    case R_TMAP_BOX:
    case R_TMAP_SHAPE:
        snprintf(out, n, "%s entry %d of tensor map '%.40s'", r->kind == R_TMAP_BOX ? "box"
                 : "shape", r->sub + 1, t->tmaps[r->idx].name);
        break;
    default:        snprintf(out, n, "'%.40s'", tn ? tn : "?"); break;
    }
}

/* Range checks of a value by kind; a message into *why when out of range. */
static int value_ok(const struct kevo_task *t, const struct rec *r, int64_t v, int64_t lo_v,
                    char *why, size_t n)
{
    int64_t lo, hi;
    switch (r->kind) {
    case R_SHAPE:
        if (v > 0)
            return 1;
        snprintf(why, n, "dimension %d of '%.40s' is %lld; shape dimensions must be positive",
                 r->sub + 1, t->tensors[r->idx].name, (long long)v);
        return 0;
    case R_RAND_LO:
    case R_RAND_HI:
        int_range(t->tensors[r->idx].dtype, &lo, &hi);
        if (r->kind == R_RAND_LO && v >= lo && v <= hi)
            return 1;
        if (r->kind == R_RAND_HI && lo_v < v && v - 1 <= hi)
            return 1;
        if (r->kind == R_RAND_HI && lo_v >= v)
            snprintf(why, n, "randint needs LO < HI (HI is exclusive), got %lld and %lld",
                     (long long)lo_v, (long long)v);
        else
            snprintf(why, n, "randint %s %lld is outside %s (%lld..%lld%s)",
                     r->kind == R_RAND_LO ? "LO" : "HI", (long long)v,
                     kevo_dtype_name(t->tensors[r->idx].dtype), (long long)lo,
                     (long long)hi, r->kind == R_RAND_HI ? ", HI exclusive" : "");
        return 0;
    case R_BYTES:
    case R_FLOPS:
        if (v > 0 || (v == 0 && r->kind == R_FLOPS))
            return 1;
        snprintf(why, n, "%s must be %s, got %lld", r->kind == R_BYTES ? "bytes" : "flops",
                 r->kind == R_BYTES ? "positive" : ">= 0", (long long)v);
        return 0;
    case R_GRID:
    case R_BLOCK:
    case R_SMEM:
        lo = r->kind == R_SMEM ? 0 : 1;
        if (v >= lo && v <= (int64_t)UINT32_MAX)
            return 1;
        snprintf(why, n, "%s must be between %lld and %lu, got %lld",
                 r->kind == R_GRID ? "grid" : r->kind == R_BLOCK ? "block" : "smem",
                 (long long)lo, (unsigned long)UINT32_MAX, (long long)v);
        return 0;
    case R_TMAP_BOX:
    case R_TMAP_SHAPE:
        hi = r->kind == R_TMAP_BOX ? 256 : (int64_t)1 << 32;
        if (v >= 1 && v <= hi)
            return 1;
        snprintf(why, n, "%s entry %d of tensor map '%.40s' is %lld; it must be between 1 and "
                 "%lld", r->kind == R_TMAP_BOX ? "box" : "shape", r->sub + 1,
                 t->tmaps[r->idx].name, (long long)v, (long long)hi);
        return 0;
    default:
        return 1;
    }
}

/* The element count and byte size of tensor r->idx must fit 64 bits. */
static enum kevo_status eval_numel(struct parser *p, const struct rec *r,
                                   const struct kevo_env *env, const char *sfx)
{
    const struct kevo_tensor_decl *d = &p->t->tensors[r->idx];
    int64_t n, bytes;
    char *m = NULL;
    enum kevo_status st = kevo_tensor_numel(d, env, &n, &m);

    if (st == KEVO_ERR_NOMEM)
        return nomem(p);
    if (st)
        st = perr(p, st, r->line, r->col, "%s%s", m ? m : "", sfx);
    else if (__builtin_mul_overflow(n, (int64_t)kevo_dtype_size(d->dtype), &bytes))
        st = perr(p, KEVO_ERR_OVERFLOW, r->line, r->col, "'%s' has %lld elements of %zu bytes: "
                  "its size overflows 64 bits%s", d->name, (long long)n,
                  kevo_dtype_size(d->dtype), sfx);
    kevo_free(m);
    return st;
}

static enum kevo_status eval_rec(struct parser *p, const struct rec *r,
                                 const struct kevo_env *env, const char *sfx)
{
    const struct kevo_task *t = p->t;
    struct kevo_expr_err e;
    int64_t v, lo_v = 0;
    char what[128], why[256];
    enum kevo_status st;

    if (r->kind == R_NUMEL)
        return eval_numel(p, r, env, sfx);
    if (r->kind == R_TOL || r->kind == R_WL_NAME || r->kind == R_WL_ALL || r->kind == R_TMAP ||
        (r->kind == R_ARG && t->launches[r->idx].args[r->sub].kind != KEVO_ARG_EXPR))
        return KEVO_OK;
    st = kevo_expr_eval(rec_text(t, r), env_lookup, (void *)env, &v, &e);
    if (!st && r->kind == R_RAND_HI)
        st = kevo_expr_eval(t->tensors[r->idx].init_a, env_lookup, (void *)env, &lo_v, NULL);
    if (st) {
        rec_what(t, r, what, sizeof what);
        return perr(p, st, r->line, r->col + e.col, "%s in %s%s", e.msg, what, sfx);
    }
    if (!value_ok(t, r, v, lo_v, why, sizeof why))
        return perr(p, KEVO_ERR_INVALID, r->line, r->col, "%s%s", why, sfx);
    return KEVO_OK;
}

static enum kevo_status eval_recs(struct parser *p, const struct kevo_env *env, const char *sfx)
{
    enum kevo_status st = KEVO_OK;
    for (int i = 0; !st && i < p->n_recs; i++)
        st = eval_rec(p, &p->recs[i], env, sfx);
    return st;
}

enum kevo_status kevo_task_check_workloads(struct parser *p)
{
    struct kevo_env env;
    enum kevo_status st = KEVO_OK;
    char sfx[64];

    for (int w = 0; !st && w < p->t->n_workloads; w++) {
        st = env_build(p->t, w, NULL, NULL, &env, &p->msg);
        snprintf(sfx, sizeof sfx, " for the workload at line %d", p->t->workloads[w].line);
        if (!st)
            st = eval_recs(p, &env, sfx);
    }
    return st;
}

/* A walk over the environments a candidate is checked under: visit(user, env, sfx) for
 * each, sfx naming the workload (and param values) for messages; per is the cost of one
 * visit against TASK_EVAL_BUDGET. */
struct env_walk {
    const struct kevo_task *task, *cand;
    long per;
    struct kevo_buf *msg;         /* env_build's errors */
    enum kevo_status (*visit)(void *user, const struct kevo_env *env, const char *sfx);
    void *user;
};

/* One candidate combination: params `vals` under task workload w. */
static enum kevo_status eval_combo(const struct env_walk *wk, int w, const int64_t *vals)
{
    const struct kevo_task *c = wk->cand;
    struct kevo_env env;
    char sfx[512];
    size_t o;
    enum kevo_status st = env_build(wk->task, w, c, vals, &env, wk->msg);

    if (st)
        return st == KEVO_ERR_NOMEM ? st : KEVO_ERR_INVALID;
    o = (size_t)snprintf(sfx, sizeof sfx, " for the workload at line %d of %s%s",
                         wk->task->workloads[w].line, wk->task->path, c->n_params ? " with" : "");
    for (int i = 0; i < c->n_params && o < sizeof sfx; i++)
        o += (size_t)snprintf(sfx + o, sizeof sfx - o, " %s=%lld", c->params[i].name,
                              (long long)vals[i]);
    return wk->visit(wk->user, &env, sfx);
}

/* Every combination after the defaults (idx all 0), in odometer order. */
static enum kevo_status eval_odometer(const struct env_walk *wk, int w, int *idx, int64_t *vals)
{
    const struct kevo_task *c = wk->cand;
    enum kevo_status st = KEVO_OK;

    while (!st) {
        int i = 0;
        while (i < c->n_params && ++idx[i] == c->params[i].n_values) {
            idx[i] = 0;
            vals[i] = c->params[i].values[0];
            i++;
        }
        if (i == c->n_params)
            break;
        vals[i] = c->params[i].values[idx[i]];
        st = eval_combo(wk, w, vals);
    }
    return st;
}

/*
 * A candidate is checked under every visible workload of the task (held-out ones are not
 * revealed, not even through an error message) and its param combinations: all of them
 * when there are at most TASK_MAX_COMBOS and the work fits TASK_EVAL_BUDGET, otherwise
 * the defaults plus each value of each param with the others at their defaults, while
 * the budget lasts. The evaluator still checks every combination it runs.
 */
static enum kevo_status walk_candidate(const struct env_walk *wk)
{
    const struct kevo_task *c = wk->cand;
    int64_t vals[TASK_MAX_ENV];
    int idx[TASK_MAX_ENV];
    long combos = 1, spent = 0, per = wk->per, n_vis = 0;
    enum kevo_status st = KEVO_OK;

    for (int i = 0; i < c->n_params; i++) {
        combos *= c->params[i].n_values;
        if (combos > TASK_MAX_COMBOS)
            combos = TASK_MAX_COMBOS + 1;
    }
    for (int w = 0; w < wk->task->n_workloads; w++)
        n_vis += !wk->task->workloads[w].holdout;
    int full = combos <= TASK_MAX_COMBOS && combos * per * n_vis <= TASK_EVAL_BUDGET;
    for (int w = 0; !st && w < wk->task->n_workloads; w++) {
        if (wk->task->workloads[w].holdout)
            continue;
        for (int i = 0; i < c->n_params; i++) {
            idx[i] = 0;
            vals[i] = c->params[i].values[0];
        }
        st = eval_combo(wk, w, vals);
        spent += per;
        if (full && !st)
            st = eval_odometer(wk, w, idx, vals);
        for (int i = 0; !full && i < c->n_params; i++) {
            for (int j = 1; !st && j < c->params[i].n_values && spent < TASK_EVAL_BUDGET; j++) {
                vals[i] = c->params[i].values[j];
                st = eval_combo(wk, w, vals);
                spent += per;
            }
            vals[i] = c->params[i].values[0];
        }
    }
    return st;
}

static enum kevo_status visit_recs(void *user, const struct kevo_env *env, const char *sfx)
{
    return eval_recs(user, env, sfx);
}

enum kevo_status kevo_task_check_candidate(struct parser *p)
{
    struct env_walk wk = { .task = p->task, .cand = p->t, .per = p->n_recs + 1, .msg = &p->msg,
                           .visit = visit_recs, .user = p };
    return walk_candidate(&wk);
}

enum kevo_status kevo_task_each_env(const struct kevo_task *task, const struct kevo_task *cand,
                                    long cost, kevo_env_visit_fn visit, void *user,
                                    char **out_msg)
{
    struct env_walk wk = { .task = task, .cand = cand, .per = cost > 0 ? cost : 1,
                           .visit = visit, .user = user };
    struct kevo_buf b;
    struct kevo_env env;
    char sfx[64];
    enum kevo_status st = KEVO_OK;

    *out_msg = NULL;
    kevo_buf_init(&b, TASK_MSG_MAX);
    wk.msg = &b;
    if (cand)
        st = walk_candidate(&wk);
    for (int w = 0; !cand && !st && w < task->n_workloads; w++) {
        st = env_build(task, w, NULL, NULL, &env, &b);
        snprintf(sfx, sizeof sfx, " for the workload at line %d", task->workloads[w].line);
        if (!st)
            st = visit(user, &env, sfx);
    }
    if (st && kevo_buf_str(&b)[0])
        *out_msg = take_msg(&b, st);
    kevo_buf_free(&b);
    return st;
}

void kevo_task_tol(const struct kevo_task *task, const char *name, enum kevo_dtype dt,
                   double *rtol, double *atol)
{
    const struct kevo_tol *all = NULL;

    for (int i = 0; task && i < task->n_tols; i++) {
        const struct kevo_tol *t = &task->tols[i];
        if (t->name && name && !strcmp(t->name, name)) {
            *rtol = t->rtol;
            *atol = t->atol;
            return;
        }
        if (!t->name)
            all = t;
    }
    if (all) {
        *rtol = all->rtol;
        *atol = all->atol;
        return;
    }
    switch (dt) {
    case KEVO_F64:     *rtol = 1e-7;    *atol = 1e-9; break;
    case KEVO_F32:     *rtol = 1e-4;    *atol = 1e-5; break;
    case KEVO_F16:     *rtol = 1e-2;    *atol = 1e-3; break;
    case KEVO_BF16:    *rtol = 2e-2;    *atol = 1e-2; break;
    case KEVO_FP8E4M3:
    case KEVO_FP8E5M2: *rtol = 1.25e-1; *atol = 1e-1; break;
    default:           *rtol = 0;       *atol = 0;    break;
    }
}

int kevo_task_directive(const char *l, size_t n, const char **kw, size_t *kw_len)
{
    size_t at, i;
    if (!directive_at(l, n, &at))
        return 0;
    for (i = at; i < n && is_blank(l[i]); i++)
        ;
    *kw = l + i;
    while (i < n && !is_blank(l[i]) && l[i] != '\r' && l[i] != '\n')
        i++;
    *kw_len = (size_t)(l + i - *kw);
    return 1;
}

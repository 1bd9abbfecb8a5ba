/*
 * task - pass 1 of parsing task and candidate files (task.h, docs/task-format.md), whole
 * files, and kevo_task_free. Passes 2 and 3 are in task_check.c; task_int.h holds what
 * the two share.
 *
 * A file is read line by line; a directive line is one whose first non-blank characters
 * are `//`, one or more blanks, the word `kevo`, then a blank or the end of the line.
 * Everything else is source. Parsing runs in three passes so that directives may come in
 * any order and every error still names its line and column:
 *
 *   1. each directive is parsed on its own: syntax, literals, duplicates, names declared
 *      twice; every expression it holds is syntax-checked and remembered as a `rec`
 *      (kind, owner, line, column);
 *   2. with every name known, the recs are resolved: expressions may only use size names
 *      (and, in candidates, param names), launch arguments become tensors, scalars or
 *      expressions, tol names must be outputs, every size line must assign exactly the
 *      names of the first one;
 *   3. every rec is evaluated under every workload (candidates: every visible workload and
 *      param combinations, see kevo_task_check_candidate), so overflow, a non-positive
 *      shape dimension or an empty randint range is reported by `kevo check` with its line.
 *
 * Hostile input (LLM-written candidates, fuzzed files) is bounded: files up to 16 MiB and
 * the TASK_MAX_* caps on counts. The module is reentrant; it holds no global state.
 */
#include "core/task_int.h"
#include "core/expr.h"
#include "base/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- small text helpers ---- */

static struct tok trim(const char *line, const char *s, size_t len)
{
    struct tok t;
    while (len && is_blank(*s)) {
        s++;
        len--;
    }
    while (len && is_blank(s[len - 1]))
        len--;
    t.s = s;
    t.len = len;
    t.col = (int)(s - line) + 1;
    return t;
}

/* Split s[0..len) at commas of depth 0 into at most max trimmed parts; the number of parts,
 * or max + 1 when there are more. */
static int split_commas(const char *line, const char *s, size_t len, struct tok *parts, int max)
{
    int n = 0, depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : ',';
        if (c == '(' || c == '[')
            depth++;
        else if ((c == ')' || c == ']') && depth > 0)
            depth--;
        else if (c == ',' && (depth == 0 || i == len)) {
            if (n == max)
                return max + 1;
            parts[n++] = trim(line, s + start, i - start);
            start = i + 1;
        }
    }
    return n;
}

/* Offset of the ')' matching the '(' at s[0], or len when there is none. */
static size_t match_paren(const char *s, size_t len)
{
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '(')
            depth++;
        else if (s[i] == ')' && --depth == 0)
            return i;
    }
    return len;
}
/* ---- growable arrays ---- */

/* Make room for element n (capacity is implicitly the next power of two >= n) and zero it.
 * NULL when out of memory (arr is then untouched). */
static void *grow(void *arr, int n, size_t size)
{
    void *p = arr;
    if (n == 0 || (n & (n - 1)) == 0) {
        p = kevo_reallocarray(arr, n ? 2 * (size_t)n : 1, size);
        if (!p)
            return NULL;
    }
    memset((char *)p + (size_t)n * size, 0, size);
    return p;
}

#define GROW(p, arr, n)                                     \
    do {                                                    \
        void *grown_ = grow((arr), (n), sizeof *(arr));     \
        if (!grown_)                                        \
            return nomem(p);                                \
        (arr) = grown_;                                     \
    } while (0)

/* ---- parser state ---- */


/* Copy a token into a new string. */
static enum kevo_status dup_tok(struct parser *p, struct tok t, char **out)
{
    *out = kevo_strndup(t.s, t.len);
    return *out ? KEVO_OK : nomem(p);
}

static enum kevo_status add_rec(struct parser *p, enum rec_kind kind, int idx, int sub, int col)
{
    GROW(p, p->recs, p->n_recs);
    p->recs[p->n_recs++] = (struct rec){ kind, idx, sub, p->line, col };
    return KEVO_OK;
}

/* Syntax-check an expression now (names are checked in pass 2) and remember it. */
static enum kevo_status add_expr(struct parser *p, enum rec_kind kind, int idx, int sub,
                                 const char *text, int col)
{
    struct kevo_expr_err e;
    enum kevo_status st = kevo_expr_check(text, NULL, NULL, &e);
    if (st)
        return perr(p, st, p->line, col + e.col, "%s", e.msg);
    return add_rec(p, kind, idx, sub, col);
}

/* ---- names ---- */

static enum kevo_status check_ident(struct parser *p, struct tok t, const char *what)
{
    char b[200];
    if (!is_ident_n(t.s, t.len))
        return perr(p, KEVO_ERR_PARSE, p->line, t.col,
                    "expected %s name (letters, digits, '_'), got '%s'", what, q(b, t.s, t.len));
    if (eq_n(t.s, t.len, "min") || eq_n(t.s, t.len, "max") || eq_n(t.s, t.len, "cdiv"))
        return perr(p, KEVO_ERR_PARSE, p->line, t.col,
                    "'%s' is a function of expressions and cannot name a %s", q(b, t.s, t.len),
                    what);
    return KEVO_OK;
}

static const struct name_ent *find_name(const struct parser *p, const char *s, size_t n)
{
    for (int i = 0; i < p->n_names; i++)
        if (eq_n(s, n, p->names[i].name))
            return &p->names[i];
    return NULL;
}

/* Declare `name` (owned by the task being built), unique across every kind. */
static enum kevo_status declare(struct parser *p, const char *name, const char *kind, int line,
                                int col, int from_task)
{
    const struct name_ent *e = find_name(p, name, strlen(name));
    char b[200];

    if (e && e->from_task)
        return perr(p, KEVO_ERR_INVALID, line, col,
                    "%s '%s' clashes with the task's %s '%s' (line %d of %s)", kind,
                    q(b, name, strlen(name)), e->kind, e->name, e->line, p->task->path);
    if (e && !strcmp(e->kind, kind))
        return perr(p, KEVO_ERR_INVALID, line, col, "%s '%s' declared twice (first at line %d)",
                    kind, q(b, name, strlen(name)), e->line);
    if (e)
        return perr(p, KEVO_ERR_INVALID, line, col,
                    "%s '%s' clashes with the %s '%s' declared at line %d", kind,
                    q(b, name, strlen(name)), e->kind, e->name, e->line);
    GROW(p, p->names, p->n_names);
    p->names[p->n_names++] = (struct name_ent){ name, kind, line, from_task };
    return KEVO_OK;
}


/* ---- directives: workloads ---- */

struct line_names {
    const struct kevo_workload *w;
    int upto;
};

/* A size expression may use the names assigned before it on its line. */
static int earlier_name(void *user, const char *s, size_t n)
{
    const struct line_names *ln = user;
    for (int i = 0; i < ln->upto; i++)
        if (eq_n(s, n, ln->w->names[i]))
            return 1;
    return 0;
}

static enum kevo_status size_assign(struct parser *p, struct kevo_workload *w, struct tok t)
{
    const char *eq = memchr(t.s, '=', t.len);
    struct tok name, ex;
    struct line_names ln = { w, w->n };
    struct kevo_expr_err e;
    enum kevo_status st;
    char b[200];

    if (!eq)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col, "expected NAME=EXPR, got '%s'",
                    q(b, t.s, t.len));
    name = (struct tok){ t.s, (size_t)(eq - t.s), t.col };
    ex = (struct tok){ eq + 1, t.len - name.len - 1, t.col + (int)name.len + 1 };
    st = check_ident(p, name, "size");
    for (int i = 0; !st && i < w->n; i++)
        if (eq_n(name.s, name.len, w->names[i]))
            st = perr(p, KEVO_ERR_INVALID, p->line, name.col,
                      "size '%s' assigned twice on this line", w->names[i]);
    if (st)
        return st;
    w->n++;   /* the slots are zeroed: kevo_task_free copes with a half-filled one */
    if (dup_tok(p, name, &w->names[w->n - 1]) || dup_tok(p, ex, &w->exprs[w->n - 1]))
        return KEVO_ERR_NOMEM;
    st = kevo_expr_check(w->exprs[w->n - 1], earlier_name, &ln, &e);
    if (st == KEVO_ERR_PARSE && !strncmp(e.msg, "unknown name", 12))
        return perr(p, st, p->line, ex.col + e.col,
                    "%s (a size may only use the names assigned before it on its line)", e.msg);
    if (st)
        return perr(p, st, p->line, ex.col + e.col, "%s", e.msg);
    return add_rec(p, R_WL_NAME, (int)(w - p->t->workloads), w->n - 1, name.col);
}

static enum kevo_status d_size(struct parser *p, int holdout)
{
    struct kevo_task *t = p->t;
    struct kevo_workload *w;
    enum kevo_status st = KEVO_OK;
    int wi = t->n_workloads;

    if (p->nt == 0)
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1,
                    "expected NAME=EXPR after '%s'", holdout ? "holdout" : "size");
    if (wi >= TASK_MAX_WORKLOADS)
        return perr(p, KEVO_ERR_TOOBIG, p->line, p->kw.col, "too many workloads (at most %d)",
                    TASK_MAX_WORKLOADS);
    if (p->nt > TASK_MAX_ENV)
        return perr(p, KEVO_ERR_TOOBIG, p->line, p->tk[TASK_MAX_ENV].col,
                    "too many sizes on one line (at most %d)", TASK_MAX_ENV);
    GROW(p, t->workloads, wi);
    t->n_workloads++;
    w = &t->workloads[wi];
    w->holdout = holdout;
    w->line = p->line;
    w->names = kevo_calloc((size_t)p->nt, sizeof *w->names);
    w->exprs = kevo_calloc((size_t)p->nt, sizeof *w->exprs);
    if (!w->names || !w->exprs)
        return nomem(p);
    for (int i = 0; !st && i < p->nt; i++)
        st = size_assign(p, w, p->tk[i]);
    if (!st)
        st = add_rec(p, R_WL_ALL, wi, 0, p->kw.col);
    if (st || holdout || p->first_wl >= 0)
        return st;
    p->first_wl = wi;
    for (int i = 0; !st && i < w->n; i++)
        st = declare(p, w->names[i], "size", p->line, p->tk[i].col, 0);
    return st;
}

/* ---- directives: tensors ---- */

static enum kevo_status parse_dtype(struct parser *p, struct tok t, enum kevo_dtype *out)
{
    char b[200];
    if (kevo_dtype_parse(t.s, t.len, out) == 0)
        return KEVO_OK;
    return perr(p, KEVO_ERR_PARSE, p->line, t.col, "expected dtype (one of " DTYPE_LIST
                "), got '%s'", q(b, t.s, t.len));
}

/* DTYPE[DIM, ...] */
static enum kevo_status parse_type_shape(struct parser *p, int ti, struct tok t)
{
    struct kevo_tensor_decl *d = &p->t->tensors[ti];
    const char *br = memchr(t.s, '[', t.len);
    struct tok dims[KEVO_MAX_DIMS];
    struct tok dt = { t.s, br ? (size_t)(br - t.s) : t.len, t.col };
    size_t inner;
    int n;
    enum kevo_status st = parse_dtype(p, dt, &d->dtype);

    if (st)
        return st;
    if (!br)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col + (int)t.len,
                    "expected '[' after the dtype (e.g. %s[M,N])", kevo_dtype_name(d->dtype));
    if (t.s[t.len - 1] != ']')
        return perr(p, KEVO_ERR_PARSE, p->line, t.col + (int)t.len,
                    "expected ']' at the end of the shape");
    inner = t.len - dt.len - 2;
    if (trim(p->l, br + 1, inner).len == 0)
        n = 0;   /* DTYPE[]: a single element */
    else
        n = split_commas(p->l, br + 1, inner, dims, KEVO_MAX_DIMS);
    if (n > KEVO_MAX_DIMS)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col, "a shape has at most %d dimensions",
                    KEVO_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        d->ndim = i + 1;
        st = dup_tok(p, dims[i], &d->shape[i]);
        if (!st)
            st = add_expr(p, R_SHAPE, ti, i, d->shape[i], dims[i].col);
        if (st)
            return st;
    }
    return add_rec(p, R_NUMEL, ti, 0, t.col);
}

static enum kevo_status init_float(struct parser *p, struct kevo_tensor_decl *d, int col,
                                   struct tok a, struct tok b)
{
    double x, y, fmax = float_max(d->dtype);
    char qb[200];
    int normal = d->init == KEVO_INIT_NORMAL;

    if (!kevo_dtype_is_float(d->dtype))
        return perr(p, KEVO_ERR_INVALID, p->line, col,
                    "%s needs a float dtype; '%s' is %s (use randint(LO,HI))",
                    normal ? "normal" : "uniform", d->name, kevo_dtype_name(d->dtype));
    if (dup_tok(p, a, &d->init_a) || dup_tok(p, b, &d->init_b))
        return KEVO_ERR_NOMEM;
    if (kevo_expr_parse_double(d->init_a, &x))
        return perr(p, KEVO_ERR_PARSE, p->line, a.col, "expected a float literal, got '%s'",
                    q(qb, a.s, a.len));
    if (kevo_expr_parse_double(d->init_b, &y))
        return perr(p, KEVO_ERR_PARSE, p->line, b.col, "expected a float literal, got '%s'",
                    q(qb, b.s, b.len));
    if (fabs(x) > fmax || fabs(y) > fmax)
        return perr(p, KEVO_ERR_INVALID, p->line, a.col, "values beyond the range of %s (%g)",
                    kevo_dtype_name(d->dtype), fmax);
    if (normal && !(y > 0))
        return perr(p, KEVO_ERR_INVALID, p->line, b.col, "normal needs STD > 0, got %s",
                    d->init_b);
    if (!normal && !(x < y))
        return perr(p, KEVO_ERR_INVALID, p->line, a.col, "uniform needs LO < HI, got %s and %s",
                    d->init_a, d->init_b);
    return KEVO_OK;
}

/* normal(MEAN,STD) | uniform(LO,HI) | randint(LO,HI) */
static enum kevo_status parse_init(struct parser *p, int ti, struct tok t)
{
    struct kevo_tensor_decl *d = &p->t->tensors[ti];
    const char *par = memchr(t.s, '(', t.len);
    struct tok args[2];
    size_t klen = par ? (size_t)(par - t.s) : 0;
    char b[200];

    if (par && eq_n(t.s, klen, "normal"))
        d->init = KEVO_INIT_NORMAL;
    else if (par && eq_n(t.s, klen, "uniform"))
        d->init = KEVO_INIT_UNIFORM;
    else if (par && eq_n(t.s, klen, "randint"))
        d->init = KEVO_INIT_RANDINT;
    if (!d->init || match_paren(par, t.len - klen) != t.len - klen - 1)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col, "expected INIT (normal(MEAN,STD), "
                    "uniform(LO,HI) or randint(LO,HI)), got '%s'", q(b, t.s, t.len));
    if (split_commas(p->l, par + 1, t.len - klen - 2, args, 2) != 2)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col, "expected two arguments in '%s'",
                    q(b, t.s, t.len));
    if (d->init != KEVO_INIT_RANDINT)
        return init_float(p, d, t.col, args[0], args[1]);
    if (kevo_dtype_is_float(d->dtype))
        return perr(p, KEVO_ERR_INVALID, p->line, t.col,
                    "randint needs an integer or bool dtype; '%s' is %s (use normal or uniform)",
                    d->name, kevo_dtype_name(d->dtype));
    if (dup_tok(p, args[0], &d->init_a) || dup_tok(p, args[1], &d->init_b))
        return KEVO_ERR_NOMEM;
    enum kevo_status st = add_expr(p, R_RAND_LO, ti, 0, d->init_a, args[0].col);
    if (!st)
        st = add_expr(p, R_RAND_HI, ti, 1, d->init_b, args[1].col);
    return st;
}

static const char *role_name(enum kevo_role r)
{
    return r == KEVO_ROLE_INPUT ? "input" : r == KEVO_ROLE_OUTPUT ? "output" : "scratch";
}

/* input NAME DTYPE[SHAPE] INIT | output NAME DTYPE[SHAPE] | scratch NAME DTYPE[SHAPE] */
static enum kevo_status d_tensor(struct parser *p, enum kevo_role role)
{
    struct kevo_task *t = p->t;
    int ti = t->n_tensors, want = role == KEVO_ROLE_INPUT ? 3 : 2;
    enum kevo_status st;
    char b[200];

    if (p->nt < 2)
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1,
                    "expected '%s NAME DTYPE[SHAPE]%s'", role_name(role),
                    role == KEVO_ROLE_INPUT ? " INIT" : "");
    if (ti >= TASK_MAX_TENSORS)
        return perr(p, KEVO_ERR_TOOBIG, p->line, p->kw.col, "too many tensors (at most %d)",
                    TASK_MAX_TENSORS);
    st = check_ident(p, p->tk[0], "tensor");
    if (st)
        return st;
    GROW(p, t->tensors, ti);
    t->n_tensors++;
    t->tensors[ti].role = role;
    t->tensors[ti].line = p->line;
    st = dup_tok(p, p->tk[0], &t->tensors[ti].name);
    if (!st)
        st = declare(p, t->tensors[ti].name, "tensor", p->line, p->tk[0].col, 0);
    if (!st)
        st = parse_type_shape(p, ti, p->tk[1]);
    if (st)
        return st;
    if (p->nt < want)
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1, "input '%s' needs an INIT "
                    "(normal(MEAN,STD), uniform(LO,HI) or randint(LO,HI))",
                    t->tensors[ti].name);
    if (p->nt > want)
        return perr(p, KEVO_ERR_PARSE, p->line, p->tk[want].col, "%s, got '%s'",
                    role == KEVO_ROLE_INPUT ? "unexpected text after INIT"
                                            : "an output or scratch tensor takes no INIT",
                    q(b, p->tk[want].s, p->tk[want].len));
    return role == KEVO_ROLE_INPUT ? parse_init(p, ti, p->tk[2]) : KEVO_OK;
}

/* ---- directives: scalars, tolerances, bytes, flops ---- */

static enum kevo_status scalar_value(struct parser *p, struct kevo_scalar_decl *s, struct tok v)
{
    char *text = NULL;
    struct kevo_expr_err e;
    int64_t lo, hi, x;
    enum kevo_status st = dup_tok(p, v, &text);
    char b[200];

    if (st)
        return st;
    if (kevo_dtype_is_float(s->dtype)) {
        if (kevo_expr_parse_double(text, &s->value))
            st = perr(p, KEVO_ERR_PARSE, p->line, v.col, "expected a float literal for %s, "
                      "got '%s'", kevo_dtype_name(s->dtype), q(b, v.s, v.len));
        else if (fabs(s->value) > float_max(s->dtype))
            st = perr(p, KEVO_ERR_INVALID, p->line, v.col, "%s does not fit in %s (max %g)",
                      q(b, v.s, v.len), kevo_dtype_name(s->dtype), float_max(s->dtype));
        goto out;
    }
    st = kevo_expr_eval(text, NULL, NULL, &x, &e);
    if (st) {
        st = perr(p, st, p->line, v.col + e.col, "expected an integer for %s: %s",
                  kevo_dtype_name(s->dtype), e.msg);
        goto out;
    }
    int_range(s->dtype, &lo, &hi);
    if (x < lo || x > hi) {
        st = perr(p, KEVO_ERR_INVALID, p->line, v.col, "%lld does not fit in %s (%lld..%lld)",
                  (long long)x, kevo_dtype_name(s->dtype), (long long)lo, (long long)hi);
        goto out;
    }
    s->ivalue = x;
    s->value = (double)x;
out:
    kevo_free(text);
    return st;
}

/* scalar NAME DTYPE VALUE */
static enum kevo_status d_scalar(struct parser *p)
{
    struct kevo_task *t = p->t;
    struct kevo_scalar_decl *s;
    enum kevo_status st;
    char b[200];

    if (p->nt != 3)
        return perr(p, KEVO_ERR_PARSE, p->line, p->nt > 3 ? p->tk[3].col : (int)p->ll + 1,
                    "expected 'scalar NAME DTYPE VALUE'%s%s%s", p->nt > 3 ? ", got '" : "",
                    p->nt > 3 ? q(b, p->tk[3].s, p->tk[3].len) : "", p->nt > 3 ? "'" : "");
    if (t->n_scalars >= TASK_MAX_SCALARS)
        return perr(p, KEVO_ERR_TOOBIG, p->line, p->kw.col, "too many scalars (at most %d)",
                    TASK_MAX_SCALARS);
    st = check_ident(p, p->tk[0], "scalar");
    if (st)
        return st;
    GROW(p, t->scalars, t->n_scalars);
    s = &t->scalars[t->n_scalars++];
    s->line = p->line;
    st = dup_tok(p, p->tk[0], &s->name);
    if (!st)
        st = declare(p, s->name, "scalar", p->line, p->tk[0].col, 0);
    if (!st)
        st = parse_dtype(p, p->tk[1], &s->dtype);
    if (!st)
        st = scalar_value(p, s, p->tk[2]);
    return st;
}

/* KEY=FLOAT with FLOAT >= 0, for tol. */
static enum kevo_status tol_value(struct parser *p, struct tok t, size_t klen, double *out)
{
    struct tok v = { t.s + klen + 1, t.len - klen - 1, t.col + (int)klen + 1 };
    char buf[64], b[200];

    if (v.len < sizeof buf) {
        memcpy(buf, v.s, v.len);
        buf[v.len] = '\0';
    }
    if (v.len >= sizeof buf || kevo_expr_parse_double(buf, out))
        return perr(p, KEVO_ERR_PARSE, p->line, v.col, "expected a float literal, got '%s'",
                    q(b, v.s, v.len));
    if (*out < 0)
        return perr(p, KEVO_ERR_INVALID, p->line, v.col, "a tolerance must be >= 0, got %s",
                    q(b, v.s, v.len));
    return KEVO_OK;
}

static enum kevo_status tol_dup(struct parser *p, const struct tok *name, int col)
{
    char b[200];
    for (int i = 0; i < p->t->n_tols; i++) {
        const struct kevo_tol *o = &p->t->tols[i];
        if (!name && !o->name)
            return perr(p, KEVO_ERR_INVALID, p->line, col, "tol for all outputs declared "
                        "twice (first at line %d)", o->line);
        if (name && o->name && eq_n(name->s, name->len, o->name))
            return perr(p, KEVO_ERR_INVALID, p->line, col, "tol for '%s' declared twice "
                        "(first at line %d)", q(b, name->s, name->len), o->line);
    }
    return KEVO_OK;
}

/* tol [NAME] rtol=X atol=Y */
static enum kevo_status d_tol(struct parser *p)
{
    struct kevo_tol tol = { NULL, -1, -1, p->line };
    const struct tok *name = p->nt && !memchr(p->tk[0].s, '=', p->tk[0].len) ? &p->tk[0] : NULL;
    enum kevo_status st = tol_dup(p, name, name ? name->col : p->kw.col);
    char b[200];

    if (!st && name)
        st = check_ident(p, *name, "output");
    for (int i = name ? 1 : 0; !st && i < p->nt; i++) {
        struct tok t = p->tk[i];
        int is_r = t.len >= 5 && !memcmp(t.s, "rtol=", 5);
        int is_a = t.len >= 5 && !memcmp(t.s, "atol=", 5);
        double *dst = is_r ? &tol.rtol : &tol.atol;
        if (!is_r && !is_a)
            st = perr(p, KEVO_ERR_PARSE, p->line, t.col,
                      "expected rtol=X or atol=Y, got '%s'", q(b, t.s, t.len));
        else if (*dst >= 0)
            st = perr(p, KEVO_ERR_PARSE, p->line, t.col, "%s given twice", is_r ? "rtol" : "atol");
        else
            st = tol_value(p, t, 4, dst);
    }
    if (st)
        return st;
    if (tol.rtol < 0 || tol.atol < 0)
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1,
                    "tol needs both rtol=X and atol=Y (missing %s)",
                    tol.rtol < 0 ? "rtol" : "atol");
    GROW(p, p->t->tols, p->t->n_tols);
    p->t->tols[p->t->n_tols++] = tol;
    if (name && dup_tok(p, *name, &p->t->tols[p->t->n_tols - 1].name))
        return KEVO_ERR_NOMEM;
    return name ? add_rec(p, R_TOL, p->t->n_tols - 1, 0, name->col) : KEVO_OK;
}

static enum kevo_status once(struct parser *p, int *line)
{
    if (*line)
        return perr(p, KEVO_ERR_INVALID, p->line, p->kw.col,
                    "'%.*s' declared twice (first at line %d)", (int)p->kw.len, p->kw.s, *line);
    *line = p->line;
    return KEVO_OK;
}

static enum kevo_status need_rest(struct parser *p, const char *form)
{
    if (p->rest.len)
        return KEVO_OK;
    return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1, "expected '%s'", form);
}

/* bytes EXPR */
static enum kevo_status d_bytes(struct parser *p)
{
    enum kevo_status st = once(p, &p->bytes_line);
    if (!st)
        st = need_rest(p, "bytes EXPR");
    if (!st)
        st = dup_tok(p, p->rest, &p->t->bytes);
    if (!st)
        st = add_expr(p, R_BYTES, 0, 0, p->t->bytes, p->rest.col);
    return st;
}

/* flops EXPR [on UNIT] */
static enum kevo_status d_flops(struct parser *p)
{
    struct tok ex = p->rest;
    enum kevo_status st = once(p, &p->flops_line);
    char b[200];

    if (!st)
        st = need_rest(p, "flops EXPR [on UNIT]");
    if (st)
        return st;
    if (p->nt >= 1 && eq_n(p->tk[p->nt - 1].s, p->tk[p->nt - 1].len, "on"))
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1,
                    "expected a unit after 'on' (one of fp32 fp64 tf32 fp16 bf16 fp8)");
    if (p->nt >= 3 && eq_n(p->tk[p->nt - 2].s, p->tk[p->nt - 2].len, "on")) {
        struct tok u = p->tk[p->nt - 1];
        int found = 0;
        for (int i = 0; i < KEVO_UNIT_COUNT && !found; i++)
            if (eq_n(u.s, u.len, kevo_unit_name((enum kevo_unit)i))) {
                p->t->flops_unit = (enum kevo_unit)i;
                found = 1;
            }
        if (!found)
            return perr(p, KEVO_ERR_PARSE, p->line, u.col, "expected unit (one of fp32 fp64 "
                        "tf32 fp16 bf16 fp8), got '%s'", q(b, u.s, u.len));
        ex = trim(p->l, ex.s, (size_t)(p->tk[p->nt - 2].s - ex.s));
    }
    st = dup_tok(p, ex, &p->t->flops);
    if (!st)
        st = add_expr(p, R_FLOPS, 0, 0, p->t->flops, ex.col);
    return st;
}

/* ---- directives: launch and call ---- */

/* "(ARG, ...)" at t, into launch li. */
static enum kevo_status parse_args(struct parser *p, int li, struct tok t)
{
    struct kevo_launch *L = &p->t->launches[li];
    struct tok parts[KEVO_MAX_ARGS + 1];
    enum kevo_status st = KEVO_OK;
    int n = 0;

    if (match_paren(t.s, t.len) != t.len - 1)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col + (int)t.len,
                    "expected ')' at the end of the argument list");
    if (trim(p->l, t.s + 1, t.len - 2).len)
        n = split_commas(p->l, t.s + 1, t.len - 2, parts, KEVO_MAX_ARGS);
    if (n > KEVO_MAX_ARGS)
        return perr(p, KEVO_ERR_TOOBIG, p->line, t.col, "too many arguments (at most %d)",
                    KEVO_MAX_ARGS);
    for (int i = 0; !st && i < n; i++) {
        if (!parts[i].len)
            return perr(p, KEVO_ERR_PARSE, p->line, parts[i].col, "expected an argument "
                        "(a tensor, a scalar or an integer expression), got nothing");
        L->n_args = i + 1;
        L->args[i].kind = KEVO_ARG_EXPR;
        L->args[i].index = -1;
        L->args[i].col = parts[i].col;
        st = dup_tok(p, parts[i], &L->args[i].text);
        if (!st)
            st = add_expr(p, R_ARG, li, i, L->args[i].text, parts[i].col);
    }
    return st;
}

/* grid=/block= value: EXPR or (x[,y[,z]]) */
static enum kevo_status parse_dim3(struct parser *p, int li, enum rec_kind kind, struct tok v)
{
    char **dst = kind == R_GRID ? p->t->launches[li].grid : p->t->launches[li].block;
    struct tok parts[4];
    int n = 1;

    parts[0] = v;
    if (v.len && v.s[0] == '(' && match_paren(v.s, v.len) == v.len - 1) {
        n = split_commas(p->l, v.s + 1, v.len - 2, parts, 3);
        if (n > 3)
            return perr(p, KEVO_ERR_PARSE, p->line, v.col,
                        "%s takes at most 3 components (x,y,z)", kind == R_GRID ? "grid" : "block");
    }
    for (int i = 0; i < n; i++) {
        enum kevo_status st = dup_tok(p, parts[i], &dst[i]);
        if (!st)
            st = add_expr(p, kind, li, i, dst[i], parts[i].col);
        if (st)
            return st;
    }
    return KEVO_OK;
}

static enum kevo_status new_launch(struct parser *p, struct tok name, int *li)
{
    struct kevo_task *t = p->t;
    char b[200];

    if (!is_ident_n(name.s, name.len))
        return perr(p, KEVO_ERR_PARSE, p->line, name.col, "expected a %s name, got '%s'",
                    t->lang == KEVO_LANG_CUDA ? "kernel" : "function", q(b, name.s, name.len));
    if (t->n_launches >= TASK_MAX_LAUNCHES)
        return perr(p, KEVO_ERR_TOOBIG, p->line, p->kw.col, "too many launch/call lines "
                    "(at most %d)", TASK_MAX_LAUNCHES);
    GROW(p, t->launches, t->n_launches);
    *li = t->n_launches++;
    t->launches[*li].line = p->line;
    return dup_tok(p, name, &t->launches[*li].kernel);
}

/* Missing grid/block components are "1", smem "0" (also for C calls, where they are not
 * used, so that no consumer meets a NULL). */
static enum kevo_status launch_defaults(struct parser *p, struct kevo_launch *L)
{
    for (int i = 0; i < 3; i++) {
        if (!L->grid[i] && !(L->grid[i] = kevo_strdup("1")))
            return nomem(p);
        if (!L->block[i] && !(L->block[i] = kevo_strdup("1")))
            return nomem(p);
    }
    if (!L->smem && !(L->smem = kevo_strdup("0")))
        return nomem(p);
    return KEVO_OK;
}

/* KEY=VALUE at t: KEY's index among keys[0..n) (-1: another, or no '='), its length in
 * *kl and VALUE in *v. */
static int key_value(struct tok t, const char *const *keys, int n, size_t *kl, struct tok *v)
{
    const char *eq = memchr(t.s, '=', t.len);

    *kl = eq ? (size_t)(eq - t.s) : t.len;
    *v = (struct tok){ t.s + *kl + !!eq, t.len - *kl - !!eq, t.col + (int)*kl + 1 };
    for (int i = 0; eq && i < n; i++)
        if (eq_n(t.s, *kl, keys[i]))
            return i;
    return -1;
}

static enum kevo_status launch_key(struct parser *p, int li, struct tok t, int *seen)
{
    static const char *const keys[] = { "grid", "block", "smem" };
    struct kevo_launch *L = &p->t->launches[li];
    size_t kl;
    struct tok v;
    int k = key_value(t, keys, 3, &kl, &v);
    char b[200];

    if (k < 0)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col, "expected grid=G, block=B, smem=S or "
                    "the argument list '(ARG, ...)', got '%s'", q(b, t.s, t.len));
    if (seen[k])
        return perr(p, KEVO_ERR_PARSE, p->line, t.col, "'%.*s=' given twice", (int)kl, t.s);
    seen[k] = 1;
    if (k < 2)
        return parse_dim3(p, li, k == 0 ? R_GRID : R_BLOCK, v);
    if (dup_tok(p, v, &L->smem))
        return KEVO_ERR_NOMEM;
    return add_expr(p, R_SMEM, li, 0, L->smem, v.col);
}

/* launch KERNEL grid=G block=B [smem=S] (ARG, ...) */
static enum kevo_status d_launch(struct parser *p)
{
    int li, seen[3] = { 0, 0, 0 };
    enum kevo_status st;
    char b[200];

    if (p->t->lang != KEVO_LANG_CUDA)
        return perr(p, KEVO_ERR_INVALID, p->line, p->kw.col,
                    "'launch' is for CUDA (.cu) files; a C file uses 'call FUNCTION(ARG, ...)'");
    if (p->nt < 1)
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1,
                    "expected 'launch KERNEL grid=G block=B [smem=S] (ARG, ...)'");
    st = new_launch(p, p->tk[0], &li);
    for (int i = 1; !st && i < p->nt; i++) {
        struct tok t = p->tk[i];
        if (t.s[0] != '(')
            st = launch_key(p, li, t, seen);
        else if (i != p->nt - 1)
            st = perr(p, KEVO_ERR_PARSE, p->line, p->tk[i + 1].col, "unexpected '%s' after "
                      "the argument list", q(b, p->tk[i + 1].s, p->tk[i + 1].len));
        else
            st = parse_args(p, li, t);
    }
    if (st)
        return st;
    if (p->nt < 2 || p->tk[p->nt - 1].s[0] != '(')
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1,
                    "expected the argument list '(ARG, ...)' at the end of the launch line");
    if (!seen[0] || !seen[1])
        return perr(p, KEVO_ERR_PARSE, p->line, p->kw.col, "launch needs %s",
                    !seen[0] ? "grid=G" : "block=B");
    return launch_defaults(p, &p->t->launches[li]);
}

/* call FUNCTION(ARG, ...) */
static enum kevo_status d_call(struct parser *p)
{
    struct tok r = p->rest, name = r, args;
    size_t i = 0;
    int li;
    enum kevo_status st;

    if (p->t->lang != KEVO_LANG_C)
        return perr(p, KEVO_ERR_INVALID, p->line, p->kw.col,
                    "'call' is for C (.c) files; a CUDA file uses 'launch KERNEL grid=G "
                    "block=B (ARG, ...)'");
    while (i < r.len && (isalnum((unsigned char)r.s[i]) || r.s[i] == '_'))
        i++;
    name.len = i;
    args = trim(p->l, r.s + i, r.len - i);
    if (!args.len || args.s[0] != '(')
        return perr(p, KEVO_ERR_PARSE, p->line, args.col,
                    "expected 'call FUNCTION(ARG, ...)'");
    st = new_launch(p, name, &li);
    if (!st)
        st = parse_args(p, li, args);
    if (!st)
        st = launch_defaults(p, &p->t->launches[li]);
    return st;
}

/* ---- directives: tmap ---- */

/* "[E, ...]" at v into dst[0..rank) as recs of kind; the number of entries in *n. */
static enum kevo_status tmap_list(struct parser *p, int mi, enum rec_kind kind, struct tok v,
                                  char **dst, int *n)
{
    struct tok parts[KEVO_TMAP_MAX_RANK + 1];
    enum kevo_status st = KEVO_OK;

    if (v.len < 2 || v.s[0] != '[' || v.s[v.len - 1] != ']')
        return perr(p, KEVO_ERR_PARSE, p->line, v.col, "expected a list '[E, ...]' of 1 to %d "
                    "expressions, outermost dimension first", KEVO_TMAP_MAX_RANK);
    *n = trim(p->l, v.s + 1, v.len - 2).len
             ? split_commas(p->l, v.s + 1, v.len - 2, parts, KEVO_TMAP_MAX_RANK) : 0;
    if (*n < 1 || *n > KEVO_TMAP_MAX_RANK)
        return perr(p, KEVO_ERR_PARSE, p->line, v.col, "a tensor map has 1 to %d dimensions",
                    KEVO_TMAP_MAX_RANK);
    for (int i = 0; !st && i < *n; i++) {
        st = dup_tok(p, parts[i], &dst[i]);
        if (!st)
            st = add_expr(p, kind, mi, i, dst[i], parts[i].col);
    }
    return st;
}

/* One KEY=VALUE of a tmap line; seen[] catches repeats, *shape_n is shape's length. */
static enum kevo_status tmap_key(struct parser *p, int mi, struct tok t, int *seen, int *shape_n)
{
    static const char *const keys[] = { "box", "shape", "swizzle" };
    struct kevo_tmap *m = &p->t->tmaps[mi];
    size_t kl;
    struct tok v;
    int k = key_value(t, keys, 3, &kl, &v);
    char b[200];

    if (k < 0)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col, "expected box=[B, ...], shape=[S, ...] "
                    "or swizzle=none|32|64|128, got '%s'", q(b, t.s, t.len));
    if (seen[k]++)
        return perr(p, KEVO_ERR_PARSE, p->line, t.col, "'%.*s=' given twice", (int)kl, t.s);
    if (k < 2)
        return tmap_list(p, mi, k ? R_TMAP_SHAPE : R_TMAP_BOX, v, k ? m->shape : m->box,
                         k ? shape_n : &m->rank);
    m->swizzle = eq_n(v.s, v.len, "none") ? 0 : eq_n(v.s, v.len, "32") ? 32
               : eq_n(v.s, v.len, "64") ? 64 : eq_n(v.s, v.len, "128") ? 128 : -1;
    if (m->swizzle < 0)
        return perr(p, KEVO_ERR_PARSE, p->line, v.col, "expected swizzle=none, 32, 64 or 128 "
                    "(bytes), got '%s'", q(b, v.s, v.len));
    return KEVO_OK;
}

/* tmap NAME TENSOR box=[B, ...] [swizzle=S] [shape=[E, ...]] */
static enum kevo_status d_tmap(struct parser *p)
{
    struct kevo_task *t = p->t;
    int mi = t->n_tmaps, seen[3] = { 0, 0, 0 }, shape_n = 0;
    enum kevo_status st;

    if (t->lang != KEVO_LANG_CUDA)
        return perr(p, KEVO_ERR_INVALID, p->line, p->kw.col, "'tmap' is for CUDA (.cu) "
                    "candidates: the TMA unit is a GPU's");
    if (p->nt < 3)
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1, "expected 'tmap NAME TENSOR "
                    "box=[B, ...] [swizzle=none|32|64|128] [shape=[S, ...]]'");
    if (mi >= TASK_MAX_TMAPS)
        return perr(p, KEVO_ERR_TOOBIG, p->line, p->kw.col, "too many tensor maps (at most %d)",
                    TASK_MAX_TMAPS);
    st = check_ident(p, p->tk[0], "tensor map");
    if (!st)
        st = check_ident(p, p->tk[1], "tensor");
    if (st)
        return st;
    GROW(p, t->tmaps, mi);
    t->n_tmaps++;
    t->tmaps[mi].tensor_index = -1;
    t->tmaps[mi].line = p->line;
    st = dup_tok(p, p->tk[0], &t->tmaps[mi].name);
    if (!st)
        st = declare(p, t->tmaps[mi].name, "tensor map", p->line, p->tk[0].col, 0);
    if (!st)
        st = dup_tok(p, p->tk[1], &t->tmaps[mi].tensor);
    if (!st)
        st = add_rec(p, R_TMAP, mi, 0, p->tk[1].col);
    for (int i = 2; !st && i < p->nt; i++)
        st = tmap_key(p, mi, p->tk[i], seen, &shape_n);
    if (!st && !seen[0])
        st = perr(p, KEVO_ERR_PARSE, p->line, p->kw.col, "tmap needs box=[B, ...]");
    if (!st && seen[1] && shape_n != t->tmaps[mi].rank)
        st = perr(p, KEVO_ERR_INVALID, p->line, p->kw.col, "shape has %d entries, box %d",
                  shape_n, t->tmaps[mi].rank);
    return st;
}

/* ---- directives: task, doc, tags, torch, param, flags ---- */

static int word_ok(struct tok t, int dash)
{
    for (size_t i = 0; i < t.len; i++)
        if (!(islower((unsigned char)t.s[i]) || isdigit((unsigned char)t.s[i]) || t.s[i] == '_' ||
              (dash && t.s[i] == '-')))
            return 0;
    return t.len > 0;
}

/* task NAME */
static enum kevo_status d_task(struct parser *p)
{
    enum kevo_status st = once(p, &p->task_line);
    char b[200];

    if (st)
        return st;
    if (p->nt != 1 || !word_ok(p->tk[0], 0))
        return perr(p, KEVO_ERR_PARSE, p->line, p->nt ? p->tk[0].col : (int)p->ll + 1,
                    "expected 'task NAME' with NAME of [a-z0-9_]+, got '%s'",
                    q(b, p->rest.s, p->rest.len));
    return dup_tok(p, p->tk[0], &p->t->name);
}

static enum kevo_status d_doc(struct parser *p)
{
    if (p->n_doc++ && kevo_buf_add(&p->doc, "\n", 1) == KEVO_ERR_NOMEM)
        return nomem(p);
    if (kevo_buf_add(&p->doc, p->rest.s, p->rest.len) == KEVO_ERR_NOMEM)
        return nomem(p);
    return KEVO_OK;
}

/* Which list d_words fills. */
enum word_list { W_TAGS, W_FLAGS, W_NOTES };

/* tags WORD..., flags FLAG... and notes NAME... (playbook notes the prompts must carry) */
static enum kevo_status d_words(struct parser *p, enum word_list which)
{
    static const char *const what[] = { "tags", "flags", "notes" };
    static const char *const form[] = { "tags WORD...", "flags FLAG...", "notes NAME..." };
    struct kevo_task *t = p->t;
    int flags = which == W_FLAGS;
    char ***list = flags ? &t->flags : which == W_NOTES ? &t->notes : &t->tags;
    int *n = flags ? &t->n_flags : which == W_NOTES ? &t->n_notes : &t->n_tags;
    char b[200];

    if (!p->nt)
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1, "expected '%s'", form[which]);
    for (int i = 0; i < p->nt; i++) {
        struct tok w = p->tk[i];
        if (*n >= TASK_MAX_WORDS)
            return perr(p, KEVO_ERR_TOOBIG, p->line, w.col, "too many %s (at most %d)",
                        what[which], TASK_MAX_WORDS);
        if (!flags && !word_ok(w, 1))
            return perr(p, KEVO_ERR_PARSE, p->line, w.col, "expected a %s of [a-z0-9_-]+, got "
                        "'%s'", which == W_NOTES ? "note name" : "tag", q(b, w.s, w.len));
        GROW(p, *list, *n);
        (*n)++;
        if (dup_tok(p, w, &(*list)[*n - 1]))
            return KEVO_ERR_NOMEM;
        if (flags && !kevo_flag_allowed(t->lang, (*list)[*n - 1]))
            return perr(p, KEVO_ERR_INVALID, p->line, w.col, "flag '%s' is not allowed for %s "
                        "(allowed: %s)", q(b, w.s, w.len), t->lang == KEVO_LANG_CUDA ? "CUDA" : "C",
                        t->lang == KEVO_LANG_CUDA
                            ? "-use_fast_math -ftz= -prec-div= -prec-sqrt= -fmad= (true|false) "
                              "-maxrregcount=N (16..255) -lineinfo -restrict "
                              "-extra-device-vectorization"
                            : "-O1 -O2 -O3 -Ofast -march=native -mtune=native -ffast-math "
                              "-funroll-loops -fopenmp -fno-math-errno -fno-trapping-math "
                              "-fomit-frame-pointer");
    }
    return KEVO_OK;
}

/* torch LINE: repeated lines form one Python block (statements, then the expression). */
static enum kevo_status d_torch(struct parser *p)
{
    enum kevo_status st = need_rest(p, "torch EXPR");
    if (st)
        return st;
    if (p->n_torch++ && kevo_buf_add(&p->torch, "\n", 1) == KEVO_ERR_NOMEM)
        return nomem(p);
    if (kevo_buf_add(&p->torch, p->rest.s, p->rest.len) == KEVO_ERR_NOMEM)
        return nomem(p);
    return KEVO_OK;
}

/* atomics: outputs may vary run to run within the tolerance (float atomics). */
static enum kevo_status d_atomics(struct parser *p)
{
    enum kevo_status st = once(p, &p->atomics_line);
    if (!st && p->nt)
        st = perr(p, KEVO_ERR_PARSE, p->line, p->tk[0].col, "expected 'atomics' with no "
                  "arguments");
    if (!st)
        p->t->atomics = 1;
    return st;
}

static enum kevo_status param_value(struct parser *p, struct kevo_param *pr, struct tok v)
{
    char buf[64], b[200];
    struct kevo_expr_err e;
    int64_t x;
    enum kevo_status st;

    if (v.len >= sizeof buf)
        return perr(p, KEVO_ERR_PARSE, p->line, v.col, "expected an integer, got '%s'",
                    q(b, v.s, v.len));
    memcpy(buf, v.s, v.len);
    buf[v.len] = '\0';
    st = kevo_expr_eval(buf, NULL, NULL, &x, &e);
    if (st)
        return perr(p, st, p->line, v.col + e.col, "expected an integer value: %s", e.msg);
    for (int i = 0; i < pr->n_values; i++)
        if (pr->values[i] == x)
            return perr(p, KEVO_ERR_INVALID, p->line, v.col, "value %lld listed twice for "
                        "param '%s'", (long long)x, pr->name);
    pr->values[pr->n_values++] = x;
    return KEVO_OK;
}

/* param NAME V1 V2 ... */
static enum kevo_status d_param(struct parser *p)
{
    struct kevo_task *t = p->t;
    const struct kevo_workload *w = first_sizes(p);
    struct kevo_param *pr;
    enum kevo_status st;

    if (p->nt < 2)
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1,
                    "expected 'param NAME V1 V2 ...' (at least one value)");
    if (p->nt - 1 > TASK_MAX_VALUES)
        return perr(p, KEVO_ERR_TOOBIG, p->line, p->kw.col, "too many values (at most %d)",
                    TASK_MAX_VALUES);
    if (t->n_params + (w ? w->n : 0) >= TASK_MAX_ENV)
        return perr(p, KEVO_ERR_TOOBIG, p->line, p->kw.col, "too many params (sizes and "
                    "params together at most %d)", TASK_MAX_ENV);
    st = check_ident(p, p->tk[0], "param");
    if (st)
        return st;
    GROW(p, t->params, t->n_params);
    pr = &t->params[t->n_params++];
    pr->line = p->line;
    st = dup_tok(p, p->tk[0], &pr->name);
    if (!st)
        st = declare(p, pr->name, "param", p->line, p->tk[0].col, 0);
    if (st)
        return st;
    pr->values = kevo_calloc((size_t)p->nt - 1, sizeof *pr->values);
    if (!pr->values)
        return nomem(p);
    for (int i = 1; !st && i < p->nt; i++)
        st = param_value(p, pr, p->tk[i]);
    return st;
}

/* ---- dispatch ---- */

enum kw_id {
    K_TASK, K_DOC, K_TAGS, K_SIZE, K_HOLDOUT, K_INPUT, K_OUTPUT, K_SCALAR, K_SCRATCH,
    K_TOL, K_BYTES, K_FLOPS, K_TORCH, K_LAUNCH, K_CALL, K_PARAM, K_FLAGS, K_ATOMICS, K_NOTES,
    K_TMAP, K_COUNT
};
static const struct {
    const char *name;
    int in_task, in_cand;
} keywords[K_COUNT] = {
    [K_TASK] = { "task", 1, 0 },     [K_DOC] = { "doc", 1, 1 },
    [K_TAGS] = { "tags", 1, 0 },     [K_SIZE] = { "size", 1, 0 },
    [K_HOLDOUT] = { "holdout", 1, 0 }, [K_INPUT] = { "input", 1, 0 },
    [K_OUTPUT] = { "output", 1, 0 }, [K_SCALAR] = { "scalar", 1, 0 },
    [K_SCRATCH] = { "scratch", 1, 1 }, [K_TOL] = { "tol", 1, 0 },
    [K_BYTES] = { "bytes", 1, 0 },   [K_FLOPS] = { "flops", 1, 0 },
    [K_TORCH] = { "torch", 1, 0 },   [K_LAUNCH] = { "launch", 1, 1 },
    [K_CALL] = { "call", 1, 1 },     [K_PARAM] = { "param", 0, 1 },
    [K_FLAGS] = { "flags", 0, 1 },   [K_ATOMICS] = { "atomics", 1, 0 },
    [K_NOTES] = { "notes", 1, 0 },   [K_TMAP] = { "tmap", 0, 1 },
};

static enum kevo_status run_directive(struct parser *p, enum kw_id k)
{
    switch (k) {
    case K_TASK:    return d_task(p);
    case K_DOC:     return d_doc(p);
    case K_TAGS:    return d_words(p, W_TAGS);
    case K_SIZE:    return d_size(p, 0);
    case K_HOLDOUT: return d_size(p, 1);
    case K_INPUT:   return d_tensor(p, KEVO_ROLE_INPUT);
    case K_OUTPUT:  return d_tensor(p, KEVO_ROLE_OUTPUT);
    case K_SCALAR:  return d_scalar(p);
    case K_SCRATCH: return d_tensor(p, KEVO_ROLE_SCRATCH);
    case K_TOL:     return d_tol(p);
    case K_BYTES:   return d_bytes(p);
    case K_FLOPS:   return d_flops(p);
    case K_TORCH:   return d_torch(p);
    case K_LAUNCH:  return d_launch(p);
    case K_CALL:    return d_call(p);
    case K_PARAM:   return d_param(p);
    case K_FLAGS:   return d_words(p, W_FLAGS);
    case K_NOTES:   return d_words(p, W_NOTES);
    case K_ATOMICS: return d_atomics(p);
    case K_TMAP:    return d_tmap(p);
    default:        return perr(p, KEVO_ERR_PARSE, p->line, 1, "internal: bad keyword");
    }
}

/* Tokenise a directive line (kw: offset past `kevo`) and run it. */
static enum kevo_status directive(struct parser *p, size_t kw)
{
    size_t pos = kw;
    struct tok t;
    int k;
    char b[200];

    if (!next_tok(p->l, p->ll, &pos, &p->kw))
        return perr(p, KEVO_ERR_PARSE, p->line, (int)p->ll + 1,
                    "expected a keyword after '// kevo'");
    p->rest = trim(p->l, p->l + pos, p->ll - pos);
    for (p->nt = 0; next_tok(p->l, p->ll, &pos, &t); p->tk[p->nt++] = t) {
        if (p->nt == p->cap_tk) {
            void *n = kevo_reallocarray(p->tk, (size_t)p->cap_tk * 2 + 16, sizeof *p->tk);
            if (!n)
                return nomem(p);
            p->tk = n;
            p->cap_tk = p->cap_tk * 2 + 16;
        }
    }
    for (k = 0; k < K_COUNT; k++)
        if (eq_n(p->kw.s, p->kw.len, keywords[k].name))
            break;
    if (k == K_COUNT)
        return perr(p, KEVO_ERR_PARSE, p->line, p->kw.col, "unknown keyword '%s' (expected "
                    "one of task doc tags size holdout input output scalar scratch tol bytes "
                    "flops torch atomics notes launch call param flags tmap)", q(b, p->kw.s, p->kw.len));
    if (p->task && !keywords[k].in_cand)
        return perr(p, KEVO_ERR_INVALID, p->line, p->kw.col, "a candidate may not declare "
                    "'%s' (a candidate has launch/call, scratch, param, flags, tmap and doc)",
                    keywords[k].name);
    if (!p->task && !keywords[k].in_task)
        return perr(p, KEVO_ERR_INVALID, p->line, p->kw.col,
                    "'%s' is only allowed in a candidate file", keywords[k].name);
    return run_directive(p, (enum kw_id)k);
}

/* Pass 1: every line. */
static enum kevo_status scan_lines(struct parser *p)
{
    const char *text = p->t->source;
    size_t len = p->t->source_len, off = 0, kw;
    enum kevo_status st = KEVO_OK;

    for (p->line = 1; !st && off < len; p->line++) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - text) : len;
        p->l = text + off;
        p->ll = end - off;
        if (p->ll && p->l[p->ll - 1] == '\r')
            p->ll--;
        if (directive_at(p->l, p->ll, &kw))
            st = directive(p, kw);
        off = end + 1;
    }
    return st;
}

/* ---- whole files ---- */

static enum kevo_status file_checks(struct parser *p)
{
    const struct kevo_task *t = p->t;
    int n_out = 0;

    for (int i = 0; i < t->n_tensors; i++)
        n_out += t->tensors[i].role == KEVO_ROLE_OUTPUT;
    if (!p->task && !t->name)
        return perr(p, KEVO_ERR_PARSE, 1, 1, "no 'task' directive (expected '// kevo task NAME')");
    if (!p->task && p->first_wl < 0)
        return perr(p, KEVO_ERR_PARSE, 1, 1, "no 'size' directive (a task needs at least one "
                    "workload: '// kevo size NAME=EXPR ...')");
    if (!p->task && !n_out)
        return perr(p, KEVO_ERR_PARSE, 1, 1, "no 'output' directive (a task needs at least "
                    "one output: '// kevo output NAME DTYPE[SHAPE]')");
    if (!p->task && !t->bytes)
        return perr(p, KEVO_ERR_PARSE, 1, 1, "no 'bytes' directive (expected '// kevo bytes "
                    "EXPR': the fewest bytes any implementation must move)");
    if (!t->n_launches)
        return perr(p, KEVO_ERR_PARSE, 1, 1, "no '%s' directive (a %s needs at least one: %s)",
                    t->lang == KEVO_LANG_CUDA ? "launch" : "call", p->task ? "candidate" : "task",
                    t->lang == KEVO_LANG_CUDA ? "'// kevo launch KERNEL grid=G block=B (ARG, ...)'"
                                              : "'// kevo call FUNCTION(ARG, ...)'");
    if (p->n_torch && !(p->t->torch = kevo_buf_take(&p->torch)))
        return nomem(p);
    if (p->n_doc && !(p->t->doc = kevo_buf_take(&p->doc)))
        return nomem(p);
    return KEVO_OK;
}

/* A candidate sees the task's sizes, tensors and scalars; its own names may not clash. */
static enum kevo_status declare_task_names(struct parser *p)
{
    const struct kevo_task *task = p->task;
    const struct kevo_workload *w = first_sizes(p);
    enum kevo_status st = KEVO_OK;

    for (int i = 0; !st && w && i < w->n; i++)
        st = declare(p, w->names[i], "size", w->line, 1, 1);
    for (int i = 0; !st && i < task->n_tensors; i++)
        st = declare(p, task->tensors[i].name, "tensor", task->tensors[i].line, 1, 1);
    for (int i = 0; !st && i < task->n_scalars; i++)
        st = declare(p, task->scalars[i].name, "scalar", task->scalars[i].line, 1, 1);
    return st;
}

static enum kevo_status set_lang(struct parser *p)
{
    const char *slash = strrchr(p->path, '/');
    const char *dot = strrchr(slash ? slash : p->path, '.');

    if (dot && !strcmp(dot, ".cu"))
        p->t->lang = KEVO_LANG_CUDA;
    else if (dot && !strcmp(dot, ".c"))
        p->t->lang = KEVO_LANG_C;
    else
        return perr(p, KEVO_ERR_INVALID, 1, 1, "unknown file extension (expected .cu for CUDA "
                    "or .c for C)");
    if (p->task && p->task->lang != p->t->lang)
        return perr(p, KEVO_ERR_INVALID, 1, 1, "the candidate is %s but the task %s is %s",
                    p->t->lang == KEVO_LANG_CUDA ? "CUDA (.cu)" : "C (.c)", p->task->path,
                    p->task->lang == KEVO_LANG_CUDA ? "CUDA (.cu)" : "C (.c)");
    return KEVO_OK;
}

/* The text: at most 16 MiB, no NUL byte. Copied into t->source. */
static enum kevo_status take_source(struct parser *p, const char *text, size_t len)
{
    const char *nul = len ? memchr(text, '\0', len) : NULL;

    if (len > TASK_MAX_FILE)
        return perr(p, KEVO_ERR_TOOBIG, 1, 1, "file is larger than 16 MiB");
    if (nul) {
        int line = 1;
        const char *ls = text;
        for (const char *c = text; c < nul; c++)
            if (*c == '\n') {
                line++;
                ls = c + 1;
            }
        return perr(p, KEVO_ERR_PARSE, line, (int)(nul - ls) + 1, "NUL byte in the file");
    }
    p->t->source = kevo_malloc(len + 1);
    if (!p->t->source)
        return nomem(p);
    if (len)
        memcpy(p->t->source, text, len);
    p->t->source[len] = '\0';
    p->t->source_len = len;
    return KEVO_OK;
}

static enum kevo_status parse_file(const struct kevo_task *task, const char *path,
                                   const char *text, size_t len, struct kevo_task **out,
                                   char **out_msg)
{
    struct parser p;
    enum kevo_status st;

    memset(&p, 0, sizeof p);
    p.path = path ? path : "<task>";
    p.task = task;
    p.first_wl = -1;
    kevo_buf_init(&p.msg, TASK_MSG_MAX);
    kevo_buf_init(&p.doc, TASK_MAX_FILE);
    kevo_buf_init(&p.torch, TASK_MAX_FILE);
    p.t = kevo_calloc(1, sizeof *p.t);
    st = p.t ? KEVO_OK : nomem(&p);
    if (!st) {
        p.t->is_candidate = task != NULL;
        p.t->path = kevo_strdup(p.path);
        st = p.t->path ? set_lang(&p) : nomem(&p);
    }
    if (!st && !text && len)
        st = perr(&p, KEVO_ERR_INVALID, 1, 1, "no text");
    if (!st)
        st = take_source(&p, text ? text : "", len);
    if (!st && task)
        st = declare_task_names(&p);
    if (!st)
        st = scan_lines(&p);
    if (!st)
        st = file_checks(&p);
    if (!st)
        st = kevo_task_resolve(&p);
    if (!st)
        st = task ? kevo_task_check_candidate(&p) : kevo_task_check_workloads(&p);
    if (!st) {
        *out = p.t;
        p.t = NULL;
    } else if (out_msg) {
        *out_msg = take_msg(&p.msg, st);
    }
    kevo_task_free(p.t);
    kevo_buf_free(&p.msg);
    kevo_buf_free(&p.doc);
    kevo_buf_free(&p.torch);
    kevo_free(p.tk);
    kevo_free(p.names);
    kevo_free(p.recs);
    return st;
}

enum kevo_status kevo_task_parse(const char *path, const char *text, size_t len,
                                 struct kevo_task **out, char **out_msg)
{
    *out = NULL;
    if (out_msg)
        *out_msg = NULL;
    return parse_file(NULL, path, text, len, out, out_msg);
}

enum kevo_status kevo_candidate_parse(const struct kevo_task *task, const char *path,
                                      const char *text, size_t len, struct kevo_task **out,
                                      char **out_msg)
{
    *out = NULL;
    if (out_msg)
        *out_msg = NULL;
    if (!task || task->is_candidate) {
        if (out_msg)
            *out_msg = kevo_strdup("kevo_candidate_parse: no task to parse the candidate against");
        return KEVO_ERR_INVALID;
    }
    return parse_file(task, path, text, len, out, out_msg);
}

/* ---- files ---- */

enum kevo_status kevo_task_load(const char *path, struct kevo_task **out, char **out_msg)
{
    char *text = NULL;
    size_t len = 0;
    enum kevo_status st;

    *out = NULL;
    if (out_msg)
        *out_msg = NULL;
    st = kevo_fs_read_file(path, TASK_MAX_FILE, &text, &len, out_msg);
    if (!st)
        st = kevo_task_parse(path, text, len, out, out_msg);
    kevo_free(text);
    return st;
}

enum kevo_status kevo_candidate_load(const struct kevo_task *task, const char *path,
                                     struct kevo_task **out, char **out_msg)
{
    char *text = NULL;
    size_t len = 0;
    enum kevo_status st;

    *out = NULL;
    if (out_msg)
        *out_msg = NULL;
    st = kevo_fs_read_file(path, TASK_MAX_FILE, &text, &len, out_msg);
    if (!st)
        st = kevo_candidate_parse(task, path, text, len, out, out_msg);
    kevo_free(text);
    return st;
}

/* ---- free, tolerances ---- */

void kevo_task_free(struct kevo_task *t)
{
    if (!t)
        return;
    kevo_free(t->path);
    kevo_free(t->name);
    kevo_free(t->doc);
    for (int i = 0; i < t->n_tags; i++)
        kevo_free(t->tags[i]);
    kevo_free(t->tags);
    for (int i = 0; i < t->n_notes; i++)
        kevo_free(t->notes[i]);
    kevo_free(t->notes);
    for (int i = 0; i < t->n_workloads; i++) {
        for (int j = 0; j < t->workloads[i].n; j++) {
            kevo_free(t->workloads[i].names[j]);
            kevo_free(t->workloads[i].exprs[j]);
        }
        kevo_free(t->workloads[i].names);
        kevo_free(t->workloads[i].exprs);
    }
    kevo_free(t->workloads);
    for (int i = 0; i < t->n_tensors; i++) {
        kevo_free(t->tensors[i].name);
        for (int j = 0; j < KEVO_MAX_DIMS; j++)
            kevo_free(t->tensors[i].shape[j]);
        kevo_free(t->tensors[i].init_a);
        kevo_free(t->tensors[i].init_b);
    }
    kevo_free(t->tensors);
    for (int i = 0; i < t->n_scalars; i++)
        kevo_free(t->scalars[i].name);
    kevo_free(t->scalars);
    for (int i = 0; i < t->n_tols; i++)
        kevo_free(t->tols[i].name);
    kevo_free(t->tols);
    kevo_free(t->bytes);
    kevo_free(t->flops);
    kevo_free(t->torch);
    for (int i = 0; i < t->n_launches; i++) {
        struct kevo_launch *L = &t->launches[i];
        kevo_free(L->kernel);
        for (int j = 0; j < 3; j++) {
            kevo_free(L->grid[j]);
            kevo_free(L->block[j]);
        }
        kevo_free(L->smem);
        for (int j = 0; j < L->n_args; j++)
            kevo_free(L->args[j].text);
    }
    kevo_free(t->launches);
    for (int i = 0; i < t->n_params; i++) {
        kevo_free(t->params[i].name);
        kevo_free(t->params[i].values);
    }
    kevo_free(t->params);
    for (int i = 0; i < t->n_tmaps; i++) {
        kevo_free(t->tmaps[i].name);
        kevo_free(t->tmaps[i].tensor);
        for (int j = 0; j < KEVO_TMAP_MAX_RANK; j++) {
            kevo_free(t->tmaps[i].box[j]);
            kevo_free(t->tmaps[i].shape[j]);
        }
    }
    kevo_free(t->tmaps);
    for (int i = 0; i < t->n_flags; i++)
        kevo_free(t->flags[i]);
    kevo_free(t->flags);
    kevo_free(t->source);
    kevo_free(t);
}

/*
 * task_int - what the two files of the task module share: task.c (pass 1: reading each
 * directive into struct kevo_task; files; free) and task_check.c (pass 2: resolving names;
 * pass 3: evaluating every expression under every workload; environments, tolerances,
 * dtypes and flags). Private to them; the contract is task.h.
 *
 * struct parser lives for one kevo_task_parse/kevo_candidate_parse call. Messages are
 * built into parser.msg by perr() as "PATH:LINE:COL: error: MESSAGE"; every function
 * returns the status, KEVO_ERR_NOMEM included, and stops at the first error.
 */
#ifndef KEVO_TASK_INT_H
#define KEVO_TASK_INT_H

#include "base/buf.h"
#include "kevo.h"
#include "base/mem.h"
#include "core/task.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Caps, so that no input (a fuzzed file, an LLM-written candidate) makes the parser
 * allocate or compute without bound. */
#define TASK_MAX_FILE      KEVO_TASK_MAX_FILE
#define TASK_MAX_WORKLOADS 256
#define TASK_MAX_TENSORS   1024
#define TASK_MAX_SCALARS   1024
#define TASK_MAX_LAUNCHES  256
#define TASK_MAX_VALUES    1024        /* values of one param */
#define TASK_MAX_WORDS     256         /* tags, flags */
#define TASK_MAX_TMAPS     64
#define TASK_MAX_ENV       64          /* sizes + params: struct kevo_env holds 64 */
#define TASK_MAX_COMBOS    4096        /* param combinations checked exhaustively */
#define TASK_EVAL_BUDGET   (1L << 20)  /* expression evaluations spent checking params */
#define TASK_MSG_MAX       4096

#define DTYPE_LIST "f64 f32 f16 bf16 fp8e4m3 fp8e5m2 i64 i32 i16 i8 u8 bool"

/* Integer range of an integer or bool dtype. */
static inline void int_range(enum kevo_dtype t, int64_t *lo, int64_t *hi)
{
    switch (t) {
    case KEVO_I32:  *lo = INT32_MIN; *hi = INT32_MAX; break;
    case KEVO_I16:  *lo = INT16_MIN; *hi = INT16_MAX; break;
    case KEVO_I8:   *lo = INT8_MIN;  *hi = INT8_MAX;  break;
    case KEVO_U8:   *lo = 0;         *hi = UINT8_MAX; break;
    case KEVO_BOOL: *lo = 0;         *hi = 1;         break;
    default:        *lo = INT64_MIN; *hi = INT64_MAX; break;
    }
}

/* Largest finite value of a float dtype. */
static inline double float_max(enum kevo_dtype t)
{
    switch (t) {
    case KEVO_F32:     return 3.4028234663852886e38;
    case KEVO_F16:     return 65504.0;
    case KEVO_BF16:    return 3.3895313892515355e38;
    case KEVO_FP8E4M3: return 448.0;
    case KEVO_FP8E5M2: return 57344.0;
    default:           return 1.7976931348623157e308;
    }
}

/* "PATH:LINE:COL: error: MESSAGE" into b (replacing what it held). path NULL: no prefix.
 * Returns st, or KEVO_ERR_NOMEM when the message itself could not be built. */
static inline enum kevo_status vmsg(struct kevo_buf *b, enum kevo_status st, const char *path,
                             int line, int col, const char *fmt, va_list ap)
{
    enum kevo_status bs = KEVO_OK;
    kevo_buf_reset(b);
    if (path)
        bs = kevo_buf_addf(b, "%s:%d:%d: error: ", path, line, col);
    if (bs != KEVO_ERR_NOMEM)
        bs = kevo_buf_vaddf(b, fmt, ap);
    return bs == KEVO_ERR_NOMEM ? KEVO_ERR_NOMEM : st;
}

static inline enum kevo_status bmsg(struct kevo_buf *b, enum kevo_status st, const char *path,
                             int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static inline enum kevo_status bmsg(struct kevo_buf *b, enum kevo_status st, const char *path,
                             int line, int col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    st = vmsg(b, st, path, line, col, fmt, ap);
    va_end(ap);
    return st;
}

/* A token as it may appear in a message: at most 40 bytes, control bytes escaped. */
static inline const char *q(char out[200], const char *s, size_t len)
{
    size_t o = 0, lim = len > 40 ? 40 : len;
    for (size_t i = 0; i < lim; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(out + o, 200 - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    if (lim < len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}

static inline int is_blank(char c) { return c == ' ' || c == '\t'; }

static inline int is_ident_n(const char *s, size_t n)
{
    if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
            return 0;
    return 1;
}

static inline int eq_n(const char *a, size_t n, const char *b)
{
    return strlen(b) == n && !memcmp(a, b, n);
}

/* A piece of a line: text, length, 1-based column. */
struct tok {
    const char *s;
    size_t len;
    int col;
};

/* Next blank-separated token of line[0..len) from *pos, splitting only at bracket depth 0
 * so `N=cdiv(M, 2)` and `f32[M, N]` stay whole. 0 at the end of the line. */
static inline int next_tok(const char *line, size_t len, size_t *pos, struct tok *out)
{
    size_t i = *pos, start;
    int depth = 0;

    while (i < len && is_blank(line[i]))
        i++;
    if (i >= len) {
        *pos = i;
        return 0;
    }
    for (start = i; i < len; i++) {
        char c = line[i];
        if (c == '(' || c == '[')
            depth++;
        else if ((c == ')' || c == ']') && depth > 0)
            depth--;
        else if (depth == 0 && is_blank(c))
            break;
    }
    out->s = line + start;
    out->len = i - start;
    out->col = (int)start + 1;
    *pos = i;
    return 1;
}


/*
 * Where a directive's keyword starts: *kw is the offset just past `kevo`. 0 for a source
 * line.
 */
static inline int directive_at(const char *l, size_t n, size_t *kw)
{
    size_t i = 0, b;
    while (i < n && is_blank(l[i]))
        i++;
    if (i + 2 > n || l[i] != '/' || l[i + 1] != '/')
        return 0;
    for (i += 2, b = i; i < n && is_blank(l[i]); i++)
        ;
    if (i == b || n - i < 4 || memcmp(l + i, "kevo", 4))
        return 0;
    i += 4;
    if (i < n && !is_blank(l[i]))
        return 0;
    *kw = i;
    return 1;
}

/* Deferred checks of pass 2 and evaluations of pass 3, in file order. */
enum rec_kind {
    R_SHAPE, R_NUMEL, R_RAND_LO, R_RAND_HI, R_BYTES, R_FLOPS, R_GRID, R_BLOCK, R_SMEM,
    R_ARG, R_TOL, R_WL_NAME, R_WL_ALL, R_TMAP, R_TMAP_BOX, R_TMAP_SHAPE,
};
struct rec {
    enum rec_kind kind;
    int idx, sub;       /* owner (tensor, launch, tol, workload) and part (dim, arg, ...) */
    int line, col;
};

struct name_ent {
    const char *name;   /* borrowed from the task or candidate */
    const char *kind;   /* "size", "tensor", "scalar", "param" */
    int line;
    int from_task;      /* candidate parsing: declared by the task */
};

struct parser {
    const char *path;
    struct kevo_task *t;              /* being built */
    const struct kevo_task *task;     /* candidate parsing: the task; NULL for a task */
    struct kevo_buf msg;
    struct kevo_buf doc;
    int n_doc;
    struct kevo_buf torch;
    int n_torch;
    /* the current directive */
    const char *l;
    size_t ll;
    int line;
    struct tok kw;
    struct tok *tk;
    int nt, cap_tk;
    struct tok rest;                  /* everything after the keyword, trimmed */
    /* declarations */
    struct name_ent *names;
    int n_names;
    struct rec *recs;
    int n_recs;
    int first_wl;                     /* first non-holdout size line, -1 */
    int task_line, bytes_line, flops_line, atomics_line;
    int unknown_name;                 /* set by known_name() when it refuses */
};

static inline enum kevo_status perr(struct parser *p, enum kevo_status st, int line, int col,
                             const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static inline enum kevo_status perr(struct parser *p, enum kevo_status st, int line, int col,
                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    st = vmsg(&p->msg, st, p->path, line, col, fmt, ap);
    va_end(ap);
    return st;
}

static inline enum kevo_status nomem(struct parser *p)
{
    kevo_buf_reset(&p->msg);
    return KEVO_ERR_NOMEM;
}

/* The first size line: the task's own, or (candidates) the task's. NULL if none yet. */
static inline const struct kevo_workload *first_sizes(const struct parser *p)
{
    const struct kevo_task *src = p->task ? p->task : p->t;
    for (int i = 0; i < src->n_workloads; i++)
        if (!src->workloads[i].holdout)
            return &src->workloads[i];
    return NULL;
}

static inline char *take_msg(struct kevo_buf *b, enum kevo_status st)
{
    if (!b->len && st != KEVO_ERR_NOMEM)
        return kevo_strdup(kevo_status_name(st));
    return b->len ? kevo_buf_take(b) : NULL;
}

/* ---- the passes (task_check.c) ---- */

/* Pass 2: every expression uses only size (and param) names; launch arguments resolved. */
KEVO_NODISCARD enum kevo_status kevo_task_resolve(struct parser *p);
/* Pass 3 for a task: every rec under every workload, holdouts included. */
KEVO_NODISCARD enum kevo_status kevo_task_check_workloads(struct parser *p);
/* Pass 3 for a candidate: visible workloads x param combinations (see task_check.c). */
KEVO_NODISCARD enum kevo_status kevo_task_check_candidate(struct parser *p);

#endif

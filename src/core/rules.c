/*
 * rules - the static rules of launch lines (rules.h): parameter types as kevo reads them
 * from their text, the launch rules under one environment, and `kevo check`'s walk over
 * every environment. A type kevo does not recognise (a typedef of the file's own, a
 * struct) is never judged: these rules may miss what the backends refuse, never refuse
 * what they accept.
 */
#include "core/rules.h"
#include "base/buf.h"
#include "base/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- parameter types ---- */

enum pkind { P_UNKNOWN, P_POINTER, P_INT, P_FLOAT };

struct ptype {
    enum pkind kind;
    int size;            /* bytes (P_INT, P_FLOAT) */
    int is_signed;       /* P_INT */
    int is_bool;         /* P_INT: _Bool, only 0 and 1 */
    int sign_unknown;    /* P_INT: plain char, whose signedness the compiler picks */
};

/* Standard typedef names and CUDA's 16-bit float types, by their one word. */
static const struct {
    const char *name;
    enum pkind kind;
    int size, is_signed;
} named_types[] = {
    { "int8_t", P_INT, 1, 1 },     { "int16_t", P_INT, 2, 1 },     { "int32_t", P_INT, 4, 1 },
    { "int64_t", P_INT, 8, 1 },    { "uint8_t", P_INT, 1, 0 },     { "uint16_t", P_INT, 2, 0 },
    { "uint32_t", P_INT, 4, 0 },   { "uint64_t", P_INT, 8, 0 },    { "size_t", P_INT, 8, 0 },
    { "ssize_t", P_INT, 8, 1 },    { "ptrdiff_t", P_INT, 8, 1 },   { "intptr_t", P_INT, 8, 1 },
    { "uintptr_t", P_INT, 8, 0 },  { "intmax_t", P_INT, 8, 1 },    { "uintmax_t", P_INT, 8, 0 },
    { "half", P_FLOAT, 2, 1 },     { "__half", P_FLOAT, 2, 1 },    { "__nv_bfloat16", P_FLOAT, 2, 1 },
    { "nv_bfloat16", P_FLOAT, 2, 1 },
};

/* Words that qualify a type without changing what it holds. */
static int is_qualifier(const char *w)
{
    static const char *const q[] = { "const", "volatile", "restrict", "__restrict",
                                     "__restrict__", "register", "__grid_constant__" };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        if (!strcmp(w, q[i]))
            return 1;
    }
    return 0;
}

/* The counts of C's type-specifier words in one type, and the one other word if any. */
struct words {
    int n_long, n_short, n_char, n_int, n_signed, n_unsigned, n_bool, n_float, n_double;
    int n_other;
    char other[64];
};

static void count_word(struct words *w, const char *s)
{
    if (!strcmp(s, "long"))
        w->n_long++;
    else if (!strcmp(s, "short"))
        w->n_short++;
    else if (!strcmp(s, "char"))
        w->n_char++;
    else if (!strcmp(s, "int"))
        w->n_int++;
    else if (!strcmp(s, "signed"))
        w->n_signed++;
    else if (!strcmp(s, "unsigned"))
        w->n_unsigned++;
    else if (!strcmp(s, "_Bool") || !strcmp(s, "bool"))
        w->n_bool++;
    else if (!strcmp(s, "float"))
        w->n_float++;
    else if (!strcmp(s, "double"))
        w->n_double++;
    else if (w->n_other++ == 0)
        snprintf(w->other, sizeof w->other, "%s", s);
}

/* A type of builtin words only (no other word): what it holds, or P_UNKNOWN. */
static void builtin_type(const struct words *w, struct ptype *t)
{
    int sign_words = w->n_signed + w->n_unsigned;
    int int_words = w->n_long + w->n_short + w->n_char + w->n_int + sign_words;

    if (sign_words > 1 || w->n_long > 2 || (w->n_short && (w->n_long || w->n_char)) ||
        (w->n_char && (w->n_long || w->n_int)) || w->n_int > 1 || w->n_char > 1)
        return;
    if (w->n_bool + w->n_float + w->n_double) {
        if (w->n_bool + w->n_float + w->n_double > 1 || int_words > (w->n_double ? w->n_long : 0))
            return;
        if (w->n_bool)
            *t = (struct ptype){ .kind = P_INT, .size = 1, .is_bool = 1 };
        else
            *t = (struct ptype){ .kind = P_FLOAT, .size = w->n_float ? 4 : w->n_long ? 16 : 8 };
        return;
    }
    if (!int_words)
        return;
    t->kind = P_INT;
    t->size = w->n_char ? 1 : w->n_short ? 2 : w->n_long ? 8 : 4;   /* LP64, as gcc and nvcc */
    t->is_signed = !w->n_unsigned;
    t->sign_unknown = w->n_char && !sign_words;
}

/* What kevo knows of a parameter's declared type (cproto's text: names removed). */
static void classify(const char *type, struct ptype *t)
{
    struct words w;
    char buf[256], *save = NULL;

    memset(t, 0, sizeof *t);
    memset(&w, 0, sizeof w);
    if (strchr(type, '*')) {
        t->kind = P_POINTER;
        return;
    }
    if (strchr(type, '&') || strchr(type, '[') || strchr(type, '(') || strchr(type, '<') ||
        strlen(type) >= sizeof buf)
        return;   /* a reference, a template: not judged */
    snprintf(buf, sizeof buf, "%s", type);
    for (char *s = strtok_r(buf, " \t\n", &save); s; s = strtok_r(NULL, " \t\n", &save)) {
        if (!is_qualifier(s))
            count_word(&w, s);
    }
    if (!w.n_other) {
        builtin_type(&w, t);
        return;
    }
    if (w.n_other > 1 || w.n_long + w.n_short + w.n_char + w.n_int + w.n_signed +
                         w.n_unsigned + w.n_bool + w.n_float + w.n_double)
        return;
    for (size_t i = 0; i < sizeof named_types / sizeof *named_types; i++) {
        if (!strcmp(w.other, named_types[i].name)) {
            t->kind = named_types[i].kind;
            t->size = named_types[i].size;
            t->is_signed = named_types[i].is_signed;
            return;
        }
    }
}

/* The integers a parameter of type t accepts in lang; 0 when kevo does not judge it. */
static int int_range(enum kevo_lang lang, const struct ptype *t, int64_t *lo, int64_t *hi)
{
    int bits = t->size * 8;

    if (t->kind != P_INT && (t->kind != P_FLOAT || lang != KEVO_LANG_CUDA))
        return 0;   /* a C float parameter converts any integer */
    if (t->size != 1 && t->size != 2 && t->size != 4 && t->size != 8)
        return 0;
    if (lang == KEVO_LANG_CUDA || (t->is_signed && !t->sign_unknown && !t->is_bool)) {
        /* CUDA: by size as a signed value, signedness being unknown to the backend */
        *hi = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
        *lo = -*hi - 1;
    } else if (t->is_bool) {
        *lo = 0;
        *hi = 1;
    } else {
        *lo = t->sign_unknown ? -(INT64_C(1) << (bits - 1)) : 0;
        *hi = bits == 64 ? INT64_MAX : (INT64_C(1) << bits) - 1;
    }
    return 1;
}

/* ---- one launch under one environment ---- */

/* Expression text under env (NULL: dflt); 1 with why when it cannot be evaluated. */
static int eval_or_say(const struct kevo_env *env, const char *text, int64_t dflt, int64_t *v,
                       const char *what, char *why, size_t n)
{
    char *m = NULL;

    *v = dflt;
    if (!text || kevo_env_eval(env, text, v, &m) == KEVO_OK)
        return 0;
    snprintf(why, n, "%s: %s", what, m ? m : "cannot be evaluated");
    kevo_free(m);
    return 1;
}

/* CUDA's grid, block and smem limits (the same on every GPU since sm_30). */
static int cuda_dims(const struct kevo_launch *l, const struct kevo_env *env, char *why,
                     size_t n)
{
    static const int64_t max_block[3] = { 1024, 1024, 64 };
    static const int64_t max_grid[3] = { 2147483647, 65535, 65535 };
    static const char *const gn[3] = { "grid.x", "grid.y", "grid.z" };
    static const char *const bn[3] = { "block.x", "block.y", "block.z" };
    int64_t g, b, threads = 1, smem;

    for (int d = 0; d < 3; d++) {
        if (eval_or_say(env, l->grid[d], 1, &g, gn[d], why, n) ||
            eval_or_say(env, l->block[d], 1, &b, bn[d], why, n))
            return 1;
        if (g < 1 || g > max_grid[d]) {
            snprintf(why, n, "%s = %lld is outside 1..%lld", gn[d], (long long)g,
                     (long long)max_grid[d]);
            return 1;
        }
        if (b < 1 || b > max_block[d]) {
            snprintf(why, n, "%s = %lld is outside 1..%lld", bn[d], (long long)b,
                     (long long)max_block[d]);
            return 1;
        }
        threads *= b;   /* at most 1024^2 * 64: no overflow */
    }
    if (threads > 1024) {
        snprintf(why, n, "%lld threads per block; a GPU runs at most 1024", (long long)threads);
        return 1;
    }
    if (eval_or_say(env, l->smem, 0, &smem, "smem", why, n))
        return 1;
    if (smem < 0 || smem > KEVO_RULES_SMEM_MAX) {
        snprintf(why, n, "smem = %lld bytes; a block can have at most %d bytes of dynamic "
                 "shared memory on any GPU", (long long)smem, KEVO_RULES_SMEM_MAX);
        return 1;
    }
    return 0;
}

/* Argument k of l against parameter k (type text ty). */
static int check_arg(const struct kevo_task *task, const struct kevo_task *src,
                     const struct kevo_launch *l, int k, const char *ty,
                     const struct kevo_env *env, char *why, size_t n)
{
    const struct kevo_arg *a = &l->args[k];
    struct ptype t;
    int64_t v, lo, hi;
    char val[32];

    classify(ty, &t);
    if (a->kind == KEVO_ARG_TMAP) {
        if (t.kind == P_UNKNOWN)
            return 0;
        snprintf(why, n, "argument %d (tensor map %s) goes to parameter %d of '%s', '%s'; it "
                 "is a 128-byte struct (const __grid_constant__ CUtensorMap or an aligned "
                 "struct of 16 unsigned long long)", k + 1, a->text, k + 1, l->kernel, ty);
        return 1;
    }
    if (a->kind == KEVO_ARG_TENSOR) {
        if (t.kind != P_INT && t.kind != P_FLOAT)
            return 0;
        snprintf(why, n, "argument %d (tensor %s) goes to parameter %d of '%s', '%s', which is "
                 "not a pointer", k + 1, a->text, k + 1, l->kernel, ty);
        return 1;
    }
    if (t.kind == P_POINTER) {
        snprintf(why, n, "argument %d ('%s', not a tensor) goes to parameter %d of '%s', '%s', "
                 "which is a pointer", k + 1, a->text, k + 1, l->kernel, ty);
        return 1;
    }
    if (a->kind == KEVO_ARG_SCALAR) {
        const struct kevo_scalar_decl *sc = &task->scalars[a->index];
        if (kevo_dtype_is_float(sc->dtype))
            return 0;   /* a float constant is converted, not range-checked here */
        v = sc->ivalue;
    } else if (eval_or_say(env, a->text, 0, &v, "argument", why, n)) {
        return 1;
    }
    if (!int_range(src->lang, &t, &lo, &hi) || (v >= lo && v <= hi))
        return 0;
    snprintf(val, sizeof val, "%lld", (long long)v);
    snprintf(why, n, "argument %d (%.60s%s%s) does not fit parameter %d of '%s', '%s' "
             "(%lld..%lld%s)", k + 1, a->text, strcmp(a->text, val) ? " = " : "",
             strcmp(a->text, val) ? val : "", k + 1, l->kernel, ty, (long long)lo,
             (long long)hi, src->lang == KEVO_LANG_CUDA ? ", by its size as a signed value" : "");
    return 1;
}

/* ---- tensor maps ---- */

static int tmap_say(char *why, size_t n, const struct kevo_tmap *m, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int tmap_say(char *why, size_t n, const struct kevo_tmap *m, const char *fmt, ...)
{
    va_list ap;
    int o = snprintf(why, n, "tensor map '%s' (line %d): ", m->name, m->line);
    va_start(ap, fmt);
    if (o >= 0 && (size_t)o < n)
        vsnprintf(why + o, n - (size_t)o, fmt, ap);
    va_end(ap);
    return 1;
}

/* out->dims (innermost first) from the view or the tensor's own shape, with its numel. */
static int tmap_dims(const struct kevo_tmap *m, const struct kevo_tensor_decl *d,
                     const struct kevo_env *env, struct kevo_tmap_spec *out, char *why, size_t n)
{
    int64_t numel = 0, prod = 1, v;
    char *msg = NULL;

    if (kevo_tensor_numel(d, env, &numel, &msg)) {
        tmap_say(why, n, m, "%s", msg ? msg : "bad shape");
        kevo_free(msg);
        return 1;
    }
    for (int i = 0; i < m->rank; i++) {
        const char *e = m->shape[0] ? m->shape[i] : d->shape[i];
        if (kevo_env_eval(env, e, &v, &msg) || v < 1 || v >= (int64_t)1 << 32 ||
            __builtin_mul_overflow(prod, v, &prod)) {
            tmap_say(why, n, m, "dimension %d: %s", i + 1, msg ? msg : "not in 1..2^32-1");
            kevo_free(msg);
            return 1;
        }
        out->dims[m->rank - 1 - i] = (uint64_t)v;
    }
    if (prod != numel)
        return tmap_say(why, n, m, "shape has %lld elements, '%s' %lld", (long long)prod,
                        d->name, (long long)numel);
    return 0;
}

int kevo_rules_tmap(const struct kevo_task *task, const struct kevo_task *src, int mi,
                    const struct kevo_env *env, struct kevo_tmap_spec *out, char *why, size_t n)
{
    const struct kevo_tmap *m = &src->tmaps[mi];
    int ti = m->tensor_index, base = src != task ? task->n_tensors : 0;
    const struct kevo_tensor_decl *d = ti < base ? &task->tensors[ti] : &src->tensors[ti - base];
    size_t es = kevo_dtype_size(d->dtype);
    uint64_t pitch;
    int64_t v;
    char *msg = NULL;

    memset(out, 0, sizeof *out);
    if (tmap_dims(m, d, env, out, why, n))
        return 1;
    for (int i = 0; i < m->rank; i++) {
        if (kevo_env_eval(env, m->box[i], &v, &msg) || v < 1 || v > 256) {
            tmap_say(why, n, m, "box entry %d: %s", i + 1, msg ? msg : "not in 1..256");
            kevo_free(msg);
            return 1;
        }
        out->box[m->rank - 1 - i] = (uint32_t)v;
    }
    if (out->box[0] * es % 16)
        return tmap_say(why, n, m, "the box's inner row is %zu bytes; the TMA unit moves "
                        "multiples of 16", out->box[0] * es);
    if (m->swizzle && out->box[0] * es > (size_t)m->swizzle)
        return tmap_say(why, n, m, "the box's inner row is %zu bytes, more than its %d-byte "
                        "swizzle", out->box[0] * es, m->swizzle);
    out->swizzle = m->swizzle;
    out->dtype = d->dtype;
    pitch = es;
    for (int i = 1; i < m->rank; i++) {
        pitch *= out->dims[i - 1];
        out->strides[i - 1] = pitch;
        if (pitch % 16 || pitch >= (uint64_t)1 << 40)
            return (out->rank = 0);   /* not describable: a zero map, not an error */
    }
    out->rank = m->rank;
    return 0;
}

int kevo_rules_launch(const struct kevo_task *task, const struct kevo_task *src, int i,
                      const struct kevo_cproto *proto, const struct kevo_env *env, char *why,
                      size_t n)
{
    const struct kevo_launch *l = &src->launches[i];

    if (src->lang == KEVO_LANG_CUDA && cuda_dims(l, env, why, n))
        return 1;
    for (int k = 0, maps = 0; k < l->n_args; k++) {
        struct kevo_tmap_spec sp;
        if (l->args[k].kind != KEVO_ARG_TMAP)
            continue;
        if (++maps > KEVO_RULES_TMAPS_PER_LAUNCH) {
            snprintf(why, n, "more than %d tensor maps in one launch (argument %d)",
                     KEVO_RULES_TMAPS_PER_LAUNCH, k + 1);
            return 1;
        }
        if (kevo_rules_tmap(task, src, l->args[k].index, env, &sp, why, n))
            return 1;
    }
    if (!proto || proto->n_params < 0)
        return 0;
    if (proto->n_params != l->n_args) {
        snprintf(why, n, "the launch passes %d argument%s, '%s' takes %d (line %d)", l->n_args,
                 l->n_args == 1 ? "" : "s", l->kernel, proto->n_params, proto->line);
        return 1;
    }
    for (int k = 0; k < l->n_args; k++) {
        if (check_arg(task, src, l, k, proto->types[k], env, why, n))
            return 1;
    }
    return 0;
}

/* ---- prototypes ---- */

enum kevo_status kevo_rules_protos(const struct kevo_task *src, struct kevo_cproto **out)
{
    struct kevo_cproto *p = kevo_calloc((size_t)src->n_launches + 1, sizeof *p);
    struct kevo_buf why;
    enum kevo_status st = p ? KEVO_OK : KEVO_ERR_NOMEM;

    *out = NULL;
    kevo_buf_init(&why, 1024);
    for (int i = 0; !st && i < src->n_launches; i++) {
        st = kevo_cproto_find(src->source, src->source_len, src->launches[i].kernel, &p[i],
                              &why);
        if (st && st != KEVO_ERR_NOMEM) {
            kevo_cproto_clear(&p[i]);
            p[i].n_params = -1;   /* not found, or variadic: left to the backend */
            st = KEVO_OK;
        }
    }
    kevo_buf_free(&why);
    if (st) {
        kevo_rules_protos_free(p, src->n_launches);
        return st;
    }
    *out = p;
    return KEVO_OK;
}

void kevo_rules_protos_free(struct kevo_cproto *protos, int n)
{
    for (int i = 0; protos && i < n; i++)
        kevo_cproto_clear(&protos[i]);
    kevo_free(protos);
}

/* ---- kevo check ---- */

struct walk {
    const struct kevo_task *task, *src;
    const struct kevo_cproto *protos;
    struct kevo_buf msg;
};

/* Tensor k of src (for a candidate: its own scratch) within KEVO_TENSOR_MAX_BYTES. */
static enum kevo_status check_tensor(struct walk *w, int k, const struct kevo_env *env,
                                     const char *sfx)
{
    const struct kevo_tensor_decl *d = &w->src->tensors[k];
    int64_t numel = 0;
    char *m = NULL;
    enum kevo_status st = kevo_tensor_numel(d, env, &numel, &m);
    size_t esz = kevo_dtype_size(d->dtype);

    if (st == KEVO_ERR_NOMEM)
        return st;
    if (st) {
        kevo_buf_say(&w->msg, "%s:%d: error: %s%s", w->src->path, d->line,
                     m ? m : kevo_status_name(st), sfx);
        st = KEVO_ERR_INVALID;
    } else if ((uint64_t)numel > KEVO_TENSOR_MAX_BYTES / esz) {
        kevo_buf_say(&w->msg, "%s:%d: error: '%s' has %lld elements of %zu bytes, more than "
                     "the 1 TiB kevo allocates for one tensor%s", w->src->path, d->line, d->name,
                     (long long)numel, esz, sfx);
        st = KEVO_ERR_INVALID;
    }
    kevo_free(m);
    return st;
}

static enum kevo_status visit_env(void *user, const struct kevo_env *env, const char *sfx)
{
    struct walk *w = user;
    char why[512];
    enum kevo_status st = KEVO_OK;

    for (int k = 0; !st && k < w->src->n_tensors; k++)
        st = check_tensor(w, k, env, sfx);
    for (int i = 0; !st && i < w->src->n_launches; i++) {
        const struct kevo_launch *l = &w->src->launches[i];
        if (!kevo_rules_launch(w->task, w->src, i, &w->protos[i], env, why, sizeof why))
            continue;
        kevo_buf_say(&w->msg, "%s:%d: error: %s of '%s': %s%s", w->src->path, l->line,
                     w->src->lang == KEVO_LANG_CUDA ? "launch" : "call", l->kernel, why, sfx);
        st = KEVO_ERR_INVALID;
    }
    return st;
}

enum kevo_status kevo_rules_check(const struct kevo_task *task, const struct kevo_task *cand,
                                  char **out_msg)
{
    struct walk w = { .task = task, .src = cand ? cand : task };
    struct kevo_cproto *protos = NULL;
    char *m = NULL;
    enum kevo_status st;

    *out_msg = NULL;
    kevo_buf_init(&w.msg, 4096);
    st = kevo_rules_protos(w.src, &protos);
    w.protos = protos;
    if (!st)
        st = kevo_task_each_env(task, cand, w.src->n_launches + w.src->n_tensors + 1, visit_env,
                                &w, &m);
    if (st && st != KEVO_ERR_NOMEM)
        *out_msg = m ? m : kevo_buf_take(&w.msg);
    else
        kevo_free(m);
    kevo_buf_free(&w.msg);
    kevo_rules_protos_free(protos, w.src->n_launches);
    return st;
}

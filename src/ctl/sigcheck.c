/*
 * sigcheck - `kevo check`'s static check of each launch line against the kernel's (or C
 * function's) own parameter list in the source: the argument count, tensors passed to
 * pointers and everything else to non-pointers, and a tensor's dtype against a pointee
 * type kevo recognises. Found without a GPU (the driver's parameter info needs one), so a
 * task whose launch line disagrees with its kernel is refused with its line before any
 * device time is spent. Kernels kevo cannot find (templates, macros) are left to the
 * worker's checks at launch.
 */
#include "ctl/sigcheck.h"
#include "core/cproto.h"
#include "base/buf.h"
#include "base/mem.h"

#include <stdio.h>
#include <string.h>

/* Float pointee names and the dtype they hold (vector forms included). */
static const struct {
    const char *name;
    enum kevo_dtype dt;
} float_types[] = {
    { "float", KEVO_F32 },         { "float2", KEVO_F32 },       { "float4", KEVO_F32 },
    { "double", KEVO_F64 },        { "double2", KEVO_F64 },      { "__half", KEVO_F16 },
    { "half", KEVO_F16 },          { "__half2", KEVO_F16 },      { "half2", KEVO_F16 },
    { "__nv_bfloat16", KEVO_BF16 }, { "nv_bfloat16", KEVO_BF16 }, { "__nv_bfloat162", KEVO_BF16 },
    { "nv_bfloat162", KEVO_BF16 }, { "__nv_fp8_e4m3", KEVO_FP8E4M3 },
    { "__nv_fp8_e5m2", KEVO_FP8E5M2 },
};

/* The pointee of a parameter type with qualifiers and '*' removed ("const float *" ->
 * "float"); returns the number of '*'. */
static int pointee(const char *type, char *out, size_t n)
{
    static const char *const quals[] = { "const", "volatile", "__restrict__", "__restrict",
                                         "restrict", "struct", "signed" };
    char buf[256], *save = NULL;
    int stars = 0;
    size_t o = 0;

    snprintf(buf, sizeof buf, "%s", type);
    for (char *tok = strtok_r(buf, " \t*", &save); tok; tok = strtok_r(NULL, " \t*", &save)) {
        int q = 0;
        for (size_t i = 0; i < sizeof quals / sizeof *quals; i++)
            q |= strcmp(tok, quals[i]) == 0;
        if (!q && o + strlen(tok) + 2 < n)
            o += (size_t)snprintf(out + o, n - o, "%s%s", o ? " " : "", tok);
    }
    if (!o)
        snprintf(out, n, "int");   /* "signed", "const" alone */
    for (const char *c = type; *c; c++)
        stars += *c == '*';
    return stars;
}

/* 1 if a tensor of dtype dt may be passed as a pointer to `pt`; 0 with the clash. */
static int pointee_ok(enum kevo_dtype dt, const char *pt)
{
    for (size_t i = 0; i < sizeof float_types / sizeof *float_types; i++) {
        if (strcmp(pt, float_types[i].name) == 0)
            return float_types[i].dt == dt;
    }
    /* Integer, void and opaque pointees hold anything: kernels reinterpret bf16 pairs as
     * unsigned, load 16 bytes as uint4, and so on. Only a float pointee names a dtype. */
    return 1;
}

static const char *tensor_name_dtype(const struct kevo_task *task, const struct kevo_task *cand,
                                     int index, enum kevo_dtype *dt)
{
    const struct kevo_tensor_decl *t = NULL;
    if (index >= 0 && index < task->n_tensors)
        t = &task->tensors[index];
    else if (cand && index >= task->n_tensors && index - task->n_tensors < cand->n_tensors)
        t = &cand->tensors[index - task->n_tensors];
    if (!t)
        return NULL;
    *dt = t->dtype;
    return t->name;
}

/* Check one argument; appends the problem to msg and returns 1 when there is one. */
static int check_arg(const struct kevo_task *task, const struct kevo_task *cand,
                     const struct kevo_launch *l, int i, const char *type, struct kevo_buf *msg)
{
    const struct kevo_arg *a = &l->args[i];
    char pt[128];
    int ptr = pointee(type, pt, sizeof pt) > 0;
    enum kevo_dtype dt = KEVO_F32;
    const char *tn = a->kind == KEVO_ARG_TENSOR ? tensor_name_dtype(task, cand, a->index, &dt)
                                                : NULL;

    if (a->kind == KEVO_ARG_TENSOR && !ptr) {
        kevo_buf_say(msg, "argument %d (tensor %s) goes to parameter %d of '%s', "
                     "'%s', which is not a pointer", i + 1, a->text, i + 1, l->kernel, type);
        return 1;
    }
    if (a->kind != KEVO_ARG_TENSOR && ptr) {
        kevo_buf_say(msg, "argument %d ('%s', not a tensor) goes to parameter %d of "
                     "'%s', '%s', which is a pointer", i + 1, a->text, i + 1, l->kernel, type);
        return 1;
    }
    if (tn && !pointee_ok(dt, pt)) {
        kevo_buf_say(msg, "argument %d (tensor %s, %s) goes to parameter %d of '%s', "
                     "'%s', which points to another type", i + 1, tn,
                     kevo_dtype_name(dt), i + 1, l->kernel, type);
        return 1;
    }
    return 0;
}

/* The launch line l against its kernel's parameters in src. */
static enum kevo_status check_launch(const struct kevo_task *task, const struct kevo_task *cand,
                                     const struct kevo_task *src, const struct kevo_launch *l,
                                     struct kevo_buf *msg)
{
    struct kevo_cproto p;
    struct kevo_buf why;
    enum kevo_status st;
    int bad = 0;

    kevo_buf_init(&why, 1024);
    st = kevo_cproto_find(src->source, src->source_len, l->kernel, &p, &why);
    kevo_buf_free(&why);
    if (st == KEVO_ERR_NOMEM)
        return st;
    if (st)
        return KEVO_OK;   /* a template or a macro: the worker checks it at launch */
    kevo_buf_say(msg, "%s:%d: error: launch of '%s' does not match its parameters (line %d): ",
                  src->path, l->line, l->kernel, p.line);
    if (p.n_params != l->n_args) {
        kevo_buf_say(msg, "the launch passes %d argument%s, '%s' takes %d", l->n_args,
                      l->n_args == 1 ? "" : "s", l->kernel, p.n_params);
        bad = 1;
    }
    for (int i = 0; !bad && i < l->n_args; i++)
        bad = check_arg(task, cand, l, i, p.types[i], msg);
    kevo_cproto_clear(&p);
    return bad ? KEVO_ERR_INVALID : KEVO_OK;
}

enum kevo_status kevo_sig_check(const struct kevo_task *task, const struct kevo_task *cand,
                                char **out_msg)
{
    const struct kevo_task *src = cand ? cand : task;
    struct kevo_buf msg;
    enum kevo_status st = KEVO_OK;

    *out_msg = NULL;
    for (int i = 0; i < src->n_launches && !st; i++) {
        kevo_buf_init(&msg, 4096);
        st = check_launch(task, cand, src, &src->launches[i], &msg);
        if (st)
            *out_msg = kevo_buf_take(&msg);
        kevo_buf_free(&msg);
    }
    return st;
}

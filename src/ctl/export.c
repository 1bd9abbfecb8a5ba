/*
 * export - `kevo export ID --out DIR` (docs/search.md "Export"): the best kernel of a run
 * that passed the held-out gate, as files a user builds without kevo:
 *
 *   NAME.cu / NAME.c            the candidate, its params as #defines, directives as comments
 *   NAME_reference.cu / .c      the task's reference, its kernels renamed NAME_ref_*
 *   NAME_launch.h, NAME_launch.c  C launchers (CUDA runtime API for CUDA) with the launch
 *                               plans turned into code: grid, block, shared memory and
 *                               scratch buffers computed from the sizes
 *   NAME_test.cu / NAME_test.c  a test that runs both on random inputs at every visible
 *                               workload and compares them under the task's tolerance
 *   Makefile                    `make test` builds and runs the test
 *
 * Argument types come from each kernel's parameter list in its source, so an integer
 * argument is passed at exactly its declared width.
 */
#include "ctl/archive.h"
#include "core/cproto.h"
#include "base/buf.h"
#include "base/fsutil.h"
#include "ctl/genome.h"
#include "base/mem.h"
#include "ctl/run.h"
#include "core/task.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct exp {
    const struct kevo_task *task, *cand;
    const struct kevo_genome *g;
    const char *name;
    int cuda;
    struct kevo_buf err;
};

/* The source with every directive line turned into a `// kevo-export:` comment. */
static void commented_source(struct kevo_buf *b, const char *text, size_t len)
{
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl + 1 : end, *kw;
        size_t kl;
        const char *k = kevo_task_directive(p, (size_t)((nl ? nl : end) - p), &kw, &kl)
                            ? strstr(p, "kevo") : NULL;
        if (k) {
            kevo_buf_say(b, "%.*sexport:%.*s", (int)(k - p), p, (int)(e - k - 4), k + 4);
        } else {
            kevo_buf_say(b, "%.*s", (int)(e - p), p);
        }
        p = e;
    }
}

/* Is `w` a whole word at s? */
static int word_at(const char *s, const char *start, const char *w)
{
    size_t n = strlen(w);
    return strncmp(s, w, n) == 0 && !(isalnum((unsigned char)s[n]) || s[n] == '_') &&
           !(s > start && (isalnum((unsigned char)s[-1]) || s[-1] == '_'));
}

/* An expression in C: cdiv/min/max become the launcher's helpers. */
static void c_expr(struct kevo_buf *b, const char *e)
{
    static const char *const fn[] = { "cdiv", "min", "max" };
    kevo_buf_say(b, "(");
    for (const char *p = e; *p;) {
        int done = 0;
        for (int i = 0; i < 3 && !done; i++)
            if (word_at(p, e, fn[i])) {
                kevo_buf_say(b, "kv_%s", fn[i]);
                p += strlen(fn[i]);
                done = 1;
            }
        if (!done)
            kevo_buf_say(b, "%c", *p++);
    }
    kevo_buf_say(b, ")");
}

static const char *ctype_of(enum kevo_dtype dt, int cuda)
{
    static const char *const t[] = {
        [KEVO_F64] = "double", [KEVO_F32] = "float", [KEVO_F16] = "__half",
        [KEVO_BF16] = "__nv_bfloat16", [KEVO_FP8E4M3] = "__nv_fp8_e4m3",
        [KEVO_FP8E5M2] = "__nv_fp8_e5m2", [KEVO_I64] = "int64_t", [KEVO_I32] = "int32_t",
        [KEVO_I16] = "int16_t", [KEVO_I8] = "int8_t", [KEVO_U8] = "uint8_t", [KEVO_BOOL] = "bool",
    };
    if ((unsigned)dt >= sizeof t / sizeof *t)
        return NULL;
    if (!cuda && (dt == KEVO_F16 || dt == KEVO_BF16 || dt == KEVO_FP8E4M3 || dt == KEVO_FP8E5M2))
        return NULL;
    return t[dt];
}

/* The tensor of a launch argument: the task's, or the candidate's own scratch. */
static const struct kevo_tensor_decl *arg_tensor(const struct exp *x, const struct kevo_task *src,
                                                 const struct kevo_arg *a)
{
    if (a->index < x->task->n_tensors)
        return &x->task->tensors[a->index];
    if (src != x->task && a->index - x->task->n_tensors < src->n_tensors)
        return &src->tensors[a->index - x->task->n_tensors];
    return NULL;
}

/* Shape product of t as a C expression. */
static void c_numel(struct kevo_buf *b, const struct kevo_tensor_decl *t)
{
    kevo_buf_say(b, "(int64_t)1");
    for (int d = 0; d < t->ndim; d++) {
        kevo_buf_say(b, " * ");
        c_expr(b, t->shape[d]);
    }
}

/* The launcher's parameter list: every task input/output as a pointer, then the sizes. */
static void c_signature(struct kevo_buf *b, const struct exp *x, const char *fn)
{
    const struct kevo_workload *w = &x->task->workloads[0];
    int first = 1;
    kevo_buf_say(b, "%s %s(", x->cuda ? "cudaError_t" : "int", fn);
    for (int i = 0; i < x->task->n_tensors; i++) {
        const struct kevo_tensor_decl *t = &x->task->tensors[i];
        if (t->role == KEVO_ROLE_SCRATCH)
            continue;
        kevo_buf_say(b, "%s%svoid *%s", first ? "" : ", ", t->role == KEVO_ROLE_INPUT ? "const " : "",
              t->name);
        first = 0;
    }
    for (int i = 0; i < w->n; i++)
        kevo_buf_say(b, ", int64_t %s", w->names[i]);
    if (x->cuda)
        kevo_buf_say(b, ", cudaStream_t stream");
    kevo_buf_say(b, ")");
}

/* ---- launchers ---- */

/* Distinct kernel names of a plan, in first-use order (borrowed). */
static int plan_kernels(const struct kevo_task *src, const char **out, int cap)
{
    int n = 0;
    for (int i = 0; i < src->n_launches; i++) {
        int seen = 0;
        for (int k = 0; k < n; k++)
            seen |= strcmp(out[k], src->launches[i].kernel) == 0;
        if (!seen && n < cap)
            out[n++] = src->launches[i].kernel;
    }
    return n;
}

/* Scratch buffers of a plan: the task's, and (for the candidate) its own. */
/* alloc: 2 declares every scratch pointer (NULL, before any goto), 1 allocates, 0 frees. */
static void c_scratch(struct kevo_buf *b, const struct exp *x, const struct kevo_task *src, int alloc)
{
    for (int pass = 0; pass < 2; pass++) {
        const struct kevo_task *t = pass ? src : x->task;
        if (pass && src == x->task)
            break;
        for (int i = 0; i < t->n_tensors; i++) {
            const struct kevo_tensor_decl *d = &t->tensors[i];
            if (d->role != KEVO_ROLE_SCRATCH)
                continue;
            if (alloc == 2) {
                kevo_buf_say(b, "    void *%s = NULL;\n", d->name);
                continue;
            }
            if (!alloc) {
                kevo_buf_say(b, "    if (%s)\n        %s(%s%s);\n", d->name,
                      x->cuda ? "cudaFreeAsync" : "free", d->name, x->cuda ? ", stream" : "");
                continue;
            }
            kevo_buf_say(b, x->cuda ? "    kv_e = cudaMallocAsync(&%s, (size_t)(" : "    %s = malloc((size_t)(",
                  d->name);
            c_numel(b, d);
            kevo_buf_say(b, ") * %zu%s);\n", kevo_dtype_size(d->dtype), x->cuda ? ", stream" : "");
            kevo_buf_say(b, x->cuda ? "    if (kv_e != cudaSuccess)\n        goto out;\n"
                             : "    if (!%s) {\n        kv_e = 1;\n        goto out;\n    }\n",
                  d->name);
        }
    }
}

/* Tensor map argument i (src->tmaps[a->index]) as a local CUtensorMap kv_aI, encoded as
 * kevo's harness encodes it (kv_tmap, launch_c). */
static void c_tmap_arg(struct kevo_buf *b, const struct exp *x, const struct kevo_task *src,
                       const struct kevo_arg *a, int i)
{
    static const char *const dt[] = {
        [KEVO_F64] = "FLOAT64", [KEVO_F32] = "FLOAT32", [KEVO_F16] = "FLOAT16",
        [KEVO_BF16] = "BFLOAT16", [KEVO_I64] = "INT64", [KEVO_I32] = "INT32", [KEVO_I16] = "UINT16",
    };
    const struct kevo_tmap *m = &src->tmaps[a->index];
    struct kevo_arg ta = { .kind = KEVO_ARG_TENSOR, .index = m->tensor_index };
    const struct kevo_tensor_decl *t = arg_tensor(x, src, &ta);

    if (!t)
        return;
    kevo_buf_say(b, "        CUtensorMap kv_a%d;\n        {\n            const cuuint64_t kv_d[] = {", i);
    for (int d = m->rank - 1; d >= 0; d--) {
        kevo_buf_say(b, "%s(cuuint64_t)", d < m->rank - 1 ? ", " : " ");
        c_expr(b, m->shape[0] ? m->shape[d] : t->shape[d]);
    }
    kevo_buf_say(b, " };\n            const cuuint32_t kv_x[] = {");
    for (int d = m->rank - 1; d >= 0; d--) {
        kevo_buf_say(b, "%s(cuuint32_t)", d < m->rank - 1 ? ", " : " ");
        c_expr(b, m->box[d]);
    }
    kevo_buf_say(b, " };\n            kv_e = kv_tmap(&kv_a%d, CU_TENSOR_MAP_DATA_TYPE_%s, %d, %s, "
                 "kv_d, %zu, kv_x, %s);\n            if (kv_e != cudaSuccess)\n"
                 "                goto out;\n        }\n", i,
                 (size_t)t->dtype < sizeof dt / sizeof *dt && dt[t->dtype] ? dt[t->dtype] : "UINT8",
                 m->rank, t->name, kevo_dtype_size(t->dtype),
                 m->swizzle == 128 ? "CU_TENSOR_MAP_SWIZZLE_128B" : m->swizzle == 64
                 ? "CU_TENSOR_MAP_SWIZZLE_64B" : m->swizzle == 32 ? "CU_TENSOR_MAP_SWIZZLE_32B"
                 : "CU_TENSOR_MAP_SWIZZLE_NONE");
}

/* One argument of launch l as a typed local kv_aI. */
static void c_arg(struct kevo_buf *b, const struct exp *x, const struct kevo_task *src,
                  const struct kevo_launch *l, int i, const char *type)
{
    const struct kevo_arg *a = &l->args[i];
    int ptr = strchr(type, '*') != NULL;
    if (a->kind == KEVO_ARG_TMAP) {
        c_tmap_arg(b, x, src, a, i);
    } else if (a->kind == KEVO_ARG_TENSOR) {
        const struct kevo_tensor_decl *t = arg_tensor(x, src, a);
        /* CUDA: the address is all cudaLaunchKernel reads; C: the declared pointer type */
        if (x->cuda)
            kevo_buf_say(b, "        const void *kv_a%d = %s;\n", i, t ? t->name : a->text);
        else
            kevo_buf_say(b, "        %s kv_a%d = (%s)%s;\n", type, i, type, t ? t->name : a->text);
    } else if (!ptr) {
        kevo_buf_say(b, "        %s kv_a%d = (%s)", type, i, type);
        if (a->kind == KEVO_ARG_SCALAR)
            kevo_buf_say(b, "(%s)", a->text);
        else
            c_expr(b, a->text);
        kevo_buf_say(b, ";\n");
    }
}

/* One launch line as code; 0 on success, -1 when its kernel's parameters are unknown. */
static int c_launch(struct kevo_buf *b, struct exp *x, const struct kevo_task *src,
                    const struct kevo_launch *l, const char *prefix)
{
    struct kevo_cproto p;
    struct kevo_buf why;

    kevo_buf_init(&why, 1024);
    enum kevo_status st = kevo_cproto_find(src->source, src->source_len, l->kernel, &p, &why);
    kevo_buf_free(&why);
    if (st || p.n_params != l->n_args) {
        kevo_buf_say(&x->err, "%s:%d: cannot read the parameter list of '%s' (a template or a "
              "macro?); export needs a plain extern \"C\" kernel", src->path, l->line, l->kernel);
        if (!st)
            kevo_cproto_clear(&p);
        return -1;
    }
    kevo_buf_say(b, "    {   /* %s, line %d */\n", l->kernel, l->line);
    for (int i = 0; i < l->n_args; i++)
        c_arg(b, x, src, l, i, p.types[i]);
    if (x->cuda) {
        kevo_buf_say(b, "        void *kv_args[%d] = {", l->n_args ? l->n_args : 1);
        for (int i = 0; i < l->n_args; i++)
            kevo_buf_say(b, "%s(void *)&kv_a%d", i ? ", " : " ", i);
        kevo_buf_say(b, " };\n        dim3 kv_g = { ");
        for (int d = 0; d < 3; d++) {
            kevo_buf_say(b, "%s(unsigned)", d ? ", " : "");
            c_expr(b, l->grid[d]);
        }
        kevo_buf_say(b, " }, kv_b = { ");
        for (int d = 0; d < 3; d++) {
            kevo_buf_say(b, "%s(unsigned)", d ? ", " : "");
            c_expr(b, l->block[d]);
        }
        kevo_buf_say(b, " };\n");
        if (strcmp(l->smem, "0") != 0) {   /* above 48 KiB a kernel must opt in, as kevo does */
            kevo_buf_say(b, "        kv_e = cudaFuncSetAttribute((const void *)%s%s, "
                         "cudaFuncAttributeMaxDynamicSharedMemorySize, (int)", prefix, l->kernel);
            c_expr(b, l->smem);
            kevo_buf_say(b, ");\n        if (kv_e != cudaSuccess)\n            goto out;\n");
        }
        kevo_buf_say(b, "        kv_e = cudaLaunchKernel((const void *)%s%s, kv_g, kv_b, kv_args, "
              "(size_t)", prefix, l->kernel);
        c_expr(b, l->smem);
        kevo_buf_say(b, ", stream);\n        if (kv_e != cudaSuccess)\n            goto out;\n    }\n");
    } else {
        kevo_buf_say(b, "        %s%s(", prefix, l->kernel);
        for (int i = 0; i < l->n_args; i++)
            kevo_buf_say(b, "%skv_a%d", i ? ", " : "", i);
        kevo_buf_say(b, ");\n    }\n");
    }
    kevo_cproto_clear(&p);
    return 0;
}

/* The launcher function of one plan. */
static int c_plan(struct kevo_buf *b, struct exp *x, const struct kevo_task *src,
                  const char *prefix, const char *fn)
{
    c_signature(b, x, fn);
    kevo_buf_say(b, "\n{\n    %s kv_e = %s;\n", x->cuda ? "cudaError_t" : "int", x->cuda ? "cudaSuccess" : "0");
    if (src == x->cand)
        for (int i = 0; i < x->g->n_params; i++)
            kevo_buf_say(b, "    const int64_t %s = %lld;\n", x->g->names[i],
                  (long long)x->g->values[i][x->g->choice[i]]);
    for (int i = 0; i < x->task->n_scalars; i++) {
        const struct kevo_scalar_decl *s = &x->task->scalars[i];
        if (kevo_dtype_is_float(s->dtype))
            kevo_buf_say(b, "    const double %s = %.17g;\n", s->name, s->value);
        else
            kevo_buf_say(b, "    const int64_t %s = %lld;\n", s->name, (long long)s->ivalue);
    }
    c_scratch(b, x, src, 2);
    c_scratch(b, x, src, 1);
    for (int i = 0; i < src->n_launches; i++)
        if (c_launch(b, x, src, &src->launches[i], prefix))
            return -1;
    kevo_buf_say(b, "out:\n");
    c_scratch(b, x, src, 0);
    kevo_buf_say(b, "    return kv_e;\n}\n\n");
    return 0;
}

/* Kernel declarations for the launchers: host stubs (CUDA) or the functions (C). */
static int c_decls(struct kevo_buf *b, struct exp *x, const struct kevo_task *src, const char *prefix)
{
    const char *k[64];
    int n = plan_kernels(src, k, 64);
    for (int i = 0; i < n; i++) {
        if (x->cuda) {   /* the host stub nvcc emits for the extern "C" kernel */
            kevo_buf_say(b, "extern void %s%s(void);\n", prefix, k[i]);
            continue;
        }
        struct kevo_cproto p;
        struct kevo_buf why;
        kevo_buf_init(&why, 1024);
        enum kevo_status st = kevo_cproto_find(src->source, src->source_len, k[i], &p, &why);
        kevo_buf_free(&why);
        if (st) {
            kevo_buf_say(&x->err, "%s: cannot read the parameter list of '%s'", src->path, k[i]);
            return -1;
        }
        kevo_buf_say(b, "void %s%s(", prefix, k[i]);
        for (int a = 0; a < p.n_params; a++)
            kevo_buf_say(b, "%s%s", a ? ", " : "", p.types[a]);
        kevo_buf_say(b, "%s);\n", p.n_params ? "" : "void");
        kevo_cproto_clear(&p);
    }
    return 0;
}

static void launch_h(struct kevo_buf *b, const struct exp *x)
{
    char fn[200];
    kevo_buf_say(b, "/* %s_launch.h - launchers exported by kevo for task %s (see README.md). Tensors\n"
          " * are %s pointers in the task's layout; sizes are the task's size names. */\n"
          "#ifndef %s_LAUNCH_H\n#define %s_LAUNCH_H\n#include <stdbool.h>\n#include <stdint.h>\n%s"
          "#ifdef __cplusplus\nextern \"C\" {\n#endif\n", x->name, x->task->name,
          x->cuda ? "device" : "host", x->name, x->name,
          x->cuda ? "#include <cuda_runtime_api.h>\n" : "");
    snprintf(fn, sizeof fn, "%s_launch", x->name);
    c_signature(b, x, fn);
    kevo_buf_say(b, ";\n");
    snprintf(fn, sizeof fn, "%s_reference_launch", x->name);
    c_signature(b, x, fn);
    kevo_buf_say(b, ";\n#ifdef __cplusplus\n}\n#endif\n#endif\n");
}

/* The encoder of the candidate's tensor maps, as kevo's harness (core/rules.h): zero bytes
 * when a pitch is not a multiple of 16 bytes; the driver's entry point through the runtime,
 * so the test needs no -lcuda. */
static const char tmap_helper[] =
    "#include <cuda.h>\n#include <string.h>\n\n"
    "static cudaError_t kv_tmap(CUtensorMap *m, CUtensorMapDataType t, unsigned rank,\n"
    "                           const void *p, const cuuint64_t *dims, size_t es,\n"
    "                           const cuuint32_t *box, CUtensorMapSwizzle sw)\n{\n"
    "    typedef CUresult (*enc_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,\n"
    "                               const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,\n"
    "                               const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,\n"
    "                               CUtensorMapL2promotion, CUtensorMapFloatOOBfill);\n"
    "    static enc_fn enc;\n    cuuint64_t st[4], pitch = es;\n"
    "    const cuuint32_t one[5] = { 1, 1, 1, 1, 1 };\n\n    memset(m, 0, sizeof *m);\n"
    "    for (unsigned i = 1; i < rank; i++) {\n        st[i - 1] = pitch *= dims[i - 1];\n"
    "        if (pitch % 16 || pitch >= (1ull << 40))\n            return cudaSuccess;\n    }\n"
    "    if (!enc) {\n        void *f = NULL;\n        enum cudaDriverEntryPointQueryResult q;\n"
    "        if (cudaGetDriverEntryPointByVersion(\"cuTensorMapEncodeTiled\", &f, 12000,\n"
    "                                             cudaEnableDefault, &q) != cudaSuccess || !f)\n"
    "            return cudaErrorNotSupported;\n        memcpy(&enc, &f, sizeof enc);\n    }\n"
    "    return enc(m, t, rank, (void *)p, dims, st, box, one, CU_TENSOR_MAP_INTERLEAVE_NONE, sw,\n"
    "               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)\n"
    "               == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;\n}\n\n";

static int launch_c(struct kevo_buf *b, struct exp *x)
{
    char fn[200], pre[200];
    snprintf(pre, sizeof pre, "%s_ref_", x->name);
    kevo_buf_say(b, "/* %s_launch.c - the launch plans of the exported kernel and of the task's\n"
          " * reference, as code (generated by kevo export). */\n#include \"%s_launch.h\"\n"
          "#include <stdlib.h>\n\n", x->name, x->name);
    kevo_buf_say(b, "static inline int64_t kv_cdiv(int64_t a, int64_t b)\n{\n    int64_t q = a / b;\n"
          "    return q + (a %% b != 0 && (a > 0) == (b > 0));\n}\n"
          "static inline int64_t kv_min(int64_t a, int64_t b) { return a < b ? a : b; }\n"
          "static inline int64_t kv_max(int64_t a, int64_t b) { return a > b ? a : b; }\n\n");
    if (x->cand->n_tmaps)
        kevo_buf_say(b, "%s", tmap_helper);
    if (c_decls(b, x, x->cand, "") || c_decls(b, x, x->task, pre))
        return -1;
    kevo_buf_say(b, "\n");
    snprintf(fn, sizeof fn, "%s_launch", x->name);
    if (c_plan(b, x, x->cand, "", fn))
        return -1;
    snprintf(fn, sizeof fn, "%s_reference_launch", x->name);
    return c_plan(b, x, x->task, pre, fn);
}

/* ---- sources ---- */

static void cand_source(struct kevo_buf *b, const struct exp *x, int64_t run, int64_t id)
{
    kevo_buf_say(b, "/* %s - exported by kevo from run %lld, candidate %lld, for task %s.\n"
          " * Its params are fixed below; build with the flags in the Makefile. */\n",
          x->name, (long long)run, (long long)id, x->task->name);
    for (int i = 0; i < x->g->n_params; i++)
        kevo_buf_say(b, "#define %s %lld\n", x->g->names[i], (long long)x->g->values[i][x->g->choice[i]]);
    commented_source(b, x->g->text, x->g->len);
}

static void ref_source(struct kevo_buf *b, const struct exp *x)
{
    const char *k[64];
    int n = plan_kernels(x->task, k, 64);
    kevo_buf_say(b, "/* %s_reference - the reference of task %s, its kernels renamed %s_ref_* so\n"
          " * they link beside the exported ones. */\n", x->name, x->task->name, x->name);
    for (int i = 0; i < n; i++)
        kevo_buf_say(b, "#define %s %s_ref_%s\n", k[i], x->name, k[i]);
    commented_source(b, x->task->source, x->task->source_len);
}

/* ---- the test ---- */

/* C expressions converting double `v` to dtype dt, and element `e` of dt to double. */
static const char *to_dt(enum kevo_dtype dt)
{
    switch (dt) {
    case KEVO_F64: return "v";
    case KEVO_F32: return "(float)v";
    case KEVO_F16: return "__float2half_rn((float)v)";
    case KEVO_BF16: return "__float2bfloat16_rn((float)v)";
    case KEVO_FP8E4M3: return "__nv_fp8_e4m3((float)v)";
    case KEVO_FP8E5M2: return "__nv_fp8_e5m2((float)v)";
    case KEVO_BOOL: return "v != 0";
    default: return NULL;   /* integers: a cast to the element type */
    }
}

static const char *from_dt(enum kevo_dtype dt)
{
    switch (dt) {
    case KEVO_F16: return "(double)__half2float(%s)";
    case KEVO_BF16: return "(double)__bfloat162float(%s)";
    case KEVO_FP8E4M3:
    case KEVO_FP8E5M2: return "(double)(float)(%s)";
    default: return "(double)(%s)";
    }
}

/* Fill host array h_NAME from the tensor's INIT. */
static void t_fill(struct kevo_buf *b, const struct exp *x, const struct kevo_tensor_decl *t)
{
    const char *conv = to_dt(t->dtype);
    kevo_buf_say(b, "        for (int64_t i = 0; i < n_%s; i++) {\n            double v = ", t->name);
    if (t->init == KEVO_INIT_RANDINT) {
        kevo_buf_say(b, "(double)(");
        c_expr(b, t->init_a);
        kevo_buf_say(b, " + (int64_t)(kv_u01() * (double)(");
        c_expr(b, t->init_b);
        kevo_buf_say(b, " - ");
        c_expr(b, t->init_a);
        kevo_buf_say(b, ")))");
    } else if (t->init == KEVO_INIT_UNIFORM) {
        kevo_buf_say(b, "%s + (%s - (%s)) * kv_u01()", t->init_a, t->init_b, t->init_a);
    } else if (t->init == KEVO_INIT_NORMAL) {
        kevo_buf_say(b, "%s + %s * kv_normal()", t->init_a, t->init_b);
    } else {
        kevo_buf_say(b, kevo_dtype_is_float(t->dtype) ? "kv_normal()" : "(double)(int)(kv_u01() * 100)");
    }
    if (conv)
        kevo_buf_say(b, ";\n            h_%s[i] = %s;\n        }\n", t->name, conv);
    else
        kevo_buf_say(b, ";\n            h_%s[i] = (%s)v;\n        }\n", t->name, ctype_of(t->dtype, x->cuda));
}

static const char test_helpers[] =
    "static uint64_t kv_state = 0x6b65766f2d746573ull;\n"
    "static double kv_u01(void)\n{\n"
    "    uint64_t z = (kv_state += 0x9E3779B97F4A7C15ull);\n"
    "    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;\n"
    "    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;\n"
    "    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;\n}\n"
    "static double kv_normal(void)\n{\n"
    "    double u1 = kv_u01(), u2 = kv_u01();\n"
    "    return sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2);\n}\n"
    "static inline int64_t kv_cdiv(int64_t a, int64_t b)\n{\n    int64_t q = a / b;\n"
    "    return q + (a % b != 0 && (a > 0) == (b > 0));\n}\n"
    "static inline int64_t kv_min(int64_t a, int64_t b) { return a < b ? a : b; }\n"
    "static inline int64_t kv_max(int64_t a, int64_t b) { return a > b ? a : b; }\n"
    "/* kevo's rule: |got-want| <= atol + rtol*|want| everywhere, and relative L2 <= rtol. */\n"
    "static int kv_check(const char *name, const double *got, const double *want, int64_t n,\n"
    "                    double rtol, double atol)\n{\n"
    "    double d2 = 0, w2 = 0;\n    int64_t bad = 0, first = -1;\n"
    "    for (int64_t i = 0; i < n; i++) {\n"
    "        double g = got[i], w = want[i], d = g - w;\n"
    "        if (w != w ? g == g : isinf(w) ? g != w : !(fabs(d) <= atol + rtol * fabs(w))) {\n"
    "            if (first < 0)\n                first = i;\n            bad++;\n        }\n"
    "        if (w == w && g == g)\n            d2 += d * d, w2 += w * w;\n    }\n"
    "    double l2 = w2 > 0 ? sqrt(d2 / w2) : sqrt(d2);\n"
    "    int ok = bad == 0 && !(w2 > 0 && l2 > rtol);\n"
    "    printf(\"  %s: %s (%lld of %lld elements outside the tolerance, rel L2 %.3g)\",\n"
    "           name, ok ? \"ok\" : \"MISMATCH\", (long long)bad, (long long)n, l2);\n"
    "    if (first >= 0)\n"
    "        printf(\"; first at %lld: %.9g, expected %.9g\", (long long)first, got[first], want[first]);\n"
    "    printf(\"\\n\");\n    return ok;\n}\n";

/* The launcher arguments: each task tensor (outputs with prefix), then the sizes. */
static void t_call(struct kevo_buf *b, const struct exp *x, const struct kevo_workload *w,
                   const char *fn, const char *out_prefix)
{
    kevo_buf_say(b, "        kv_e = %s(", fn);
    int first = 1;
    for (int i = 0; i < x->task->n_tensors; i++) {
        const struct kevo_tensor_decl *t = &x->task->tensors[i];
        if (t->role == KEVO_ROLE_SCRATCH)
            continue;
        kevo_buf_say(b, "%s%s%s", first ? "" : ", ", t->role == KEVO_ROLE_OUTPUT ? out_prefix : "d_",
              t->name);
        first = 0;
    }
    (void)w;   /* every workload assigns the same names; the signature's order is the first's */
    for (int i = 0; i < x->task->workloads[0].n; i++)
        kevo_buf_say(b, ", %s", x->task->workloads[0].names[i]);
    kevo_buf_say(b, "%s);\n", x->cuda ? ", 0" : "");
    if (x->cuda)
        kevo_buf_say(b, "        if (kv_e == cudaSuccess)\n            kv_e = cudaDeviceSynchronize();\n"
              "        if (kv_e != cudaSuccess) {\n            printf(\"  %s: %%s\\n\", "
              "cudaGetErrorString(kv_e));\n            return 1;\n        }\n", fn);
    else
        kevo_buf_say(b, "        if (kv_e) {\n            printf(\"  %s failed\\n\");\n            return 1;\n"
              "        }\n", fn);
}

/* Allocate (and for inputs fill and upload) the buffers of one tensor. */
static void t_buffers(struct kevo_buf *b, const struct exp *x, const struct kevo_tensor_decl *t)
{
    const char *ct = ctype_of(t->dtype, x->cuda);
    kevo_buf_say(b, "        const int64_t n_%s = ", t->name);
    c_numel(b, t);
    kevo_buf_say(b, ";\n        %s *h_%s = (%s *)malloc((size_t)n_%s * sizeof(%s));\n", ct, t->name, ct,
          t->name, ct);
    if (t->role == KEVO_ROLE_INPUT) {
        t_fill(b, x, t);
        if (x->cuda)
            kevo_buf_say(b, "        void *d_%s = NULL;\n        cudaMalloc(&d_%s, (size_t)n_%s * sizeof(%s));\n"
                  "        cudaMemcpy(d_%s, h_%s, (size_t)n_%s * sizeof(%s), cudaMemcpyHostToDevice);\n",
                  t->name, t->name, t->name, ct, t->name, t->name, t->name, ct);
        else
            kevo_buf_say(b, "        void *d_%s = h_%s;\n", t->name, t->name);
        return;
    }
    for (int k = 0; k < 2; k++) {   /* the candidate's (o_) and the reference's (r_), NaN-filled */
        const char *p = k ? "r_" : "o_";
        if (x->cuda)
            kevo_buf_say(b, "        void *%s%s = NULL;\n        cudaMalloc(&%s%s, (size_t)n_%s * sizeof(%s));\n"
                  "        cudaMemset(%s%s, 0xff, (size_t)n_%s * sizeof(%s));\n",
                  p, t->name, p, t->name, t->name, ct, p, t->name, t->name, ct);
        else
            kevo_buf_say(b, "        void *%s%s = malloc((size_t)n_%s * sizeof(%s));\n"
                  "        memset(%s%s, 0xff, (size_t)n_%s * sizeof(%s));\n",
                  p, t->name, t->name, ct, p, t->name, t->name, ct);
    }
}

/* Compare output t of the candidate with the reference's. */
static void t_compare(struct kevo_buf *b, const struct exp *x, const struct kevo_tensor_decl *t)
{
    const char *ct = ctype_of(t->dtype, x->cuda);
    double rtol, atol;
    kevo_task_tol(x->task, t->name, t->dtype, &rtol, &atol);
    kevo_buf_say(b, "        {\n            %s *h_r = (%s *)malloc((size_t)n_%s * sizeof(%s));\n"
          "            double *got = (double *)malloc((size_t)n_%s * sizeof(double));\n"
          "            double *want = (double *)malloc((size_t)n_%s * sizeof(double));\n",
          ct, ct, t->name, ct, t->name, t->name);
    if (x->cuda)
        kevo_buf_say(b, "            cudaMemcpy(h_%s, o_%s, (size_t)n_%s * sizeof(%s), cudaMemcpyDeviceToHost);\n"
              "            cudaMemcpy(h_r, r_%s, (size_t)n_%s * sizeof(%s), cudaMemcpyDeviceToHost);\n",
              t->name, t->name, t->name, ct, t->name, t->name, ct);
    else
        kevo_buf_say(b, "            memcpy(h_%s, o_%s, (size_t)n_%s * sizeof(%s));\n"
              "            memcpy(h_r, r_%s, (size_t)n_%s * sizeof(%s));\n",
              t->name, t->name, t->name, ct, t->name, t->name, ct);
    char g[64], w[64];
    snprintf(g, sizeof g, "h_%s[i]", t->name);
    snprintf(w, sizeof w, "h_r[i]");
    kevo_buf_say(b, "            for (int64_t i = 0; i < n_%s; i++) {\n                got[i] = ", t->name);
    kevo_buf_say(b, from_dt(t->dtype), g);
    kevo_buf_say(b, ";\n                want[i] = ");
    kevo_buf_say(b, from_dt(t->dtype), w);
    kevo_buf_say(b, ";\n            }\n            fails += !kv_check(\"%s\", got, want, n_%s, %.17g, %.17g);\n"
          "            free(h_r);\n            free(got);\n            free(want);\n        }\n",
          t->name, t->name, rtol, atol);
}

static int test_src(struct kevo_buf *b, struct exp *x)
{
    char fn[200], rfn[200];
    snprintf(fn, sizeof fn, "%s_launch", x->name);
    snprintf(rfn, sizeof rfn, "%s_reference_launch", x->name);
    kevo_buf_say(b, "/* %s_test - the exported kernel against the task's reference on random inputs at\n"
          " * every visible workload, under the task's tolerance (generated by kevo export). */\n"
          "#include \"%s_launch.h\"\n%s#include <math.h>\n#include <stdint.h>\n#include <stdio.h>\n"
          "#include <stdlib.h>\n#include <string.h>\n\n%s\n", x->name, x->name,
          x->cuda ? "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                    "#include <cuda_fp8.h>\n"
                  : "", test_helpers);
    kevo_buf_say(b, "int main(void)\n{\n    int fails = 0;\n    %s kv_e;\n", x->cuda ? "cudaError_t" : "int");
    for (int w = 0; w < x->task->n_workloads; w++) {
        const struct kevo_workload *wl = &x->task->workloads[w];
        struct kevo_env env;
        char *m = NULL;
        if (wl->holdout)
            continue;
        if (kevo_task_env(x->task, w, NULL, NULL, &env, &m) != KEVO_OK) {
            kevo_buf_say(&x->err, "workload %d: %s", w, m ? m : "?");
            kevo_free(m);
            return -1;
        }
        kevo_buf_say(b, "    {\n        printf(\"workload %d (", w);
        for (int i = 0; i < env.n; i++)
            kevo_buf_say(b, "%s%s=%lld", i ? " " : "", env.names[i], (long long)env.values[i]);
        kevo_buf_say(b, ")\\n\");\n");
        for (int i = 0; i < env.n; i++)
            kevo_buf_say(b, "        const int64_t %s = %lld;\n", env.names[i], (long long)env.values[i]);
        for (int i = 0; i < x->task->n_tensors; i++)
            if (x->task->tensors[i].role != KEVO_ROLE_SCRATCH)
                t_buffers(b, x, &x->task->tensors[i]);
        t_call(b, x, wl, rfn, "r_");
        t_call(b, x, wl, fn, "o_");
        for (int i = 0; i < x->task->n_tensors; i++)
            if (x->task->tensors[i].role == KEVO_ROLE_OUTPUT)
                t_compare(b, x, &x->task->tensors[i]);
        for (int i = 0; i < x->task->n_tensors; i++) {
            const struct kevo_tensor_decl *t = &x->task->tensors[i];
            if (t->role == KEVO_ROLE_INPUT)
                kevo_buf_say(b, x->cuda ? "        cudaFree(d_%s);\n        free(h_%s);\n" : "        free(h_%s);\n",
                      t->name, t->name);
            else if (t->role == KEVO_ROLE_OUTPUT)
                kevo_buf_say(b, "        %s(o_%s);\n        %s(r_%s);\n        free(h_%s);\n",
                      x->cuda ? "cudaFree" : "free", t->name, x->cuda ? "cudaFree" : "free",
                      t->name, t->name);
        }
        kevo_buf_say(b, "    }\n");
    }
    kevo_buf_say(b, "    printf(fails ? \"FAIL\\n\" : \"PASS\\n\");\n    return fails != 0;\n}\n");
    return 0;
}

/* ---- build files ---- */

static void makefile(struct kevo_buf *b, const struct exp *x)
{
    const char *n = x->name;
    kevo_buf_say(b, "# Build and run the exported kernel's test (generated by kevo export).\n");
    if (x->cuda) {
        /* -arch=sm_90a alone also embeds compute_90 PTX, where wgmma, setmaxnreg and the
         * other sm_90a instructions do not assemble: name the one target */
        kevo_buf_say(b, "NVCC ?= nvcc\nARCH ?= sm_90a\n"
                     "GENCODE = -gencode arch=$(subst sm_,compute_,$(ARCH)),code=$(ARCH)\n"
                     "KERNEL_FLAGS =");
        for (int i = 0; i < x->g->n_flags; i++)
            kevo_buf_say(b, " %s", x->g->flags[i]);
        kevo_buf_say(b, "\n\ntest: %s_test\n\t./%s_test\n\n"
              "%s_test: %s.cu %s_reference.cu %s_launch.c %s_launch.h %s_test.cu\n"
              "\t$(NVCC) $(GENCODE) -O3 $(KERNEL_FLAGS) -c %s.cu -o %s.o\n"
              "\t$(NVCC) $(GENCODE) -O3 -c %s_reference.cu -o %s_reference.o\n"
              "\t$(NVCC) -O2 -c %s_launch.c -o %s_launch.o\n"
              "\t$(NVCC) $(GENCODE) -O2 -c %s_test.cu -o %s_test.o\n"
              "\t$(NVCC) $(GENCODE) %s.o %s_reference.o %s_launch.o %s_test.o -o %s_test\n",
              n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n);
    } else {
        kevo_buf_say(b, "CC ?= cc\nKERNEL_FLAGS =");
        for (int i = 0; i < x->g->n_flags; i++)
            kevo_buf_say(b, " %s", x->g->flags[i]);
        kevo_buf_say(b, "\n\ntest: %s_test\n\t./%s_test\n\n"
              "%s_test: %s.c %s_reference.c %s_launch.c %s_launch.h %s_test.c\n"
              "\t$(CC) -O3 -fopenmp $(KERNEL_FLAGS) -c %s.c -o %s.o\n"
              "\t$(CC) -O2 -fopenmp -c %s_reference.c -o %s_reference.o\n"
              "\tobjcopy --keep-global-symbols=%s_reference.syms %s_reference.o\n"
              "\t$(CC) -O2 -c %s_launch.c -o %s_launch.o\n"
              "\t$(CC) -O2 -c %s_test.c -o %s_test.o\n"
              "\t$(CC) -fopenmp %s.o %s_reference.o %s_launch.o %s_test.o -lm -o %s_test\n",
              n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n);
    }
}

/* The reference's symbols the launcher calls; objcopy makes its others (helpers, globals
 * a candidate may define too) local, so the two link side by side. */
static void ref_syms(struct kevo_buf *b, const struct exp *x)
{
    const char *k[64];
    int n = plan_kernels(x->task, k, 64);
    for (int i = 0; i < n; i++)
        kevo_buf_say(b, "%s_ref_%s\n", x->name, k[i]);
}

static void readme(struct kevo_buf *b, const struct exp *x, int64_t run, int64_t id, json_t *best)
{
    const char *e = x->cuda ? "cu" : "c";
    kevo_buf_say(b, "# %s: exported by kevo\n\nRun %lld of task `%s`, candidate %lld: the best candidate "
          "that passed the task's held-out workloads.\n\n", x->name, (long long)run,
          x->task->name, (long long)id);
    if (json_is_object(best))
        kevo_buf_say(b, "Measured by kevo: %.4g s per call (geometric mean over the visible workloads), "
              "%.1f%% of the speed-of-light floor, %.2fx the task's reference.\n\n",
              json_number_value(json_object_get(best, "score_s")),
              100 * json_number_value(json_object_get(best, "sol_fraction")),
              json_number_value(json_object_get(best, "speedup")));
    kevo_buf_say(b, "| file | what |\n|---|---|\n| `%s.%s` | the kernel, params fixed by #defines |\n"
          "| `%s_launch.h`, `%s_launch.c` | `%s_launch(...)` runs it: the launch plan as code%s |\n"
          "| `%s_reference.%s` | the task's reference (kernels renamed `%s_ref_*`) |\n"
          "| `%s_test.%s` | compares the two on random inputs at every visible workload |\n\n"
          "`make test` builds and runs the test (%s).\n", x->name, e, x->name, x->name, x->name,
          x->cuda ? " (CUDA runtime API, on the stream you pass)" : "", x->name, e, x->name,
          x->name, x->cuda ? "cu" : "c", x->cuda ? "nvcc; ARCH=sm_90a by default" : "cc");
}

/* ---- entry ---- */

static enum kevo_status write_file(const char *dir, const char *name, struct kevo_buf *b,
                                   struct kevo_buf *msg)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(b->data ? b->data : "", 1, b->len, f) == b->len;
    ok = (f && fclose(f) == 0) && ok;
    if (!ok) {
        kevo_buf_say(msg, "%s: cannot write: %s", path, strerror(errno));
        return KEVO_ERR_IO;
    }
    kevo_buf_say(msg, "wrote %s\n", path);
    return KEVO_OK;
}

/* The run's exported candidate: the held-out gate's choice. */
static enum kevo_status final_of(struct kevo_archive *a, int64_t run, int64_t *id, json_t **best,
                                 struct kevo_buf *msg)
{
    struct kevo_run_rec r;
    memset(&r, 0, sizeof r);
    enum kevo_status st = kevo_archive_run_get(a, run, &r);
    if (st) {
        kevo_buf_say(msg, "run %lld: %s", (long long)run, kevo_archive_errmsg(a));
        return st;
    }
    json_t *rep = r.result_json ? json_loads(r.result_json, 0, NULL) : NULL;
    json_t *fin = json_object_get(json_object_get(rep, "final"), "id");
    *id = json_is_integer(fin) ? json_integer_value(fin) : 0;
    *best = json_incref(json_object_get(rep, "best"));
    if (!*id) {
        kevo_buf_say(msg, "run %lld has no candidate that passed the held-out gate (%s)", (long long)run,
              rep ? "none passed" : "the run has not finished: resume it first");
        st = KEVO_ERR_NOTFOUND;
    }
    json_decref(rep);
    kevo_archive_run_clear(&r);
    return st;
}

static enum kevo_status generate(struct exp *x, const char *dir, int64_t run, int64_t id,
                                 json_t *best, struct kevo_buf *msg)
{
    const char *e = x->cuda ? "cu" : "c";
    struct kevo_buf b;
    char name[256];
    enum kevo_status st = KEVO_OK;

    for (int f = 0; f < 8 && !st; f++) {
        kevo_buf_init(&b, (size_t)64 << 20);
        int bad = 0;
        switch (f) {
        case 0: cand_source(&b, x, run, id); snprintf(name, sizeof name, "%s.%s", x->name, e); break;
        case 1: ref_source(&b, x); snprintf(name, sizeof name, "%s_reference.%s", x->name, e); break;
        case 2: launch_h(&b, x); snprintf(name, sizeof name, "%s_launch.h", x->name); break;
        case 3: bad = launch_c(&b, x); snprintf(name, sizeof name, "%s_launch.c", x->name); break;
        case 4: bad = test_src(&b, x); snprintf(name, sizeof name, "%s_test.%s", x->name, e); break;
        case 5: makefile(&b, x); snprintf(name, sizeof name, "Makefile"); break;
        case 6:
            if (x->cuda)
                continue;
            ref_syms(&b, x);
            snprintf(name, sizeof name, "%s_reference.syms", x->name);
            break;
        default: readme(&b, x, run, id, best); snprintf(name, sizeof name, "README.md"); break;
        }
        if (bad)
            st = KEVO_ERR_UNSUPPORTED;
        else if (b.len >= b.max)
            st = KEVO_ERR_TOOBIG, kevo_buf_say(msg, "%s: too large to generate", name);
        else
            st = write_file(dir, name, &b, msg);
        kevo_buf_free(&b);
    }
    if (st == KEVO_ERR_UNSUPPORTED)
        kevo_buf_say(msg, "%s", kevo_buf_str(&x->err));
    return st;
}

/* Task, candidate and genome of candidate id of run (owned by the caller). */
static enum kevo_status load(struct kevo_archive *a, int64_t run, int64_t id,
                             struct kevo_task **task, struct kevo_task **cand,
                             struct kevo_genome *g, struct kevo_buf *msg)
{
    struct kevo_run_rec r;
    struct kevo_cand_rec c;
    char *tt = NULL, *ct = NULL, *m = NULL;
    size_t tl = 0, cl = 0;
    enum kevo_status st;

    memset(&r, 0, sizeof r);
    memset(&c, 0, sizeof c);
    st = kevo_archive_run_get(a, run, &r);
    if (!st)
        st = kevo_archive_source_get(a, r.task_hash, &tt, &tl);
    if (!st)
        st = kevo_archive_cand_get(a, id, &c);
    if (!st)
        st = kevo_archive_source_get(a, c.source_hash, &ct, &cl);
    if (st)
        kevo_buf_say(msg, "run %lld: %s", (long long)run, kevo_archive_errmsg(a));
    if (!st)
        st = kevo_task_parse(r.task_path, tt, tl, task, &m);
    if (!st)
        st = kevo_candidate_parse(*task, r.task_path, ct, cl, cand, &m);
    if (!st)
        st = kevo_genome_from_text(*task, r.task_path, ct, cl, g, &m);
    if (m)
        kevo_buf_say(msg, "%s", m);
    kevo_free(m);
    kevo_free(tt);
    kevo_free(ct);
    kevo_archive_run_clear(&r);
    kevo_archive_cand_clear(&c);
    return st;
}

enum kevo_status kevo_export(const char *archive, int64_t run, const char *dir, char **out_msg)
{
    char def[PATH_MAX], *m = NULL;
    struct kevo_archive *a = NULL;
    struct kevo_task *task = NULL, *cand = NULL;
    struct kevo_genome g;
    struct kevo_buf msg;
    json_t *best = NULL;
    int64_t id = 0;
    enum kevo_status st = KEVO_OK;

    memset(&g, 0, sizeof g);
    kevo_buf_init(&msg, 1 << 16);
    if (!archive && (st = kevo_run_default_archive(def, sizeof def)) == KEVO_OK)
        archive = def;
    if (!st && (st = kevo_archive_open_existing(archive, &a, &m)) != KEVO_OK)
        kevo_buf_say(&msg, "%s", m ? m : archive);
    if (!st)
        st = final_of(a, run, &id, &best, &msg);
    if (!st)
        st = load(a, run, id, &task, &cand, &g, &msg);
    if (!st && kevo_fs_mkdirs(dir, 0755) != 0) {
        kevo_buf_say(&msg, "%s: cannot create: %s", dir, strerror(errno));
        st = KEVO_ERR_IO;
    }
    if (!st) {
        struct exp x = { task, cand, &g, task->name, task->lang == KEVO_LANG_CUDA, { 0 } };
        kevo_buf_init(&x.err, 1 << 16);
        for (int i = 0; i < task->n_tensors && !st; i++)
            if (!ctype_of(task->tensors[i].dtype, x.cuda)) {
                kevo_buf_say(&msg, "export of %s tensors in C is not supported (%s)",
                      kevo_dtype_name(task->tensors[i].dtype), task->tensors[i].name);
                st = KEVO_ERR_UNSUPPORTED;
            }
        if (!st)
            st = generate(&x, dir, run, id, best, &msg);
        kevo_buf_free(&x.err);
    }
    *out_msg = kevo_buf_take(&msg);
    json_decref(best);
    kevo_free(m);
    kevo_genome_clear(&g);
    kevo_task_free(cand);
    kevo_task_free(task);
    kevo_archive_close(a);
    return st;
}

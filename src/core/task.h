/*
 * task - task and candidate files (../shared/design/TASK_FORMAT.md, docs/task-format.md).
 *
 * A task file and a candidate file parse into the same struct kevo_task; a candidate only
 * carries launch/call, scratch, param and flags directives plus its source. All strings are
 * owned by the task and live until kevo_task_free. Expressions are kept as text (validated
 * at parse time against the declared names) and evaluated per workload by kevo_task_env_*.
 *
 * Errors name file, line, column and what was expected, in the form
 *   "path:LINE:COL: error: MESSAGE"
 * and are returned through *out_msg (caller frees with kevo_free).
 */
#ifndef KEVO_TASK_H
#define KEVO_TASK_H

#include "kevo.h"
#include <stddef.h>
#include <stdint.h>

#define KEVO_MAX_DIMS 8
#define KEVO_MAX_ARGS 64

enum kevo_dtype {
    KEVO_F64 = 0, KEVO_F32, KEVO_F16, KEVO_BF16, KEVO_FP8E4M3, KEVO_FP8E5M2,
    KEVO_I64, KEVO_I32, KEVO_I16, KEVO_I8, KEVO_U8, KEVO_BOOL,
    KEVO_DTYPE_COUNT
};
const char *kevo_dtype_name(enum kevo_dtype t);
size_t kevo_dtype_size(enum kevo_dtype t);
int kevo_dtype_is_float(enum kevo_dtype t);
/* 0 on success, -1 for an unknown name. */
int kevo_dtype_parse(const char *s, size_t len, enum kevo_dtype *out);

enum kevo_lang { KEVO_LANG_CUDA = 0, KEVO_LANG_C };
enum kevo_role { KEVO_ROLE_INPUT = 0, KEVO_ROLE_OUTPUT, KEVO_ROLE_SCRATCH };
enum kevo_init_kind { KEVO_INIT_NONE = 0, KEVO_INIT_NORMAL, KEVO_INIT_UNIFORM, KEVO_INIT_RANDINT };
/* The unit whose peak bounds the flops (`flops EXPR on UNIT`). */
enum kevo_unit { KEVO_UNIT_FP32 = 0, KEVO_UNIT_FP64, KEVO_UNIT_TF32, KEVO_UNIT_FP16,
                 KEVO_UNIT_BF16, KEVO_UNIT_FP8, KEVO_UNIT_COUNT };
const char *kevo_unit_name(enum kevo_unit u);

struct kevo_tensor_decl {
    char *name;
    enum kevo_role role;
    enum kevo_dtype dtype;
    int ndim;
    char *shape[KEVO_MAX_DIMS];   /* expression texts */
    enum kevo_init_kind init;
    char *init_a, *init_b;        /* normal(MEAN,STD) / uniform(LO,HI): float literals;
                                     randint(LO,HI): integer expressions */
    int line;
};

struct kevo_scalar_decl {
    char *name;
    enum kevo_dtype dtype;
    double value;                 /* integer dtypes hold exact integers here */
    int64_t ivalue;               /* the same value for integer dtypes */
    int line;
};

struct kevo_workload {
    int n;                        /* number of size assignments */
    char **names;
    char **exprs;                 /* may refer to earlier names of the same line */
    int holdout;                  /* 1 for `holdout` lines */
    int line;
};

struct kevo_tol {
    char *name;                   /* NULL = all outputs */
    double rtol, atol;
    int line;
};

/* One argument of a launch/call: a tensor, a scalar, or an integer expression. */
enum kevo_arg_kind { KEVO_ARG_TENSOR = 0, KEVO_ARG_SCALAR, KEVO_ARG_EXPR, KEVO_ARG_TMAP };
struct kevo_arg {
    enum kevo_arg_kind kind;
    char *text;                   /* tensor/scalar name, or expression text */
    int index;                    /* TENSOR: index into task->tensors, or task->n_tensors + i
                                     for a candidate's own scratch tensor i; SCALAR: index
                                     into task->scalars; TMAP: index into the file's
                                     own tmaps; EXPR: -1 */
    int col;
};

/*
 * `tmap NAME TENSOR box=[B, ...] [swizzle=none|32|64|128] [shape=[S, ...]]` (CUDA
 * candidates): a TMA tensor map of TENSOR that the harness encodes for every binding of
 * the tensor (cuTensorMapEncodeTiled) and passes as a 128-byte kernel parameter, since a
 * kernel cannot build one. Box and shape entries are expressions, outermost dimension
 * first as in the tensor's declaration; `shape` views the tensor with another shape of the
 * same element count. Checked by core/rules.h (kevo_rules_tmap).
 */
#define KEVO_TMAP_MAX_RANK 5
struct kevo_tmap {
    char *name;
    char *tensor;                 /* as written */
    int tensor_index;             /* as a KEVO_ARG_TENSOR's index; -1 until resolved */
    int rank;                     /* the number of box entries */
    char *box[KEVO_TMAP_MAX_RANK];
    char *shape[KEVO_TMAP_MAX_RANK];   /* all NULL: the tensor's own shape */
    int swizzle;                  /* bytes: 0 (none), 32, 64, 128 */
    int line;
};

struct kevo_launch {
    char *kernel;                 /* CUDA kernel or C function name */
    char *grid[3], *block[3];     /* expression texts; missing dims are "1" (CUDA only) */
    char *smem;                   /* expression text, "0" by default (CUDA only) */
    int n_args;
    struct kevo_arg args[KEVO_MAX_ARGS];
    int line;
};

/*
 * Is line [l, l+n) (without its newline) a `// kevo KEYWORD ...` directive, by the
 * parser's own rule? Then kw and kw_len give the keyword (empty for a bare `// kevo`). The
 * modules that rewrite candidate and task texts use this, so they agree with the parser.
 */
int kevo_task_directive(const char *l, size_t n, const char **kw, size_t *kw_len);

#define KEVO_TASK_MAX_FILE ((size_t)16 << 20)   /* task and candidate files, at most */

struct kevo_param {
    char *name;
    int n_values;
    int64_t *values;              /* first is the default */
    int line;
};

struct kevo_task {
    char *path;                   /* as given */
    enum kevo_lang lang;          /* from the extension: .cu CUDA, .c C */
    int is_candidate;             /* parsed with kevo_candidate_parse */
    char *name;                   /* task NAME; NULL for candidates */
    char *doc;                    /* doc lines joined with '\n'; may be NULL */
    int n_tags;  char **tags;
    int n_notes; char **notes;    /* playbook notes the task asks prompts to carry (names) */
    int n_workloads; struct kevo_workload *workloads;   /* in file order, holdouts included */
    int n_tensors; struct kevo_tensor_decl *tensors;    /* inputs, outputs, scratch, in order */
    int n_scalars; struct kevo_scalar_decl *scalars;
    int n_tols; struct kevo_tol *tols;
    char *bytes;                  /* expression text, NULL if absent */
    char *flops;                  /* expression text, NULL if absent */
    enum kevo_unit flops_unit;
    char *torch;                  /* PyTorch block (torch lines joined with '\n'), NULL if absent */
    int atomics;                  /* outputs may differ run to run within the tolerance */
    int n_launches; struct kevo_launch *launches;
    int n_params; struct kevo_param *params;
    int n_tmaps; struct kevo_tmap *tmaps;     /* candidates only */
    int n_flags; char **flags;
    char *source;                 /* the whole file text, directives included */
    size_t source_len;
};

/*
 * Parse a task from text (path is used for messages and the language). On error returns
 * KEVO_ERR_PARSE/KEVO_ERR_INVALID/KEVO_ERR_OVERFLOW with *out_msg set.
 */
KEVO_NODISCARD enum kevo_status kevo_task_parse(const char *path, const char *text, size_t len,
                                                struct kevo_task **out, char **out_msg);
KEVO_NODISCARD enum kevo_status kevo_task_load(const char *path, struct kevo_task **out,
                                               char **out_msg);
/*
 * Parse a candidate for `task`: its launch arguments may name the task's tensors and
 * scalars, its own scratch tensors, size names and its params. Redeclaring task
 * inputs/outputs/sizes is an error. The candidate's language must match the task's.
 */
KEVO_NODISCARD enum kevo_status kevo_candidate_parse(const struct kevo_task *task,
                                                     const char *path, const char *text,
                                                     size_t len, struct kevo_task **out,
                                                     char **out_msg);
KEVO_NODISCARD enum kevo_status kevo_candidate_load(const struct kevo_task *task,
                                                    const char *path, struct kevo_task **out,
                                                    char **out_msg);
void kevo_task_free(struct kevo_task *t);

/* 1 if FLAG may appear in a `flags` directive of a candidate in this language. Allowed:
 * CUDA: -use_fast_math, -ftz=true|false, -prec-div=true|false, -prec-sqrt=true|false,
 *       -fmad=true|false, -maxrregcount=N (16..255), -lineinfo, -restrict, -extra-device-vectorization;
 * C:    -O1 -O2 -O3 -Ofast -march=native -mtune=native -ffast-math -funroll-loops
 *       -fopenmp -fno-math-errno -fno-trapping-math -fomit-frame-pointer. */
int kevo_flag_allowed(enum kevo_lang lang, const char *flag);

/*
 * The environment of one workload: size values, then parameter values. Evaluates every
 * expression of the task under it.
 */
struct kevo_env {
    int n;
    char *names[64];              /* borrowed from the task/candidate */
    int64_t values[64];
};

/*
 * Build the environment of task->workloads[w] plus the candidate's params (cand may be
 * NULL; param_values may be NULL for the defaults, else cand->n_params values).
 * Returns KEVO_ERR_OVERFLOW/PARSE with *out_msg naming the line on a bad expression.
 */
KEVO_NODISCARD enum kevo_status kevo_task_env(const struct kevo_task *task, int w,
                                              const struct kevo_task *cand,
                                              const int64_t *param_values,
                                              struct kevo_env *env, char **out_msg);
/* What kevo_task_each_env calls for each environment; sfx names it for messages
 * (" for the workload at line 4 of task.c with B=128"). Non-OK stops the walk. */
typedef enum kevo_status (*kevo_env_visit_fn)(void *user, const struct kevo_env *env,
                                              const char *sfx);
/*
 * Call visit for every environment a file is checked under when it is parsed: a task's
 * (cand NULL) every workload, holdouts included; a candidate's under the task's visible
 * workloads only (no message may reveal a held-out size) with its param combinations, all
 * of them or, past a budget counted in `cost` per visit, the defaults and each value alone.
 * Returns the first non-OK status of visit; *out_msg is set only when an environment
 * itself could not be built.
 */
KEVO_NODISCARD enum kevo_status kevo_task_each_env(const struct kevo_task *task,
                                                   const struct kevo_task *cand, long cost,
                                                   kevo_env_visit_fn visit, void *user,
                                                   char **out_msg);
/* Evaluate an expression text under env. */
KEVO_NODISCARD enum kevo_status kevo_env_eval(const struct kevo_env *env, const char *text,
                                              int64_t *out, char **out_msg);
/* Number of elements of a tensor under env (product of its shape, overflow-checked). */
KEVO_NODISCARD enum kevo_status kevo_tensor_numel(const struct kevo_tensor_decl *t,
                                                  const struct kevo_env *env, int64_t *out,
                                                  char **out_msg);
/* The tolerance for output `name` (falls back to the all-outputs line, then dtype default). */
void kevo_task_tol(const struct kevo_task *task, const char *name, enum kevo_dtype dt,
                   double *rtol, double *atol);

#endif

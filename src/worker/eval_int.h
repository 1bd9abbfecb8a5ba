/*
 * eval_int - what the files of the evaluation share: eval.c (request, module cache,
 * compile, resources, orchestration, result), eval_wl.c (one workload: guarded buffers,
 * plans, runs and the correctness checks), eval_time.c (the timing phase), eval_dump.c
 * (the dump) and eval_record.c (verdicts, failures, JSON helpers: below the others).
 * Private to them; the contract is eval.h.
 *
 * Ownership: struct kevo_ev lives for one kevo_eval_run; struct kevo_wl for one workload
 * phase (set up, used, freed with kevo_eval_wl_free). A candidate's failure is recorded
 * with kevo_eval_wl_fail (the first verdict wins) and the functions return KEVO_OK, so
 * callers check `st || x->verdict` after each step; KEVO_ERR_DEVICE means the context is
 * lost (the verdict, crash or timeout, is recorded too).
 */
#ifndef KEVO_EVAL_INT_H
#define KEVO_EVAL_INT_H

#include "worker/backend.h"
#include "base/buf.h"
#include "worker/eval.h"
#include "kevo.h"
#include "core/rules.h"
#include "core/task.h"
#include "core/verify.h"
#include <jansson.h>
#include <stdint.h>

#define GUARD_BYTES   1024                /* each side of every buffer; a multiple of 256 */
#define LOG_CAP       (16u << 10)         /* compile log kept in the result */
#define ERR_CAP       (64u << 10)         /* backend and error messages */
#define MAX_TRIALS    100                 /* correctness trials per workload, at most */
#define MAX_SETS      4                   /* rotating input sets for timing, at most */
#define REPEAT_MIN    8                   /* runs after the last trial, at least, */
#define REPEAT_MAX    32                  /*   and at most (eval_wl.c wl_repeats) */
#define SMALL_OUTPUT  KEVO_VERIFY_SMALL   /* outputs this small are judged across trials */
#define CACHE_SLOTS   8                   /* compiled modules kept per process */
#define TIMING_SALT   0x7431D3A5E11C0DE5ull  /* timing-set seeds differ from trial seeds */
#define SEAL_SALT     0x5EA1ED0B5C0DE5A1ull  /* seal keys differ from input seeds */
#define DEFAULT_CAP_S 2.0                 /* timing cap per kernel and workload, seconds */
#define SOL_MARGIN    0.03                /* minimum noise margin of the implausible test */

struct kevo_gbuf {                    /* one guarded device buffer: [guard | data | guard] */
    uint64_t base, data;              /* the allocation; base + GUARD_BYTES (256-aligned) */
    size_t bytes, total;              /* data bytes; allocation bytes */
};

struct kevo_tinfo {                   /* one tensor under the current workload */
    const struct kevo_tensor_decl *decl;
    int64_t numel, dims[KEVO_MAX_DIMS];
    size_t bytes;
};

struct kevo_side {                    /* the buffers and resolved plan of one launch context */
    struct kevo_gbuf *buf;            /* [n_t]; unused slots stay zero */
    struct kevo_call *calls;          /* the plan with every expression evaluated */
    int n_calls;
};

struct kevo_plan {                    /* a compiled program: the reference's or the candidate's */
    const struct kevo_task *src;
    struct kevo_module *mod;          /* owned by the module cache ... */
    struct kevo_module *owned;        /* ... unless it could not be cached: then here */
    const char **ent;                 /* the module's entries: distinct kernels, first use */
    int n_ent;
    struct kevo_cproto *protos;       /* [src->n_launches] each kernel's declared parameters
                                         (core/rules.h), checked at every resolved launch */
};

struct kevo_ev {
    double t_compile, t_verify, t_time;   /* seconds spent in each phase ("phases_s") */
    struct kevo_backend *b;
    const struct kevo_eval_req *req;
    struct kevo_task *task;           /* parsed from req->task_text */
    struct kevo_task *cand_parsed;    /* parsed from req->cand_text; NULL for self */
    const struct kevo_task *cand;     /* == task when the reference is the candidate */
    int self;                         /* evaluating the reference itself */
    int trials;                       /* req->trials within [3, MAX_TRIALS] */
    struct kevo_plan ref, can;        /* self: can is a copy of ref (one module) */
    uint32_t canary;                  /* guard pattern, derived from the secret seed */
    struct kevo_device_info info;
    struct kevo_buf err;              /* the backend's message of the last call */
    struct kevo_buf msg;              /* why the evaluation could not run (non-OK status) */
    char *compile_log;                /* the candidate's, capped at LOG_CAP */
    enum kevo_verdict verdict;        /* the overall verdict so far (first failure wins) */
    json_t *evidence;                 /* ... its evidence */
    char *message;                    /* ... its message */
    json_t *resources, *wls;          /* result arrays under construction */
    json_t *profile;                  /* the raw profile ("profile": 1), or NULL */
};

struct kevo_wl {                      /* one workload under evaluation */
    int w;                            /* index into task->workloads */
    char desc[256];                   /* "workload 0 (M=4096 N=8192)", for messages */
    json_t *j;                        /* its entry in "workloads" (borrowed) */
    struct kevo_env env_ref;          /* sizes */
    struct kevo_env env_cand;         /* sizes and the candidate's params */
    int n_t;                          /* tensors: the task's, then the candidate's scratch */
    int n_task;                       /* the task's */
    struct kevo_tinfo *t;             /* [n_t] */
    struct kevo_side ref, cand;       /* the reference's buffers; the candidate's (set 0) */
    struct kevo_side *sets, *rsets;   /* while timing: the rotating sets (borrowed), [n_sets] */
    int n_sets;
    struct kevo_gen *gen;             /* [n_t] each input's INIT under this workload */
    uint64_t *ref_key;                /* [n_t] the key each reference output is sealed with */
    uint64_t *hold;                   /* [n_t] device copies of run A's outputs (verify only) */
    struct kevo_judge_res *jr, *jb;   /* [n_t] this trial: A vs ref (with B); B vs ref */
    unsigned char tmp[2 * GUARD_BYTES + 256];   /* download scratch for the guard checks */
    uint64_t *ref_hash, *cand_hash;   /* [n_t] outputs of <= SMALL_OUTPUT elements: */
    unsigned char *ref_changed;       /*   did they change from one trial to the next */
    unsigned char *cand_changed;
    enum kevo_verdict verdict;        /* the workload's verdict (first failure wins) */
    json_t *evidence;
    char *message;
};

static inline int is_out(const struct kevo_tinfo *t) { return t->decl->role == KEVO_ROLE_OUTPUT; }
static inline int is_in(const struct kevo_tinfo *t) { return t->decl->role == KEVO_ROLE_INPUT; }

/* ---- eval_record.c: JSON helpers ---- */

/* A number, or "nan"/"inf"/"-inf" (JSON has no non-finite numbers). */
json_t *kevo_eval_jnum(double v);
/* An array of n integers. */
json_t *kevo_eval_jdims(const int64_t *d, int n);
/* text under env into *out; 0 on success (the failure's message is dropped). */
int kevo_eval_env_value(const struct kevo_env *env, const char *text, int64_t *out);

/* {NAME: value} of the workload's sizes. */
json_t *kevo_eval_wl_sizes(const struct kevo_ev *e, const struct kevo_wl *x);

/* ---- eval_record.c: verdicts and statuses ---- */

/* Record a workload's verdict; the first one wins, later ones are dropped. Takes the
 * evidence reference (NULL: {}). */
void kevo_eval_wl_fail(struct kevo_wl *x, enum kevo_verdict v, json_t *evidence, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));
/* The same for the evaluation as a whole (compile errors; the first workload failure). */
void kevo_eval_fail(struct kevo_ev *e, enum kevo_verdict v, json_t *evidence, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Set e->msg (why kevo could not evaluate) and return st. */
KEVO_NODISCARD enum kevo_status kevo_eval_error(struct kevo_ev *e, enum kevo_status st,
                                                const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A backend failure of the candidate as a verdict: launch/compile -> KEVO_OK with the
 * verdict set; timeout/fault -> KEVO_ERR_DEVICE with the verdict set; anything else is
 * kevo's own failure, returned with e->msg set. */
KEVO_NODISCARD enum kevo_status kevo_eval_cand_fail(struct kevo_ev *e, struct kevo_wl *x,
                                                    enum kevo_status st, const char *phase);
/* The same for the reference: its launch/compile failures are the task's fault
 * (KEVO_ERR_INVALID) unless the reference is the one being evaluated. */
KEVO_NODISCARD enum kevo_status kevo_eval_ref_fail(struct kevo_ev *e, struct kevo_wl *x,
                                                   enum kevo_status st, const char *phase);

/* ---- eval_wl.c: buffers, plans, workloads ---- */

/* Index of kernel `name` among the plan's entries, or -1. */
int kevo_eval_entry_of(const struct kevo_plan *p, const char *name);
/* Guarded buffers for every tensor of a side (the reference's: the task's tensors; the
 * candidate's: also its scratch) and the plan resolved against them. A buffer that cannot
 * be allocated is a launch_error verdict when it is the candidate's scratch, else kevo's
 * error (e->msg); with `spare` (a timing set) its status is only returned, nothing
 * recorded, and the caller decides (fewer sets, or whose failure it is). */
KEVO_NODISCARD enum kevo_status kevo_eval_side_alloc(struct kevo_ev *e, struct kevo_wl *x,
                                                     struct kevo_side *s, int is_ref, int spare);
void kevo_eval_side_free(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s);
/* Environments, tensor sizes, INIT specs, and both sides of workload w. */
KEVO_NODISCARD enum kevo_status kevo_eval_wl_setup(struct kevo_ev *e, struct kevo_wl *x, int w);
/* Free everything of x (also after a failed setup) and zero it. */
void kevo_eval_wl_free(struct kevo_ev *e, struct kevo_wl *x);

/* ---- eval_wl.c: runs and checks ---- */

/* Generate the inputs for seed in place on side a and (unless NULL) side b. */
KEVO_NODISCARD enum kevo_status kevo_eval_put_inputs(struct kevo_ev *e, struct kevo_wl *x,
                                                     uint64_t seed, struct kevo_side *a,
                                                     struct kevo_side *b);
/* Fill every output and scratch buffer of s with poison `which` (0 = A, 1 = B). */
KEVO_NODISCARD enum kevo_status kevo_eval_poison(struct kevo_ev *e, struct kevo_wl *x,
                                                 struct kevo_side *s, int which);
/* Run the reference on s (poisoned first), then seal its outputs: output k under a key
 * derived from `key` (kept in x->ref_key[k]), so they wait in device memory as noise. */
KEVO_NODISCARD enum kevo_status kevo_eval_run_ref(struct kevo_ev *e, struct kevo_wl *x,
                                                  struct kevo_side *s, uint64_t key);
/* Every guard of s intact, else out_of_bounds (run names the run in the evidence). */
KEVO_NODISCARD enum kevo_status kevo_eval_check_guards(struct kevo_ev *e, struct kevo_wl *x,
                                                       struct kevo_side *s, const char *run);
/* The inputs of s still hold what seed generated, else input_mutated. */
KEVO_NODISCARD enum kevo_status kevo_eval_check_inputs(struct kevo_ev *e, struct kevo_wl *x,
                                                       struct kevo_side *s, uint64_t seed,
                                                       const char *run);
/* Judge output k: a (and b, unless 0) against the reference's sealed output on side ref,
 * under the task's tolerance (backend `judge`). */
KEVO_NODISCARD enum kevo_status kevo_eval_judge(struct kevo_ev *e, struct kevo_wl *x, int k,
                                                uint64_t a, uint64_t b,
                                                const struct kevo_side *ref,
                                                struct kevo_judge_res *res);
/* A failed comparison c of output k is a mismatch (with `note` as evidence.message when
 * given); returns 1 then, 0 when c passed. */
int kevo_eval_judge_fail(const struct kevo_ev *e, struct kevo_wl *x, int k,
                         const struct kevo_cmp *c, const char *note);
/* The correctness protocol on workload x: trials until the first failure, then the repeats
 * on the last trial's inputs (eval_wl.c wl_repeats). */
KEVO_NODISCARD enum kevo_status kevo_eval_wl_verify(struct kevo_ev *e, struct kevo_wl *x);

/* ---- eval_dump.c ---- */

/* Write the inputs and the reference's (unsealed) outputs of side s, and a manifest, to
 * DIR/w<index>/ (DIR = the request's dump_dir). KEVO_ERR_IO with e->msg naming the path. */
KEVO_NODISCARD enum kevo_status kevo_eval_dump(struct kevo_ev *e, struct kevo_wl *x,
                                               struct kevo_side *s);

/* ---- eval_time.c ---- */

/* Time workload x (K rotating input sets, interleaved with the reference when asked),
 * re-check what the timed runs left, and add time, speed and SOL fields to x->j. */
KEVO_NODISCARD enum kevo_status kevo_eval_wl_time(struct kevo_ev *e, struct kevo_wl *x);

/* eval_profile.c: the candidate's hardware counters on x (set up), as the raw profile
 * *out ({"tool", "launches", "passes", "workload", "cost_s"}, or {"tool", "error",
 * "unavailable", ...} when they cannot be collected: the verdict stands). A fault while
 * profiling is the candidate's crash (x's verdict). */
KEVO_NODISCARD enum kevo_status kevo_eval_wl_profile(struct kevo_ev *e, struct kevo_wl *x,
                                                     json_t **out);

#endif

/*
 * rules - what an evaluation refuses before it runs anything, decided from the files' text
 * alone: each launch (call) line under one environment (a workload's sizes, a candidate's
 * param values) against its kernel's parameters as declared in the source (core/cproto),
 * and, for CUDA, against the grid, block and shared-memory limits every GPU shares. The
 * worker applies kevo_rules_launch to each launch it resolves (a bad one is the
 * candidate's launch_error) and `kevo check` applies it under every environment a file is
 * checked in (kevo_rules_check), so the two refuse the same launches, with the same words.
 * Pure host code; the backends still check everything again at launch with what only the
 * device knows (a kernel's register-limited block size, the device's opt-in shared memory).
 */
#ifndef KEVO_RULES_H
#define KEVO_RULES_H

#include "kevo.h"
#include "core/cproto.h"
#include "core/task.h"

#include <stddef.h>
#include <stdint.h>

/* The largest tensor (or scratch) kevo allocates, in bytes: 1 TiB. */
#define KEVO_TENSOR_MAX_BYTES ((size_t)1 << 40)
/* The most dynamic shared memory one CUDA block can opt in to on any GPU (227 KiB on
 * sm_90 and sm_100; others allow less, which only the device can tell). */
#define KEVO_RULES_SMEM_MAX 232448

/*
 * The declared parameters of each launch's kernel in src: (*out)[i] for src->launches[i],
 * with n_params -1 where kevo cannot find the kernel in the text (a template, a macro:
 * left to the backend at launch). KEVO_ERR_NOMEM is the only failure. Free with
 * kevo_rules_protos_free(*out, src->n_launches).
 */
KEVO_NODISCARD enum kevo_status kevo_rules_protos(const struct kevo_task *src,
                                                  struct kevo_cproto **out);
void kevo_rules_protos_free(struct kevo_cproto *protos, int n);   /* NULL: no-op */

/*
 * Launch i of src (task's, or a candidate's against task) under env, with proto from
 * kevo_rules_protos (NULL or n_params -1: unknown). 0 when it keeps every rule; else 1
 * with the first broken one in why ("argument 4 (N*10000000 = 41943040000000) does not fit
 * parameter 4 of 'f', 'int' (-2147483648..2147483647)"):
 *   - the number of arguments is the kernel's; a tensor goes to a pointer and a value to
 *     what kevo knows is not one (a typedef it does not know is not judged); a tensor map
 *     to neither a pointer nor a number, and it keeps kevo_rules_tmap (at most
 *     KEVO_RULES_TMAPS_PER_LAUNCH of them);
 *   - each integer argument (an expression, an integer scalar) fits its parameter: C
 *     types by their range (LP64), CUDA parameters by their size as signed values, as the
 *     CUDA backend passes them;
 *   - CUDA: block within 1024 x 1024 x 64 and 1024 threads, grid within 2^31-1 x 65535 x
 *     65535, smem at most KEVO_RULES_SMEM_MAX.
 */
int kevo_rules_launch(const struct kevo_task *task, const struct kevo_task *src, int i,
                      const struct kevo_cproto *proto, const struct kevo_env *env, char *why,
                      size_t n);

/*
 * A tensor map as the TMA unit takes it (cuTensorMapEncodeTiled), innermost dimension
 * first. rank 0: the tensor cannot be described under these sizes (a row pitch not a
 * multiple of 16 bytes, one at or past 2^40 bytes): the kernel gets 128 zero bytes and
 * must not use them (docs/task-format.md says so; it tests the sizes, as it must anyway).
 */
struct kevo_tmap_spec {
    int rank;                     /* 1..KEVO_TMAP_MAX_RANK, or 0 (see above) */
    int swizzle;                  /* bytes: 0, 32, 64, 128 */
    enum kevo_dtype dtype;
    uint64_t dims[KEVO_TMAP_MAX_RANK];          /* elements */
    uint64_t strides[KEVO_TMAP_MAX_RANK - 1];   /* bytes, of dims[1..] */
    uint32_t box[KEVO_TMAP_MAX_RANK];
};

#define KEVO_RULES_TMAPS_PER_LAUNCH 8   /* tensor-map arguments of one launch, at most */

/*
 * Tensor map m of src under env into *out. 0 when it keeps the rules; else 1 with why:
 * its box entries 1..256, the box's inner row a multiple of 16 bytes and, with a swizzle,
 * at most the swizzle's span; a shape view with the tensor's element count, every
 * dimension below 2^32. A pitch the TMA unit cannot take is not an error (rank 0).
 */
int kevo_rules_tmap(const struct kevo_task *task, const struct kevo_task *src, int m,
                    const struct kevo_env *env, struct kevo_tmap_spec *out, char *why, size_t n);

/*
 * `kevo check`: every launch of cand (or of task when cand is NULL) and every tensor it
 * declares, under every environment kevo_task_each_env gives: the launch rules above and
 * each tensor's bytes at most KEVO_TENSOR_MAX_BYTES. KEVO_ERR_INVALID with *out_msg
 * "PATH:LINE: error: launch of 'f': ... for the workload at line 4 of task.c" for the first
 * broken rule (caller frees with kevo_free); KEVO_OK when all hold.
 */
KEVO_NODISCARD enum kevo_status kevo_rules_check(const struct kevo_task *task,
                                                 const struct kevo_task *cand, char **out_msg);

#endif

/*
 * backend_cuda - private: the parts of backend_cuda.c that need no GPU, exposed so the
 * unit tests can check them on any machine. The backend itself is opened with
 * kevo_backend_open_cuda (backend.h); see docs/internals/backend_cuda.md.
 */
#ifndef KEVO_BACKEND_CUDA_H
#define KEVO_BACKEND_CUDA_H

#include "worker/backend.h"
#include "base/buf.h"
#include "kevo.h"

#define KEVO_TMAP_BYTES 128   /* a CUtensorMap */

/*
 * Marshal one launch argument into out[8] (8-byte aligned) at the width of the kernel's
 * parameter, param_size bytes, as cuFuncGetParamInfo reports it:
 *   PTR   needs an 8-byte parameter;
 *   INT   fits a 1/2/4/8-byte parameter if it lies in the SIGNED range of that width
 *         (parameter info carries no signedness, so unsigned values above the signed
 *         maximum are refused rather than guessed);
 *   FLOAT goes into 4 (float), 8 (double) or 2 bytes (bf16 when v->dtype is KEVO_BF16,
 *         else IEEE half), rounded to nearest even; a finite value that overflows the
 *         narrower type is refused;
 *   TMAP  needs a KEVO_TMAP_BYTES parameter; nothing is written (its bytes come from the
 *         driver's encoder at launch).
 * KEVO_ERR_LAUNCH with a message in *err (may be NULL) naming the kernel, the argument
 * index and the numbers. Pure; thread-safe.
 */

KEVO_NODISCARD enum kevo_status
kevo_backend_cuda_marshal_arg(const struct kevo_val *v, int param_size, const char *kernel,
                              int index, void *out, struct kevo_buf *err);

/* IEEE binary16 / bfloat16 bits of x, rounded to nearest even (NaN stays NaN). */
uint16_t kevo_backend_cuda_half_bits(double x);
uint16_t kevo_backend_cuda_bf16_bits(double x);

/* One block's share of the device judge: struct kv_part of kernels/harness.cu, member for
 * member (8-byte members only, so both compilers lay it out the same). */
struct kevo_judge_part {
    int64_t n_bad, first_bad, worst;
    double max_abs, max_rel, sum_d2, sum_w2;
    int64_t unw_a, unw_a_first, unw_b, unw_b_first, diff_first, a_varies;
    double ref_lo, ref_hi, ref_amax;
};

/*
 * The host half of the judge: merge parts[0..n_parts) in block order (so the sums always
 * add up in the same order) into parts[0], and close them into *res as
 * kevo_verify_compare would. got/want and the hashes are left 0 (they need the data).
 * Pure; thread-safe.
 */
void kevo_backend_cuda_judge_merge(const struct kevo_judge_req *rq, struct kevo_judge_part *parts,
                                   int64_t n_parts, struct kevo_judge_res *res);

#endif

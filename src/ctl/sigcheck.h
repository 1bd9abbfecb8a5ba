/*
 * sigcheck - static check of launch/call lines against the kernel's own parameter list
 * in the source (count, pointer vs value, tensor dtype vs a recognised float pointee).
 * Used by `kevo check`; needs no GPU.
 */
#ifndef KEVO_SIGCHECK_H
#define KEVO_SIGCHECK_H

#include "kevo.h"
#include "core/task.h"

/*
 * Check every launch of cand (when not NULL) or else of task. KEVO_ERR_INVALID with
 * *out_msg ("path:line: error: launch of 'k' does not match its parameters ...", caller
 * frees with kevo_free) for the first mismatch; KEVO_OK when all match or a kernel's
 * parameter list cannot be found (templates, macros: checked at launch instead).
 */
KEVO_NODISCARD enum kevo_status kevo_sig_check(const struct kevo_task *task,
                                               const struct kevo_task *cand, char **out_msg);

#endif

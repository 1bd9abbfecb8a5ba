/*
 * rtc - CUDA source to CUBIN with NVRTC, in-process, plus the on-disk compile cache.
 * Needs no GPU and no driver, so `kevo check` and CI can compile every CUDA task.
 *
 * Options: --gpu-architecture=<arch> (a real sm_XX[a] target: CUBIN, not PTX),
 * -default-device, --std=c++17, -lineinfo, -I<cuda>/include, -I<cuda>/include/cccl,
 * -D<name>=<value> for params, then the candidate's allowed flags.
 *
 * Cache: <root>/cubin, root = $KEVO_CACHE_DIR, else $XDG_CACHE_HOME/kevo, else ~/.cache/kevo;
 * KEVO_NO_CACHE=1 disables. Key = SHA-256 of (format version, NVRTC version, arch, every
 * option, source). Entries are written to a temporary name and renamed (atomic). A corrupt
 * or foreign entry is ignored and rewritten.
 */
#ifndef KEVO_RTC_H
#define KEVO_RTC_H

#include "worker/backend.h"
#include "base/buf.h"
#include "kevo.h"

/*
 * Compile req for arch (e.g. "sm_90a"). On success *out_cubin (kevo_free) and *out_size.
 * KEVO_ERR_COMPILE with the NVRTC log in *log when the source does not compile; the log
 * is also filled on success (warnings). *out_cache_hit (may be NULL) tells whether the
 * cache answered.
 */
KEVO_NODISCARD enum kevo_status kevo_rtc_compile(const struct kevo_compile_req *req,
                                                   const char *arch, void **out_cubin,
                                                   size_t *out_size, struct kevo_buf *log,
                                                   int *out_cache_hit);
/* "13.0" etc. */
const char *kevo_rtc_version(void);

#endif

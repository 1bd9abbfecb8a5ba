/*
 * vmm - guarded device memory for the CUDA backend (private to backend_cuda.c).
 *
 * Every allocation is its own physical allocation (cuMemCreate) mapped into its own
 * reserved range of virtual addresses with a gap of unmapped addresses on each side, wide
 * enough that no 32-bit index of 8-byte elements from one buffer reaches any other mapping
 * (KEVO_VMM_GAP; smaller only if the device's address space will not hold it, and then
 * kevo_vmm_gap says so). The buffer's data ends where its mapping ends, so a store one
 * granule past it faults (CUDA_ERROR_ILLEGAL_ADDRESS) instead of landing in another
 * tensor, the sealed reference outputs or the harness's own buffers.
 *
 * Mapping costs tens of microseconds, so freed blocks are kept (up to KEVO_VMM_KEEP
 * blocks) and handed out again for the same mapped size. The caller makes the context
 * current. Not thread-safe: one worker thread drives a backend.
 */
#ifndef KEVO_VMM_H
#define KEVO_VMM_H

#include "base/buf.h"
#include "worker/cudrv.h"
#include "kevo.h"
#include <stddef.h>
#include <stdint.h>

#define KEVO_VMM_GAP ((uint64_t)1 << 35)   /* 32 GiB of unmapped addresses each side */
#define KEVO_VMM_KEEP 64                    /* freed blocks kept for reuse, at most */
#define KEVO_VMM_KEEP_BYTES ((size_t)4 << 30)   /* and their bytes, at most */

struct kevo_vmm;

/* KEVO_ERR_CUDA (with *err) when the device has no virtual memory management. */
KEVO_NODISCARD enum kevo_status kevo_vmm_open(const struct kevo_cudrv *d, CUdevice dev,
                                              struct kevo_vmm **out, struct kevo_buf *err);
/* Release every block (the context must still be current and alive to give memory back;
 * lost: the driver frees it with the context). NULL is a no-op. */
void kevo_vmm_close(struct kevo_vmm *v, int lost);

/* A guarded block of at least `bytes` (0 counts as 256); the address is 256-aligned and
 * address + round_up(bytes, 256) is the end of its mapping. */
KEVO_NODISCARD enum kevo_status kevo_vmm_alloc(struct kevo_vmm *v, size_t bytes,
                                               CUdeviceptr *out, struct kevo_buf *err);
/* Free what kevo_vmm_alloc returned; 0 if addr is not a live block (nothing done). */
int kevo_vmm_free(struct kevo_vmm *v, CUdeviceptr addr);

/* The mapping granularity: blocks are mapped in whole units of it. */
size_t kevo_vmm_granule(const struct kevo_vmm *v);

/* The gap in force (KEVO_VMM_GAP unless the address space forced a smaller one). */
uint64_t kevo_vmm_gap(const struct kevo_vmm *v);

#endif

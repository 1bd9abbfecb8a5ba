/*
 * eval_cache - the per-process cache of compiled modules inside eval.c.
 *
 * kevo_eval_run keeps the last few compiled modules (keyed by SHA-256 of the source,
 * entries, defines and flags, plus the backend they belong to) so a worker evaluating the
 * same reference again and again compiles it once. The cache is not thread-safe: a worker
 * evaluates one request at a time.
 *
 * A module belongs to its backend: call kevo_eval_cache_clear(b) before closing a backend
 * that kevo_eval_run has used, or a later backend allocated at the same address could be
 * handed a stale module. (The worker never closes its backend before exiting, so it need
 * not call it; tests do.) When the cache is full, entries of another backend are forgotten
 * without freeing their modules, since that backend may be closed already.
 */
#ifndef KEVO_EVAL_CACHE_H
#define KEVO_EVAL_CACHE_H

#include "worker/backend.h"

/* Free every cached module of backend b (b == NULL: forget all entries without freeing). */
void kevo_eval_cache_clear(struct kevo_backend *b);
/* Number of cached modules (tests). */
int kevo_eval_cache_count(void);

#endif

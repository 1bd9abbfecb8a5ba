/*
 * pool - the controller's side of the workers: spawn one worker process per device, send
 * a request with a deadline, watch it, SIGKILL and restart a worker that hangs, restart one
 * that died. A worker failure becomes a verdict (`timeout`, `crash`) in the reply, never a
 * failure of kevo; KEVO_ERR_WORKER is returned only when a worker cannot be started at all.
 */
#ifndef KEVO_POOL_H
#define KEVO_POOL_H

#include "kevo.h"
#include <jansson.h>

struct kevo_pool;

struct kevo_pool_opts {
    const char *exe;          /* the kevo binary to run as `exe __worker ...`; NULL: /proc/self/exe */
    const char *backend;      /* "cpu" or "cuda" */
    int n_devices;
    const int *devices;       /* device ordinals, n_devices of them */
    double start_timeout_s;   /* time allowed for a worker to answer its first ping */
};

KEVO_NODISCARD enum kevo_status kevo_pool_open(const struct kevo_pool_opts *o,
                                               struct kevo_pool **out, char **out_msg);
void kevo_pool_free(struct kevo_pool *p);   /* kills the workers */

/*
 * Send `req` (borrowed) to worker `slot` and wait up to deadline_s seconds for the reply.
 * On KEVO_OK *out_reply is the worker's reply object (caller decrefs). If the worker hangs
 * past the deadline it is killed and restarted and *out_reply is a synthesized reply with
 * status "ok" and result {"verdict":"timeout", "message", "evidence"} (core/result.h's
 * kevo_result_doc_new); if it dies, likewise with "crash" (exit status or signal in the
 * message, and in the evidence when the worker was not killed by the pool).
 */
KEVO_NODISCARD enum kevo_status kevo_pool_call(struct kevo_pool *p, int slot, json_t *req,
                                               double deadline_s, json_t **out_reply);
int kevo_pool_size(const struct kevo_pool *p);
/* Restarts so far (all slots), for tests and reports. */
int kevo_pool_restarts(const struct kevo_pool *p);

#endif

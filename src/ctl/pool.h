/*
 * pool - the controller's side of the workers: spawn one worker process per device, send
 * a request with a deadline, watch it, SIGKILL and restart a worker that hangs, restart one
 * that died. A worker failure becomes a verdict (`timeout`, `crash`) in the reply, never a
 * failure of kevo; KEVO_ERR_WORKER is returned only when a worker cannot be started at all.
 * Slots may also be remote: served by another MPI rank's pool through a link (relay.h).
 */
#ifndef KEVO_POOL_H
#define KEVO_POOL_H

#include "kevo.h"
#include <jansson.h>

struct kevo_pool;

/*
 * How the pool reaches slots whose worker runs in another process's pool (another MPI
 * rank: ctl/relay.h). call sends msg (borrowed, its "id" set) to slot rslot of rank and
 * waits for the reply, which that pool has made as this one would (a hung or dead worker
 * there is a timeout or crash verdict). KEVO_OK with *out_reply (caller decrefs);
 * KEVO_ERR_LOST when that rank is gone (the request may be sent elsewhere). Called from
 * the threads that make pool calls, concurrently.
 */
struct kevo_pool_link {
    void *ctx;
    KEVO_NODISCARD enum kevo_status (*call)(void *ctx, int rank, int rslot, json_t *msg,
                                            double deadline_s, json_t **out_reply);
};

/* A slot served elsewhere. */
struct kevo_pool_remote {
    int rank;                 /* the MPI rank that hosts its worker */
    int rslot;                /* the slot's index in that rank's pool */
    int device;               /* the device ordinal there */
    const char *host;         /* that rank's host name (copied) */
};

struct kevo_pool_opts {
    const char *exe;          /* the kevo binary to run as `exe __worker ...`; NULL: /proc/self/exe */
    const char *backend;      /* "cpu" or "cuda" */
    int n_devices;            /* local workers; 0 is allowed when n_remote > 0 */
    const int *devices;       /* device ordinals, n_devices of them */
    double start_timeout_s;   /* time allowed for a worker to answer its first ping */
    int rank;                 /* this process's MPI rank (0 without MPI), for kevo_pool_where */
    int n_remote;             /* slots served elsewhere, numbered after the local ones */
    const struct kevo_pool_remote *remote;   /* n_remote of them */
    const struct kevo_pool_link *link;       /* (borrowed; outlives the pool) with n_remote */
};

KEVO_NODISCARD enum kevo_status kevo_pool_open(const struct kevo_pool_opts *o,
                                               struct kevo_pool **out, char **out_msg);
void kevo_pool_free(struct kevo_pool *p);   /* kills the workers */

/*
 * Send `req` (borrowed) to worker `slot` and wait up to deadline_s seconds for the reply.
 * A remote slot (kevo_pool_remote) answers through the link; once its rank is lost every
 * call on it returns KEVO_ERR_LOST at once.
 * On KEVO_OK *out_reply is the worker's reply object (caller decrefs). If the worker hangs
 * past the deadline it is killed and restarted and *out_reply is a synthesized reply with
 * status "ok" and result {"verdict":"timeout", "message", "evidence"} (core/result.h's
 * kevo_result_doc_new); if it dies, likewise with "crash" (exit status or signal in the
 * message, and in the evidence when the worker was not killed by the pool).
 */
KEVO_NODISCARD enum kevo_status kevo_pool_call(struct kevo_pool *p, int slot, json_t *req,
                                               double deadline_s, json_t **out_reply);
int kevo_pool_size(const struct kevo_pool *p);
/*
 * Whether slot's worker can open its backend on its device (the "info" op; ping does not
 * open it): KEVO_OK with *out_name the device's name (kevo_free), else KEVO_ERR_NODEV with
 * *out_msg (kevo_free) saying why, or kevo's own failure.
 */
KEVO_NODISCARD enum kevo_status kevo_pool_probe(struct kevo_pool *p, int slot, double deadline_s,
                                                char **out_name, char **out_msg);
/*
 * Where slot runs: the MPI rank, the device ordinal there and the host's name (borrowed,
 * lives as long as the pool). KEVO_ERR_INVALID for a slot out of range.
 */
KEVO_NODISCARD enum kevo_status kevo_pool_where(const struct kevo_pool *p, int slot,
                                                int *out_rank, int *out_device,
                                                const char **out_host);
/* Restarts so far (all local slots: a remote rank's pool restarts its own), for tests and
 * reports. */
int kevo_pool_restarts(const struct kevo_pool *p);

#endif

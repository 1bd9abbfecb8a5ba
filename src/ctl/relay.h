/*
 * relay - kevo run across hosts (docs/cluster.md). The controller's pool reaches the
 * workers of other processes - the other ranks of an MPI job - through a hub, and each of
 * those processes serves the calls with a pool of its own, started exactly as the
 * controller starts its own. What travels is what the pool writes on a worker's pipe and
 * reads back (core/wire.h: the eval request, the worker's reply), each inside an envelope
 * that routes it. The transport is a vtable (struct kevo_relay_io): MPI in a build with MPI
 * (ctl/mpi_io.h), in-process queues in the tests. No MPI call is made here.
 *
 * Roles: rank 0 runs the controller and the hub (kevo_relay_hub_*); every other rank is a
 * host (kevo_relay_host_serve). The conversation, each message one JSON object:
 *   hub  -> host  START {"backend", "devices":[N...], "start_timeout_s", "controller":
 *                        {"pid", "host", "start"}}
 *   host -> hub   HELLO {"host", "pid", "start", "slots":[{"device":N, "name"}...]} or
 *                        {"host", "pid", "error"}: its workers were started and each opened
 *                        its device (kevo_pool_probe), or why not
 *   hub  -> host  CALL  {"call":N, "slot":S, "deadline_s":D, "msg":{the request}}
 *   host -> hub   REPLY {"call":N, "status":kevo_status, "reply":{the reply} (status 0)}
 *   host -> hub   BEAT  {} every beat interval while it serves
 *   hub  -> host  STOP  {}
 *   host -> hub   BYE   {} (its workers are stopped; it leaves)
 *
 * Faults. A host's pool turns a worker that hangs or dies into a verdict, as on one
 * machine. A host that dies or stops answering is noticed by the hub: silent for the
 * silence interval (no beat, no reply), a call unanswered past its deadline plus a grace,
 * or the transport naming it failed. It is then lost for good: its calls in flight return
 * KEVO_ERR_LOST (the run sends them elsewhere) and nothing more is sent to it, except a
 * STOP when it is heard again (a host that was only stalled then leaves). The hub sends to
 * a host only while it hears from it: under MPI a send to a dead peer can end the sender
 * (docs/cluster.md "Faults").
 *
 * Threads: the transport is used by one thread at a time, the hub's own thread (after
 * kevo_relay_hub_open returns) or the host's caller; the link's calls come from any
 * number of threads.
 */
#ifndef KEVO_RELAY_H
#define KEVO_RELAY_H

#include "kevo.h"
#include "ctl/pool.h"

#include <jansson.h>
#include <stddef.h>

#define KEVO_RELAY_BEAT_S    0.5    /* a host's beat interval */
#define KEVO_RELAY_SILENCE_S 10.0   /* a host silent this long is lost */
#define KEVO_RELAY_MAX_SLOTS 4096   /* slots of all hosts together */

/* Message kinds (the MPI tag under MPI). */
enum kevo_relay_kind {
    KEVO_RELAY_START = 1,
    KEVO_RELAY_HELLO,
    KEVO_RELAY_CALL,
    KEVO_RELAY_REPLY,
    KEVO_RELAY_BEAT,
    KEVO_RELAY_STOP,
    KEVO_RELAY_BYE,
    KEVO_RELAY_FAULT,     /* made by a transport, never sent: the peer `from` failed under
                             it; text says how */
    KEVO_RELAY_KIND_END
};

/* "start", "hello", ...; "?" for a kind out of range. */
const char *kevo_relay_kind_name(int kind);

/* One message received: from which rank, its kind, its text (owned: kevo_free). */
struct kevo_relay_msg {
    int from;
    int kind;
    char *text;
    size_t len;
};

struct kevo_relay_io {
    void *ctx;
    int rank;             /* this process's */
    int size;             /* ranks in all */
    /* Start sending text (copied) to rank `to`; it completes in the background, driven by
     * recv. A non-OK status: the transport refused it (the peer is then treated as lost). */
    KEVO_NODISCARD enum kevo_status (*send)(void *ctx, int to, int kind, const char *text,
                                            size_t len);
    /* The next message, waiting at most wait_s; KEVO_ERR_TIMEOUT when none came. */
    KEVO_NODISCARD enum kevo_status (*recv)(void *ctx, double wait_s,
                                            struct kevo_relay_msg *out);
    /* (optional) peer is lost: abandon what is still being sent to it. */
    void (*forget)(void *ctx, int peer);
};

/* ---- envelopes ---- */

/*
 * Parse a message of `kind` and check the fields its kind must have (above): KEVO_OK with
 * *out (caller decrefs), else KEVO_ERR_PARSE with *out_why naming the field (kevo_free).
 */
KEVO_NODISCARD enum kevo_status kevo_relay_decode(int kind, const char *text, size_t len,
                                                  json_t **out, char **out_why);
/* Send object m (borrowed) as kind: its compact JSON text. */
KEVO_NODISCARD enum kevo_status kevo_relay_send(const struct kevo_relay_io *io, int to,
                                                int kind, json_t *m);

/* ---- the hub (rank 0) ---- */

struct kevo_relay_hub;

struct kevo_relay_hub_opts {
    const char *backend;       /* "cpu" or "cuda": what every host starts */
    const int *devices;        /* each host's device ordinals (n_devices of them) */
    int n_devices;
    double start_timeout_s;    /* a worker's first ping there; 0: 60 */
    double silence_s;          /* a host silent this long is lost; 0: $KEVO_MPI_SILENCE_S,
                                  else KEVO_RELAY_SILENCE_S */
};

/*
 * Start the hosts: START to every other rank, their HELLOs awaited (a host that does not
 * answer in time is lost; one whose workers failed to start has no slot), then the hub's
 * thread. KEVO_OK even when no host has a slot (kevo_relay_hub_slots says so). io must
 * outlive the hub. Non-OK only for kevo's own failures, with *out_msg.
 */
KEVO_NODISCARD enum kevo_status kevo_relay_hub_open(const struct kevo_relay_io *io,
                                                    const struct kevo_relay_hub_opts *o,
                                                    struct kevo_relay_hub **out,
                                                    char **out_msg);
/* STOP to every host still heard, their BYEs awaited (at most a few seconds), the thread
 * joined. NULL: no-op. */
void kevo_relay_hub_free(struct kevo_relay_hub *h);
/* The hosts' slots, in rank order: their count, and slot i (its host name lives as long as
 * the hub). */
int kevo_relay_hub_slots(const struct kevo_relay_hub *h);
void kevo_relay_hub_slot(const struct kevo_relay_hub *h, int i, struct kevo_pool_remote *out);
/* The pool link that reaches the hosts through h (lives as long as h). */
const struct kevo_pool_link *kevo_relay_hub_link(struct kevo_relay_hub *h);
/*
 * Every host as a new array: [{"rank", "host", "pid", "slots":[{"device", "name"}],
 * "state": "ready" | "failed" (its workers did not start) | "lost" | "stopped", "why"
 * (failed or lost), "calls" (answered), "lost_calls" (in flight when it was lost: sent
 * elsewhere)}].
 */
json_t *kevo_relay_hub_ranks(struct kevo_relay_hub *h);
/* The entries of the hosts lost since the last call (a new array, [] when none): the run
 * shows them as events. */
json_t *kevo_relay_hub_news(struct kevo_relay_hub *h);

/* ---- a host (ranks 1..) ---- */

struct kevo_relay_host_opts {
    const char *exe;           /* the workers' binary; NULL: $KEVO_WORKER_EXE, else this one */
    double beat_s;             /* 0: KEVO_RELAY_BEAT_S */
};

/*
 * Serve the hub until it says STOP (or the controller is gone: a controller on this host
 * that died): wait for START, open a pool of the backend and devices it names (on failure,
 * HELLO with the error, then wait for STOP), answer each CALL on its slot with
 * kevo_pool_call, beat meanwhile. KEVO_OK after a STOP; *out_msg says why otherwise.
 */
KEVO_NODISCARD enum kevo_status kevo_relay_host_serve(const struct kevo_relay_io *io,
                                                      const struct kevo_relay_host_opts *o,
                                                      char **out_msg);

#endif

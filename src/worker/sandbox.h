/*
 * sandbox - private to the CPU backend: the processes that run candidate host code.
 *
 * A spawner process is forked when the backend opens (right after the shared arena is
 * mapped, before the worker holds any request, seed or reference output in its memory).
 * For each module it clones a runner with CLONE_PARENT, so the runner is the worker's own
 * child (waitpid, SIGSTOP/SIGCONT, PDEATHSIG all refer to the worker) while its memory is a
 * copy of the clean spawner, not of the worker. The runner drops into the sandbox (rlimits,
 * no capabilities, no fds but its channel, no-new-privs, seccomp filter), only then dlopens
 * the module, and serves RUN commands over a socketpair.
 *
 * The worker never runs candidate code. Between commands a runner is stopped (SIGSTOP),
 * so no thread the candidate left behind can work while the worker looks at memory.
 *
 * Guarded memory: the shared arena (the "guarded region") is inaccessible (PROT_NONE) in
 * a runner except its slot and the spans the worker opens for the next RUN
 * (kevo_runner_open): the blocks of that plan's own tensors. Any access elsewhere (a gap
 * between blocks, another tensor, the harness's sealed outputs) faults; the runner's fault
 * handler leaves the address in its slot before the signal kills it.
 * Not thread-safe: one worker thread drives the sandbox.
 */
#ifndef KEVO_SANDBOX_H
#define KEVO_SANDBOX_H

#include "worker/backend.h"
#include "worker/backend_cpu_shim.h"
#include "base/buf.h"
#include "kevo.h"
#include <stdint.h>
#include <sys/types.h>

struct kevo_sandbox_limits {
    uint64_t data_bytes;      /* RLIMIT_DATA of a runner (private memory; the arena is shared) */
    uint64_t cpu_seconds;     /* RLIMIT_CPU of a runner, summed over its threads */
    uint64_t nofile;          /* RLIMIT_NOFILE of a runner */
    uint64_t guard_base;      /* the guarded region (page-aligned; 0: none) */
    uint64_t guard_size;
};

/* A range of the guarded region a runner may read and write (page-aligned). */
struct kevo_span {
    uint64_t addr, len;
};
#define KEVO_SPANS_MAX 256    /* spans one kevo_runner_open may open */

/* The 64 bytes of arena memory a runner reports in (kevo_runner_start's `slot`). */
struct kevo_runner_slot {
    volatile int32_t entry;       /* entry running now: >= 0, -1 idle, -2 loading */
    volatile int32_t fault_sig;   /* SIGSEGV/SIGBUS the fault handler saw, else 0 */
    volatile uint64_t fault_addr; /* the address it faulted on */
    volatile int32_t fault_write; /* 1 a store, 0 a load, -1 unknown */
};
_Static_assert(sizeof(struct kevo_runner_slot) <= 64, "a runner slot is 64 bytes of arena");

struct kevo_sandbox;
struct kevo_runner;

/* Fork the spawner. KEVO_ERR_SYSTEM (with *err) when the OS refuses. */
KEVO_NODISCARD enum kevo_status kevo_sandbox_open(const struct kevo_sandbox_limits *lim,
                                                  struct kevo_sandbox **out,
                                                  struct kevo_buf *err);
/* Kill and reap the spawner. Runners must have been freed first. NULL is a no-op. */
void kevo_sandbox_free(struct kevo_sandbox *sb);

/* How a wait on a runner ended. */
enum kevo_run_end {
    KEVO_RUN_OK = 0,          /* the reply came */
    KEVO_RUN_ARGS,            /* the shim refused a call (wrong argument count) */
    KEVO_RUN_LOAD,            /* the runner could not load the module (message in *err) */
    KEVO_RUN_SETUP,           /* the sandbox could not be set up (message in *err) */
    KEVO_RUN_SIGNALED,        /* killed by signal `sig` */
    KEVO_RUN_EXITED,          /* exited with `code` */
    KEVO_RUN_TIMEOUT,         /* the deadline passed; the runner was killed */
    KEVO_RUN_BROKEN           /* spoke nonsense or closed its channel; killed */
};

struct kevo_run_result {
    enum kevo_run_end end;
    int sig, code;            /* SIGNALED / EXITED */
    int entry;                /* entry running when it ended: >= 0, -1 idle, -2 loading */
    int call;                 /* ARGS: index of the refused call */
    double t_reply;           /* OK/ARGS: kevo_now() when the reply was read */
    int fault_known;          /* SIGNALED by SIGSEGV/SIGBUS and the handler saw where: */
    uint64_t fault_addr;      /*   the address */
    int fault_write;          /*   1 a store, 0 a load, -1 unknown */
};

/*
 * Start a runner for the shared object so_path exporting n_entries shim entries and wait
 * (until the absolute kevo_now() `deadline`) for it to report ready. `slot` is a
 * struct kevo_runner_slot of arena memory, alone on its page(s) of the guarded region:
 * the runner reports the running entry and its last fault there. On
 * anything but KEVO_RUN_OK in *res the runner is gone and *out is NULL.
 */
KEVO_NODISCARD enum kevo_status kevo_runner_start(struct kevo_sandbox *sb, const char *so_path,
                                                  int n_entries, uint64_t slot, double deadline,
                                                  struct kevo_runner **out,
                                                  struct kevo_run_result *res,
                                                  struct kevo_buf *err);
/* Parameter descriptors of entry e as the runner reported them (n_params in *n). */
const struct kevo_shim_param *kevo_runner_params(const struct kevo_runner *r, int e, int *n);
/* 1 while the runner process exists and answers. */
int kevo_runner_alive(const struct kevo_runner *r);

/* SIGCONT a stopped runner (kevo_runner_send does it too; time() does it before its clock). */
void kevo_runner_resume(struct kevo_runner *r);

/*
 * Make exactly `spans` (inside the guarded region, page-aligned, at most KEVO_SPANS_MAX)
 * readable and writable in the runner, closing the spans of the previous call, and wait
 * for its acknowledgement until `deadline`. Faults come back in *res as for
 * kevo_runner_wait; the return value is only for the worker's own failures.
 */
KEVO_NODISCARD enum kevo_status kevo_runner_open(struct kevo_runner *r,
                                                 const struct kevo_span *spans, int n,
                                                 double deadline, struct kevo_run_result *res);

/* Continue the runner and send one RUN: `passes` times every call in order. */
KEVO_NODISCARD enum kevo_status kevo_runner_send(struct kevo_runner *r,
                                                 const struct kevo_call *calls, int n_calls,
                                                 int passes, struct kevo_buf *err);
/*
 * Wait for the reply to the last RUN until `deadline`, then stop the runner. Faults and
 * timeouts come back in *res (the runner is then gone); the return value is only for the
 * worker's own failures.
 */
KEVO_NODISCARD enum kevo_status kevo_runner_wait(struct kevo_runner *r, double deadline,
                                                 struct kevo_run_result *res);
/* Kill (if alive), reap and release. NULL is a no-op. */
void kevo_runner_free(struct kevo_runner *r);

#endif

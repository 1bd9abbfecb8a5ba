/*
 * pool - the controller's side of the workers (pool.h; docs/internals/worker.md).
 *
 * One slot per device, each holding one worker process started as
 *   exe __worker --backend B --device N --fd-in 3 --fd-out 4
 * with the request pipe on fd 3 and the reply pipe on fd 4. Each worker leads its own
 * process group, so one kill(-pgid, SIGKILL) also ends what it started (compilers, the CPU
 * runner). The group is always killed before the leader is reaped: while the leader is an
 * unreaped zombie its pid, and so the group id, cannot be given to another process.
 *
 * A call that outlives its deadline kills the worker and restarts it; a worker that dies
 * is reaped (for its exit status or signal) and restarted; both become a synthesized reply
 * with verdict `timeout` or `crash`. A worker that answers and announces it is exiting
 * (device fault) is reaped at once and restarted at the next call.
 *
 * A remote slot has no process here: its worker runs in another MPI rank's pool, which
 * keeps its deadline and restarts it; the pool only forwards the call through its link
 * (ctl/relay.h) and forgets the slot once the link says its rank is lost.
 *
 * Threads: calls on different slots may run concurrently; calls on one slot must not.
 * A worker dies with the thread that started it (PR_SET_PDEATHSIG follows the creating
 * thread), so open the pool and make calls from threads that live as long as the pool.
 */
#include "ctl/pool.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/clock.h"
#include "core/result.h"
#include "core/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POOL_START_TIMEOUT_S 60.0   /* first ping; the backend is not opened by it */
#define POOL_DEADLINE_S      600.0  /* a call with no positive deadline */
#define POOL_EXIT_GRACE_S    2.0    /* a worker that closed its pipe gets this to exit */
#define POOL_MSG_MAX         4096

struct pool_worker {
    int device;
    pid_t pid;                /* also its process group; 0: not running */
    int fd_req;               /* write end of the request pipe; -1 when closed */
    int fd_rep;               /* read end of the reply pipe; -1 when closed */
    int started;              /* 1 once it ran: a later spawn is a restart */
    int remote;               /* 1: served by another rank through the link */
    int rank, rslot;          /* remote: where */
    char *host;               /* remote: that rank's host name */
    atomic_int lost;          /* remote: its rank is gone */
};

struct kevo_pool {
    char *exe;
    char *backend;
    double start_timeout_s;
    int n;                    /* slots: n_local local ones, then the remote ones */
    int n_local;
    int rank;                 /* this process's MPI rank */
    char host[256];           /* this host's name */
    const struct kevo_pool_link *link;
    struct pool_worker *w;
    atomic_int restarts;
    atomic_llong next_id;
};

/* ---- process control ---- */

/* Path of the running executable, for exe == NULL. */
static enum kevo_status self_exe(char **out)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);

    *out = NULL;
    if (n <= 0)
        return KEVO_ERR_SYSTEM;
    path[n] = '\0';
    *out = kevo_strdup(path);
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

/* One past the highest fd a child might have to close, computed before fork. */
static int fd_limit(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < 65536)
        return (int)rl.rlim_cur;
    return 65536;
}

/* Report errno to the parent over fd and die; the parent reads it as "exec failed". */
static void child_fail(int fd)
{
    int err = errno;

    if (write(fd, &err, sizeof err) < 0)
        _exit(127);
    _exit(127);
}

/*
 * In the forked child: only async-signal-safe calls from here to execv. Protocol pipes go
 * to fds 3 and 4 (moved above 10 first, so that dup2 never meets its own source and always
 * clears close-on-exec), the exec-error pipe to 5 (close-on-exec: it closes when exec
 * succeeds), everything else is closed.
 */
static void child_exec(char *const argv[], int fd_in, int fd_out, int fd_err, pid_t parent,
                       int max_fd)
{
    struct sigaction sa;
    sigset_t none;

    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)   /* the controller died before prctl: no orphans */
        _exit(127);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &sa, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int a = fcntl(fd_in, F_DUPFD, 10);
    int b = fcntl(fd_out, F_DUPFD, 10);
    int e = fcntl(fd_err, F_DUPFD_CLOEXEC, 10);
    if (a < 0 || b < 0 || e < 0)
        child_fail(fd_err);
    if (dup2(a, 3) < 0 || dup2(b, 4) < 0 || dup2(e, 5) < 0)
        child_fail(e);
    if (fcntl(5, F_SETFD, FD_CLOEXEC) < 0)
        child_fail(5);
    if (close_range(6, ~0u, 0) < 0) {
        for (int fd = 6; fd < max_fd; fd++)
            close(fd);
    }
    execv(argv[0], argv);
    child_fail(5);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* 1 when the worker has exited (it stays a zombie: WNOWAIT), 0 while it runs. */
static int worker_exited(const struct pool_worker *w)
{
    siginfo_t si;

    memset(&si, 0, sizeof si);
    while (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
        if (errno != EINTR)
            return 1;   /* ECHILD: not ours to wait for any more; treat as gone */
    }
    return si.si_pid == w->pid;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

/*
 * Stop worker w for good and return its wait status. grace_s > 0 first lets it finish
 * exiting on its own, so that its real status is known; then its whole process group is
 * killed (before the leader is reaped, see the top of the file) and the leader reaped.
 * *out_killed is 1 when the leader was still running and had to be killed.
 */
static int worker_stop(struct pool_worker *w, double grace_s, int *out_killed)
{
    int ws = 0, killed = 0;

    close_fd(&w->fd_req);
    close_fd(&w->fd_rep);
    if (w->pid > 0) {
        double end = kevo_now() + grace_s;
        while (!worker_exited(w) && kevo_now() < end)
            sleep_ms(2);
        killed = !worker_exited(w);
        kill(-w->pid, SIGKILL);
        while (waitpid(w->pid, &ws, 0) < 0 && errno == EINTR)
            ;
        w->pid = 0;
    }
    if (out_killed)
        *out_killed = killed;
    return ws;
}

/* "worker exited with status 3 (device fault)", "worker killed by signal 11 (SIGSEGV)". */
static void describe_exit(int ws, int killed, char *buf, size_t n)
{
    static const char *const why[] = {
        "", " (protocol stream broken)", " (bad options or protocol fds)", " (device fault)",
    };

    if (killed)
        snprintf(buf, n, "worker closed its reply pipe without exiting and was killed");
    else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
        snprintf(buf, n, "worker exited with status 127 (could not run)");
    else if (WIFEXITED(ws))
        snprintf(buf, n, "worker exited with status %d%s", WEXITSTATUS(ws),
                 WEXITSTATUS(ws) < 4 ? why[WEXITSTATUS(ws)] : "");
    else if (WIFSIGNALED(ws))
        snprintf(buf, n, "worker killed by signal %d (SIG%s)", WTERMSIG(ws),
                 sigabbrev_np(WTERMSIG(ws)) ? sigabbrev_np(WTERMSIG(ws)) : "?");
    else
        snprintf(buf, n, "worker ended with wait status %#x", (unsigned)ws);
}

/* ---- spawn ---- */

/* Fork and exec the worker; on failure the message says why (exec errno included). */
static enum kevo_status spawn_exec(struct kevo_pool *p, struct pool_worker *w,
                                   struct kevo_buf *msg)
{
    int req[2] = { -1, -1 }, rep[2] = { -1, -1 }, ep[2] = { -1, -1 };
    enum kevo_status st = KEVO_OK;
    char dev[16];
    int err = 0, max_fd = fd_limit();
    pid_t parent = getpid(), pid;
    ssize_t n;

    snprintf(dev, sizeof dev, "%d", w->device);
    char *argv[] = { p->exe, (char *)"__worker", (char *)"--backend", p->backend,
                     (char *)"--device", dev, (char *)"--fd-in", (char *)"3",
                     (char *)"--fd-out", (char *)"4", NULL };
    if (pipe2(req, O_CLOEXEC) || pipe2(rep, O_CLOEXEC) || pipe2(ep, O_CLOEXEC)) {
        kevo_buf_say(msg, "pipe: %s", strerror(errno));
        st = KEVO_ERR_SYSTEM;
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        kevo_buf_say(msg, "fork: %s", strerror(errno));
        st = KEVO_ERR_SYSTEM;
        goto out;
    }
    if (pid == 0)
        child_exec(argv, req[0], rep[1], ep[1], parent, max_fd);
    setpgid(pid, pid);   /* also done by the child; whichever runs first wins the race */
    close_fd(&ep[1]);
    do
        n = read(ep[0], &err, sizeof err);   /* EOF: exec succeeded */
    while (n < 0 && errno == EINTR);
    w->pid = pid;
    w->fd_req = req[1];
    w->fd_rep = rep[0];
    req[1] = rep[0] = -1;
    if (n == (ssize_t)sizeof err) {
        worker_stop(w, 0, NULL);
        kevo_buf_say(msg, "cannot execute %s: %s", p->exe, strerror(err));
        st = KEVO_ERR_WORKER;
    }
out:
    for (int i = 0; i < 2; i++) {
        close_fd(&req[i]);
        close_fd(&rep[i]);
        close_fd(&ep[i]);
    }
    return st;
}

/* The first ping: proves the worker runs and speaks the protocol. */
static enum kevo_status spawn_ping(struct kevo_pool *p, struct pool_worker *w,
                                   struct kevo_buf *msg)
{
    long long id = atomic_fetch_add(&p->next_id, 1) + 1;
    json_t *req = json_pack("{s:I, s:s}", "id", (json_int_t)id, "op", "ping");
    json_t *reply = NULL;
    enum kevo_status st;
    char why[160];

    if (!req)
        return KEVO_ERR_NOMEM;
    st = kevo_wire_send(w->fd_req, req);
    if (!st)
        st = kevo_wire_recv_until(w->fd_rep, kevo_now() + p->start_timeout_s, &reply);
    if (!st && !json_is_true(json_object_get(json_object_get(reply, "result"), "pong")))
        st = KEVO_ERR_PARSE;
    if (st == KEVO_ERR_TIMEOUT) {
        kevo_buf_say(msg, "worker for device %d (%s) did not answer ping within %g s",
                            w->device, p->exe, p->start_timeout_s);
    } else if (st == KEVO_ERR_IO) {
        int killed, ws = worker_stop(w, POOL_EXIT_GRACE_S, &killed);
        describe_exit(ws, killed, why, sizeof why);
        kevo_buf_say(msg, "worker for device %d (%s) did not answer ping: %s",
                            w->device, p->exe, why);
    } else if (st && st != KEVO_ERR_NOMEM) {
        kevo_buf_say(msg, "worker for device %d (%s) gave a bad ping reply (%s)",
                            w->device, p->exe, kevo_status_name(st));
    }
    json_decref(req);
    json_decref(reply);
    if (st == KEVO_ERR_NOMEM)
        return st;   /* ours, not the worker's */
    return st ? KEVO_ERR_WORKER : KEVO_OK;
}

/* Start slot w (again). A restart is counted only when it succeeds. */
static enum kevo_status spawn_worker(struct kevo_pool *p, struct pool_worker *w,
                                     struct kevo_buf *msg)
{
    enum kevo_status st = spawn_exec(p, w, msg);

    if (!st)
        st = spawn_ping(p, w, msg);
    if (st) {
        worker_stop(w, 0, NULL);
        return st;
    }
    if (w->started)
        atomic_fetch_add(&p->restarts, 1);
    w->started = 1;
    KEVO_DEBUG("worker for device %d started (pid %d)", w->device, (int)w->pid);
    return KEVO_OK;
}

/* ---- open / free ---- */

/* The remote slots of o after the local ones; -1 when out of memory. */
static int pool_set_remote(struct kevo_pool *p, const struct kevo_pool_opts *o)
{
    for (int i = 0; i < o->n_remote; i++) {
        struct pool_worker *w = &p->w[p->n_local + i];
        w->remote = 1;
        w->rank = o->remote[i].rank;
        w->rslot = o->remote[i].rslot;
        w->device = o->remote[i].device;
        w->host = kevo_strdup(o->remote[i].host ? o->remote[i].host : "?");
        if (!w->host)
            return -1;
    }
    return 0;
}

static enum kevo_status pool_check_opts(const struct kevo_pool_opts *o, struct kevo_buf *msg)
{
    if (!o || o->n_devices < 0 || o->n_remote < 0 || o->n_devices + o->n_remote < 1 ||
        (o->n_devices && !o->devices)) {
        kevo_buf_say(msg, "pool: at least one device is required");
        return KEVO_ERR_INVALID;
    }
    if (o->n_remote && (!o->remote || !o->link || !o->link->call)) {
        kevo_buf_say(msg, "pool: remote slots need their list and a link");
        return KEVO_ERR_INVALID;
    }
    if (!o->backend || !*o->backend) {
        kevo_buf_say(msg, "pool: no backend named");
        return KEVO_ERR_INVALID;
    }
    return KEVO_OK;
}

enum kevo_status kevo_pool_open(const struct kevo_pool_opts *o, struct kevo_pool **out,
                                char **out_msg)
{
    enum kevo_status st;
    struct kevo_pool *p = NULL;
    struct kevo_buf msg;
    struct sigaction sa;

    *out = NULL;
    if (out_msg)
        *out_msg = NULL;
    kevo_buf_init(&msg, POOL_MSG_MAX);
    st = pool_check_opts(o, &msg);
    if (st)
        goto out;
    /* A worker that dies mid-write must cost an EPIPE, not the controller. */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    st = KEVO_ERR_NOMEM;
    p = kevo_calloc(1, sizeof *p);
    if (!p)
        goto out;
    p->n_local = o->n_devices;
    p->n = o->n_devices + o->n_remote;
    p->rank = o->rank;
    p->link = o->link;
    if (gethostname(p->host, sizeof p->host - 1) != 0)
        snprintf(p->host, sizeof p->host, "?");
    p->start_timeout_s = o->start_timeout_s > 0 ? o->start_timeout_s : POOL_START_TIMEOUT_S;
    p->backend = kevo_strdup(o->backend);
    p->w = kevo_calloc((size_t)p->n, sizeof *p->w);
    for (int i = 0; p->w && i < p->n; i++) {   /* first: kevo_pool_free closes these fds */
        p->w[i].fd_req = p->w[i].fd_rep = -1;
        if (i < p->n_local)
            p->w[i].device = o->devices[i];
    }
    if (!p->backend || !p->w || pool_set_remote(p, o))
        goto out;
    if (o->exe) {
        p->exe = kevo_strdup(o->exe);
        st = p->exe ? KEVO_OK : KEVO_ERR_NOMEM;
    } else {
        st = self_exe(&p->exe);
        if (st == KEVO_ERR_SYSTEM)
            kevo_buf_say(&msg, "cannot find the kevo binary (/proc/self/exe): %s",
                     strerror(errno));
    }
    if (st)
        goto out;
    for (int i = 0; i < p->n_local; i++) {
        st = spawn_worker(p, &p->w[i], &msg);
        if (st)
            goto out;
    }
    *out = p;
    p = NULL;
out:
    kevo_pool_free(p);
    if (st && out_msg)
        *out_msg = msg.len ? kevo_buf_take(&msg) : kevo_strdup(kevo_status_name(st));
    kevo_buf_free(&msg);
    return st;
}

void kevo_pool_free(struct kevo_pool *p)
{
    if (!p)
        return;
    for (int i = 0; p->w && i < p->n; i++) {
        worker_stop(&p->w[i], 0, NULL);   /* a remote slot has nothing to stop */
        kevo_free(p->w[i].host);
    }
    kevo_free(p->w);
    kevo_free(p->exe);
    kevo_free(p->backend);
    kevo_free(p);
}

int kevo_pool_size(const struct kevo_pool *p)
{
    return p ? p->n : 0;
}

int kevo_pool_restarts(const struct kevo_pool *p)
{
    return p ? atomic_load(&p->restarts) : 0;
}

enum kevo_status kevo_pool_where(const struct kevo_pool *p, int slot, int *out_rank,
                                 int *out_device, const char **out_host)
{
    if (!p || slot < 0 || slot >= p->n)
        return KEVO_ERR_INVALID;
    *out_rank = p->w[slot].remote ? p->w[slot].rank : p->rank;
    *out_device = p->w[slot].device;
    *out_host = p->w[slot].remote ? p->w[slot].host : p->host;
    return KEVO_OK;
}

/* ---- calls ---- */

/* {"id", "status":"ok", "result":{"verdict", "message", "evidence"}} (result.h's
 * kevo_result_doc_new; evidence NULL: {}); evidence is stolen. NULL when out of memory. */
static json_t *synth_reply(long long id, enum kevo_verdict verdict, const char *message,
                           json_t *evidence)
{
    json_t *res = kevo_result_doc_new(verdict, message, evidence);

    if (!res)
        return NULL;
    return json_pack("{s:I, s:s, s:o}", "id", (json_int_t)id, "status", "ok", "result", res);
}

/* Start a fresh worker in slot w; a failure is logged (with the spawner's message). */
static enum kevo_status respawn(struct kevo_pool *p, struct pool_worker *w)
{
    struct kevo_buf msg;
    enum kevo_status st;

    kevo_buf_init(&msg, POOL_MSG_MAX);
    st = spawn_worker(p, w, &msg);
    if (st)
        KEVO_ERROR("cannot restart the worker for device %d: %s", w->device,
                   kevo_buf_str(&msg));
    kevo_buf_free(&msg);
    return st;
}

/* Make sure slot w has a running worker: start it if it is down or has exited. */
static enum kevo_status worker_ensure(struct kevo_pool *p, struct pool_worker *w)
{
    char why[160];

    if (w->pid > 0 && !worker_exited(w))
        return KEVO_OK;
    if (w->pid > 0) {
        int killed, ws = worker_stop(w, 0, &killed);
        describe_exit(ws, killed, why, sizeof why);
        KEVO_WARN("worker for device %d exited between requests (%s); restarting",
                  w->device, why);
    }
    return respawn(p, w);
}

/* After a timeout or a death: start a fresh worker now; the text says whether it worked. */
static const char *restart_now(struct kevo_pool *p, struct pool_worker *w)
{
    return respawn(p, w) ? "restart failed, retried at the next call" : "restarted";
}

/* The worker hung past the deadline: kill it, restart it, verdict timeout. */
static json_t *on_timeout(struct kevo_pool *p, struct pool_worker *w, long long id,
                          double deadline_s)
{
    char text[200];

    worker_stop(w, 0, NULL);
    const char *how = restart_now(p, w);
    snprintf(text, sizeof text, "no reply within %g s; worker killed and %s", deadline_s, how);
    return synth_reply(id, KEVO_VERDICT_TIMEOUT, text,
                       json_pack("{s:f}", "deadline_s", deadline_s));
}

/* The worker died or spoke nonsense: reap it (its status names the cause), restart it,
 * verdict crash. */
static json_t *on_crash(struct kevo_pool *p, struct pool_worker *w, long long id,
                        const char *nonsense)
{
    char why[160], text[400];
    int killed = 0, ws;
    json_t *ev;

    ws = worker_stop(w, nonsense ? 0 : POOL_EXIT_GRACE_S, &killed);
    if (nonsense)
        snprintf(why, sizeof why, "worker sent %s and was killed", nonsense);
    else
        describe_exit(ws, killed, why, sizeof why);
    if (!nonsense && !killed && WIFEXITED(ws))
        ev = json_pack("{s:i}", "exit_status", WEXITSTATUS(ws));
    else if (!nonsense && !killed && WIFSIGNALED(ws))
        ev = json_pack("{s:i, s:s}", "signal", WTERMSIG(ws), "signal_name",
                       sigabbrev_np(WTERMSIG(ws)) ? sigabbrev_np(WTERMSIG(ws)) : "?");
    else
        ev = NULL;
    const char *how = restart_now(p, w);
    snprintf(text, sizeof text, "%s; %s", why, how);
    return synth_reply(id, KEVO_VERDICT_CRASH, text, ev);
}

/* Send with one retry: a worker found dead at send time never saw the request, so a fresh
 * one may take it. */
static enum kevo_status call_send(struct kevo_pool *p, struct pool_worker *w, json_t *msg)
{
    enum kevo_status st = worker_ensure(p, w);

    if (!st)
        st = kevo_wire_send(w->fd_req, msg);
    if (st == KEVO_ERR_IO) {
        KEVO_WARN("worker for device %d gone before the request; restarting", w->device);
        worker_stop(w, POOL_EXIT_GRACE_S, NULL);
        st = worker_ensure(p, w);
        if (!st)
            st = kevo_wire_send(w->fd_req, msg);
    }
    return st;
}

/* Classify what recv gave: a reply of ours, passes through; anything else is handled. */
static json_t *call_finish(struct kevo_pool *p, struct pool_worker *w, long long id,
                           double deadline_s, enum kevo_status st, json_t *reply)
{
    if (st == KEVO_ERR_TIMEOUT)
        return on_timeout(p, w, id, deadline_s);
    if (st == KEVO_ERR_IO)
        return on_crash(p, w, id, NULL);
    if (st)
        return on_crash(p, w, id, "a malformed reply");
    json_t *rid = json_object_get(reply, "id");
    if (!json_is_integer(rid) || json_integer_value(rid) != id) {
        json_decref(reply);
        return on_crash(p, w, id, "a reply to another request");
    }
    if (json_is_true(json_object_get(reply, "exiting"))) {
        /* Device fault: the worker answered and is on its way out. Reap it now so that the
         * next call starts a fresh one instead of writing into a dying process. */
        int killed, ws = worker_stop(w, POOL_EXIT_GRACE_S, &killed);
        char why[160];
        describe_exit(ws, killed, why, sizeof why);
        KEVO_INFO("worker for device %d: %s; restarting at the next call", w->device, why);
    }
    return reply;
}

/*
 * A call on a remote slot: the other rank's pool keeps the deadline and makes the
 * timeout or crash reply itself, so only the id is checked here. A lost rank stays lost.
 */
static enum kevo_status remote_call(struct kevo_pool *p, struct pool_worker *w, long long id,
                                    json_t *msg, double deadline_s, json_t **out_reply)
{
    json_t *reply = NULL;
    enum kevo_status st;

    if (atomic_load(&w->lost))
        return KEVO_ERR_LOST;
    st = p->link->call(p->link->ctx, w->rank, w->rslot, msg, deadline_s, &reply);
    if (st == KEVO_ERR_LOST)
        atomic_store(&w->lost, 1);
    if (st)
        return st;
    json_t *rid = json_object_get(reply, "id");
    if (!json_is_integer(rid) || json_integer_value(rid) != id) {
        json_decref(reply);
        reply = synth_reply(id, KEVO_VERDICT_CRASH, "the remote worker sent a reply to "
                            "another request", NULL);
    }
    *out_reply = reply;
    return reply ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_pool_call(struct kevo_pool *p, int slot, json_t *req, double deadline_s,
                                json_t **out_reply)
{
    enum kevo_status st;
    struct pool_worker *w;
    json_t *msg = NULL, *reply = NULL;
    double deadline;
    long long id;

    *out_reply = NULL;
    if (!p || slot < 0 || slot >= p->n || !json_is_object(req))
        return KEVO_ERR_INVALID;
    if (!(deadline_s > 0) || deadline_s > 1e9)
        deadline_s = POOL_DEADLINE_S;
    w = &p->w[slot];
    id = atomic_fetch_add(&p->next_id, 1) + 1;
    msg = json_copy(req);   /* shallow: the caller's object stays untouched */
    if (!msg || json_object_set_new(msg, "id", json_integer((json_int_t)id))) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    if (w->remote) {
        st = remote_call(p, w, id, msg, deadline_s, out_reply);
        goto out;
    }
    deadline = kevo_now() + deadline_s;
    st = call_send(p, w, msg);
    if (st)
        goto out;   /* no worker, or a request that cannot be encoded */
    st = kevo_wire_recv_until(w->fd_rep, deadline, &reply);
    if (st == KEVO_ERR_NOMEM) {
        worker_stop(w, 0, NULL);   /* the stream is mid-message: this worker is unusable */
        goto out;
    }
    *out_reply = call_finish(p, w, id, deadline_s, st, reply);
    st = *out_reply ? KEVO_OK : KEVO_ERR_NOMEM;
out:
    json_decref(msg);
    return st;
}

enum kevo_status kevo_pool_probe(struct kevo_pool *p, int slot, double deadline_s,
                                 char **out_name, char **out_msg)
{
    json_t *req = json_pack("{s:s}", "op", "info"), *reply = NULL, *res;
    enum kevo_status st = req ? kevo_pool_call(p, slot, req, deadline_s, &reply) : KEVO_ERR_NOMEM;
    const char *rs, *m;

    *out_name = NULL;
    *out_msg = NULL;
    json_decref(req);
    if (st)
        return st;
    rs = json_string_value(json_object_get(reply, "status"));
    res = json_object_get(reply, "result");
    if (rs && strcmp(rs, "ok") == 0 && json_is_string(json_object_get(res, "name"))) {
        *out_name = kevo_strdup(json_string_value(json_object_get(res, "name")));
        st = *out_name ? KEVO_OK : KEVO_ERR_NOMEM;
    } else {   /* the worker's message, or a synthesized timeout or crash's */
        m = json_string_value(json_object_get(reply, "message"));
        if (!m)
            m = json_string_value(json_object_get(res, "message"));
        *out_msg = kevo_strdupf("device %d: %s", p->w[slot].device, m ? m : "no device info");
        st = *out_msg ? KEVO_ERR_NODEV : KEVO_ERR_NOMEM;
    }
    json_decref(reply);
    return st;
}

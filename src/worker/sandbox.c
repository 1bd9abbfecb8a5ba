/*
 * sandbox - spawner and runner processes of the CPU backend (see sandbox.h and
 * docs/internals/backend_cpu.md).
 *
 * Wire format between worker and runner (a SOCK_STREAM socketpair): every message starts
 * with struct sb_msg. RUN (worker -> runner): a = passes, b = n_calls, c = payload bytes,
 * payload = n_calls x { int32 entry, int32 n_args, struct kevo_val args[n_args] }.
 * READY (runner -> worker): a = n_entries, b = total parameters, payload = int32 n_params
 * per entry, then the struct kevo_shim_param of every parameter. FAIL: a = SB_FAIL_*,
 * b = text bytes, payload = text. OPEN (worker -> runner): a = n_spans, c = payload bytes,
 * payload = n_spans x struct kevo_span. DONE: seq of the RUN or OPEN, a = 0 ok / 1 a call
 * refused its arguments (b = call index).
 *
 * The runner is candidate-controlled once the module is loaded: everything it sends is
 * checked, and anything odd ends it (KEVO_RUN_BROKEN).
 */
#include "worker/sandbox.h"
#include "base/clock.h"
#include "base/fdio.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define SB_MAGIC 0x6f76656bu          /* "kevo" */
#define SB_RUN_MAX (64u << 20)        /* largest RUN payload */
#define SB_TEXT_MAX 4096              /* largest FAIL text */
#define SB_CHANNEL_FD 3               /* the runner's (and spawner's) channel */
#define SB_STOP_WAIT_S 2.0            /* how long a stop or an exit may take */

enum sb_op { SB_READY = 1, SB_FAIL, SB_RUN, SB_DONE, SB_OPEN };
enum sb_fail { SB_FAIL_SETUP = 1, SB_FAIL_LOAD };

struct sb_msg {
    uint32_t magic, op;
    uint64_t seq;
    int32_t a, b, c, d;
};
_Static_assert(sizeof(struct sb_msg) == 32, "sb_msg is sent as bytes");

/* One request to the spawner (a SOCK_SEQPACKET message). */
struct sb_spawn {
    uint64_t slot;
    int32_t n_entries;
    char path[PATH_MAX];
};

struct kevo_sandbox {
    pid_t pid;                /* the spawner */
    int fd;                   /* SOCK_SEQPACKET to it */
};

struct kevo_runner {
    pid_t pid;
    int fd;
    int alive;                /* the process exists (not reaped) and may be used */
    int stopped;
    uint64_t seq;             /* of the last RUN or OPEN */
    struct kevo_runner_slot *slot;   /* arena memory: the entry running now, its fault */
    int n_entries;
    int *n_params;            /* per entry */
    int *first;               /* index of entry e's first parameter in params */
    struct kevo_shim_param *params;
};

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

/* ---- whole-message I/O: kevo_fs_read_all / kevo_fs_write_all (plain read(2)/write(2):
 * the runner's filter refuses send*(2); a worker that went away ends it with SIGPIPE) ---- */

enum io_end { IO_OK = 0, IO_EOF, IO_TIMEOUT, IO_ERROR };

/*
 * Read exactly n bytes before the absolute deadline (kevo_fd_read_full). Data already there
 * is read even when the deadline has passed (a sync long after the run finished is not a
 * timeout); a peer that closed or reset the channel is IO_EOF.
 */
static enum io_end read_until(int fd, void *p, size_t n, double deadline)
{
    size_t got;
    int eof;
    enum kevo_status st = kevo_fd_read_full(fd, p, n, &deadline, &got, &eof);

    if (st == KEVO_OK)
        return IO_OK;
    if (st == KEVO_ERR_TIMEOUT)
        return IO_TIMEOUT;
    return eof ? IO_EOF : IO_ERROR;
}

/* Write all n bytes before the deadline (the peer may be slow to read a large RUN). */
static enum io_end write_until(int fd, const void *p, size_t n, double deadline)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            c += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return errno == EPIPE || errno == ECONNRESET ? IO_EOF : IO_ERROR;
        double left = deadline - kevo_now();
        if (left <= 0)
            return IO_TIMEOUT;
        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
        (void)poll(&pfd, 1, left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1);
    }
    return IO_OK;
}

/* ---- child side: process hygiene ---- */

/*
 * Default actions, except the stop signals: `pkill kevo`, a scheduler or a terminal's
 * hang-up reach every process of the job, and a runner they killed would read as the
 * candidate's crash. The controller stops the run; runners die with their worker.
 */
static void reset_signals(void)
{
    sigset_t all;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) {
        dfl.sa_handler = s == SIGINT || s == SIGTERM || s == SIGHUP ? SIG_IGN : SIG_DFL;
        if (s != SIGKILL && s != SIGSTOP)
            (void)sigaction(s, &dfl, NULL);
    }
    sigemptyset(&all);
    (void)sigprocmask(SIG_SETMASK, &all, NULL);
}

/* Put fd at SB_CHANNEL_FD and close every other descriptor but 0-2. */
static int keep_only_channel(int fd)
{
    if (fd != SB_CHANNEL_FD && dup2(fd, SB_CHANNEL_FD) < 0)
        return -1;
    if (close_range(SB_CHANNEL_FD + 1, ~0u, 0) < 0) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long f = SB_CHANNEL_FD + 1; f < (max > 0 ? max : 65536); f++)
            (void)close((int)f);
    }
    return 0;
}

/* stdin, stdout, stderr -> /dev/null. */
static void null_stdio(void)
{
    int n = open("/dev/null", O_RDWR);
    if (n < 0)
        _exit(111);
    for (int f = 0; f < 3; f++) {
        if (n != f)
            (void)dup2(n, f);
    }
    if (n > 2)
        (void)close(n);
}

/*
 * Wipe the environment except OMP_* / GOMP_* (API keys of the controller must not reach
 * candidate code). The strings are zeroed in place, so /proc/self/environ is wiped too.
 */
static void scrub_environment(void)
{
    extern char **environ;
    static char *keep[65];
    int n = 0;
    for (char **e = environ; e && *e; e++) {
        if ((strncmp(*e, "OMP_", 4) == 0 || strncmp(*e, "GOMP_", 5) == 0) && n < 64)
            keep[n++] = *e;
        else
            memset(*e, 0, strlen(*e));
    }
    keep[n] = NULL;
    environ = keep;
}

/* ---- runner: the sandbox ---- */

/* Add "refuse with errno" rules for each named syscall the running kernel/arch knows. */
static int deny_list(scmp_filter_ctx f, uint32_t action, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int nr = seccomp_syscall_resolve_name(names[i]);
        if (nr == __NR_SCMP_ERROR || nr < 0)
            continue;
        if (seccomp_rule_add(f, action, nr, 0) < 0)
            return -1;
    }
    return 0;
}

static const char *const deny_eperm[] = {
    /* network and IPC */
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto",
    "sendmsg", "sendmmsg", "recvfrom", "recvmsg", "recvmmsg",
    /* new processes and other processes */
    "execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv",
    "process_vm_writev", "tkill", "pidfd_open", "pidfd_send_signal", "pidfd_getfd",
    "process_madvise", "process_mrelease", "kcmp", "setpriority", "ioprio_set",
    "migrate_pages", "move_pages",
    /* the file system */
    "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
    "rmdir", "link", "linkat", "symlink", "symlinkat", "truncate", "ftruncate", "fallocate",
    "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "mknod",
    "mknodat", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "utime", "utimes", "utimensat", "futimesat", "open_by_handle_at",
    "mount", "umount2", "mount_setattr", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "chroot", "pivot_root", "swapon", "swapoff", "quotactl", "acct",
    /* identity, kernel state, odd interfaces */
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid",
    "setfsgid", "setgroups", "unshare", "setns", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "memfd_create", "memfd_secret", "userfaultfd", "bpf",
    "perf_event_open", "personality", "reboot", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "settimeofday", "clock_settime",
    "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "keyctl", "add_key",
    "request_key", "syslog", "vhangup", "iopl", "ioperm",
};

/* Rules that look at arguments: writes through open, processes other than self. */
static int arg_rules(scmp_filter_ctx f, pid_t self)
{
    static const int write_flags[] = { O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND };
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    int rc = 0;

    for (size_t i = 0; i < sizeof write_flags / sizeof write_flags[0] && !rc; i++) {
        scmp_datum_t m = (scmp_datum_t)write_flags[i];
        rc = seccomp_rule_add(f, eperm, SCMP_SYS(open), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, m, m));
        if (!rc)
            rc = seccomp_rule_add(f, eperm, SCMP_SYS(openat), 1,
                                  SCMP_A2(SCMP_CMP_MASKED_EQ, m, m));
    }
    // a process, not a thread: clone without CLONE_THREAD
    if (!rc)
        rc = seccomp_rule_add(f, eperm, SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    // signals only to ourselves (pid 0 and -1 would reach the worker)
    if (!rc)
        rc = seccomp_rule_add(f, eperm, SCMP_SYS(kill), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self));
    if (!rc)
        rc = seccomp_rule_add(f, eperm, SCMP_SYS(tgkill), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self));
    if (!rc)
        rc = seccomp_rule_add(f, eperm, SCMP_SYS(rt_sigqueueinfo), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self));
    if (!rc)
        rc = seccomp_rule_add(f, eperm, SCMP_SYS(rt_tgsigqueueinfo), 1,
                              SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)self));
    if (!rc)   // limits of other processes (the worker)
        rc = seccomp_rule_add(f, eperm, SCMP_SYS(prlimit64), 1, SCMP_A0(SCMP_CMP_NE, 0));
    if (!rc)   // keep dying with the worker
        rc = seccomp_rule_add(f, eperm, SCMP_SYS(prctl), 1,
                              SCMP_A0(SCMP_CMP_EQ, PR_SET_PDEATHSIG));
    return rc;
}

/* Build and load the filter; NULL or what failed. */
static const char *load_filter(pid_t self)
{
    const char *what = NULL;
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);

    if (!f)
        return "seccomp_init failed";
    if (seccomp_attr_set(f, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0)
        what = "seccomp: bad-arch action";
    else if (deny_list(f, SCMP_ACT_ERRNO(EPERM), deny_eperm,
                       sizeof deny_eperm / sizeof deny_eperm[0]) < 0)
        what = "seccomp: a deny rule";
    else if (seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) < 0 ||
             seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) < 0)
        what = "seccomp: clone3/openat2";   // ENOSYS: libc falls back to clone / openat
    else if (arg_rules(f, self) < 0)
        what = "seccomp: an argument rule";
    else if (seccomp_load(f) < 0)
        what = "seccomp_load failed";
    seccomp_release(f);
    return what;
}

/* Drop every capability (a root worker must not lend CAP_SYS_PTRACE & co. to candidates). */
static int drop_caps(void)
{
    struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    return (int)syscall(SYS_capset, &h, d);
}

static const char *enter_sandbox(const struct kevo_sandbox_limits *lim)
{
    struct { int res; rlim_t v; } lims[] = {
        { RLIMIT_CORE, 0 }, { RLIMIT_FSIZE, 0 }, { RLIMIT_NOFILE, lim->nofile },
        { RLIMIT_DATA, lim->data_bytes }, { RLIMIT_CPU, lim->cpu_seconds },
    };
    for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
        struct rlimit rl = { lims[i].v, lims[i].v };
#if defined(__SANITIZE_ADDRESS__)
        if (lims[i].res == RLIMIT_DATA)   // ASan's shadow is "data": a sanitizer build has none
            continue;
#endif
        if (setrlimit(lims[i].res, &rl) < 0)
            return "setrlimit failed";
    }
    if (drop_caps() < 0)
        return "dropping capabilities failed";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return "PR_SET_NO_NEW_PRIVS failed";
    const char *what = load_filter(getpid());
    if (what)
        return what;
    // defense in depth: the filter must be in force before candidate code is loaded
    if (syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0) >= 0 || errno != EPERM)
        return "seccomp filter is not in force (socket() was allowed)";
    return NULL;
}

/* ---- runner: main loop ---- */

static void send_fail(int kind, const char *text)
{
    size_t n = strnlen(text, SB_TEXT_MAX);
    struct sb_msg m = { SB_MAGIC, SB_FAIL, 0, kind, (int32_t)n, 0, 0 };
    if (kevo_fs_write_all(SB_CHANNEL_FD, &m, sizeof m) == 0)
        (void)kevo_fs_write_all(SB_CHANNEL_FD, text, n);
    _exit(0);
}

static void send_ready(const struct kevo_shim_entry *t, int n)
{
    int total = 0;
    for (int e = 0; e < n; e++)
        total += t[e].n_params;
    struct sb_msg m = { SB_MAGIC, SB_READY, 0, n, total, 0, 0 };
    if (kevo_fs_write_all(SB_CHANNEL_FD, &m, sizeof m) < 0)
        _exit(0);
    for (int e = 0; e < n; e++) {
        int32_t np = t[e].n_params;
        if (kevo_fs_write_all(SB_CHANNEL_FD, &np, sizeof np) < 0)
            _exit(0);
    }
    for (int e = 0; e < n; e++) {
        if (kevo_fs_write_all(SB_CHANNEL_FD, t[e].params, sizeof(struct kevo_shim_param) *
                                                  (size_t)t[e].n_params) < 0)
            _exit(0);
    }
}

struct sb_call {
    int32_t entry, n_args;
    const struct kevo_val *args;
};

/* Split a RUN payload into calls; -1 if it is malformed. */
static int parse_calls(const char *p, size_t len, int n_calls, int n_entries,
                       struct sb_call *calls)
{
    size_t off = 0;
    for (int c = 0; c < n_calls; c++) {
        int32_t hdr[2];
        if (len - off < sizeof hdr)
            return -1;
        memcpy(hdr, p + off, sizeof hdr);
        off += sizeof hdr;
        if (hdr[0] < -1 || hdr[0] >= n_entries || (hdr[0] == -1 && hdr[1] != 3) ||
            hdr[1] < 0 || hdr[1] > KEVO_MAX_ARGS ||
            (len - off) / sizeof(struct kevo_val) < (size_t)hdr[1])
            return -1;
        calls[c].entry = hdr[0];
        calls[c].n_args = hdr[1];
        calls[c].args = (const struct kevo_val *)(const void *)(p + off);
        off += sizeof(struct kevo_val) * (size_t)hdr[1];
    }
    return off == len ? 0 : -1;
}

/* A KEVO_ENTRY_FILL call (the worker checked it lies in the arena): the 4-byte pattern
 * repeated over the bytes, as the backend's fill32 does. */
static void run_fill(const struct kevo_val *a)
{
    unsigned char *p = (unsigned char *)(uintptr_t)a[0].ptr;
    uint32_t pat = (uint32_t)a[2].i;
    size_t n = (size_t)a[1].i;

    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(pat >> (8 * (i & 3)));
}

/* ---- runner: guarded memory ---- */

/* The runner's view of the guarded region: its slot and the spans now open. */
static struct {
    uint64_t base, size;
    struct kevo_runner_slot *slot;
    struct kevo_span open[KEVO_SPANS_MAX];
    int n_open;
} rg;

/* SIGSEGV/SIGBUS: leave the address in the slot. SA_RESETHAND put the default action
 * back, so returning runs the access again and the signal ends the runner. */
static void on_fault(int sig, siginfo_t *si, void *ucv)
{
    int write = -1;
#if defined(__x86_64__) && defined(REG_ERR)
    const ucontext_t *uc = ucv;
    write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;   // page-fault error code: W bit
#else
    (void)ucv;
#endif
    rg.slot->fault_addr = (uint64_t)(uintptr_t)si->si_addr;
    rg.slot->fault_write = write;
    rg.slot->fault_sig = sig;
}

/* Before any candidate code: the whole region inaccessible but the slot's page(s), and
 * the fault handler (on its own stack: a candidate may fault with a broken stack). */
static const char *guard_region(const struct kevo_sandbox_limits *lim, uint64_t slot)
{
    static char alt[64 << 10];
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t lo = slot / pg * pg, hi = (slot + sizeof *rg.slot + pg - 1) / pg * pg;
    stack_t ss = { .ss_sp = alt, .ss_size = sizeof alt };
    struct sigaction sa;

    rg.base = lim->guard_base;
    rg.size = lim->guard_size;
    rg.slot = (struct kevo_runner_slot *)(uintptr_t)slot;
    if (!rg.size)
        return NULL;
    if (mprotect((void *)(uintptr_t)rg.base, rg.size, PROT_NONE) < 0 ||
        mprotect((void *)(uintptr_t)lo, hi - lo, PROT_READ | PROT_WRITE) < 0)
        return "mprotect of the guarded region failed";
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaltstack(&ss, NULL) < 0 || sigaction(SIGSEGV, &sa, NULL) < 0 ||
        sigaction(SIGBUS, &sa, NULL) < 0)
        return "installing the fault handler failed";
    return NULL;
}

/* Touch every page of [a, a + len) for writing without changing it (an atomic OR of 0), so
 * the page tables an mprotect just changed are rebuilt now, not by the next timed run: in a
 * VM whose hypervisor shadows the guest's page tables (seen in a Firecracker guest,
 * 2026-11-28), the first access to each page after an mprotect costs ~8 us, which put
 * ~0.8 ms into every timed pass over 800 KB of rotating sets; natively it is a TLB refill. */
static void touch_pages(uint64_t a, uint64_t len, size_t pg)
{
    for (uint64_t o = 0; o < len; o += pg)
        (void)__atomic_fetch_or((uint32_t *)(uintptr_t)(a + o), 0u, __ATOMIC_RELAXED);
}

/* OPEN: close the spans of the last OPEN, open these. Anything odd ends the runner. */
static void open_spans(const struct kevo_span *sp, int n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < rg.n_open; i++) {
        if (mprotect((void *)(uintptr_t)rg.open[i].addr, rg.open[i].len, PROT_NONE) < 0)
            _exit(116);
    }
    rg.n_open = 0;
    for (int i = 0; i < n; i++) {
        uint64_t a = sp[i].addr, len = sp[i].len;
        if (a % pg || len % pg || !len || a < rg.base || a - rg.base > rg.size ||
            len > rg.size - (a - rg.base) ||
            mprotect((void *)(uintptr_t)a, len, PROT_READ | PROT_WRITE) < 0)
            _exit(117);
        rg.open[rg.n_open++] = sp[i];
        touch_pages(a, len, pg);
    }
}

/* Serve RUN and OPEN commands until the worker goes away. */
static void __attribute__((noreturn))
runner_loop(const struct kevo_shim_entry *t, int n, volatile int32_t *slot)
{
    char *buf = NULL;
    struct sb_call *calls = NULL;

    for (;;) {
        struct sb_msg m;
        if (kevo_fs_read_all(SB_CHANNEL_FD, &m, sizeof m) < 0)
            _exit(0);
        if (m.magic == SB_MAGIC && m.op == SB_OPEN && m.a >= 0 && m.a <= KEVO_SPANS_MAX &&
            m.c == (int32_t)(sizeof(struct kevo_span) * (size_t)m.a)) {
            struct kevo_span sp[KEVO_SPANS_MAX];
            if (kevo_fs_read_all(SB_CHANNEL_FD, sp, (size_t)m.c) < 0)
                _exit(0);
            open_spans(sp, m.a);
            struct sb_msg r = { SB_MAGIC, SB_DONE, m.seq, 0, 0, 0, 0 };
            if (kevo_fs_write_all(SB_CHANNEL_FD, &r, sizeof r) < 0)
                _exit(0);
            continue;
        }
        if (m.magic != SB_MAGIC || m.op != SB_RUN || m.b < 0 || m.c < 0 ||
            (uint32_t)m.c > SB_RUN_MAX)
            _exit(112);
        kevo_free(buf);
        kevo_free(calls);
        buf = kevo_malloc((size_t)m.c);
        calls = kevo_calloc((size_t)m.b + 1, sizeof *calls);
        if (!buf || !calls || kevo_fs_read_all(SB_CHANNEL_FD, buf, (size_t)m.c) < 0 ||
            parse_calls(buf, (size_t)m.c, m.b, n, calls) < 0)
            _exit(113);
        struct sb_msg r = { SB_MAGIC, SB_DONE, m.seq, 0, 0, 0, 0 };
        for (int p = 0; p < m.a && !r.a; p++) {
            for (int c = 0; c < m.b; c++) {
                if (calls[c].entry < 0) {
                    run_fill(calls[c].args);
                    continue;
                }
                *slot = calls[c].entry;
                if (t[calls[c].entry].call(calls[c].args, calls[c].n_args) != 0) {
                    r.a = 1;
                    r.b = c;
                    break;
                }
            }
        }
        *slot = -1;
        if (kevo_fs_write_all(SB_CHANNEL_FD, &r, sizeof r) < 0)
            _exit(0);
    }
}

/* The runner, from the spawner's clone to the command loop. Never returns. */
static void __attribute__((noreturn))
runner_main(int fd, const struct sb_spawn *req, const struct kevo_sandbox_limits *lim,
            pid_t worker)
{
    struct kevo_runner_slot *rs = (struct kevo_runner_slot *)(uintptr_t)req->slot;
    volatile int32_t *slot = &rs->entry;

    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != worker)
        _exit(114);
    if (keep_only_channel(fd) < 0)
        _exit(115);
    *slot = -2;
    const char *what = guard_region(lim, req->slot);
    if (!what)
        what = enter_sandbox(lim);
    if (what)
        send_fail(SB_FAIL_SETUP, what);
    // only now: constructors in the module run inside the sandbox
    void *h = dlopen(req->path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        send_fail(SB_FAIL_LOAD, dlerror());
    const struct kevo_shim_entry *t = dlsym(h, KEVO_SHIM_TABLE);
    const int *count = dlsym(h, KEVO_SHIM_COUNT);
    if (!t || !count || *count != req->n_entries)
        send_fail(SB_FAIL_LOAD, "the module does not export the expected call shim");
    for (int e = 0; e < *count; e++) {
        if (t[e].n_params < 0 || t[e].n_params > KEVO_MAX_ARGS)
            send_fail(SB_FAIL_LOAD, "the call shim has a bad parameter count");
    }
    send_ready(t, *count);
    *slot = -1;
    runner_loop(t, *count, slot);
}

/* ---- spawner ---- */

/* Clone one runner and hand its channel to the worker. */
static void spawn_one(int ctl, const struct sb_spawn *req, const struct kevo_sandbox_limits *lim,
                      pid_t worker)
{
    int sv[2] = { -1, -1 };
    int32_t reply[2] = { -1, 0 };
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { reply, sizeof reply };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        reply[1] = errno;
    } else {
        // CLONE_PARENT: the runner becomes the worker's child, with our (clean) memory
        long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, NULL, NULL, NULL, 0);
        if (pid == 0)
            runner_main(sv[1], req, lim, worker);
        reply[0] = (int32_t)pid;
        reply[1] = pid < 0 ? errno : 0;
    }
    if (reply[0] > 0) {
        memset(cbuf, 0, sizeof cbuf);
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &sv[0], sizeof(int));
    }
    (void)sendmsg(ctl, &mh, MSG_NOSIGNAL);
    if (sv[0] >= 0)
        (void)close(sv[0]);
    if (sv[1] >= 0)
        (void)close(sv[1]);
}

static void __attribute__((noreturn))
spawner_main(int ctl, const struct kevo_sandbox_limits *lim, pid_t worker)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != worker)
        _exit(0);
    reset_signals();
    if (keep_only_channel(ctl) < 0)
        _exit(0);
    null_stdio();
    scrub_environment();
    for (;;) {
        struct sb_spawn req;
        ssize_t n = recv(SB_CHANNEL_FD, &req, sizeof req, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t)sizeof req)
            _exit(0);   // the worker closed the channel (or spoke nonsense)
        req.path[sizeof req.path - 1] = '\0';
        spawn_one(SB_CHANNEL_FD, &req, lim, worker);
    }
}

enum kevo_status kevo_sandbox_open(const struct kevo_sandbox_limits *lim,
                                   struct kevo_sandbox **out, struct kevo_buf *err)
{
    enum kevo_status st = KEVO_OK;
    struct kevo_sandbox *sb = NULL;
    int sv[2] = { -1, -1 };
    pid_t worker = getpid();

    *out = NULL;
    // runners are our children: we must be able to wait for them (stops included)
    struct sigaction chld;
    if (sigaction(SIGCHLD, NULL, &chld) == 0 &&
        (chld.sa_handler == SIG_IGN || (chld.sa_flags & SA_NOCLDWAIT))) {
        kevo_buf_say(err, "SIGCHLD is ignored in this process; the CPU backend needs to wait "
                          "for its runners");
        return KEVO_ERR_SANDBOX;
    }
    sb = kevo_calloc(1, sizeof *sb);
    if (!sb)
        return KEVO_ERR_NOMEM;
    // no other process of this user may read the worker's memory (seeds, reference outputs)
    (void)prctl(PR_SET_DUMPABLE, 0);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        st = KEVO_ERR_SYSTEM;
        kevo_buf_say(err, "socketpair: %s", strerror(errno));
        goto out;
    }
    sb->pid = fork();
    if (sb->pid < 0) {
        st = KEVO_ERR_SYSTEM;
        kevo_buf_say(err, "fork of the runner spawner: %s", strerror(errno));
        goto out;
    }
    if (sb->pid == 0) {
        (void)close(sv[0]);
        spawner_main(sv[1], lim, worker);
    }
    sb->fd = sv[0];
    sv[0] = -1;
    *out = sb;
    sb = NULL;
out:
    if (sv[0] >= 0)
        (void)close(sv[0]);
    if (sv[1] >= 0)
        (void)close(sv[1]);
    kevo_free(sb);
    return st;
}

void kevo_sandbox_free(struct kevo_sandbox *sb)
{
    if (!sb)
        return;
    (void)close(sb->fd);
    if (sb->pid > 0) {
        (void)kill(sb->pid, SIGKILL);
        while (waitpid(sb->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    kevo_free(sb);
}

/* ---- worker side: runner lifecycle ---- */

/*
 * Wait a little between polls: yield for the first millisecond (a stop normally lands within
 * microseconds, and nanosleep's timer slack alone is ~50 us), then sleep with backoff.
 */
static void poll_pause(double start, double *nap)
{
    if (kevo_now() - start < 1e-3) {
        sched_yield();
        return;
    }
    sleep_s(*nap);
    *nap = *nap < 1e-3 ? *nap * 2 : *nap;
}

/* Fill res from a wait status; ws < 0 means the status could not be had. A memory fault
 * comes with the address the runner's handler left in the slot, when it left one. */
static void describe_status(const struct kevo_runner *r, int ws, struct kevo_run_result *res)
{
    if (ws >= 0 && WIFSIGNALED(ws)) {
        res->end = KEVO_RUN_SIGNALED;
        res->sig = WTERMSIG(ws);
        if ((res->sig == SIGSEGV || res->sig == SIGBUS) && r->slot &&
            r->slot->fault_sig == res->sig) {
            res->fault_known = 1;
            res->fault_addr = r->slot->fault_addr;
            res->fault_write = r->slot->fault_write;
        }
    } else {
        res->end = KEVO_RUN_EXITED;
        res->code = ws >= 0 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    }
}

/* The entry the runner was in, from its arena slot (the candidate may have scribbled on it). */
static int slot_entry(const struct kevo_runner *r)
{
    int32_t e = r->slot ? r->slot->entry : -1;
    return e >= -2 && e < r->n_entries ? e : -1;
}

/*
 * Reap the runner, killing it if it does not die by itself within `grace` seconds.
 * *ws is the wait status (-1 if unknown: someone else reaped it). Returns 1 if we killed it.
 */
static int reap(struct kevo_runner *r, double grace, int *ws)
{
    double start = kevo_now(), until = start + grace;
    double nap = 20e-6;
    int killed = 0;

    *ws = -1;
    if (!r->alive)
        return 0;
    for (;;) {
        int s = 0;
        pid_t p = waitpid(r->pid, &s, WNOHANG);
        if (p == r->pid) {
            *ws = s;
            break;
        }
        if (p < 0 && errno != EINTR)
            break;
        if (p == 0 && !killed && kevo_now() >= until) {
            (void)kill(r->pid, SIGKILL);
            killed = 1;
        }
        poll_pause(start, &nap);
    }
    r->alive = 0;
    (void)close(r->fd);
    r->fd = -1;
    return killed;
}

/*
 * End the runner after a fault and say why in res. TIMEOUT and BROKEN kill it; for EXITED
 * (it closed its channel) it may die by itself, and the wait status says how.
 */
static void end_runner(struct kevo_runner *r, enum kevo_run_end why, struct kevo_run_result *res)
{
    int ws = -1;
    res->entry = slot_entry(r);
    if (why == KEVO_RUN_TIMEOUT || why == KEVO_RUN_BROKEN) {
        if (r->alive)
            (void)kill(r->pid, SIGKILL);
        (void)reap(r, 0.0, &ws);
        res->end = why;
        return;
    }
    if (reap(r, SB_STOP_WAIT_S, &ws)) {
        res->end = KEVO_RUN_BROKEN;   // closed its channel but went on living
        return;
    }
    describe_status(r, ws, res);
}

/* SIGSTOP the runner and wait until every thread has stopped (or it died). */
static void stop_runner(struct kevo_runner *r, struct kevo_run_result *res)
{
    double start = kevo_now(), nap = 20e-6;
    int ws = 0;

    if (!r->alive || r->stopped)
        return;
    (void)kill(r->pid, SIGSTOP);
    for (;;) {
        pid_t p = waitpid(r->pid, &ws, WUNTRACED | WNOHANG);
        if (p == r->pid && WIFSTOPPED(ws)) {
            r->stopped = 1;
            return;
        }
        if (p == r->pid || (p < 0 && errno != EINTR)) {   // it died meanwhile
            r->alive = 0;
            (void)close(r->fd);
            r->fd = -1;
            res->entry = slot_entry(r);
            describe_status(r, p == r->pid ? ws : -1, res);
            return;
        }
        if (kevo_now() - start >= SB_STOP_WAIT_S) {
            end_runner(r, KEVO_RUN_BROKEN, res);
            return;
        }
        poll_pause(start, &nap);
    }
}

/* Ask the spawner for a runner; *pid and *fd on success. */
static enum kevo_status request_runner(struct kevo_sandbox *sb, const char *so_path,
                                       int n_entries, uint64_t slot, pid_t *pid, int *fd,
                                       struct kevo_buf *err)
{
    struct sb_spawn req;
    int32_t reply[2] = { -1, 0 };
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { reply, sizeof reply };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = sizeof cbuf };

    memset(&req, 0, sizeof req);
    if (strlen(so_path) >= sizeof req.path)
        return KEVO_ERR_TOOBIG;
    memcpy(req.path, so_path, strlen(so_path) + 1);
    req.slot = slot;
    req.n_entries = n_entries;
    if (send(sb->fd, &req, sizeof req, MSG_NOSIGNAL) != (ssize_t)sizeof req ||
        recvmsg(sb->fd, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof reply) {
        kevo_buf_say(err, "the runner spawner is gone");
        return KEVO_ERR_SANDBOX;
    }
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (reply[0] <= 0 || !cm || cm->cmsg_type != SCM_RIGHTS) {
        kevo_buf_say(err, "starting a runner: %s", strerror(reply[1] ? reply[1] : EIO));
        return KEVO_ERR_SYSTEM;
    }
    memcpy(fd, CMSG_DATA(cm), sizeof(int));
    *pid = reply[0];
    return KEVO_OK;
}

/* Read the READY (or FAIL) message; KEVO_OK with res->end telling how it went. */
static enum kevo_status read_ready(struct kevo_runner *r, double deadline,
                                   struct kevo_run_result *res, struct kevo_buf *err)
{
    struct sb_msg m;
    enum io_end io = read_until(r->fd, &m, sizeof m, deadline);

    if (io == IO_TIMEOUT || io == IO_EOF || io == IO_ERROR) {
        end_runner(r, io == IO_TIMEOUT ? KEVO_RUN_TIMEOUT : io == IO_EOF ? KEVO_RUN_EXITED :
                   KEVO_RUN_BROKEN, res);
        return KEVO_OK;
    }
    if (m.magic == SB_MAGIC && m.op == SB_FAIL && m.b >= 0 && m.b <= SB_TEXT_MAX) {
        char text[SB_TEXT_MAX + 1];
        io = read_until(r->fd, text, (size_t)m.b, deadline);
        text[io == IO_OK ? m.b : 0] = '\0';
        end_runner(r, KEVO_RUN_BROKEN, res);
        res->end = m.a == SB_FAIL_SETUP ? KEVO_RUN_SETUP : KEVO_RUN_LOAD;
        return kevo_buf_adds(err, text) == KEVO_ERR_NOMEM ? KEVO_ERR_NOMEM : KEVO_OK;
    }
    if (m.magic != SB_MAGIC || m.op != SB_READY || m.a != r->n_entries || m.b < 0 ||
        m.b > r->n_entries * KEVO_MAX_ARGS) {
        end_runner(r, KEVO_RUN_BROKEN, res);
        return KEVO_OK;
    }
    r->n_params = kevo_calloc((size_t)r->n_entries + 1, sizeof(int));
    r->first = kevo_calloc((size_t)r->n_entries + 1, sizeof(int));
    r->params = kevo_calloc((size_t)m.b + 1, sizeof *r->params);
    if (!r->n_params || !r->first || !r->params)
        return KEVO_ERR_NOMEM;
    int total = 0;
    io = read_until(r->fd, r->n_params, sizeof(int) * (size_t)r->n_entries, deadline);
    for (int e = 0; io == IO_OK && e < r->n_entries; e++) {
        r->first[e] = total;
        total += r->n_params[e] >= 0 && r->n_params[e] <= KEVO_MAX_ARGS ? r->n_params[e]
                                                                        : m.b + 1;
    }
    if (io == IO_OK && total == m.b)
        io = read_until(r->fd, r->params, sizeof *r->params * (size_t)m.b, deadline);
    if (io != IO_OK || total != m.b) {
        end_runner(r, io == IO_TIMEOUT ? KEVO_RUN_TIMEOUT : KEVO_RUN_BROKEN, res);
        return KEVO_OK;
    }
    res->end = KEVO_RUN_OK;
    return KEVO_OK;
}

enum kevo_status kevo_runner_start(struct kevo_sandbox *sb, const char *so_path, int n_entries,
                                   uint64_t slot, double deadline, struct kevo_runner **out,
                                   struct kevo_run_result *res, struct kevo_buf *err)
{
    enum kevo_status st;
    struct kevo_runner *r = NULL;

    *out = NULL;
    memset(res, 0, sizeof *res);
    res->entry = -1;
    r = kevo_calloc(1, sizeof *r);
    if (!r)
        return KEVO_ERR_NOMEM;
    r->fd = -1;
    r->n_entries = n_entries;
    r->slot = (struct kevo_runner_slot *)(uintptr_t)slot;
    r->slot->entry = -2;
    r->slot->fault_sig = 0;
    st = request_runner(sb, so_path, n_entries, slot, &r->pid, &r->fd, err);
    if (st)
        goto out;
    r->alive = 1;
    st = read_ready(r, deadline, res, err);
    if (st || res->end != KEVO_RUN_OK)
        goto out;
    stop_runner(r, res);
    if (res->end == KEVO_RUN_OK) {
        *out = r;
        r = NULL;
    }
out:
    kevo_runner_free(r);
    return st;
}

const struct kevo_shim_param *kevo_runner_params(const struct kevo_runner *r, int e, int *n)
{
    *n = r->n_params[e];
    return r->params + r->first[e];
}

int kevo_runner_alive(const struct kevo_runner *r) { return r && r->alive; }

void kevo_runner_resume(struct kevo_runner *r)
{
    if (r->alive && r->stopped) {
        (void)kill(r->pid, SIGCONT);
        r->stopped = 0;
    }
}

enum kevo_status kevo_runner_send(struct kevo_runner *r, const struct kevo_call *calls,
                                  int n_calls, int passes, struct kevo_buf *err)
{
    enum kevo_status st = KEVO_OK;
    struct kevo_buf b;
    size_t bytes = 0;

    kevo_buf_init(&b, SB_RUN_MAX + sizeof(struct sb_msg));
    for (int c = 0; c < n_calls; c++)
        bytes += 2 * sizeof(int32_t) + sizeof(struct kevo_val) * (size_t)calls[c].n_args;
    if (bytes > SB_RUN_MAX) {
        kevo_buf_say(err, "the plan is too large (%zu bytes of arguments)", bytes);
        return KEVO_ERR_TOOBIG;
    }
    struct sb_msg m = { SB_MAGIC, SB_RUN, ++r->seq, passes, n_calls, (int32_t)bytes, 0 };
    st = kevo_buf_add(&b, &m, sizeof m);
    for (int c = 0; c < n_calls && !st; c++) {
        int32_t hdr[2] = { calls[c].entry, calls[c].n_args };
        st = kevo_buf_add(&b, hdr, sizeof hdr);
        if (!st)
            st = kevo_buf_add(&b, calls[c].args, sizeof(struct kevo_val) *
                                                 (size_t)calls[c].n_args);
    }
    if (st)
        goto out;
    r->slot->fault_sig = 0;
    kevo_runner_resume(r);
    // a runner that died or stopped reading shows up in kevo_runner_wait
    (void)write_until(r->fd, b.data, b.len, kevo_now() + SB_STOP_WAIT_S);
out:
    kevo_buf_free(&b);
    return st;
}

enum kevo_status kevo_runner_open(struct kevo_runner *r, const struct kevo_span *spans, int n,
                                  double deadline, struct kevo_run_result *res)
{
    size_t bytes = sizeof *spans * (size_t)n;
    struct sb_msg m = { SB_MAGIC, SB_OPEN, ++r->seq, n, 0, (int32_t)bytes, 0 };

    if (n < 0 || n > KEVO_SPANS_MAX)
        return KEVO_ERR_INVALID;
    r->slot->fault_sig = 0;
    kevo_runner_resume(r);
    // as for RUN: a runner that died or stopped reading shows up in the wait
    if (write_until(r->fd, &m, sizeof m, kevo_now() + SB_STOP_WAIT_S) == IO_OK && bytes)
        (void)write_until(r->fd, spans, bytes, kevo_now() + SB_STOP_WAIT_S);
    return kevo_runner_wait(r, deadline, res);
}

enum kevo_status kevo_runner_wait(struct kevo_runner *r, double deadline,
                                  struct kevo_run_result *res)
{
    struct sb_msg m;
    enum io_end io;

    memset(res, 0, sizeof *res);
    res->entry = -1;
    io = read_until(r->fd, &m, sizeof m, deadline);
    if (io == IO_TIMEOUT) {
        end_runner(r, KEVO_RUN_TIMEOUT, res);
        return KEVO_OK;
    }
    if (io != IO_OK) {
        end_runner(r, KEVO_RUN_EXITED, res);
        return KEVO_OK;
    }
    res->t_reply = kevo_now();
    if (m.magic != SB_MAGIC || m.op != SB_DONE || m.seq != r->seq || (m.a != 0 && m.a != 1)) {
        end_runner(r, KEVO_RUN_BROKEN, res);
        return KEVO_OK;
    }
    stop_runner(r, res);
    if (res->end == KEVO_RUN_OK && m.a == 1) {
        res->end = KEVO_RUN_ARGS;
        res->call = m.b;
    }
    return KEVO_OK;
}

void kevo_runner_free(struct kevo_runner *r)
{
    int ws;
    if (!r)
        return;
    if (r->alive)
        (void)kill(r->pid, SIGKILL);
    reap(r, 0.0, &ws);
    if (r->fd >= 0)
        (void)close(r->fd);
    kevo_free(r->n_params);
    kevo_free(r->first);
    kevo_free(r->params);
    kevo_free(r);
}

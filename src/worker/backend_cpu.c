/*
 * backend_cpu - the backend.h device interface for C tasks and candidates
 * (model: docs/internals/backend_cpu.md).
 *
 * "Device memory" is one shared arena: a MAP_SHARED|MAP_ANONYMOUS region mapped when the
 * backend opens, before any sandbox process exists, so the worker and every runner see it at
 * the same address; a device address is a pointer into it. Guarded memory: every block
 * (allocation) has its own pages with CPU_GAP bytes (32 GiB; less only where the system
 * refuses the address space) of never-used arena between it and its
 * neighbours, so no 32-bit index from one tensor reaches another, and its data ends at its
 * last page's end (end-aligned), so a store past the end faults at once. In a runner the
 * whole arena is inaccessible except the blocks of the plan it is running (sandbox.h:
 * kevo_runner_open): a stray access anywhere else faults, and the fault's address names
 * the tensor and the side (kevo_backend_ops.fault).
 *
 * compile builds the source plus a generated call shim (backend_cpu_shim.c) with the system
 * compiler (backend_cpu_cc.c) into a shared object. The first launch of a module starts its
 * runner (sandbox.c), which loads the object inside the sandbox; the worker itself never
 * runs candidate code.
 * Launches are checked here against the parameter types the shim reports, then sent to the
 * runner; sync/time wait for the reply with the deadline. The verification ops run
 * verify.c's host functions on the arena directly (the worker maps it): no copies.
 *
 * Ordering: like one device stream. A launch, a memory operation or a free first waits for
 * the previous launch; a fault found by such an implicit wait is returned by that call and
 * again by the next sync. Not thread-safe: one worker thread drives a backend.
 */
#include "worker/backend_cpu.h"
#include "worker/backend_cpu_cc.h"
#include "worker/backend_cpu_shim.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "worker/sandbox.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#define CPU_MAGIC 0x6b637075u               /* "kcpu" */
#define CPU_ALIGN 256                       /* device allocation alignment */
#define CPU_ARENA_MAX ((size_t)64 << 30)    /* bytes live at once, at most */
#define CPU_GAP ((size_t)1 << 35)           /* never-used arena before each block: 32 GiB,
                                               a 32-bit index of 8-byte elements */
#define CPU_SPACE_MAX ((size_t)1 << 45)     /* arena address space tried first (32 TiB) */
#define CPU_SPACE_MIN ((size_t)1 << 40)     /* below this, gaps shrink to space / 64 */
#define CPU_SPACE_FLOOR ((size_t)1 << 28)   /* the least address space tried (256 MiB) */
#define CPU_DEADLINE_S 10.0                 /* default per launch+sync or timed batch */
#define CPU_FLUSH_DEFAULT ((size_t)64 << 20)

struct cpu_extent {
    size_t off, size;
    size_t user;              /* live blocks: offset of the address alloc returned */
};

/* A sorted array of extents (by offset). */
struct cpu_extents {
    struct cpu_extent *v;
    int n, cap;
};

struct cpu_arena {
    char *reserve;            /* arena + a gap reservation after it */
    size_t reserve_size;
    char *base;
    size_t size;              /* address space */
    size_t cap, live;         /* bytes that may be live at once; are */
    size_t page;
    size_t gap;               /* never-used arena before each block (CPU_GAP normally) */
    struct cpu_extents free_; /* free space, coalesced */
    struct cpu_extents used;  /* live blocks: their pages (the gap before is not counted) */
};

struct cpu_ctx;

struct kevo_module {
    struct cpu_ctx *ctx;
    struct kevo_module *next;
    char *path;               /* the user's path, for messages */
    char *dir;                /* private temp dir holding the .so; NULL once loaded */
    char *so_path;
    int n_entries;
    char **names;
    struct kevo_cproto *protos;
    struct kevo_runner *runner;   /* NULL until the first launch, and after it died */
    uint64_t slot;            /* arena block the runner reports in (struct kevo_runner_slot) */
    struct kevo_span open[KEVO_SPANS_MAX];   /* the blocks open in the runner now */
    int n_open;
    int dead;
    struct kevo_buf dead_msg; /* why the runner is gone */
};

struct cpu_ctx {
    uint32_t magic;
    struct kevo_device_info info;
    struct cpu_arena arena;
    struct kevo_sandbox *sb;
    double deadline_s;
    struct kevo_module *modules;
    struct kevo_module *pending;  /* module whose RUN has not been waited for */
    double pending_deadline;
    enum kevo_status fault_st;    /* fault found by an implicit wait, for the next sync */
    struct kevo_buf fault_msg;
    int fault_known;              /* the last runner fault's address, for ops.fault */
    uint64_t fault_addr;
    int fault_write;
    char *flush;
    size_t flush_size;
    unsigned flush_round;
};

static const struct kevo_backend_ops cpu_ops;

/* ---- device facts ---- */

/* "32768K" -> bytes; 0 if unreadable. */
static int64_t read_cache_size(const char *path)
{
    char s[64] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(s, sizeof s, f))
        s[0] = '\0';
    fclose(f);
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s || v <= 0)
        return 0;
    if (*end == 'K')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    return (int64_t)v;
}

/* The last-level cache of cpu0 (highest level listed in sysfs); 0 if unknown. */
static int64_t llc_bytes(void)
{
    int64_t best = 0;
    int best_level = -1;
    for (int i = 0; i < 16; i++) {
        char p[128];
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        int64_t level = read_cache_size(p);   // a plain number
        if (level <= 0)
            continue;
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        int64_t size = read_cache_size(p);
        if (level > best_level || (level == best_level && size > best)) {
            best_level = (int)level;
            best = size;
        }
    }
    return best;
}

/* Value of the first "key : value" line of /proc/cpuinfo into out; 0 if found. */
static int cpuinfo_field(const char *key, char *out, size_t n)
{
    char line[512];
    int rc = -1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return -1;
    while (rc && fgets(line, sizeof line, f)) {
        size_t kl = strlen(key);
        char *colon = strchr(line, ':');
        if (strncmp(line, key, kl) != 0 || !colon ||
            strspn(line + kl, " \t") != (size_t)(colon - line) - kl)
            continue;   // another key, or one that merely starts with this one
        char *v = colon + 1 + strspn(colon + 1, " \t");
        v[strcspn(v, "\n")] = '\0';
        snprintf(out, n, "%s", v);
        rc = 0;
    }
    fclose(f);
    return rc;
}

static void fill_info(struct kevo_device_info *d)
{
    struct utsname u;
    char mhz[64];
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

    memset(d, 0, sizeof *d);
    if (cpuinfo_field("model name", d->name, sizeof d->name) != 0)
        snprintf(d->name, sizeof d->name, "cpu");
    if (uname(&u) == 0) {
        size_t n = strnlen(u.machine, sizeof d->arch - 1);
        memcpy(d->arch, u.machine, n);   // "x86_64"; cut to fit
        d->arch[n] = '\0';
    }
    d->n_sms = (int)sysconf(_SC_NPROCESSORS_ONLN);
    d->l2_bytes = llc_bytes();
    d->mem_bytes = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
    d->max_threads_per_block = 1;   // a CPU call is one "block"
    d->alloc_granule = page > 0 ? (int64_t)page : 4096;
    if (cpuinfo_field("cpu MHz", mhz, sizeof mhz) == 0)
        d->clock_mhz = (int)strtod(mhz, NULL);
}

/* ---- arena ---- */

/* Insert e at index i. */
static enum kevo_status ext_insert(struct cpu_extents *x, int i, struct cpu_extent e)
{
    if (x->n == x->cap) {
        int cap = x->cap ? x->cap * 2 : 64;
        struct cpu_extent *v = kevo_reallocarray(x->v, (size_t)cap, sizeof *v);
        if (!v)
            return KEVO_ERR_NOMEM;
        x->v = v;
        x->cap = cap;
    }
    memmove(x->v + i + 1, x->v + i, sizeof *x->v * (size_t)(x->n - i));
    x->v[i] = e;
    x->n++;
    return KEVO_OK;
}

static void ext_remove(struct cpu_extents *x, int i)
{
    memmove(x->v + i, x->v + i + 1, sizeof *x->v * (size_t)(x->n - i - 1));
    x->n--;
}

/* First index whose offset is >= off. */
static int ext_lower(const struct cpu_extents *x, size_t off)
{
    int lo = 0, hi = x->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (x->v[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/*
 * Map the arena: `cap` bytes may be live at once, in an address space as large as the
 * system gives (from CPU_SPACE_MAX, or $KEVO_CPU_ARENA_SPACE bytes, down by halves): each
 * block costs a gap of it. MAP_NORESERVE: gaps and free space never become memory, except
 * where the kernel accounts every shared mapping (vm.overcommit_memory=2): there the
 * space, and below CPU_SPACE_MIN the gaps (space / 64) and cap, shrink until it fits.
 */
static enum kevo_status arena_init(struct cpu_arena *a, size_t cap, struct kevo_buf *err)
{
    const char *env = getenv("KEVO_CPU_ARENA_SPACE");
    size_t first = CPU_SPACE_MAX;

    memset(a, 0, sizeof *a);
    a->page = (size_t)sysconf(_SC_PAGESIZE);
    if (env && *env) {
        char *end = NULL;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end || v < CPU_SPACE_FLOOR || v > CPU_SPACE_MAX) {
            kevo_buf_say(err, "KEVO_CPU_ARENA_SPACE=%s: not a byte count from %zu to %zu", env,
                         CPU_SPACE_FLOOR, CPU_SPACE_MAX);
            return KEVO_ERR_INVALID;
        }
        first = (size_t)v / CPU_SPACE_FLOOR * CPU_SPACE_FLOOR;
    }
    for (size_t space = first; space >= CPU_SPACE_FLOOR && !a->base; space /= 2) {
        a->gap = space >= CPU_SPACE_MIN ? CPU_GAP : space / 64;
        a->reserve_size = space + a->gap;
        a->reserve = mmap(NULL, a->reserve_size, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (a->reserve == MAP_FAILED) {
            a->reserve = NULL;
            continue;
        }
        a->base = mmap(a->reserve, space, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        if (a->base == MAP_FAILED) {
            a->base = NULL;
            munmap(a->reserve, a->reserve_size);
            a->reserve = NULL;
            continue;
        }
        a->size = space;
    }
    if (!a->base) {
        kevo_buf_say(err, "mapping the shared arena (%zu bytes of address space at least): %s",
                     CPU_SPACE_FLOOR, strerror(errno));
        return KEVO_ERR_SYSTEM;
    }
    a->cap = cap < a->size / 2 ? cap : a->size / 2;
    if (a->gap < CPU_GAP)
        KEVO_WARN("backend_cpu: a %zu MiB arena: gaps between buffers are %zu MiB, not %zu GiB "
                  "(the system refused more address space; vm.overcommit_memory=2?)",
                  a->size >> 20, a->gap >> 20, CPU_GAP >> 30);
    return ext_insert(&a->free_, 0, (struct cpu_extent){ 0, a->size, 0 });
}

static void arena_release(struct cpu_arena *a)
{
    if (a->reserve)
        munmap(a->reserve, a->reserve_size);
    kevo_free(a->free_.v);
    kevo_free(a->used.v);
    memset(a, 0, sizeof *a);
}

/*
 * First fit of CPU_GAP + the block's pages; the block starts after the gap and the address
 * returned ends its last page (CPU_ALIGN-aligned: every size is rounded to a multiple).
 */
static enum kevo_status arena_alloc(struct cpu_arena *a, size_t bytes, uint64_t *out)
{
    size_t need, span, take;
    *out = 0;
    if (bytes > a->cap - a->live)
        return KEVO_ERR_NOMEM;
    need = (bytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN;
    need = need ? need : CPU_ALIGN;
    span = (need + a->page - 1) / a->page * a->page;
    take = a->gap + span;
    if (span > a->cap - a->live)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < a->free_.n; i++) {
        struct cpu_extent *f = &a->free_.v[i];
        if (f->size < take)
            continue;
        struct cpu_extent blk = { f->off + a->gap, span, f->off + a->gap + span - need };
        enum kevo_status st = ext_insert(&a->used, ext_lower(&a->used, blk.off), blk);
        if (st)
            return st;
        f->off += take;
        f->size -= take;
        if (f->size == 0)
            ext_remove(&a->free_, i);
        a->live += span;
        *out = (uint64_t)(uintptr_t)(a->base + blk.user);
        return KEVO_OK;
    }
    return KEVO_ERR_NOMEM;
}

/* The live block whose pages hold addr, or NULL. */
static const struct cpu_extent *block_of(const struct cpu_arena *a, uint64_t addr)
{
    uint64_t base = (uint64_t)(uintptr_t)a->base;
    if (addr < base || addr - base >= a->size)
        return NULL;
    size_t off = (size_t)(addr - base);
    int i = ext_lower(&a->used, off + 1) - 1;   // last block starting at or before off
    if (i < 0 || off >= a->used.v[i].off + a->used.v[i].size)
        return NULL;
    return &a->used.v[i];
}

static void arena_free(struct cpu_arena *a, uint64_t addr)
{
    const struct cpu_extent *b = block_of(a, addr);
    int u, i;

    if (!b || b->user != (size_t)(addr - (uint64_t)(uintptr_t)a->base)) {
        KEVO_WARN("backend_cpu: free of an address that is not allocated (%#llx)",
                  (unsigned long long)addr);
        return;
    }
    u = (int)(b - a->used.v);
    struct cpu_extent blk = { b->off - a->gap, b->size + a->gap, 0 };
    // its pages go back to the OS (they read as 0 when reused); the gap was never touched
    if (madvise(a->base + b->off, b->size, MADV_REMOVE) != 0)
        KEVO_DEBUG("backend_cpu: madvise(MADV_REMOVE): %s", strerror(errno));
    a->live -= b->size;
    ext_remove(&a->used, u);
    i = ext_lower(&a->free_, blk.off);
    int join_prev = i > 0 && a->free_.v[i - 1].off + a->free_.v[i - 1].size == blk.off;
    int join_next = i < a->free_.n && blk.off + blk.size == a->free_.v[i].off;
    if (join_prev && join_next) {
        a->free_.v[i - 1].size += blk.size + a->free_.v[i].size;
        ext_remove(&a->free_, i);
    } else if (join_prev) {
        a->free_.v[i - 1].size += blk.size;
    } else if (join_next) {
        a->free_.v[i].off = blk.off;
        a->free_.v[i].size += blk.size;
    } else if (ext_insert(&a->free_, i, blk) != KEVO_OK) {
        KEVO_WARN("backend_cpu: out of memory; %zu bytes of arena address space lost", blk.size);
    }
}

/* Is [addr, addr+n) inside one live block? */
static int arena_has(const struct cpu_arena *a, uint64_t addr, size_t n)
{
    const struct cpu_extent *b = block_of(a, addr);
    uint64_t end = b ? (uint64_t)(uintptr_t)(a->base + b->off + b->size) : 0;
    return b && n <= end - addr;
}

/* ---- modules ---- */

static struct cpu_ctx *ctx_of(void *vctx)
{
    struct cpu_ctx *c = vctx;
    KEVO_ASSERT(c && c->magic == CPU_MAGIC);
    return c;
}

/* Kill the module's runner (if any) and give back its arena slot. */
static void module_stop_runner(struct kevo_module *m)
{
    kevo_runner_free(m->runner);
    m->runner = NULL;
    if (m->ctx->pending == m)
        m->ctx->pending = NULL;
    if (m->slot) {
        arena_free(&m->ctx->arena, m->slot);
        m->slot = 0;
    }
    m->n_open = 0;   // a new runner starts with nothing open
}

static void module_release(struct kevo_module *m)
{
    if (!m)
        return;
    if (m->ctx)
        module_stop_runner(m);
    kevo_cpu_remove_dir(m->dir);
    for (int e = 0; e < m->n_entries; e++) {
        if (m->names)
            kevo_free(m->names[e]);
        if (m->protos)
            kevo_cproto_clear(&m->protos[e]);
    }
    kevo_free(m->names);
    kevo_free(m->protos);
    kevo_free(m->path);
    kevo_free(m->dir);
    kevo_free(m->so_path);
    kevo_buf_free(&m->dead_msg);
    kevo_free(m);
}

static enum kevo_status cpu_compile(void *vctx, const struct kevo_compile_req *req,
                                    struct kevo_module **out, struct kevo_buf *log)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = KEVO_OK;
    struct kevo_module *m;
    struct kevo_buf so;

    *out = NULL;
    kevo_buf_init(&so, PATH_MAX);
    m = kevo_calloc(1, sizeof *m);
    if (!m)
        return KEVO_ERR_NOMEM;
    kevo_buf_init(&m->dead_msg, 4096);
    m->n_entries = req->n_entries > 0 ? req->n_entries : 0;
    m->names = kevo_calloc((size_t)m->n_entries + 1, sizeof *m->names);
    m->protos = kevo_calloc((size_t)m->n_entries + 1, sizeof *m->protos);
    m->path = kevo_strdup(req->path ? req->path : "<source>");
    if (!m->names || !m->protos || !m->path) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    for (int e = 0; e < m->n_entries && !st; e++) {
        m->names[e] = kevo_strdup(req->entries && req->entries[e] ? req->entries[e] : "?");
        st = m->names[e] ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    if (!st)
        st = kevo_cpu_build(req, m->protos, &m->dir, log);
    if (!st)
        st = kevo_buf_addf(&so, "%s/" KEVO_CPU_SO_NAME, m->dir);
    if (st)
        goto out;
    m->so_path = kevo_buf_take(&so);
    if (!m->so_path) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    m->ctx = ctx;
    m->next = ctx->modules;
    ctx->modules = m;
    *out = m;
    m = NULL;
out:
    module_release(m);
    kevo_buf_free(&so);
    return st;
}

static enum kevo_status cpu_func_info(void *vctx, struct kevo_module *m, int entry,
                                      struct kevo_func_info *out)
{
    (void)ctx_of(vctx);
    memset(out, 0, sizeof *out);
    if (!m || entry < 0 || entry >= m->n_entries)
        return KEVO_ERR_NOTFOUND;
    out->n_params = m->protos[entry].n_params;   // param_size stays 0: unknown on CPU
    return KEVO_OK;
}

static void cpu_module_free(void *vctx, struct kevo_module *m)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    if (!m)
        return;
    for (struct kevo_module **p = &ctx->modules; *p; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            break;
        }
    }
    module_release(m);
}

/* ---- faults ---- */

/* "during 'f'" / "while loading the module" / "between calls" */
static void where(struct kevo_buf *b, const struct kevo_module *m, int entry)
{
    if (entry >= 0 && entry < m->n_entries)
        kevo_buf_say(b, "during '%s'", m->names[entry]);
    else if (entry == -2)
        kevo_buf_say(b, "while loading the module (constructors)");
    else
        kevo_buf_say(b, "between calls");
}

/*
 * Turn how a runner wait ended into a status and a message appended to *err; `detail` is
 * the runner's own text for LOAD/SETUP (may be NULL). For anything but a refused argument
 * count the runner is gone and the module is marked dead.
 */
static enum kevo_status run_fault(struct cpu_ctx *ctx, struct kevo_module *m,
                                  const struct kevo_run_result *res, const char *detail,
                                  struct kevo_buf *err)
{
    enum kevo_status st = KEVO_ERR_DEVICE;
    struct kevo_buf *b = &m->dead_msg;
    char sig[32];

    if (res->end == KEVO_RUN_OK)
        return KEVO_OK;
    if (res->end == KEVO_RUN_ARGS) {
        kevo_buf_say(err, "call %d: the shim of %s refused the argument count", res->call, m->path);
        return KEVO_ERR_LAUNCH;
    }
    kevo_buf_reset(b);
    switch (res->end) {
    case KEVO_RUN_LOAD:
        kevo_buf_say(b, "runner could not load the module: %s", detail ? detail : "?");
        break;
    case KEVO_RUN_SETUP:
        kevo_buf_say(b, "sandbox setup failed: %s", detail ? detail : "?");
        st = KEVO_ERR_SANDBOX;
        break;
    case KEVO_RUN_SIGNALED:
        snprintf(sig, sizeof sig, "SIG%s", sigabbrev_np(res->sig) ? sigabbrev_np(res->sig) : "?");
        kevo_buf_say(b, "runner killed by %s ", sig);
        where(b, m, res->entry);
        if (res->fault_known) {
            ctx->fault_known = 1;
            ctx->fault_addr = res->fault_addr;
            ctx->fault_write = res->fault_write;
            kevo_buf_say(b, ": %s %#llx, outside every tensor the call was given",
                         res->fault_write == 1 ? "a store to" : res->fault_write == 0 ? "a load from"
                                                                                   : "an access to",
                         (unsigned long long)res->fault_addr);
        }
        break;
    case KEVO_RUN_EXITED:
        if (res->code < 0)
            kevo_buf_say(b, "runner died (exit status unknown) ");
        else if (res->entry == -1)
            kevo_buf_say(b, "runner exited with status %d ", res->code);
        else
            kevo_buf_say(b, "candidate called exit(%d) ", res->code);
        where(b, m, res->entry);
        break;
    case KEVO_RUN_TIMEOUT:
        kevo_buf_say(b, "deadline of %g s passed ", ctx->deadline_s);
        where(b, m, res->entry);
        kevo_buf_say(b, "; runner killed");
        st = KEVO_ERR_TIMEOUT;
        break;
    default:
        kevo_buf_say(b, "runner broke the protocol ");
        where(b, m, res->entry);
        kevo_buf_say(b, "; runner killed");
        break;
    }
    kevo_buf_say(err, "%s: %s", m->path, kevo_buf_str(b));
    m->dead = 1;
    module_stop_runner(m);
    return st;
}

/* Wait for the outstanding RUN, if any. */
static enum kevo_status finish_pending(struct cpu_ctx *ctx, struct kevo_buf *err)
{
    struct kevo_module *m = ctx->pending;
    struct kevo_run_result res;
    enum kevo_status st;

    if (!m)
        return KEVO_OK;
    ctx->pending = NULL;
    st = kevo_runner_wait(m->runner, ctx->pending_deadline, &res);
    if (st)
        return st;
    return run_fault(ctx, m, &res, NULL, err);
}

/*
 * The implicit wait of memory operations: a fault is returned by the operation that found
 * it and kept for the next sync (which has an error buffer to explain it).
 */
static enum kevo_status implicit_wait(struct cpu_ctx *ctx)
{
    enum kevo_status st;
    if (!ctx->pending)
        return KEVO_OK;
    kevo_buf_reset(&ctx->fault_msg);
    st = finish_pending(ctx, &ctx->fault_msg);
    if (st)
        ctx->fault_st = st;
    return st;
}

/* Make sure the module has a live runner (starting it on first use). */
static enum kevo_status module_ready(struct cpu_ctx *ctx, struct kevo_module *m,
                                     struct kevo_buf *err)
{
    struct kevo_run_result res;
    struct kevo_buf why;
    enum kevo_status st;

    if (m->dead) {
        kevo_buf_say(err, "%s: runner is gone (%s)", m->path, kevo_buf_str(&m->dead_msg));
        return KEVO_ERR_DEVICE;
    }
    if (m->runner)
        return KEVO_OK;
    kevo_buf_init(&why, 4096);
    st = arena_alloc(&ctx->arena, sizeof(struct kevo_runner_slot), &m->slot);
    if (!st)
        st = kevo_runner_start(ctx->sb, m->so_path, m->n_entries, m->slot,
                               kevo_now() + ctx->deadline_s, &m->runner, &res, &why);
    if (st) {
        kevo_buf_say(err, "%s: starting the runner: %s", m->path, kevo_buf_str(&why));
        module_stop_runner(m);   // gives the slot back; the next launch tries again
    } else {
        st = run_fault(ctx, m, &res, kevo_buf_str(&why), err);
    }
    if (!st) {
        // the runner has the object mapped: the file can go now, so a worker killed by
        // the pool (no destroy) leaves nothing behind in the temp dir
        kevo_cpu_remove_dir(m->dir);
        kevo_free(m->dir);
        m->dir = NULL;
    }
    kevo_buf_free(&why);
    return st;
}

/* ---- launching ---- */

static void describe_value(struct kevo_buf *b, const struct kevo_val *v)
{
    if (v->kind == KEVO_VAL_INT)
        kevo_buf_say(b, "value %lld", (long long)v->i);
    else if (v->kind == KEVO_VAL_FLOAT)
        kevo_buf_say(b, "value %g", v->f);
    else
        kevo_buf_say(b, "a tensor");
}

/* Check one call against the entry's parameters; KEVO_ERR_LAUNCH with a message if bad. */
static enum kevo_status check_call(struct kevo_module *m, int ci, const struct kevo_call *c,
                                   struct kevo_buf *err)
{
    int np = 0;
    const struct kevo_shim_param *ps;
    const char *f;

    if (c->entry < 0 || c->entry >= m->n_entries) {
        kevo_buf_say(err, "call %d names entry %d; %s has %d", ci, c->entry, m->path, m->n_entries);
        return KEVO_ERR_LAUNCH;
    }
    f = m->names[c->entry];
    ps = kevo_runner_params(m->runner, c->entry, &np);
    if (np != m->protos[c->entry].n_params || c->n_args != np) {
        kevo_buf_say(err, "'%s' takes %d argument%s; call %d passes %d", f,
             m->protos[c->entry].n_params, m->protos[c->entry].n_params == 1 ? "" : "s", ci,
             c->n_args);
        return KEVO_ERR_LAUNCH;
    }
    for (int k = 0; k < np; k++) {
        const char *type = m->protos[c->entry].types[k];
        enum kevo_arg_fit fit = kevo_cpu_arg_check(&ps[k], &c->args[k]);
        if (fit == KEVO_ARG_FITS)
            continue;
        kevo_buf_say(err, "'%s': argument %d (", f, k + 1);
        describe_value(err, &c->args[k]);
        if (fit == KEVO_ARG_RANGE)
            kevo_buf_say(err, ") does not fit parameter type '%s'", type);
        else if (fit == KEVO_ARG_NEED_PTR)
            kevo_buf_say(err, ") is not a tensor, but parameter type '%s' is a pointer", type);
        else if (fit == KEVO_ARG_NOT_PTR)
            kevo_buf_say(err, ") is a tensor, but parameter type '%s' is not a pointer", type);
        else
            kevo_buf_say(err, "): parameter type '%s' cannot be passed", type);
        return KEVO_ERR_LAUNCH;
    }
    return KEVO_OK;
}

/* A fill the runner will do: inside the arena, 4-byte aligned. */
static enum kevo_status check_fill(struct cpu_ctx *ctx, int ci, const struct kevo_call *c,
                                   struct kevo_buf *err)
{
    if (c->n_args != 3 || c->args[0].ptr % 4 || c->args[1].i < 0 ||
        !arena_has(&ctx->arena, c->args[0].ptr, (size_t)c->args[1].i)) {
        kevo_buf_say(err, "call %d: a fill outside device memory", ci);
        return KEVO_ERR_INVALID;
    }
    return KEVO_OK;
}

/* Add the pages of the block holding addr to the sorted set sp[*n]; -1 when full. */
static int span_add(const struct cpu_arena *a, uint64_t addr, struct kevo_span *sp, int *n)
{
    const struct cpu_extent *b = block_of(a, addr);
    struct kevo_span x;
    int i = 0;

    if (!b)
        return 0;   // not a block: the runner will fault on it, as it should
    x.addr = (uint64_t)(uintptr_t)(a->base + b->off);
    x.len = b->size;
    while (i < *n && sp[i].addr < x.addr)
        i++;
    if (i < *n && sp[i].addr == x.addr)
        return 0;
    if (*n == KEVO_SPANS_MAX)
        return -1;
    memmove(sp + i + 1, sp + i, sizeof *sp * (size_t)(*n - i));
    sp[i] = x;
    (*n)++;
    return 0;
}

/* Open in the module's runner exactly the blocks the plan points into (sandbox.h), unless
 * they are what is open already. */
static enum kevo_status open_plan(struct cpu_ctx *ctx, struct kevo_module *m,
                                  const struct kevo_call *calls, int n_calls, struct kevo_buf *err)
{
    struct kevo_span sp[KEVO_SPANS_MAX];
    struct kevo_run_result res;
    int n = 0;
    enum kevo_status st;

    for (int c = 0; c < n_calls; c++) {
        for (int k = 0; k < calls[c].n_args; k++) {
            if (calls[c].args[k].kind != KEVO_VAL_PTR &&
                !(calls[c].entry == KEVO_ENTRY_FILL && k == 0))
                continue;
            if (span_add(&ctx->arena, calls[c].args[k].ptr, sp, &n) < 0) {
                kevo_buf_say(err, "the plan points into more than %d buffers", KEVO_SPANS_MAX);
                return KEVO_ERR_LAUNCH;
            }
        }
    }
    if (n == m->n_open && !memcmp(sp, m->open, sizeof *sp * (size_t)n))
        return KEVO_OK;
    st = kevo_runner_open(m->runner, sp, n, kevo_now() + ctx->deadline_s, &res);
    if (!st)
        st = run_fault(ctx, m, &res, NULL, err);
    if (!st) {
        memcpy(m->open, sp, sizeof *sp * (size_t)n);
        m->n_open = n;
    }
    return st;
}

/* Everything a launch or a timed batch does before it sends the plan. */
static enum kevo_status prepare(struct cpu_ctx *ctx, struct kevo_module *m,
                                const struct kevo_call *calls, int n_calls,
                                struct kevo_buf *err)
{
    enum kevo_status st;

    if (!m || n_calls < 0 || (n_calls && !calls)) {
        kevo_buf_say(err, "invalid launch request");
        return KEVO_ERR_INVALID;
    }
    st = finish_pending(ctx, err);
    if (!st)
        st = module_ready(ctx, m, err);
    for (int c = 0; c < n_calls && !st; c++) {
        if (calls[c].n_args < 0 || calls[c].n_args > KEVO_MAX_ARGS) {
            kevo_buf_say(err, "call %d has %d arguments", c, calls[c].n_args);
            return KEVO_ERR_LAUNCH;
        }
        st = calls[c].entry == KEVO_ENTRY_FILL ? check_fill(ctx, c, &calls[c], err)
                                               : check_call(m, c, &calls[c], err);
    }
    if (!st)
        st = open_plan(ctx, m, calls, n_calls, err);
    ctx->fault_known = 0;
    return st;
}

static enum kevo_status cpu_launch(void *vctx, struct kevo_module *m,
                                   const struct kevo_call *calls, int n_calls,
                                   struct kevo_buf *err)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = prepare(ctx, m, calls, n_calls, err);

    if (st || n_calls == 0)
        return st;
    st = kevo_runner_send(m->runner, calls, n_calls, 1, err);
    if (st)
        return st;
    ctx->pending = m;
    ctx->pending_deadline = kevo_now() + ctx->deadline_s;
    return KEVO_OK;
}

static enum kevo_status cpu_sync(void *vctx, struct kevo_buf *err)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = finish_pending(ctx, err);

    if (!st && ctx->fault_st) {   // found by a memory operation's implicit wait
        st = ctx->fault_st;
        kevo_buf_say(err, "%s", kevo_buf_str(&ctx->fault_msg));
    }
    ctx->fault_st = KEVO_OK;
    kevo_buf_reset(&ctx->fault_msg);
    return st;
}

/* Write back and evict [p, p+n) from every cache of every core (x86: clflush). */
static void evict_range(const char *p, size_t n)
{
#if defined(__x86_64__) || defined(__i386__)
    for (size_t i = 0; i < n; i += 64)
        __builtin_ia32_clflush(p + i);
#else
    (void)p;
    (void)n;
#endif
}

/*
 * Cold caches before a timed batch, done by the worker (the runner could skip it):
 * 1. every arena block a pointer argument points into is flushed line by line, which also
 *    evicts it from the private caches of the cores the runner's threads ran on;
 * 2. a buffer of 2x the last-level cache is swept with ordinary stores (one per line; not
 *    memset, whose non-temporal stores bypass the cache and leave a write backlog that
 *    would land in the timed region).
 */
static enum kevo_status flush_caches(struct cpu_ctx *ctx, const struct kevo_call *calls,
                                     int n_calls)
{
    if (!ctx->flush) {
        ctx->flush_size = ctx->info.l2_bytes > 0 ? 2 * (size_t)ctx->info.l2_bytes
                                                 : CPU_FLUSH_DEFAULT;
        ctx->flush = kevo_malloc(ctx->flush_size);
        if (!ctx->flush)
            return KEVO_ERR_NOMEM;
    }
    for (int c = 0; c < n_calls; c++) {
        for (int k = 0; k < calls[c].n_args; k++) {
            const struct cpu_extent *blk = calls[c].args[k].kind == KEVO_VAL_PTR
                                               ? block_of(&ctx->arena, calls[c].args[k].ptr)
                                               : NULL;
            if (blk)
                evict_range(ctx->arena.base + blk->off, blk->size);
        }
    }
    volatile char *p = ctx->flush;
    char v = (char)++ctx->flush_round;
    for (size_t i = 0; i < ctx->flush_size; i += 64)
        p[i] = v;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);   // the flushes are done before the clock starts
    return KEVO_OK;
}

static enum kevo_status cpu_time(void *vctx, struct kevo_module *m,
                                 const struct kevo_call *calls, int n_calls, int batch,
                                 int flush, struct kevo_sample *out, struct kevo_buf *err)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    struct kevo_run_result res;
    enum kevo_status st;
    double t0;

    memset(out, 0, sizeof *out);
    if (batch < 1) {
        kevo_buf_say(err, "timed batch of %d passes", batch);
        return KEVO_ERR_INVALID;
    }
    st = prepare(ctx, m, calls, n_calls, err);
    if (!st && flush)
        st = flush_caches(ctx, calls, n_calls);
    if (st)
        return st;
    kevo_runner_resume(m->runner);   // waking it is not part of the measured work
    t0 = kevo_now();
    st = kevo_runner_send(m->runner, calls, n_calls, batch, err);
    if (!st)
        st = kevo_runner_wait(m->runner, t0 + ctx->deadline_s, &res);
    if (!st)
        st = run_fault(ctx, m, &res, NULL, err);
    if (st)
        return st;
    out->seconds = res.t_reply - t0;   // the worker's clock: the runner cannot forge it
    out->sm_clock_mhz = 0;
    return KEVO_OK;
}

/* ---- memory ---- */

static enum kevo_status cpu_alloc(void *vctx, size_t bytes, uint64_t *out)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = arena_alloc(&ctx->arena, bytes, out);
    if (st == KEVO_ERR_NOMEM)
        KEVO_WARN("backend_cpu: arena exhausted allocating %zu bytes", bytes);
    return st;
}

static void cpu_free(void *vctx, uint64_t addr)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    if (!addr)
        return;
    (void)implicit_wait(ctx);   // a running candidate may still use the block
    arena_free(&ctx->arena, addr);
}

/* Common checks of upload/download/fill32. */
static enum kevo_status mem_op(struct cpu_ctx *ctx, uint64_t addr, size_t n, const char *op)
{
    enum kevo_status st = implicit_wait(ctx);
    if (st)
        return st;
    if (!arena_has(&ctx->arena, addr, n)) {
        KEVO_WARN("backend_cpu: %s of %zu bytes at %#llx is outside device memory", op, n,
                  (unsigned long long)addr);
        return KEVO_ERR_INVALID;
    }
    return KEVO_OK;
}

static enum kevo_status cpu_upload(void *vctx, uint64_t dst, const void *src, size_t n)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = mem_op(ctx, dst, n, "upload");
    if (!st && n)
        memcpy((void *)(uintptr_t)dst, src, n);
    return st;
}

static enum kevo_status cpu_download(void *vctx, void *dst, uint64_t src, size_t n)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = mem_op(ctx, src, n, "download");
    if (!st && n)
        memcpy(dst, (const void *)(uintptr_t)src, n);
    return st;
}

static enum kevo_status cpu_fill32(void *vctx, uint64_t dst, uint32_t pattern, size_t n)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = mem_op(ctx, dst, n, "fill32");
    char *p = (char *)(uintptr_t)dst;
    size_t done;

    if (st || n == 0)
        return st;
    memcpy(p, &pattern, n < 4 ? n : 4);
    for (done = n < 4 ? n : 4; done < n;) {   // double the filled prefix each step
        size_t k = done < n - done ? done : n - done;
        memcpy(p + done, p, k);
        done += k;
    }
    return KEVO_OK;
}

static enum kevo_status cpu_copy(void *vctx, uint64_t dst, uint64_t src, size_t n)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = mem_op(ctx, dst, n, "copy");
    if (!st)
        st = mem_op(ctx, src, n, "copy");
    if (!st && n)
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return st;
}

/* ---- verification: the host functions of verify.c, run on the arena in place ---- */

/* mem_op for n elements of dt at addr, with the reason in *err (may be NULL). */
static enum kevo_status vmem(struct cpu_ctx *ctx, uint64_t addr, enum kevo_dtype dt, int64_t n,
                             const char *op, struct kevo_buf *err)
{
    size_t bytes = 0;
    enum kevo_status st;

    if (n < 0 || (unsigned)dt >= KEVO_DTYPE_COUNT ||
        __builtin_mul_overflow((size_t)n, kevo_dtype_size(dt), &bytes)) {
        kevo_buf_say(err, "%s: bad element count %lld", op, (long long)n);
        return KEVO_ERR_INVALID;
    }
    st = mem_op(ctx, addr, bytes, op);
    if (st == KEVO_ERR_INVALID)
        kevo_buf_say(err, "%s: %zu bytes at %#llx are outside device memory", op, bytes,
             (unsigned long long)addr);
    else if (st)   /* a fault of the last launch, found by the implicit wait */
        kevo_buf_say(err, "%s", kevo_buf_str(&ctx->fault_msg));
    return st;
}

static enum kevo_status cpu_gen(void *vctx, uint64_t dst, const struct kevo_gen *g,
                                uint64_t seed, uint64_t stream, int64_t n, struct kevo_buf *err)
{
    enum kevo_status st = vmem(ctx_of(vctx), dst, g->dtype, n, "gen", err);
    if (!st)
        kevo_verify_generate(g, seed, stream, (void *)(uintptr_t)dst, n);
    return st;
}

static enum kevo_status cpu_gen_check(void *vctx, uint64_t buf, const struct kevo_gen *g,
                                      uint64_t seed, uint64_t stream, int64_t n,
                                      int64_t *first, struct kevo_buf *err)
{
    enum kevo_status st = vmem(ctx_of(vctx), buf, g->dtype, n, "gen_check", err);
    *first = -1;
    if (!st)
        *first = kevo_verify_gen_check(g, seed, stream, (const void *)(uintptr_t)buf, n);
    return st;
}

static enum kevo_status cpu_seal(void *vctx, uint64_t buf, enum kevo_dtype dt, int64_t n,
                                 uint64_t key, struct kevo_buf *err)
{
    enum kevo_status st = vmem(ctx_of(vctx), buf, dt, n, "seal", err);
    if (!st)
        kevo_verify_seal(dt, (void *)(uintptr_t)buf, n, key);
    return st;
}

/* The runner is stopped between calls, so unsealing the reference in place for the
 * length of the judge shows the candidate nothing. */
static enum kevo_status cpu_judge(void *vctx, const struct kevo_judge_req *rq,
                                  struct kevo_judge_res *res, struct kevo_buf *err)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    enum kevo_status st = vmem(ctx, rq->a, rq->dt, rq->n, "judge", err);

    memset(res, 0, sizeof *res);
    if (!st && rq->b)
        st = vmem(ctx, rq->b, rq->dt, rq->n, "judge", err);
    if (!st)
        st = vmem(ctx, rq->ref, rq->dt, rq->n, "judge", err);
    if (!st)
        kevo_verify_judge_sealed(rq, (const void *)(uintptr_t)rq->a,
                                 rq->b ? (const void *)(uintptr_t)rq->b : NULL,
                                 (void *)(uintptr_t)rq->ref, res);
    return st;
}

/* ---- device ---- */

static int cpu_fault(void *vctx, uint64_t *addr, int *write)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    *addr = ctx->fault_addr;
    *write = ctx->fault_write;
    return ctx->fault_known;
}

static enum kevo_status cpu_info(void *vctx, struct kevo_device_info *out)
{
    *out = ctx_of(vctx)->info;
    return KEVO_OK;
}

static void cpu_destroy(void *vctx)
{
    struct cpu_ctx *ctx = ctx_of(vctx);
    while (ctx->modules) {
        struct kevo_module *m = ctx->modules;
        ctx->modules = m->next;
        module_release(m);
    }
    kevo_sandbox_free(ctx->sb);
    arena_release(&ctx->arena);
    kevo_free(ctx->flush);
    kevo_buf_free(&ctx->fault_msg);
    ctx->magic = 0;
    kevo_free(ctx);
}

static const struct kevo_backend_ops cpu_ops = {
    .name = "cpu",
    .info = cpu_info,
    .compile = cpu_compile,
    .func_info = cpu_func_info,
    .occupancy = NULL,
    .module_free = cpu_module_free,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .fill32 = cpu_fill32,
    .copy = cpu_copy,
    .gen = cpu_gen,
    .gen_check = cpu_gen_check,
    .seal = cpu_seal,
    .judge = cpu_judge,
    .launch = cpu_launch,
    .sync = cpu_sync,
    .time = cpu_time,
    .fault = cpu_fault,
    .destroy = cpu_destroy,
};

enum kevo_status kevo_backend_open_cpu(struct kevo_backend *out, struct kevo_buf *err)
{
    enum kevo_status st;
    struct cpu_ctx *ctx;
    struct kevo_sandbox_limits lim;
    size_t arena;

    out->ops = NULL;
    out->ctx = NULL;
    ctx = kevo_calloc(1, sizeof *ctx);
    if (!ctx)
        return KEVO_ERR_NOMEM;
    ctx->magic = CPU_MAGIC;
    ctx->deadline_s = CPU_DEADLINE_S;
    kevo_buf_init(&ctx->fault_msg, 4096);
    fill_info(&ctx->info);
    arena = ctx->info.mem_bytes > 0 ? (size_t)ctx->info.mem_bytes / 2 : ((size_t)4 << 30);
    arena = arena < CPU_ARENA_MAX ? arena : CPU_ARENA_MAX;
    arena = arena / ((size_t)2 << 20) * ((size_t)2 << 20);
    // the arena exists before the spawner is forked: every runner inherits it at this address
    st = arena_init(&ctx->arena, arena, err);
    if (st)
        goto out;
    lim.data_bytes = arena < ((uint64_t)8 << 30) ? arena : ((uint64_t)8 << 30);
    lim.cpu_seconds = 3600;
    lim.nofile = 32;
    lim.guard_base = (uint64_t)(uintptr_t)ctx->arena.base;
    lim.guard_size = ctx->arena.size;
    st = kevo_sandbox_open(&lim, &ctx->sb, err);
    if (st)
        goto out;
    out->ops = &cpu_ops;
    out->ctx = ctx;
    ctx = NULL;
out:
    if (ctx)
        cpu_destroy(ctx);
    return st;
}

void kevo_backend_close(struct kevo_backend *b)
{
    if (b && b->ops)
        b->ops->destroy(b->ctx);
    if (b) {
        b->ops = NULL;
        b->ctx = NULL;
    }
}

void kevo_backend_cpu_set_deadline(struct kevo_backend *b, double seconds)
{
    if (b && b->ops == &cpu_ops && seconds > 0)
        ctx_of(b->ctx)->deadline_s = seconds;
}

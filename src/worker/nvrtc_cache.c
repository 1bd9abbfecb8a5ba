/*
 * nvrtc_cache - in-process LRU + on-disk CUBIN cache for kevo_rtc_compile. The format,
 * key and failure rules are in nvrtc_cache.h. Invariants: the disk is never trusted (every
 * entry is checked against its own key and digest before use), and nothing here can turn
 * a successful compile into a failure. The LRU is guarded by one mutex; copies in and out
 * are made so callers own what they get.
 */
#include "worker/nvrtc_cache.h"
#include "base/clock.h"
#include "base/fsutil.h"

#include "base/log.h"
#include "base/mem.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_FORMAT    1u
#define CACHE_MAGIC     "KEVOCUBN"
#define LRU_SLOTS       64
#define LRU_MAX_ENTRY   (16u << 20)     /* bigger cubins go to disk only */
#define MAX_CUBIN       (512ull << 20)  /* sanity bounds for what a header may claim */
#define MAX_LOG         (16u << 20)

/* On-disk header; fixed-width fields, no padding, host byte order (a cache is local). */
struct entry_hdr {
    char magic[8];
    uint32_t format;
    uint32_t log_size;
    uint64_t cubin_size;
    uint8_t key[KEVO_NVRTC_KEY_BYTES];
    uint8_t digest[KEVO_NVRTC_KEY_BYTES];   /* SHA-256 of log || cubin */
};
_Static_assert(sizeof(struct entry_hdr) == 88, "entry_hdr must have no padding");

struct lru_ent {
    int used;
    uint8_t key[KEVO_NVRTC_KEY_BYTES];
    void *cubin;
    size_t size;
    char *log;
    uint64_t stamp;                          /* last use; the smallest is evicted */
};

static struct lru_ent g_lru[LRU_SLOTS];
static uint64_t g_tick;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_long g_mem_hits, g_disk_hits, g_misses, g_bad, g_writes, g_write_fail;
static atomic_int g_warned;

/* ---- hashing ---- */

struct sha_part {
    const void *p;
    size_t n;
};

/* SHA-256 over the concatenation of parts. */
static enum kevo_status sha256_parts(const struct sha_part *parts, int n_parts,
                                     uint8_t out[KEVO_NVRTC_KEY_BYTES])
{
    enum kevo_status st = KEVO_ERR_SYSTEM;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int len = 0;

    if (!ctx)
        return KEVO_ERR_NOMEM;
    if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
        goto out;
    for (int i = 0; i < n_parts; i++) {
        if (parts[i].n && EVP_DigestUpdate(ctx, parts[i].p, parts[i].n) != 1)
            goto out;
    }
    if (EVP_DigestFinal_ex(ctx, out, &len) != 1 || len != KEVO_NVRTC_KEY_BYTES)
        goto out;
    st = KEVO_OK;
out:
    EVP_MD_CTX_free(ctx);
    return st;
}

enum kevo_status kevo_nvrtc_cache_key(const char *nvrtc_version, const char *arch, int n_opts,
                                      const char *const *opts, const char *source,
                                      size_t source_len, uint8_t key[KEVO_NVRTC_KEY_BYTES])
{
    enum kevo_status st = KEVO_OK;
    char head[64];
    struct sha_part *parts = NULL;
    int n = 0;

    /* Each string is hashed with its NUL, so ("ab","c") and ("a","bc") differ. */
    snprintf(head, sizeof head, "kevo-cubin-cache/%u", CACHE_FORMAT);
    parts = kevo_calloc((size_t)n_opts + 4, sizeof *parts);
    if (!parts)
        return KEVO_ERR_NOMEM;
    parts[n++] = (struct sha_part){head, strlen(head) + 1};
    parts[n++] = (struct sha_part){nvrtc_version, strlen(nvrtc_version) + 1};
    parts[n++] = (struct sha_part){arch, strlen(arch) + 1};
    for (int i = 0; i < n_opts; i++)
        parts[n++] = (struct sha_part){opts[i], strlen(opts[i]) + 1};
    parts[n++] = (struct sha_part){source, source_len};
    st = sha256_parts(parts, n, key);
    kevo_free(parts);
    return st;
}

int kevo_nvrtc_cache_enabled(void)
{
    const char *v = getenv("KEVO_NO_CACHE");

    return !v || !*v || strcmp(v, "0") == 0;
}

/* ---- paths ---- */

void kevo_nvrtc_cache_dir(char *out, size_t n)
{
    char root[PATH_MAX];

    if (n == 0)
        return;
    out[0] = '\0';
    if (kevo_fs_cache_root(root, sizeof root) == 0) {
        int len = snprintf(out, n, "%s/cubin", root);
        if (len < 0 || (size_t)len >= n)
            out[0] = '\0';
    }
}

static void hex_key(const uint8_t key[KEVO_NVRTC_KEY_BYTES], char out[2 * KEVO_NVRTC_KEY_BYTES + 1])
{
    static const char digits[] = "0123456789abcdef";

    for (int i = 0; i < KEVO_NVRTC_KEY_BYTES; i++) {
        out[2 * i] = digits[key[i] >> 4];
        out[2 * i + 1] = digits[key[i] & 15];
    }
    out[2 * KEVO_NVRTC_KEY_BYTES] = '\0';
}

/* <dir>/<hex>.cubin into out[PATH_MAX]; -1 when there is no cache directory. */
static int entry_path(const uint8_t key[KEVO_NVRTC_KEY_BYTES], char *out, size_t n)
{
    char dir[PATH_MAX];
    char hex[2 * KEVO_NVRTC_KEY_BYTES + 1];

    kevo_nvrtc_cache_dir(dir, sizeof dir);
    if (!dir[0])
        return -1;
    hex_key(key, hex);
    int len = snprintf(out, n, "%s/%s.cubin", dir, hex);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* ---- in-process LRU ---- */

static int lru_get(const uint8_t key[KEVO_NVRTC_KEY_BYTES], void **out_cubin, size_t *out_size,
                   char **out_log)
{
    int found = 0;

    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < LRU_SLOTS && !found; i++) {
        struct lru_ent *e = &g_lru[i];
        if (!e->used || memcmp(e->key, key, KEVO_NVRTC_KEY_BYTES) != 0)
            continue;
        found = 1;
        e->stamp = ++g_tick;
        *out_cubin = kevo_malloc(e->size);
        *out_log = kevo_strdup(e->log);
        if (*out_cubin)
            memcpy(*out_cubin, e->cubin, e->size);
        *out_size = e->size;
    }
    pthread_mutex_unlock(&g_mu);
    if (found && (!*out_cubin || !*out_log)) {   /* out of memory: behave as a miss */
        kevo_free(*out_cubin);
        kevo_free(*out_log);
        *out_cubin = NULL;
        *out_log = NULL;
        return 0;
    }
    return found;
}

/* The slot for key (caller holds g_mu): its own, else a free one, else the least
 * recently used. */
static int lru_slot(const uint8_t key[KEVO_NVRTC_KEY_BYTES])
{
    int oldest = 0;

    for (int i = 0; i < LRU_SLOTS; i++) {
        if (g_lru[i].used && memcmp(g_lru[i].key, key, KEVO_NVRTC_KEY_BYTES) == 0)
            return i;          /* two threads compiled the same thing: replace */
    }
    for (int i = 0; i < LRU_SLOTS; i++) {
        if (!g_lru[i].used)
            return i;
        if (g_lru[i].stamp < g_lru[oldest].stamp)
            oldest = i;
    }
    return oldest;
}

static void lru_put(const uint8_t key[KEVO_NVRTC_KEY_BYTES], const void *cubin, size_t size,
                    const char *log)
{
    struct lru_ent e = {.used = 1, .size = size};

    if (size > LRU_MAX_ENTRY)
        return;
    memcpy(e.key, key, KEVO_NVRTC_KEY_BYTES);
    e.cubin = kevo_malloc(size ? size : 1);
    e.log = kevo_strdup(log ? log : "");
    if (!e.cubin || !e.log)
        goto out;
    memcpy(e.cubin, cubin, size);
    pthread_mutex_lock(&g_mu);
    int slot = lru_slot(key);
    e.stamp = ++g_tick;
    struct lru_ent old = g_lru[slot];
    g_lru[slot] = e;
    pthread_mutex_unlock(&g_mu);
    e = old;                   /* free what was evicted, outside the lock */
out:
    kevo_free(e.cubin);
    kevo_free(e.log);
}

void kevo_nvrtc_cache_drop_memory(void)
{
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < LRU_SLOTS; i++) {
        kevo_free(g_lru[i].cubin);
        kevo_free(g_lru[i].log);
        memset(&g_lru[i], 0, sizeof g_lru[i]);
    }
    pthread_mutex_unlock(&g_mu);
}

void kevo_nvrtc_cache_stats(struct kevo_nvrtc_cache_stats *out)
{
    out->mem_hits = atomic_load(&g_mem_hits);
    out->disk_hits = atomic_load(&g_disk_hits);
    out->misses = atomic_load(&g_misses);
    out->bad_entries = atomic_load(&g_bad);
    out->writes = atomic_load(&g_writes);
    out->write_failures = atomic_load(&g_write_fail);
}

/* ---- disk ---- */

/* Is h a sane header for key, for a file of file_size bytes? */
static int header_ok(const struct entry_hdr *h, const uint8_t key[KEVO_NVRTC_KEY_BYTES],
                     off_t file_size)
{
    if (memcmp(h->magic, CACHE_MAGIC, sizeof h->magic) != 0 || h->format != CACHE_FORMAT)
        return 0;
    if (memcmp(h->key, key, KEVO_NVRTC_KEY_BYTES) != 0)
        return 0;
    if (h->cubin_size == 0 || h->cubin_size > MAX_CUBIN || h->log_size > MAX_LOG)
        return 0;
    return (uint64_t)file_size == sizeof *h + h->log_size + h->cubin_size;
}

/* 1 and the entry's parts on a valid entry; 0 on a miss (absent, foreign or corrupt). */
static int disk_get(const uint8_t key[KEVO_NVRTC_KEY_BYTES], void **out_cubin, size_t *out_size,
                    char **out_log)
{
    char path[PATH_MAX];
    struct entry_hdr h;
    struct stat sb;
    char *body = NULL;
    char *log = NULL;
    uint8_t digest[KEVO_NVRTC_KEY_BYTES];
    int ok = 0;
    int fd = -1;

    if (entry_path(key, path, sizeof path))
        return 0;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < sizeof h || kevo_fs_read_all(fd, &h, sizeof h))
        goto bad;
    if (!header_ok(&h, key, sb.st_size))
        goto bad;
    body = kevo_malloc(h.log_size + h.cubin_size);
    log = kevo_malloc((size_t)h.log_size + 1);
    if (!body || !log)
        goto out;                          /* no memory: a miss, but not a bad entry */
    if (kevo_fs_read_all(fd, body, h.log_size + h.cubin_size))
        goto bad;
    struct sha_part part = {body, h.log_size + h.cubin_size};
    if (sha256_parts(&part, 1, digest) || memcmp(digest, h.digest, sizeof digest) != 0)
        goto bad;
    memcpy(log, body, h.log_size);
    log[h.log_size] = '\0';
    memmove(body, body + h.log_size, h.cubin_size);
    *out_cubin = body;
    *out_size = h.cubin_size;
    *out_log = log;
    body = NULL;
    log = NULL;
    ok = 1;
    goto out;
bad:
    atomic_fetch_add(&g_bad, 1);
    KEVO_DEBUG("nvrtc cache: ignoring bad entry %s", path);
out:
    if (fd >= 0)
        close(fd);
    kevo_free(body);
    kevo_free(log);
    return ok;
}

static uint64_t random64(void)
{
    static atomic_ulong counter;
    uint64_t r = 0;

    if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
        return r;
    uint64_t ns = (uint64_t)(kevo_now() * 1e9);   // no getrandom: the clock and a counter
    return (ns << 20) ^ (ns >> 30) ^ atomic_fetch_add(&counter, 1);
}

static void warn_write(const char *path, const char *what)
{
    atomic_fetch_add(&g_write_fail, 1);
    /* Once at WARN level: an unwritable cache should be noticed, not flood the log. */
    if (atomic_exchange(&g_warned, 1) == 0)
        KEVO_WARN("nvrtc cache: cannot write %s (%s: %s); compiling without caching",
                  path, what, strerror(errno));
    else
        KEVO_DEBUG("nvrtc cache: cannot write %s (%s: %s)", path, what, strerror(errno));
}

/* Write the entry to a temporary name in the cache dir, then rename it into place. */
static void disk_put(const uint8_t key[KEVO_NVRTC_KEY_BYTES], const void *cubin, size_t size,
                     const char *log)
{
    char dir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX + 64];
    struct entry_hdr h;
    size_t log_size = strlen(log);
    int fd = -1;

    kevo_nvrtc_cache_dir(dir, sizeof dir);
    if (!dir[0] || entry_path(key, path, sizeof path))
        return;
    if (log_size > MAX_LOG || size > MAX_CUBIN)
        return;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CACHE_MAGIC, sizeof h.magic);
    h.format = CACHE_FORMAT;
    h.log_size = (uint32_t)log_size;
    h.cubin_size = size;
    memcpy(h.key, key, KEVO_NVRTC_KEY_BYTES);
    struct sha_part parts[2] = {{log, log_size}, {cubin, size}};
    if (sha256_parts(parts, 2, h.digest))
        return;
    if (kevo_fs_mkdirs(dir, 0700)) {
        warn_write(dir, "mkdir");
        return;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%016llx", path, (long)getpid(),
             (unsigned long long)random64());
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        warn_write(tmp, "open");
        return;
    }
    if (kevo_fs_write_all(fd, &h, sizeof h) || kevo_fs_write_all(fd, log, log_size) ||
        kevo_fs_write_all(fd, cubin, size)) {
        warn_write(tmp, "write");
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        warn_write(tmp, "close");
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        warn_write(path, "rename");
        goto fail;
    }
    atomic_fetch_add(&g_writes, 1);
    return;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
}

/* ---- the cache ---- */

enum kevo_status kevo_nvrtc_cache_get(const uint8_t key[KEVO_NVRTC_KEY_BYTES], void **out_cubin,
                                      size_t *out_size, char **out_log)
{
    *out_cubin = NULL;
    *out_size = 0;
    *out_log = NULL;
    if (!kevo_nvrtc_cache_enabled())
        return KEVO_ERR_NOTFOUND;
    if (lru_get(key, out_cubin, out_size, out_log)) {
        atomic_fetch_add(&g_mem_hits, 1);
        return KEVO_OK;
    }
    if (disk_get(key, out_cubin, out_size, out_log)) {
        atomic_fetch_add(&g_disk_hits, 1);
        lru_put(key, *out_cubin, *out_size, *out_log);
        return KEVO_OK;
    }
    atomic_fetch_add(&g_misses, 1);
    return KEVO_ERR_NOTFOUND;
}

void kevo_nvrtc_cache_put(const uint8_t key[KEVO_NVRTC_KEY_BYTES], const void *cubin,
                          size_t size, const char *log)
{
    if (!kevo_nvrtc_cache_enabled() || !cubin || size == 0)
        return;
    lru_put(key, cubin, size, log ? log : "");
    disk_put(key, cubin, size, log ? log : "");
}

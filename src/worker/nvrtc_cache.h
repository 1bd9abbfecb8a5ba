/*
 * nvrtc_cache - the compile cache behind kevo_rtc_compile (private to rtc.c and its
 * tests): a small in-process LRU in front of an on-disk store of CUBINs.
 *
 * Key: SHA-256 over (cache format version, NVRTC version, arch, every option string in
 * order, NUL-separated, then the source bytes). The key covers every input of the binary
 * except the contents of included headers, which belong to the NVRTC version's toolkit.
 *
 * Disk: one file per key, <dir>/<hex key>.cubin, holding a fixed header (magic, format
 * version, key, log and cubin sizes, SHA-256 of log||cubin) then the compile log (for the
 * warnings) and the cubin. Written to "<name>.tmp.<pid>.<random>" and renamed, so readers
 * see a whole entry or none. An entry that fails any check is a miss (and gets replaced).
 * Failing to write never fails a compile: it is logged and ignored.
 * Directory: <cache root>/cubin (fsutil.h: $KEVO_CACHE_DIR, $XDG_CACHE_HOME/kevo or ~/.cache/kevo);
 * created with mode 0700. KEVO_NO_CACHE=1 turns the whole cache (LRU too) off.
 *
 * Thread-safety: all functions may be called from several threads.
 */
#ifndef KEVO_NVRTC_CACHE_H
#define KEVO_NVRTC_CACHE_H

#include "kevo.h"
#include <stddef.h>
#include <stdint.h>

#define KEVO_NVRTC_KEY_BYTES 32

/* Hash the inputs of one compile into key[32]. KEVO_ERR_NVRTC-free: only NOMEM/SYSTEM. */
KEVO_NODISCARD enum kevo_status kevo_nvrtc_cache_key(const char *nvrtc_version,
                                                     const char *arch, int n_opts,
                                                     const char *const *opts,
                                                     const char *source, size_t source_len,
                                                     uint8_t key[KEVO_NVRTC_KEY_BYTES]);

/* 1 unless KEVO_NO_CACHE is set to something other than "" or "0". */
int kevo_nvrtc_cache_enabled(void);

/*
 * Look key up (LRU, then disk). KEVO_OK with *out_cubin, *out_size and *out_log (all
 * kevo_free; the log may be "") on a hit; KEVO_ERR_NOTFOUND on a miss, including a
 * corrupt, truncated or foreign entry.
 */
KEVO_NODISCARD enum kevo_status kevo_nvrtc_cache_get(const uint8_t key[KEVO_NVRTC_KEY_BYTES],
                                                     void **out_cubin, size_t *out_size,
                                                     char **out_log);

/* Store an entry in the LRU and on disk. Never fails: problems are logged. */
void kevo_nvrtc_cache_put(const uint8_t key[KEVO_NVRTC_KEY_BYTES], const void *cubin,
                          size_t size, const char *log);

/* Where entries go, into out[n]; "" when no directory can be determined (no
 * KEVO_CACHE_DIR, XDG_CACHE_HOME or HOME) or the path does not fit. */
void kevo_nvrtc_cache_dir(char *out, size_t n);

/* Tests: counters since start, and dropping the in-process LRU. */
struct kevo_nvrtc_cache_stats {
    long mem_hits, disk_hits, misses, bad_entries, writes, write_failures;
};
void kevo_nvrtc_cache_stats(struct kevo_nvrtc_cache_stats *out);
void kevo_nvrtc_cache_drop_memory(void);

#endif

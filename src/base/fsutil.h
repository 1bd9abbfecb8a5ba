/*
 * fsutil - the few file-system helpers several modules need: whole-buffer read/write on a
 * descriptor (EINTR and short transfers handled), mkdir -p, and the root of kevo's caches.
 */
#ifndef KEVO_FSUTIL_H
#define KEVO_FSUTIL_H

#include "kevo.h"
#include <stddef.h>
#include <sys/types.h>

/* All n bytes, or -1 (errno set; EOF while reading counts as an error, errno 0). */
int kevo_fs_write_all(int fd, const void *p, size_t n);
int kevo_fs_read_all(int fd, void *p, size_t n);

/*
 * A whole regular file of at most max bytes, NUL-terminated (kevo_free *out). Failures
 * (missing, a directory, too large, changed while read) are KEVO_ERR_IO / KEVO_ERR_TOOBIG
 * with *out_msg (may be NULL) "PATH: error: WHAT[: reason]".
 */
KEVO_NODISCARD enum kevo_status kevo_fs_read_file(const char *path, size_t max, char **out,
                                                  size_t *out_len, char **out_msg);

/* mkdir -p of `dir` itself, creating missing parts with `mode`; 0 or -1 (errno set). */
int kevo_fs_mkdirs(const char *dir, mode_t mode);

/*
 * The root of kevo's caches into out (n bytes): $KEVO_CACHE_DIR, else
 * $XDG_CACHE_HOME/kevo, else $HOME/.cache/kevo. Returns 0, or -1 when none is set or the
 * path does not fit (out is then "").
 */
int kevo_fs_cache_root(char *out, size_t n);

#endif

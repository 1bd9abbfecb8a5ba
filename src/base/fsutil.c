/*
 * fsutil - file-system helpers (see fsutil.h).
 */
#include "base/fsutil.h"
#include "base/buf.h"
#include "kevo.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int kevo_fs_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int kevo_fs_read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            errno = 0;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

int kevo_fs_mkdirs(const char *dir, mode_t mode)
{
    char *d = kevo_strdup(dir);
    struct stat sb;
    int rc = 0;

    if (!d || !*d) {
        kevo_free(d);
        errno = d ? EINVAL : ENOMEM;
        return -1;
    }
    for (char *s = d + 1; !rc; s++) {
        int end = *s == '\0';
        if (*s != '/' && !end)
            continue;
        *s = '\0';
        /* an existing directory is fine; an existing file in the way is not */
        if (mkdir(d, mode) != 0 && (errno != EEXIST || stat(d, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
            if (errno == EEXIST)
                errno = ENOTDIR;      /* a file is in the way: say so, not "File exists" */
            rc = -1;
        }
        if (end)
            break;
        *s = '/';
    }
    kevo_free(d);
    return rc;
}

int kevo_fs_cache_root(char *out, size_t n)
{
    const char *dir = getenv("KEVO_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int len = -1;

    if (n == 0)
        return -1;
    if (dir && *dir)
        len = snprintf(out, n, "%s", dir);
    else if (xdg && *xdg)
        len = snprintf(out, n, "%s/kevo", xdg);
    else if (home && *home)
        len = snprintf(out, n, "%s/.cache/kevo", home);
    if (len < 0 || (size_t)len >= n) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

/* "PATH: error: WHAT[: strerror(err)]" into *out_msg. */
static enum kevo_status io_msg(const char *path, enum kevo_status st, const char *what, int err,
                               char **out_msg)
{
    struct kevo_buf b;
    char eb[256];

    if (!out_msg)
        return st;
    kevo_buf_init(&b, 8192);
    kevo_buf_say(&b, "%s: error: %s%s%s", path, what, err ? ": " : "",
                 err ? strerror_r(err, eb, sizeof eb) : "");
    *out_msg = kevo_buf_take(&b);
    return st;
}

enum kevo_status kevo_fs_read_file(const char *path, size_t max, char **out, size_t *out_len,
                                   char **out_msg)
{
    struct stat sb;
    char *buf = NULL, what[64];
    size_t len = 0;
    enum kevo_status st = KEVO_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    *out = NULL;
    if (fd < 0)
        return io_msg(path, KEVO_ERR_IO, "cannot open", errno, out_msg);
    if (max % ((size_t)1 << 20) == 0)
        snprintf(what, sizeof what, "file is larger than %zu MiB", max >> 20);
    else
        snprintf(what, sizeof what, "file is larger than %zu bytes", max);
    if (fstat(fd, &sb) != 0)
        st = io_msg(path, KEVO_ERR_IO, "cannot stat", errno, out_msg);
    else if (S_ISDIR(sb.st_mode))
        st = io_msg(path, KEVO_ERR_IO, "cannot read", EISDIR, out_msg);
    else if (!S_ISREG(sb.st_mode))
        st = io_msg(path, KEVO_ERR_IO, "not a regular file", 0, out_msg);
    else if ((size_t)sb.st_size > max)
        st = io_msg(path, KEVO_ERR_TOOBIG, what, 0, out_msg);
    else if (!(buf = kevo_malloc((size_t)sb.st_size + 1)))
        st = KEVO_ERR_NOMEM;
    while (!st) {
        /* read one byte past the stat size so a file that grew is noticed */
        ssize_t r = read(fd, buf + len, (size_t)sb.st_size + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            st = io_msg(path, KEVO_ERR_IO, "cannot read", errno, out_msg);
        else if (r == 0)
            break;
        else if ((len += (size_t)r) > (size_t)sb.st_size)
            st = io_msg(path, KEVO_ERR_IO, "the file changed while it was read", 0, out_msg);
    }
    close(fd);
    if (st) {
        kevo_free(buf);
        return st;
    }
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return KEVO_OK;
}

/*
 * fsutil - file-system helpers (see fsutil.h).
 */
#include "fsutil.h"
#include "kevo.h"
#include "mem.h"

#include <errno.h>
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
        errno = EINVAL;
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

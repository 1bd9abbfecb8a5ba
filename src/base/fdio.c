/* fdio - whole reads and writes with deadlines (fdio.h). */
#include "base/fdio.h"

#include "base/clock.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/*
 * Wait until fd is readable. poll() sleeps in whole milliseconds and may wake early: the
 * clock is re-checked after every wake-up. late: past the deadline, still take what is
 * already there (one poll that does not wait) before timing out.
 */
static enum kevo_status wait_readable(int fd, const double *deadline, int late)
{
    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        double left = 0.0;
        int ms = -1;
        if (deadline) {
            left = *deadline - kevo_now();
            if (left <= 0 && !late)
                return KEVO_ERR_TIMEOUT;
            ms = left <= 0 ? 0 : left > 86400.0 ? 86400000 : (int)(left * 1000.0) + 1;
        }
        int r = poll(&pfd, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || (r > 0 && (pfd.revents & POLLNVAL)))
            return KEVO_ERR_IO;
        if (r > 0)
            return KEVO_OK;   /* POLLIN, POLLHUP or POLLERR: read() says which */
        if (deadline && left <= 0)
            return KEVO_ERR_TIMEOUT;
    }
}

enum kevo_status kevo_fd_wait_readable(int fd, const double *deadline)
{
    return wait_readable(fd, deadline, 0);
}

enum kevo_status kevo_fd_read_full(int fd, void *p, size_t n, const double *deadline,
                                   size_t *out_got, int *out_eof)
{
    enum kevo_status st = KEVO_OK;
    char *c = p;
    size_t got = 0;

    *out_eof = 0;
    while (got < n) {
        if (deadline) {
            st = wait_readable(fd, deadline, 1);
            if (st)
                break;
        }
        ssize_t r = read(fd, c + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            st = wait_readable(fd, deadline, 1);   /* a non-blocking fd: wait, then retry */
            if (st)
                break;
            continue;
        }
        if (r <= 0) {
            *out_eof = r == 0 || errno == ECONNRESET;   /* a socket's peer that died */
            st = KEVO_ERR_IO;
            break;
        }
        got += (size_t)r;
    }
    *out_got = got;
    return st;
}

/* Wait until fd takes more bytes (a non-blocking writer). */
static void wait_writable(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLOUT };

    while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
        ;
}

/*
 * write() everything, with SIGPIPE blocked in this thread. A write to a closed pipe raises
 * SIGPIPE for the writing thread; if it was not pending before, it is taken back with a
 * zero-timeout sigtimedwait so that it is never delivered once the mask is restored.
 */
enum kevo_status kevo_fd_write_all(int fd, const void *buf, size_t n)
{
    enum kevo_status st = KEVO_OK;
    const char *p = buf;
    sigset_t pipe_set, old, pending;
    int was_pending, broken = 0;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    sigpending(&pending);
    was_pending = sigismember(&pending, SIGPIPE);
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            wait_writable(fd);
            continue;
        }
        if (w < 0) {
            broken = errno == EPIPE;
            st = KEVO_ERR_IO;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    if (broken && !was_pending) {
        struct timespec zero = { 0, 0 };
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return st;
}

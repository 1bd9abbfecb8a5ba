/*
 * fdio - whole reads and writes on pipes and sockets, with an optional deadline. Both the
 * controller (reading its workers) and the worker (reading its sandboxed runners) need a
 * read that gives up at a deadline and tells EOF from a timeout; this is the one.
 *
 * Deadlines are absolute kevo_now() seconds (base/clock.h). Writers never die of SIGPIPE:
 * kevo_fd_write_all blocks the signal around its write() calls and swallows the one a
 * closed pipe raises, so it is safe in any process and thread. Non-blocking fds work too
 * (the calls wait with poll()).
 */
#ifndef KEVO_FDIO_H
#define KEVO_FDIO_H

#include "kevo.h"
#include <stddef.h>

/* Wait until fd is readable or closed. deadline NULL: no limit. KEVO_ERR_TIMEOUT once the
 * deadline has passed (even with bytes waiting: a reader of an endless stream stops there),
 * KEVO_ERR_IO when fd is not open. */
KEVO_NODISCARD enum kevo_status kevo_fd_wait_readable(int fd, const double *deadline);

/* Read exactly n bytes. *out_got: bytes read; *out_eof 1 when the peer closed the pipe or
 * socket (ECONNRESET too; then KEVO_ERR_IO). KEVO_ERR_TIMEOUT when it would have to wait
 * past the deadline (NULL: none): bytes already there are read even when the deadline has
 * passed (at most n of them), so a reader that comes late is not timed out by it. */
KEVO_NODISCARD enum kevo_status kevo_fd_read_full(int fd, void *p, size_t n,
                                                  const double *deadline, size_t *out_got,
                                                  int *out_eof);

/* Write all n bytes (SIGPIPE-safe). KEVO_ERR_IO when the peer is gone. */
KEVO_NODISCARD enum kevo_status kevo_fd_write_all(int fd, const void *p, size_t n);

#endif

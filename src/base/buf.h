/*
 * buf - a growable byte buffer with a hard cap, for logs, JSON, generated source and
 * messages. The cap stops a runaway compiler log or reply from filling memory: past it,
 * appends fail with KEVO_ERR_TOOBIG and the buffer keeps what fitted.
 * The data is always NUL-terminated. Embed by value; kevo_buf_free releases it.
 */
#ifndef KEVO_BUF_H
#define KEVO_BUF_H

#include "kevo.h"
#include <stdarg.h>
#include <stddef.h>

struct kevo_buf {
    char *data;   /* NULL until the first append; always NUL-terminated after */
    size_t len;
    size_t cap;   /* allocated bytes */
    size_t max;   /* hard cap on len */
};

void kevo_buf_init(struct kevo_buf *b, size_t max);
void kevo_buf_free(struct kevo_buf *b);
void kevo_buf_reset(struct kevo_buf *b);                 /* len = 0, keeps memory */
KEVO_NODISCARD enum kevo_status kevo_buf_add(struct kevo_buf *b, const void *p, size_t n);
KEVO_NODISCARD enum kevo_status kevo_buf_adds(struct kevo_buf *b, const char *s);
KEVO_NODISCARD enum kevo_status kevo_buf_addf(struct kevo_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
KEVO_NODISCARD enum kevo_status kevo_buf_vaddf(struct kevo_buf *b, const char *fmt, va_list ap);
/* Append for messages and generated text: what does not fit the cap is cut, which a
 * message or a prompt survives (the caller may look at b->len against b->max).
 * b NULL: nothing (a caller that does not want the message). */
void kevo_buf_say(struct kevo_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the string to the caller (free with kevo_free); b is reset to empty.
 * Never NULL unless out of memory. */
char *kevo_buf_take(struct kevo_buf *b);
/* Borrowed view, "" when empty; valid until the next change to b. */
const char *kevo_buf_str(const struct kevo_buf *b);

#endif

/*
 * buf - capped growable buffer (see buf.h).
 */
#include "base/buf.h"
#include "base/mem.h"

#include <stdio.h>
#include <string.h>

void kevo_buf_init(struct kevo_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max ? max : ((size_t)1 << 30);
}

void kevo_buf_free(struct kevo_buf *b)
{
    if (!b)
        return;
    kevo_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void kevo_buf_reset(struct kevo_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static enum kevo_status reserve(struct kevo_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return KEVO_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    char *p = kevo_realloc(b->data, cap);
    if (!p)
        return KEVO_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    return KEVO_OK;
}

enum kevo_status kevo_buf_add(struct kevo_buf *b, const void *p, size_t n)
{
    enum kevo_status st = KEVO_OK;
    size_t take = n;
    if (b->len + n > b->max) {
        take = b->max - b->len;
        st = KEVO_ERR_TOOBIG;
    }
    enum kevo_status rs = reserve(b, take);
    if (rs)
        return rs;
    if (take)
        memcpy(b->data + b->len, p, take);
    b->len += take;
    b->data[b->len] = '\0';
    return st;
}

enum kevo_status kevo_buf_adds(struct kevo_buf *b, const char *s)
{
    return kevo_buf_add(b, s, strlen(s));
}

enum kevo_status kevo_buf_vaddf(struct kevo_buf *b, const char *fmt, va_list ap)
{
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return KEVO_ERR_INVALID;
    if ((size_t)n < sizeof small)
        return kevo_buf_add(b, small, (size_t)n);
    char *big = kevo_malloc((size_t)n + 1);
    if (!big)
        return KEVO_ERR_NOMEM;
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    enum kevo_status st = kevo_buf_add(b, big, (size_t)n);
    kevo_free(big);
    return st;
}

enum kevo_status kevo_buf_addf(struct kevo_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum kevo_status st = kevo_buf_vaddf(b, fmt, ap);
    va_end(ap);
    return st;
}

char *kevo_buf_take(struct kevo_buf *b)
{
    char *s = b->data;
    if (!s)
        s = kevo_strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

const char *kevo_buf_str(const struct kevo_buf *b) { return b->data ? b->data : ""; }

void kevo_buf_say(struct kevo_buf *b, const char *fmt, ...)
{
    va_list ap;
    if (!b)
        return;
    va_start(ap, fmt);
    enum kevo_status st = kevo_buf_vaddf(b, fmt, ap);
    va_end(ap);
    (void)st;   /* cut at the cap: kept as it is */
}

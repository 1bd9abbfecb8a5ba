/*
 * mem - the one place that calls malloc/free. A countdown lets tests fail the Nth
 * allocation to prove every error path cleans up.
 */
#include "base/mem.h"
#include "kevo.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown;
static atomic_long n_allocs;

static int should_fail(void)
{
    long c = atomic_load(&fail_countdown);
    if (c <= 0)
        return 0;
    if (atomic_fetch_sub(&fail_countdown, 1) == 1)
        return 1;
    return 0;
}

void kevo_mem_fail_after(long n) { atomic_store(&fail_countdown, n); }
long kevo_mem_count(void) { return atomic_load(&n_allocs); }

void *kevo_malloc(size_t n)
{
    if (should_fail())
        return NULL;
    void *p = malloc(n ? n : 1);
    if (p)
        atomic_fetch_add(&n_allocs, 1);
    return p;
}

void *kevo_calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p)
        atomic_fetch_add(&n_allocs, 1);
    return p;
}

void *kevo_realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void *kevo_reallocarray(void *p, size_t count, size_t size)
{
    size_t n;
    if (__builtin_mul_overflow(count, size, &n))
        return NULL;
    return kevo_realloc(p, n);
}

char *kevo_strndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *d = kevo_malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *kevo_strdup(const char *s) { return kevo_strndup(s, strlen(s)); }

/* Two passes: the first measures, the second writes (ap is used once, a copy measures). */
char *kevo_vstrdupf(const char *fmt, va_list ap)
{
    va_list measure;
    char *s;
    int n;

    va_copy(measure, ap);
    n = vsnprintf(NULL, 0, fmt, measure);
    va_end(measure);
    if (n < 0)
        return NULL;
    s = kevo_malloc((size_t)n + 1);
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *kevo_strdupf(const char *fmt, ...)
{
    va_list ap;
    char *s;

    va_start(ap, fmt);
    s = kevo_vstrdupf(fmt, ap);
    va_end(ap);
    return s;
}

void kevo_free(void *p) { free(p); }

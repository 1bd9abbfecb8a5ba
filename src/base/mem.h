/*
 * mem - all host allocation goes through here, so tests can count allocations and fail
 * the Nth one (fault injection), and size multiplications are overflow-checked.
 */
#ifndef KEVO_MEM_H
#define KEVO_MEM_H

#include <stdarg.h>
#include <stddef.h>

void *kevo_malloc(size_t n);
void *kevo_calloc(size_t count, size_t size);
void *kevo_realloc(void *p, size_t n);
/* realloc to count*size bytes; NULL (p untouched) on overflow or failure. */
void *kevo_reallocarray(void *p, size_t count, size_t size);
char *kevo_strdup(const char *s);
char *kevo_strndup(const char *s, size_t n);
/* printf into a string of its own length, never cut (free with kevo_free). NULL when out
 * of memory, or when the format itself fails (vsnprintf's encoding error). */
char *kevo_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *kevo_vstrdupf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* kevo_free is declared in kevo.h. */

/* Tests only: make the Nth allocation from now fail (1 = the next); 0 disables. */
void kevo_mem_fail_after(long n);
/* Tests only: allocations made so far (successful ones). */
long kevo_mem_count(void);

#endif

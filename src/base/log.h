/*
 * log - the library's only way to say something: messages go to the callback installed
 * with kevo_log_set (kevo.h); with none installed they are dropped.
 */
#ifndef KEVO_LOG_H
#define KEVO_LOG_H

#include "kevo.h"

void kevo_log(enum kevo_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define KEVO_ERROR(...) kevo_log(KEVO_LOG_ERROR, __VA_ARGS__)
#define KEVO_WARN(...)  kevo_log(KEVO_LOG_WARN, __VA_ARGS__)
#define KEVO_INFO(...)  kevo_log(KEVO_LOG_INFO, __VA_ARGS__)
#define KEVO_DEBUG(...) kevo_log(KEVO_LOG_DEBUG, __VA_ARGS__)

/* Programmer bugs: abort with file and line. Stays on in release builds. */
#define KEVO_ASSERT(c) \
    ((c) ? (void)0 : kevo_assert_fail(#c, __FILE__, __LINE__))
void kevo_assert_fail(const char *what, const char *file, int line) __attribute__((noreturn));

#endif

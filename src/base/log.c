/*
 * log - logging callback and the status/verdict name tables (kevo.h).
 */
#include "base/log.h"
#include "kevo.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kevo_log_fn log_fn;
static void *log_user;
static enum kevo_log_level log_max = KEVO_LOG_INFO;

void kevo_log_set(kevo_log_fn fn, void *user, enum kevo_log_level max_level)
{
    log_fn = fn;
    log_user = user;
    log_max = max_level;
}

void kevo_log(enum kevo_log_level lvl, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    if (!log_fn || lvl > log_max)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(lvl, msg, log_user);
}

void kevo_assert_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "kevo: internal error: assertion `%s' failed at %s:%d\n", what, file, line);
    abort();
}

static const char *const status_names[] = {
    "ok", "out of memory", "I/O error", "parse error", "invalid argument", "integer overflow",
    "timeout", "compile error", "launch error", "device fault", "CUDA driver error",
    "NVRTC error", "no device", "unsupported", "worker failure", "system error", "not found",
    "sandbox setup failed", "too big", "replay diverged", "worker host lost",
};
_Static_assert(sizeof status_names / sizeof status_names[0] == KEVO_STATUS_COUNT,
               "status_names out of sync with enum kevo_status");

static const char *const verdict_names[] = {
    "ok", "compile_error", "launch_error", "timeout", "crash", "mismatch", "unwritten",
    "out_of_bounds", "input_mutated", "nondeterministic", "degenerate", "holdout_fail",
    "implausible",
};
_Static_assert(sizeof verdict_names / sizeof verdict_names[0] == KEVO_VERDICT_COUNT,
               "verdict_names out of sync with enum kevo_verdict");

const char *kevo_status_name(enum kevo_status st)
{
    if ((unsigned)st >= KEVO_STATUS_COUNT)
        return "unknown";
    return status_names[st];
}

const char *kevo_verdict_name(enum kevo_verdict v)
{
    if ((unsigned)v >= KEVO_VERDICT_COUNT)
        return "unknown";
    return verdict_names[v];
}

enum kevo_status kevo_verdict_parse(const char *name, enum kevo_verdict *out)
{
    for (int i = 0; i < KEVO_VERDICT_COUNT; i++) {
        if (strcmp(name, verdict_names[i]) == 0) {
            *out = (enum kevo_verdict)i;
            return KEVO_OK;
        }
    }
    return KEVO_ERR_NOTFOUND;
}

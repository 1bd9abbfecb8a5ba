/*
 * testutil - what every cmocka test program includes, and the scratch-directory helpers
 * the tests that run the kevo binary share.
 */
#ifndef KEVO_TESTUTIL_H
#define KEVO_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

/* A fresh /tmp/kevo-test-NAME-XXXXXX into dir (n bytes); workers run $KEVO_BIN when it is
 * set (the test binary is not kevo). Returns $KEVO_BIN (NULL when unset), or sets dir to ""
 * when no directory could be made. */
static inline const char *test_scratch(char *dir, size_t n, const char *name)
{
    const char *bin = getenv("KEVO_BIN");

    snprintf(dir, n, "/tmp/kevo-test-%s-XXXXXX", name);
    if (!mkdtemp(dir))
        dir[0] = '\0';
    if (bin)
        setenv("KEVO_WORKER_EXE", bin, 1);
    return bin;
}

/* Remove a test_scratch directory (kept with KEVO_TEST_KEEP=1, to look into). 0 or -1. */
static inline int test_scratch_remove(const char *dir)
{
    char cmd[512];

    if (!dir[0] || getenv("KEVO_TEST_KEEP"))
        return 0;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) ? -1 : 0;
}

#endif

/*
 * testutil - what every cmocka test program includes, and the scratch-directory and
 * command-running helpers the tests that run the kevo binary share.
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
#include <sys/wait.h>
#include <unistd.h>

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

/* Run argv (argv[0] the program's path, NULL-terminated), its stdout into out (n_out
 * bytes, NUL-terminated) and, with err, its stderr into err (n_err); without err stderr is
 * left as it is. Its exit status, or 128 + the signal that ended it. */
static inline int test_run(char *const *argv, char *out, size_t n_out, char *err,
                           size_t n_err)
{
    FILE *fo = tmpfile(), *fe = err ? tmpfile() : NULL;
    int st = -1;

    assert_non_null(fo);
    assert_true(!err || fe);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fileno(fo), 1);
        if (fe)
            dup2(fileno(fe), 2);
        execv(argv[0], argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    rewind(fo);
    out[fread(out, 1, n_out - 1, fo)] = '\0';
    fclose(fo);
    if (fe) {
        rewind(fe);
        err[fread(err, 1, n_err - 1, fe)] = '\0';
        fclose(fe);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif

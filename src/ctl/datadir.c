/*
 * datadir - where kevo's run-time data lies (kevo_data_dir, include/kevo.h): the prompt
 * templates (prompts/), the playbook (docs/playbook/), the price table (prices.json) and
 * the suite (tasks/, examples/seeds/), laid out as in the source tree, so that an installed
 * kevo (`make install`: PREFIX/share/kevo) and a build in a checkout read the same paths
 * under different roots. Every read of these files goes through this one lookup; it runs
 * once per process (pthread_once), so all readers and `kevo version` see the same answer.
 *
 * KEVO_SOURCE_DIR (the checkout kevo was built in) and KEVO_DATA_DIR (PREFIX/share/kevo)
 * are compiled in by the Makefile.
 */
#include "kevo.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KEVO_SOURCE_DIR
#define KEVO_SOURCE_DIR "."
#endif

static pthread_once_t data_once = PTHREAD_ONCE_INIT;
static char data_path[PATH_MAX];
static const char *data_rule = "";

static int is_dir(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

/* The running executable's directory into out (n bytes); 0, or -1 when unknown. */
static int exe_dir(char *out, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", out, n - 1);
    char *slash;

    if (len <= 0)
        return -1;
    out[len] = '\0';
    slash = strrchr(out, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

/* 1 when path lies inside the directory root, both resolved (symbolic links, "..") */
static int inside(const char *path, const char *root)
{
    char p[PATH_MAX], r[PATH_MAX];
    size_t n;

    if (!realpath(path, p) || !realpath(root, r))
        return 0;
    n = strlen(r);
    return strncmp(p, r, n) == 0 && (p[n] == '/' || p[n] == '\0');
}

static void data_set(const char *dir, const char *rule)
{
    snprintf(data_path, sizeof data_path, "%s", dir);
    data_rule = rule;
}

static void data_find(void)
{
    const char *env = getenv("KEVO_DATA_DIR");
    char exe[PATH_MAX], share[PATH_MAX + 32];

    if (env && *env) {
        data_set(env, "$KEVO_DATA_DIR");
        return;
    }
    if (exe_dir(exe, sizeof exe) == 0) {
        snprintf(share, sizeof share, "%s/../share/kevo", exe);
        if (is_dir(share) && realpath(share, data_path)) {
            data_rule = "beside the executable: BINDIR/../share/kevo";
            return;
        }
        /* A build in a checkout reads the checkout, even where some kevo was installed
         * under the compiled-in prefix: edits to prompts/ must count, and tests must not
         * depend on what the machine has installed. */
        if (inside(exe, KEVO_SOURCE_DIR)) {
            data_set(KEVO_SOURCE_DIR, "the source tree the executable lies in");
            return;
        }
    }
#ifdef KEVO_DATA_DIR
    if (is_dir(KEVO_DATA_DIR)) {
        data_set(KEVO_DATA_DIR, "compiled in: PREFIX/share/kevo");
        return;
    }
#endif
    data_set(KEVO_SOURCE_DIR, "the source tree kevo was built from");
}

const char *kevo_data_dir(const char **out_rule)
{
    pthread_once(&data_once, data_find);
    if (out_rule)
        *out_rule = data_rule;
    return data_path;
}

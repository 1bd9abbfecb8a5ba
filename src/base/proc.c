/* proc - a process's identity and whether it is still there (proc.h). */
#include "base/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/*
 * State letter and starttime of /proc/PID/stat; 0, or -1 when it cannot be read. The
 * command name (field 2) may hold spaces and parentheses, so fields are counted after
 * its last ')': state is field 3, starttime field 22.
 */
static int read_stat(int64_t pid, char *state, int64_t *start)
{
    char path[64], buf[1024], *p, *end;
    size_t n;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    f = fopen(path, "r");
    if (!f)
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2])
        return -1;
    *state = p[2];
    p += 3;
    for (int field = 4; field < 22; field++) {   /* skip to field 22 */
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno || end == p || v < 0)
        return -1;
    *start = v;
    return 0;
}

void kevo_proc_self(struct kevo_proc_id *out)
{
    char state;

    memset(out, 0, sizeof *out);
    out->pid = (int64_t)getpid();
    if (gethostname(out->host, sizeof out->host - 1) != 0)
        out->host[0] = '\0';
    if (read_stat(out->pid, &state, &out->start) != 0)
        out->start = 0;
}

enum kevo_proc_state kevo_proc_check(const struct kevo_proc_id *p)
{
    char host[KEVO_PROC_HOST_MAX] = "", state = 0;
    int64_t start = 0;

    if (p->pid <= 0 || p->pid > INT32_MAX || !p->host[0])
        return KEVO_PROC_UNKNOWN;
    if (gethostname(host, sizeof host - 1) != 0 || strcmp(host, p->host) != 0)
        return KEVO_PROC_UNKNOWN;   /* another machine's pids say nothing here */
    if (kill((pid_t)p->pid, 0) != 0 && errno == ESRCH)
        return KEVO_PROC_GONE;
    /* there is a process with that pid (EPERM: someone else's): is it the same one? */
    if (read_stat(p->pid, &state, &start) != 0)   /* no /proc to ask, or it just died */
        return kill((pid_t)p->pid, 0) != 0 && errno == ESRCH ? KEVO_PROC_GONE : KEVO_PROC_ALIVE;
    if (state == 'Z' || state == 'X' || (p->start && start != p->start))
        return KEVO_PROC_GONE;
    return KEVO_PROC_ALIVE;
}

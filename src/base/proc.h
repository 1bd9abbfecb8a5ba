/*
 * proc - a process as another process can recognise it later: its pid, the host it runs
 * on, and its start time, so that a pid the kernel gave to a newer process is not taken
 * for the one that had it. The archive records the controller of a running run this way,
 * and `kevo runs` asks whether that process is still there (docs/archive.md, `runs`).
 * No kevo concepts. Thread-safe.
 */
#ifndef KEVO_PROC_H
#define KEVO_PROC_H

#include <stdint.h>

#define KEVO_PROC_HOST_MAX 256

struct kevo_proc_id {
    int64_t pid;                       /* 0: unknown */
    char host[KEVO_PROC_HOST_MAX];     /* gethostname; "": unknown */
    int64_t start;                     /* starttime of /proc/PID/stat, clock ticks after
                                          boot; 0: unknown (then only the pid is checked) */
};

enum kevo_proc_state {
    KEVO_PROC_UNKNOWN = 0,             /* not recorded, or on another host: cannot tell */
    KEVO_PROC_ALIVE,                   /* this host has that process (or one we may not
                                          signal with the same pid and no start to compare) */
    KEVO_PROC_GONE                     /* this host has no such process: it died (a zombie
                                          counts as dead), or its pid now names another */
};

/* This process's identity. */
void kevo_proc_self(struct kevo_proc_id *out);

/* Whether the process p names is still there (kill(pid, 0) and /proc/PID/stat). */
enum kevo_proc_state kevo_proc_check(const struct kevo_proc_id *p);

#endif

/*
 * par - a tiny fork-join over pthreads (see par.h).
 */
#include "base/par.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* Below this many elements a loop is faster than starting threads. */
#define PAR_MIN_PER_CHUNK (1 << 16)

struct par_job {
    void (*fn)(void *ctx, int c, int64_t lo, int64_t hi);
    void *ctx;
    int c;
    int64_t lo, hi;
};

static int par_threads(void)
{
    static int n;
    if (!n) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        const char *e = getenv("KEVO_THREADS");
        if (e && *e)
            c = strtol(e, NULL, 10);
        n = c < 1 ? 1 : c > KEVO_PAR_MAX ? KEVO_PAR_MAX : (int)c;
    }
    return n;
}

int kevo_par_chunks(int64_t n)
{
    int64_t c = n / PAR_MIN_PER_CHUNK;
    int t = par_threads();
    if (c < 1)
        return 1;
    return c > t ? t : (int)c;
}

static void *par_run(void *p)
{
    struct par_job *j = p;
    j->fn(j->ctx, j->c, j->lo, j->hi);
    return NULL;
}

void kevo_par_for(int64_t n, int64_t align, void (*fn)(void *ctx, int c, int64_t lo, int64_t hi),
                  void *ctx)
{
    int nc = kevo_par_chunks(n);
    struct par_job jobs[KEVO_PAR_MAX];
    pthread_t th[KEVO_PAR_MAX];
    int started[KEVO_PAR_MAX] = {0};
    int64_t per = n / nc;

    if (align < 1)
        align = 1;
    per = (per + align - 1) / align * align;
    for (int c = 0; c < nc; c++) {
        int64_t lo = per * c, hi = c == nc - 1 ? n : per * (c + 1);
        jobs[c] = (struct par_job){fn, ctx, c, lo < n ? lo : n, hi < n ? hi : n};
    }
    for (int c = 1; c < nc; c++)
        started[c] = pthread_create(&th[c], NULL, par_run, &jobs[c]) == 0;
    par_run(&jobs[0]);
    for (int c = 1; c < nc; c++) {
        if (started[c])
            pthread_join(th[c], NULL);
        else
            par_run(&jobs[c]);
    }
}

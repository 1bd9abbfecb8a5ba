// kevo doc    A candidate for bench/tasks/cpu_sleep.c with 160 configurations that all take
// kevo doc    about as long (SLEEP_US within 40-49 ms; PAD changes nothing but the key), so
// kevo doc    a scaling run never runs out of new candidates and every evaluation costs the
// kevo doc    same.
// kevo param  SLEEP_US 40000 41000 42000 43000 44000 45000 46000 47000 48000 49000
// kevo param  PAD 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16
// kevo call   sleep_copy(x, y, N)
#include <time.h>

void sleep_copy(const float *x, float *y, int n)
{
    struct timespec ts = { 0, (SLEEP_US + 0 * PAD) * 1000L };

    nanosleep(&ts, NULL);
    for (int i = 0; i < n; i++)
        y[i] = x[i];
}

// kevo doc    A candidate for tests/mpi/sleep_task.c whose one param sets how long it sleeps:
// kevo doc    six configurations, each at least 1.4 times slower than the next faster one, so
// kevo doc    the best of a run that tries them all is the same whatever the timing noise.
// kevo param  SLEEP_US 30000 20000 45000 70000 100000 150000
// kevo call   sleep_copy(x, y, N)
#include <time.h>

void sleep_copy(const float *x, float *y, int n)
{
    struct timespec ts = { 0, SLEEP_US * 1000L };

    nanosleep(&ts, NULL);
    for (int i = 0; i < n; i++)
        y[i] = x[i];
}

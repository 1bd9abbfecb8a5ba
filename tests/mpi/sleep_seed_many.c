// kevo doc    A candidate for tests/mpi/sleep_task.c with twelve sleep lengths: enough
// kevo doc    evaluations in flight to kill a rank in the middle of one (tests/mpi/run.sh).
// kevo param  SLEEP_US 30000 20000 40000 50000 60000 70000 80000 90000 100000 110000 120000 130000
// kevo call   sleep_copy(x, y, N)
#include <time.h>

void sleep_copy(const float *x, float *y, int n)
{
    struct timespec ts = { 0, SLEEP_US * 1000L };

    nanosleep(&ts, NULL);
    for (int i = 0; i < n; i++)
        y[i] = x[i];
}

// kevo task   mpi_sleep
// kevo doc    A copy that sleeps first: evaluations that take their time without using the
// kevo doc    CPU, so that ranks oversubscribed on a small machine still run side by side
// kevo doc    (tests/mpi/run.sh).
// kevo size   N=4096
// kevo input  x f32[N] normal(0,1)
// kevo output y f32[N]
// kevo bytes  8*N
// kevo flops  N
// kevo call   sleep_ref(x, y, N)
#include <time.h>

void sleep_ref(const float *x, float *y, int n)
{
    struct timespec ts = { 0, 30000000L };

    nanosleep(&ts, NULL);
    for (int i = 0; i < n; i++)
        y[i] = x[i];
}

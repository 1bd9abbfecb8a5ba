// kevo task   cpu_sleep
// kevo doc    A copy that sleeps 40 ms first: on the CPU backend an evaluation then takes
// kevo doc    about a second while using little CPU, so workers (and MPI ranks) far more
// kevo doc    numerous than the cores still run side by side and what is measured is the
// kevo doc    controller's share (bench/scripts/mpi_scaling.sh).
// kevo size   N=4096
// kevo input  x f32[N] normal(0,1)
// kevo output y f32[N]
// kevo bytes  8*N
// kevo flops  N
// kevo call   sleep_ref(x, y, N)
#include <time.h>

void sleep_ref(const float *x, float *y, int n)
{
    struct timespec ts = { 0, 40000000L };

    nanosleep(&ts, NULL);
    for (int i = 0; i < n; i++)
        y[i] = x[i];
}

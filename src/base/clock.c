/* clock - kevo_now (clock.h). */
#include "base/clock.h"

#include <time.h>

double kevo_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

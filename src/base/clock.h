/*
 * clock - the one monotonic clock of kevo: seconds since an arbitrary start, never going
 * back. Deadlines, timeouts and elapsed times in every process use it (wall-clock dates
 * use CLOCK_REALTIME where they are written, e.g. the archive's timestamps).
 */
#ifndef KEVO_CLOCK_H
#define KEVO_CLOCK_H

/* CLOCK_MONOTONIC in seconds. Thread-safe. */
double kevo_now(void);

#endif

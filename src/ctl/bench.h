/*
 * bench - `kevo bench` (docs/bench.md): evaluate every task of a suite (the reference, or
 * the best candidate found for it) and score the suite. The public entry points,
 * kevo_bench_json and kevo_bench_opts_default, are declared in kevo.h; this header only
 * gathers what the module includes.
 */
#ifndef KEVO_BENCH_H
#define KEVO_BENCH_H

#include "kevo.h"

#endif

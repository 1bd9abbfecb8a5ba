/*
 * backend_cpu_cc - private to the CPU backend: builds C source plus its generated call shim
 * into a shared object with the system compiler ($CC, default "cc"):
 *   cc -std=gnu11 -O3 -march=native -fopenmp -fPIC -shared <flags> -D<param>=<value>...
 *      -o <tmp>/kevo_module.so <tmp>/kevo_module.c -lm -Wl,--no-undefined
 * with a 60 s limit. Compiler messages name the user's path, not the private one.
 */
#ifndef KEVO_BACKEND_CPU_CC_H
#define KEVO_BACKEND_CPU_CC_H

#include "worker/backend.h"
#include "worker/backend_cpu_shim.h"
#include "base/buf.h"
#include "kevo.h"

#define KEVO_CPU_SO_NAME "kevo_module.so"

/*
 * Find the entries' prototypes (into protos[0..req->n_entries), clear them with
 * kevo_cproto_clear) and compile req into <new private dir>/kevo_module.so.
 * On success *out_dir (kevo_free) holds the dir, which then contains only the .so; on
 * failure the dir is gone. KEVO_ERR_COMPILE with the compiler output (or the reason: entry
 * not found, variadic, timeout) in *log; KEVO_ERR_INVALID for a malformed request.
 */
KEVO_NODISCARD enum kevo_status kevo_cpu_build(const struct kevo_compile_req *req,
                                               struct kevo_cproto *protos, char **out_dir,
                                               struct kevo_buf *log);
/* Remove a private dir made by kevo_cpu_build and the files in it. NULL is a no-op. */
void kevo_cpu_remove_dir(const char *dir);

#endif

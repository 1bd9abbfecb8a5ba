/*
 * backend_cpu - C tasks and candidates, built with the system compiler into a shared
 * object and run in a sandboxed runner process (see backend_cpu.c for the model).
 * kevo_backend_open_cpu (backend.h) opens it; this header adds what `kevo check` and the
 * worker need beyond the vtable.
 */
#ifndef KEVO_BACKEND_CPU_H
#define KEVO_BACKEND_CPU_H

#include "worker/backend.h"
#include "base/buf.h"
#include "kevo.h"

/* Compile only (for `kevo check`): KEVO_ERR_COMPILE with the compiler output in *log. */
KEVO_NODISCARD enum kevo_status kevo_cpu_compile_check(const struct kevo_compile_req *req,
                                                       struct kevo_buf *log);

/* Wall-clock limit for one launch+sync or timed batch in the runner; past it the runner is
 * killed and the call returns KEVO_ERR_TIMEOUT. Default 10 s. */
void kevo_backend_cpu_set_deadline(struct kevo_backend *b, double seconds);

#endif

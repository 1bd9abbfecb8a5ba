/*
 * backend_cpu_shim - private to the CPU backend: finds the prototype of each entry function
 * in C source text and generates the call shim compiled with it (one translation unit).
 *
 * The shim lets the runner call `void f(const float *x, int n, double a)` from a generic
 * argument array (struct kevo_val, backend.h): for each entry it exports a table row with the
 * parameter count, a descriptor per parameter (type class, size, signedness, computed by the
 * compiler from the declared type, so typedefs work) and a function that converts every
 * argument to the declared type as a C call would and calls the entry.
 * The worker checks arguments against the descriptors (kevo_cpu_arg_check) before it sends a
 * launch, so a value that does not fit is a launch error, never a silent truncation.
 *
 * Layout contract: struct kevo_shim_param / kevo_shim_entry below and struct kevo_val are
 * declared again, from fixed text, in the generated code; both sides assert sizes/offsets.
 */
#ifndef KEVO_BACKEND_CPU_SHIM_H
#define KEVO_BACKEND_CPU_SHIM_H

#include "worker/backend.h"
#include "core/cproto.h"
#include "base/buf.h"
#include "kevo.h"
#include <stddef.h>
#include <stdint.h>

/* What __builtin_classify_type says about a parameter type (gcc and clang agree). */
enum kevo_shim_cls {
    KEVO_SHIM_CLS_INT = 1,    /* integers, char, most enums, _Bool (see is_bool) */
    KEVO_SHIM_CLS_CHAR = 2,
    KEVO_SHIM_CLS_ENUM = 3,
    KEVO_SHIM_CLS_BOOL = 4,
    KEVO_SHIM_CLS_PTR = 5,
    KEVO_SHIM_CLS_REAL = 8    /* float, double, long double, _Float16 */
};

/* One parameter as the compiled shim describes it. */
struct kevo_shim_param {
    int32_t cls;              /* enum kevo_shim_cls; anything else cannot be passed */
    int32_t size;             /* sizeof the declared type */
    int32_t is_signed;        /* integers: 1 if signed */
    int32_t is_bool;          /* integers: 1 for _Bool (only 0 and 1 fit) */
};

/* One row of the exported table `kevo_shim_table` (count in `kevo_shim_count`). */
struct kevo_shim_entry {
    int32_t n_params;
    const struct kevo_shim_param *params;
    int (*call)(const struct kevo_val *args, int n_args);   /* 0, or -1 for a wrong count */
};

#define KEVO_SHIM_TABLE "kevo_shim_table"
#define KEVO_SHIM_COUNT "kevo_shim_count"
/* The file name the shim part of the generated source carries in compiler messages. */
#define KEVO_SHIM_FILE "<kevo shim>"

/*
 * The whole translation unit to compile: `#line 1 "<path>"`, the source, then the shim for
 * req->entries (protos[i] describes entries[i]). Appends to *out.
 */
KEVO_NODISCARD enum kevo_status kevo_cpu_shim_gen(const struct kevo_compile_req *req,
                                                  const struct kevo_cproto *protos,
                                                  struct kevo_buf *out);

/* Why an argument does not fit its parameter (0: it fits). */
enum kevo_arg_fit {
    KEVO_ARG_FITS = 0,
    KEVO_ARG_NEED_PTR,        /* a scalar for a pointer parameter */
    KEVO_ARG_NOT_PTR,         /* a tensor for a scalar parameter */
    KEVO_ARG_RANGE,           /* value outside the range of the declared integer type */
    KEVO_ARG_BAD_TYPE         /* the parameter's type cannot be passed (struct, ...) */
};
enum kevo_arg_fit kevo_cpu_arg_check(const struct kevo_shim_param *p, const struct kevo_val *v);

#endif

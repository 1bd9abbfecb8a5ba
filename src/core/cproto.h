/*
 * cproto - the prototype of a function as written in C source text: its parameters'
 * declared types and its line. Both sides need it: the worker's CPU backend generates its
 * call shim from it, and the controller checks launch lines (`kevo check`) and writes
 * exported launchers with it. Pure text work; no compiler is run.
 */
#ifndef KEVO_CPROTO_H
#define KEVO_CPROTO_H

#include "kevo.h"
#include "base/buf.h"
#include "core/task.h"
#include <stddef.h>

/* The prototype of one function as found in the source. */
struct kevo_cproto {
    int n_params;
    int line;                        /* 1-based line of the function name */
    char *types[KEVO_MAX_ARGS];      /* declared types, names removed, arrays as pointers */
};

/*
 * Find the definition (else the first declaration) of `name` at file scope in src: comments,
 * string and character literals and preprocessor lines are skipped. KEVO_ERR_NOTFOUND when
 * there is none; KEVO_ERR_UNSUPPORTED for a variadic function or too many parameters; the
 * reason goes to *msg (without the path). *out is cleared first; free with _clear.
 */
KEVO_NODISCARD enum kevo_status kevo_cproto_find(const char *src, size_t len, const char *name,
                                                 struct kevo_cproto *out, struct kevo_buf *msg);
void kevo_cproto_clear(struct kevo_cproto *p);   /* NULL: no-op */

#endif

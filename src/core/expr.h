/*
 * expr - integer expressions of task files: literals, names, + - * / % ( ), unary minus,
 * min(a,b), max(a,b), cdiv(a,b). 64-bit signed; overflow, division by zero and unknown
 * names are errors, never wrapped or guessed.
 *
 * Expressions are evaluated straight from their text (they are short), with a callback
 * that resolves names, so the same text can be evaluated under several workloads.
 */
#ifndef KEVO_EXPR_H
#define KEVO_EXPR_H

#include "kevo.h"
#include <stdint.h>

/* Resolve NAME (len bytes, not NUL-terminated) to a value; return 0 if found, -1 if not. */
typedef int (*kevo_expr_lookup_fn)(void *user, const char *name, size_t len, int64_t *out);

struct kevo_expr_err {
    int col;          /* 0-based column within the expression text where it went wrong */
    char msg[160];    /* what was expected / what went wrong */
};

/*
 * Evaluate text into *out. On failure returns KEVO_ERR_PARSE (syntax, unknown name),
 * KEVO_ERR_OVERFLOW (overflow) or KEVO_ERR_INVALID (division by zero), with err filled.
 * lookup may be NULL (no names allowed).
 */
KEVO_NODISCARD enum kevo_status kevo_expr_eval(const char *text, kevo_expr_lookup_fn lookup,
                                               void *user, int64_t *out,
                                               struct kevo_expr_err *err);

/*
 * Check syntax only, calling is_known(user, name, len) for each name (may be NULL to accept
 * any name); returns like kevo_expr_eval. Used when parsing, before sizes are known.
 */
KEVO_NODISCARD enum kevo_status kevo_expr_check(const char *text,
                                                int (*is_known)(void *user, const char *name,
                                                                size_t len),
                                                void *user, struct kevo_expr_err *err);

/* Parse a float literal (as in scalar, tol, INIT): strict, whole string. 0 on success. */
int kevo_expr_parse_double(const char *text, double *out);

#endif

/*
 * expr - integer expressions of task files (see expr.h), by recursive descent straight
 * from the text:
 *
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/' | '%') unary)*
 *   unary   := '-' unary | primary
 *   primary := INTEGER | NAME | FUNC '(' expr ',' expr ')' | '(' expr ')'
 *   FUNC    := min | max | cdiv
 *
 * Values are int64_t. Every operation is checked: overflow is KEVO_ERR_OVERFLOW, division
 * or remainder by zero KEVO_ERR_INVALID, never a wrapped or guessed value. `/` and `%`
 * truncate toward zero as in C (INT64_MIN % -1 is 0; INT64_MIN / -1 overflows).
 * cdiv(a,b) is the exact ceiling of a/b for any signs (= -floor(-a/b)); it is computed as
 * a/b plus a correction, so it never overflows where the ceiling itself fits.
 *
 * Check mode (kevo_expr_check) runs the same parser with names of unknown value: literal
 * sub-expressions are still computed, so `M/0` or `99999999999999999999` is caught before
 * any workload is known. Nesting is limited to KEVO_EXPR_MAX_DEPTH so hostile text cannot
 * exhaust the stack. No allocation; thread-safe.
 */
#include "core/expr.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEVO_EXPR_MAX_DEPTH 64

/* A value; known = 0 in check mode for anything that depends on a name. */
struct val {
    int64_t v;
    int known;
};

struct ep {
    const char *s;
    size_t pos;
    int depth;
    int check;                          /* 1: kevo_expr_check */
    kevo_expr_lookup_fn lookup;         /* eval mode */
    int (*is_known)(void *user, const char *name, size_t len);   /* check mode */
    void *user;
    struct kevo_expr_err *err;
};

static int is_ident0(int c) { return isalpha(c) || c == '_'; }
static int is_ident(int c) { return isalnum(c) || c == '_'; }

/* ---- errors ---- */

/* Describe the token at `pos` for "got '...'" (sanitised, at most ~24 bytes). */
static void describe(const char *s, size_t pos, char *out, size_t n)
{
    const unsigned char *u = (const unsigned char *)s + pos;
    size_t len = 1, o = 0;

    if (!*u) {
        snprintf(out, n, "end of expression");
        return;
    }
    if (is_ident(*u))
        for (len = 0; is_ident(u[len]) && len < 24; len++)
            ;
    out[o++] = '\'';
    for (size_t i = 0; i < len && o + 6 < n; i++) {
        if (u[i] < 0x20 || u[i] >= 0x7f)
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", u[i]);
        else
            out[o++] = (char)u[i];
    }
    out[o++] = '\'';
    out[o] = '\0';
}

static enum kevo_status fail(struct ep *p, enum kevo_status st, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum kevo_status fail(struct ep *p, enum kevo_status st, size_t col, const char *fmt, ...)
{
    va_list ap;
    p->err->col = (int)col;
    va_start(ap, fmt);
    vsnprintf(p->err->msg, sizeof p->err->msg, fmt, ap);
    va_end(ap);
    return st;
}

static enum kevo_status expected(struct ep *p, const char *what)
{
    char got[64];
    describe(p->s, p->pos, got, sizeof got);
    return fail(p, KEVO_ERR_PARSE, p->pos, "expected %s, got %s", what, got);
}

static enum kevo_status overflow(struct ep *p, size_t col)
{
    return fail(p, KEVO_ERR_OVERFLOW, col, "expression overflows 64 bits");
}

/* ---- checked arithmetic ---- */

static enum kevo_status op_div(struct ep *p, size_t col, int64_t a, int64_t b, int64_t *r)
{
    if (b == 0)
        return fail(p, KEVO_ERR_INVALID, col, "division by zero");
    if (a == INT64_MIN && b == -1)
        return overflow(p, col);
    *r = a / b;
    return KEVO_OK;
}

static enum kevo_status op_mod(struct ep *p, size_t col, int64_t a, int64_t b, int64_t *r)
{
    if (b == 0)
        return fail(p, KEVO_ERR_INVALID, col, "remainder by zero");
    *r = b == -1 ? 0 : a % b;   /* INT64_MIN % -1 traps on x86 */
    return KEVO_OK;
}

/* Exact ceiling of a/b: truncating quotient, plus one when the true quotient is positive
 * and not whole. */
static enum kevo_status op_cdiv(struct ep *p, size_t col, int64_t a, int64_t b, int64_t *r)
{
    int64_t q = 0;
    enum kevo_status st = op_div(p, col, a, b, &q);
    if (st)
        return st;
    if (a % b != 0 && ((a < 0) == (b < 0)))
        q++;   /* cannot overflow: |q| < |a| here */
    *r = q;
    return KEVO_OK;
}

/* Apply binary operator `op` at column col. Unknown operands give an unknown result,
 * except that a known zero divisor is an error whatever the dividend. */
static enum kevo_status apply(struct ep *p, int op, size_t col, struct val a, struct val b,
                              struct val *r)
{
    int64_t v = 0;
    enum kevo_status st = KEVO_OK;

    if ((op == '/' || op == '%' || op == 'c') && b.known && b.v == 0)
        return fail(p, KEVO_ERR_INVALID, col, op == '%' ? "remainder by zero" : "division by zero");
    r->known = a.known && b.known;
    r->v = 0;
    if (!r->known)
        return KEVO_OK;
    switch (op) {
    case '+': if (__builtin_add_overflow(a.v, b.v, &v)) st = overflow(p, col); break;
    case '-': if (__builtin_sub_overflow(a.v, b.v, &v)) st = overflow(p, col); break;
    case '*': if (__builtin_mul_overflow(a.v, b.v, &v)) st = overflow(p, col); break;
    case '/': st = op_div(p, col, a.v, b.v, &v); break;
    case '%': st = op_mod(p, col, a.v, b.v, &v); break;
    case 'c': st = op_cdiv(p, col, a.v, b.v, &v); break;
    case 'm': v = a.v < b.v ? a.v : b.v; break;
    case 'M': v = a.v > b.v ? a.v : b.v; break;
    default:  st = fail(p, KEVO_ERR_PARSE, col, "internal: bad operator");
    }
    r->v = v;
    return st;
}

/* ---- parser ---- */

static void skip_ws(struct ep *p)
{
    while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t')
        p->pos++;
}

static enum kevo_status parse_expr(struct ep *p, struct val *out);

/* One level deeper: a parenthesis, a function call or a unary minus. */
static enum kevo_status enter(struct ep *p)
{
    if (++p->depth > KEVO_EXPR_MAX_DEPTH)
        return fail(p, KEVO_ERR_PARSE, p->pos, "expression nests deeper than %d levels",
                    KEVO_EXPR_MAX_DEPTH);
    return KEVO_OK;
}

static enum kevo_status parse_number(struct ep *p, struct val *out)
{
    size_t start = p->pos;
    int64_t v = 0;
    int ovf = 0;

    while (isdigit((unsigned char)p->s[p->pos])) {
        int d = p->s[p->pos++] - '0';
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, d, &v))
            ovf = 1;
    }
    if (is_ident(p->s[p->pos])) {
        while (is_ident(p->s[p->pos]))
            p->pos++;
        return fail(p, KEVO_ERR_PARSE, start, "malformed number '%.*s'",
                    (int)(p->pos - start > 24 ? 24 : p->pos - start), p->s + start);
    }
    if (ovf)
        return fail(p, KEVO_ERR_OVERFLOW, start, "integer literal overflows 64 bits");
    out->v = v;
    out->known = 1;
    return KEVO_OK;
}

static enum kevo_status expect_char(struct ep *p, char c, const char *what)
{
    skip_ws(p);
    if (p->s[p->pos] != c)
        return expected(p, what);
    p->pos++;
    return KEVO_OK;
}

/* min(a,b), max(a,b), cdiv(a,b); p->pos is just past the name. */
static enum kevo_status parse_call(struct ep *p, size_t start, size_t len, struct val *out)
{
    const char *name = p->s + start;
    int op;
    struct val a, b;
    enum kevo_status st;

    if (len == 3 && !memcmp(name, "min", 3))
        op = 'm';
    else if (len == 3 && !memcmp(name, "max", 3))
        op = 'M';
    else if (len == 4 && !memcmp(name, "cdiv", 4))
        op = 'c';
    else
        return fail(p, KEVO_ERR_PARSE, start, "unknown function '%.*s' (expected min, max or cdiv)",
                    (int)(len > 24 ? 24 : len), name);
    st = enter(p);
    if (st)
        return st;
    p->pos++;   /* '(' */
    st = parse_expr(p, &a);
    if (!st)
        st = expect_char(p, ',', "',' between the two arguments");
    if (!st)
        st = parse_expr(p, &b);
    if (!st)
        st = expect_char(p, ')', "')' after the second argument");
    if (!st)
        st = apply(p, op, start, a, b, out);
    p->depth--;
    return st;
}

static enum kevo_status parse_name(struct ep *p, struct val *out)
{
    size_t start = p->pos, len;
    int is_func;

    while (is_ident(p->s[p->pos]))
        p->pos++;
    len = p->pos - start;
    skip_ws(p);
    is_func = (len == 3 && (!memcmp(p->s + start, "min", 3) || !memcmp(p->s + start, "max", 3))) ||
              (len == 4 && !memcmp(p->s + start, "cdiv", 4));
    if (p->s[p->pos] == '(')
        return parse_call(p, start, len, out);
    if (is_func)
        return expected(p, "'(' after the function name");
    out->v = 0;
    out->known = 0;
    if (p->check) {
        if (p->is_known && !p->is_known(p->user, p->s + start, len))
            goto unknown;
        return KEVO_OK;
    }
    if (!p->lookup || p->lookup(p->user, p->s + start, len, &out->v) != 0)
        goto unknown;
    out->known = 1;
    return KEVO_OK;
unknown:
    return fail(p, KEVO_ERR_PARSE, start, "unknown name '%.*s'", (int)(len > 40 ? 40 : len),
                p->s + start);
}

static enum kevo_status parse_primary(struct ep *p, struct val *out)
{
    unsigned char c;
    enum kevo_status st;

    skip_ws(p);
    c = (unsigned char)p->s[p->pos];
    if (isdigit(c))
        return parse_number(p, out);
    if (is_ident0(c))
        return parse_name(p, out);
    if (c != '(')
        return expected(p, "an expression");
    st = enter(p);
    if (!st) {
        p->pos++;
        st = parse_expr(p, out);
    }
    if (!st)
        st = expect_char(p, ')', "')'");
    p->depth--;
    return st;
}

static enum kevo_status parse_unary(struct ep *p, struct val *out)
{
    enum kevo_status st;
    size_t col;

    skip_ws(p);
    if (p->s[p->pos] != '-')
        return parse_primary(p, out);
    col = p->pos;
    st = enter(p);
    p->pos++;
    if (!st)
        st = parse_unary(p, out);
    p->depth--;
    if (!st && out->known) {
        if (out->v == INT64_MIN)
            st = overflow(p, col);
        else
            out->v = -out->v;
    }
    return st;
}

static enum kevo_status parse_term(struct ep *p, struct val *out)
{
    enum kevo_status st = parse_unary(p, out);

    while (!st) {
        skip_ws(p);
        char op = p->s[p->pos];
        if (op != '*' && op != '/' && op != '%')
            break;
        size_t col = p->pos++;
        struct val rhs;
        st = parse_unary(p, &rhs);
        if (!st)
            st = apply(p, op, col, *out, rhs, out);
    }
    return st;
}

static enum kevo_status parse_expr(struct ep *p, struct val *out)
{
    enum kevo_status st = parse_term(p, out);

    while (!st) {
        skip_ws(p);
        char op = p->s[p->pos];
        if (op != '+' && op != '-')
            break;
        size_t col = p->pos++;
        struct val rhs;
        st = parse_term(p, &rhs);
        if (!st)
            st = apply(p, op, col, *out, rhs, out);
    }
    return st;
}

static enum kevo_status run(struct ep *p, struct val *out)
{
    enum kevo_status st;

    p->err->col = 0;
    p->err->msg[0] = '\0';
    st = parse_expr(p, out);
    if (st)
        return st;
    skip_ws(p);
    if (p->s[p->pos] == ')')
        return fail(p, KEVO_ERR_PARSE, p->pos, "unmatched ')'");
    if (p->s[p->pos])
        return expected(p, "an operator or the end of the expression");
    return KEVO_OK;
}

/* ---- API ---- */

enum kevo_status kevo_expr_eval(const char *text, kevo_expr_lookup_fn lookup, void *user,
                                int64_t *out, struct kevo_expr_err *err)
{
    struct kevo_expr_err local;
    struct ep p = { .s = text, .lookup = lookup, .user = user, .err = err ? err : &local };
    struct val v = { 0, 0 };
    enum kevo_status st;

    *out = 0;
    if (!text)
        return fail(&p, KEVO_ERR_INVALID, 0, "no expression");
    st = run(&p, &v);
    if (!st)
        *out = v.v;
    return st;
}

enum kevo_status kevo_expr_check(const char *text,
                                 int (*is_known)(void *user, const char *name, size_t len),
                                 void *user, struct kevo_expr_err *err)
{
    struct kevo_expr_err local;
    struct ep p = { .s = text, .check = 1, .is_known = is_known, .user = user,
                    .err = err ? err : &local };
    struct val v = { 0, 0 };

    if (!text)
        return fail(&p, KEVO_ERR_INVALID, 0, "no expression");
    return run(&p, &v);
}

/* Strict: optional sign, digits, '.', exponent; no blanks, hex, inf or nan; whole string;
 * finite result. */
int kevo_expr_parse_double(const char *text, double *out)
{
    char *end = NULL;
    double v;

    *out = 0;
    if (!text || !*text)
        return -1;
    if (strspn(text, "0123456789.eE+-") != strlen(text))
        return -1;
    errno = 0;
    v = strtod(text, &end);
    if (end == text || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

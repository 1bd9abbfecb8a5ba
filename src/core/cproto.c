/*
 * cproto - finds the prototype of a function in C source text (cproto.h).
 *
 * The finder works on a "clean" copy of the source in which comments, the contents of
 * string/character literals and preprocessor lines are blanked (newlines kept, so offsets
 * and line numbers stay valid). A function is `NAME (` at file scope (no enclosing braces,
 * parentheses or brackets) whose closing parenthesis is followed by `{` (definition) or by
 * `;` / `,` (declaration). Macro-generated functions are not seen; they are reported as not
 * found.
 */
#include "core/cproto.h"

#include "base/mem.h"

#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

/* ---- cleaning ---- */

enum clean_state { CL_CODE, CL_LINE_COMMENT, CL_BLOCK_COMMENT, CL_STRING, CL_CHAR };

/* Is src[i] the first non-blank character of its line? */
static int at_line_start(const char *s, size_t i)
{
    while (i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t'))
        i--;
    return i == 0 || s[i - 1] == '\n';
}

/*
 * Copy of src with comments, literal contents and preprocessor lines replaced by spaces.
 * Returns NULL when out of memory.
 */
static char *clean_source(const char *src, size_t len)
{
    char *c = kevo_malloc(len + 1);
    enum clean_state st = CL_CODE;
    int directive = 0;

    if (!c)
        return NULL;
    memcpy(c, src, len);
    c[len] = '\0';
    for (size_t i = 0; i < len; i++) {
        char ch = src[i], nx = i + 1 < len ? src[i + 1] : '\0';
        int keep = 0;   /* leave this character as it is */
        switch (st) {
        case CL_CODE:
            if (ch == '/' && nx == '/') {
                st = CL_LINE_COMMENT;
            } else if (ch == '/' && nx == '*') {
                st = CL_BLOCK_COMMENT;
                c[i++] = ' ';
            } else if (ch == '#' && at_line_start(src, i)) {
                directive = 1;
            } else if (ch == '\\' && nx == '\n' && directive) {
                c[i++] = ' ';   // a continued directive goes on; the newline is kept below
                keep = 1;
            } else if (ch == '\n') {
                directive = 0;
                keep = 1;
            } else if ((ch == '"' || ch == '\'') && !directive) {
                st = ch == '"' ? CL_STRING : CL_CHAR;
                keep = 1;
            } else {
                keep = !directive;
            }
            break;
        case CL_LINE_COMMENT:
            if (ch == '\n') {
                st = CL_CODE;
                directive = 0;
                keep = 1;
            }
            break;
        case CL_BLOCK_COMMENT:
            if (ch == '*' && nx == '/') {
                st = CL_CODE;
                c[i++] = ' ';
            }
            keep = ch == '\n';
            break;
        case CL_STRING:
        case CL_CHAR:
            if (ch == '\\' && nx) {
                c[i++] = ' ';
            } else if (ch == (st == CL_STRING ? '"' : '\'') || ch == '\n') {
                st = CL_CODE;
                keep = 1;
            }
            break;
        }
        if (!keep && i < len && c[i] != '\n')
            c[i] = ' ';
    }
    return c;
}

/* ---- scanning ---- */

static int is_ident_start(char ch) { return isalpha((unsigned char)ch) || ch == '_'; }
static int is_ident_char(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

static size_t skip_space(const char *s, size_t i, size_t len)
{
    while (i < len && isspace((unsigned char)s[i]))
        i++;
    return i;
}

/* Index of the bracket closing the one at s[open], or len when unbalanced. */
static size_t match_close(const char *s, size_t open, size_t len)
{
    int depth = 0;
    for (size_t i = open; i < len; i++) {
        if (s[i] == '(' || s[i] == '[' || s[i] == '{')
            depth++;
        else if (s[i] == ')' || s[i] == ']' || s[i] == '}')
            depth--;
        if (depth == 0)
            return i;
    }
    return len;
}

/* Skip `__attribute__ ((...))`, `__asm__ (...)` and friends after a declarator. */
static size_t skip_attributes(const char *s, size_t i, size_t len)
{
    static const char *const words[] = { "__attribute__", "__attribute", "__asm__", "__asm",
                                         "asm" };
    for (;;) {
        size_t j = skip_space(s, i, len), k = j, w;
        while (k < len && is_ident_char(s[k]))
            k++;
        for (w = 0; w < sizeof words / sizeof words[0]; w++) {
            if (k - j == strlen(words[w]) && memcmp(s + j, words[w], k - j) == 0)
                break;
        }
        if (w == sizeof words / sizeof words[0])
            return j;
        k = skip_space(s, k, len);
        if (k >= len || s[k] != '(')
            return j;
        i = match_close(s, k, len) + 1;
    }
}

/*
 * Where `name (` starts a definition (2) or declaration (1) at file scope; 0 otherwise.
 * *open is the index of the '('.
 */
static int classify_at(const char *c, size_t len, size_t pos, size_t nlen, size_t *open)
{
    size_t i = skip_space(c, pos + nlen, len), close, after;
    if (i >= len || c[i] != '(')
        return 0;
    close = match_close(c, i, len);
    if (close >= len)
        return 0;
    after = skip_attributes(c, close + 1, len);
    *open = i;
    if (after < len && c[after] == '{')
        return 2;
    if (after < len && (c[after] == ';' || c[after] == ','))
        return 1;
    return 0;
}

/* Find the best match for name in the cleaned text; returns 0 when none. */
static int find_function(const char *c, size_t len, const char *name, size_t *out_pos,
                         size_t *out_open)
{
    size_t nlen = strlen(name);
    int depth = 0, best = 0;

    for (size_t i = 0; i < len; i++) {
        char ch = c[i];
        if (ch == '(' || ch == '[' || ch == '{') {
            depth++;
        } else if (ch == ')' || ch == ']' || ch == '}') {
            depth -= depth > 0;
        } else if (is_ident_start(ch) && (i == 0 || !is_ident_char(c[i - 1]))) {
            size_t end = i;
            while (end < len && is_ident_char(c[end]))
                end++;
            if (depth == 0 && end - i == nlen && memcmp(c + i, name, nlen) == 0) {
                size_t open = 0;
                int kind = classify_at(c, len, i, nlen, &open);
                if (kind > best) {
                    best = kind;
                    *out_pos = i;
                    *out_open = open;
                }
                if (best == 2)
                    return best;
            }
            i = end - 1;
        }
    }
    return best;
}

/* ---- parameters ---- */

/* Append a message to *msg and return st (or KEVO_ERR_NOMEM if the message did not fit). */
static enum kevo_status failf(struct kevo_buf *msg, enum kevo_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum kevo_status failf(struct kevo_buf *msg, enum kevo_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum kevo_status ms = kevo_buf_vaddf(msg, fmt, ap);
    va_end(ap);
    return ms == KEVO_ERR_NOMEM ? ms : st;
}

/* Words that can never be a parameter's name. */
static int is_keyword(const char *s, size_t n)
{
    static const char *const kw[] = {
        "auto", "char", "const", "double", "enum", "extern", "float", "inline", "int", "long",
        "register", "restrict", "short", "signed", "static", "struct", "union", "unsigned",
        "void", "volatile", "_Alignas", "_Atomic", "_Bool", "_Complex", "_Imaginary",
        "_Noreturn", "_Thread_local", "__restrict", "__restrict__", "__const", "__const__",
        "__volatile__", "__inline", "__inline__", "__signed", "__signed__", "__int128",
        "__float128", "_Float16", "_Float32", "_Float64", "_Float128", "_Float32x",
        "_Float64x", "__fp16", "__bf16", "bool", "complex", "__extension__", "__typeof__",
        "typeof", "__complex__",
    };
    for (size_t k = 0; k < sizeof kw / sizeof kw[0]; k++) {
        if (strlen(kw[k]) == n && memcmp(kw[k], s, n) == 0)
            return 1;
    }
    return 0;
}

static int is_qualifier(const char *s, size_t n)
{
    static const char *const q[] = { "const", "volatile", "restrict", "__restrict",
                                      "__restrict__", "__const", "__volatile__", "_Atomic" };
    for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
        if (strlen(q[k]) == n && memcmp(q[k], s, n) == 0)
            return 1;
    }
    return 0;
}

/* Append s[0..n) with runs of blanks collapsed to one space, trimmed at both ends. */
static enum kevo_status add_collapsed(struct kevo_buf *b, const char *s, size_t n)
{
    enum kevo_status st = KEVO_OK;
    int pending = 0;
    for (size_t i = 0; i < n && !st; i++) {
        if (isspace((unsigned char)s[i])) {
            pending = b->len > 0;
            continue;
        }
        if (pending)
            st = kevo_buf_add(b, " ", 1);
        pending = 0;
        if (!st)
            st = kevo_buf_add(b, s + i, 1);
    }
    return st;
}

/* 1 if s[0..n) holds nothing but blanks and type qualifiers. */
static int only_qualifiers(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (isspace((unsigned char)s[i])) {
            i++;
            continue;
        }
        if (!is_ident_start(s[i]))
            return 0;
        size_t e = i;
        while (e < n && is_ident_char(s[e]))
            e++;
        if (!is_qualifier(s + i, e - i))
            return 0;
        i = e;
    }
    return 1;
}

/*
 * The declarator name in one parameter's text: the last identifier that is not a keyword, is
 * not a struct/union/enum tag and is followed by the end, ')' or '['. Returns 0 if none.
 */
static int find_param_name(const char *s, size_t n, size_t *ns, size_t *ne)
{
    int found = 0;
    size_t prev_s = 0, prev_e = 0;   // the identifier before the current one
    for (size_t i = 0; i < n; i++) {
        if (!is_ident_start(s[i]) || (i > 0 && is_ident_char(s[i - 1])))
            continue;
        size_t e = i;
        while (e < n && is_ident_char(s[e]))
            e++;
        size_t after = skip_space(s, e, n);
        int tag = prev_e > prev_s && skip_space(s, prev_e, n) == i &&
                  ((prev_e - prev_s == 6 && (memcmp(s + prev_s, "struct", 6) == 0)) ||
                   (prev_e - prev_s == 5 && memcmp(s + prev_s, "union", 5) == 0) ||
                   (prev_e - prev_s == 4 && memcmp(s + prev_s, "enum", 4) == 0));
        if (!is_keyword(s + i, e - i) && !tag &&
            (after == n || s[after] == ')' || s[after] == '[')) {
            *ns = i;
            *ne = e;
            found = 1;
        }
        prev_s = i;
        prev_e = e;
        i = e - 1;
    }
    return found;
}

/*
 * The type of one parameter: its text without the name; a leading array declarator
 * `x[QUALS N]` becomes `(*QUALS)` (C adjusts array parameters to pointers).
 */
static enum kevo_status param_type(const char *s, size_t n, struct kevo_buf *out)
{
    enum kevo_status st;
    size_t ns = 0, ne = 0, rest, close;

    if (!find_param_name(s, n, &ns, &ne) || only_qualifiers(s, ns))
        return add_collapsed(out, s, n);   // unnamed parameter: the text is the type
    rest = skip_space(s, ne, n);
    st = add_collapsed(out, s, ns);
    if (st || rest >= n || s[rest] != '[')
        return st ? st : add_collapsed(out, s + ne, n - ne);
    close = match_close(s, rest, n);
    if (close >= n)
        return KEVO_ERR_PARSE;
    struct kevo_buf q;   // the qualifiers inside [...]
    kevo_buf_init(&q, 1024);
    for (size_t i = rest + 1; i < close && !st;) {
        size_t e = i;
        while (e < close && is_ident_char(s[e]))
            e++;
        if (e > i && is_ident_start(s[i]) && is_qualifier(s + i, e - i)) {
            st = kevo_buf_adds(&q, " ");
            if (!st)
                st = kevo_buf_add(&q, s + i, e - i);
        }
        i = e > i ? e : i + 1;
    }
    if (!st && skip_space(s, close + 1, n) == n) {   // x[] -> T *
        st = kevo_buf_adds(out, out->len ? " *" : "*");
        if (!st)
            st = kevo_buf_adds(out, q.len ? kevo_buf_str(&q) + 1 : "");
    } else if (!st) {                                 // x[][N] -> T (*)[N]
        st = kevo_buf_addf(out, "%s(*%s)", out->len ? " " : "", kevo_buf_str(&q));
        if (!st)
            st = add_collapsed(out, s + close + 1, n - close - 1);
    }
    kevo_buf_free(&q);
    return st;
}

/* Split the cleaned parameter list c[open+1 .. close) and fill out->types. */
static enum kevo_status split_params(const char *c, size_t open, size_t close,
                                     struct kevo_cproto *out, struct kevo_buf *msg)
{
    enum kevo_status st = KEVO_OK;
    size_t start = open + 1;
    int depth = 0;
    struct kevo_buf t;

    kevo_buf_init(&t, 4096);
    if (skip_space(c, start, close) == close)
        return KEVO_OK;   // f(): no parameters
    for (size_t i = start; i <= close && !st; i++) {
        if (i < close && (c[i] == '(' || c[i] == '['))
            depth++;
        else if (i < close && (c[i] == ')' || c[i] == ']'))
            depth--;
        if (i < close && (depth > 0 || c[i] != ','))
            continue;
        kevo_buf_reset(&t);
        st = add_collapsed(&t, c + start, i - start);
        if (st)
            break;
        if (strcmp(kevo_buf_str(&t), "...") == 0) {
            st = failf(msg, KEVO_ERR_UNSUPPORTED, "is variadic; kevo cannot call it");
            break;
        }
        if (out->n_params == KEVO_MAX_ARGS) {
            st = failf(msg, KEVO_ERR_UNSUPPORTED, "has more than %d parameters", KEVO_MAX_ARGS);
            break;
        }
        kevo_buf_reset(&t);
        st = param_type(c + start, i - start, &t);
        if (st)
            break;
        out->types[out->n_params] = kevo_strdup(kevo_buf_str(&t));
        if (!out->types[out->n_params])
            st = KEVO_ERR_NOMEM;
        else
            out->n_params++;
        start = i + 1;
    }
    if (!st && out->n_params == 1 && strcmp(out->types[0], "void") == 0) {
        kevo_free(out->types[0]);   // f(void)
        out->types[0] = NULL;
        out->n_params = 0;
    }
    kevo_buf_free(&t);
    return st;
}

void kevo_cproto_clear(struct kevo_cproto *p)
{
    if (!p)
        return;
    for (int i = 0; i < KEVO_MAX_ARGS; i++)
        kevo_free(p->types[i]);
    memset(p, 0, sizeof *p);
}

enum kevo_status kevo_cproto_find(const char *src, size_t len, const char *name,
                                     struct kevo_cproto *out, struct kevo_buf *msg)
{
    enum kevo_status st = KEVO_OK;
    size_t pos = 0, open = 0;
    char *c = NULL;

    memset(out, 0, sizeof *out);
    c = clean_source(src, len);
    if (!c) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    if (!find_function(c, len, name, &pos, &open)) {
        st = failf(msg, KEVO_ERR_NOTFOUND, "function '%s' not found", name);
        goto out;
    }
    out->line = 1;
    for (size_t i = 0; i < pos; i++)
        out->line += c[i] == '\n';
    st = split_params(c, open, match_close(c, open, len), out, msg);
    if (st == KEVO_ERR_PARSE)
        st = failf(msg, KEVO_ERR_PARSE, "has a parameter list kevo cannot read");
out:
    if (st)
        kevo_cproto_clear(out);
    kevo_free(c);
    return st;
}

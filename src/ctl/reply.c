/*
 * reply - LLM replies to candidate texts (reply.h). Line based: markers and fences are
 * whole lines, so prose that merely mentions ``` or SEARCH is not taken for structure.
 */
#include "ctl/reply.h"
#include "base/buf.h"
#include "base/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct line {
    const char *s;
    size_t n;                 /* without the newline (and a CR before it) */
    size_t next;              /* offset of the following line */
};

struct lines {
    struct line *v;
    size_t n;
};

static enum kevo_status split(const char *t, size_t len, struct lines *out)
{
    size_t cap = 64, off = 0;
    out->n = 0;
    out->v = kevo_malloc(cap * sizeof *out->v);
    if (!out->v)
        return KEVO_ERR_NOMEM;
    while (off < len) {
        const char *nl = memchr(t + off, '\n', len - off);
        size_t end = nl ? (size_t)(nl - t) : len;
        if (out->n == cap) {
            struct line *v = kevo_reallocarray(out->v, cap * 2, sizeof *v);
            if (!v)
                return KEVO_ERR_NOMEM;
            out->v = v;
            cap *= 2;
        }
        size_t n = end - off;
        if (n && t[off + n - 1] == '\r')
            n--;
        out->v[out->n++] = (struct line){ t + off, n, nl ? end + 1 : len };
        off = nl ? end + 1 : len;
    }
    return KEVO_OK;
}

static enum kevo_status why_f(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static enum kevo_status why_f(char **why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    *why = kevo_vstrdupf(fmt, ap);
    va_end(ap);
    return KEVO_ERR_PARSE;
}

/* Length without trailing blanks. */
static size_t rtrim(const struct line *l)
{
    size_t n = l->n;
    while (n && (l->s[n - 1] == ' ' || l->s[n - 1] == '\t'))
        n--;
    return n;
}

/* A marker line: 5 to 9 of c, then (optionally a blank and) word, then only blanks. */
static int marker(const struct line *l, char c, const char *word)
{
    size_t n = rtrim(l), i = 0;
    while (i < n && l->s[i] == c)
        i++;
    if (i < 5 || i > 9)
        return 0;
    if (!word)
        return i == n;
    while (i < n && l->s[i] == ' ')
        i++;
    return n - i == strlen(word) && memcmp(l->s + i, word, n - i) == 0;
}

/* ---- SEARCH/REPLACE ---- */

struct edit {
    size_t s0, s1, r0, r1;    /* line ranges [s0, s1) and [r0, r1) of the reply */
};

/* Text of reply lines [a, b) with newlines. */
static enum kevo_status join(const struct lines *L, size_t a, size_t b, struct kevo_buf *o)
{
    enum kevo_status st = KEVO_OK;
    for (size_t i = a; i < b && !st; i++) {
        st = kevo_buf_add(o, L->v[i].s, L->v[i].n);
        if (!st)
            st = kevo_buf_add(o, "\n", 1);
    }
    return st;
}

/* Lines [at, at+n) of the text P equal the search lines, blanks at line ends aside? */
static int lines_match(const struct lines *P, size_t at, const struct lines *R, size_t s0,
                       size_t s1)
{
    for (size_t j = 0; j < s1 - s0; j++) {
        const struct line *a = &P->v[at + j], *b = &R->v[s0 + j];
        size_t na = rtrim(a), nb = rtrim(b);
        if (na != nb || memcmp(a->s, b->s, na) != 0)
            return 0;
    }
    return 1;
}

/* Apply one edit to text cur (replaced by the result). */
static enum kevo_status apply_edit(struct kevo_buf *cur, const struct lines *R,
                                   const struct edit *e, int k, char **why)
{
    struct lines P = { 0 };
    struct kevo_buf out;
    size_t n = e->s1 - e->s0, hits = 0, at = 0;
    enum kevo_status st;

    if (!n)
        return why_f(why, "edit %d: its SEARCH text is empty", k);
    st = split(cur->data ? cur->data : "", cur->len, &P);
    for (size_t i = 0; !st && i + n <= P.n; i++)
        if (lines_match(&P, i, R, e->s0, e->s1)) {
            hits++;
            at = i;
        }
    if (!st && hits != 1)
        st = hits ? why_f(why, "edit %d: its SEARCH text occurs %zu times in the parent", k, hits)
                  : why_f(why, "edit %d: its SEARCH text is not in the parent", k);
    if (st) {
        kevo_free(P.v);
        return st;
    }
    size_t from = (size_t)(P.v[at].s - cur->data), to = P.v[at + n - 1].next;
    kevo_buf_init(&out, KEVO_REPLY_MAX_OUT);
    st = kevo_buf_add(&out, cur->data, from);
    if (!st)
        st = join(R, e->r0, e->r1, &out);
    if (!st)
        st = kevo_buf_add(&out, cur->data + to, cur->len - to);
    kevo_free(P.v);
    if (st) {
        kevo_buf_free(&out);
        return st == KEVO_ERR_NOMEM ? st : why_f(why, "the edited candidate is over %zu bytes",
                                                 KEVO_REPLY_MAX_OUT);
    }
    kevo_buf_free(cur);
    *cur = out;
    return KEVO_OK;
}

/* Parse the edit blocks of R; 0 found means none. */
static enum kevo_status parse_edits(const struct lines *R, struct edit **out, int *n, char **why)
{
    *n = 0;
    *out = NULL;
    for (size_t i = 0; i < R->n; i++) {
        if (!marker(&R->v[i], '<', "SEARCH"))
            continue;
        struct edit e = { i + 1, 0, 0, 0 };
        size_t j = i + 1;
        while (j < R->n && !marker(&R->v[j], '=', NULL))
            j++;
        if (j == R->n)
            return why_f(why, "edit %d: no ======= line after its SEARCH text", *n + 1);
        e.s1 = j;
        e.r0 = j + 1;
        for (j = e.r0; j < R->n && !marker(&R->v[j], '>', "REPLACE"); j++)
            if (marker(&R->v[j], '<', "SEARCH"))
                break;
        if (j == R->n || !marker(&R->v[j], '>', "REPLACE"))
            return why_f(why, "edit %d: not closed by >>>>>>> REPLACE (a truncated reply?)",
                         *n + 1);
        e.r1 = j;
        struct edit *v = kevo_reallocarray(*out, (size_t)*n + 1, sizeof *v);
        if (!v)
            return KEVO_ERR_NOMEM;
        *out = v;
        v[(*n)++] = e;
        i = j;
    }
    return KEVO_OK;
}

/* ---- fenced blocks ---- */

/* The length of the backtick fence a line opens with (>= 3), else 0. */
static size_t fence(const struct line *l)
{
    size_t i = 0, k = 0;
    while (i < l->n && i < 3 && l->s[i] == ' ')
        i++;
    while (i + k < l->n && l->s[i + k] == '`')
        k++;
    return k >= 3 ? k : 0;
}

/* Does l close a block opened by a fence of len backticks? Only a bare fence at least
 * as long does (CommonMark's rule), so ```c inside a block or a ```` wrapper's inner
 * ``` does not end it. */
static int closes(const struct line *l, size_t len)
{
    size_t k = fence(l), n = rtrim(l), i = 0;
    while (i < n && l->s[i] == ' ')
        i++;
    return k >= len && i + k == n;
}

static int has_plan(const struct lines *R, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++) {
        const struct line *l = &R->v[i];
        for (size_t k = 0; k + 11 <= l->n; k++)
            if (!memcmp(l->s + k, "kevo launch", 11) || !memcmp(l->s + k, "kevo call ", 10))
                return 1;
    }
    return 0;
}

/* The block to take: the largest with a launch/call directive, else the largest. */
static enum kevo_status pick_block(const struct lines *R, size_t *a, size_t *b, char **why)
{
    size_t best_a = 0, best_b = 0, best_n = 0;
    int best_plan = -1, open = 0;

    for (size_t i = 0; i < R->n; i++) {
        size_t len = fence(&R->v[i]);
        if (!len)
            continue;
        size_t j = i + 1;
        while (j < R->n && !closes(&R->v[j], len))
            j++;
        if (j == R->n) {
            open = 1;
            break;
        }
        int plan = has_plan(R, i + 1, j);
        if (plan > best_plan || (plan == best_plan && j - i - 1 > best_n)) {
            best_plan = plan;
            best_n = j - i - 1;
            best_a = i + 1;
            best_b = j;
        }
        i = j;
    }
    if (best_plan < 0)
        return why_f(why, open ? "the code block is not closed (a truncated reply?)"
                               : "no code block and no SEARCH/REPLACE edit in the reply");
    if (!best_n)
        return why_f(why, "the code block is empty");
    *a = best_a;
    *b = best_b;
    return KEVO_OK;
}

/* ---- entry ---- */

static enum kevo_status check_text(const char *t, size_t len, char **why)
{
    if (len > KEVO_REPLY_MAX_BYTES)
        return why_f(why, "the reply is %zu bytes (at most %zu)", len, KEVO_REPLY_MAX_BYTES);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == 0 || (c < 32 && c != '\n' && c != '\r' && c != '\t' && c != '\f'))
            return why_f(why, "binary data (byte 0x%02x) at offset %zu", c, i);
    }
    return KEVO_OK;
}

enum kevo_status kevo_reply_apply(const char *reply, size_t len, const char *parent,
                                  size_t parent_len, char **out, size_t *out_len,
                                  enum kevo_reply_form *form, char **why)
{
    struct lines R = { 0 };
    struct edit *ed = NULL;
    struct kevo_buf cur;
    int n_ed = 0;
    enum kevo_status st;

    *out = NULL;
    *why = NULL;
    *form = KEVO_REPLY_NONE;
    kevo_buf_init(&cur, KEVO_REPLY_MAX_OUT);
    st = check_text(reply, len, why);
    if (!st)
        st = split(reply, len, &R);
    if (!st)
        st = parse_edits(&R, &ed, &n_ed, why);
    if (!st && n_ed) {
        if (!parent)
            st = why_f(why, "the reply edits a parent, but there is none (a first implementation "
                       "needs the whole file)");
        if (!st && parent_len > KEVO_REPLY_MAX_OUT)
            st = why_f(why, "the parent is over %zu bytes", KEVO_REPLY_MAX_OUT);
        if (!st)
            st = kevo_buf_add(&cur, parent, parent_len);
        for (int k = 0; k < n_ed && !st; k++)
            st = apply_edit(&cur, &R, &ed[k], k + 1, why);
        *form = KEVO_REPLY_EDITS;
    } else if (!st) {
        size_t a = 0, b = 0;
        st = pick_block(&R, &a, &b, why);
        if (!st && join(&R, a, b, &cur) != KEVO_OK)
            st = why_f(why, "the code block is over %zu bytes", KEVO_REPLY_MAX_OUT);
        *form = KEVO_REPLY_FILE;
    }
    if (!st) {
        *out_len = cur.len;
        *out = kevo_buf_take(&cur);
        st = *out ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    if (st)
        *form = KEVO_REPLY_NONE;
    kevo_buf_free(&cur);
    kevo_free(ed);
    kevo_free(R.v);
    return st;
}

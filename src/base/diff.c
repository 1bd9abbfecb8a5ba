/*
 * diff - a unified diff of the lines of two texts (diff.h): the common head and tail set
 * aside, the longest common subsequence of the rest by dynamic programming (a table of
 * suffix lengths, walked forwards), then the edit script cut into hunks with context.
 */
#include "base/diff.h"

#include "base/mem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define LCS_CELLS (4u << 20)   /* 16 MiB of table: two sources of 2000 differing lines */

struct line {
    const char *s;
    size_t len;
};

/* An entry of the edit script: what, and the line of a and of b it stands at. */
struct edit {
    enum kevo_diff_op op;
    size_t a, b;
};

/* The lines of t (a last line without a newline counts; no empty line after the last
 * newline) into a new array. */
static enum kevo_status split(const char *t, struct line **out, size_t *n)
{
    size_t cap = 1;

    *n = 0;
    for (const char *p = t; *p; p++)
        cap += *p == '\n';
    *out = kevo_reallocarray(NULL, cap, sizeof **out);
    if (!*out)
        return KEVO_ERR_NOMEM;
    while (*t) {
        const char *e = strchr(t, '\n');
        size_t len = e ? (size_t)(e - t) : strlen(t);
        (*out)[(*n)++] = (struct line){ t, len };
        t += len + (e != NULL);
    }
    return KEVO_OK;
}

static int same(const struct line *x, const struct line *y)
{
    return x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
}

/* The edits of the middle a[0..na) against b[0..nb) appended at e[*k]: a minimal script
 * when the table fits the cap, else all removed then all added. */
static enum kevo_status middle(const struct line *a, size_t na, const struct line *b,
                               size_t nb, size_t a0, struct edit *e, size_t *k)
{
    uint32_t *t = NULL;
    size_t i = 0, j = 0, w = nb + 1;

    if (na && nb && na * nb <= LCS_CELLS && !(t = kevo_calloc((na + 1) * w, sizeof *t)))
        return KEVO_ERR_NOMEM;
    for (size_t x = na; t && x-- > 0;)
        for (size_t y = nb; y-- > 0;)
            t[x * w + y] = same(&a[x], &b[y]) ? t[(x + 1) * w + y + 1] + 1
                           : t[(x + 1) * w + y] > t[x * w + y + 1] ? t[(x + 1) * w + y]
                                                                   : t[x * w + y + 1];
    while (i < na || j < nb) {
        if (t && i < na && j < nb && same(&a[i], &b[j])) {
            e[(*k)++] = (struct edit){ KEVO_DIFF_SAME, a0 + i++, a0 + j++ };
        } else if (i < na && (!t || j == nb || t[(i + 1) * w + j] >= t[i * w + j + 1])) {
            e[(*k)++] = (struct edit){ KEVO_DIFF_DEL, a0 + i++, a0 + j };
        } else {
            e[(*k)++] = (struct edit){ KEVO_DIFF_ADD, a0 + i, a0 + j++ };
        }
    }
    kevo_free(t);
    return KEVO_OK;
}

/* The hunk of e[from..to) through fn: its header, then its lines. */
static void hunk(const struct edit *e, size_t from, size_t to, const struct line *la,
                 const struct line *lb, kevo_diff_fn fn, void *user)
{
    size_t na = 0, nb = 0;
    char head[96];
    int len;

    for (size_t k = from; k < to; k++) {
        na += e[k].op != KEVO_DIFF_ADD;
        nb += e[k].op != KEVO_DIFF_DEL;
    }
    len = snprintf(head, sizeof head, "@@ -%zu,%zu +%zu,%zu @@", e[from].a + (na > 0), na,
                   e[from].b + (nb > 0), nb);
    fn(user, KEVO_DIFF_HUNK, head, len > 0 ? (size_t)len : 0);
    for (size_t k = from; k < to; k++) {
        const struct line *l = e[k].op == KEVO_DIFF_ADD ? &lb[e[k].b] : &la[e[k].a];
        fn(user, e[k].op, l->s, l->len);
    }
}

/* The script e[0..n) as hunks: changes with `context` unchanged edits around them. */
static void hunks(const struct edit *e, size_t n, int context, const struct line *la,
                  const struct line *lb, kevo_diff_fn fn, void *user)
{
    size_t c = context > 0 ? (size_t)context : 0, k = 0;

    while (k < n) {
        size_t first = k, end;
        while (first < n && e[first].op == KEVO_DIFF_SAME)
            first++;
        if (first == n)
            return;
        /* the hunk runs on while the next change is within 2 * context lines */
        end = first;
        for (size_t gap = 0; end < n && gap <= 2 * c; end++)
            gap = e[end].op == KEVO_DIFF_SAME ? gap + 1 : 0;
        while (end > first && e[end - 1].op == KEVO_DIFF_SAME)
            end--;
        size_t from = first > k + c ? first - c : k, to = end + c < n ? end + c : n;
        hunk(e, from, to, la, lb, fn, user);
        k = to;
    }
}

enum kevo_status kevo_diff_lines(const char *a, const char *b, int context, kevo_diff_fn fn,
                                 void *user, int *n_changed)
{
    struct line *la = NULL, *lb = NULL;
    struct edit *e = NULL;
    size_t na = 0, nb = 0, head = 0, tail = 0, k = 0;
    enum kevo_status st = split(a ? a : "", &la, &na);

    if (n_changed)
        *n_changed = 0;
    if (!st)
        st = split(b ? b : "", &lb, &nb);
    if (!st && !(e = kevo_reallocarray(NULL, na + nb + 1, sizeof *e)))
        st = KEVO_ERR_NOMEM;
    if (st)
        goto out;
    while (head < na && head < nb && same(&la[head], &lb[head]))
        head++;
    while (tail < na - head && tail < nb - head && same(&la[na - 1 - tail], &lb[nb - 1 - tail]))
        tail++;
    for (size_t i = 0; i < head; i++)
        e[k++] = (struct edit){ KEVO_DIFF_SAME, i, i };
    st = middle(la + head, na - head - tail, lb + head, nb - head - tail, head, e, &k);
    for (size_t i = 0; !st && i < tail; i++)
        e[k++] = (struct edit){ KEVO_DIFF_SAME, na - tail + i, nb - tail + i };
    for (size_t i = 0; !st && n_changed && i < k; i++)
        *n_changed += e[i].op != KEVO_DIFF_SAME;
    if (!st)
        hunks(e, k, context, la, lb, fn, user);
out:
    kevo_free(la);
    kevo_free(lb);
    kevo_free(e);
    return st;
}

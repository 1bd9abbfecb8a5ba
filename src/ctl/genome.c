/*
 * genome - a candidate's params and flags as the search varies them (genome.h). The text
 * rewriting only touches `param` and `flags` directive lines and keeps every other line
 * where it was, so compiler messages still point at the user's line numbers.
 */
#include "ctl/genome.h"
#include "base/buf.h"
#include "base/mem.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Does identifier `name` occur as a whole word in expr? */
static int uses_name(const char *expr, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = expr ? strstr(expr, name) : NULL; p; p = strstr(p + 1, name)) {
        int before = p > expr && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after)
            return 1;
    }
    return 0;
}

static int in_geometry(const struct kevo_task *c, const char *name)
{
    for (int i = 0; i < c->n_launches; i++) {
        const struct kevo_launch *l = &c->launches[i];
        for (int d = 0; d < 3; d++)
            if (uses_name(l->grid[d], name) || uses_name(l->block[d], name))
                return 1;
        if (uses_name(l->smem, name))
            return 1;
    }
    return 0;
}

static enum kevo_status alloc_params(struct kevo_genome *g, int n)
{
    g->n_params = n;
    g->names = kevo_calloc((size_t)n + 1, sizeof *g->names);
    g->n_values = kevo_calloc((size_t)n + 1, sizeof *g->n_values);
    g->values = kevo_calloc((size_t)n + 1, sizeof *g->values);
    g->geometry = kevo_calloc((size_t)n + 1, sizeof *g->geometry);
    g->choice = kevo_calloc((size_t)n + 1, sizeof *g->choice);
    return g->names && g->n_values && g->values && g->geometry && g->choice ? KEVO_OK
                                                                           : KEVO_ERR_NOMEM;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Param i with its values in ascending order (the canonical order: the same choices give
 * the same text, whatever order a file listed them in) and the first listed chosen. */
static enum kevo_status set_param(struct kevo_genome *g, int i, const char *name,
                                  const int64_t *vals, int n)
{
    g->names[i] = kevo_strdup(name);
    g->values[i] = kevo_calloc((size_t)n, sizeof **g->values);
    if (!g->names[i] || !g->values[i])
        return KEVO_ERR_NOMEM;
    memcpy(g->values[i], vals, (size_t)n * sizeof *vals);
    qsort(g->values[i], (size_t)n, sizeof *vals, cmp_i64);
    g->n_values[i] = n;
    for (int k = 0; k < n; k++)
        if (g->values[i][k] == vals[0])
            g->choice[i] = k;
    return KEVO_OK;
}

static enum kevo_status strip_flags(const char *text, size_t len, char **out, size_t *out_len);

enum kevo_status kevo_genome_from_text(const struct kevo_task *task, const char *path,
                                       const char *text, size_t len, struct kevo_genome *out,
                                       char **out_msg)
{
    struct kevo_task *c = NULL;
    enum kevo_status st;

    memset(out, 0, sizeof *out);
    st = kevo_candidate_parse(task, path, text, len, &c, out_msg);
    if (st)
        return st;
    out->lang = c->lang;
    st = strip_flags(text, len, &out->text, &out->len);
    if (!st)
        st = alloc_params(out, c->n_params);
    for (int i = 0; !st && i < c->n_params; i++) {
        st = set_param(out, i, c->params[i].name, c->params[i].values, c->params[i].n_values);
        out->geometry[i] = in_geometry(c, c->params[i].name);
    }
    for (int i = 0; !st && i < c->n_flags; i++)
        st = kevo_genome_set_flag(out, c->flags[i], 1);
    kevo_task_free(c);
    if (st)
        kevo_genome_clear(out);
    return st;
}

void kevo_genome_clear(struct kevo_genome *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_params; i++) {
        if (g->names)
            kevo_free(g->names[i]);
        if (g->values)
            kevo_free(g->values[i]);
    }
    for (int i = 0; i < g->n_flags; i++)
        kevo_free(g->flags[i]);
    kevo_free(g->names);
    kevo_free(g->n_values);
    kevo_free(g->values);
    kevo_free(g->geometry);
    kevo_free(g->choice);
    kevo_free(g->text);
    memset(g, 0, sizeof *g);
}

enum kevo_status kevo_genome_copy(const struct kevo_genome *s, struct kevo_genome *d)
{
    enum kevo_status st;

    memset(d, 0, sizeof *d);
    d->lang = s->lang;
    d->text = kevo_malloc(s->len + 1);
    st = d->text ? alloc_params(d, s->n_params) : KEVO_ERR_NOMEM;
    if (!st) {
        memcpy(d->text, s->text, s->len + 1);
        d->len = s->len;
    }
    for (int i = 0; !st && i < s->n_params; i++) {
        st = set_param(d, i, s->names[i], s->values[i], s->n_values[i]);
        d->geometry[i] = s->geometry[i];
        d->choice[i] = s->choice[i];
    }
    for (int i = 0; !st && i < s->n_flags; i++)
        st = kevo_genome_set_flag(d, s->flags[i], 1);
    if (st)
        kevo_genome_clear(d);
    return st;
}

int kevo_genome_has_flag(const struct kevo_genome *g, const char *flag)
{
    for (int i = 0; i < g->n_flags; i++)
        if (strcmp(g->flags[i], flag) == 0)
            return 1;
    return 0;
}

enum kevo_status kevo_genome_set_flag(struct kevo_genome *g, const char *flag, int on)
{
    for (int i = 0; i < g->n_flags; i++) {
        if (strcmp(g->flags[i], flag) != 0)
            continue;
        if (!on) {
            kevo_free(g->flags[i]);
            memmove(&g->flags[i], &g->flags[i + 1], (size_t)(g->n_flags - i - 1) * sizeof *g->flags);
            g->n_flags--;
        }
        return KEVO_OK;
    }
    if (!on)
        return KEVO_OK;
    if (g->n_flags >= KEVO_GENOME_MAX_FLAGS)
        return KEVO_ERR_TOOBIG;
    char *f = kevo_strdup(flag);
    if (!f)
        return KEVO_ERR_NOMEM;
    int at = 0;   /* sorted: one set of flags has one text, whatever order it was built in */
    while (at < g->n_flags && strcmp(g->flags[at], flag) < 0)
        at++;
    memmove(&g->flags[at + 1], &g->flags[at], (size_t)(g->n_flags - at) * sizeof *g->flags);
    g->flags[at] = f;
    g->n_flags++;
    return KEVO_OK;
}

/* ---- text ---- */

/* If line [s, e) is a `// kevo KW ...` directive, the keyword (and *rest past it). */
static int directive_kw(const char *s, const char *e, const char **kw, size_t *kw_len,
                        const char **rest)
{
    if (!kevo_task_directive(s, (size_t)(e - s), kw, kw_len))
        return 0;
    *rest = *kw + *kw_len;
    return 1;
}

static enum kevo_status emit_param(const struct kevo_genome *g, const char *rest, const char *e,
                                   struct kevo_buf *b, int *done)
{
    char name[128];
    size_t n = 0;

    while (rest < e && (*rest == ' ' || *rest == '\t'))
        rest++;
    while (rest < e && !isspace((unsigned char)*rest) && n + 1 < sizeof name)
        name[n++] = *rest++;
    name[n] = '\0';
    for (int i = 0; i < g->n_params; i++) {
        if (strcmp(g->names[i], name) != 0)
            continue;
        enum kevo_status st = kevo_buf_addf(b, "// kevo param %s %lld", name,
                                            (long long)g->values[i][g->choice[i]]);
        for (int k = 0; !st && k < g->n_values[i]; k++)
            if (k != g->choice[i])
                st = kevo_buf_addf(b, " %lld", (long long)g->values[i][k]);
        *done = 1;
        return st;
    }
    *done = 0;
    return KEVO_OK;
}

static enum kevo_status emit_flags(const struct kevo_genome *g, struct kevo_buf *b)
{
    enum kevo_status st = kevo_buf_adds(b, "// kevo flags");
    for (int i = 0; !st && i < g->n_flags; i++)
        st = kevo_buf_addf(b, " %s", g->flags[i]);
    return st;
}

/* The text with every flags line (and the one kevo appends) turned into a bare "//": the
 * genome's flags are emitted once, at the end, so the same configuration is one text. */
static enum kevo_status strip_flags(const char *text, size_t len, char **out, size_t *out_len)
{
    struct kevo_buf b;
    const char *p = text, *end = text + len;
    enum kevo_status st = KEVO_OK;

    kevo_buf_init(&b, len + 16);
    while (p < end && !st) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end, *kw, *rest;
        size_t kl;
        if (directive_kw(p, e, &kw, &kl, &rest) && kl == 5 && !strncmp(kw, "flags", 5))
            st = kevo_buf_adds(&b, "//");
        else
            st = kevo_buf_add(&b, p, (size_t)(e - p));
        if (!st && nl)
            st = kevo_buf_add(&b, "\n", 1);
        p = nl ? nl + 1 : end;
    }
    /* a text that ends with the appended flags line and nothing else: drop the empty tail */
    while (!st && b.len >= 3 && !memcmp(b.data + b.len - 3, "\n//", 3))
        b.len -= 2, b.data[b.len] = '\0';
    while (!st && b.len >= 4 && !memcmp(b.data + b.len - 4, "\n//\n", 4))
        b.len -= 3, b.data[b.len] = '\0';
    if (st) {
        kevo_buf_free(&b);
        return st;
    }
    *out_len = b.len;
    *out = kevo_buf_take(&b);
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_genome_text(const struct kevo_genome *g, char **out, size_t *len)
{
    struct kevo_buf b;
    const char *p = g->text, *end = g->text + g->len;
    enum kevo_status st = KEVO_OK;

    kevo_buf_init(&b, g->len * 2 + 4096);
    while (p < end && !st) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        const char *next = e ? e + 1 : end, *kw, *rest;
        size_t kl;
        int done = 0;
        e = e ? e : end;
        if (directive_kw(p, e, &kw, &kl, &rest) && kl == 5 && !strncmp(kw, "param", 5))
            st = emit_param(g, rest, e, &b, &done);
        if (!st && !done)
            st = kevo_buf_add(&b, p, (size_t)(e - p));
        if (!st && next > e)
            st = kevo_buf_add(&b, "\n", 1);
        p = next;
    }
    if (!st && g->n_flags) {   /* the one flags line, at the end: no line number moves */
        if (b.len && b.data[b.len - 1] != '\n')
            st = kevo_buf_add(&b, "\n", 1);
        if (!st)
            st = emit_flags(g, &b);
        if (!st)
            st = kevo_buf_add(&b, "\n", 1);
    }
    if (st) {
        kevo_buf_free(&b);
        return st == KEVO_ERR_TOOBIG ? KEVO_ERR_TOOBIG : KEVO_ERR_NOMEM;
    }
    *len = b.len;
    *out = kevo_buf_take(&b);
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_genome_key(const struct kevo_genome *g, char key[KEVO_HASH_HEX])
{
    char *t = NULL;
    size_t n = 0;
    enum kevo_status st = kevo_genome_text(g, &t, &n);
    if (!st)
        st = kevo_sha256_hex(t, n, key);
    kevo_free(t);
    return st;
}

enum kevo_status kevo_genome_json(const struct kevo_genome *g, char **params, char **flags)
{
    json_t *p = json_object(), *f = json_array();
    for (int i = 0; p && i < g->n_params; i++)
        json_object_set_new(p, g->names[i], json_integer(g->values[i][g->choice[i]]));
    for (int i = 0; f && i < g->n_flags; i++)
        json_array_append_new(f, json_string(g->flags[i]));
    *params = p ? json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    *flags = f ? json_dumps(f, JSON_COMPACT) : NULL;
    json_decref(p);
    json_decref(f);
    if (*params && *flags)
        return KEVO_OK;
    kevo_free(*params);    /* jansson allocates with malloc; kevo_free is free */
    kevo_free(*flags);
    *params = *flags = NULL;
    return KEVO_ERR_NOMEM;
}

/* The next line of [p, end) that is not a param directive; NULL at the end. */
static const char *next_code_line(const char *p, const char *end, const char **e)
{
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *kw, *rest;
        size_t kl;
        *e = nl ? nl : end;
        if (!(directive_kw(p, *e, &kw, &kl, &rest) && kl == 5 && !strncmp(kw, "param", 5)))
            return p;
        p = nl ? nl + 1 : end;
    }
    return NULL;
}

int kevo_genome_same_source(const struct kevo_genome *a, const struct kevo_genome *b)
{
    const char *pa = a->text, *ea = a->text + a->len, *pb = b->text, *eb = b->text + b->len;
    const char *la, *lb;

    if (a->n_params != b->n_params)
        return 0;
    for (int i = 0; i < a->n_params; i++)
        if (strcmp(a->names[i], b->names[i]) != 0 || a->n_values[i] != b->n_values[i] ||
            memcmp(a->values[i], b->values[i], (size_t)a->n_values[i] * sizeof **a->values))
            return 0;
    for (;;) {
        pa = next_code_line(pa, ea, &la);
        pb = next_code_line(pb, eb, &lb);
        if (!pa || !pb)
            return !pa && !pb;
        if (la - pa != lb - pb || memcmp(pa, pb, (size_t)(la - pa)) != 0)
            return 0;
        pa = la < ea ? la + 1 : ea;
        pb = lb < eb ? lb + 1 : eb;
    }
}

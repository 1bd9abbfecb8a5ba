/*
 * chart - x/y charts and grouped bars drawn with the svg writer (chart.h). The chart keeps
 * copies of its series and notes and lays everything out at render time: the axes fitted
 * to what can be placed, ticks thinned until their labels do not touch, the legend beside
 * the plot (never over the data), notes moved up until they do not cover each other.
 */
#include "base/chart.h"

#include "base/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CHAR_W 6.3         /* the width of a character of an 11-pixel label, about */
#define LEGEND_MAX 26      /* characters of a legend entry before it is cut */
#define NOTE_H 13          /* pixels between two notes */
#define BAR_STEP 11        /* pixels from one bar of a category to the next */

struct series {
    char *name;            /* NULL: no legend entry */
    char color[16];
    enum kevo_chart_style style;
    double *x, *y;
    char **tips;           /* n entries or NULL */
    size_t n;
};

struct note {
    double x, y;
    char anchor[8], color[16];
    char *text;
};

struct kevo_chart {
    int width, height;
    char *title, *xlabel, *ylabel;
    struct kevo_chart_axis x, y;   /* labels point at xlabel, ylabel */
    struct series *s;
    size_t n_s;
    struct note *notes;
    size_t n_notes;
};

/* The box of the plot inside the image, and its scales. */
struct frame {
    double left, top, right, bottom;
    struct kevo_svg_scale xs, ys;
    int n_legend;
};

/* ---- building ---- */

static void series_clear(struct series *s)
{
    for (size_t i = 0; s->tips && i < s->n; i++)
        kevo_free(s->tips[i]);
    kevo_free(s->tips);
    kevo_free(s->name);
    kevo_free(s->x);
    kevo_free(s->y);
}

void kevo_chart_free(struct kevo_chart *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_s; i++)
        series_clear(&c->s[i]);
    for (size_t i = 0; i < c->n_notes; i++)
        kevo_free(c->notes[i].text);
    kevo_free(c->s);
    kevo_free(c->notes);
    kevo_free(c->title);
    kevo_free(c->xlabel);
    kevo_free(c->ylabel);
    kevo_free(c);
}

/* A copy of s, or "" for NULL; NULL only when out of memory. */
static char *dup0(const char *s)
{
    return kevo_strdup(s ? s : "");
}

enum kevo_status kevo_chart_new(int width, int height, const char *title,
                                const struct kevo_chart_axis *x,
                                const struct kevo_chart_axis *y, struct kevo_chart **out)
{
    struct kevo_chart *c = kevo_calloc(1, sizeof *c);

    *out = NULL;
    if (!c)
        return KEVO_ERR_NOMEM;
    c->width = width > 200 ? width : 200;
    c->height = height > 120 ? height : 120;
    c->x = *x;
    c->y = *y;
    c->title = dup0(title);
    c->xlabel = dup0(x->label);
    c->ylabel = dup0(y->label);
    c->x.label = c->xlabel;
    c->y.label = c->ylabel;
    if (!c->title || !c->xlabel || !c->ylabel) {
        kevo_chart_free(c);
        return KEVO_ERR_NOMEM;
    }
    *out = c;
    return KEVO_OK;
}

/* Copies of the n tooltips into s->tips (NULL entries stay NULL). */
static enum kevo_status copy_tips(struct series *s, const char *const *tips)
{
    if (!tips || !s->n)
        return KEVO_OK;
    s->tips = kevo_calloc(s->n, sizeof *s->tips);
    if (!s->tips)
        return KEVO_ERR_NOMEM;
    for (size_t i = 0; i < s->n; i++)
        if (tips[i] && !(s->tips[i] = kevo_strdup(tips[i])))
            return KEVO_ERR_NOMEM;
    return KEVO_OK;
}

enum kevo_status kevo_chart_add(struct kevo_chart *c, const char *name, const char *color,
                                enum kevo_chart_style style, const double *x, const double *y,
                                size_t n, const char *const *tips)
{
    struct series *p = kevo_reallocarray(c->s, c->n_s + 1, sizeof *p), s;

    if (!p)
        return KEVO_ERR_NOMEM;
    c->s = p;
    memset(&s, 0, sizeof s);
    snprintf(s.color, sizeof s.color, "%s", color ? color : "#333");
    s.style = style;
    s.n = n;
    s.name = name ? kevo_strdup(name) : NULL;
    s.x = kevo_reallocarray(NULL, n ? n : 1, sizeof *s.x);
    s.y = kevo_reallocarray(NULL, n ? n : 1, sizeof *s.y);
    if ((name && !s.name) || !s.x || !s.y || copy_tips(&s, tips)) {
        series_clear(&s);
        return KEVO_ERR_NOMEM;
    }
    if (n) {
        memcpy(s.x, x, n * sizeof *x);
        memcpy(s.y, y, n * sizeof *y);
    }
    c->s[c->n_s++] = s;
    return KEVO_OK;
}

enum kevo_status kevo_chart_note(struct kevo_chart *c, double x, double y, const char *anchor,
                                 const char *color, const char *text)
{
    struct note *p = kevo_reallocarray(c->notes, c->n_notes + 1, sizeof *p), *nt;

    if (!p)
        return KEVO_ERR_NOMEM;
    c->notes = p;
    nt = &c->notes[c->n_notes];
    memset(nt, 0, sizeof *nt);
    nt->x = x;
    nt->y = y;
    snprintf(nt->anchor, sizeof nt->anchor, "%s", anchor && strcmp(anchor, "end") == 0
                                                  ? "end" : "start");
    snprintf(nt->color, sizeof nt->color, "%s", color ? color : "#333");
    nt->text = dup0(text);
    if (!nt->text)
        return KEVO_ERR_NOMEM;
    c->n_notes++;
    return KEVO_OK;
}

/* ---- layout ---- */

/* Every value of one axis (0: x, 1: y) of the chart's series and notes, for fitting:
 * a new array of *n values (NULL when there are none or no memory). */
static double *axis_values(const struct kevo_chart *c, int axis, size_t *n)
{
    size_t total = c->n_notes, k = 0;
    double *v;

    for (size_t i = 0; i < c->n_s; i++)
        total += c->s[i].n;
    *n = 0;
    v = total ? kevo_reallocarray(NULL, total, sizeof *v) : NULL;
    if (!v)
        return NULL;
    for (size_t i = 0; i < c->n_s; i++)
        for (size_t j = 0; j < c->s[i].n; j++)
            v[k++] = axis ? c->s[i].y[j] : c->s[i].x[j];
    for (size_t i = 0; i < c->n_notes; i++)
        v[k++] = axis ? c->notes[i].y : c->notes[i].x;
    *n = k;
    return v;
}

/* s's domain: the axis's own when it gives a placeable one, else fitted to the values. */
static void fit_axis(const struct kevo_chart *c, int axis, struct kevo_svg_scale *s)
{
    const struct kevo_chart_axis *a = axis ? &c->y : &c->x;
    size_t n = 0;
    double *v;

    s->kind = a->kind;
    if (kevo_svg_placeable(a->kind, a->lo) && kevo_svg_placeable(a->kind, a->hi) &&
        a->lo < a->hi) {
        s->lo = a->lo;
        s->hi = a->hi;
        return;
    }
    v = axis_values(c, axis, &n);
    kevo_svg_scale_fit(s, v, n);
    kevo_free(v);
}

/* Is this series' entry the first of its name and colour (a legend row)? */
static int legend_first(const struct kevo_chart *c, size_t i)
{
    if (!c->s[i].name)
        return 0;
    for (size_t j = 0; j < i; j++)
        if (c->s[j].name && strcmp(c->s[j].name, c->s[i].name) == 0 &&
            strcmp(c->s[j].color, c->s[i].color) == 0)
            return 0;
    return 1;
}

static void layout(const struct kevo_chart *c, struct frame *f)
{
    size_t longest = 0;

    f->n_legend = 0;
    for (size_t i = 0; i < c->n_s; i++) {
        if (!legend_first(c, i))
            continue;
        size_t len = kevo_svg_text_len(c->s[i].name);
        longest = len > longest ? len : longest;
        f->n_legend++;
    }
    longest = longest > LEGEND_MAX ? LEGEND_MAX : longest;
    f->left = 64;
    f->top = 30;
    f->bottom = c->height - 42;
    f->right = c->width - 14 - (f->n_legend ? 30 + CHAR_W * (double)longest : 0);
    if (f->right < f->left + 80)
        f->right = f->left + 80;
    fit_axis(c, 0, &f->xs);
    fit_axis(c, 1, &f->ys);
    f->xs.r0 = f->left;
    f->xs.r1 = f->right;
    f->ys.r0 = f->bottom;
    f->ys.r1 = f->top;
}

/* ---- drawing ---- */

/* The label of v on axis a into out. */
static void tick_label(const struct kevo_chart_axis *a, double v, char *out, size_t n)
{
    if (a->fmt)
        a->fmt(v, out, n);
    else
        kevo_svg_fmt_num(v, out, n);
}

/* The x ticks whose labels do not touch: every k-th, k growing until none overlaps. */
static void x_axis(const struct kevo_chart *c, const struct frame *f, struct kevo_svg *w)
{
    double t[32];
    char lab[32][32];
    int n = kevo_svg_ticks(&f->xs, t, (int)((f->right - f->left) / 60) + 2), every = 1;

    n = n > 32 ? 32 : n;
    for (int i = 0; i < n; i++)
        tick_label(&c->x, t[i], lab[i], sizeof lab[i]);
    for (int ok = 0; !ok && every < n; ) {
        ok = 1;
        for (int i = every; i < n && ok; i += every) {
            double gap = kevo_svg_scale_map(&f->xs, t[i]) - kevo_svg_scale_map(&f->xs, t[i - every]);
            double need = CHAR_W * (kevo_svg_text_len(lab[i]) + kevo_svg_text_len(lab[i - every])) / 2 + 8;
            ok = gap >= need;
        }
        every += !ok;
    }
    for (int i = 0; i < n; i += every) {
        double px = kevo_svg_scale_map(&f->xs, t[i]);
        kevo_svg_line(w, px, f->top, px, f->bottom, "#e6e6e6", 1, NULL);
        kevo_svg_text(w, px, f->bottom + 15, "middle", 11, 0, 0, NULL, lab[i]);
    }
    kevo_svg_text(w, (f->left + f->right) / 2, c->height - 8, "middle", 12, 0, 0, NULL,
                  c->x.label);
}

static void y_axis(const struct kevo_chart *c, const struct frame *f, struct kevo_svg *w)
{
    double t[32];
    char lab[32];
    int n = kevo_svg_ticks(&f->ys, t, (int)((f->bottom - f->top) / 28) + 2);

    n = n > 32 ? 32 : n;
    for (int i = 0; i < n; i++) {
        double py = kevo_svg_scale_map(&f->ys, t[i]);
        tick_label(&c->y, t[i], lab, sizeof lab);
        kevo_svg_line(w, f->left, py, f->right, py, "#e6e6e6", 1, NULL);
        kevo_svg_text(w, f->left - 6, py + 4, "end", 11, 0, 0, NULL, lab);
    }
    kevo_svg_text(w, 14, (f->top + f->bottom) / 2, "middle", 12, 0, -90, NULL, c->y.label);
}

/* Series s mapped to pixels into px, py (s->n each); how many points are placeable. */
static size_t to_pixels(const struct frame *f, const struct series *s, double *px, double *py)
{
    size_t placed = 0;

    for (size_t i = 0; i < s->n; i++) {
        px[i] = kevo_svg_scale_map(&f->xs, s->x[i]);
        py[i] = kevo_svg_scale_map(&f->ys, s->y[i]);
        /* a point outside a domain the caller fixed is left out, not drawn on the frame */
        if (px[i] < f->left - 0.5 || px[i] > f->right + 0.5)
            px[i] = NAN;
        if (py[i] < f->top - 0.5 || py[i] > f->bottom + 0.5)
            py[i] = NAN;
        placed += isfinite(px[i]) && isfinite(py[i]);
    }
    return placed;
}

/* One series; how many of its points were placed. */
static size_t draw_series(const struct frame *f, const struct series *s, struct kevo_svg *w)
{
    double *px = kevo_reallocarray(NULL, s->n ? s->n : 1, sizeof *px);
    double *py = kevo_reallocarray(NULL, s->n ? s->n : 1, sizeof *py);
    size_t placed = 0;

    if (!px || !py) {
        w->st = w->st ? w->st : KEVO_ERR_NOMEM;
        goto out;
    }
    placed = to_pixels(f, s, px, py);
    if (s->style == KEVO_CHART_POINTS || s->style == KEVO_CHART_RING) {
        for (size_t i = 0; i < s->n; i++)
            kevo_svg_circle(w, px[i], py[i], s->style == KEVO_CHART_RING ? 7 : 3.5,
                            s->style == KEVO_CHART_RING ? NULL : s->color,
                            s->style == KEVO_CHART_RING ? s->color : "#fff",
                            s->tips ? s->tips[i] : NULL);
    } else {
        kevo_svg_path(w, px, py, s->n, s->style == KEVO_CHART_STEP, s->color,
                      s->style == KEVO_CHART_STEP ? 2 : 1.5,
                      s->style == KEVO_CHART_DASH ? "5,4" : NULL);
    }
out:
    kevo_free(px);
    kevo_free(py);
    return placed;
}

/* Where a note's text lies: [x0, x1] across, its baseline y. */
struct span {
    double x0, x1, y;
};

/* Does a note at s cover one of the n placed before it? */
static int covers(const struct span *placed, size_t n, const struct span *s)
{
    for (size_t j = 0; j < n; j++)
        if (fabs(placed[j].y - s->y) < NOTE_H && s->x0 < placed[j].x1 + 6 &&
            placed[j].x0 < s->x1 + 6)
            return 1;
    return 0;
}

/* The notes, each moved up (or, at the top of the frame, down) until it covers none of
 * the ones written before it. */
static void draw_notes(const struct kevo_chart *c, const struct frame *f, struct kevo_svg *w)
{
    struct span *sp = kevo_reallocarray(NULL, c->n_notes ? c->n_notes : 1, sizeof *sp);

    for (size_t i = 0; sp && i < c->n_notes; i++) {
        const struct note *nt = &c->notes[i];
        double px = kevo_svg_scale_map(&f->xs, nt->x) + (nt->anchor[0] == 'e' ? -4 : 4);
        double wd = CHAR_W * (double)kevo_svg_text_len(nt->text), y0;
        struct span s = { nt->anchor[0] == 'e' ? px - wd : px, nt->anchor[0] == 'e' ? px : px + wd,
                          kevo_svg_scale_map(&f->ys, nt->y) - 4 };

        s.y = s.y < f->top + 10 ? f->top + 10 : s.y;
        y0 = s.y;
        for (int k = 0; k < 20 && covers(sp, i, &s); k++)
            s.y -= NOTE_H;
        if (s.y < f->top + 10)
            for (s.y = y0; s.y < f->bottom && covers(sp, i, &s);)
                s.y += NOTE_H;
        sp[i] = s;
        kevo_svg_text(w, px, s.y, nt->anchor, 11, 0, 0, nt->color, nt->text);
    }
    kevo_free(sp);
}

static void draw_legend(const struct kevo_chart *c, const struct frame *f, struct kevo_svg *w)
{
    double x = f->right + 14, y = f->top + 6;

    for (size_t i = 0; i < c->n_s && y < c->height - 10; i++) {
        const struct series *s = &c->s[i];
        char cut[LEGEND_MAX * 4 + 8];

        if (!legend_first(c, i))
            continue;
        if (s->style == KEVO_CHART_POINTS || s->style == KEVO_CHART_RING)
            kevo_svg_circle(w, x + 6, y, s->style == KEVO_CHART_RING ? 5 : 4,
                            s->style == KEVO_CHART_RING ? NULL : s->color,
                            s->style == KEVO_CHART_RING ? s->color : "#fff", NULL);
        else
            kevo_svg_line(w, x, y, x + 12, y, s->color, 2,
                          s->style == KEVO_CHART_DASH ? "4,3" : NULL);
        if (kevo_svg_text_len(s->name) > LEGEND_MAX) {
            size_t k = 0, chars = 0;
            while (s->name[k] && chars < LEGEND_MAX - 1)   /* whole UTF-8 characters */
                chars += ((unsigned char)s->name[++k] & 0xc0) != 0x80;
            snprintf(cut, sizeof cut, "%.*s\xe2\x80\xa6", (int)k, s->name);
        }
        kevo_svg_text(w, x + 18, y + 4, "start", 11, 0, 0, NULL,
                      kevo_svg_text_len(s->name) > LEGEND_MAX ? cut : s->name);
        y += 16;
    }
}

void kevo_chart_render(const struct kevo_chart *c, struct kevo_svg *w)
{
    struct frame f;
    size_t placed = 0;

    layout(c, &f);
    kevo_svg_open(w, c->width, c->height, c->title);
    kevo_svg_rect(w, 0, 0, c->width, c->height, "#fff", NULL);
    kevo_svg_text(w, f.left, 18, "start", 13, 1, 0, NULL, c->title);
    x_axis(c, &f, w);
    y_axis(c, &f, w);
    kevo_svg_rect(w, f.left, f.top, f.right - f.left, f.bottom - f.top, NULL, "#999");
    for (size_t i = 0; i < c->n_s; i++)
        placed += draw_series(&f, &c->s[i], w);
    draw_notes(c, &f, w);
    if (!placed)
        kevo_svg_text(w, (f.left + f.right) / 2, (f.top + f.bottom) / 2, "middle", 13, 0, 0,
                      "#888", "no data");
    draw_legend(c, &f, w);
    kevo_svg_close(w);
}

/* ---- bars ---- */

/* The largest finite positive value of b (the full bar), at least the caller's max. */
static double bars_max(const struct kevo_chart_bars *b)
{
    double m = b->max > 0 ? b->max : 0;

    for (int i = 0; b->max <= 0 && i < b->n_cats * b->n_series; i++)
        if (isfinite(b->values[i]) && b->values[i] > m)
            m = b->values[i];
    return m > 0 ? m : 1;
}

/* The colour of category i's bar of series k. */
static const char *bar_color(const struct kevo_chart_bars *b, int i, int k)
{
    if (b->cat_colors)
        return b->cat_colors[i];
    return b->colors ? b->colors[k] : kevo_svg_color(k);
}

/* The legend of the series over the bars, in one row. */
static void bars_legend(struct kevo_svg *w, const struct kevo_chart_bars *b, double x, double y)
{
    for (int k = 0; b->series && k < b->n_series; k++) {
        const char *col = b->colors ? b->colors[k] : kevo_svg_color(k);
        kevo_svg_rect(w, x, y - 9, 10, 10, col, NULL);
        kevo_svg_text(w, x + 14, y, "start", 11, 0, 0, NULL, b->series[k]);
        x += 30 + CHAR_W * (double)kevo_svg_text_len(b->series[k]);
    }
}

void kevo_chart_bars(struct kevo_svg *w, const struct kevo_chart_bars *b)
{
    size_t longest = 4;
    int ns = b->n_series > 0 ? b->n_series : 1, row = 8 + BAR_STEP * ns;
    int top = b->series ? 46 : 30;
    int height = top + row * (b->n_cats > 0 ? b->n_cats : 1) + 10;
    double max = bars_max(b), label_w, full;
    char v[32];

    for (int i = 0; i < b->n_cats; i++) {
        size_t len = kevo_svg_text_len(b->cats[i]);
        longest = len > longest ? len : longest;
    }
    label_w = 12 + CHAR_W * (double)(longest > 40 ? 40 : longest);
    full = b->width - label_w - 70;
    kevo_svg_open(w, b->width, height, b->title);
    kevo_svg_rect(w, 0, 0, b->width, height, "#fff", NULL);
    kevo_svg_text(w, 8, 18, "start", 13, 1, 0, NULL, b->title);
    bars_legend(w, b, label_w, 36);
    if (b->n_cats <= 0)
        kevo_svg_text(w, b->width / 2.0, top + 12, "middle", 13, 0, 0, "#888", "no data");
    for (int i = 0; i < b->n_cats; i++) {
        double y = top + row * i;
        kevo_svg_text(w, label_w - 8, y + row / 2.0 + 3, "end", 11, 0, 0, NULL, b->cats[i]);
        for (int k = 0; k < ns; k++) {
            double val = b->values[i * ns + k], len;
            if (!isfinite(val) || val <= 0)
                continue;
            len = full * (val > max ? 1.0 : val / max);
            kevo_svg_rect(w, label_w, y + 4 + BAR_STEP * k, len < 1 ? 1 : len, BAR_STEP - 2,
                          bar_color(b, i, k), NULL);
            if (b->fmt)
                b->fmt(val, v, sizeof v);
            else
                kevo_svg_fmt_num(val, v, sizeof v);
            kevo_svg_text(w, label_w + (len < 1 ? 1 : len) + 4, y + 3 + BAR_STEP * (k + 1), "start",
                          10, 0, 0, NULL, v);
        }
    }
    kevo_svg_close(w);
}

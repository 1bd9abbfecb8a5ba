/*
 * svg - the tiny SVG writer of kevo's reports (svg.h): a text with a sticky status, the
 * escaping of untrusted text, scales with nice ticks, labels for numbers, and shapes.
 * Coordinates are written with one decimal: a tenth of a pixel is finer than any screen
 * draws, and it keeps a page with thousands of points small.
 */
#include "base/svg.h"

#include "base/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the text being written ---- */

void kevo_svg_init(struct kevo_svg *w, size_t max)
{
    kevo_buf_init(&w->b, max);
    w->st = KEVO_OK;
}

void kevo_svg_free(struct kevo_svg *w)
{
    if (w)
        kevo_buf_free(&w->b);
}

/* Append n bytes unless an earlier append failed. */
static void put(struct kevo_svg *w, const char *s, size_t n)
{
    if (w->st == KEVO_OK)
        w->st = kevo_buf_add(&w->b, s, n);
}

void kevo_svg_add(struct kevo_svg *w, const char *markup)
{
    if (markup)
        put(w, markup, strlen(markup));
}

void kevo_svg_addf(struct kevo_svg *w, const char *fmt, ...)
{
    va_list ap;

    if (w->st != KEVO_OK)
        return;
    va_start(ap, fmt);
    w->st = kevo_buf_vaddf(&w->b, fmt, ap);
    va_end(ap);
}

/* The length of the UTF-8 sequence starting at s (at most n bytes), or 0 when it is not
 * one: a lead byte, its continuation bytes, no overlong or surrogate forms. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t k = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;

    if (s[0] < 0x80)
        return 1;
    if (!k || k > n || s[0] >= 0xf5)
        return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return k;
}

/* The entity for byte c, or NULL when it is written as it is. */
static const char *entity(unsigned char c)
{
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&#39;";
    default: return NULL;
    }
}

void kevo_svg_escn(struct kevo_svg *w, const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, run = 0;   /* s[i - run .. i) is waiting to be written as it is */

    while (text && i < n && s[i] && w->st == KEVO_OK) {
        const char *e = entity(s[i]);
        size_t k = utf8_len(s + i, n - i);
        int control = s[i] < 0x20 && s[i] != '\n' && s[i] != '\t';

        if (!e && k && !control && s[i] != 0x7f) {
            i += k;
            run += k;
            continue;
        }
        put(w, (const char *)s + i - run, run);
        run = 0;
        if (e)
            kevo_svg_add(w, e);
        else if (!k)
            kevo_svg_add(w, "\xef\xbf\xbd");   /* U+FFFD for a byte that is not UTF-8 */
        i++;                                   /* a control character is dropped */
    }
    put(w, (const char *)s + i - run, run);
}

void kevo_svg_esc(struct kevo_svg *w, const char *text)
{
    if (text)
        kevo_svg_escn(w, text, strlen(text));
}

enum kevo_status kevo_svg_take(struct kevo_svg *w, char **out)
{
    enum kevo_status st = w->st;

    *out = NULL;
    if (st == KEVO_OK) {
        *out = kevo_buf_take(&w->b);
        st = *out ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    kevo_buf_free(&w->b);
    w->st = KEVO_OK;
    return st;
}

/* ---- scales ---- */

int kevo_svg_placeable(enum kevo_svg_kind kind, double v)
{
    return isfinite(v) && (kind != KEVO_SVG_LOG || v > 0.0);
}

/* [lo, hi] around a single value v. */
static void widen(struct kevo_svg_scale *s, double v)
{
    if (s->kind == KEVO_SVG_LOG) {
        s->lo = v / 3.0;
        s->hi = v * 3.0;
    } else if (v == 0.0) {
        s->lo = 0.0;
        s->hi = 1.0;
    } else {
        s->lo = v - fabs(v) * 0.5;
        s->hi = v + fabs(v) * 0.5;
    }
}

void kevo_svg_scale_fit(struct kevo_svg_scale *s, const double *v, size_t n)
{
    double lo = INFINITY, hi = -INFINITY;

    for (size_t i = 0; i < n; i++) {
        if (!kevo_svg_placeable(s->kind, v[i]))
            continue;
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    if (!(lo <= hi)) {
        s->lo = s->kind == KEVO_SVG_LOG ? 1.0 : 0.0;
        s->hi = s->kind == KEVO_SVG_LOG ? 10.0 : 1.0;
    } else if (lo == hi || (s->kind == KEVO_SVG_LINEAR && hi - lo < fabs(hi) * 1e-12)) {
        widen(s, lo);
    } else {
        s->lo = s->kind == KEVO_SVG_LOG ? lo / 1.25 : lo;
        s->hi = s->kind == KEVO_SVG_LOG ? hi * 1.25 : hi;
    }
    kevo_svg_scale_nice(s);
}

/* A nice step (1, 2 or 5 times a power of ten) for about `want` steps over span. */
static double nice_step(double span, int want)
{
    double raw = span / (want > 0 ? want : 1), mag, norm;

    if (!(raw > 0.0) || !isfinite(raw))
        return 0.0;
    mag = pow(10.0, floor(log10(raw)));
    norm = raw / mag;
    return (norm <= 1.0 ? 1.0 : norm <= 2.0 ? 2.0 : norm <= 5.0 ? 5.0 : 10.0) * mag;
}

/* The nearest of 1, 2 and 5 times a power of ten at or below v (up: at or above). */
static double log_nice(double v, int up)
{
    static const double m[] = { 1.0, 2.0, 5.0, 10.0 };
    double d = pow(10.0, floor(log10(v) + 1e-9));

    if (up) {
        for (int i = 0; i < 4; i++)
            if (m[i] * d >= v * (1 - 1e-9))
                return m[i] * d;
        return 10.0 * d;
    }
    for (int i = 2; i >= 0; i--)
        if (m[i] * d <= v * (1 + 1e-9))
            return m[i] * d;
    return d;
}

void kevo_svg_scale_nice(struct kevo_svg_scale *s)
{
    if (!kevo_svg_placeable(s->kind, s->lo) || !kevo_svg_placeable(s->kind, s->hi) ||
        !(s->lo < s->hi)) {
        double v = kevo_svg_placeable(s->kind, s->lo) ? s->lo
                   : s->kind == KEVO_SVG_LOG ? 1.0 : 0.0;
        widen(s, v);
    }
    if (s->kind == KEVO_SVG_LOG) {
        s->lo = log_nice(s->lo, 0);
        s->hi = log_nice(s->hi, 1);
        if (!(s->lo < s->hi))
            s->hi = s->lo * 10.0;
        return;
    }
    double step = nice_step(s->hi - s->lo, 5);
    if (step > 0.0) {
        s->lo = floor(s->lo / step + 1e-9) * step;
        s->hi = ceil(s->hi / step - 1e-9) * step;
    }
}

double kevo_svg_scale_map(const struct kevo_svg_scale *s, double v)
{
    double t;

    if (!kevo_svg_placeable(s->kind, v))
        return NAN;
    if (s->kind == KEVO_SVG_LOG)
        t = (log10(v) - log10(s->lo)) / (log10(s->hi) - log10(s->lo));
    else
        t = (v - s->lo) / (s->hi - s->lo);
    if (!isfinite(t))
        t = 0.5;   /* an empty domain: the middle */
    return s->r0 + t * (s->r1 - s->r0);
}

/* Log ticks: decades, every k-th when there are many; 2 and 5 between when they fit, else
 * 3 between when that fits. */
static int log_ticks(const struct kevo_svg_scale *s, double *out, int max)
{
    int d0 = (int)floor(log10(s->lo) + 1e-9), d1 = (int)ceil(log10(s->hi) - 1e-9), n = 0;
    int every = 1, decades = d1 - d0;
    static const double subs[2][3] = { { 1.0, 2.0, 5.0 }, { 1.0, 3.0, 0.0 } };
    int fine = decades <= 3 && max >= 3 * decades + 1;
    int n_sub = fine ? 3 : decades <= 3 && max >= 2 * decades + 1 ? 2 : 1;
    const double *sub = subs[!fine];

    while (decades / every + 1 > max && every < 1000)
        every++;
    for (int d = d0; d <= d1 && n < max; d++) {
        if ((d - d0) % every)
            continue;
        for (int k = 0; k < n_sub && n < max; k++) {
            double v = sub[k] * pow(10.0, d);
            if (v >= s->lo * (1 - 1e-9) && v <= s->hi * (1 + 1e-9))
                out[n++] = v;
        }
    }
    return n;
}

int kevo_svg_ticks(const struct kevo_svg_scale *s, double *out, int max)
{
    int n = 0;

    if (max <= 0 || !kevo_svg_placeable(s->kind, s->lo) ||
        !kevo_svg_placeable(s->kind, s->hi) || !(s->lo < s->hi))
        return 0;
    if (s->kind == KEVO_SVG_LOG)
        return log_ticks(s, out, max);
    double step = nice_step(s->hi - s->lo, max > 1 ? max - 1 : 1);
    while (step > 0.0 && (s->hi - s->lo) / step + 1 > max + 1e-9)
        step = nice_step(s->hi - s->lo, (int)((s->hi - s->lo) / step) - 1);
    if (!(step > 0.0)) {
        out[0] = s->lo;
        return 1;
    }
    for (double k = ceil(s->lo / step - 1e-9); n < max; k++) {
        double v = k * step;
        if (v > s->hi + step * 1e-9)
            break;
        out[n++] = fabs(v) < step * 1e-9 ? 0.0 : v;   /* no "-0" or 1e-17 */
    }
    return n;
}

/* ---- numbers as labels ---- */

/* v (|v| in [1, 1000)) with at most three significant digits and no trailing zeros. */
static void mantissa(double v, const char *suffix, char *out, size_t n)
{
    char s[32];
    size_t len;

    snprintf(s, sizeof s, "%.*f", fabs(v) >= 100 ? 0 : fabs(v) >= 10 ? 1 : 2, v);
    if (strchr(s, '.')) {
        len = strlen(s);
        while (len && s[len - 1] == '0')
            s[--len] = '\0';
        if (len && s[len - 1] == '.')
            s[--len] = '\0';
    }
    snprintf(out, n, "%s%s", s, suffix);
}

void kevo_svg_fmt_num(double v, char *out, size_t n)
{
    static const char *const up[] = { "", "k", "M", "G", "T", "P", "E" };
    static const char *const down[] = { "", "m", "\xc2\xb5", "n", "p" };
    int k = 0;
    double a = fabs(v);

    if (!isfinite(v)) {
        snprintf(out, n, "-");
        return;
    }
    if (a == 0.0 || (a >= 1.0 && a < 999.5)) {
        mantissa(v, "", out, n);
        return;
    }
    if (a >= 999.5) {
        while (a >= 999.5 && k < 6) {
            a /= 1000.0;
            v /= 1000.0;
            k++;
        }
        mantissa(v, up[k], out, n);
        return;
    }
    while (a < 1.0 && k < 4) {
        a *= 1000.0;
        v *= 1000.0;
        k++;
    }
    if (a < 1.0)
        snprintf(out, n, "%.2g", v / 1e12);   /* below pico: plain notation */
    else
        mantissa(v, down[k], out, n);
}

void kevo_svg_fmt_unit(double v, const char *unit, char *out, size_t n)
{
    char m[32];
    size_t digits;

    if (!isfinite(v)) {
        snprintf(out, n, "-");
        return;
    }
    kevo_svg_fmt_num(v, m, sizeof m);
    /* "50µ" -> "50 µs": the prefix goes with the unit; below pico there is none */
    digits = strspn(m, "-0123456789.");
    if (fabs(v) > 0 && fabs(v) < 1e-12)
        snprintf(out, n, "%s %s", m, unit);
    else
        snprintf(out, n, "%.*s %s%s", (int)digits, m, m + digits, unit);
}

void kevo_svg_fmt_time(double s, char *out, size_t n)
{
    char m[32];

    if (!isfinite(s) || s < 0) {
        snprintf(out, n, "-");
    } else if (s >= 120) {
        mantissa(s / 60.0 >= 999.5 ? 999 : s / 60.0, "", m, sizeof m);
        snprintf(out, n, "%s min", m);
    } else {
        kevo_svg_fmt_unit(s, "s", out, n);
    }
}

void kevo_svg_fmt_pct(double v, char *out, size_t n)
{
    double p = v * 100.0;

    if (!isfinite(v))
        snprintf(out, n, "-");
    else if (p == 0 || fabs(p) >= 10)
        snprintf(out, n, "%.0f%%", p);
    else if (fabs(p) >= 1)
        snprintf(out, n, "%.1f%%", p);
    else
        snprintf(out, n, "%.2g%%", p);
}

size_t kevo_svg_text_len(const char *s)
{
    size_t n = 0;

    for (; s && *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* ---- shapes ---- */

const char *kevo_svg_color(int i)
{
    /* Tableau 10: distinct on screen and in print, readable on white */
    static const char *const p[] = { "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                     "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac" };
    int n = (int)(sizeof p / sizeof p[0]);

    return p[((i % n) + n) % n];
}

void kevo_svg_open(struct kevo_svg *w, int width, int height, const char *title)
{
    kevo_svg_addf(w, "<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\""
                  " font-family=\"Helvetica, Arial, sans-serif\" aria-label=\"",
                  width, height, width, height);
    kevo_svg_esc(w, title);
    kevo_svg_add(w, "\"><title>");
    kevo_svg_esc(w, title);
    kevo_svg_add(w, "</title>\n");
}

void kevo_svg_close(struct kevo_svg *w)
{
    kevo_svg_add(w, "</svg>\n");
}

/* Is every one of the n coordinates a finite number? */
static int finite_all(const double *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

void kevo_svg_line(struct kevo_svg *w, double x1, double y1, double x2, double y2,
                   const char *color, double width, const char *dash)
{
    double v[4] = { x1, y1, x2, y2 };

    if (!finite_all(v, 4))
        return;
    kevo_svg_addf(w, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\""
                  " stroke-width=\"%.1f\"", x1, y1, x2, y2, color, width);
    if (dash)
        kevo_svg_addf(w, " stroke-dasharray=\"%s\"", dash);
    kevo_svg_add(w, "/>\n");
}

void kevo_svg_rect(struct kevo_svg *w, double x, double y, double wd, double ht,
                   const char *fill, const char *stroke)
{
    double v[4] = { x, y, wd, ht };

    if (!finite_all(v, 4) || wd < 0 || ht < 0)
        return;
    kevo_svg_addf(w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\""
                  " fill=\"%s\" stroke=\"%s\"/>\n", x, y, wd, ht, fill ? fill : "none",
                  stroke ? stroke : "none");
}

void kevo_svg_circle(struct kevo_svg *w, double x, double y, double r, const char *fill,
                     const char *stroke, const char *tip)
{
    double v[3] = { x, y, r };

    if (!finite_all(v, 3))
        return;
    kevo_svg_addf(w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"", x, y, r,
                  fill ? fill : "none");
    if (fill)
        kevo_svg_add(w, " fill-opacity=\"0.85\"");
    kevo_svg_addf(w, " stroke=\"%s\" stroke-width=\"%s\"", stroke ? stroke : "none",
                  fill ? "0.6" : "2");
    if (!tip) {
        kevo_svg_add(w, "/>\n");
        return;
    }
    kevo_svg_add(w, "><title>");
    kevo_svg_esc(w, tip);
    kevo_svg_add(w, "</title></circle>\n");
}

void kevo_svg_text(struct kevo_svg *w, double x, double y, const char *anchor, int size,
                   int bold, double rotate, const char *fill, const char *text)
{
    if (!isfinite(x) || !isfinite(y))
        return;
    kevo_svg_addf(w, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" fill=\"%s\"", x, y, size,
                  fill ? fill : "#333");
    if (anchor && strcmp(anchor, "start") != 0)
        kevo_svg_addf(w, " text-anchor=\"%s\"", anchor);
    if (bold)
        kevo_svg_add(w, " font-weight=\"bold\"");
    if (rotate != 0 && isfinite(rotate))
        kevo_svg_addf(w, " transform=\"rotate(%.0f %.1f %.1f)\"", rotate, x, y);
    kevo_svg_add(w, ">");
    kevo_svg_esc(w, text);
    kevo_svg_add(w, "</text>\n");
}

void kevo_svg_path(struct kevo_svg *w, const double *x, const double *y, size_t n, int step,
                   const char *color, double width, const char *dash)
{
    int open = 0, pen = 0;   /* the <path> element written; a segment being drawn */

    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            pen = 0;
            continue;
        }
        if (!open)
            kevo_svg_add(w, "<path d=\"");
        open = 1;
        if (pen && step)
            kevo_svg_addf(w, "H%.1fV%.1f", x[i], y[i]);
        else
            kevo_svg_addf(w, "%s%.1f %.1f", pen ? "L" : "M", x[i], y[i]);
        pen = 1;
    }
    if (!open)
        return;
    kevo_svg_addf(w, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\""
                  " stroke-linejoin=\"round\"", color, width);
    if (dash)
        kevo_svg_addf(w, " stroke-dasharray=\"%s\"", dash);
    kevo_svg_add(w, "/>\n");
}

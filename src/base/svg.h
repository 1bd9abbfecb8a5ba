/*
 * svg - a tiny writer of SVG (and the HTML around it) for kevo's reports: a text being
 * written with a sticky status, escaping of untrusted text, linear and log scales with nice
 * ticks, number formatting for tick labels, and the few shapes a plot needs.
 *
 * Escaping: everything that comes from a task, a candidate, a model or a file goes through
 * kevo_svg_esc, which makes it safe as element text and as a quoted attribute value (& < >
 * " ' escaped, control characters dropped, bytes that are not UTF-8 replaced by U+FFFD).
 * kevo_svg_add and kevo_svg_addf write markup as given: only for kevo's own text.
 *
 * Degenerate data never fails: a scale fitted to no finite value, to one value, to zeros
 * or (log) to no positive value still spans a range; non-finite (and, on a log scale,
 * non-positive) values map to NAN, which the shapes skip.
 *
 * Pure functions over caller-owned memory; thread-safe.
 */
#ifndef KEVO_SVG_H
#define KEVO_SVG_H

#include "kevo.h"
#include "base/buf.h"
#include <stddef.h>

/* ---- the text being written ---- */

/* Embed by value. Appends after the first failure do nothing; st keeps that failure. */
struct kevo_svg {
    struct kevo_buf b;
    enum kevo_status st;
};

void kevo_svg_init(struct kevo_svg *w, size_t max);     /* max: the text's hard cap */
void kevo_svg_free(struct kevo_svg *w);                 /* NULL: no-op */
void kevo_svg_add(struct kevo_svg *w, const char *markup);
void kevo_svg_addf(struct kevo_svg *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));               /* markup; %s only of kevo's text */
/* Untrusted text, escaped (NULL writes nothing); kevo_svg_escn stops after n bytes. */
void kevo_svg_esc(struct kevo_svg *w, const char *text);
void kevo_svg_escn(struct kevo_svg *w, const char *text, size_t n);
/* The text (kevo_free it) and KEVO_OK, or NULL and the first failure; w is emptied. */
KEVO_NODISCARD enum kevo_status kevo_svg_take(struct kevo_svg *w, char **out);

/* ---- scales ---- */

enum kevo_svg_kind { KEVO_SVG_LINEAR = 0, KEVO_SVG_LOG };

/* Data domain [lo, hi] onto pixels [r0, r1] (r1 < r0 for a y axis growing upwards). */
struct kevo_svg_scale {
    enum kevo_svg_kind kind;
    double lo, hi;
    double r0, r1;
};

/* Is v a value the scale can place (finite; positive on a log scale)? */
int kevo_svg_placeable(enum kevo_svg_kind kind, double v);
/* Fit s's domain to the placeable values of v[0..n), widened when it is a single value
 * (or empty: [0, 1], log [1, 10]), with a margin on a log scale (a point is never on the
 * frame), then extended to nice tick values. Pixels untouched. */
void kevo_svg_scale_fit(struct kevo_svg_scale *s, const double *v, size_t n);
/* Extend [lo, hi] to nice values: whole steps of 1, 2 or 5 times a power of ten (a log
 * scale: 1, 2 or 5 times a power of ten). An empty or unplaceable domain is widened first. */
void kevo_svg_scale_nice(struct kevo_svg_scale *s);
/* The pixel of v, or NAN when v is not placeable. */
double kevo_svg_scale_map(const struct kevo_svg_scale *s, double v);
/* At most max tick values inside the domain, ascending, into out; how many. Linear: 1, 2
 * or 5 times a power of ten; log: decades (with 2 and 5 between, or 3, when the domain
 * spans at most three decades and they fit; every k-th decade when it spans many). */
int kevo_svg_ticks(const struct kevo_svg_scale *s, double *out, int max);

/* ---- numbers as labels ---- */

/* "0", "0.25", "120", "1.5k", "2M", "3.1T", "50m", "2.5µ": three significant digits at
 * most, an SI prefix from p to E; "-" for a value that is not finite. */
void kevo_svg_fmt_num(double v, char *out, size_t n);
/* v with a unit: (2.6e12, "B/s") -> "2.6 TB/s", (5e-5, "s") -> "50 µs"; "-" when v is not
 * finite. */
void kevo_svg_fmt_unit(double v, const char *unit, char *out, size_t n);
/* Seconds as "50 µs", "1.25 ms", "3 s", "2.5 min"; "-" when not finite or negative. */
void kevo_svg_fmt_time(double s, char *out, size_t n);
/* A fraction as a percentage: 0.253 -> "25%", 0.0042 -> "0.42%"; "-" when not finite. */
void kevo_svg_fmt_pct(double v, char *out, size_t n);
/* The number of characters of a UTF-8 text (for estimating its width on a page). */
size_t kevo_svg_text_len(const char *s);

/* ---- shapes (pixel coordinates; colours and classes are kevo's own text) ---- */

/* The i-th colour of a ten-colour palette for categories ("#4e79a7", ...), cycling. */
const char *kevo_svg_color(int i);
/* <svg viewBox="0 0 w h" ...> with an escaped <title>; kevo_svg_close ends it. */
void kevo_svg_open(struct kevo_svg *w, int width, int height, const char *title);
void kevo_svg_close(struct kevo_svg *w);
void kevo_svg_line(struct kevo_svg *w, double x1, double y1, double x2, double y2,
                   const char *color, double width, const char *dash);   /* dash: NULL */
void kevo_svg_rect(struct kevo_svg *w, double x, double y, double wd, double ht,
                   const char *fill, const char *stroke);                /* either NULL */
/* A circle with an (optional, escaped) tooltip; fill NULL draws a ring. */
void kevo_svg_circle(struct kevo_svg *w, double x, double y, double r, const char *fill,
                     const char *stroke, const char *tip);
/* Escaped text at (x, y): anchor "start", "middle" or "end"; size in pixels; bold 0/1;
 * rotate in degrees about (x, y) (0: none); fill NULL: dark grey. */
void kevo_svg_text(struct kevo_svg *w, double x, double y, const char *anchor, int size,
                   int bold, double rotate, const char *fill, const char *text);
/* A polyline through n points; a point that is NAN in x or y breaks it (no segment to or
 * from it). step 1: horizontal then vertical between points (a value held until the next). */
void kevo_svg_path(struct kevo_svg *w, const double *x, const double *y, size_t n, int step,
                   const char *color, double width, const char *dash);

#endif

/*
 * chart - the two plots kevo's reports draw with the svg writer (svg.h): an x/y chart
 * (points, rings, lines, steps, dashed lines and text notes, on linear or log axes, with a
 * grid, tick labels, axis labels and a legend) and grouped horizontal bars.
 *
 * A chart copies what it is given, fits its axes to the placeable values of every series
 * (unless the caller fixed them) and draws only at kevo_chart_render, so degenerate data
 * (one point, zeros, NaN, infinities, nothing at all) still gives a readable image: points
 * that cannot be placed are left out, and a chart without any says "no data".
 * Names, tooltips, labels and notes are escaped (they may come from a task or a model);
 * colours are kevo's own text. A chart is used by one thread at a time.
 */
#ifndef KEVO_CHART_H
#define KEVO_CHART_H

#include "kevo.h"
#include "base/svg.h"
#include <stddef.h>

struct kevo_chart;   /* opaque */

/* Writes a tick or value label for v into out (n bytes). */
typedef void (*kevo_chart_fmt_fn)(double v, char *out, size_t n);

struct kevo_chart_axis {
    enum kevo_svg_kind kind;
    const char *label;           /* under the x axis, beside the y axis */
    kevo_chart_fmt_fn fmt;       /* tick labels; NULL: kevo_svg_fmt_num */
    double lo, hi;               /* the domain; NAN (either): fitted to the data */
};

enum kevo_chart_style {
    KEVO_CHART_POINTS = 0,       /* filled dots */
    KEVO_CHART_RING,             /* large hollow circles: marks chosen points */
    KEVO_CHART_LINE,             /* a polyline */
    KEVO_CHART_STEP,             /* a value held until the next point (a best so far) */
    KEVO_CHART_DASH              /* a dashed polyline */
};

/* A chart of width x height pixels; x and y are copied (their label too). */
KEVO_NODISCARD enum kevo_status kevo_chart_new(int width, int height, const char *title,
                                               const struct kevo_chart_axis *x,
                                               const struct kevo_chart_axis *y,
                                               struct kevo_chart **out);
void kevo_chart_free(struct kevo_chart *c);   /* NULL: no-op */
/* A series of n points, copied. name NULL: not in the legend (a series with the name and
 * colour of an earlier one shares its entry); tips NULL or n tooltips (NULL entries: none). */
KEVO_NODISCARD enum kevo_status kevo_chart_add(struct kevo_chart *c, const char *name,
                                               const char *color,
                                               enum kevo_chart_style style, const double *x,
                                               const double *y, size_t n,
                                               const char *const *tips);
/* A text at data point (x, y), anchored "start" or "end"; moved up when it would cover an
 * earlier note. Its point counts when the axes are fitted. */
KEVO_NODISCARD enum kevo_status kevo_chart_note(struct kevo_chart *c, double x, double y,
                                                const char *anchor, const char *color,
                                                const char *text);
/* The chart as one <svg> element into w. */
void kevo_chart_render(const struct kevo_chart *c, struct kevo_svg *w);

/* Grouped horizontal bars: one row per category, one bar per series. */
struct kevo_chart_bars {
    const char *title;
    int width;                   /* pixels; the height follows from the rows */
    int n_cats, n_series;
    const char *const *cats;     /* n_cats labels */
    const char *const *series;   /* n_series names for the legend; NULL: no legend */
    const char *const *colors;   /* n_series colours; NULL: the palette (kevo_svg_color) */
    const double *values;        /* n_cats x n_series, a category's values together;
                                    a value that is not finite or not positive: no bar */
    kevo_chart_fmt_fn fmt;       /* the label at a bar's end; NULL: kevo_svg_fmt_num */
    double max;                  /* the value of a full bar; 0 or less: the largest value */
    const char *const *cat_colors;   /* (optional) n_cats colours, one per category: they
                                        replace the series' colours */
};
void kevo_chart_bars(struct kevo_svg *w, const struct kevo_chart_bars *b);

#endif

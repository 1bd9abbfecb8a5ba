/*
 * report_plots - the plotted sections of `kevo report` (report_int.h): the search's
 * progress, the device's roofline with every correct candidate on it, the operators and
 * models with their LLM calls, tokens and cost over time, and the verdicts with the
 * failed candidates' messages. Each section says in words what is missing when the run
 * gives it nothing to draw (no correct candidate, no calibration, no LLM call).
 */
#include "ctl/report_int.h"

#include "base/chart.h"
#include "base/mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define PANEL_W 468          /* two progress panels side by side fill the page */
#define PANEL_H 270
#define WIDE_W 940
#define MSG_MAX 600          /* bytes of a failed candidate's message shown */
#define ROOF_SAMPLES 96      /* points along a roof (a log x axis: the bend stays sharp) */
#define TIPS_MAX 3000        /* dots with a tooltip; past it a page of a long run stays small */
#define FAILED_MAX 500       /* failed candidates listed */

/* A chart's failure into the page's sticky status. */
static void keep(struct kevo_svg *w, enum kevo_status st)
{
    if (st && !w->st)
        w->st = st;
}

/* Draw c into w and free it (NULL: out of memory, kept in w). */
static void render(struct kevo_svg *w, struct kevo_chart *c)
{
    if (!c) {
        keep(w, KEVO_ERR_NOMEM);
        return;
    }
    kevo_chart_render(c, w);
    kevo_chart_free(c);
}

static int is_ok(const struct rep_cand *c)
{
    return strcmp(c->verdict, "ok") == 0;
}

/* ---- progress ---- */

enum { BY_EVAL = 0, BY_WALL };
enum { OF_TIME = 0, OF_SOL };

/* The unit of the wall-time axes: seconds, minutes or hours, for ticks that are round in
 * the unit shown (20 min, not 1200 s), from the last verdict or call of the run. */
struct wall {
    double div;
    const char *label;
    kevo_chart_fmt_fn fmt;
};

static struct wall wall_unit(const struct rep *r)
{
    if (r->wall_div == 3600)
        return (struct wall){ 3600, "wall time since the run started (hours)", rep_fmt_plain };
    if (r->wall_div == 60)
        return (struct wall){ 60, "wall time since the run started (minutes)", rep_fmt_plain };
    return (struct wall){ 1, "wall time since the run started", kevo_svg_fmt_time };
}

static double x_of(const struct rep *r, const struct rep_cand *c, int xm)
{
    return xm == BY_EVAL ? (c->n_eval ? c->n_eval : NAN) : c->t / wall_unit(r).div;
}

static double y_of(const struct rep_cand *c, int ym)
{
    return ym == OF_TIME ? c->score : c->sol;
}

/* The tooltip of an ok candidate: "cand 13 (flags): 203 µs, 65% of SOL, 22.5x". */
static char *tip(const struct rep_cand *c)
{
    char t[32], s[32], x[32];

    kevo_svg_fmt_time(c->score, t, sizeof t);
    kevo_svg_fmt_pct(c->sol, s, sizeof s);
    rep_fmt_x(c->speedup, x, sizeof x);
    return c->model ? kevo_strdupf("cand %lld (%s, %s): %s, %s of SOL, %s", (long long)c->id,
                                   c->op, c->model, t, s, x)
                    : kevo_strdupf("cand %lld (%s): %s, %s of SOL, %s", (long long)c->id, c->op,
                                   t, s, x);
}

/* The ok candidates of colour key k as one series of dots. */
static enum kevo_status key_series(struct kevo_chart *ch, const struct rep *r, int k, int xm,
                                   int ym)
{
    double *x = kevo_calloc((size_t)r->n + 1, sizeof *x), *y = kevo_calloc((size_t)r->n + 1, sizeof *y);
    char **tips = kevo_calloc((size_t)r->n + 1, sizeof *tips);
    size_t n = 0;
    enum kevo_status st = x && y && tips ? KEVO_OK : KEVO_ERR_NOMEM;

    for (int i = 0; !st && i < r->n; i++) {
        if (r->c[i].key != k || !is_ok(&r->c[i]))
            continue;
        x[n] = x_of(r, &r->c[i], xm);
        y[n] = y_of(&r->c[i], ym);
        if (r->n <= TIPS_MAX && !(tips[n] = tip(&r->c[i])))
            st = KEVO_ERR_NOMEM;
        n++;
    }
    if (!st && n)
        st = kevo_chart_add(ch, NULL, kevo_svg_color(k), KEVO_CHART_POINTS, x, y, n,
                            (const char *const *)tips);
    for (size_t i = 0; tips && i < n; i++)
        kevo_free(tips[i]);
    kevo_free(tips);
    kevo_free(x);
    kevo_free(y);
    return st;
}

/* The best so far, in the order of the verdicts, held until the last one. */
static enum kevo_status best_series(struct kevo_chart *ch, const struct rep *r, int xm, int ym)
{
    double *x = kevo_calloc((size_t)r->n + 2, sizeof *x), *y = kevo_calloc((size_t)r->n + 2, sizeof *y);
    double best = NAN, last_x = NAN;
    size_t n = 0;
    enum kevo_status st = x && y ? KEVO_OK : KEVO_ERR_NOMEM;

    for (int e = 0; !st && e < r->n_done; e++) {
        const struct rep_cand *c = r->by_eval[e];
        double v = y_of(c, ym);
        last_x = x_of(r, c, xm);
        if (!is_ok(c) || !isfinite(v) || !(v > 0))
            continue;
        if (isnan(best) || (ym == OF_TIME ? v < best : v > best)) {
            best = v;
            x[n] = last_x;
            y[n++] = v;
        }
    }
    if (n && isfinite(last_x) && last_x > x[n - 1]) {
        x[n] = last_x;
        y[n] = y[n - 1];
        n++;
    }
    if (!st && n)
        st = kevo_chart_add(ch, "best so far", "#222", KEVO_CHART_STEP, x, y, n, NULL);
    kevo_free(x);
    kevo_free(y);
    return st;
}

/* The geometric mean of the reference's medians over the workloads (NAN: none). */
static double ref_geomean(const struct rep *r)
{
    json_t *w;
    size_t i;
    double sum = 0;
    int n = 0;

    json_array_foreach(json_object_get(r->report, "reference"), i, w) {
        double t = rep_get(json_object_get(w, "time"), "median_s");
        if (isfinite(t) && t > 0 && !json_is_true(json_object_get(w, "holdout"))) {
            sum += log(t);
            n++;
        }
    }
    return n ? exp(sum / n) : NAN;
}

/* The reference's time as a dashed line across the x axis, [0, top]. */
static enum kevo_status ref_series(struct kevo_chart *ch, const struct rep *r, double top)
{
    double t = ref_geomean(r), x[2] = { 0.0, top }, y[2] = { t, t };

    if (!isfinite(t))
        return KEVO_OK;
    return kevo_chart_add(ch, "reference", "#888", KEVO_CHART_DASH, x, y, 2, NULL);
}

/* A nice top for an axis from 0 to max (1 when max is not positive). */
static double nice_top(double max)
{
    struct kevo_svg_scale s = { KEVO_SVG_LINEAR, 0, 0, 0, 0 };
    double v[2] = { 0.0, max };

    if (!(max > 0) || !isfinite(max))
        return 1.0;
    kevo_svg_scale_fit(&s, v, 2);
    return s.hi;
}

/* The top of a fraction-of-SOL axis: above the largest fraction. */
static double sol_top(const struct rep *r)
{
    double m = 0;

    for (int i = 0; i < r->n; i++)
        if (is_ok(&r->c[i]) && isfinite(r->c[i].sol) && r->c[i].sol > m)
            m = r->c[i].sol;
    return nice_top(m);
}

/* The end of an evaluation or wall-time axis: past the last verdict (at least the fifth
 * evaluation, so that a short run's axis counts in whole evaluations). */
static double x_top(const struct rep *r, int xm)
{
    double m = xm == BY_EVAL ? 5 : 0;

    for (int i = 0; i < r->n; i++)
        if (isfinite(x_of(r, &r->c[i], xm)) && x_of(r, &r->c[i], xm) > m)
            m = x_of(r, &r->c[i], xm);
    return nice_top(m);
}

static void progress_panel(struct kevo_svg *w, const struct rep *r, int xm, int ym)
{
    static const char *const titles[2][2] = {
        { "Time (geomean) by evaluation", "Fraction of SOL by evaluation" },
        { "Time (geomean) over wall time", "Fraction of SOL over wall time" } };
    struct wall u = wall_unit(r);
    struct kevo_chart_axis x = { KEVO_SVG_LINEAR, xm == BY_EVAL
                                 ? "evaluation (in order of verdicts)" : u.label,
                                 xm == BY_EVAL ? rep_fmt_plain : u.fmt, 0.0, x_top(r, xm) };
    struct kevo_chart_axis y = { ym == OF_TIME ? KEVO_SVG_LOG : KEVO_SVG_LINEAR,
                                 ym == OF_TIME ? "time (geomean over workloads)"
                                               : "fraction of SOL (geomean)",
                                 ym == OF_TIME ? kevo_svg_fmt_time : kevo_svg_fmt_pct,
                                 ym == OF_TIME ? NAN : 0.0, ym == OF_TIME ? NAN : sol_top(r) };
    struct kevo_chart *ch = NULL;
    enum kevo_status st = kevo_chart_new(PANEL_W, PANEL_H, titles[xm][ym], &x, &y, &ch);

    /* the lines first: the dots stay visible on top of them */
    if (!st && ym == OF_TIME)
        st = ref_series(ch, r, x.hi);
    if (!st)
        st = best_series(ch, r, xm, ym);
    for (int k = 0; !st && k < r->n_keys; k++)
        st = key_series(ch, r, k, xm, ym);
    keep(w, st);
    if (st) {
        kevo_chart_free(ch);
        return;
    }
    render(w, ch);
}

void rep_progress(struct kevo_svg *w, const struct rep *r)
{
    int n_ok = 0, n_done = 0;
    char s[256];

    for (int i = 0; i < r->n; i++) {
        n_ok += is_ok(&r->c[i]);
        n_done += r->c[i].n_eval > 0;
    }
    rep_section(w, "progress", "Progress of the search");
    rep_legend(w, r->keys, r->n_keys);
    kevo_svg_add(w, "<div class=\"grid\">\n");
    for (int xm = BY_EVAL; xm <= BY_WALL; xm++)
        for (int ym = OF_TIME; ym <= OF_SOL; ym++)
            progress_panel(w, r, xm, ym);
    kevo_svg_add(w, "</div>\n");
    snprintf(s, sizeof s, "Each dot is a correct candidate, coloured by the operator (and the "
             "model) that proposed it; the black line is the best so far, the dashed one the "
             "reference. %d of %d verdicts were ok; the others have no time (see Verdicts).",
             n_ok, n_done);
    rep_note(w, s);
    rep_section_close(w);
}

/* ---- roofline ---- */

/* A workload of the run: its arithmetic intensity (flops per byte) and name. */
struct wl {
    int64_t index;
    double ai, ref_flops_s;
    char name[160];
};

/* The visible workloads of the run's reference, at most cap. */
static int workloads(const struct rep *r, struct wl *out, int cap)
{
    json_t *w;
    size_t i;
    int n = 0;

    json_array_foreach(json_object_get(r->report, "reference"), i, w) {
        char sz[128];
        double bytes = rep_get(w, "bytes"), flops = rep_get(w, "flops");
        if (n == cap || json_is_true(json_object_get(w, "holdout")))
            continue;
        out[n].index = json_integer_value(json_object_get(w, "index"));
        out[n].ai = bytes > 0 && flops > 0 ? flops / bytes : NAN;
        out[n].ref_flops_s = rep_get(w, "tflops") * 1e12;
        rep_fmt_sizes(json_object_get(w, "sizes"), sz, sizeof sz);
        snprintf(out[n].name, sizeof out[n].name, "workload %lld [%s]", (long long)out[n].index,
                 sz);
        n++;
    }
    return n;
}

/* The FLOP/s candidate c reached on workload index (NAN: not measured). */
static double flops_s(const struct rep_cand *c, int64_t index)
{
    json_t *m;
    size_t i;

    json_array_foreach(json_object_get(c->metrics, "workloads"), i, m)
        if (json_integer_value(json_object_get(m, "index")) == index)
            return rep_get(m, "tflops") * 1e12;
    return NAN;
}

/* The ok candidates on workload wl, one dot each. */
static enum kevo_status wl_points(struct kevo_chart *ch, const struct rep *r,
                                  const struct wl *wl, int k)
{
    double *x = kevo_calloc((size_t)r->n + 1, sizeof *x), *y = kevo_calloc((size_t)r->n + 1, sizeof *y);
    char **tips = kevo_calloc((size_t)r->n + 1, sizeof *tips);
    size_t n = 0;
    enum kevo_status st = x && y && tips ? KEVO_OK : KEVO_ERR_NOMEM;

    for (int i = 0; !st && i < r->n; i++) {
        const struct rep_cand *c = &r->c[i];
        char v[32];
        if (!is_ok(c))
            continue;
        x[n] = wl->ai;
        y[n] = flops_s(c, wl->index);
        rep_fmt_flops(y[n], v, sizeof v);
        if (r->n <= TIPS_MAX &&
            !(tips[n] = kevo_strdupf("cand %lld (%s), %s: %s", (long long)c->id, c->op,
                                     wl->name, v)))
            st = KEVO_ERR_NOMEM;
        n++;
    }
    if (!st)
        st = kevo_chart_add(ch, wl->name, kevo_svg_color(k), KEVO_CHART_POINTS, x, y, n,
                            (const char *const *)tips);
    for (size_t i = 0; tips && i < n; i++)
        kevo_free(tips[i]);
    kevo_free(tips);
    kevo_free(x);
    kevo_free(y);
    return st;
}

/* The best (black) and the reference (grey) ringed on each workload. */
static enum kevo_status rings(struct kevo_chart *ch, const struct rep *r, const struct wl *wl,
                              int n)
{
    const struct rep_cand *best = rep_cand_find(r, r->best_id);
    enum kevo_status st = KEVO_OK;

    for (int i = 0; !st && best && i < n; i++) {
        double y = flops_s(best, wl[i].index);
        st = kevo_chart_add(ch, "the best", "#222", KEVO_CHART_RING, &wl[i].ai, &y, 1, NULL);
    }
    for (int i = 0; !st && i < n; i++)
        st = kevo_chart_add(ch, "the reference", "#888", KEVO_CHART_RING, &wl[i].ai,
                            &wl[i].ref_flops_s, 1, NULL);
    return st;
}

/* The calibration's peaks, units with the same peak (within 1%) merged: "fp16, bf16". */
static int peaks(const json_t *calib, double *v, char (*names)[64], int cap)
{
    const char *unit;
    json_t *p;
    int n = 0;

    json_object_foreach(json_object_get(calib, "peaks"), unit, p) {
        double f = rep_get(p, "used_flops_per_s");
        int k = 0;
        if (!(f > 0))
            continue;
        while (k < n && fabs(v[k] - f) > 0.01 * f)
            k++;
        if (k < n) {
            size_t len = strlen(names[k]);
            snprintf(names[k] + len, sizeof names[k] - len, ", %s", unit);
        } else if (n < cap) {
            v[n] = f;
            snprintf(names[n++], sizeof names[0], "%s", unit);
        }
    }
    return n;
}

/* Roofs min(bw * x, peak) over [lo, hi], each labelled at its right end. */
static enum kevo_status roofs(struct kevo_chart *ch, const json_t *calib, double lo, double hi)
{
    double bw = rep_get(json_object_get(calib, "bandwidth"), "best_bytes_per_s"), pk[16];
    double x[ROOF_SAMPLES], y[ROOF_SAMPLES];
    char names[16][64], lab[128], v[32];
    int n = peaks(calib, pk, names, 16);
    enum kevo_status st = KEVO_OK;

    for (int k = 0; !st && k < n; k++) {
        for (int i = 0; i < ROOF_SAMPLES; i++) {
            x[i] = lo * pow(hi / lo, (double)i / (ROOF_SAMPLES - 1));
            y[i] = bw > 0 && bw * x[i] < pk[k] ? bw * x[i] : pk[k];
        }
        st = kevo_chart_add(ch, k ? NULL : "roofs (calibrated)", "#555", KEVO_CHART_LINE, x, y,
                            ROOF_SAMPLES, NULL);
        rep_fmt_flops(pk[k], v, sizeof v);
        snprintf(lab, sizeof lab, "%.63s: %.31s", names[k], v);
        if (!st)
            st = kevo_chart_note(ch, hi, pk[k], "end", "#555", lab);
    }
    if (!st && bw > 0) {
        rep_fmt_bps(bw, v, sizeof v);
        snprintf(lab, sizeof lab, "DRAM %s", v);
        st = kevo_chart_note(ch, lo * 1.15, bw * lo * 1.15, "start", "#555", lab);
    }
    return st;
}

/* The x domain: the workloads' intensities and every roof's ridge point, with room. */
static void roof_domain(const json_t *calib, const struct wl *wl, int n, double *lo, double *hi)
{
    double bw = rep_get(json_object_get(calib, "bandwidth"), "best_bytes_per_s"), pk[16];
    char names[16][64];
    int np = peaks(calib, pk, names, 16);

    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!(wl[i].ai > 0))
            continue;
        *lo = wl[i].ai < *lo ? wl[i].ai : *lo;
        *hi = wl[i].ai > *hi ? wl[i].ai : *hi;
    }
    for (int k = 0; bw > 0 && k < np; k++)
        *hi = pk[k] / bw > *hi ? pk[k] / bw : *hi;
    if (!(*lo <= *hi)) {
        *lo = 0.1;
        *hi = 100;
    }
    *lo = pow(10, floor(log10(*lo / 4)));
    *hi = pow(10, ceil(log10(*hi * 4)));
}

static void roof_chart(struct kevo_svg *w, const struct rep *r, const struct wl *wl, int n)
{
    struct kevo_chart_axis x = { KEVO_SVG_LOG, "arithmetic intensity (FLOP per byte, the task's "
                                 "declared flops and bytes)", rep_fmt_plain, NAN, NAN };
    struct kevo_chart_axis y = { KEVO_SVG_LOG, "throughput (FLOP/s)", NULL, NAN, NAN };
    struct kevo_chart *ch = NULL;
    enum kevo_status st;

    roof_domain(r->calib, wl, n, &x.lo, &x.hi);
    st = kevo_chart_new(WIDE_W, 440, "Roofline of the device, every correct candidate on it",
                        &x, &y, &ch);
    if (!st)
        st = roofs(ch, r->calib, x.lo, x.hi);
    for (int i = 0; !st && i < n; i++)
        if (wl[i].ai > 0)
            st = wl_points(ch, r, &wl[i], i);
    if (!st)
        st = rings(ch, r, wl, n);
    keep(w, st);
    if (st)
        kevo_chart_free(ch);
    else
        render(w, ch);
}

void rep_roofline(struct kevo_svg *w, const struct rep *r)
{
    struct wl wl[32];
    int n = workloads(r, wl, 32);
    char s[256];

    rep_section(w, "roofline", "Roofline");
    if (!r->calib) {
        rep_note(w, "This run has no report yet (it has not ended, or its kevo was killed): "
                    "no calibration of its device to draw the roofline from.");
        rep_section_close(w);
        return;
    }
    roof_chart(w, r, wl, n);
    rep_note(w, "The slope is the calibrated DRAM bandwidth, each flat roof a unit's peak; a "
                "workload's candidates stand in one column at its arithmetic intensity, from the "
                "task's declared flops and bytes. The distance below the roof is what is left.");
    for (int i = 0; i < n; i++) {
        if (wl[i].ai > 0)
            continue;
        snprintf(s, sizeof s, "%s declares no flops: it has no place on a roofline (its SOL "
                 "is its bytes over the bandwidth).", wl[i].name);
        rep_note(w, s);
    }
    rep_section_close(w);
}

/* ---- operators and models ---- */

/* The LLM calls of operator op (or all for NULL) of the run. */
static int llm_calls_of(const struct rep *r, const char *op)
{
    int n = 0;

    for (int i = 0; i < r->n_llm; i++)
        n += !op || strcmp(r->llm[i].op, op) == 0;
    return n;
}

/* Rows for the LLM operators that made calls but no candidate (a plan's first call, a
 * reply without code): their calls count too. */
static void llm_only_rows(struct kevo_svg *w, const struct rep *r, const json_t *ops)
{
    for (int i = 0; i < r->n_llm; i++) {
        const char *op = r->llm[i].op;
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = strcmp(r->llm[j].op, op) != 0;
        if (!first || json_object_get(ops, op))
            continue;
        kevo_svg_add(w, "<tr>");
        rep_td(w, op, 0);
        for (int k = 0; k < 4; k++)
            rep_td_int(w, -1);
        rep_td_int(w, llm_calls_of(r, op));
        rep_td_int(w, -1);
        kevo_svg_add(w, "</tr>\n");
    }
}

static void op_table(struct kevo_svg *w, const struct rep *r, const json_t *ops)
{
    const char *op;
    json_t *s;

    kevo_svg_add(w, "<table><tr><th>operator</th><th>proposed</th><th>evaluated</th>"
                    "<th>ok</th><th>improved</th><th>LLM calls</th><th>weight at the end"
                    "</th></tr>\n");
    json_object_foreach((json_t *)ops, op, s) {
        kevo_svg_add(w, "<tr>");
        rep_td(w, op, 0);
        rep_td_int(w, json_integer_value(json_object_get(s, "proposed")));
        rep_td_int(w, json_integer_value(json_object_get(s, "done")));
        rep_td_int(w, json_integer_value(json_object_get(s, "ok")));
        rep_td_int(w, json_integer_value(json_object_get(s, "improved")));
        rep_td_int(w, llm_calls_of(r, op));
        rep_td_num(w, rep_get(json_object_get(json_object_get(r->report, "operators"), op),
                              "weight"), kevo_svg_fmt_num);
        kevo_svg_add(w, "</tr>\n");
    }
    llm_only_rows(w, r, ops);
    kevo_svg_add(w, "</table>\n");
}

static void op_bars(struct kevo_svg *w, const json_t *ops)
{
    static const char *const series[] = { "proposed", "ok", "improved" };
    static const char *const colors[] = { "#4e79a7", "#59a14f", "#f28e2b" };
    size_t n = json_object_size(ops), k = 0;
    const char **cats = kevo_calloc(n + 1, sizeof *cats);
    double *v = kevo_calloc(3 * n + 1, sizeof *v);
    const char *op;
    json_t *s;

    if (!cats || !v) {
        keep(w, KEVO_ERR_NOMEM);
        goto out;
    }
    json_object_foreach((json_t *)ops, op, s) {
        cats[k] = op;
        for (int j = 0; j < 3; j++)
            v[3 * k + j] = (double)json_integer_value(json_object_get(s, series[j]));
        k++;
    }
    struct kevo_chart_bars b = { "Candidates per operator", WIDE_W, (int)n, 3, cats, series,
                                 colors, v, NULL, 0, NULL };
    kevo_chart_bars(w, &b);
out:
    kevo_free(cats);
    kevo_free(v);
}

static void model_table(struct kevo_svg *w, const json_t *models)
{
    json_t *m;
    size_t i;
    char name[256];

    kevo_svg_add(w, "<table><tr><th>model</th><th>calls</th><th>tokens in</th><th>cached in"
                    "</th><th>out</th><th>reasoning</th><th>cost</th><th>candidates</th>"
                    "<th>ok</th><th>improved</th></tr>\n");
    json_array_foreach((json_t *)models, i, m) {
        json_t *t = json_object_get(m, "tokens");
        rep_model_name(rep_str(m, "model", "?"), name, sizeof name);
        kevo_svg_add(w, "<tr>");
        rep_td(w, name, 0);
        rep_td_int(w, json_integer_value(json_object_get(m, "n_calls")));
        rep_td_int(w, json_integer_value(json_object_get(t, "in")));
        rep_td_int(w, json_integer_value(json_object_get(t, "cached_in")));
        rep_td_int(w, json_integer_value(json_object_get(t, "out")));
        rep_td_int(w, json_integer_value(json_object_get(t, "reasoning")));
        rep_td_num(w, rep_get(m, "cost"), kevo_svg_fmt_num);
        rep_td_int(w, json_integer_value(json_object_get(m, "candidates")));
        rep_td_int(w, json_integer_value(json_object_get(m, "ok")));
        rep_td_int(w, json_integer_value(json_object_get(m, "improved")));
        kevo_svg_add(w, "</tr>\n");
    }
    kevo_svg_add(w, "</table>\n");
}

/* The distinct models of the LLM calls (names without URL), at most cap. */
static int llm_models(const struct rep *r, char (*names)[128], int cap)
{
    int n = 0;

    for (int i = 0; i < r->n_llm; i++) {
        char name[128];
        int k = 0;
        rep_model_name(r->llm[i].model, name, sizeof name);
        while (k < n && strcmp(names[k], name) != 0)
            k++;
        if (k == n && n < cap)
            snprintf(names[n++], sizeof names[0], "%s", name);
    }
    return n;
}

/* What llm_chart sums over time. */
enum { SUM_CALLS = 0, SUM_TOKENS, SUM_COST };

/* What call i adds to a sum of kind what. */
static double llm_amount(const struct kevo_llm_row *c, int what)
{
    if (what == SUM_CALLS)
        return 1.0;
    if (what == SUM_COST)
        return c->cost > 0 ? c->cost : 0;
    return (double)(c->tokens_in + c->tokens_out);
}

/* The largest sum of kind what any one model reaches (the top of the y axis). */
static double llm_top(const struct rep *r, char (*names)[128], int n, int what)
{
    double top = 0;

    for (int k = 0; k < n; k++) {
        double sum = 0;
        for (int i = 0; i < r->n_llm; i++) {
            char name[128];
            rep_model_name(r->llm[i].model, name, sizeof name);
            sum += strcmp(name, names[k]) == 0 ? llm_amount(&r->llm[i], what) : 0;
        }
        top = sum > top ? sum : top;
    }
    return nice_top(top);
}

/* A model's calls, tokens or cost (what) summed over time, one step per call. */
static enum kevo_status llm_series(struct kevo_chart *ch, const struct rep *r, const char *model,
                                   int k, int what)
{
    double *x = kevo_calloc((size_t)r->n_llm + 1, sizeof *x);
    double *y = kevo_calloc((size_t)r->n_llm + 1, sizeof *y), sum = 0;
    size_t n = 0;
    enum kevo_status st = x && y ? KEVO_OK : KEVO_ERR_NOMEM;

    for (int i = 0; !st && i < r->n_llm; i++) {
        char name[128];
        rep_model_name(r->llm[i].model, name, sizeof name);
        if (strcmp(name, model) != 0)
            continue;
        sum += llm_amount(&r->llm[i], what);
        x[n] = (r->llm[i].created - r->started) / wall_unit(r).div;
        y[n++] = sum;
    }
    if (!st)
        st = kevo_chart_add(ch, model, kevo_svg_color(k), KEVO_CHART_STEP, x, y, n, NULL);
    kevo_free(x);
    kevo_free(y);
    return st;
}

static void llm_chart(struct kevo_svg *w, const struct rep *r, int what)
{
    static const char *const titles[] = { "LLM calls, summed over time",
                                           "LLM tokens, summed over time",
                                           "LLM cost, summed over time" };
    static const char *const labels[] = { "calls (any status)", "tokens (in + out)",
                                           "cost (the price table's unit)" };
    struct wall u = wall_unit(r);
    struct kevo_chart_axis x = { KEVO_SVG_LINEAR, u.label, u.fmt, NAN, NAN };
    char names[16][128];
    int n = llm_models(r, names, 16);
    struct kevo_chart_axis y = { KEVO_SVG_LINEAR, labels[what], NULL, 0.0,
                                 llm_top(r, names, n, what) };
    struct kevo_chart *ch = NULL;
    enum kevo_status st = kevo_chart_new(PANEL_W, PANEL_H, titles[what], &x, &y, &ch);

    for (int k = 0; !st && k < n; k++)
        st = llm_series(ch, r, names[k], k, what);
    keep(w, st);
    if (st)
        kevo_chart_free(ch);
    else
        render(w, ch);
}

void rep_operators(struct kevo_svg *w, const struct rep *r)
{
    const json_t *ops = json_object_get(r->run, "operators");
    const json_t *models = json_object_get(r->run, "llm_models");
    double cost = 0;

    rep_section(w, "operators", "Operators and models");
    if (json_object_size(ops)) {
        op_bars(w, ops);
        op_table(w, r, ops);
    } else {
        rep_note(w, "No operator proposed anything yet.");
    }
    if (!r->n_llm) {
        rep_note(w, "No LLM calls in this run: only the operators that need no model.");
        rep_section_close(w);
        return;
    }
    kevo_svg_add(w, "<h3>LLM models</h3>\n");
    model_table(w, models);
    for (int i = 0; i < r->n_llm; i++)
        cost += r->llm[i].cost > 0 ? r->llm[i].cost : 0;
    kevo_svg_add(w, "<div class=\"grid\">\n");
    llm_chart(w, r, SUM_CALLS);
    llm_chart(w, r, SUM_TOKENS);
    if (cost > 0)
        llm_chart(w, r, SUM_COST);
    kevo_svg_add(w, "</div>\n");
    if (!(cost > 0))
        rep_note(w, "The calls cost nothing the price table knows of (no price for the model, "
                    "or a local one): no cost plot.");
    rep_section_close(w);
}

/* ---- verdicts ---- */

/* The distinct verdicts of the run (ok first) and their counts, at most cap. */
static int verdict_counts(const struct rep *r, const char **names, double *counts, int cap)
{
    int n = 0;

    names[n] = "ok";
    counts[n++] = 0;
    for (int i = 0; i < r->n; i++) {
        int k = 0;
        while (k < n && strcmp(names[k], r->c[i].verdict) != 0)
            k++;
        if (k == n && n == cap)
            continue;
        if (k == n) {
            names[n] = r->c[i].verdict;
            counts[n++] = 0;
        }
        counts[k]++;
    }
    return n;
}

static void failed_table(struct kevo_svg *w, const struct rep *r, int n_failed)
{
    int listed = 0;
    char s[160];

    kevo_svg_addf(w, "<details%s><summary>%d failed candidates</summary>\n", n_failed <= 30
                  ? " open" : "", n_failed);
    kevo_svg_add(w, "<table><tr><th>cand</th><th>operator</th><th>parents</th><th>verdict</th>"
                    "<th>message</th></tr>\n");
    for (int i = 0; i < r->n; i++) {
        const struct rep_cand *c = &r->c[i];
        char id[32], par[64], key[320];
        if (is_ok(c) || strcmp(c->verdict, "pending") == 0 || listed == FAILED_MAX)
            continue;
        listed++;
        rep_cand_key(c, key, sizeof key);
        snprintf(id, sizeof id, "%lld", (long long)c->id);
        snprintf(par, sizeof par, c->parent2 ? "%lld, %lld" : c->parent1 ? "%lld" : "-",
                 (long long)c->parent1, (long long)c->parent2);
        kevo_svg_add(w, "<tr>");
        rep_td(w, id, 1);
        rep_td(w, key, 0);
        rep_td(w, par, 0);
        kevo_svg_add(w, "<td class=\"bad\">");
        kevo_svg_esc(w, c->verdict);
        kevo_svg_add(w, "</td><td class=\"msg\">");
        kevo_svg_escn(w, c->message ? c->message : "", MSG_MAX);
        if (c->message && strlen(c->message) > MSG_MAX)
            kevo_svg_add(w, " [...]");
        kevo_svg_add(w, "</td></tr>\n");
    }
    kevo_svg_add(w, "</table>\n</details>\n");
    if (listed < n_failed) {
        snprintf(s, sizeof s, "The first %d are listed; kevo runs %lld --candidates lists "
                 "them all.", listed, (long long)r->run_id);
        rep_note(w, s);
    }
}

void rep_verdicts(struct kevo_svg *w, const struct rep *r)
{
    const char *names[KEVO_VERDICT_COUNT + 4];
    double counts[KEVO_VERDICT_COUNT + 4];
    int n = verdict_counts(r, names, counts, KEVO_VERDICT_COUNT + 4), n_failed = 0;
    const char *colors[KEVO_VERDICT_COUNT + 4];

    for (int i = 0; i < n; i++)
        colors[i] = strcmp(names[i], "ok") == 0 ? "#59a14f"
                    : strcmp(names[i], "pending") == 0 ? "#bab0ac" : "#e15759";
    rep_section(w, "verdicts", "Verdicts");
    struct kevo_chart_bars b = { "Candidates per verdict", WIDE_W, n, 1, names, NULL, NULL,
                                 counts, NULL, 0, colors };
    kevo_chart_bars(w, &b);
    for (int i = 0; i < r->n; i++)
        n_failed += !is_ok(&r->c[i]) && strcmp(r->c[i].verdict, "pending") != 0;
    if (n_failed)
        failed_table(w, r, n_failed);
    else
        rep_note(w, "No candidate failed.");
    rep_section_close(w);
}

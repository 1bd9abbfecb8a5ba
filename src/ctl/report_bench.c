/*
 * report_bench - `kevo report --bench FILE` (kevo.h: kevo_report_bench_html; docs/report.md):
 * the document `kevo bench --json` wrote (docs/bench.md) as one self-contained HTML page:
 * the suite's scores, its fast_p curves (the fraction of tasks that are correct and faster
 * than a base by more than p, for every p), the fraction of SOL of each task, and the
 * table of tasks. Reads only the file; every text of it is escaped.
 */
#include "ctl/report_int.h"

#include "base/chart.h"
#include "base/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIDE_W 940
#define MSG_MAX 300

/* The bases of fast_p: the task's key, its score's key in "scores", and its name. */
static const struct base {
    const char *key, *score, *name;
} bases[] = {
    { "speedup", "fast_p_vs_reference", "vs the reference" },
    { "speedup_eager", "fast_p_vs_eager", "vs PyTorch eager" },
    { "speedup_compile", "fast_p_vs_compile", "vs torch.compile" },
};
#define N_BASES 3

static int task_ok(const json_t *t)
{
    return strcmp(rep_str(t, "verdict", ""), "ok") == 0;
}

static int by_value(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;

    return a < b ? -1 : a > b;
}

/* The speedups over base b of the ok tasks that have one, ascending, into v; how many. */
static size_t speedups(const json_t *tasks, const struct base *b, double *v)
{
    json_t *t;
    size_t i, n = 0;

    json_array_foreach((json_t *)tasks, i, t) {
        double s = rep_get(t, b->key);
        if (task_ok(t) && s > 0 && isfinite(s))
            v[n++] = s;
    }
    qsort(v, n, sizeof *v, by_value);
    return n;
}

/* fast_p over base b as a step line: the fraction of all tasks above each p. */
static enum kevo_status fast_series(struct kevo_chart *ch, const json_t *tasks,
                                    const struct base *b, int k, int *any)
{
    size_t n_all = json_array_size(tasks), n;
    double *v = kevo_calloc(n_all + 1, sizeof *v), *x = kevo_calloc(n_all + 2, sizeof *x);
    double *y = kevo_calloc(n_all + 2, sizeof *y);
    enum kevo_status st = v && x && y ? KEVO_OK : KEVO_ERR_NOMEM;

    n = st ? 0 : speedups(tasks, b, v);
    if (n) {
        /* at p just above a task's speedup, that task no longer counts */
        x[0] = v[0] / 1.5;
        y[0] = (double)n / (double)n_all;
        for (size_t i = 0; i < n; i++) {
            x[i + 1] = v[i];
            y[i + 1] = (double)(n - i - 1) / (double)n_all;
        }
        st = kevo_chart_add(ch, b->name, kevo_svg_color(k), KEVO_CHART_STEP, x, y, n + 1, NULL);
        *any = 1;
    }
    kevo_free(v);
    kevo_free(x);
    kevo_free(y);
    return st;
}

/* The marks at p = 1, 1.5 and 2, where the scores are read. */
static enum kevo_status p_marks(struct kevo_chart *ch)
{
    static const double ps[] = { 1.0, 1.5, 2.0 };
    enum kevo_status st = KEVO_OK;

    for (int i = 0; !st && i < 3; i++) {
        double x[2] = { ps[i], ps[i] }, y[2] = { 0.0, 1.0 };
        char lab[16];
        snprintf(lab, sizeof lab, "p=%g", ps[i]);
        st = kevo_chart_add(ch, NULL, "#bbb", KEVO_CHART_DASH, x, y, 2, NULL);
        if (!st)
            st = kevo_chart_note(ch, ps[i], 1.0, "start", "#888", lab);
    }
    return st;
}

static void fast_chart(struct kevo_svg *w, const json_t *tasks)
{
    struct kevo_chart_axis x = { KEVO_SVG_LOG, "p: speedup over the base", rep_fmt_plain, NAN,
                                 NAN };
    struct kevo_chart_axis y = { KEVO_SVG_LINEAR, "fraction of tasks correct and faster than p",
                                 kevo_svg_fmt_pct, 0.0, 1.0 };
    struct kevo_chart *ch = NULL;
    int any = 0;
    enum kevo_status st = kevo_chart_new(WIDE_W, 360, "fast_p: the tasks faster than p times "
                                         "the base", &x, &y, &ch);

    for (int k = 0; !st && k < N_BASES; k++)
        st = fast_series(ch, tasks, &bases[k], k, &any);
    if (!st && any)
        st = p_marks(ch);
    if (!st && any)
        kevo_chart_render(ch, w);
    else if (!st)
        rep_note(w, "No speedups to plot: a bench of the references alone has none against "
                    "the reference (kevo bench --candidates DIR), and none against PyTorch "
                    "without a baselines file (--baselines FILE).");
    if (st && !w->st)
        w->st = st;
    kevo_chart_free(ch);
}

/* Each task's fraction of SOL (geomean over its workloads) and SOL score as bars. */
static void sol_bars(struct kevo_svg *w, const json_t *tasks)
{
    static const char *const series[] = { "fraction of SOL (geomean)", "SOL score" };
    size_t n = json_array_size(tasks), i;
    const char **cats = kevo_calloc(n + 1, sizeof *cats);
    double *v = kevo_calloc(2 * n + 1, sizeof *v);
    json_t *t;

    if (!cats || !v) {
        w->st = w->st ? w->st : KEVO_ERR_NOMEM;
        goto out;
    }
    json_array_foreach((json_t *)tasks, i, t) {
        cats[i] = rep_str(t, "task", "?");
        v[2 * i] = task_ok(t) ? rep_get(t, "sol_fraction") : NAN;
        v[2 * i + 1] = task_ok(t) ? rep_get(t, "sol_score") : NAN;
    }
    struct kevo_chart_bars b = { "SOL per task (correct tasks only)", WIDE_W, (int)n, 2, cats,
                                 series, NULL, v, kevo_svg_fmt_pct, 1.0, NULL };
    kevo_chart_bars(w, &b);
out:
    kevo_free(cats);
    kevo_free(v);
}

static void scores_table(struct kevo_svg *w, const json_t *sc)
{
    kevo_svg_add(w, "<table><tr><th>fast_p</th><th>p = 1</th><th>p = 1.5</th><th>p = 2</th>"
                    "</tr>\n");
    for (int k = 0; k < N_BASES; k++) {
        const json_t *f = json_object_get(sc, bases[k].score);
        if (!f)
            continue;
        kevo_svg_add(w, "<tr>");
        rep_td(w, bases[k].name, 0);
        rep_td_num(w, rep_get(f, "1"), kevo_svg_fmt_pct);
        rep_td_num(w, rep_get(f, "1.5"), kevo_svg_fmt_pct);
        rep_td_num(w, rep_get(f, "2"), kevo_svg_fmt_pct);
        kevo_svg_add(w, "</tr>\n");
    }
    kevo_svg_add(w, "</table>\n");
}

static void task_row(struct kevo_svg *w, const json_t *t)
{
    int ok = task_ok(t);

    kevo_svg_add(w, "<tr>");
    rep_td(w, rep_str(t, "task", "?"), 0);
    kevo_svg_addf(w, "<td class=\"%s\">", ok ? "ok" : "bad");
    kevo_svg_esc(w, rep_str(t, "verdict", "?"));
    kevo_svg_add(w, "</td>");
    rep_td(w, rep_str(t, "subject", "?"), 0);
    for (int k = 0; k < N_BASES; k++)
        rep_td_num(w, rep_get(t, bases[k].key), rep_fmt_x);
    rep_td_num(w, rep_get(t, "sol_fraction"), kevo_svg_fmt_pct);
    rep_td_num(w, rep_get(t, "sol_score"), kevo_svg_fmt_pct);
    kevo_svg_add(w, "<td class=\"msg\">");
    if (!ok)
        kevo_svg_escn(w, rep_str(t, "message", ""), MSG_MAX);
    kevo_svg_add(w, "</td></tr>\n");
}

static void header(struct kevo_svg *w, const json_t *doc, const char *path)
{
    const json_t *sc = json_object_get(doc, "scores"), *dev;
    char s[256], a[32], b[32];

    dev = json_object_get(json_object_get(doc, "calibration"), "device");
    snprintf(s, sizeof s, "kevo bench: %zu tasks on %s", json_array_size(json_object_get(doc,
             "tasks")), rep_str(dev, "name", "an unrecorded device"));
    kevo_svg_add(w, "<h1>");
    kevo_svg_esc(w, s);
    kevo_svg_add(w, "</h1>\n<table class=\"facts\">\n<tr><td>file</td>");
    rep_td(w, path, 0);
    kevo_svg_add(w, "</tr>\n<tr><td>candidates</td>");
    rep_td(w, rep_str(doc, "candidates_dir", "none: the references"), 0);
    kevo_svg_add(w, "</tr>\n<tr><td>baselines</td>");
    rep_td(w, rep_str(doc, "baselines", "none"), 0);
    kevo_svg_fmt_pct(rep_get(sc, "correctness"), a, sizeof a);
    snprintf(s, sizeof s, "%lld of %lld tasks ok (%s)",
             (long long)json_integer_value(json_object_get(sc, "ok")),
             (long long)json_integer_value(json_object_get(sc, "tasks")), a);
    kevo_svg_add(w, "</tr>\n<tr><td>correctness</td>");
    rep_td(w, s, 0);
    kevo_svg_fmt_pct(rep_get(sc, "geomean_sol_fraction"), a, sizeof a);
    kevo_svg_fmt_pct(rep_get(sc, "mean_sol_score"), b, sizeof b);
    snprintf(s, sizeof s, "%s of SOL (geomean over ok tasks); SOL score %s (mean, against %s)",
             a, b, rep_str(sc, "sol_score_base", "-"));
    kevo_svg_add(w, "</tr>\n<tr><td>speed of light</td>");
    rep_td(w, s, 0);
    kevo_svg_add(w, "</tr>\n</table>\n");
}

static void page(struct kevo_svg *w, const json_t *doc, const char *path)
{
    const json_t *tasks = json_object_get(doc, "tasks"), *t;
    size_t i;

    rep_page_open(w, "kevo bench");
    header(w, doc, path);
    rep_section(w, "fast_p", "fast_p");
    scores_table(w, json_object_get(doc, "scores"));
    fast_chart(w, tasks);
    rep_section_close(w);
    rep_section(w, "sol", "Speed of light per task");
    sol_bars(w, tasks);
    rep_note(w, "Fraction of SOL: T_sol / T, the floor over the time; SOL score: "
                "1 / (1 + (T - T_sol) / (T_base - T_sol)), 1 at the floor, 0.5 at the base's "
                "speed (docs/bench.md).");
    rep_section_close(w);
    rep_section(w, "tasks", "Tasks");
    kevo_svg_add(w, "<table><tr><th>task</th><th>verdict</th><th>subject</th><th>vs ref</th>"
                    "<th>vs eager</th><th>vs compile</th><th>of SOL</th><th>SOL score</th>"
                    "<th>message</th></tr>\n");
    json_array_foreach((json_t *)tasks, i, t)
        task_row(w, t);
    kevo_svg_add(w, "</table>\n");
    rep_section_close(w);
    rep_page_close(w);
}

enum kevo_status kevo_report_bench_html(const char *path, char **out_html, char **out_msg)
{
    json_error_t e;
    json_t *doc = json_load_file(path, 0, &e);
    struct kevo_svg w;
    enum kevo_status st;

    *out_html = NULL;
    *out_msg = NULL;
    if (!doc) {
        *out_msg = kevo_strdupf("%s:%d: %s", path, e.line, e.text);
        return KEVO_ERR_PARSE;
    }
    if (!json_is_array(json_object_get(doc, "tasks")) ||
        !json_is_object(json_object_get(doc, "scores"))) {
        *out_msg = kevo_strdupf("%s: not a bench document (kevo bench --json writes one): no "
                                "\"tasks\" array or \"scores\" object", path);
        json_decref(doc);
        return KEVO_ERR_INVALID;
    }
    kevo_svg_init(&w, REP_MAX_BYTES);
    page(&w, doc, path);
    st = kevo_svg_take(&w, out_html);
    if (st)
        *out_msg = kevo_strdupf("report of %s: %s", path, kevo_status_name(st));
    json_decref(doc);
    return st;
}

/*
 * report - `kevo report RUN` (kevo.h: kevo_report_html; docs/report.md): one run of the
 * archive as one self-contained HTML page with plots. The run is read through the same
 * documents `kevo runs` and `kevo show` print (kevo_runs_json, kevo_runs_cands_json,
 * kevo_show_json), plus what only the archive rows hold: when each verdict came, each
 * candidate's throughput per workload, and the LLM calls. The sections are drawn by
 * report_plots.c and report_best.c. Read-only: safe while a run writes.
 */
#include "ctl/report_int.h"

#include "base/mem.h"
#include "ctl/run.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ---- */

/* text (a kevo.h entry's document, consumed) as a value into *out, when st is KEVO_OK. */
static enum kevo_status parsed(enum kevo_status st, char *text, json_t **out)
{
    *out = NULL;
    if (!st && !(*out = json_loads(text, 0, NULL)))
        st = KEVO_ERR_NOMEM;
    kevo_free(text);
    return st;
}

/* kevo_show_json of candidate id into *out (id 0: none). */
static enum kevo_status show(const char *archive, int64_t id, json_t **out, char **msg)
{
    char *text = NULL;
    enum kevo_status st;

    *out = NULL;
    if (!id)
        return KEVO_OK;
    st = kevo_show_json(archive, id, &text, msg);
    return parsed(st, text, out);
}

/* The documents of runs, runs --candidates and show (the best and its first parent). */
static enum kevo_status load_docs(struct rep *r, const char *archive, char **msg)
{
    char *text = NULL;
    enum kevo_status st = kevo_runs_json(archive, r->run_id, &text, msg);
    json_t *first;

    st = parsed(st, text, &r->run);
    text = NULL;
    if (!st)
        st = kevo_runs_cands_json(archive, r->run_id, &text, msg);
    if (!st)
        st = parsed(st, text, &r->cands);
    if (st)
        return st;
    /* the best is the one `kevo runs` shows: the held-out-checked final, else the fastest */
    first = json_array_get(json_object_get(r->run, "lineage_of_best"), 0);
    if (first && strcmp(rep_str(first, "verdict", ""), "ok") == 0)
        r->best_id = json_integer_value(json_object_get(first, "id"));
    st = show(archive, r->best_id, &r->best, msg);
    if (!st)
        st = show(archive, json_integer_value(json_array_get(json_object_get(r->best, "parents"),
                                                             0)), &r->parent, msg);
    r->report = json_object_get(r->run, "report");
    r->report = json_is_object(r->report) ? r->report : NULL;
    r->calib = json_object_get(r->report, "calibration");
    r->calib = json_is_object(r->calib) ? r->calib : NULL;
    r->started = rep_get(r->run, "started");
    return st;
}

/* The candidates of the document, with their parents and figures. */
static enum kevo_status load_cands(struct rep *r)
{
    json_t *arr = json_object_get(r->cands, "candidates"), *row;
    size_t i;

    r->c = kevo_calloc(json_array_size(arr) + 1, sizeof *r->c);
    if (!r->c)
        return KEVO_ERR_NOMEM;
    json_array_foreach(arr, i, row) {
        struct rep_cand *c = &r->c[r->n++];
        json_t *par = json_object_get(row, "parents");
        c->row = row;
        c->id = json_integer_value(json_object_get(row, "id"));
        c->parent1 = json_integer_value(json_array_get(par, 0));
        c->parent2 = json_integer_value(json_array_get(par, 1));
        c->op = rep_str(row, "op", "?");
        c->verdict = rep_str(row, "verdict", "?");
        c->message = json_string_value(json_object_get(row, "message"));
        c->score = rep_get(row, "score_s");
        c->sol = rep_get(row, "sol_fraction");
        c->speedup = rep_get(row, "speedup");
        c->t = NAN;
    }
    return KEVO_OK;
}

/* When each candidate got its verdict and its metrics, from the archive's rows. */
static enum kevo_status load_rows(struct rep *r, struct kevo_archive *a, char **msg)
{
    for (int i = 0; i < r->n; i++) {
        struct kevo_cand_rec rec;
        enum kevo_status st;

        memset(&rec, 0, sizeof rec);
        st = kevo_archive_cand_get(a, r->c[i].id, &rec);
        if (st) {
            *msg = kevo_strdup(kevo_archive_errmsg(a));
            return st;
        }
        if (rec.state == KEVO_CAND_DONE && rec.finished > 0)
            r->c[i].t = rec.finished - r->started;
        r->c[i].metrics = rec.metrics_json ? json_loads(rec.metrics_json, 0, NULL) : NULL;
        kevo_archive_cand_clear(&rec);
    }
    return KEVO_OK;
}

/* Order of verdicts: by time, then id. */
static int by_time(const void *pa, const void *pb)
{
    const struct rep_cand *a = *(struct rep_cand *const *)pa, *b = *(struct rep_cand *const *)pb;

    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Each candidate's place among the verdicts (n_eval), and the list in that order. */
static enum kevo_status number_evals(struct rep *r)
{
    r->by_eval = kevo_calloc((size_t)r->n + 1, sizeof *r->by_eval);
    if (!r->by_eval)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < r->n; i++)
        if (isfinite(r->c[i].t) && strcmp(r->c[i].verdict, "pending") != 0)
            r->by_eval[r->n_done++] = &r->c[i];
    qsort(r->by_eval, (size_t)r->n_done, sizeof *r->by_eval, by_time);
    for (int i = 0; i < r->n_done; i++)
        r->by_eval[i]->n_eval = i + 1;
    return KEVO_OK;
}

/* The unit of the wall-time axes, from the last verdict or LLM call. */
static void wall_unit(struct rep *r)
{
    double m = 0;

    for (int i = 0; i < r->n; i++)
        m = isfinite(r->c[i].t) && r->c[i].t > m ? r->c[i].t : m;
    for (int i = 0; i < r->n_llm; i++)
        m = r->llm[i].created - r->started > m ? r->llm[i].created - r->started : m;
    r->wall_div = m > 3 * 3600 ? 3600 : m > 180 ? 60 : 1;
}

/* The candidate with id, to write into, or NULL. */
static struct rep_cand *cand_of(struct rep *r, int64_t id)
{
    const struct rep_cand *c = rep_cand_find(r, id);

    return c ? &r->c[c - r->c] : NULL;
}

/* The model each LLM-written candidate came from. */
static enum kevo_status load_models(struct rep *r)
{
    for (int i = 0; i < r->n_llm; i++) {
        struct rep_cand *c = cand_of(r, r->llm[i].cand_id);
        char name[256];

        if (!c || c->model)
            continue;
        rep_model_name(r->llm[i].model, name, sizeof name);
        c->model = kevo_strdup(name);
        if (!c->model)
            return KEVO_ERR_NOMEM;
    }
    return KEVO_OK;
}

/* The colour key of each candidate: its operator, and its model when one wrote it. */
static enum kevo_status load_keys(struct rep *r)
{
    r->keys = kevo_calloc((size_t)r->n + 1, sizeof *r->keys);
    if (!r->keys)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < r->n; i++) {
        struct rep_cand *c = &r->c[i];
        char name[320], *key;
        int k = 0;

        rep_cand_key(c, name, sizeof name);
        key = kevo_strdup(name);
        if (!key)
            return KEVO_ERR_NOMEM;
        while (k < r->n_keys && strcmp(r->keys[k], key) != 0)
            k++;
        if (k == r->n_keys)
            r->keys[r->n_keys++] = key;
        else
            kevo_free(key);
        c->key = k;
    }
    return KEVO_OK;
}

static void rep_clear(struct rep *r)
{
    for (int i = 0; r->c && i < r->n; i++) {
        kevo_free(r->c[i].model);
        json_decref(r->c[i].metrics);
    }
    for (int i = 0; r->keys && i < r->n_keys; i++)
        kevo_free(r->keys[i]);
    kevo_free(r->keys);
    kevo_free(r->by_eval);
    kevo_free(r->c);
    kevo_archive_llm_rows_free(r->llm, r->n_llm);
    json_decref(r->run);
    json_decref(r->cands);
    json_decref(r->best);
    json_decref(r->parent);
    json_decref(r->baselines);
}

/* The archive's rows the documents do not carry. */
static enum kevo_status load_archive(struct rep *r, const char *path, char **msg)
{
    struct kevo_archive *a = NULL;
    enum kevo_status st = kevo_archive_open_existing(path, &a, msg);

    if (!st)
        st = load_rows(r, a, msg);
    if (!st && (st = kevo_archive_llm_rows(a, r->run_id, &r->llm, &r->n_llm)) != KEVO_OK)
        *msg = kevo_strdup(kevo_archive_errmsg(a));
    kevo_archive_close(a);
    if (!st)
        st = number_evals(r);
    wall_unit(r);
    if (!st)
        st = load_models(r);
    if (!st)
        st = load_keys(r);
    return st;
}

/* The baselines file (bench/torch_baseline.py) into r, or why not. */
static enum kevo_status load_baselines(struct rep *r, const char *path, char **msg)
{
    json_error_t e;

    r->baselines = json_load_file(path, 0, &e);
    if (r->baselines && json_is_object(json_object_get(r->baselines, "tasks")))
        return KEVO_OK;
    *msg = kevo_strdupf("%s:%d: not a baselines file (bench/torch_baseline.py writes one): %s",
                        path, e.line, r->baselines ? "no \"tasks\" object" : e.text);
    return KEVO_ERR_INVALID;
}

/* ---- the page ---- */

/* A line of the facts table: a label and an escaped value. */
static void fact(struct kevo_svg *w, const char *label, const char *value)
{
    kevo_svg_addf(w, "<tr><td>%s</td>", label);
    rep_td(w, value ? value : "-", 0);
    kevo_svg_add(w, "</tr>\n");
}

/* "cand 13 (flags): 203.18 µs, 65% of SOL, 22.51x the reference" or why there is none. */
static void best_line(const struct rep *r, char *out, size_t n)
{
    const struct rep_cand *b = rep_cand_find(r, r->best_id);
    char t[32], s[32], x[32];

    if (!b) {
        snprintf(out, n, "none: no candidate was correct");
        return;
    }
    kevo_svg_fmt_time(b->score, t, sizeof t);
    kevo_svg_fmt_pct(b->sol, s, sizeof s);
    rep_fmt_x(b->speedup, x, sizeof x);
    snprintf(out, n, "cand %lld (%s): %s, %s of SOL, %s the reference (geomeans)",
             (long long)b->id, b->op, t, s, x);
}

/* The heading, the facts of the run and the table of contents. */
static void header(struct kevo_svg *w, const struct rep *r)
{
    const json_t *dev = json_object_get(r->calib, "device");
    const char *task = json_string_value(json_object_get(r->run, "task"));
    char line[512], t[32];

    kevo_svg_addf(w, "<h1>kevo run %lld: ", (long long)r->run_id);
    kevo_svg_esc(w, task ? task : "?");
    kevo_svg_add(w, "</h1>\n<table class=\"facts\">\n");
    fact(w, "task", task);
    fact(w, "task file", json_string_value(json_object_get(r->run, "path")));
    snprintf(line, sizeof line, "%s%s%s",
             rep_str(r->run, "status", "?"),
             r->report ? ", stopped by " : "",
             r->report ? rep_str(r->report, "reason", "?") : "");
    fact(w, "status", line);
    snprintf(line, sizeof line, "%s (%s)", rep_str(dev, "name", "?"),
             rep_str(dev, "backend", "?"));
    fact(w, "device", dev ? line : "not recorded (the run has no report yet)");
    snprintf(line, sizeof line, "%lld candidates, %lld evaluated, %lld ok",
             (long long)json_integer_value(json_object_get(r->run, "candidates")),
             (long long)json_integer_value(json_object_get(r->run, "evaluated")),
             (long long)json_integer_value(json_object_get(r->run, "ok")));
    fact(w, "candidates", line);
    best_line(r, line, sizeof line);
    fact(w, "best", line);
    kevo_svg_fmt_time(rep_get(r->report, "elapsed_s"), t, sizeof t);
    fact(w, "wall time", t);
    kevo_svg_add(w, "</table>\n<nav><a href=\"#progress\">progress</a><a href=\"#roofline\">"
                    "roofline</a><a href=\"#lineage\">lineage</a><a href=\"#operators\">"
                    "operators and models</a><a href=\"#verdicts\">verdicts</a>"
                    "<a href=\"#best\">best kernel</a></nav>\n");
}

static enum kevo_status write_page(const struct rep *r, char **out_html)
{
    struct kevo_svg w;
    const char *task = json_string_value(json_object_get(r->run, "task"));
    char title[300];

    kevo_svg_init(&w, REP_MAX_BYTES);
    snprintf(title, sizeof title, "kevo run %lld: %s", (long long)r->run_id, task ? task : "?");
    rep_page_open(&w, title);
    header(&w, r);
    rep_progress(&w, r);
    rep_roofline(&w, r);
    rep_lineage(&w, r);
    rep_operators(&w, r);
    rep_verdicts(&w, r);
    rep_best(&w, r);
    rep_page_close(&w);
    return kevo_svg_take(&w, out_html);
}

enum kevo_status kevo_report_html(const char *archive, int64_t run, const char *baselines,
                                  char **out_html, char **out_msg)
{
    struct rep r;
    char def[PATH_MAX];
    enum kevo_status st = KEVO_OK;

    *out_html = NULL;
    *out_msg = NULL;
    memset(&r, 0, sizeof r);
    r.run_id = run;
    if (!archive && (st = kevo_run_default_archive(def, sizeof def)) != KEVO_OK) {
        *out_msg = kevo_strdup("no archive path: set KEVO_ARCHIVE or HOME");
        return st;
    }
    archive = archive ? archive : def;
    if (baselines)
        st = load_baselines(&r, baselines, out_msg);
    if (!st)
        st = load_docs(&r, archive, out_msg);
    if (!st)
        st = load_cands(&r);
    if (!st)
        st = load_archive(&r, archive, out_msg);
    if (!st)
        st = write_page(&r, out_html);
    if (st && !*out_msg)
        *out_msg = kevo_strdupf("report of run %lld: %s", (long long)run, kevo_status_name(st));
    rep_clear(&r);
    return st;
}

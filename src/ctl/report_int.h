/*
 * report_int.h - what the files of `kevo report` share (kevo.h: kevo_report_html,
 * kevo_report_bench_html; docs/report.md). report.c reads a run out of the archive into
 * struct rep and writes the page; its sections are drawn by report_plots.c (progress,
 * roofline, operators and models, verdicts) and report_best.c (the lineage of the best
 * and the best kernel); report_bench.c writes the page of a bench document; all of them
 * write HTML through report_page.c, which is below them all.
 *
 * Everything in the page that comes from a task, a candidate, a model or a file is
 * escaped (kevo_svg_esc): the report may be opened by someone who did not write it.
 * Nothing is loaded from anywhere: inline CSS and SVG, no script, no link.
 */
#ifndef KEVO_REPORT_INT_H
#define KEVO_REPORT_INT_H

#include "kevo.h"
#include "base/svg.h"
#include "ctl/archive.h"

#include <jansson.h>
#include <stdint.h>

#define REP_MAX_BYTES (256u << 20)   /* the page's cap: a run of 100k candidates fits */

/* One candidate as the report reads it. */
struct rep_cand {
    int64_t id, parent1, parent2;    /* 0: none */
    const char *op, *verdict;        /* borrowed from row; verdict "pending" before one */
    const char *message;             /* borrowed; NULL for an ok or pending one */
    char *model;                     /* "provider:name" of the LLM call it came from (no URL);
                                        NULL when no model wrote it */
    double score, sol, speedup;      /* geomeans; NAN when not measured */
    double t;                        /* seconds from the run's start to its verdict; NAN */
    int n_eval;                      /* its place among the verdicts, 1 first; 0 pending */
    int key;                         /* its colour: index into rep.keys */
    json_t *row;                     /* borrowed: its entry of the candidates document */
    json_t *metrics;                 /* owned: its stored metrics ({"workloads": [...]}) */
};

/* A run, read once, and what its sections need. */
struct rep {
    int64_t run_id, best_id;         /* best_id 0: no ok candidate */
    json_t *run;                     /* kevo_runs_json's document */
    json_t *cands;                   /* kevo_runs_cands_json's document */
    json_t *best, *parent;           /* kevo_show_json of the best and its first parent */
    json_t *baselines;               /* bench/torch_baseline.py's file, or NULL */
    const json_t *report;            /* borrowed: run.report (NULL while it has none) */
    const json_t *calib;             /* borrowed: report.calibration, or NULL */
    struct rep_cand *c;              /* by id, oldest first */
    int n;
    struct rep_cand **by_eval;       /* the candidates with a verdict, in its order */
    int n_done;
    struct kevo_llm_row *llm;        /* the run's LLM calls, oldest first */
    int n_llm;
    double started;                  /* Unix seconds */
    double wall_div;                 /* seconds per unit of the wall-time axes: 1, 60 or
                                        3600, for ticks round in the unit they show */
    char **keys;                     /* colour keys: "op" or "op · model", first seen first */
    int n_keys;
};

/* ---- report_page.c: the page ---- */

/* <!doctype html> ... <body> with the page's CSS; title escaped. */
void rep_page_open(struct kevo_svg *w, const char *title);
void rep_page_close(struct kevo_svg *w);
/* <section id=ID><h2>TITLE</h2> (kevo's text); rep_section_close ends it. */
void rep_section(struct kevo_svg *w, const char *id, const char *title);
void rep_section_close(struct kevo_svg *w);
/* <p class="note">TEXT</p>, TEXT escaped. */
void rep_note(struct kevo_svg *w, const char *text);
/* A table cell: <td>TEXT</td> escaped; num 1: right-aligned. */
void rep_td(struct kevo_svg *w, const char *text, int num);
/* A table cell of a formatted number (fmt: kevo_svg_fmt_*; NAN or a negative count: "-"). */
void rep_td_num(struct kevo_svg *w, double v, void (*fmt)(double, char *, size_t));
void rep_td_int(struct kevo_svg *w, int64_t v);
/* A legend in HTML: one swatch and escaped name per key, colours kevo_svg_color(i). */
void rep_legend(struct kevo_svg *w, char *const *names, int n);
/* A model's name as shown: the spec without "@URL" (a report names no address) into out. */
void rep_model_name(const char *model, char *out, size_t n);
/* Speedups: "3.42x"; "-" when not finite or not positive. */
void rep_fmt_x(double v, char *out, size_t n);
/* Rates: "2.6 TB/s", "1.1 PFLOP/s"; and plain numbers ("0.1", "250", "1e+04"). */
void rep_fmt_bps(double v, char *out, size_t n);
void rep_fmt_flops(double v, char *out, size_t n);
void rep_fmt_plain(double v, char *out, size_t n);
/* The name a candidate's colour stands for: "op", or "op · model" (into out). */
void rep_cand_key(const struct rep_cand *c, char *out, size_t n);
/* A workload's sizes ({"M": 4096, ...}) as "M=4096 N=8192" into out ("" for none). */
void rep_fmt_sizes(const json_t *sizes, char *out, size_t n);
/* The candidate with id (binary search: r->c is by id), or NULL. */
const struct rep_cand *rep_cand_find(const struct rep *r, int64_t id);
/* A JSON number, or NAN when v is not one. */
double rep_num(const json_t *v);
double rep_get(const json_t *o, const char *key);   /* rep_num of a member */
/* A string member of o, or dflt when it is not one. */
const char *rep_str(const json_t *o, const char *key, const char *dflt);

/* ---- report_plots.c ---- */
void rep_progress(struct kevo_svg *w, const struct rep *r);
void rep_roofline(struct kevo_svg *w, const struct rep *r);
void rep_operators(struct kevo_svg *w, const struct rep *r);
void rep_verdicts(struct kevo_svg *w, const struct rep *r);

/* ---- report_best.c ---- */
void rep_lineage(struct kevo_svg *w, const struct rep *r);
void rep_best(struct kevo_svg *w, const struct rep *r);

#endif

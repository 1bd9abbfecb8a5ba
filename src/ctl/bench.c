/*
 * bench - `kevo bench`: evaluate a suite of tasks (their references, or the candidates
 * found for them) and score the suite (docs/bench.md). Controller code on top of the
 * public kevo_eval_json: one evaluation per task, in file order, each in its own worker,
 * so one task that kills its worker or fails to parse costs that task only.
 *
 * Scores per task are geometric means over its visible workloads; suite scores follow
 * KernelBench (correctness, fast_p) and SOL-ExecBench (the SOL score
 * S = 1/(1 + (T - T_sol)/(T_base - T_sol))).
 */
#include "ctl/bench.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/result.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct paths {
    char **v;
    int n, cap;
};

static enum kevo_status paths_add(struct paths *p, const char *s)
{
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        char **v = kevo_reallocarray(p->v, (size_t)cap, sizeof *v);
        if (!v)
            return KEVO_ERR_NOMEM;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n] = kevo_strdup(s);
    return p->v[p->n++] ? KEVO_OK : KEVO_ERR_NOMEM;
}

static void paths_free(struct paths *p)
{
    for (int i = 0; i < p->n; i++)
        kevo_free(p->v[i]);
    kevo_free(p->v);
    memset(p, 0, sizeof *p);
}

static int has_ext(const char *name)
{
    size_t n = strlen(name);
    return (n > 3 && strcmp(name + n - 3, ".cu") == 0) || (n > 2 && strcmp(name + n - 2, ".c") == 0);
}

static int is_dir(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Task files under path (a file, or a directory walked in name order). */
static enum kevo_status collect(const char *path, struct paths *out, char **msg)
{
    struct dirent **ents = NULL;
    enum kevo_status st = KEVO_OK;
    int n;

    if (!is_dir(path)) {
        if (access(path, R_OK) != 0) {
            *msg = kevo_strdup(path);
            return KEVO_ERR_NOTFOUND;
        }
        return paths_add(out, path);
    }
    n = scandir(path, &ents, NULL, alphasort);
    if (n < 0) {
        *msg = kevo_strdup(path);
        return KEVO_ERR_IO;
    }
    for (int i = 0; i < n; i++) {
        const char *nm = ents[i]->d_name;
        char *sub = NULL;
        if (!st && nm[0] != '.' && (sub = kevo_strdupf("%s/%s", path, nm)) != NULL) {
            if (is_dir(sub) || has_ext(nm))
                st = collect(sub, out, msg);
        } else if (!st && nm[0] != '.') {
            st = KEVO_ERR_NOMEM;
        }
        kevo_free(sub);
        kevo_free(ents[i]);   /* scandir's: kevo_free is free() */
    }
    kevo_free(ents);
    return st;
}

/* Base name without directory and extension. */
static void stem(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, n, "%s", b);
    char *dot = strrchr(out, '.');
    if (dot)
        *dot = '\0';
}

/* Candidates for task `name` in dir: DIR/NAME.cu|.c and every file under DIR/NAME/. */
static enum kevo_status find_cands(const char *dir, const char *name, const char *ext,
                                   struct paths *out)
{
    char file[4096];
    char *sub = kevo_strdupf("%s/%s", dir, name);
    enum kevo_status st = KEVO_OK;
    char *msg = NULL;

    if (!sub)
        return KEVO_ERR_NOMEM;
    snprintf(file, sizeof file, "%s%s", sub, ext);
    if (access(file, R_OK) == 0)
        st = paths_add(out, file);
    if (!st && is_dir(sub))
        st = collect(sub, out, &msg);
    kevo_free(msg);
    kevo_free(sub);
    return st;
}

/* ---- baselines ---- */

/* The baseline entry of workload w of task `name` (same index) when its sizes match. */
static json_t *baseline_of(json_t *bl, const char *name, const struct kevo_result_wl *w)
{
    json_t *t = json_object_get(json_object_get(bl, "tasks"), name);
    size_t i;
    json_t *b;

    json_array_foreach(json_object_get(t, "workloads"), i, b) {
        if (json_integer_value(json_object_get(b, "index")) == w->index &&
            json_equal(json_object_get(b, "sizes"), w->sizes))
            return b;
    }
    return NULL;
}

/* ---- per task ---- */

/*
 * The verdict of a bench entry whose task was not judged: kevo could not evaluate it (a
 * file that does not parse, a worker that cannot start: failed_entry) or its result named
 * no verdict. It is the bench document's own value (docs/bench.md, kevo.h), deliberately
 * not a verdict of enum kevo_verdict: nothing about a candidate was decided.
 */
#define BENCH_ERROR "error"

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

/* A figure of a decoded result as the bench reads it: a non-finite one (the worker's
 * "nan"/"inf", which the decoder reads as NaN/Inf) is "not measured", 0. */
static double fin(double v)
{
    return isfinite(v) ? v : 0.0;
}

/* SOL-ExecBench's score of time t against base, both above the floor tsol; -1 if undefined. */
static double sol_score(double t, double base, double tsol)
{
    if (!(t > 0) || !(base > tsol) || !(tsol > 0))
        return -1.0;
    return 1.0 / (1.0 + (t - tsol) / (base - tsol));
}

struct gm {   /* a geometric mean under construction */
    double log_sum;
    int n;
};

static void gm_add(struct gm *g, double v)
{
    if (v > 0 && isfinite(v)) {
        g->log_sum += log(v);
        g->n++;
    }
}

static double gm_val(const struct gm *g) { return g->n ? exp(g->log_sum / g->n) : 0.0; }

/* The row of one workload of the subject's result, with baseline ratios. */
static json_t *wl_row(const struct kevo_result_wl *w, json_t *bl, const char *name, int is_ref,
                      struct gm *g)
{
    double t = fin(w->time.median_s);
    double tr = is_ref ? t : fin(w->ref_time.median_s);
    double tsol = fin(w->t_sol_s), sol = fin(w->sol_fraction);
    json_t *row = json_pack("{s:I, s:O, s:s}", "index", (json_int_t)w->index, "sizes",
                            w->sizes ? w->sizes : json_null(), "verdict",
                            kevo_verdict_name(w->verdict));
    json_t *b = bl ? baseline_of(bl, name, w) : NULL;
    double eager = jnum(b, "eager_s"), comp = jnum(b, "compile_s");

    json_object_set_new(row, "time_s", json_real(t));
    json_object_set_new(row, "ref_time_s", json_real(tr));
    json_object_set_new(row, "t_sol_s", json_real(tsol));
    json_object_set_new(row, "sol_fraction", json_real(sol));
    if (!is_ref)
        gm_add(&g[0], t > 0 ? tr / t : 0);
    gm_add(&g[1], sol);
    if (eager > 0 && t > 0) {
        json_object_set_new(row, "eager_s", json_real(eager));
        json_object_set_new(row, "speedup_eager", json_real(eager / t));
        gm_add(&g[2], eager / t);
    }
    if (comp > 0 && t > 0) {
        json_object_set_new(row, "compile_s", json_real(comp));
        json_object_set_new(row, "speedup_compile", json_real(comp / t));
        gm_add(&g[3], comp / t);
    }
    /* the base is PyTorch eager when known, else the reference (never the subject itself) */
    double s = sol_score(t, eager > 0 ? eager : is_ref ? 0.0 : tr, tsol);
    if (s >= 0) {
        json_object_set_new(row, "sol_score", json_real(s));
        g[4].log_sum += s;   /* an arithmetic mean: S is 0..1 and may be near 0 */
        g[4].n++;
    }
    return row;
}

/* Sum of the medians of the subject over its workloads (to pick the best candidate). */
static double total_time(const struct kevo_result *r)
{
    double s = 0;
    for (int i = 0; i < r->n_wl; i++)
        s += fin(r->wl[i].time.median_s);
    return s;
}

/* The result to score: the best `ok` candidate, else the first candidate, else the
 * reference when there were no candidates. */
static json_t *pick_subject(json_t *doc, int *is_ref)
{
    json_t *cands = json_object_get(doc, "candidates"), *best = NULL, *c;
    double best_t = 0;
    size_t i;

    *is_ref = 0;
    if (!json_array_size(cands)) {
        *is_ref = 1;
        return json_object_get(doc, "reference");
    }
    json_array_foreach(cands, i, c) {
        struct kevo_result r;
        char *why = NULL;
        if (kevo_result_decode(c, &r, &why) == KEVO_OK && r.verdict == KEVO_VERDICT_OK &&
            (!best || total_time(&r) < best_t)) {
            best = c;
            best_t = total_time(&r);
        }
        kevo_result_clear(&r);
        kevo_free(why);
    }
    return best ? best : json_array_get(cands, 0);
}

/* The bench entry of one evaluated task. */
static json_t *task_entry(json_t *doc, json_t *bl)
{
    int is_ref;
    json_t *sub = pick_subject(doc, &is_ref);
    const char *name = json_string_value(json_object_get(json_object_get(doc, "task"), "name"));
    json_t *rows = json_array();
    struct gm g[5] = { { 0, 0 } };
    struct kevo_result r;
    char *why = NULL;
    /* A subject without a verdict of enum kevo_verdict (no verdict, an unknown name) was
     * not judged: its entry says BENCH_ERROR, as a task kevo could not evaluate does. */
    int judged = kevo_result_decode(sub, &r, &why) == KEVO_OK;

    for (int i = 0; i < r.n_wl; i++)
        json_array_append_new(rows, wl_row(&r.wl[i], bl, name ? name : "", is_ref, g));
    const char *message = judged ? r.message : json_string_value(json_object_get(sub, "message"));
    const char *who = is_ref ? "reference" : json_string_value(json_object_get(sub, "path"));
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:o}", "task", name ? name : "?", "subject",
                          who ? who : "?", "verdict",
                          judged ? kevo_verdict_name(r.verdict) : BENCH_ERROR, "message",
                          message ? message : "", "workloads", rows);
    kevo_result_clear(&r);
    kevo_free(why);
    if (g[0].n)
        json_object_set_new(e, "speedup", json_real(gm_val(&g[0])));
    json_object_set_new(e, "sol_fraction", json_real(gm_val(&g[1])));
    if (g[2].n)
        json_object_set_new(e, "speedup_eager", json_real(gm_val(&g[2])));
    if (g[3].n)
        json_object_set_new(e, "speedup_compile", json_real(gm_val(&g[3])));
    if (g[4].n)
        json_object_set_new(e, "sol_score", json_real(g[4].log_sum / g[4].n));
    return e;
}

/* ---- the suite ---- */

/*
 * Is bench entry e (task_entry, failed_entry) ok? Its "verdict" is its subject's verdict
 * name, or BENCH_ERROR: the bench's own marker for a task that was not judged, which is no
 * verdict of enum kevo_verdict. kevo_verdict_parse refuses it (KEVO_ERR_NOTFOUND) like any
 * name it does not know, and such a task is never ok.
 */
static int is_ok(json_t *e)
{
    const char *name = json_string_value(json_object_get(e, "verdict"));
    enum kevo_verdict v;

    if (!name || kevo_verdict_parse(name, &v) != KEVO_OK)
        return 0;   /* BENCH_ERROR: nothing was judged */
    return v == KEVO_VERDICT_OK;
}

/* Fraction of tasks that are ok and whose `key` speedup exceeds p (0 tasks: 0). */
static double fast_p(json_t *tasks, const char *key, double p)
{
    size_t i, n = json_array_size(tasks), k = 0;
    json_t *e;
    json_array_foreach(tasks, i, e)
        k += is_ok(e) && jnum(e, key) > p;
    return n ? (double)k / (double)n : 0.0;
}

static json_t *fast_obj(json_t *tasks, const char *key)
{
    return json_pack("{s:f, s:f, s:f}", "1", fast_p(tasks, key, 1.0), "1.5",
                     fast_p(tasks, key, 1.5), "2", fast_p(tasks, key, 2.0));
}

static json_t *scores(json_t *tasks, int with_cands, int with_bl)
{
    struct gm sol = { 0, 0 };
    double s_sum = 0;
    int s_n = 0, n_ok = 0;
    size_t i, n = json_array_size(tasks);
    json_t *e;

    json_array_foreach(tasks, i, e) {
        n_ok += is_ok(e);
        if (is_ok(e))
            gm_add(&sol, jnum(e, "sol_fraction"));
        if (is_ok(e) && json_object_get(e, "sol_score")) {
            s_sum += jnum(e, "sol_score");
            s_n++;
        }
    }
    json_t *s = json_pack("{s:i, s:i, s:f, s:f}", "tasks", (int)n, "ok", n_ok, "correctness",
                          n ? (double)n_ok / (double)n : 0.0, "geomean_sol_fraction",
                          gm_val(&sol));
    if (with_cands)
        json_object_set_new(s, "fast_p_vs_reference", fast_obj(tasks, "speedup"));
    if (with_bl) {
        json_object_set_new(s, "fast_p_vs_eager", fast_obj(tasks, "speedup_eager"));
        json_object_set_new(s, "fast_p_vs_compile", fast_obj(tasks, "speedup_compile"));
    }
    if (s_n)
        json_object_set_new(s, "mean_sol_score", json_real(s_sum / s_n));
    if (s_n)
        json_object_set_new(s, "sol_score_base", json_string(with_bl ? "pytorch eager"
                                                                     : "reference"));
    return s;
}

/* The entry of a task kevo could not evaluate (bad file, no worker). */
static json_t *failed_entry(const char *path, enum kevo_status st, const char *msg)
{
    char name[256];
    stem(path, name, sizeof name);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:[]}", "task", name, "path", path, "subject",
                     "none", "verdict", BENCH_ERROR, "message", msg ? msg : kevo_status_name(st),
                     "workloads");
}

/* Evaluate one task file and append its entry. */
static enum kevo_status bench_one(const char *path, const struct kevo_bench_opts *o, json_t *bl,
                                  json_t *tasks, json_t **last_doc)
{
    struct paths cands = { 0 };
    char name[256], *json = NULL, *msg = NULL;
    const char *ext = strrchr(path, '.');
    enum kevo_status st = KEVO_OK;
    json_t *doc = NULL;

    stem(path, name, sizeof name);
    if (o->cand_dir)
        st = find_cands(o->cand_dir, name, ext ? ext : "", &cands);
    if (!st)
        st = kevo_eval_json(path, (const char *const *)cands.v, cands.n, &o->eval, &json, &msg);
    if (!st && !(doc = json_loads(json, 0, NULL)))
        st = KEVO_ERR_WORKER;
    if (st == KEVO_ERR_NOMEM) {
        paths_free(&cands);
        kevo_free(msg);
        return st;
    }
    if (st) {
        KEVO_WARN("bench: %s: %s", path, msg ? msg : kevo_status_name(st));
        json_array_append_new(tasks, failed_entry(path, st, msg));
    } else {
        json_t *e = task_entry(doc, bl);
        json_object_set_new(e, "path", json_string(path));
        json_array_append_new(tasks, e);
        json_decref(*last_doc);
        *last_doc = json_incref(doc);
    }
    json_decref(doc);
    kevo_free(json);
    kevo_free(msg);
    paths_free(&cands);
    return KEVO_OK;
}

static enum kevo_status load_baselines(const char *path, json_t **out, char **msg)
{
    json_error_t e;
    *out = json_load_file(path, 0, &e);
    if (*out && json_is_object(json_object_get(*out, "tasks")))
        return KEVO_OK;
    *msg = kevo_strdupf("%s:%d: not a baselines file (bench/torch_baseline.py writes one): %s",
                        path, e.line, *out ? "no \"tasks\" object" : e.text);
    json_decref(*out);
    *out = NULL;
    return KEVO_ERR_INVALID;
}

void kevo_bench_opts_default(struct kevo_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    kevo_eval_opts_default(&o->eval);
}

enum kevo_status kevo_bench_json(const char *const *paths, int n_paths,
                                 const struct kevo_bench_opts *o, kevo_bench_progress_fn progress,
                                 void *user, char **out_json, char **out_msg)
{
    struct paths files = { 0 };
    json_t *bl = NULL, *tasks = json_array(), *last = NULL, *doc = NULL;
    enum kevo_status st = tasks ? KEVO_OK : KEVO_ERR_NOMEM;
    char *msg = NULL;

    *out_json = NULL;
    if (out_msg)
        *out_msg = NULL;
    for (int i = 0; i < n_paths && !st; i++)
        st = collect(paths[i], &files, &msg);
    if (!st && !files.n)
        st = KEVO_ERR_NOTFOUND;
    if (!st && o->baselines)
        st = load_baselines(o->baselines, &bl, &msg);
    for (int i = 0; i < files.n && !st; i++) {
        if (progress)
            progress(user, i, files.n, files.v[i]);
        st = bench_one(files.v[i], o, bl, tasks, &last);
    }
    if (st)
        goto out;
    json_t *calib = json_object_get(last, "calibration");
    doc = json_pack("{s:s, s:O, s:s?, s:s?, s:O, s:o}", "kevo_version", KEVO_VERSION,
                    "calibration", calib ? calib : json_null(),
                    "candidates_dir", o->cand_dir, "baselines", o->baselines, "tasks", tasks,
                    "scores", scores(tasks, o->cand_dir != NULL, bl != NULL));
    *out_json = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
    st = *out_json ? KEVO_OK : KEVO_ERR_NOMEM;
out:
    if (st && out_msg && !*out_msg) {
        const char *why = msg ? msg : st == KEVO_ERR_NOTFOUND ? "no task files (.cu, .c) found"
                                                              : NULL;
        *out_msg = kevo_strdupf("bench: %s%s%s", kevo_status_name(st), why ? ": " : "",
                                why ? why : "");
    }
    kevo_free(msg);
    json_decref(doc);
    json_decref(tasks);
    json_decref(last);
    json_decref(bl);
    paths_free(&files);
    return st;
}

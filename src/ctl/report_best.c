/*
 * report_best - the best candidate of a run in `kevo report` (report_int.h): its lineage
 * as a tree (every ancestor through both parents, the oldest at the top, the operator on
 * each edge and the speedup in each node) and the kernel itself: its figures per workload
 * against the reference (and PyTorch, given a baselines file), the held-out gate's result,
 * its diff against its first parent and its source.
 */
#include "ctl/profile.h"
#include "ctl/report_int.h"

#include "base/diff.h"
#include "base/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TREE_MAX 64          /* ancestors drawn; older ones are counted in a note */
#define NODE_W 150
#define NODE_H 38
#define GAP_X 22
#define ROW_H 74

/* ---- the lineage ---- */

struct node {
    const struct rep_cand *c;
    int level;               /* 0: the best; a parent stands at least one level above */
    double x;                /* the centre of its box across, in pixels */
    double key;              /* where its children stand across (placing its level) */
};

static int node_of(const struct node *nd, int n, int64_t id)
{
    for (int i = 0; id && i < n; i++)
        if (nd[i].c->id == id)
            return i;
    return -1;
}

static int newest_first(const void *pa, const void *pb)
{
    const struct node *a = pa, *b = pb;

    return a->c->id > b->c->id ? -1 : a->c->id < b->c->id;
}

/* The best and its ancestors, newest first (parents have smaller ids than their children),
 * at most TREE_MAX; *left_out counts the ones past the cap. */
static int ancestors(const struct rep *r, struct node *nd, int *left_out)
{
    int n = 0;

    *left_out = 0;
    nd[n++] = (struct node){ rep_cand_find(r, r->best_id), 0, 0, 0 };
    for (int i = 0; i < n; i++) {
        int64_t par[2] = { nd[i].c->parent1, nd[i].c->parent2 };
        for (int k = 0; k < 2; k++) {
            const struct rep_cand *p = rep_cand_find(r, par[k]);
            if (!p || node_of(nd, n, p->id) >= 0)
                continue;
            if (n == TREE_MAX)
                (*left_out)++;
            else
                nd[n++] = (struct node){ p, 0, 0, 0 };
        }
    }
    qsort(nd, (size_t)n, sizeof *nd, newest_first);
    return n;
}

/* Is node j a parent of node i? */
static int parent_of(const struct node *nd, int j, int i)
{
    return nd[j].c->id == nd[i].c->parent1 || nd[j].c->id == nd[i].c->parent2;
}

/* Levels: each parent one above the highest of its children. The top level's index. */
static int levels(struct node *nd, int n)
{
    int top = 0;

    for (int i = 0; i < n; i++)              /* newest first: children before parents */
        for (int j = 0; j < n; j++)
            if (parent_of(nd, j, i) && nd[j].level < nd[i].level + 1)
                nd[j].level = nd[i].level + 1 < TREE_MAX ? nd[i].level + 1 : TREE_MAX - 1;
    for (int i = 0; i < n; i++)
        top = nd[i].level > top ? nd[i].level : top;
    return top;
}

static int by_key(const void *pa, const void *pb)
{
    const struct node *a = *(struct node *const *)pa, *b = *(struct node *const *)pb;

    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return a->c->id < b->c->id ? -1 : a->c->id > b->c->id;
}

/* Across: level by level from the best up, each node over the mean of its children (the
 * fewest crossing edges a simple rule gives), each row centred on the widest. *width: the
 * widest row's pixels. */
static void place(struct node *nd, int n, int top, int *width)
{
    struct node *row[TREE_MAX];
    int widest = 1;

    for (int l = 0; l <= top; l++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            k += nd[i].level == l;
        widest = k > widest ? k : widest;
    }
    *width = 40 + widest * (NODE_W + GAP_X);
    for (int l = 0; l <= top; l++) {
        int k = 0;
        for (int i = 0; i < n; i++) {
            double sum = 0;
            int m = 0;
            if (nd[i].level != l)
                continue;
            for (int j = 0; j < n; j++)
                if (parent_of(nd, i, j)) {
                    sum += nd[j].x;
                    m++;
                }
            nd[i].key = m ? sum / m : 0;
            row[k++] = &nd[i];
        }
        qsort(row, (size_t)k, sizeof *row, by_key);
        for (int s = 0; s < k; s++)
            row[s]->x = 20 + (widest - k) * (NODE_W + GAP_X) / 2.0 + s * (NODE_W + GAP_X) +
                        NODE_W / 2.0;
    }
}

/* The centre of node i's box. */
static void centre(const struct node *nd, int i, int top, double *x, double *y)
{
    *x = nd[i].x;
    *y = 36 + (top - nd[i].level) * ROW_H + NODE_H / 2.0;
}

/* The edges to each child from its parents, and once per child the operator (and model)
 * that made it, just above the child. */
static void edges(struct kevo_svg *w, const struct node *nd, int n, int top)
{
    for (int i = 0; i < n; i++) {
        int64_t par[2] = { nd[i].c->parent1, nd[i].c->parent2 };
        double x1, y1, x2, y2;
        char key[320];
        int drawn = 0;

        centre(nd, i, top, &x2, &y2);
        for (int k = 0; k < 2; k++) {
            int p = node_of(nd, n, par[k]);
            if (p < 0)
                continue;
            centre(nd, p, top, &x1, &y1);
            kevo_svg_line(w, x1, y1 + NODE_H / 2.0, x2, y2 - NODE_H / 2.0, "#999", 1.5, NULL);
            drawn = 1;
        }
        if (!drawn)
            continue;
        rep_cand_key(nd[i].c, key, sizeof key);
        kevo_svg_text(w, x2 + 6, y2 - NODE_H / 2.0 - 6, "start", 11, 0, 0, "#0550ae", key);
    }
}

static void node_box(struct kevo_svg *w, const struct rep *r, const struct node *nd, int i,
                     int top)
{
    const struct rep_cand *c = nd[i].c;
    double x, y;
    char l1[64], l2[96], sx[32], ss[32];

    centre(nd, i, top, &x, &y);
    kevo_svg_rect(w, x - NODE_W / 2.0, y - NODE_H / 2.0, NODE_W, NODE_H,
                  c->id == r->best_id ? "#fff4c2" : !c->parent1 ? "#f0f0f0" : "#fff",
                  kevo_svg_color(c->key));
    snprintf(l1, sizeof l1, "cand %lld%s", (long long)c->id, c->parent1 ? "" : " (seed)");
    rep_fmt_x(c->speedup, sx, sizeof sx);
    kevo_svg_fmt_pct(c->sol, ss, sizeof ss);
    if (strcmp(c->verdict, "ok") == 0)
        snprintf(l2, sizeof l2, "%s  \xc2\xb7  %s of SOL", sx, ss);
    else
        snprintf(l2, sizeof l2, "%s", c->verdict);
    kevo_svg_text(w, x, y - 3, "middle", 11, 1, 0, NULL, l1);
    kevo_svg_text(w, x, y + 12, "middle", 11, 0, 0, NULL, l2);
}

void rep_lineage(struct kevo_svg *w, const struct rep *r)
{
    struct node nd[TREE_MAX];
    int left_out = 0, n, top, width;
    char s[160];

    rep_section(w, "lineage", "Lineage of the best");
    if (!rep_cand_find(r, r->best_id)) {
        rep_note(w, "No candidate was correct: there is no best to trace.");
        rep_section_close(w);
        return;
    }
    n = ancestors(r, nd, &left_out);
    top = levels(nd, n);
    place(nd, n, top, &width);
    kevo_svg_open(w, width > 480 ? width : 480, 56 + (top + 1) * ROW_H - (ROW_H - NODE_H),
                  "Lineage of the best candidate");
    kevo_svg_text(w, 20, 18, "start", 13, 1, 0, NULL,
                  "The seeds at the top, the best at the bottom");
    edges(w, nd, n, top);
    for (int i = 0; i < n; i++)
        node_box(w, r, nd, i, top);
    kevo_svg_close(w);
    rep_note(w, "Each node is a candidate with its speedup over the reference and its fraction "
                "of SOL (geomeans); each edge carries the operator (or the model) that made the "
                "child from its parent; a crossover has two parents.");
    if (left_out) {
        snprintf(s, sizeof s, "%d older ancestors are not drawn.", left_out);
        rep_note(w, s);
    }
    rep_section_close(w);
}

/* ---- the best kernel ---- */

/* The baseline entry of the task's workload index with these sizes, or NULL. */
static const json_t *baseline(const struct rep *r, json_int_t index, const json_t *sizes)
{
    const char *task = rep_str(r->run, "task", "");
    json_t *t = json_object_get(json_object_get(r->baselines, "tasks"), task), *b;
    size_t i;

    json_array_foreach(json_object_get(t, "workloads"), i, b)
        if (json_integer_value(json_object_get(b, "index")) == index &&
            json_equal(json_object_get(b, "sizes"), (json_t *)sizes))
            return b;
    return NULL;
}

/* The best's metrics of workload index (GB/s, TFLOP/s), or NULL. */
static const json_t *metrics(const struct rep *r, json_int_t index)
{
    const struct rep_cand *b = rep_cand_find(r, r->best_id);
    json_t *m;
    size_t i;

    json_array_foreach(json_object_get(b ? b->metrics : NULL, "workloads"), i, m)
        if (json_integer_value(json_object_get(m, "index")) == index)
            return m;
    return NULL;
}

/* The reference's time on workload index (NAN: not known). */
static double ref_time(const struct rep *r, json_int_t index)
{
    json_t *w;
    size_t i;

    json_array_foreach(json_object_get(r->report, "reference"), i, w)
        if (json_integer_value(json_object_get(w, "index")) == index &&
            !json_is_true(json_object_get(w, "holdout")))
            return rep_get(json_object_get(w, "time"), "median_s");
    return NAN;
}

static void wl_row(struct kevo_svg *w, const struct rep *r, const json_t *wl)
{
    json_int_t idx = json_integer_value(json_object_get(wl, "index"));
    const json_t *m = metrics(r, idx), *bl = baseline(r, idx, json_object_get(wl, "sizes"));
    double t = rep_get(wl, "time_s"), rt = ref_time(r, idx);
    double eager = rep_get(bl, "eager_s"), comp = rep_get(bl, "compile_s");
    char sz[160], name[200];

    rep_fmt_sizes(json_object_get(wl, "sizes"), sz, sizeof sz);
    snprintf(name, sizeof name, "%lld [%s]", (long long)idx, sz);
    kevo_svg_add(w, "<tr>");
    rep_td(w, name, 0);
    rep_td_num(w, rt, kevo_svg_fmt_time);
    rep_td_num(w, t, kevo_svg_fmt_time);
    rep_td_num(w, t > 0 ? rt / t : NAN, rep_fmt_x);
    rep_td_num(w, rep_get(wl, "sol_fraction"), kevo_svg_fmt_pct);
    rep_td_num(w, rep_get(m, "gbps") * 1e9, rep_fmt_bps);
    rep_td_num(w, rep_get(m, "tflops") * 1e12, rep_fmt_flops);
    if (r->baselines) {
        rep_td_num(w, eager, kevo_svg_fmt_time);
        rep_td_num(w, t > 0 && eager > 0 ? eager / t : NAN, rep_fmt_x);
        rep_td_num(w, comp, kevo_svg_fmt_time);
        rep_td_num(w, t > 0 && comp > 0 ? comp / t : NAN, rep_fmt_x);
    }
    kevo_svg_add(w, "</tr>\n");
}

static void wl_table(struct kevo_svg *w, const struct rep *r)
{
    json_t *wl;
    size_t i;

    kevo_svg_add(w, "<table><tr><th>workload</th><th>reference</th><th>best</th>"
                    "<th>speedup</th><th>of SOL</th><th>bandwidth</th><th>throughput</th>");
    if (r->baselines)
        kevo_svg_add(w, "<th>PyTorch eager</th><th>vs eager</th><th>torch.compile</th>"
                        "<th>vs compile</th>");
    kevo_svg_add(w, "</tr>\n");
    json_array_foreach(json_object_get(r->best, "workloads"), i, wl)
        wl_row(w, r, wl);
    kevo_svg_add(w, "</table>\n");
    if (r->baselines)
        rep_note(w, "PyTorch's times come from the baselines file (bench/torch_baseline.py), "
                    "measured apart from this run: compare them as ratios of the same device "
                    "only; a dash where the file has no entry for the workload and its sizes.");
}

/* The held-out gate: the best's verdict on the task's held-out sizes and who failed it. */
static void holdout(struct kevo_svg *w, const struct rep *r)
{
    const json_t *h = json_object_get(r->best, "holdout"), *rej, *e;
    const json_t *fin = json_object_get(r->report, "final");
    size_t i;
    char s[256];

    kevo_svg_add(w, "<h3>Held-out sizes</h3>\n");
    if (json_is_object(h)) {
        const char *v = rep_str(h, "verdict", "?");
        kevo_svg_addf(w, "<p><span class=\"%s\">", strcmp(v, "ok") == 0 ? "ok" : "bad");
        kevo_svg_esc(w, v);
        kevo_svg_add(w, "</span> ");
        kevo_svg_esc(w, rep_str(h, "message", ""));
        kevo_svg_add(w, "</p>\n");
    } else {
        snprintf(s, sizeof s, "Not tried on held-out sizes (%s).",
                 json_is_object(fin) ? rep_str(fin, "holdout", "?")
                 : r->report ? "the gate passed no candidate" : "the run has not ended");
        rep_note(w, s);
    }
    rej = json_object_get(r->report, "holdout_rejected");
    json_array_foreach((json_t *)rej, i, e) {
        snprintf(s, sizeof s, "cand %lld failed the held-out sizes first: %s -- ",
                 (long long)json_integer_value(json_object_get(e, "id")),
                 rep_str(e, "verdict", "?"));
        kevo_svg_add(w, "<p class=\"note\">");
        kevo_svg_esc(w, s);
        kevo_svg_esc(w, rep_str(e, "message", ""));
        kevo_svg_add(w, "</p>\n");
    }
}

/* One diff line into the page (user: the writer). */
static void diff_line(void *user, enum kevo_diff_op op, const char *line, size_t len)
{
    static const char *const cls[] = { "hunk", NULL, "del", "add" };
    static const char *const mark[] = { "", " ", "-", "+" };
    struct kevo_svg *w = user;

    if (cls[op])
        kevo_svg_addf(w, "<span class=\"%s\">", cls[op]);
    kevo_svg_add(w, mark[op]);
    kevo_svg_escn(w, line, len);
    kevo_svg_add(w, cls[op] ? "</span>" : "\n");
}

static void diff(struct kevo_svg *w, const struct rep *r)
{
    const char *a = rep_str(r->parent, "source", NULL), *b = rep_str(r->best, "source", "");
    char s[160];
    int changed = 0;

    if (!r->parent) {
        rep_note(w, "The best is a seed: it has no parent to compare with.");
        return;
    }
    snprintf(s, sizeof s, "Its diff against its first parent, cand %lld",
             (long long)json_integer_value(json_object_get(r->parent, "id")));
    kevo_svg_add(w, "<h3>");
    kevo_svg_esc(w, s);
    kevo_svg_add(w, "</h3>\n<pre class=\"diff\">");
    if (w->st == KEVO_OK && kevo_diff_lines(a, b, 3, diff_line, w, &changed) != KEVO_OK)
        w->st = KEVO_ERR_NOMEM;
    kevo_svg_add(w, "</pre>\n");
    if (!changed)
        rep_note(w, "The sources are the same: the child differs only in what is not in its "
                    "text.");
}

/* "params {"THREADS":512}  flags ["-O3"]" of the best. */
static void knobs(struct kevo_svg *w, const struct rep *r)
{
    char *p = json_dumps(json_object_get(r->best, "params"), JSON_COMPACT | JSON_ENCODE_ANY);
    char *f = json_dumps(json_object_get(r->best, "flags"), JSON_COMPACT | JSON_ENCODE_ANY);

    kevo_svg_add(w, "<p>params <code>");
    kevo_svg_esc(w, p ? p : "-");
    kevo_svg_add(w, "</code> &nbsp; flags <code>");
    kevo_svg_esc(w, f ? f : "-");
    kevo_svg_add(w, "</code></p>\n");
    kevo_free(p);
    kevo_free(f);
}

/* The best's hardware counters (its stored result's profile: kevo eval --profile, or a
 * run's new best on CUDA, docs/search.md), as the prompts show them, when it has them. */
static void counters(struct kevo_svg *w, const struct rep *r)
{
    const json_t *p = json_object_get(r->best, "profile");
    struct kevo_buf b;

    if (!json_is_object(p))
        return;
    kevo_buf_init(&b, (size_t)1 << 16);
    kevo_profile_text(p, &b);
    if (kevo_buf_str(&b)[0]) {
        kevo_svg_add(w, "<h3>Its hardware counters</h3>\n<pre class=\"src\">");
        kevo_svg_esc(w, kevo_buf_str(&b));
        kevo_svg_add(w, "</pre>\n");
    }
    kevo_buf_free(&b);
}

void rep_best(struct kevo_svg *w, const struct rep *r)
{
    const struct rep_cand *b = rep_cand_find(r, r->best_id);
    char s[256], x[32];

    rep_section(w, "best", "The best kernel");
    if (!b || !r->best) {
        rep_note(w, "No candidate was correct: there is no best kernel.");
        rep_section_close(w);
        return;
    }
    rep_fmt_x(b->speedup, x, sizeof x);
    snprintf(s, sizeof s, "cand %lld, proposed by %s%s%s, %s the reference (geomean)",
             (long long)b->id, b->op, b->model ? " with " : "", b->model ? b->model : "", x);
    kevo_svg_add(w, "<p><b>");
    kevo_svg_esc(w, s);
    kevo_svg_add(w, "</b></p>\n");
    knobs(w, r);
    wl_table(w, r);
    counters(w, r);
    holdout(w, r);
    diff(w, r);
    kevo_svg_add(w, "<h3>Its source</h3>\n<pre class=\"src\">");
    kevo_svg_esc(w, rep_str(r->best, "source", "(not stored as text)"));
    kevo_svg_add(w, "</pre>\n");
    rep_section_close(w);
}

/*
 * show_cmd - candidates as a person reads them: `kevo show CAND` (kevo_show_json), the
 * table of `kevo runs ID --candidates` (kevo_runs_cands_json) and the best of a run's
 * report, for run_cmd.c (docs/cli.md). Every time, SOL fraction and speedup of a
 * candidate as a whole is a geometric mean over the workloads, which matches none of
 * them: it is labelled so, and each workload's own figures come with it.
 */
#include "cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHOWN_MESSAGE 110          /* characters of a failed candidate's message in a table */

/* ---- pieces ---- */

/* "N=4096 M=7" (a workload's sizes) into out. */
static void fmt_sizes(char *out, size_t n, json_t *sizes)
{
    const char *k;
    json_t *v;
    size_t used = 0;

    out[0] = '\0';
    json_object_foreach(sizes, k, v) {
        int w = snprintf(out + used, n - used, "%s%s=%lld", used ? " " : "", k,
                         (long long)json_integer_value(v));
        if (w < 0 || (size_t)w >= n - used)
            break;
        used += (size_t)w;
    }
}

/* A figure of kevo_show_workloads, or "-" when it is null (not measured). */
static void fmt_fig(char *out, size_t n, json_t *o, const char *key, const char *how)
{
    json_t *v = json_object_get(o, key);

    if (!json_is_number(v))
        snprintf(out, n, "-");
    else if (!strcmp(how, "time"))
        cli_fmt_time(out, n, json_number_value(v));
    else if (!strcmp(how, "%"))
        snprintf(out, n, "%.0f%%", 100 * json_number_value(v));
    else
        snprintf(out, n, "%.2fx", json_number_value(v));
}

/* One workload's figures: "761.83 us    3%   0.12x". */
static void fmt_cell(char *out, size_t n, json_t *w)
{
    char t[32], s[16], x[16];

    fmt_fig(t, sizeof t, w, "time_s", "time");
    fmt_fig(s, sizeof s, w, "sol_fraction", "%");
    fmt_fig(x, sizeof x, w, "speedup", "x");
    snprintf(out, n, "%10s %4s %7s", t, s, x);
}

/* Each workload on its own line: "  workload 0 [N=4096]   761.83 us  3% of SOL  0.12x". */
static void print_workloads(json_t *ws, const char *indent)
{
    size_t i;
    json_t *w;

    json_array_foreach(ws, i, w) {
        char sz[160], label[200], t[32], s[16], x[16];
        fmt_sizes(sz, sizeof sz, json_object_get(w, "sizes"));
        snprintf(label, sizeof label, "workload %lld%s%s%s",
                 (long long)json_integer_value(json_object_get(w, "index")), sz[0] ? " [" : "",
                 sz, sz[0] ? "]" : "");
        fmt_fig(t, sizeof t, w, "time_s", "time");
        fmt_fig(s, sizeof s, w, "sol_fraction", "%");
        fmt_fig(x, sizeof x, w, "speedup", "x");
        printf("%s%-26s %10s  %4s of SOL  %7s the reference\n", indent, label, t, s, x);
    }
}

/* "geomean over 2 workloads: 424.29 us, 6% of SOL, 0.22x the reference" */
static void print_geomean(json_t *c, const char *score_key)
{
    char t[32], s[16], x[16];
    size_t n = json_array_size(json_object_get(c, "workloads"));

    fmt_fig(t, sizeof t, c, score_key, "time");
    fmt_fig(s, sizeof s, c, "sol_fraction", "%");
    fmt_fig(x, sizeof x, c, "speedup", "x");
    if (n)
        printf("geomean over %zu workload%s: ", n, n == 1 ? "" : "s");
    else
        printf("geomean over the workloads: ");
    printf("%s, %s of SOL, %s the reference\n", t, s, x);
}

/* The evidence that neither the message nor the compile log already says. */
static void print_evidence(json_t *ev, const char *msg)
{
    json_t *rest = json_is_object(ev) ? json_deep_copy(ev) : NULL;
    const char *m = json_string_value(json_object_get(rest, "message"));
    char *s;

    json_object_del(rest, "log");   /* the compile log, printed whole */
    if (m && msg && strstr(msg, m))
        json_object_del(rest, "message");
    if (json_object_size(rest)) {
        s = json_dumps(rest, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s)
            printf("evidence: %.2000s%s\n", s, strlen(s) > 2000 ? " ..." : "");
        free(s);
    }
    json_decref(rest);
}

/* ---- a run's best ---- */

void cli_print_best(json_t *b)
{
    double x = cli_num(b, "speedup");

    if (!json_is_object(b)) {
        printf("best: none: no candidate was correct, so none beat the reference\n");
        return;
    }
    printf("best: cand %d (%s), ", (int)cli_num(b, "id"), cli_str(b, "op", "?"));
    print_geomean(b, "score_s");
    print_workloads(json_object_get(b, "workloads"), "  ");
    if (x > 0 && x < 1)
        printf("no candidate beat the reference: the best takes %.2fx its time\n", 1 / x);
}

/* ---- kevo runs ID --candidates ---- */

/* "-", "3" or "3,5" */
static void fmt_parents(char *out, size_t n, json_t *p)
{
    if (json_array_size(p) == 0)
        snprintf(out, n, "-");
    else if (json_array_size(p) == 1)
        snprintf(out, n, "%lld", (long long)json_integer_value(json_array_get(p, 0)));
    else
        snprintf(out, n, "%lld,%lld", (long long)json_integer_value(json_array_get(p, 0)),
                 (long long)json_integer_value(json_array_get(p, 1)));
}

static void print_cand_row(json_t *c)
{
    char par[48], x[16], cell[64];
    const char *v = cli_str(c, "verdict", "?");
    size_t i;
    json_t *w;

    fmt_parents(par, sizeof par, json_object_get(c, "parents"));
    fmt_fig(x, sizeof x, c, "speedup", "x");
    printf("%5d  %-12s %-9s %-16s %7s", (int)cli_num(c, "id"), cli_str(c, "op", "?"), par, v,
           x);
    if (strcmp(v, "ok") != 0) {
        printf("   %.*s\n", SHOWN_MESSAGE, cli_str(c, "message", ""));
        return;
    }
    json_array_foreach(json_object_get(c, "workloads"), i, w) {
        fmt_cell(cell, sizeof cell, w);
        printf("   %s", cell);
    }
    printf("\n");
}

void cli_print_cands(json_t *doc)
{
    json_t *ref = json_object_get(doc, "reference"), *c, *w;
    size_t i;

    printf("run %d: %s (%s), %zu candidate%s\n", (int)cli_num(doc, "run"),
           cli_str(doc, "task", "?"), cli_str(doc, "path", "?"),
           json_array_size(json_object_get(doc, "candidates")),
           json_array_size(json_object_get(doc, "candidates")) == 1 ? "" : "s");
    if (!json_array_size(ref))
        printf("the reference's times are in the run's report, which it does not have yet\n");
    json_array_foreach(ref, i, w) {
        char sz[160], t[32];
        fmt_sizes(sz, sizeof sz, json_object_get(w, "sizes"));
        fmt_fig(t, sizeof t, w, "time_s", "time");
        printf("%s w%lld [%s] %s", i ? "," : "reference:", (long long)cli_num(w, "index"), sz,
               t);
    }
    printf("%s(vs ref: the geomean speedup; per workload: time, %% of SOL, speedup)\n",
           json_array_size(ref) ? "\n" : "");
    printf("%5s  %-12s %-9s %-16s %7s", "cand", "op", "parents", "verdict", "vs ref");
    json_array_foreach(ref, i, w) {
        char h[32];
        snprintf(h, sizeof h, "w%lld time", (long long)cli_num(w, "index"));
        printf("   %10s %4s %7s", h, "SOL", "vs ref");
    }
    printf("\n");
    json_array_foreach(json_object_get(doc, "candidates"), i, c)
        print_cand_row(c);
}

/* ---- kevo show ---- */

/* "64", "cand64", cand64 with the .c or .cu the logs give it (the names kevo prints): the
 * id, or -1. */
static long parse_cand(const char *s)
{
    char *end = NULL;
    long v;

    if (!strncmp(s, "cand", 4))
        s += 4;
    if (!isdigit((unsigned char)*s))
        return -1;
    v = strtol(s, &end, 10);
    if (*end && strcmp(end, ".c") && strcmp(end, ".cu"))
        return -1;
    return v > 0 ? v : -1;
}

/* Its compile log (when it did not compile) and its source, numbered as the log counts. */
static void print_texts(json_t *d)
{
    const char *log = cli_str(d, "compile_log", ""), *src = cli_str(d, "source", NULL);
    int line = 1;

    if (!strcmp(cli_str(d, "verdict", ""), "compile_error") && *log)
        printf("compile log:\n%s%s", log, log[strlen(log) - 1] == '\n' ? "" : "\n");
    if (!src) {
        printf("source: not shown (not UTF-8 text)\n");
        return;
    }
    printf("source:\n");
    while (*src) {
        const char *e = strchr(src, '\n');
        int len = e ? (int)(e - src) : (int)strlen(src);
        printf("%5d  %.*s\n", line++, len, src);
        src += len + (e != NULL);
    }
}

static void print_show(json_t *d)
{
    const char *v = cli_str(d, "verdict", "?");
    char par[48], *p = json_dumps(json_object_get(d, "params"), JSON_COMPACT);
    char *f = json_dumps(json_object_get(d, "flags"), JSON_COMPACT);
    json_t *h = json_object_get(d, "holdout");

    fmt_parents(par, sizeof par, json_object_get(d, "parents"));
    printf("candidate %d of run %d (%s): %s\n", (int)cli_num(d, "id"), (int)cli_num(d, "run"),
           cli_str(d, "task", "?"), v);
    printf("operator %s, parents %s, params %s, flags %s\n", cli_str(d, "op", "?"), par,
           p ? p : "{}", f ? f : "[]");
    json_t *by = json_object_get(d, "evaluated_by");
    if (json_is_object(by))   /* which MPI rank and device ran it (docs/cluster.md) */
        printf("evaluated on rank %d, device %d (%s)\n", (int)cli_num(by, "rank"),
               (int)cli_num(by, "device"), cli_str(by, "host", "?"));
    if (strcmp(v, "ok") == 0) {
        print_geomean(d, "score_s");
        print_workloads(json_object_get(d, "workloads"), "  ");
        cli_print_profile(json_object_get(d, "profile"), "");
    } else if (strcmp(v, "pending") != 0) {
        printf("message: %s\n", cli_str(d, "message", ""));
        print_evidence(json_object_get(d, "evidence"), cli_str(d, "message", NULL));
    }
    if (json_is_object(h))
        printf("held-out gate: %s%s%s\n", cli_str(h, "verdict", "?"),
               strcmp(cli_str(h, "verdict", "?"), "ok") ? " -- " : "",
               strcmp(cli_str(h, "verdict", "?"), "ok") ? cli_str(h, "message", "") : "");
    print_texts(d);
    free(p);
    free(f);
}

int cli_cmd_show(int argc, char **argv)
{
    const char *archive = NULL;
    int as_json = 0;
    long id = 0;
    char *json = NULL, *msg = NULL;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (strcmp(argv[i], "--archive") == 0 && i + 1 < argc)
            archive = argv[++i];
        else if (id || (id = parse_cand(argv[i])) <= 0)
            return cli_usage("show takes one candidate id (64 or cand64) [--archive PATH]");
    }
    if (!id)
        return cli_usage("show takes a candidate id (64 or cand64) [--archive PATH]");
    enum kevo_status st = kevo_show_json(archive, id, &json, &msg);
    if (st) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
    } else if (as_json) {
        printf("%s\n", json);
    } else {
        json_t *doc = json_loads(json, 0, NULL);
        print_show(doc);
        json_decref(doc);
    }
    kevo_free(json);
    kevo_free(msg);
    return st ? EXIT_FAILED : 0;
}

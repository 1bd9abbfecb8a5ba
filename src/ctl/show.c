/*
 * show - candidates as a person reads them (show.h; kevo.h: kevo_show_json for `kevo show
 * CAND`, kevo_runs_cands_json for `kevo runs ID --candidates`). Everything comes from the
 * archive: the candidate's row, its source, and the eval result stored whole with its
 * verdict (docs/archive.md, table `evaluations`), which holds the message, the evidence
 * and the compile log (docs/eval-json.md). Read-only: safe while a run writes.
 *
 * A worker names a candidate by the path the controller gave it (cand64 and the task's
 * extension; in run7/ before), which is no file anyone can open: what a person reads
 * names the candidate by its id, so the name `kevo show` takes is the one they see.
 */
#include "ctl/show.h"

#include "base/mem.h"
#include "ctl/archive.h"
#include "ctl/run.h"

#include <ctype.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#define NOT_COMPILED " does not compile"

/* ---- words ---- */

/* Is s[0..n) blank? */
static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            return 0;
    return 1;
}

/* s[0..n) with every "run<digits>/" that stands before "cand" taken out (the scratch
 * directory of older runs), as a new string; NULL when out of memory. */
static char *tidy(const char *s, size_t n)
{
    char *out = kevo_malloc(n + 1);
    size_t k = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t j = i + 3;
        if ((i == 0 || !isalnum((unsigned char)s[i - 1])) && n - i > 3 &&
            strncmp(s + i, "run", 3) == 0 && isdigit((unsigned char)s[j])) {
            while (j < n && isdigit((unsigned char)s[j]))
                j++;
            if (n - j > 5 && strncmp(s + j, "/cand", 5) == 0) {
                i = j + 1;
                continue;
            }
        }
        out[k++] = s[i++];
    }
    out[k] = '\0';
    return out;
}

char *kevo_show_message(int64_t id, const json_t *result)
{
    const char *v = json_string_value(json_object_get(result, "verdict"));
    const char *m = json_string_value(json_object_get(result, "message"));
    size_t n = m ? strlen(m) : 0, k = strlen(NOT_COMPILED);

    /* the worker's "PATH does not compile": the path is the scratch name */
    if (v && strcmp(v, "compile_error") == 0 && n > k && strcmp(m + n - k, NOT_COMPILED) == 0)
        return kevo_strdupf("candidate %lld%s", (long long)id, NOT_COMPILED);
    return tidy(m ? m : "", n);
}

json_t *kevo_show_log_head(const json_t *result, int n, int *more)
{
    const char *s = json_string_value(json_object_get(result, "compile_log"));
    json_t *arr = json_array();

    *more = 0;
    while (arr && s && *s) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (!blank(s, len) && (int)json_array_size(arr) >= n) {
            (*more)++;
        } else if (!blank(s, len)) {
            char *line = tidy(s, len);
            json_t *j = line ? json_string(line) : NULL;   /* NULL: not UTF-8, left out */
            if (j)
                json_array_append_new(arr, j);
            kevo_free(line);
        }
        s += len + (e != NULL);
    }
    return arr;
}

/* ---- figures ---- */

/* A figure kevo measured, or null: the archive keeps 0 or NULL (NAN) for unknown. */
static json_t *figure(double v)
{
    return isfinite(v) && v > 0 ? json_real(v) : json_null();
}

/* The reference's entry for workload index (NULL when ref has none). */
static json_t *ref_workload(const json_t *ref, json_int_t index)
{
    size_t i;
    json_t *w;

    json_array_foreach(ref, i, w)
        if (json_integer_value(json_object_get(w, "index")) == index)
            return w;
    return NULL;
}

json_t *kevo_show_workloads(const char *metrics_json, const json_t *ref)
{
    json_t *m = metrics_json ? json_loads(metrics_json, 0, NULL) : NULL;
    json_t *out = json_array(), *w;
    size_t i;

    json_array_foreach(json_object_get(m, "workloads"), i, w) {
        json_int_t idx = json_integer_value(json_object_get(w, "index"));
        json_t *r = ref_workload(ref, idx);
        double t = json_number_value(json_object_get(w, "median_s"));
        double rt = json_number_value(json_object_get(json_object_get(r, "time"), "median_s"));
        json_array_append_new(out, json_pack("{s:I, s:O?, s:o, s:o, s:o}", "index", idx,
                                             "sizes", json_object_get(r, "sizes"), "time_s",
                                             figure(t), "sol_fraction",
                                             figure(json_number_value(
                                                 json_object_get(w, "sol_fraction"))),
                                             "speedup", figure(t > 0 ? rt / t : 0)));
    }
    json_decref(m);
    return out ? out : json_null();
}

/* ---- one candidate ---- */

/* The parents of c: [] for a seed, [p1] or [p1, p2]. */
static json_t *parents(const struct kevo_cand_rec *c)
{
    json_t *p = json_array();

    if (c->parent1)
        json_array_append_new(p, json_integer(c->parent1));
    if (c->parent2)
        json_array_append_new(p, json_integer(c->parent2));
    return p;
}

/* What both the list and `show` say of c: res is its eval result (NULL: not read, the
 * message is then null), ref the run's reference workloads. */
static json_t *cand_row(const struct kevo_cand_rec *c, const json_t *res, const json_t *ref)
{
    const char *v = c->state == KEVO_CAND_DONE ? kevo_archive_cand_verdict(c) : "pending";
    char *msg = res ? kevo_show_message(c->id, res) : NULL;
    json_t *row = json_pack("{s:I, s:s, s:o, s:s, s:o, s:o, s:o, s:b, s:o, s:s?}", "id",
                            (json_int_t)c->id, "op", c->op, "parents", parents(c), "verdict", v,
                            "score_s", figure(c->score), "sol_fraction", figure(c->sol_fraction),
                            "speedup", figure(c->speedup), "improved", c->improved,
                            "workloads", kevo_show_workloads(c->metrics_json, ref),
                            "message", msg);

    kevo_free(msg);
    return row;
}

/* A JSON text of the archive as a value, or null. */
static json_t *loads_or_null(const char *text)
{
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;

    return j ? j : json_null();
}

/* The evaluation of a kind, or NULL when it has none. */
static enum kevo_status eval_of(struct kevo_archive *a, int64_t id, const char *kind,
                                json_t **out)
{
    char *text = NULL;
    enum kevo_status st = kevo_archive_eval_get(a, id, kind, &text);

    *out = NULL;
    if (st == KEVO_ERR_NOTFOUND)
        return KEVO_OK;
    if (!st)
        *out = json_loads(text, 0, NULL);
    kevo_free(text);
    return st;
}

/* The document of `kevo show`: the row, the run, the result's details and the source. */
static json_t *show_doc(const struct kevo_cand_rec *c, const struct kevo_run_rec *r,
                        json_t *res, json_t *hold, const char *text, size_t len)
{
    json_t *rep = loads_or_null(r->result_json);
    json_t *d = cand_row(c, res, json_object_get(rep, "reference"));
    const char *log = json_string_value(json_object_get(res, "compile_log"));
    char *tlog = log ? tidy(log, strlen(log)) : NULL;
    char *hmsg = hold ? kevo_show_message(c->id, hold) : NULL;

    json_object_set_new(d, "run", json_integer(c->run_id));
    json_object_set_new(d, "task", json_string(r->task_name));
    json_object_set_new(d, "island", json_integer(c->island));
    json_object_set_new(d, "cell", json_integer(c->cell));
    json_object_set_new(d, "generation", json_integer(c->generation));
    json_object_set_new(d, "params", loads_or_null(c->params_json));
    json_object_set_new(d, "flags", loads_or_null(c->flags_json));
    json_object_set(d, "evidence", res ? json_object_get(res, "evidence") : json_null());
    json_object_set_new(d, "compile_log", tlog ? json_string(tlog) : json_null());
    json_object_set(d, "resources", res ? json_object_get(res, "resources") : json_null());
    json_t *prof = res ? json_object_get(res, "profile") : NULL;   /* hardware counters */
    json_object_set(d, "profile", json_is_object(prof) ? prof : json_null());
    json_t *by = res ? json_object_get(res, "evaluated_by") : NULL;   /* kevo run's worker */
    json_object_set(d, "evaluated_by", json_is_object(by) ? by : json_null());
    json_object_set_new(d, "holdout", hold ? json_pack("{s:O?, s:s?}", "verdict",
                                                       json_object_get(hold, "verdict"),
                                                       "message", hmsg)
                                           : json_null());
    json_object_set_new(d, "source", json_stringn(text, len));   /* NULL: not UTF-8 */
    if (!json_object_get(d, "source"))
        json_object_set_new(d, "source", json_null());
    kevo_free(tlog);
    kevo_free(hmsg);
    json_decref(rep);
    return d;
}

/* ---- the entries ---- */

/* Open the archive (the default one for NULL); *out_msg says why not. */
static enum kevo_status open_archive(const char *archive, struct kevo_archive **a,
                                     char **out_msg)
{
    char def[PATH_MAX], *m = NULL;
    enum kevo_status st = KEVO_OK;

    if (!archive && (st = kevo_run_default_archive(def, sizeof def)) != KEVO_OK) {
        *out_msg = kevo_strdup("no archive path: set KEVO_ARCHIVE or HOME");
        return st;
    }
    archive = archive ? archive : def;
    st = kevo_archive_open_existing(archive, a, &m);
    if (st)
        *out_msg = m ? m : kevo_strdupf("%s: %s", archive, kevo_status_name(st));
    return st;
}

/* doc as indented text into *out (kevo_free it); consumes doc. */
static enum kevo_status dump(json_t *doc, char **out)
{
    *out = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
    json_decref(doc);
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_show_json(const char *archive, int64_t id, char **out_json, char **out_msg)
{
    struct kevo_archive *a = NULL;
    struct kevo_cand_rec c;
    struct kevo_run_rec r;
    json_t *res = NULL, *hold = NULL;
    char *text = NULL;
    size_t len = 0;
    enum kevo_status st;

    *out_json = NULL;
    *out_msg = NULL;
    memset(&c, 0, sizeof c);
    memset(&r, 0, sizeof r);
    st = open_archive(archive, &a, out_msg);
    if (st)
        goto out;
    st = kevo_archive_cand_get(a, id, &c);
    if (!st)
        st = kevo_archive_run_get(a, c.run_id, &r);
    if (!st)
        st = kevo_archive_source_get(a, c.source_hash, &text, &len);
    if (!st)
        st = eval_of(a, id, "verify", &res);
    if (!st)
        st = eval_of(a, id, "holdout", &hold);
    if (st) {
        *out_msg = kevo_strdup(kevo_archive_errmsg(a));
        goto out;
    }
    st = dump(show_doc(&c, &r, res, hold, text, len), out_json);
out:
    json_decref(res);
    json_decref(hold);
    kevo_free(text);
    kevo_archive_cand_clear(&c);
    kevo_archive_run_clear(&r);
    kevo_archive_close(a);
    return st;
}

/* Each candidate of run r, oldest first, into arr; a failed one with its message. */
static enum kevo_status cand_rows(struct kevo_archive *a, const struct kevo_run_rec *r,
                                  const json_t *ref, json_t *arr)
{
    int64_t *ids = NULL;
    int n = 0;
    enum kevo_status st = kevo_archive_cand_ids(a, r->id, KEVO_CAND_ANY, &ids, &n);

    for (int i = 0; !st && i < n; i++) {
        struct kevo_cand_rec c;
        json_t *res = NULL;

        memset(&c, 0, sizeof c);
        st = kevo_archive_cand_get(a, ids[i], &c);
        if (!st && c.state == KEVO_CAND_DONE && c.verdict != KEVO_VERDICT_OK)
            st = eval_of(a, c.id, "verify", &res);
        if (!st)
            json_array_append_new(arr, cand_row(&c, res, ref));
        json_decref(res);
        kevo_archive_cand_clear(&c);
    }
    kevo_free(ids);
    return st;
}

enum kevo_status kevo_runs_cands_json(const char *archive, int64_t run, char **out_json,
                                     char **out_msg)
{
    struct kevo_archive *a = NULL;
    struct kevo_run_rec r;
    json_t *rep = NULL, *doc = NULL, *refs = json_array(), *cands = json_array(), *w;
    size_t i;
    enum kevo_status st;

    *out_json = NULL;
    *out_msg = NULL;
    memset(&r, 0, sizeof r);
    st = open_archive(archive, &a, out_msg);
    if (st)
        goto out;
    st = kevo_archive_run_get(a, run, &r);
    rep = st ? NULL : loads_or_null(r.result_json);
    /* the reference's timings are the report's: a run that never finished has none */
    json_array_foreach(json_object_get(rep, "reference"), i, w)
        json_array_append_new(refs, json_pack("{s:O?, s:O?, s:o}", "index",
                                              json_object_get(w, "index"), "sizes",
                                              json_object_get(w, "sizes"), "time_s",
                                              figure(json_number_value(json_object_get(
                                                  json_object_get(w, "time"), "median_s")))));
    if (!st)
        st = cand_rows(a, &r, json_object_get(rep, "reference"), cands);
    if (st) {
        *out_msg = kevo_strdup(kevo_archive_errmsg(a));
        goto out;
    }
    doc = json_pack("{s:I, s:s?, s:s?, s:O, s:O}", "run", (json_int_t)r.id, "task", r.task_name,
                    "path", r.task_path, "reference", refs, "candidates", cands);
    st = dump(doc, out_json);
out:
    json_decref(rep);
    json_decref(refs);
    json_decref(cands);
    kevo_archive_run_clear(&r);
    kevo_archive_close(a);
    return st;
}

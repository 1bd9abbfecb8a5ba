/*
 * trail - an agent's candidates in the archive (trail.h): one run per task and server
 * session, candidates recorded with their verdicts as a run's are, and a report rewritten
 * from the archive after each, so a run of an earlier session is reported the same way.
 */
#include "ctl/trail.h"

#include "base/mem.h"
#include "base/sha.h"
#include "core/result.h"
#include "ctl/search.h"
#include "ctl/show.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_RUNS 256              /* tasks one session works on, at most */
#define OP_AGENT "agent"

struct trail_run {
    char task_hash[KEVO_HASH_HEX];
    int64_t id;
};

struct kevo_trail {
    struct kevo_archive *ar;
    char *client;                 /* the agent, as the client named itself; may be NULL */
    struct trail_run runs[MAX_RUNS];
    int n_runs;
};

enum kevo_status kevo_trail_open(const char *path, const char *client, struct kevo_trail **out,
                                 char **out_msg)
{
    struct kevo_trail *t = kevo_calloc(1, sizeof *t);
    enum kevo_status st = t ? KEVO_OK : KEVO_ERR_NOMEM;

    *out = NULL;
    *out_msg = NULL;
    if (!st && client)
        t->client = kevo_strdup(client);
    if (!st)
        st = kevo_archive_open(path, &t->ar, out_msg);
    if (st) {
        kevo_trail_free(t);
        return st;
    }
    *out = t;
    return KEVO_OK;
}

struct kevo_archive *kevo_trail_archive(struct kevo_trail *t)
{
    return t->ar;
}

/* ---- figures ---- */

static double fin(double v)
{
    return isfinite(v) ? v : 0.0;
}

void kevo_trail_summary(json_t *result, double *time_s, double *sol, double *speedup)
{
    struct kevo_result r;
    char *why = NULL;
    double lt = 0, ls = 0, lu = 0;
    int n = 0, ns = 0, nu = 0;

    *time_s = *sol = *speedup = 0;
    if (kevo_result_decode(result, &r, &why) != KEVO_OK) {
        kevo_free(why);
        return;
    }
    for (int i = 0; i < r.n_wl; i++) {
        const struct kevo_result_wl *w = &r.wl[i];
        double tm = fin(w->time.median_s);
        if (w->holdout || !(tm > 0))
            continue;
        lt += log(tm);
        n++;
        if (fin(w->sol_fraction) > 0) {
            ls += log(w->sol_fraction);
            ns++;
        }
        if (fin(w->speedup) > 0) {
            lu += log(w->speedup);
            nu++;
        }
    }
    *time_s = n ? exp(lt / n) : 0;
    *sol = ns ? exp(ls / ns) : 0;
    *speedup = nu ? exp(lu / nu) : 0;
    kevo_result_clear(&r);
}

/* The archive's metrics of a result, as run.c stores them: per workload index, median,
 * noise, fraction of SOL, GB/s, TFLOP/s, and the resources (kevo_free it). */
static char *metrics_text(json_t *result)
{
    json_t *m = json_object(), *wl = json_array(), *w;
    size_t i;
    char *s;

    json_array_foreach(json_object_get(result, "workloads"), i, w) {
        json_t *tm = json_object_get(w, "time");
        if (!json_is_object(tm))
            continue;
        json_array_append_new(wl, json_pack("{s:O, s:f, s:f, s:f, s:f, s:f}", "index",
                                            json_object_get(w, "index"), "median_s",
                                            fin(json_number_value(json_object_get(tm, "median_s"))),
                                            "noise",
                                            fin(json_number_value(json_object_get(tm, "noise"))),
                                            "sol_fraction",
                                            fin(json_number_value(json_object_get(w, "sol_fraction"))),
                                            "gbps", fin(json_number_value(json_object_get(w, "gbps"))),
                                            "tflops",
                                            fin(json_number_value(json_object_get(w, "tflops")))));
    }
    json_object_set_new(m, "workloads", wl);
    json_object_set(m, "resources", json_object_get(result, "resources")
                                        ? json_object_get(result, "resources") : json_null());
    s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return s;
}

/* ---- the report ---- */

/* The report's reference: the timed reference workloads of result (each timed workload's
 * interleaved ref_time), [{index, sizes, time}]; NULL when it timed none. */
static json_t *reference_of(json_t *result)
{
    json_t *ref = json_array(), *w;
    size_t i;

    json_array_foreach(json_object_get(result, "workloads"), i, w) {
        json_t *rt = json_object_get(w, "ref_time");
        if (json_is_object(rt) && !json_is_true(json_object_get(w, "holdout")))
            json_array_append_new(ref, json_pack("{s:O, s:O, s:O}", "index",
                                                 json_object_get(w, "index"), "sizes",
                                                 json_object_get(w, "sizes"), "time", rt));
    }
    if (!json_array_size(ref)) {
        json_decref(ref);
        return NULL;
    }
    return ref;
}

/* The run's best ok candidate as kevo run's report has it (json null when none). */
static json_t *best_json(struct kevo_archive *a, int64_t run, json_t *ref)
{
    struct kevo_cand_rec c;
    int64_t id = 0;
    int n = 0;
    json_t *j;

    memset(&c, 0, sizeof c);
    if (kevo_archive_best(a, run, -1, 1, &id, &n) != KEVO_OK || !n ||
        kevo_archive_cand_get(a, id, &c) != KEVO_OK)
        return json_null();
    j = json_pack("{s:I, s:s, s:f, s:f, s:f, s:I, s:i, s:i}", "id", (json_int_t)c.id, "op", c.op,
                  "score_s", fin(c.score), "sol_fraction", fin(c.sol_fraction), "speedup",
                  fin(c.speedup), "parent", (json_int_t)c.parent1, "island", c.island, "cell",
                  c.cell);
    json_object_set_new(j, "params", c.params_json ? json_loads(c.params_json, 0, NULL)
                                                   : json_null());
    json_object_set_new(j, "flags", c.flags_json ? json_loads(c.flags_json, 0, NULL)
                                                 : json_null());
    json_object_set_new(j, "workloads", kevo_show_workloads(c.metrics_json, ref));
    kevo_archive_cand_clear(&c);
    return j;
}

/*
 * Run's report rebuilt from the archive: what it had (its reference, its final), the
 * reference of result when it had none (result may be NULL), the counts and the best;
 * reason as given. Written with kevo_archive_run_report, or with stop 1 recorded with
 * the run stopped (the end of its session).
 */
static enum kevo_status report(struct kevo_trail *t, int64_t run, json_t *result,
                               const char *reason, int stop)
{
    struct kevo_run_rec rr;
    int64_t n = 0, nd = 0, nok = 0;
    json_t *rep = NULL;
    char *s = NULL;
    enum kevo_status st;

    memset(&rr, 0, sizeof rr);
    st = kevo_archive_run_get(t->ar, run, &rr);
    if (!st)
        st = kevo_archive_counts(t->ar, run, &n, &nd, &nok);
    if (st)
        goto out;
    rep = rr.result_json ? json_loads(rr.result_json, 0, NULL) : NULL;
    if (!json_is_object(rep)) {
        json_decref(rep);
        rep = json_pack("{s:I, s:s, s:s?, s:b}", "run", (json_int_t)run, "task", rr.task_name,
                        "path", rr.task_path, "agent", 1);
    }
    if (!json_array_size(json_object_get(rep, "reference"))) {   /* the first timed result's */
        json_t *ref = result ? reference_of(result) : NULL;
        json_object_set_new(rep, "reference", ref ? ref : json_array());
    }
    json_object_set_new(rep, "reason", json_string(reason));
    json_object_set_new(rep, "stop", json_pack("{s:s}", "reason", reason));
    json_object_set_new(rep, "evaluations", json_integer(nd));
    json_object_set_new(rep, "ok", json_integer(nok));
    json_object_set_new(rep, "best", best_json(t->ar, run, json_object_get(rep, "reference")));
    s = json_dumps(rep, JSON_INDENT(1));
    if (!s)
        st = KEVO_ERR_NOMEM;
    else if (stop)
        st = kevo_archive_run_finish(t->ar, run, KEVO_RUN_STOPPED, s);
    else
        st = kevo_archive_run_report(t->ar, run, s);
out:
    kevo_free(s);
    json_decref(rep);
    kevo_archive_run_clear(&rr);
    return st;
}

void kevo_trail_free(struct kevo_trail *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_runs; i++)   /* resumable: `kevo run --resume` goes on */
        if (report(t, t->runs[i].id, NULL, "agent session ended", 1) != KEVO_OK)
            fprintf(stderr, "kevo: run %lld: %s\n", (long long)t->runs[i].id,
                    kevo_archive_errmsg(t->ar));
    kevo_archive_close(t->ar);
    kevo_free(t->client);
    kevo_free(t);
}

int kevo_trail_is_agent_run(struct kevo_trail *t, int64_t run)
{
    struct kevo_run_rec rr;
    json_t *cfg;
    int yes;

    memset(&rr, 0, sizeof rr);
    if (kevo_archive_run_get(t->ar, run, &rr) != KEVO_OK)
        return 0;
    cfg = rr.config_json ? json_loads(rr.config_json, 0, NULL) : NULL;
    yes = !strcmp(json_string_value(json_object_get(cfg, "operator")) ?
                  json_string_value(json_object_get(cfg, "operator")) : "", OP_AGENT);
    json_decref(cfg);
    kevo_archive_run_clear(&rr);
    return yes;
}

/* ---- runs ---- */

enum kevo_status kevo_trail_run(struct kevo_trail *t, const struct kevo_task *task,
                                const char *task_path, const char *backend, int64_t *run,
                                char **out_msg)
{
    char hash[KEVO_HASH_HEX], *cs = NULL;
    json_t *cfg = NULL;
    enum kevo_status st;

    *run = 0;
    *out_msg = NULL;
    st = kevo_sha256_hex(task->source, task->source_len, hash);
    if (st)
        return st;
    for (int i = 0; i < t->n_runs; i++)
        if (!strcmp(t->runs[i].task_hash, hash)) {
            *run = t->runs[i].id;
            return KEVO_OK;
        }
    if (t->n_runs == MAX_RUNS) {
        *out_msg = kevo_strdupf("this session already works on %d tasks", MAX_RUNS);
        return KEVO_ERR_TOOBIG;
    }
    /* what `kevo run --resume` reads back: kevo run's keys, the search's defaults */
    cfg = json_pack("{s:s, s:I, s:o, s:i, s:s, s:{s:s?, s:I}}", "backend", backend, "budget",
                    (json_int_t)0, "seeds", json_array(), "trials", 3, "operator", OP_AGENT,
                    "agent", "client", t->client, "server_pid", (json_int_t)getpid());
    cs = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
    st = cs ? kevo_archive_run_create(t->ar, task->name, task_path, task->source,
                                      task->source_len, cs, run)
            : KEVO_ERR_NOMEM;
    if (!st) {
        snprintf(t->runs[t->n_runs].task_hash, KEVO_HASH_HEX, "%s", hash);
        t->runs[t->n_runs++].id = *run;
        st = report(t, *run, NULL, "agent", 0);
    }
    if (st)
        *out_msg = kevo_strdupf("creating the agent's run of %s: %s", task->name,
                                kevo_archive_errmsg(t->ar));
    kevo_free(cs);
    json_decref(cfg);
    return st;
}

int64_t kevo_trail_best(struct kevo_trail *t, const struct kevo_task *task)
{
    char hash[KEVO_HASH_HEX];
    int64_t id = 0;
    int n = 0;

    if (kevo_sha256_hex(task->source, task->source_len, hash) != KEVO_OK)
        return 0;
    for (int i = 0; i < t->n_runs; i++)
        if (!strcmp(t->runs[i].task_hash, hash) &&
            (kevo_archive_best(t->ar, t->runs[i].id, -1, 1, &id, &n) != KEVO_OK || !n))
            id = 0;
    return id;
}

/* ---- candidates ---- */

/* c as a pending candidate of its run; KEVO_ERR_INVALID with *id the earlier one when the
 * run has its text already. */
static enum kevo_status add(struct kevo_trail *t, const struct kevo_trail_cand *c, int64_t *id)
{
    struct kevo_cand_rec r;
    char *params = NULL, *flags = NULL;
    enum kevo_status st;

    memset(&r, 0, sizeof r);
    st = kevo_archive_source_put(t->ar, c->text, c->len, r.source_hash);
    if (!st)   /* the key of kevo run: the hash of the genome's text, which this is */
        st = kevo_sha256_hex(c->text, c->len, r.key);
    if (!st && c->g)
        st = kevo_genome_json(c->g, &params, &flags);
    if (st)
        return st;
    r.run_id = c->run;
    r.parent1 = c->parent;
    snprintf(r.op, sizeof r.op, "%s", OP_AGENT);
    r.params_json = params ? params : "{}";
    r.flags_json = flags ? flags : "[]";
    r.island = 0;
    r.cell = -1;
    st = kevo_archive_cand_add(t->ar, &r, id);
    kevo_free(params);
    kevo_free(flags);
    return st;
}

/* The verdict and figures of candidate id, its held-out result, its cell. */
static enum kevo_status finish(struct kevo_trail *t, const struct kevo_trail_cand *c, int64_t id)
{
    struct kevo_result r;
    char *why = NULL, *metrics = metrics_text(c->result), *res = json_dumps(c->result, JSON_COMPACT);
    double score = 0, sol = 0, speedup = 0;
    enum kevo_status st = metrics && res ? kevo_result_decode(c->result, &r, &why)
                                         : KEVO_ERR_NOMEM;

    if (st)
        goto out;
    kevo_trail_summary(c->result, &score, &sol, &speedup);
    /* the server always times what it evaluates: an ok candidate has its score */
    int ok = r.verdict == KEVO_VERDICT_OK && score > 0;
    st = kevo_archive_cand_finish(t->ar, id, r.verdict, score, sol, speedup, metrics, res);
    if (!st && c->holdout) {
        char *h = json_dumps(c->holdout, JSON_COMPACT);
        st = h ? kevo_archive_eval_add(t->ar, id, "holdout", h) : KEVO_ERR_NOMEM;
        kevo_free(h);
    }
    if (!st && ok && c->g) {   /* where `kevo run --resume` finds it as a parent */
        struct kevo_desc d;
        kevo_desc_of(c->g, &r, &d);
        json_t *dj = kevo_desc_json(&d, c->task->lang);
        char *ds = dj ? json_dumps(dj, JSON_COMPACT) : NULL;
        st = kevo_archive_cand_place(t->ar, id, 0, kevo_desc_cell(&d), ds ? ds : "{}");
        kevo_free(ds);
        json_decref(dj);
    }
    kevo_result_clear(&r);
out:
    kevo_free(why);
    kevo_free(metrics);
    kevo_free(res);
    return st;
}

enum kevo_status kevo_trail_record(struct kevo_trail *t, const struct kevo_trail_cand *c,
                                   int64_t *id, int *dup, char **out_msg)
{
    struct kevo_cand_rec p;
    enum kevo_status st;

    *id = 0;
    *dup = 0;
    *out_msg = NULL;
    memset(&p, 0, sizeof p);
    if (c->parent && kevo_archive_cand_get(t->ar, c->parent, &p) != KEVO_OK) {
        *out_msg = kevo_strdupf("parent %lld: no such candidate in %s", (long long)c->parent,
                                "the archive");
        return KEVO_ERR_NOTFOUND;
    }
    kevo_archive_cand_clear(&p);
    st = add(t, c, id);
    if (st == KEVO_ERR_INVALID && *id) {   /* the same text again: its first record stands */
        *dup = 1;
        return KEVO_OK;
    }
    if (!st)
        st = finish(t, c, *id);
    if (!st)
        st = report(t, c->run, c->result, "agent", 0);
    if (st)
        *out_msg = kevo_strdupf("recording the candidate in run %lld: %s", (long long)c->run,
                                st == KEVO_ERR_NOMEM ? "out of memory" : kevo_archive_errmsg(t->ar));
    return st;
}

enum kevo_status kevo_trail_final(struct kevo_trail *t, int64_t run, int64_t final,
                                  const char *how, json_t *rejected, char **out_msg)
{
    struct kevo_run_rec rr;
    json_t *rep = NULL;
    char *s = NULL;
    enum kevo_status st;

    *out_msg = NULL;
    memset(&rr, 0, sizeof rr);
    st = kevo_archive_run_get(t->ar, run, &rr);
    if (!st) {
        rep = rr.result_json ? json_loads(rr.result_json, 0, NULL) : NULL;
        if (!json_is_object(rep)) {
            json_decref(rep);
            rep = json_object();
        }
        json_object_set_new(rep, "final", final ? json_pack("{s:I, s:s}", "id",
                                                            (json_int_t)final, "holdout", how)
                                                : json_null());
        json_object_set(rep, "holdout_rejected", rejected ? rejected : json_array());
        s = json_dumps(rep, JSON_INDENT(1));
        st = s ? kevo_archive_run_report(t->ar, run, s) : KEVO_ERR_NOMEM;
    }
    if (st)
        *out_msg = kevo_strdupf("run %lld: %s", (long long)run, kevo_archive_errmsg(t->ar));
    kevo_free(s);
    json_decref(rep);
    kevo_archive_run_clear(&rr);
    return st;
}

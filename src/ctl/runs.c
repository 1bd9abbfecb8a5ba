/*
 * runs - `kevo runs` (kevo.h: kevo_runs_json): what the archive says about past runs. The
 * list of runs, or one run's report with the lineage of its best candidate (parents back
 * to a seed), the operators' statistics and what each LLM model did and cost. A run
 * stored as `running` whose controller is gone from this host is shown `interrupted`
 * (shown_status). Read-only: safe while a run writes.
 */
#include "ctl/archive.h"
#include "base/mem.h"
#include "base/proc.h"
#include "ctl/llm.h"
#include "ctl/run.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define LINEAGE_MAX 1000

static const char *status_name(enum kevo_run_status s)
{
    static const char *const n[] = { "running", "done", "stopped", "failed" };
    return (unsigned)s < 4 ? n[s] : "?";
}

/* The status shown for one stored as `stored`: a run still `running` whose controller
 * died (SIGKILL, a crash, the machine went down) never wrote its end; when that process
 * is gone from this host, the run is "interrupted" (`kevo run --resume` goes on with it).
 * On another host, or without an owner (archives before schema 5), it stays "running". */
static const char *shown_status(const char *stored, const struct kevo_proc_id *owner)
{
    if (stored && strcmp(stored, "running") == 0 && kevo_proc_check(owner) == KEVO_PROC_GONE)
        return "interrupted";
    return stored ? stored : "?";
}

/* The list's rows (kevo_archive_runs_json) with the status shown_status gives. */
static void list_statuses(json_t *runs)
{
    size_t i;
    json_t *row;

    json_array_foreach(runs, i, row) {
        json_t *own = json_object_get(row, "owner");
        struct kevo_proc_id p;
        const char *host = json_string_value(json_object_get(own, "host"));

        memset(&p, 0, sizeof p);
        p.pid = json_integer_value(json_object_get(own, "pid"));
        p.start = json_integer_value(json_object_get(own, "start"));
        snprintf(p.host, sizeof p.host, "%s", host ? host : "");
        json_object_set_new(row, "status", json_string(shown_status(
            json_string_value(json_object_get(row, "status")), &p)));
    }
}

/* From id back through first parents: [{id, op, verdict, score_s, params, flags}, ...]. */
static json_t *lineage(struct kevo_archive *a, int64_t id)
{
    json_t *arr = json_array();
    for (int k = 0; id && k < LINEAGE_MAX; k++) {
        struct kevo_cand_rec c;
        memset(&c, 0, sizeof c);
        if (kevo_archive_cand_get(a, id, &c) != KEVO_OK)
            break;
        json_t *e = json_pack("{s:I, s:s, s:s, s:f, s:f, s:I}", "id", (json_int_t)c.id, "op", c.op,
                              "verdict", kevo_archive_cand_verdict(&c), "score_s", c.score,
                              "speedup", c.speedup, "parent", (json_int_t)c.parent1);
        json_object_set_new(e, "params", c.params_json ? json_loads(c.params_json, 0, NULL)
                                                       : json_null());
        json_object_set_new(e, "flags", c.flags_json ? json_loads(c.flags_json, 0, NULL)
                                                     : json_null());
        json_array_append_new(arr, e);
        id = c.parent1;
        kevo_archive_cand_clear(&c);
    }
    return arr;
}

/* Has the model of llm_calls.model ("openai:NAME@URL") a price in prices ({"NAME": ...})? */
static int priced(const char *model, const json_t *prices)
{
    struct kevo_llm_model m;
    char *msg = NULL;
    int yes;

    memset(&m, 0, sizeof m);
    yes = kevo_llm_model_parse(model, &m, &msg) == KEVO_OK && json_object_get(prices, m.name);
    kevo_llm_model_clear(&m);
    kevo_free(msg);
    return yes;
}

json_t *kevo_runs_llm_models(struct kevo_archive *a, int64_t run, const json_t *prices)
{
    char *js = NULL;
    json_t *arr, *m;
    size_t i;

    if (kevo_archive_llm_models_json(a, run, &js) != KEVO_OK)
        return json_null();
    arr = json_loads(js, 0, NULL);
    kevo_free(js);
    /* a call of a model without a price cost what nobody knows, not 0 (a resumed
     * session may have found a price the first did not: then it cost something) */
    json_array_foreach(arr, i, m)
        if (json_number_value(json_object_get(m, "cost")) <= 0 &&
            !priced(json_string_value(json_object_get(m, "model")), prices))
            json_object_set_new(m, "cost", json_null());
    return arr ? arr : json_null();
}

static json_t *one_run(struct kevo_archive *a, const struct kevo_run_rec *r)
{
    int64_t n = 0, nd = 0, nok = 0, best = 0;
    int nb = 0;
    char *ops = NULL;
    json_t *rep = r->result_json ? json_loads(r->result_json, 0, NULL) : NULL;
    json_t *fin = json_object_get(json_object_get(rep, "final"), "id");

    if (kevo_archive_counts(a, r->id, &n, &nd, &nok) != KEVO_OK)
        n = nd = nok = 0;
    if (json_is_integer(fin))
        best = json_integer_value(fin);
    else if (kevo_archive_best(a, r->id, -1, 1, &best, &nb) != KEVO_OK || !nb)
        best = 0;
    if (kevo_archive_op_stats_json(a, r->id, &ops) != KEVO_OK)
        ops = NULL;
    json_t *o = json_pack("{s:I, s:s?, s:s?, s:s, s:f, s:f, s:I, s:I, s:I, s:o, s:o, s:o, s:o}",
                          "id", (json_int_t)r->id, "task", r->task_name, "path", r->task_path,
                          "status", shown_status(status_name(r->status), &r->owner), "started",
                          r->started, "updated",
                          r->updated, "candidates", (json_int_t)n, "evaluated", (json_int_t)nd,
                          "ok", (json_int_t)nok, "config",
                          r->config_json ? json_loads(r->config_json, 0, NULL) : json_null(),
                          "report", rep ? rep : json_null(), "lineage_of_best",
                          lineage(a, best), "operators",
                          ops ? json_loads(ops, 0, NULL) : json_null());
    json_t *cfg = json_object_get(o, "config");
    json_object_set_new(o, "owner", r->owner.pid <= 0 ? json_null()
                        : json_pack("{s:I, s:s?, s:I}", "pid", (json_int_t)r->owner.pid, "host",
                                    r->owner.host[0] ? r->owner.host : NULL, "start",
                                    (json_int_t)r->owner.start));
    json_object_set_new(o, "llm_models",
                        kevo_runs_llm_models(a, r->id, json_object_get(cfg, "prices_used")));
    kevo_free(ops);
    return o;
}

enum kevo_status kevo_runs_json(const char *archive, int64_t id, char **out_json, char **out_msg)
{
    char def[PATH_MAX], *m = NULL, *list = NULL;
    struct kevo_archive *a = NULL;
    struct kevo_run_rec r;
    enum kevo_status st = KEVO_OK;

    *out_json = NULL;
    *out_msg = NULL;
    memset(&r, 0, sizeof r);
    if (!archive && (st = kevo_run_default_archive(def, sizeof def)) != KEVO_OK) {
        *out_msg = kevo_strdup("no archive path: set KEVO_ARCHIVE or HOME");
        return st;
    }
    archive = archive ? archive : def;
    st = kevo_archive_open_existing(archive, &a, &m);
    if (st) {
        *out_msg = m ? m : kevo_strdupf("%s: %s", archive, kevo_status_name(st));
        return st;
    }
    if (!id) {
        st = kevo_archive_runs_json(a, &list);
        json_t *doc = st ? NULL : json_pack("{s:s, s:o}", "archive", archive, "runs",
                                             json_loads(list, 0, NULL));
        list_statuses(json_object_get(doc, "runs"));
        *out_json = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
        json_decref(doc);
    } else if ((st = kevo_archive_run_get(a, id, &r)) == KEVO_OK) {
        json_t *doc = one_run(a, &r);
        *out_json = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
        json_decref(doc);
    }
    if (st)
        *out_msg = kevo_strdupf("%s: %s", archive, kevo_archive_errmsg(a));
    else if (!*out_json)
        st = KEVO_ERR_NOMEM;
    kevo_free(list);
    kevo_archive_run_clear(&r);
    kevo_archive_close(a);
    return st;
}

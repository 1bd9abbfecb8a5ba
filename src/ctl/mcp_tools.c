/*
 * mcp_tools - the archive's tools of `kevo mcp` (docs/agents.md): `runs` and `show` (what
 * `kevo runs` and `kevo show` print, as their JSON documents), `export` (the winner as
 * standalone files; for an agent's run, after the held-out gate kevo run would have
 * applied: its best candidates in order on the task's held-out workloads until one
 * passes), and `prompt` (the evidence bundle kevo would send a model, ctl/bundle.h).
 */
#include "ctl/mcp_int.h"

#include "base/mem.h"
#include "ctl/archive.h"
#include "ctl/bundle.h"
#include "ctl/evalreq.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define GATE_TRIES 5              /* candidates the held-out gate tries, as kevo run's */
#define SIBLINGS 8                /* children of a candidate a prompt lists */

/* The document text of a kevo_*_json call as the call's output, or its failure. */
static int take_doc(struct mcp_call *c, enum kevo_status st, char *js, char *msg)
{
    if (st)
        kevo_mcp_fail(c, "%s", msg ? msg : kevo_status_name(st));
    else if (!(c->out = json_loads(js, 0, NULL)))
        kevo_mcp_fail(c, "the document does not parse (kevo's bug)");
    kevo_free(js);
    kevo_free(msg);
    return c->out ? 0 : -1;
}

static double num(json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

/* ---- runs ---- */

static void runs_text(struct mcp_call *c, json_t *doc, int cands)
{
    json_t *e;
    size_t i;

    if (json_is_array(json_object_get(doc, "runs"))) {
        kevo_mcp_say(c, "%zu run(s) in %s\n", json_array_size(json_object_get(doc, "runs")),
                     str(doc, "archive"));
        json_array_foreach(json_object_get(doc, "runs"), i, e) {
            kevo_mcp_say(c, "run %lld  %-24s %-11s %3lld candidates, %3lld ok",
                         (long long)num(e, "id"), str(e, "task"), str(e, "status"),
                         (long long)num(e, "n_candidates"), (long long)num(e, "n_ok"));
            if (num(e, "best_score") > 0)
                kevo_mcp_say(c, ", best %.4g us", num(e, "best_score") * 1e6);
            kevo_mcp_say(c, "\n");
        }
        return;
    }
    if (cands) {
        kevo_mcp_say(c, "run %lld (%s): %zu candidate(s)\n", (long long)num(doc, "run"),
                     str(doc, "task"), json_array_size(json_object_get(doc, "candidates")));
        json_array_foreach(json_object_get(doc, "candidates"), i, e) {
            char *p = json_dumps(json_object_get(e, "parents"), JSON_COMPACT);
            kevo_mcp_say(c, "cand %lld  %-10s parents %-8s %-16s", (long long)num(e, "id"),
                         str(e, "op"), p ? p : "[]", str(e, "verdict"));
            if (num(e, "speedup") > 0)
                kevo_mcp_say(c, " %.2fx the reference, %.1f%% of SOL", num(e, "speedup"),
                             100 * num(e, "sol_fraction"));
            else if (json_is_string(json_object_get(e, "message")))
                kevo_mcp_say(c, " %.200s", str(e, "message"));
            kevo_mcp_say(c, "\n");
            kevo_free(p);
        }
        return;
    }
    json_t *rep = json_object_get(doc, "report"), *best = json_object_get(rep, "best");
    kevo_mcp_say(c, "run %lld: %s, %s; %lld candidates, %lld evaluated, %lld ok\n",
                 (long long)num(doc, "id"), str(doc, "task"), str(doc, "status"),
                 (long long)num(doc, "candidates"), (long long)num(doc, "evaluated"),
                 (long long)num(doc, "ok"));
    if (json_is_object(best))
        kevo_mcp_say(c, "best: candidate %lld (%s), %.4g us, %.1f%% of SOL, %.2fx the reference\n",
                     (long long)num(best, "id"), str(best, "op"), num(best, "score_s") * 1e6,
                     100 * num(best, "sol_fraction"), num(best, "speedup"));
    kevo_mcp_say(c, "lineage of the best:");
    json_array_foreach(json_object_get(doc, "lineage_of_best"), i, e)
        kevo_mcp_say(c, " %s%lld (%s)", i ? "<- " : "", (long long)num(e, "id"), str(e, "op"));
    kevo_mcp_say(c, "\n");
}

void kevo_mcp_tool_runs(struct kevo_mcp *m, struct mcp_call *c)
{
    static const char *const known[] = { "run", "candidates", NULL };
    int64_t run = 0;
    int cands = 0;
    char *js = NULL, *msg = NULL;
    enum kevo_status st;

    if (kevo_mcp_args_known(c, known) || kevo_mcp_arg_int(c, "run", 1, INT64_MAX, &run) < 0 ||
        kevo_mcp_arg_bool(c, "candidates", &cands) < 0)
        return;
    if (cands && !run) {
        kevo_mcp_bad(c, "'candidates' needs 'run'");
        return;
    }
    st = cands ? kevo_runs_cands_json(m->archive, run, &js, &msg)
               : kevo_runs_json(m->archive, run, &js, &msg);
    if (st == KEVO_ERR_NOTFOUND && !run) {   /* no archive yet: no runs */
        kevo_free(msg);
        c->out = json_pack("{s:s, s:[]}", "archive", m->archive, "runs");
        kevo_mcp_say(c, "no runs yet (%s does not exist)\n", m->archive);
        return;
    }
    if (!take_doc(c, st, js, msg))
        runs_text(c, c->out, cands);
}

/* ---- show ---- */

void kevo_mcp_tool_show(struct kevo_mcp *m, struct mcp_call *c)
{
    static const char *const known[] = { "candidate", NULL };
    int64_t id = 0;
    char *js = NULL, *msg = NULL;
    int r;

    if (kevo_mcp_args_known(c, known) ||
        (r = kevo_mcp_arg_int(c, "candidate", 1, INT64_MAX, &id)) < 0)
        return;
    if (!r) {
        kevo_mcp_bad(c, "'candidate' (an id) is required");
        return;
    }
    enum kevo_status st = kevo_show_json(m->archive, id, &js, &msg);
    if (take_doc(c, st, js, msg))
        return;
    json_t *o = c->out, *h = json_object_get(o, "holdout");
    kevo_mcp_say(c, "candidate %lld of run %lld (%s), op %s: %s", (long long)id,
                 (long long)num(o, "run"), str(o, "task"), str(o, "op"), str(o, "verdict"));
    if (num(o, "speedup") > 0)
        kevo_mcp_say(c, ", %.4g us, %.1f%% of SOL, %.2fx the reference", num(o, "score_s") * 1e6,
                     100 * num(o, "sol_fraction"), num(o, "speedup"));
    if (json_is_string(json_object_get(o, "message")))
        kevo_mcp_say(c, " -- %.2000s", str(o, "message"));
    if (json_is_object(h))
        kevo_mcp_say(c, "\nheld-out workloads: %s", str(h, "verdict"));
    kevo_mcp_say(c, "\nsource:\n%s\n", str(o, "source"));
}

/* ---- prompt ---- */

/* What was tried from candidate id in its run, newest first (kevo_free it). */
static char *siblings(struct kevo_archive *a, const struct kevo_cand_rec *p)
{
    struct kevo_buf b;
    int64_t *ids = NULL;
    int n = 0, shown = 0;

    kevo_buf_init(&b, 1 << 16);
    if (kevo_archive_cand_ids(a, p->run_id, KEVO_CAND_DONE, &ids, &n) != KEVO_OK)
        n = 0;
    for (int i = n - 1; i >= 0 && shown < SIBLINGS; i--) {
        struct kevo_cand_rec k;
        memset(&k, 0, sizeof k);
        if (kevo_archive_cand_get(a, ids[i], &k) == KEVO_OK && k.parent1 == p->id) {
            kevo_buf_say(&b, "- %s: %s", k.op, kevo_archive_cand_verdict(&k));
            if (k.verdict == KEVO_VERDICT_OK && isfinite(k.score) && k.score > 0)
                kevo_buf_say(&b, ", %.4g us", k.score * 1e6);
            kevo_buf_say(&b, "\n");
            shown++;
        }
        kevo_archive_cand_clear(&k);
    }
    kevo_free(ids);
    return kevo_buf_take(&b);
}

struct pr {
    struct kevo_task *task;
    char *task_text, *cand_text, *sib;
    json_t *result;
};

/* Candidate id of the archive: its text, latest result, siblings, and (when the call
 * names no task) its run's task. */
static int prompt_from_archive(struct kevo_mcp *m, struct mcp_call *c, int64_t id, struct pr *p)
{
    struct kevo_trail *t = NULL;
    struct kevo_cand_rec k;
    struct kevo_run_rec rr;
    char *res = NULL, *msg = NULL;
    size_t n;
    int rc = -1;

    memset(&k, 0, sizeof k);
    memset(&rr, 0, sizeof rr);
    if (kevo_mcp_trail(m, c, &t))
        return -1;
    struct kevo_archive *a = kevo_trail_archive(t);
    if (kevo_archive_cand_get(a, id, &k) != KEVO_OK ||
        kevo_archive_source_get(a, k.source_hash, &p->cand_text, &n) != KEVO_OK ||
        kevo_archive_run_get(a, k.run_id, &rr) != KEVO_OK) {
        kevo_mcp_fail(c, "candidate %lld: %s", (long long)id, kevo_archive_errmsg(a));
        goto out;
    }
    if (kevo_archive_eval_get(a, id, "verify", &res) == KEVO_OK)
        p->result = json_loads(res, 0, NULL);
    p->sib = siblings(a, &k);
    if (!p->task) {
        if (kevo_archive_source_get(a, rr.task_hash, &p->task_text, &n) != KEVO_OK ||
            kevo_task_parse(rr.task_path ? rr.task_path : "task.cu", p->task_text, n, &p->task,
                            &msg) != KEVO_OK) {
            kevo_mcp_fail(c, "run %lld's task: %s", (long long)k.run_id,
                          msg ? msg : kevo_archive_errmsg(a));
            goto out;
        }
    }
    rc = 0;
out:
    kevo_free(res);
    kevo_free(msg);
    kevo_archive_cand_clear(&k);
    kevo_archive_run_clear(&rr);
    return rc;
}

/* The task (and candidate) of a prompt call, from files, texts or the archive. */
static int prompt_inputs(struct kevo_mcp *m, struct mcp_call *c, struct pr *p)
{
    char tpath[PATH_MAX], cpath[PATH_MAX], *msg = NULL;
    size_t tl = 0, cl = 0;
    int64_t id = 0;
    int ht, hc, hi;

    if ((hi = kevo_mcp_arg_int(c, "candidate_id", 1, INT64_MAX, &id)) < 0 ||
        (ht = kevo_mcp_input(m, c, "task", NULL, !hi, tpath, &p->task_text, &tl)) < 0)
        return -1;
    if (ht && kevo_task_parse(tpath, p->task_text, tl, &p->task, &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "%s", msg ? msg : "the task does not parse");
        kevo_free(msg);
        return -1;
    }
    if (hi)
        return json_object_get(c->args, "candidate") || json_object_get(c->args, "candidate_text")
                   ? kevo_mcp_bad(c, "give 'candidate_id' or a candidate, not both")
                   : prompt_from_archive(m, c, id, p);
    hc = kevo_mcp_input(m, c, "candidate", p->task->lang == KEVO_LANG_C ? "c" : "cu", 0, cpath,
                        &p->cand_text, &cl);
    return hc < 0 ? -1 : 0;
}

void kevo_mcp_tool_prompt(struct kevo_mcp *m, struct mcp_call *c)
{
    static const char *const known[] = { "op", "task", "task_text", "candidate",
                                         "candidate_text", "candidate_id", NULL };
    struct pr p;
    const char *op = NULL;
    char *msg = NULL;

    memset(&p, 0, sizeof p);
    if (kevo_mcp_args_known(c, known) || kevo_mcp_arg_str(c, "op", &op) < 0 ||
        prompt_inputs(m, c, &p))
        goto out;
    /* the device as the session's worker measured it; a prompt without it is still one */
    enum mcp_backend b = p.task->lang == KEVO_LANG_C ? MCP_CPU : MCP_CUDA;
    int known_dev = kevo_mcp_backend_open(m, b, &msg) == KEVO_OK;
    struct kevo_bundle bd = { .op = op, .task = p.task, .cand_text = p.cand_text,
                              .result = p.result, .calib = known_dev ? m->be[b].calib : NULL,
                              .siblings = p.sib };
    kevo_free(msg);
    msg = NULL;
    if (kevo_bundle_build(&bd, &c->out, &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "%s", msg ? msg : "cannot build the prompt");
        goto out;
    }
    json_object_set_new(c->out, "evaluated", json_boolean(p.result != NULL));
    json_object_set_new(c->out, "device_known", json_boolean(known_dev));
    kevo_mcp_say(c, "[system]\n%s\n[user]\n%s\n", str(c->out, "system"), str(c->out, "user"));
out:
    kevo_free(msg);
    kevo_free(p.task_text);
    kevo_free(p.cand_text);
    kevo_free(p.sib);
    json_decref(p.result);
    kevo_task_free(p.task);
}

/* ---- export ---- */

struct gate {
    struct kevo_archive *a;
    int64_t run;
    struct kevo_task *task;
    char *task_text;
    char task_path[PATH_MAX];
    enum mcp_backend b;
    int has_holdout;
};

/* Candidate id's held-out verdict: recorded before (its eval with holdout), else
 * evaluated now on the run's backend and recorded. *res (json_decref) the result. */
static int gate_one(struct kevo_mcp *m, struct mcp_call *c, struct gate *g, int64_t id,
                    json_t **res)
{
    struct kevo_cand_rec k;
    struct kevo_pool *pool;
    json_t *sol;
    char *text = NULL, *msg = NULL, *s = NULL;
    size_t n;
    int rc = -1;

    memset(&k, 0, sizeof k);
    if (kevo_archive_eval_get(g->a, id, "holdout", &s) == KEVO_OK) {
        *res = json_loads(s, 0, NULL);
        kevo_free(s);
        return *res ? 0 : kevo_mcp_fail(c, "candidate %lld: its held-out result does not parse",
                                         (long long)id);
    }
    if (kevo_archive_cand_get(g->a, id, &k) != KEVO_OK ||
        kevo_archive_source_get(g->a, k.source_hash, &text, &n) != KEVO_OK) {
        kevo_mcp_fail(c, "candidate %lld: %s", (long long)id, kevo_archive_errmsg(g->a));
        goto out;
    }
    if (kevo_mcp_pool(m, c, g->b, &pool, &sol, NULL))
        goto out;
    char cname[64];
    snprintf(cname, sizeof cname, "cand%lld.%s", (long long)id, g->task->lang == KEVO_LANG_C ? "c" : "cu");
    struct kevo_eval_call q = { .task_path = g->task_path, .task_text = g->task_text,
                                .cand_path = cname, .cand_text = text, .trials = 3,
                                .holdout = 1, .sol = sol };
    if (kevo_evalreq_call(pool, 0, &q, MCP_DEFAULT_DEADLINE_S, res, &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "the held-out evaluation of candidate %lld failed: %s", (long long)id,
                      msg ? msg : "?");
        goto out;
    }
    s = json_dumps(*res, JSON_COMPACT);
    if (!s || kevo_archive_eval_add(g->a, id, "holdout", s) != KEVO_OK) {
        kevo_mcp_fail(c, "candidate %lld: %s", (long long)id, kevo_archive_errmsg(g->a));
        goto out;
    }
    rc = 0;
out:
    if (rc) {
        json_decref(*res);
        *res = NULL;
    }
    kevo_free(s);
    kevo_free(msg);
    kevo_free(text);
    kevo_archive_cand_clear(&k);
    return rc;
}

/* The run's task, backend and whether it has held-out workloads. */
static int gate_open(struct mcp_call *c, struct gate *g)
{
    struct kevo_run_rec rr;
    size_t n;
    char *msg = NULL;
    int rc = -1;

    memset(&rr, 0, sizeof rr);
    if (kevo_archive_run_get(g->a, g->run, &rr) != KEVO_OK ||
        kevo_archive_source_get(g->a, rr.task_hash, &g->task_text, &n) != KEVO_OK) {
        kevo_mcp_fail(c, "run %lld: %s", (long long)g->run, kevo_archive_errmsg(g->a));
        goto out;
    }
    snprintf(g->task_path, sizeof g->task_path, "%s", rr.task_path ? rr.task_path : "task.cu");
    if (kevo_task_parse(g->task_path, g->task_text, n, &g->task, &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "run %lld's task: %s", (long long)g->run, msg ? msg : "?");
        goto out;
    }
    json_t *cfg = rr.config_json ? json_loads(rr.config_json, 0, NULL) : NULL;
    const char *b = json_string_value(json_object_get(cfg, "backend"));
    g->b = b ? (!strcmp(b, "cpu") ? MCP_CPU : MCP_CUDA)
             : g->task->lang == KEVO_LANG_C ? MCP_CPU : MCP_CUDA;
    json_decref(cfg);
    for (int w = 0; w < g->task->n_workloads; w++)
        g->has_holdout |= g->task->workloads[w].holdout;
    rc = 0;
out:
    kevo_free(msg);
    kevo_archive_run_clear(&rr);
    return rc;
}

/*
 * kevo run's held-out gate on an agent's run: want (0: the run's best ok candidates, up to
 * GATE_TRIES, best first) until one passes the task's held-out workloads; the outcome
 * goes into the run's report ("final"), where kevo export reads it. *rejected: those that
 * failed.
 */
static int gate(struct kevo_mcp *m, struct mcp_call *c, struct kevo_trail *t, int64_t run,
                int64_t want, int64_t *final, json_t *rejected)
{
    struct gate g = { .a = kevo_trail_archive(t), .run = run };
    int64_t ids[GATE_TRIES];
    int n = 0, rc = -1;
    const char *how = "ok";
    char *msg = NULL;

    *final = 0;
    if (gate_open(c, &g))
        goto out;
    if (want) {
        ids[n++] = want;
    } else if (kevo_archive_best(g.a, run, -1, GATE_TRIES, ids, &n) != KEVO_OK || !n) {
        kevo_mcp_fail(c, "run %lld has no ok candidate to export", (long long)run);
        goto out;
    }
    for (int i = 0; i < n && !*final; i++) {
        json_t *res = NULL;
        if (!g.has_holdout) {
            *final = ids[i];
            how = "none declared";
            break;
        }
        if (gate_one(m, c, &g, ids[i], &res))
            goto out;
        const char *v = json_string_value(json_object_get(res, "verdict"));
        if (v && !strcmp(v, "ok"))
            *final = ids[i];
        else
            json_array_append_new(rejected, json_pack("{s:I, s:s, s:O}", "id", (json_int_t)ids[i],
                                                      "verdict", v ? v : "?", "message",
                                                      json_object_get(res, "message")));
        json_decref(res);
    }
    if (kevo_trail_final(t, run, *final, how, rejected, &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "%s", msg ? msg : "cannot record the held-out gate");
        goto out;
    }
    rc = 0;
out:
    kevo_free(msg);
    kevo_free(g.task_text);
    kevo_task_free(g.task);
    return rc;
}

/* Is candidate id an ok candidate of run? */
static int ok_in_run(struct kevo_archive *a, int64_t id, int64_t run)
{
    struct kevo_cand_rec k;
    int yes;

    memset(&k, 0, sizeof k);
    yes = kevo_archive_cand_get(a, id, &k) == KEVO_OK && k.run_id == run &&
          k.state == KEVO_CAND_DONE && k.verdict == KEVO_VERDICT_OK;
    kevo_archive_cand_clear(&k);
    return yes;
}

/* The files kevo_export names in its message ("wrote PATH" lines), as an array. */
static json_t *written(const char *msg)
{
    json_t *a = json_array();

    for (const char *p = msg; p && (p = strstr(p, "wrote ")) != NULL;) {
        size_t n = strcspn(p + 6, "\n");
        json_array_append_new(a, json_stringn(p + 6, n));
        p += 6 + n;
    }
    return a;
}

void kevo_mcp_tool_export(struct kevo_mcp *m, struct mcp_call *c)
{
    static const char *const known[] = { "run", "out", "candidate", NULL };
    struct kevo_trail *t = NULL;
    const char *out = NULL;
    char dir[PATH_MAX], *msg = NULL;
    int64_t run = 0, want = 0, final = 0;
    json_t *rejected = json_array();
    int agent;

    if (kevo_mcp_args_known(c, known) || kevo_mcp_arg_int(c, "run", 1, INT64_MAX, &run) < 0 ||
        kevo_mcp_arg_int(c, "candidate", 1, INT64_MAX, &want) < 0 ||
        kevo_mcp_arg_str(c, "out", &out) < 0)
        goto done;
    if (!run || !out) {
        kevo_mcp_bad(c, "'run' (an id) and 'out' (a directory) are required");
        goto done;
    }
    if (kevo_mcp_path(m, c, out, MCP_WRITE, dir) || kevo_mcp_trail(m, c, &t))
        goto done;
    agent = kevo_trail_is_agent_run(t, run);
    if (want && (!agent || !ok_in_run(kevo_trail_archive(t), want, run))) {
        kevo_mcp_fail(c, "candidate %lld: not an ok candidate of agent run %lld (the export of "
                      "a search is its held-out gate's choice)", (long long)want, (long long)run);
        goto done;
    }
    if (agent && gate(m, c, t, run, want, &final, rejected))
        goto done;
    if (agent && !final) {
        kevo_mcp_fail(c, "run %lld: no candidate passed the held-out workloads (%zu tried)",
                      (long long)run, json_array_size(rejected));
        goto done;
    }
    enum kevo_status st = kevo_export(m->archive, run, dir, &msg);
    if (st) {
        kevo_mcp_fail(c, "%s", msg ? msg : kevo_status_name(st));
        goto done;
    }
    c->out = json_pack("{s:I, s:o, s:s, s:o, s:O}", "run", (json_int_t)run, "candidate",
                       final ? json_integer(final) : json_null(), "out", dir, "files",
                       written(msg), "holdout_rejected", rejected);
    kevo_mcp_say(c, "exported run %lld%s to %s:\n%s", (long long)run, final ? " (held-out gate passed)" : "",
                 dir, msg ? msg : "");
done:
    json_decref(rejected);
    kevo_free(msg);
}

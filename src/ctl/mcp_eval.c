/*
 * mcp_eval - the `check` and `eval` tools of `kevo mcp` (docs/agents.md). check parses and
 * compiles a task or a candidate (in a worker started with --backend none, as `kevo check`
 * does); eval judges a candidate as `kevo eval` does: the task's reference checked once per
 * session, the candidate verified and timed in the session's worker (the reference timed
 * interleaved with it, for same-run speedups), then on the held-out workloads when asked,
 * then its hardware counters when asked (CUDA: CUPTI in the worker, else Nsight Compute).
 * Every candidate evaluated is
 * recorded in the archive (ctl/trail.h) whatever its verdict, so the agent's work has
 * lineage. A candidate's failure is a verdict, never a tool error; a tool error means kevo
 * could not judge (a path refused, a task that does not parse, a reference that fails).
 */
#include "ctl/mcp_int.h"

#include "base/mem.h"
#include "base/sha.h"
#include "core/result.h"
#include "ctl/archive.h"
#include "ctl/evalreq.h"
#include "ctl/genome.h"
#include "ctl/profile.h"
#include "ctl/show.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define LOG_SHOWN 4000            /* of a compile log in the text content */

/* An input file of a call: where it is, its text, and the name messages give it. */
struct input {
    char path[PATH_MAX];          /* resolved, or a private file */
    char *text;
    size_t len;
    char shown[PATH_MAX];         /* the path as given, or "task_text.cu" for a text */
    int given;
};

static void input_clear(struct input *in)
{
    kevo_free(in->text);
    memset(in, 0, sizeof *in);
}

static const char *ext_of(const char *path)
{
    size_t n = strlen(path);
    return n > 2 && !strcmp(path + n - 2, ".c") ? "c" : "cu";
}

/* Argument key (a path) or key_text into in; ext NULL: from the text's directives. */
static int input_get(struct kevo_mcp *m, struct mcp_call *c, const char *key, const char *ext,
                     int required, struct input *in)
{
    const char *p = NULL;

    memset(in, 0, sizeof *in);
    in->given = kevo_mcp_input(m, c, key, ext, required, in->path, &in->text, &in->len);
    if (in->given <= 0)
        return in->given;
    if (kevo_mcp_arg_str(c, key, &p) > 0)
        snprintf(in->shown, sizeof in->shown, "%s", p);
    else
        snprintf(in->shown, sizeof in->shown, "%s_text.%s", key, ext_of(in->path));
    return 1;
}

/* msg with every occurrence of from replaced by to (kevo_free it); NULL stays NULL. */
static char *renamed(const char *msg, const char *from, const char *to)
{
    struct kevo_buf b;
    size_t n = strlen(from);
    const char *p = msg;

    if (!msg || !n)
        return msg ? kevo_strdup(msg) : NULL;
    kevo_buf_init(&b, strlen(msg) * 2 + 4096);
    for (const char *q; (q = strstr(p, from)) != NULL; p = q + n)
        kevo_buf_say(&b, "%.*s%s", (int)(q - p), p, to);
    kevo_buf_say(&b, "%s", p);
    return kevo_buf_take(&b);
}

/* ---- check ---- */

void kevo_mcp_tool_check(struct kevo_mcp *m, struct mcp_call *c)
{
    static const char *const known[] = { "task", "task_text", "candidate", "candidate_text",
                                         NULL };
    struct input t, k;
    char *msg = NULL, *shown = NULL;

    memset(&t, 0, sizeof t);
    memset(&k, 0, sizeof k);
    if (kevo_mcp_args_known(c, known) || input_get(m, c, "task", NULL, 1, &t) < 0)
        goto out;
    if (input_get(m, c, "candidate", ext_of(t.path), 0, &k) < 0)
        goto out;
    enum kevo_status st = kevo_check_file(k.given ? k.path : t.path, k.given ? t.path : NULL,
                                          &msg);
    char *m1 = renamed(msg, t.path, t.shown);
    shown = k.given ? renamed(m1, k.path, k.shown) : m1;
    if (k.given)
        kevo_free(m1);
    c->out = json_pack("{s:b, s:s, s:s, s:s?, s:s}", "ok", st == KEVO_OK, "kind",
                       k.given ? "candidate" : "task", "file", k.given ? k.shown : t.shown,
                       "task", k.given ? t.shown : NULL, "message",
                       st ? (shown ? shown : kevo_status_name(st)) : "");
    if (!st)
        kevo_mcp_say(c, "ok: %s parses and compiles%s%s\n", k.given ? k.shown : t.shown,
                     k.given ? " against " : "", k.given ? t.shown : "");
    else
        kevo_mcp_say(c, "FAIL: %s\n", shown ? shown : kevo_status_name(st));
out:
    kevo_free(msg);
    kevo_free(shown);
    input_clear(&t);
    input_clear(&k);
}

/* ---- eval ---- */

struct ev {
    struct kevo_mcp *m;
    struct mcp_call *c;
    struct input task, cand;
    struct kevo_task *t;               /* the task, parsed */
    struct kevo_genome g;
    int has_g;                         /* the candidate parsed into g */
    char *text;                        /* what is evaluated: g's text (or the file as given) */
    size_t len;
    enum mcp_backend b;
    struct kevo_pool *pool;
    json_t *sol;
    int64_t parent, trials;
    int holdout, profile;
    double time_cap_s, deadline_s;
    json_t *res, *hres;                /* the eval result, the held-out one */
    int64_t run, id;
    int dup;
};

static int ev_args(struct ev *e)
{
    static const char *const known[] = { "task", "task_text", "candidate", "candidate_text",
                                         "parent", "holdout", "profile", "trials", "time_cap_s",
                                         "deadline_s", "backend", NULL };
    struct mcp_call *c = e->c;

    e->trials = 3;
    e->deadline_s = MCP_DEFAULT_DEADLINE_S;
    if (kevo_mcp_args_known(c, known) || kevo_mcp_arg_int(c, "parent", 1, INT64_MAX, &e->parent) < 0 ||
        kevo_mcp_arg_bool(c, "holdout", &e->holdout) < 0 ||
        kevo_mcp_arg_bool(c, "profile", &e->profile) < 0 ||
        kevo_mcp_arg_int(c, "trials", 3, 100, &e->trials) < 0 ||
        kevo_mcp_arg_num(c, "time_cap_s", 0.001, 600, &e->time_cap_s) < 0 ||
        kevo_mcp_arg_num(c, "deadline_s", 1, 3600, &e->deadline_s) < 0)
        return -1;
    if (input_get(e->m, c, "task", NULL, 1, &e->task) < 0)
        return -1;
    return input_get(e->m, c, "candidate", ext_of(e->task.path), 1, &e->cand) < 0 ? -1 : 0;
}

/* The task parsed, the backend chosen and its worker started. */
static int ev_task(struct ev *e)
{
    char *msg = NULL;

    if (kevo_task_parse(e->task.shown, e->task.text, e->task.len, &e->t, &msg) != KEVO_OK) {
        kevo_mcp_fail(e->c, "%s", msg ? msg : "the task does not parse");
        kevo_free(msg);
        return -1;
    }
    if (kevo_mcp_backend(e->m, e->c, e->t, &e->b))
        return -1;
    return kevo_mcp_pool(e->m, e->c, e->b, &e->pool, &e->sol, NULL);
}

/* The task's reference judged on this backend, once per session: a tool error when it
 * fails (nothing can be judged against it, as kevo eval exits 1). */
static int ev_reference(struct ev *e)
{
    char hash[KEVO_HASH_HEX], key[KEVO_HASH_HEX + 16], *msg = NULL;
    json_t *known, *res = NULL;

    if (kevo_sha256_hex(e->t->source, e->t->source_len, hash) != KEVO_OK)
        return kevo_mcp_fail(e->c, "out of memory");
    snprintf(key, sizeof key, "%s:%s", kevo_mcp_backend_name(e->b), hash);
    known = json_object_get(e->m->refs, key);
    if (!known) {
        struct kevo_eval_call q = { .task_path = e->task.shown, .task_text = e->task.text,
                                    .trials = (int)e->trials, .sol = e->sol };
        if (kevo_evalreq_call(e->pool, 0, &q, e->deadline_s, &res, &msg) != KEVO_OK) {
            kevo_mcp_fail(e->c, "evaluating the task's reference: %s", msg ? msg : "failed");
            kevo_free(msg);
            return -1;
        }
        known = json_pack("{s:O, s:O}", "verdict", json_object_get(res, "verdict"), "message",
                          json_object_get(res, "message"));
        json_object_set_new(e->m->refs, key, known);
        json_decref(res);
    }
    const char *v = json_string_value(json_object_get(known, "verdict"));
    if (!v || strcmp(v, "ok") != 0)
        return kevo_mcp_fail(e->c, "the task's reference failed: %s -- %s (nothing can be "
                             "judged against it)", v ? v : "?",
                             json_string_value(json_object_get(known, "message")));
    return 0;
}

/* The candidate as a genome (its text as kevo run stores it); one that does not parse gets
 * its compile_error here, with no worker's time, as kevo eval gives it. */
static int ev_candidate(struct ev *e)
{
    char *msg = NULL;
    enum kevo_status st = kevo_genome_from_text(e->t, e->cand.shown, e->cand.text, e->cand.len,
                                                &e->g, &msg);

    if (st == KEVO_ERR_NOMEM)
        return kevo_mcp_fail(e->c, "out of memory");
    if (st) {
        e->res = kevo_result_doc_new(KEVO_VERDICT_COMPILE_ERROR, msg ? msg : "does not parse",
                                     json_pack("{s:s}", "message", msg ? msg : "?"));
        kevo_free(msg);
        e->text = kevo_strdup(e->cand.text);
        e->len = e->cand.len;
        return e->res && e->text ? 0 : kevo_mcp_fail(e->c, "out of memory");
    }
    e->has_g = 1;
    if (kevo_genome_text(&e->g, &e->text, &e->len) != KEVO_OK)
        return kevo_mcp_fail(e->c, "out of memory");
    return 0;
}

/* One request for the candidate: timed with the reference interleaved, or held out. */
static int ev_request(struct ev *e, int holdout, json_t **out)
{
    struct kevo_eval_call q = {
        .task_path = e->task.shown, .task_text = e->task.text, .cand_path = e->cand.shown,
        .cand_text = e->text, .trials = (int)e->trials, .holdout = holdout, .timed = !holdout,
        .time_reference = !holdout, .time_cap_s = e->time_cap_s, .sol = e->sol,
        .profile = e->profile && !holdout && e->b == MCP_CUDA,   /* counted in the worker */
    };
    char *msg = NULL;

    if (kevo_evalreq_call(e->pool, 0, &q, e->deadline_s, out, &msg) != KEVO_OK) {
        kevo_mcp_fail(e->c, "the evaluation failed (kevo's failure, not the candidate's): %s",
                      msg ? msg : "?");
        kevo_free(msg);
        return -1;
    }
    return 0;
}

static int ok_result(json_t *r)
{
    const char *v = json_string_value(json_object_get(r, "verdict"));
    return v && !strcmp(v, "ok");
}

/* Hardware counters of an ok CUDA candidate (kevo eval --profile), as its result's
 * "profile": the worker's (CUPTI), asked for with the evaluation; where it could not count,
 * ncu's, with the device to the profiler alone (the pool is started again later). */
static int ev_profile(struct ev *e)
{
    struct kevo_task *cand = NULL;
    char *ncu = NULL, *msg = NULL, cpath[PATH_MAX];
    json_t *prof = NULL, *raw = json_object_get(e->res, "profile");

    if (e->b != MCP_CUDA) {   /* the CPU backend has no counters */
        json_object_set_new(e->res, "profile", json_pack("{s:s, s:s}", "tool", "none", "error",
                                                         "the CPU backend has no counters"));
        return 0;
    }
    if (json_is_object(raw) && !json_object_get(raw, "error") &&
        kevo_profile_from_worker(raw, &prof, &msg) == KEVO_OK) {
        json_object_set_new(e->res, "profile", prof);
        return 0;
    }
    kevo_free(msg);
    msg = NULL;
    if (kevo_profile_find_ncu(&ncu, &msg) != KEVO_OK ||
        kevo_mcp_private_file(e->m, e->c, "profiled", "cu", e->text, e->len, cpath) ||
        kevo_candidate_parse(e->t, cpath, e->text, e->len, &cand, &msg) != KEVO_OK) {
        if (!e->c->is_error)
            kevo_mcp_fail(e->c, "%s", msg ? msg : "profile: cannot start");
        kevo_free(msg);
        kevo_free(ncu);
        return -1;
    }
    kevo_mcp_pool_close(e->m, e->b);
    struct kevo_profile_req pr = { .task_path = e->task.path, .cand_path = cpath, .task = e->t,
                                   .cand = cand, .backend = "cuda", .device = e->m->o->device,
                                   .ncu = ncu };
    if (kevo_profile_collect(&pr, &prof, &msg) != KEVO_OK)   /* the verdict stands */
        prof = json_pack("{s:s, s:s}", "tool", "ncu", "error", msg ? msg : "profile failed");
    json_object_set_new(e->res, "profile", prof ? prof : json_null());
    kevo_task_free(cand);
    kevo_free(msg);
    kevo_free(ncu);
    return 0;
}

static int ev_record(struct ev *e)
{
    struct kevo_trail *t = NULL;
    char *msg = NULL;

    if (kevo_mcp_trail(e->m, e->c, &t))
        return -1;
    if (kevo_trail_run(t, e->t, e->task.shown, kevo_mcp_backend_name(e->b), &e->run,
                       &msg) != KEVO_OK) {
        kevo_mcp_fail(e->c, "%s", msg ? msg : "cannot create the run");
        goto fail;
    }
    struct kevo_trail_cand tc = { .run = e->run, .task = e->t, .text = e->text, .len = e->len,
                                  .g = e->has_g ? &e->g : NULL, .parent = e->parent,
                                  .result = e->res, .holdout = e->hres };
    if (kevo_trail_record(t, &tc, &e->id, &e->dup, &msg) != KEVO_OK) {
        kevo_mcp_fail(e->c, "%s", msg ? msg : "cannot record the candidate");
        goto fail;
    }
    return 0;
fail:
    kevo_free(msg);
    return -1;
}

/* ---- the output ---- */

static json_t *num_or_null(double v)
{
    return isfinite(v) && v > 0 ? json_real(v) : json_null();
}

static double sub_num(json_t *o, const char *k1, const char *k2)
{
    json_t *v = json_object_get(k2 ? json_object_get(o, k1) : o, k2 ? k2 : k1);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Each evaluated workload's verdict and figures. */
static json_t *workloads_out(json_t *res)
{
    json_t *arr = json_array(), *w;
    size_t i;

    json_array_foreach(json_object_get(res, "workloads"), i, w) {
        json_t *o = json_pack("{s:O, s:O, s:O}", "index", json_object_get(w, "index"), "sizes",
                              json_object_get(w, "sizes"), "verdict",
                              json_object_get(w, "verdict"));
        json_object_set_new(o, "time_s", num_or_null(sub_num(w, "time", "median_s")));
        json_object_set_new(o, "noise", json_is_object(json_object_get(w, "time"))
                                            ? json_real(sub_num(w, "time", "noise"))
                                            : json_null());
        json_object_set_new(o, "ref_time_s", num_or_null(sub_num(w, "ref_time", "median_s")));
        json_object_set_new(o, "speedup", num_or_null(sub_num(w, "speedup", NULL)));
        json_object_set_new(o, "sol_fraction", num_or_null(sub_num(w, "sol_fraction", NULL)));
        json_object_set_new(o, "gbps", num_or_null(sub_num(w, "gbps", NULL)));
        json_object_set_new(o, "tflops", num_or_null(sub_num(w, "tflops", NULL)));
        json_object_set_new(o, "t_sol_s", num_or_null(sub_num(w, "t_sol_s", NULL)));
        if (json_object_get(w, "message"))
            json_object_set(o, "message", json_object_get(w, "message"));
        json_array_append_new(arr, o);
    }
    return arr;
}

/* The run's best so far: {candidate, time_s, sol_fraction, speedup}, or null. */
static json_t *run_best(struct ev *e)
{
    struct kevo_archive *a = e->m->trail ? kevo_trail_archive(e->m->trail) : NULL;
    struct kevo_cand_rec r;
    int64_t id = 0;
    int n = 0;
    json_t *o;

    memset(&r, 0, sizeof r);
    if (!a || kevo_archive_best(a, e->run, -1, 1, &id, &n) != KEVO_OK || !n ||
        kevo_archive_cand_get(a, id, &r) != KEVO_OK)
        return json_null();
    o = json_pack("{s:I, s:o, s:o, s:o}", "candidate", (json_int_t)id, "time_s",
                  num_or_null(r.score), "sol_fraction", num_or_null(r.sol_fraction), "speedup",
                  num_or_null(r.speedup));
    kevo_archive_cand_clear(&r);
    return o;
}

static json_t *ev_output(struct ev *e)
{
    double tm = 0, sol = 0, sp = 0;
    int hold_failed = e->hres && !ok_result(e->hres);
    char *msg = kevo_show_message(e->id, e->res);
    json_t *o;

    kevo_trail_summary(e->res, &tm, &sol, &sp);
    json_t *ev = json_object_get(e->res, "evidence");
    o = json_pack("{s:s, s:s, s:o, s:I, s:I, s:o, s:b, s:{s:s, s:s}, s:s}", "verdict",
                  hold_failed ? "holdout_fail" : json_string_value(json_object_get(e->res, "verdict")),
                  "message", msg ? msg : "", "evidence",
                  json_is_object(ev) ? json_incref(ev) : json_object(),
                  "candidate", (json_int_t)e->id, "run", (json_int_t)e->run, "parent",
                  e->parent ? json_integer(e->parent) : json_null(), "duplicate", e->dup,
                  "task", "name", e->t->name, "path", e->task.shown, "backend",
                  kevo_mcp_backend_name(e->b));
    kevo_free(msg);
    if (!o)
        return NULL;
    json_object_set_new(o, "summary", tm > 0 ? json_pack("{s:f, s:o, s:o}", "time_s", tm,
                                                         "sol_fraction", num_or_null(sol),
                                                         "speedup", num_or_null(sp))
                                             : json_null());
    json_object_set_new(o, "workloads", workloads_out(e->res));
    json_object_set_new(o, "holdout", e->hres ? json_pack("{s:O, s:O}", "verdict",
                                                          json_object_get(e->hres, "verdict"),
                                                          "message",
                                                          json_object_get(e->hres, "message"))
                                              : json_null());
    json_t *rs = json_object_get(e->res, "resources"), *log = json_object_get(e->res, "compile_log");
    json_t *prof = json_object_get(e->res, "profile");
    json_object_set_new(o, "resources", json_is_array(rs) ? json_incref(rs) : json_array());
    json_object_set_new(o, "compile_log", json_is_string(log) ? json_incref(log) : json_string(""));
    json_object_set_new(o, "profile", json_is_object(prof) ? json_incref(prof) : json_null());
    json_object_set_new(o, "run_best", run_best(e));
    return o;
}

/* The output as kevo eval prints it, for a model to read. */
static void ev_text(struct mcp_call *c, json_t *o)
{
    json_t *w, *s = json_object_get(o, "summary"), *b = json_object_get(o, "run_best");
    size_t i;

    kevo_mcp_say(c, "candidate %lld (run %lld, task %s, %s backend%s): %s -- %s\n",
                 (long long)json_integer_value(json_object_get(o, "candidate")),
                 (long long)json_integer_value(json_object_get(o, "run")),
                 json_string_value(json_object_get(json_object_get(o, "task"), "name")),
                 json_string_value(json_object_get(o, "backend")),
                 json_is_true(json_object_get(o, "duplicate")) ? ", evaluated before: recorded once" : "",
                 json_string_value(json_object_get(o, "verdict")),
                 json_string_value(json_object_get(o, "message")));
    json_array_foreach(json_object_get(o, "workloads"), i, w) {
        char *sz = json_dumps(json_object_get(w, "sizes"), JSON_COMPACT);
        kevo_mcp_say(c, "  %s %s", sz ? sz : "{}", json_string_value(json_object_get(w, "verdict")));
        if (json_is_number(json_object_get(w, "time_s")))
            kevo_mcp_say(c, "  %.4g us +-%.1f%%  %.1f%% of SOL  %.2fx vs ref (%.4g us)",
                         sub_num(w, "time_s", NULL) * 1e6, 100 * sub_num(w, "noise", NULL),
                         100 * sub_num(w, "sol_fraction", NULL), sub_num(w, "speedup", NULL),
                         sub_num(w, "ref_time_s", NULL) * 1e6);
        kevo_mcp_say(c, "\n");
        kevo_free(sz);
    }
    if (json_is_object(s))
        kevo_mcp_say(c, "  geomean: %.4g us, %.1f%% of SOL, %.2fx the reference\n",
                     sub_num(s, "time_s", NULL) * 1e6, 100 * sub_num(s, "sol_fraction", NULL),
                     sub_num(s, "speedup", NULL));
    if (json_object_size(json_object_get(o, "evidence"))) {
        char *ev = json_dumps(json_object_get(o, "evidence"), JSON_COMPACT);
        kevo_mcp_say(c, "  evidence: %.2000s\n", ev ? ev : "{}");
        kevo_free(ev);
    }
    const char *log = json_string_value(json_object_get(o, "compile_log"));
    if (log && *log && strcmp(json_string_value(json_object_get(o, "verdict")), "ok") != 0)
        kevo_mcp_say(c, "  compile log:\n%.*s\n", LOG_SHOWN, log);
    if (json_is_object(json_object_get(o, "holdout")))
        kevo_mcp_say(c, "  held-out workloads: %s\n",
                     json_string_value(json_object_get(json_object_get(o, "holdout"), "verdict")));
    if (json_is_object(b))
        kevo_mcp_say(c, "run %lld's best so far: candidate %lld, %.2fx the reference\n",
                     (long long)json_integer_value(json_object_get(o, "run")),
                     (long long)json_integer_value(json_object_get(b, "candidate")),
                     sub_num(b, "speedup", NULL));
}

void kevo_mcp_tool_eval(struct kevo_mcp *m, struct mcp_call *c)
{
    struct ev e;

    memset(&e, 0, sizeof e);
    e.m = m;
    e.c = c;
    if (ev_args(&e) || ev_task(&e) || ev_reference(&e) || ev_candidate(&e))
        goto out;
    if (!e.res && ev_request(&e, 0, &e.res))
        goto out;
    if (e.holdout && ok_result(e.res) && ev_request(&e, 1, &e.hres))
        goto out;
    if (e.profile && ok_result(e.res) && ev_profile(&e))
        goto out;
    if (ev_record(&e))
        goto out;
    c->out = ev_output(&e);
    if (!c->out)
        kevo_mcp_fail(c, "out of memory");
    else
        ev_text(c, c->out);
out:
    json_decref(e.res);
    json_decref(e.hres);
    kevo_free(e.text);
    kevo_genome_clear(&e.g);
    kevo_task_free(e.t);
    input_clear(&e.task);
    input_clear(&e.cand);
}

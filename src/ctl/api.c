/*
 * api - the command-level public API of kevo.h: check, eval and calibrate, as the CLI uses
 * them. This is controller code: it parses tasks, starts a worker pool and sends requests;
 * it never initialises CUDA itself (only workers do).
 */
#include "kevo.h"
#include "ctl/evalreq.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "ctl/pool.h"
#include "ctl/profile.h"
#include "ctl/sigcheck.h"
#include "core/result.h"
#include "core/rules.h"
#include "core/sol.h"
#include "core/task.h"
#include "base/clock.h"
#include "core/wire.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_DEADLINE_S 120.0
#define CALIBRATE_DEADLINE_S 600.0
#define SHOWN_LOG_MAX (60 << 10)   /* of a compile log in a message (the worker keeps 4 MiB) */

void kevo_eval_opts_default(struct kevo_eval_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = KEVO_BACKEND_AUTO;
    o->trials = 3;
    o->deadline_s = DEFAULT_DEADLINE_S;
}

static const char *check_arch(void)
{
    const char *a = getenv("KEVO_ARCH");
    return a && *a ? a : "sm_90a";
}

static enum kevo_status open_pool(const char *backend, int device, struct kevo_pool **out,
                                  char **out_msg);

/*
 * Compile the task, or the candidate against it, with the compiler of its language and no
 * device: in a worker started with `--backend none`, never in this process (untrusted
 * source goes to a compiler only where a crash costs a worker, not kevo).
 */
static enum kevo_status compile_only(const struct kevo_task *task,
                                     const struct kevo_task *cand, char **out_msg)
{
    const char *shown = cand ? cand->path : task->path;
    struct kevo_pool *pool = NULL;
    json_t *req = NULL, *reply = NULL, *res;
    enum kevo_status st = open_pool("none", 0, &pool, out_msg);

    if (st)
        goto out;
    req = json_pack("{s:s, s:s, s:s, s:s?, s:s?, s:s}", "op", "check", "path", task->path,
                    "text", task->source, "cand_path", cand ? cand->path : NULL, "cand_text",
                    cand ? cand->source : NULL, "arch", check_arch());
    if (!req) {
        st = KEVO_ERR_NOMEM;
        goto out;
    }
    st = kevo_pool_call(pool, 0, req, DEFAULT_DEADLINE_S, &reply);
    if (st) {
        *out_msg = kevo_strdupf("%s: the compile worker failed: %s", shown,
                                kevo_status_name(st));
        goto out;
    }
    res = json_object_get(reply, "result");
    if (!json_is_true(json_object_get(res, "ok"))) {
        const char *log = json_string_value(json_object_get(res, "log"));
        if (!log)   /* the worker's own failure, or a verdict it synthesized (timeout, crash) */
            log = json_string_value(json_object_get(json_is_object(res) ? res : reply,
                                                    "message"));
        st = KEVO_ERR_COMPILE;
        *out_msg = kevo_strdupf("%s: does not compile:\n%.*s", shown, SHOWN_LOG_MAX,
                                log ? log : "?");
    }
out:
    json_decref(reply);
    json_decref(req);
    kevo_pool_free(pool);
    return st;
}

enum kevo_status kevo_check_file(const char *path, const char *task_path, char **out_msg)
{
    struct kevo_task *task = NULL, *cand = NULL;
    enum kevo_status st;

    *out_msg = NULL;
    st = kevo_task_load(task_path ? task_path : path, &task, out_msg);
    if (st)
        goto out;
    if (task_path) {
        st = kevo_candidate_load(task, path, &cand, out_msg);
        if (st)
            goto out;
    }
    st = kevo_sig_check(task, cand, out_msg);
    if (!st)   /* what an evaluation would refuse before running anything */
        st = kevo_rules_check(task, cand, out_msg);
    if (!st)
        st = compile_only(task, cand, out_msg);
out:
    kevo_task_free(cand);
    kevo_task_free(task);
    return st;
}

/* ---- eval ---- */

static const char *backend_name(enum kevo_backend_kind k, enum kevo_lang lang)
{
    if (k == KEVO_BACKEND_CPU)
        return "cpu";
    if (k == KEVO_BACKEND_CUDA)
        return "cuda";
    return lang == KEVO_LANG_C ? "cpu" : "cuda";
}

struct evalctx {
    struct kevo_pool *pool;
    const struct kevo_eval_opts *opts;
    const char *task_path;
    char *task_text;
    json_t *sol;            /* the request's "sol" object */
    int profile;            /* count each ok candidate's hardware counters in the worker */
    char *dump_dir;         /* opts->dump_dir made absolute (the worker's cwd may differ) */
};

/*
 * One eval request, decoded into *out (kevo_result_clear it; out->doc is the worker's
 * result object); a non-OK status + msg when kevo could not evaluate. timed: time this
 * candidate (with the reference interleaved when it is a candidate).
 */
static enum kevo_status eval_one(struct evalctx *e, const char *cand_path, const char *cand_text,
                                 int holdout, int timed, struct kevo_result *out, char **out_msg)
{
    struct kevo_eval_call c = {
        .task_path = e->task_path, .task_text = e->task_text, .cand_path = cand_path,
        .cand_text = cand_text, .trials = e->opts->trials, .holdout = holdout,
        .timed = timed && !e->opts->no_timing, .time_reference = cand_text != NULL,
        .time_cap_s = e->opts->time_cap_s, .sol = e->sol, .dump_dir = e->dump_dir,
        .profile = e->profile && cand_text && !holdout,
    };
    return kevo_evalreq_call_result(e->pool, 0, &c, e->opts->deadline_s, out, out_msg);
}

/* Start the pool and calibrate (cached by the worker). */
/* One worker for `device` on `backend`; KEVO_WORKER_EXE overrides the worker binary. */
static enum kevo_status open_pool(const char *backend, int device, struct kevo_pool **out,
                                  char **out_msg)
{
    struct kevo_pool_opts po = {0};
    char *pmsg = NULL;

    po.backend = backend;
    po.n_devices = 1;
    po.devices = &device;
    po.exe = getenv("KEVO_WORKER_EXE");
    po.start_timeout_s = 60;
    enum kevo_status st = kevo_pool_open(&po, out, &pmsg);
    if (st)
        *out_msg = kevo_strdupf("cannot start a %s worker: %s", backend, pmsg ? pmsg : "");
    kevo_free(pmsg);
    return st;
}

/* dir as an absolute path (kevo_free); NULL when out of memory or cwd is unknown. */
static char *abs_dir(const char *dir)
{
    char cwd[PATH_MAX];

    if (dir[0] == '/')
        return kevo_strdup(dir);
    if (!getcwd(cwd, sizeof cwd))
        return NULL;
    return kevo_strdupf("%s/%s", cwd, dir);
}

static enum kevo_status eval_setup(struct evalctx *e, const char *backend, json_t **out_calib,
                                   char **out_msg)
{
    struct kevo_sol_figures f;
    enum kevo_status st;

    if (e->opts->dump_dir && e->opts->dump_dir[0]) {
        e->dump_dir = abs_dir(e->opts->dump_dir);
        if (!e->dump_dir) {
            *out_msg = kevo_strdupf("dump directory %s: %s", e->opts->dump_dir,
                                    strerror(errno));
            return KEVO_ERR_IO;
        }
    }
    st = open_pool(backend, e->opts->device, &e->pool, out_msg);

    if (!st)
        st = kevo_evalreq_calibrate(e->pool, 0, backend, 0, CALIBRATE_DEADLINE_S, out_calib, out_msg);
    if (st)
        return st;
    kevo_sol_figures_from_json(*out_calib, &f);
    e->sol = kevo_sol_figures_to_json(&f);
    return KEVO_OK;
}

/* The worker's raw counters in res's "profile" as the profile object (ctl/profile.h);
 * a failed collection stays as the worker said it, for ncu to try instead. */
static void worker_profile(json_t *res)
{
    json_t *raw = json_object_get(res, "profile"), *prof = NULL;
    char *msg = NULL;

    if (!raw || json_object_get(raw, "error"))
        return;
    if (kevo_profile_from_worker(raw, &prof, &msg) == KEVO_OK) {
        json_object_set_new(res, "profile", prof);
        return;
    }
    json_object_set_new(res, "profile", json_pack("{s:s, s:s}", "tool", "cupti", "error",
                                                  msg ? msg : "malformed"));
    kevo_free(msg);
}

/* Evaluate one candidate file into a JSON entry (always returns an entry). */
static json_t *eval_candidate(struct evalctx *e, const struct kevo_task *task, const char *path,
                              int *fatal, char **out_msg)
{
    struct kevo_task *cand = NULL;
    struct kevo_result r = { 0 }, h = { 0 };
    char *perr = NULL, *text = NULL;
    json_t *res = NULL;
    size_t len;

    if (kevo_candidate_load(task, path, &cand, &perr) != KEVO_OK) {
        /* docs/eval-json.md: a file that does not parse is a compile_error whose evidence
         * is the parser's message */
        res = kevo_result_doc_new(KEVO_VERDICT_COMPILE_ERROR, perr ? perr : "?",
                                  json_pack("{s:s}", "message", perr ? perr : "?"));
        goto out;
    }
    if (kevo_fs_read_file(path, KEVO_TASK_MAX_FILE, &text, &len, out_msg) != KEVO_OK ||
        eval_one(e, path, text, 0, 1, &r, out_msg) != KEVO_OK) {
        *fatal = 1;
        goto out;
    }
    res = json_incref(r.doc);
    worker_profile(res);
    if (e->opts->holdout && r.verdict == KEVO_VERDICT_OK) {
        if (eval_one(e, path, text, 1, 0, &h, out_msg) != KEVO_OK) {
            *fatal = 1;
            goto out;
        }
        json_object_set(res, "holdout", h.doc);
        if (h.verdict != KEVO_VERDICT_OK)
            json_object_set_new(res, "verdict",
                                json_string(kevo_verdict_name(KEVO_VERDICT_HOLDOUT_FAIL)));
    }
out:
    if (res)
        json_object_set_new(res, "path", json_string(path));
    kevo_result_clear(&h);
    kevo_result_clear(&r);
    kevo_free(perr);
    kevo_free(text);
    kevo_task_free(cand);
    return res;
}

enum kevo_status kevo_eval_json(const char *task_path, const char *const *cand_paths,
                                int n_cands, const struct kevo_eval_opts *opts,
                                char **out_json, char **out_msg)
{
    struct evalctx e = {0};
    struct kevo_task *task = NULL;
    struct kevo_result ref_r = { 0 }, ref_h = { 0 };
    json_t *doc = NULL, *calib = NULL, *cands = NULL, *ref = NULL;
    enum kevo_status st;
    int fatal = 0;
    double t_profile = 0;

    *out_json = NULL;
    *out_msg = NULL;
    e.opts = opts;
    e.task_path = task_path;
    st = kevo_task_load(task_path, &task, out_msg);
    if (st)
        goto out;
    size_t task_len;
    st = kevo_fs_read_file(task_path, KEVO_TASK_MAX_FILE, &e.task_text, &task_len, out_msg);
    if (st)
        goto out;
    if (opts->backend == KEVO_BACKEND_CPU && task->lang == KEVO_LANG_CUDA) {
        *out_msg = kevo_strdupf("%s: a CUDA task needs the CUDA backend", task_path);
        st = KEVO_ERR_INVALID;
        goto out;
    }
    const char *backend = backend_name(opts->backend, task->lang);
    e.profile = opts->profile && !strcmp(backend, "cuda");
    double t_start = kevo_now();
    st = eval_setup(&e, backend, &calib, out_msg);
    if (st)
        goto out;
    double t_setup = kevo_now() - t_start;
    /* With candidates, the reference is timed inside each candidate's request, interleaved
     * with it (a same-run ratio); timing it alone as well would only cost time. */
    st = eval_one(&e, task_path, NULL, 0, n_cands == 0, &ref_r, out_msg);
    if (!st && e.dump_dir && opts->holdout)   /* the holdouts are dumped as well */
        st = eval_one(&e, task_path, NULL, 1, 0, &ref_h, out_msg);
    if (st) {
        st = KEVO_ERR_WORKER;
        goto out;
    }
    ref = json_incref(ref_r.doc);
    if (ref_h.doc)
        json_object_set(ref, "holdout", ref_h.doc);
    cands = json_array();
    /* A reference that fails its own evaluation cannot judge anyone: its failure (a crash
     * of its run, say) would only be reported again as each candidate's. */
    int ref_ok = ref_r.verdict == KEVO_VERDICT_OK &&
                 (!ref_h.doc || ref_h.verdict == KEVO_VERDICT_OK);
    for (int i = 0; i < n_cands && !fatal && ref_ok; i++) {
        json_t *c = eval_candidate(&e, task, cand_paths[i], &fatal, out_msg);
        if (c)
            json_array_append_new(cands, c);
    }
    if (fatal) {
        st = KEVO_ERR_WORKER;
        goto out;
    }
    if (e.profile) {   /* what the worker could not count, ncu counts: the device to it alone */
        struct kevo_profile_req pr = {
            .task_path = task_path, .task = task, .backend = backend, .device = opts->device,
            .eval_deadline_s = opts->deadline_s > 300 ? opts->deadline_s : 0,
        };
        if (kevo_profile_missing(cands)) {
            kevo_pool_free(e.pool);
            e.pool = NULL;
        }
        t_profile = kevo_profile_cands(&pr, cands);
    }
    doc = json_pack("{s:s, s:{s:s, s:s}, s:s, s:O, s:O, s:O, s:{s:f, s:f}}", "kevo_version",
                    KEVO_VERSION, "task", "path", task_path, "name", task->name, "backend",
                    backend, "calibration", calib, "reference", ref, "candidates", cands,
                    "wall_s", "worker_start_and_calibration", t_setup, "total",
                    kevo_now() - t_start);
    if (doc && e.profile)
        json_object_set_new(json_object_get(doc, "wall_s"), "profile", json_real(t_profile));
    *out_json = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!*out_json)
        st = KEVO_ERR_NOMEM;
out:
    json_decref(doc);
    json_decref(calib);
    json_decref(cands);
    json_decref(ref);
    kevo_result_clear(&ref_r);
    kevo_result_clear(&ref_h);
    json_decref(e.sol);
    kevo_pool_free(e.pool);
    kevo_free(e.task_text);
    kevo_free(e.dump_dir);
    kevo_task_free(task);
    return st;
}

enum kevo_status kevo_calibrate_json(enum kevo_backend_kind backend, int device, int force,
                                     char **out_json, char **out_msg)
{
    const char *name = backend == KEVO_BACKEND_CPU ? "cpu" : "cuda";
    struct kevo_pool *pool = NULL;
    json_t *res = NULL;
    enum kevo_status st;

    *out_json = NULL;
    *out_msg = NULL;
    st = open_pool(name, device, &pool, out_msg);
    if (!st)
        st = kevo_evalreq_calibrate(pool, 0, name, force, CALIBRATE_DEADLINE_S, &res, out_msg);
    if (!st) {
        *out_json = json_dumps(res, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        st = *out_json ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    json_decref(res);
    kevo_pool_free(pool);
    return st;
}

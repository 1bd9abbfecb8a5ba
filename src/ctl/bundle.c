/*
 * bundle - the prompt kevo would send a model, outside a run (bundle.h), and `kevo prompt`
 * (kevo.h: kevo_prompt_json), which finds the evidence in files and the device's figures
 * in kevo's calibration cache.
 */
#include "ctl/bundle.h"

#include "base/fsutil.h"
#include "base/mem.h"
#include "ctl/prompt.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVAL_JSON_MAX ((size_t)64 << 20)

static const char *const ops[] = { "generate", "improve", "fix", "plan" };

/* dir of the run-time data, as run_llm.c finds it: opt, else $env, else DATA/sub. */
static const char *data_sub(const char *env, const char *sub, char *buf, size_t n)
{
    const char *e = env ? getenv(env) : NULL;

    if (e && *e)
        return e;
    snprintf(buf, n, "%s/%s", kevo_data_dir(NULL), sub);
    return buf;
}

enum kevo_status kevo_bundle_build(const struct kevo_bundle *b, json_t **out, char **out_msg)
{
    char tdir[PATH_MAX], pdir[PATH_MAX], *sys = NULL, *usr = NULL;
    const char *op = b->op ? b->op : b->cand_text ? "improve" : "generate";
    int known = 0;
    enum kevo_status st;

    *out = NULL;
    *out_msg = NULL;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        known |= !strcmp(op, ops[i]);
    if (!known) {
        *out_msg = kevo_strdupf("op '%s': not one of %s", op, KEVO_BUNDLE_OPS);
        return KEVO_ERR_INVALID;
    }
    if (strcmp(op, "generate") != 0 && !b->cand_text) {
        *out_msg = kevo_strdupf("op %s needs a candidate (generate does not)", op);
        return KEVO_ERR_INVALID;
    }
    struct kevo_prompt_ctx pc = {
        .template_dir = data_sub("KEVO_PROMPTS", "prompts", tdir, sizeof tdir),
        .playbook_dir = data_sub(NULL, "docs/playbook", pdir, sizeof pdir),
        .task_text = b->task->source, .lang = b->task->lang == KEVO_LANG_CUDA ? "cuda" : "c",
        .tags = (const char *const *)b->task->tags, .n_tags = b->task->n_tags,
        .calib = b->calib, .parent = b->cand_text, .result = b->result,
        .siblings = b->siblings, .task = b->task,
    };
    st = kevo_prompt_build(op, &pc, &sys, &usr, out_msg);
    if (!st) {
        *out = json_pack("{s:s, s:s, s:s, s:s}", "op", op, "template", op, "system", sys,
                         "user", usr);
        st = *out ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    kevo_free(sys);
    kevo_free(usr);
    return st;
}

/* The entry of doc's "candidates" whose path is cand_path, else the first. */
static json_t *doc_candidate(json_t *doc, const char *cand_path)
{
    json_t *cands = json_object_get(doc, "candidates"), *c;
    size_t i;

    json_array_foreach(cands, i, c) {
        const char *p = json_string_value(json_object_get(c, "path"));
        if (p && cand_path && !strcmp(p, cand_path))
            return c;
    }
    return json_array_get(cands, 0);
}

enum kevo_status kevo_bundle_result_of(const char *name, const char *text, const char *cand_path,
                                       json_t **out_result, json_t **out_calib, char **out_msg)
{
    json_error_t e;
    json_t *doc = json_loads(text, 0, &e), *res = NULL;

    *out_result = *out_calib = NULL;
    *out_msg = NULL;
    if (!json_is_object(doc)) {
        *out_msg = doc ? kevo_strdupf("%s: not a JSON object", name)
                       : kevo_strdupf("%s:%d:%d: %s", name, e.line, e.column, e.text);
        json_decref(doc);
        return KEVO_ERR_PARSE;
    }
    if (json_is_array(json_object_get(doc, "candidates"))) {   /* kevo eval --json */
        res = doc_candidate(doc, cand_path);
        *out_calib = json_incref(json_object_get(doc, "calibration"));
        if (!res) {
            *out_msg = kevo_strdupf("%s: its \"candidates\" is empty (the reference failed, or "
                                    "no candidate was given)", name);
            json_decref(*out_calib);
            *out_calib = NULL;
            json_decref(doc);
            return KEVO_ERR_PARSE;
        }
    } else if (json_is_object(json_object_get(doc, "result"))) {   /* the eval tool's */
        res = json_object_get(doc, "result");
    } else if (json_is_string(json_object_get(doc, "verdict"))) {
        res = doc;
    } else {
        *out_msg = kevo_strdupf("%s: neither a `kevo eval --json` document nor an eval result "
                                "(no \"candidates\", \"result\" or \"verdict\")", name);
        json_decref(doc);
        return KEVO_ERR_PARSE;
    }
    *out_result = json_incref(res);
    json_decref(doc);
    return KEVO_OK;
}

/* ---- kevo prompt ---- */

void kevo_prompt_opts_default(struct kevo_prompt_opts *o)
{
    memset(o, 0, sizeof *o);
}

/* A file's text into *out (kevo_free), naming it on failure. */
static enum kevo_status read_text(const char *path, char **out, char **out_msg)
{
    size_t n;
    return kevo_fs_read_file(path, EVAL_JSON_MAX, out, &n, out_msg);
}

/* The device's figures: the given file's, the eval document's, else measured (or from
 * kevo's cache) on the task's backend; *how says which, or why none. */
static enum kevo_status device_of(const struct kevo_prompt_opts *o, const struct kevo_task *task,
                                  json_t **calib, char *how, size_t n, char **out_msg)
{
    char *text = NULL, *msg = NULL;
    enum kevo_status st;

    if (o->calibration) {
        st = read_text(o->calibration, &text, out_msg);
        json_decref(*calib);
        *calib = st ? NULL : json_loads(text, 0, NULL);
        kevo_free(text);
        if (!st && !json_is_object(*calib)) {
            *out_msg = kevo_strdupf("%s: not a JSON object (kevo calibrate --json)",
                                    o->calibration);
            st = KEVO_ERR_PARSE;
        }
        snprintf(how, n, "given: %s", o->calibration);
        return st;
    }
    if (*calib) {
        snprintf(how, n, "from the eval document");
        return KEVO_OK;
    }
    st = kevo_calibrate_json(task->lang == KEVO_LANG_C ? KEVO_BACKEND_CPU : KEVO_BACKEND_CUDA,
                             o->device, 0, &text, &msg);
    *calib = st ? NULL : json_loads(text, 0, NULL);
    if (*calib)
        snprintf(how, n, "measured (kevo calibrate, cached)");
    else   /* a prompt without the device is still a prompt: say why it has none */
        snprintf(how, n, "unknown: %.200s", msg ? msg : "the calibration did not parse");
    kevo_free(text);
    kevo_free(msg);
    return KEVO_OK;
}

enum kevo_status kevo_prompt_json(const char *task_path, const char *cand_path,
                                  const struct kevo_prompt_opts *o, char **out_json,
                                  char **out_msg)
{
    struct kevo_task *task = NULL;
    char *cand = NULL, *ev = NULL, how[512];
    json_t *res = NULL, *calib = NULL, *doc = NULL;
    size_t n;
    enum kevo_status st;

    *out_json = NULL;
    *out_msg = NULL;
    st = kevo_task_load(task_path, &task, out_msg);
    if (!st && cand_path)
        st = kevo_fs_read_file(cand_path, KEVO_TASK_MAX_FILE, &cand, &n, out_msg);
    if (!st && o->eval_json)
        st = read_text(o->eval_json, &ev, out_msg);
    if (!st && ev)
        st = kevo_bundle_result_of(o->eval_json, ev, cand_path, &res, &calib, out_msg);
    if (!st)
        st = device_of(o, task, &calib, how, sizeof how, out_msg);
    if (!st) {
        struct kevo_bundle b = { .op = o->op, .task = task, .cand_text = cand, .result = res,
                                 .calib = calib };
        st = kevo_bundle_build(&b, &doc, out_msg);
    }
    if (!st) {
        json_object_set_new(doc, "task", json_string(task_path));
        json_object_set_new(doc, "candidate", cand_path ? json_string(cand_path) : json_null());
        json_object_set_new(doc, "evaluated", json_boolean(res != NULL));
        json_object_set_new(doc, "device", json_string(how));
        *out_json = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        st = *out_json ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    json_decref(doc);
    json_decref(res);
    json_decref(calib);
    kevo_free(ev);
    kevo_free(cand);
    kevo_task_free(task);
    return st;
}

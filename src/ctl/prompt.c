/*
 * prompt - LLM prompts from templates and evidence (prompt.h). Everything that reaches a
 * prompt comes from what the proposer may see: the task without its holdout lines, the
 * candidates' own sources, and the verdicts and metrics kevo reported for them.
 */
#include "ctl/prompt.h"
#include "base/buf.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "ctl/playbook.h"
#include "ctl/profile.h"
#include "core/result.h"
#include "core/task.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEMPLATE_MAX ((size_t)1 << 20)
#define PROMPT_MAX ((size_t)8 << 20)
#define LOG_EXCERPT 2000
#define RIDGE 20.0   /* FLOP/byte where fp32 FMA time meets DRAM time on an H100 */

/* dir/name as text, NULL when it cannot be read (the caller names the file). */
static char *read_file(const char *dir, const char *name, size_t cap)
{
    char path[4096], *t = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return kevo_fs_read_file(path, cap, &t, &n, NULL) == KEVO_OK ? t : NULL;
}

/* Is line [s, e) a `// kevo holdout` directive? */
static int holdout_line(const char *s, const char *e)
{
    const char *kw;
    size_t n;
    return kevo_task_directive(s, (size_t)(e - s), &kw, &n) && n == 7 && !strncmp(kw, "holdout", 7);
}

char *kevo_prompt_task_text(const char *t)
{
    struct kevo_buf b;
    const char *p = t;
    kevo_buf_init(&b, PROMPT_MAX);
    while (*p) {
        const char *nl = strchr(p, '\n'), *e = nl ? nl + 1 : p + strlen(p);
        if (!holdout_line(p, nl ? nl : e) && kevo_buf_add(&b, p, (size_t)(e - p)) != KEVO_OK)
            break;
        p = e;
    }
    return kevo_buf_take(&b);
}

/* ---- evidence ---- */

static double num(json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

static void device_text(struct kevo_buf *b, json_t *c)
{
    json_t *d = json_object_get(c, "device"), *bw = json_object_get(c, "bandwidth");
    json_t *pk = json_object_get(c, "peaks");
    if (!d) {
        kevo_buf_say(b, "(unknown)");
        return;
    }
    kevo_buf_say(b, "%s (%s): %d SMs, L2 %.0f MB, %.0f GB memory, SM clock %d MHz. Measured by kevo "
         "calibrate: DRAM %.0f GB/s (read %.0f, write %.0f, copy %.0f)",
         json_string_value(json_object_get(d, "name")), json_string_value(json_object_get(d, "arch")),
         (int)num(d, "sms"), num(d, "l2_bytes") / 1e6, num(d, "mem_bytes") / 1e9,
         (int)num(d, "clock_mhz"), num(bw, "best_bytes_per_s") / 1e9, num(bw, "read_bytes_per_s") / 1e9,
         num(bw, "write_bytes_per_s") / 1e9, num(bw, "copy_bytes_per_s") / 1e9);
    const char *k;
    json_t *v;
    json_object_foreach(pk, k, v) {
        if (num(v, "measured_flops_per_s") > 0)
            kevo_buf_say(b, "; %s %.0f TFLOP/s", k, num(v, "measured_flops_per_s") / 1e12);
    }
    kevo_buf_say(b, "; launch floor %.1f us.", num(c, "launch_floor_s") * 1e6);
}

/*
 * The results' figures as prompts have always shown them: a non-finite one (the worker's
 * "nan"/"inf") reads 0, and so does a launch figure that is absent (-1 in core/result.h).
 * The same evidence must give the same prompt: replays and the reply cache depend on it.
 */
static double fin(double v) { return isfinite(v) ? v : 0.0; }
static int or0(int64_t v) { return v < 0 ? 0 : (int)v; }

/* The results of a prompt, decoded once: NULL when there is none or it does not decode. */
struct results {
    const struct kevo_result *r, *r2;
};

/* doc is the result document (NULL: not evaluated); r its decoding (NULL: it has none). */
static void verdict_text(struct kevo_buf *b, json_t *doc, const struct kevo_result *r)
{
    if (!doc) {
        kevo_buf_say(b, "(not evaluated yet)");
        return;
    }
    if (!r) {   /* no verdict of enum kevo_verdict in it: nothing to say about it */
        kevo_buf_say(b, "Verdict: ?");
        return;
    }
    const char *log = json_string_value(json_object_get(r->doc, "compile_log"));
    kevo_buf_say(b, "Verdict: %s", kevo_verdict_name(r->verdict));
    if (*r->message)
        kevo_buf_say(b, " - %s", r->message);
    if (json_object_size(r->evidence)) {
        char *e = json_dumps(r->evidence, JSON_COMPACT);
        kevo_buf_say(b, "\nEvidence: %.3000s", e ? e : "{}");
        kevo_free(e);
    }
    if (log && *log)
        kevo_buf_say(b, "\nCompiler output (excerpt):\n```\n%.*s\n```", LOG_EXCERPT, log);
}

static void metrics_text(struct kevo_buf *b, const struct kevo_result *r)
{
    if (!r || !r->n_wl)
        return;
    kevo_buf_say(b, "Per workload (median time, fraction of the speed-of-light floor, "
                 "what bounds it):\n");
    for (int i = 0; i < r->n_wl; i++) {
        const struct kevo_result_wl *w = &r->wl[i];
        char *sz = json_dumps(w->sizes, JSON_COMPACT);
        double bytes = fin(w->bytes), fl = fin(w->flops), ai = bytes > 0 ? fl / bytes : 0;
        kevo_buf_say(b, "- %s: %s", sz ? sz : "{}", kevo_verdict_name(w->verdict));
        if (w->time.present)
            kevo_buf_say(b, ", %.4g us, %.0f%% of SOL, %.0f GB/s, %.2f TFLOP/s, "
                         "%.1f FLOP/byte (%s)", fin(w->time.median_s) * 1e6,
                         100 * fin(w->sol_fraction), fin(w->gbps), fin(w->tflops), ai,
                         ai > RIDGE ? "compute-heavy" : "memory-bound");
        kevo_buf_say(b, "\n");
        kevo_free(sz);
    }
    for (int i = 0; i < r->n_res; i++) {
        const struct kevo_result_res *k = &r->res[i];
        kevo_buf_say(b, "- kernel %s: %d registers/thread, %d B static shared memory, "
                     "%d B local memory (spills)%s, block %d, %d blocks/SM\n", k->kernel,
                     (int)k->regs, (int)k->static_smem, (int)k->local_bytes,
                     k->local_bytes > 0 ? " <- spilling" : "", or0(k->block),
                     or0(k->blocks_per_sm));
    }
}

/* The parent's bottleneck, for choosing notes: "memory", "compute" or "latency". */
static const char *bottleneck(const struct kevo_result *r)
{
    const struct kevo_result_wl *w = r && r->n_wl ? &r->wl[0] : NULL;
    double t = w ? fin(w->time.median_s) : 0;
    if (!w || !(t > 0))
        return "any";
    if (t < 10e-6)
        return "latency";
    return fin(w->bytes) > 0 && fin(w->flops) / fin(w->bytes) > RIDGE ? "compute" : "memory";
}

/*
 * The parent's hardware counters (its result's "profile", kevo eval --profile), set apart
 * from what precedes them by one blank line; exactly nothing when it has none, so that
 * templates gaining {{profile}} build the prompts they built before for such parents
 * (replays compare them).
 */
static void profile_text(struct kevo_buf *b, json_t *result)
{
    struct kevo_buf t;

    kevo_buf_init(&t, PROMPT_MAX);
    kevo_profile_text(json_object_get(result, "profile"), &t);
    if (t.len)
        kevo_buf_say(b, "%s%s", b->len && b->data[b->len - 1] == '\n' ? "\n" : "\n\n",
                     kevo_buf_str(&t));
    kevo_buf_free(&t);
}

/* ---- playbook ---- */

/*
 * The playbook section (ctl/playbook.h): notes for the task's intrinsic bound (its bytes
 * and flops against the device, else the parent's measured one) and the bound seen on the
 * parent (its profile's diagnosis, or latency when its first workload ran under 10 us).
 */
static void playbook_text(struct kevo_buf *b, const struct kevo_prompt_ctx *c,
                          const struct kevo_result *r)
{
    const char *bound = kevo_playbook_bound(c->task, c->calib);
    const char *seen = kevo_playbook_profiled(json_object_get(c->result, "profile"));
    const char *measured = bottleneck(r);
    struct kevo_playbook_req q = {
        .dir = c->playbook_dir, .lang = c->lang, .task = c->task, .tags = c->tags,
        .n_tags = c->n_tags, .bound = bound ? bound : measured,
        .observed = seen ? seen : !strcmp(measured, "latency") ? measured : NULL,
        .measured = measured,
        .parent = c->parent, .parent2 = c->parent2, .max_notes = c->max_notes,
        .max_chars = c->max_chars,
    };
    if (!c->playbook_dir)
        kevo_buf_say(b, "(none)");
    else
        kevo_playbook_text(&q, b);
}

/* ---- templates ---- */

static enum kevo_status fill_one(struct kevo_buf *b, const char *key, size_t kl,
                                 const struct kevo_prompt_ctx *c, const struct results *res)
{
#define IS(k) (kl == strlen(k) && !strncmp(key, k, kl))
    if (IS("task")) {
        char *t = kevo_prompt_task_text(c->task_text ? c->task_text : "");
        kevo_buf_say(b, "%s", t ? t : "");
        kevo_free(t);
    } else if (IS("device")) {
        device_text(b, c->calib);
    } else if (IS("parent")) {
        kevo_buf_say(b, "%s", c->parent ? c->parent : "");
    } else if (IS("parent2")) {
        kevo_buf_say(b, "%s", c->parent2 ? c->parent2 : "");
    } else if (IS("verdict")) {
        verdict_text(b, c->result, res->r);
    } else if (IS("metrics")) {
        metrics_text(b, res->r);
    } else if (IS("metrics2")) {
        metrics_text(b, res->r2);
    } else if (IS("siblings")) {
        kevo_buf_say(b, "%s", c->siblings && *c->siblings ? c->siblings : "(nothing yet)");
    } else if (IS("playbook")) {
        playbook_text(b, c, res->r);
    } else if (IS("plan")) {
        kevo_buf_say(b, "%s", c->plan ? c->plan : "");
    } else if (IS("profile")) {
        profile_text(b, c->result);
    } else {
        return KEVO_ERR_NOTFOUND;
    }
    return KEVO_OK;
#undef IS
}

static enum kevo_status render(const char *tpl, const char *file, const struct kevo_prompt_ctx *c,
                               const struct results *res, char **out, char **why)
{
    struct kevo_buf b;
    const char *p = tpl;
    kevo_buf_init(&b, PROMPT_MAX);
    while (*p) {
        const char *o = strstr(p, "{{"), *e = o ? strstr(o + 2, "}}") : NULL;
        if (!o || !e) {
            kevo_buf_say(&b, "%s", p);
            break;
        }
        kevo_buf_say(&b, "%.*s", (int)(o - p), p);
        if (fill_one(&b, o + 2, (size_t)(e - o - 2), c, res) != KEVO_OK) {
            *why = kevo_strdupf("%s: unknown placeholder {{%.*s}} (known: task device parent "
                                "parent2 verdict metrics metrics2 siblings playbook plan "
                                "profile)", file,
                                (int)(e - o - 2 < 64 ? e - o - 2 : 64), o + 2);
            kevo_buf_free(&b);
            return KEVO_ERR_PARSE;
        }
        p = e + 2;
    }
    *out = kevo_buf_take(&b);
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

/* doc decoded into *r (r is cleared first); NULL when doc is NULL or does not decode. */
static const struct kevo_result *decoded(json_t *doc, struct kevo_result *r)
{
    char *why = NULL;
    enum kevo_status st = KEVO_ERR_NOTFOUND;

    memset(r, 0, sizeof *r);
    if (doc)
        st = kevo_result_decode(doc, r, &why);
    kevo_free(why);
    return st == KEVO_OK ? r : NULL;
}

enum kevo_status kevo_prompt_build(const char *name, const struct kevo_prompt_ctx *c,
                                   char **system, char **user, char **why)
{
    char file[300];
    enum kevo_status st;
    struct kevo_result r1, r2;
    struct results res;
    char *sys_t = read_file(c->template_dir, "system.md", TEMPLATE_MAX), *usr_t;

    *system = *user = *why = NULL;
    snprintf(file, sizeof file, "%s.md", name);
    usr_t = read_file(c->template_dir, file, TEMPLATE_MAX);
    if (!sys_t || !usr_t) {
        *why = kevo_strdupf("%s/%s: cannot read the prompt template", c->template_dir,
                            sys_t ? file : "system.md");
        kevo_free(sys_t);
        kevo_free(usr_t);
        return KEVO_ERR_NOTFOUND;
    }
    res.r = decoded(c->result, &r1);
    res.r2 = decoded(c->result2, &r2);
    st = render(sys_t, "system.md", c, &res, system, why);
    if (!st)
        st = render(usr_t, file, c, &res, user, why);
    if (st) {
        kevo_free(*system);
        *system = NULL;
    }
    kevo_result_clear(&r1);
    kevo_result_clear(&r2);
    kevo_free(sys_t);
    kevo_free(usr_t);
    return st;
}

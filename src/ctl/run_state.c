/*
 * run_state - the services every part of `kevo run` uses on its state (run_state.h):
 * events, kevo's own failures, candidates recorded in the archive and sent, the genome
 * cache, the reference's figures, the operator table's names; and run.h's helpers (the
 * task as a seed, the default archive) that the step sources and other commands share.
 */
#include "ctl/run_state.h"

#include "ctl/run.h"

#include "base/log.h"
#include "base/mem.h"
#include "ctl/steps.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kevo_run_job_free(struct job *j)
{
    if (!j)
        return;
    kevo_genome_clear(&j->g);
    kevo_llm_call_free(j->llm);
    kevo_free(j->text);
    kevo_free(j->msg);
    json_decref(j->result);
    kevo_free(j);
}

void kevo_run_event(struct runctx *r, json_t *e)
{
    if (!e)
        return;
    if (r->ev) {
        char *s = json_dumps(e, JSON_COMPACT);
        if (s)
            r->ev(r->user, s);
        kevo_free(s);
    }
    json_decref(e);
}

enum kevo_status kevo_run_fail(struct runctx *r, enum kevo_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum kevo_status kevo_run_fail(struct runctx *r, enum kevo_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!r->msg.len && kevo_buf_vaddf(&r->msg, fmt, ap) != KEVO_OK) {
        /* keep what fitted */
    }
    va_end(ap);
    return st;
}

/* The genome of candidate id (cached; borrowed until the next call that may evict). */
enum kevo_status kevo_run_genome_of(struct runctx *r, int64_t id, const struct kevo_genome **out)
{
    struct kevo_cand_rec c;
    char *text = NULL, *pmsg = NULL, path[64];
    size_t len = 0;
    enum kevo_status st;

    for (int i = 0; i < GENOME_CACHE; i++)
        if (r->loop.cache[i].id == id) {
            *out = &r->loop.cache[i].g;
            return KEVO_OK;
        }
    memset(&c, 0, sizeof c);
    st = kevo_archive_cand_get(r->ar, id, &c);
    if (!st)
        st = kevo_archive_source_get(r->ar, c.source_hash, &text, &len);
    struct cached_genome *slot = &r->loop.cache[r->loop.cache_next];
    kevo_genome_clear(&slot->g);
    slot->id = 0;
    snprintf(path, sizeof path, "cand%lld%s", (long long)id,
             r->set.task->lang == KEVO_LANG_CUDA ? ".cu" : ".c");
    if (!st)
        st = kevo_genome_from_text(r->set.task, path, text, len, &slot->g, &pmsg);
    if (!st) {
        slot->id = id;
        r->loop.cache_next = (r->loop.cache_next + 1) % GENOME_CACHE;
        *out = &slot->g;
    } else {
        st = kevo_run_fail(r, st, "candidate %lld in the archive cannot be read back: %s",
                  (long long)id, pmsg ? pmsg : kevo_archive_errmsg(r->ar));
    }
    kevo_free(pmsg);
    kevo_free(text);
    kevo_archive_cand_clear(&c);
    return st;
}

/* A job for genome g (taken), recorded as a pending candidate. KEVO_ERR_INVALID when the
 * run already has it (the genome is dropped). */
enum kevo_status kevo_run_record(struct runctx *r, struct kevo_genome *g, const char *op, int op_i,
                               int64_t p1, int64_t p2, double p1_score, int island,
                               struct job **out)
{
    struct kevo_cand_rec c;
    struct job *j = kevo_calloc(1, sizeof *j);
    size_t len = 0;
    enum kevo_status st = j ? KEVO_OK : KEVO_ERR_NOMEM;

    *out = NULL;
    memset(&c, 0, sizeof c);
    if (!st) {
        j->g = *g;
        memset(g, 0, sizeof *g);
        st = kevo_genome_text(&j->g, &j->text, &len);
    }
    if (!st)
        st = kevo_archive_source_put(r->ar, j->text, len, c.source_hash);
    if (!st)
        st = kevo_sha256_hex(j->text, len, c.key);
    if (!st)
        st = kevo_genome_json(&j->g, &c.params_json, &c.flags_json);
    if (!st) {
        c.run_id = r->run;
        c.parent1 = p1;
        c.parent2 = p2;
        snprintf(c.op, sizeof c.op, "%s", op);
        c.island = island;
        c.cell = -1;
        st = kevo_archive_cand_add(r->ar, &c, &j->id);
    }
    if (!st) {
        j->op = op_i;
        j->model = -1;
        j->island = island;
        j->parent_score = p1_score;
        snprintf(j->path, sizeof j->path, "cand%lld%s", (long long)j->id,
                 r->set.task->lang == KEVO_LANG_CUDA ? ".cu" : ".c");
        *out = j;
    } else {
        if (st != KEVO_ERR_INVALID)
            st = kevo_run_fail(r, st, "recording a candidate: %s", kevo_archive_errmsg(r->ar));
        kevo_run_job_free(j);
    }
    kevo_free(c.params_json);
    kevo_free(c.flags_json);
    return st;
}

void kevo_run_send(struct runctx *r, struct job *j)
{
    r->loop.inflight++;
    r->steps->send(r, j);
}

void kevo_run_reference_set(struct runctx *r)
{
    size_t i;
    json_t *w;

    json_array_foreach(json_object_get(r->loop.ref, "workloads"), i, w) {
        int idx = (int)json_integer_value(json_object_get(w, "index"));
        if (idx >= 0 && idx < r->loop.n_wl)
            r->loop.ref_median[idx] =
                json_number_value(json_object_get(json_object_get(w, "time"), "median_s"));
    }
    kevo_run_event(r, json_pack("{s:s, s:I, s:O}", "event", "reference", "run", (json_int_t)r->run,
                       "workloads", json_object_get(r->loop.ref, "workloads")));
}

/* The models of the run's config (borrowed from r->set.cfg) into r->set.eff. */
void kevo_run_cfg_models(struct runctx *r)
{
    json_t *m = json_object_get(r->set.cfg, "models");
    size_t n = json_array_size(m);
    r->set.eff.n_models = 0;
    r->set.eff.models = NULL;
    if (!n || !(r->set.cfg_models = kevo_calloc(n, sizeof *r->set.cfg_models)))
        return;
    for (size_t i = 0; i < n; i++)
        if (json_string_value(json_array_get(m, i)))
            r->set.cfg_models[r->set.eff.n_models++] = json_string_value(json_array_get(m, i));
    r->set.eff.models = r->set.cfg_models;
}

int kevo_run_op_index(const struct runctx *r, const char *name)
{
    for (int i = 0; i < r->loop.n_ops; i++)
        if (strcmp(r->loop.ops[i]->name, name) == 0)
            return i;
    return -1;
}

enum kevo_status kevo_run_parse_task(struct runctx *r)
{
    char *m = NULL;
    enum kevo_status st = kevo_task_parse(r->set.task_path, r->set.task_text, r->set.task_len,
                                          &r->set.task, &m);

    if (st)
        st = kevo_run_fail(r, st, "%s", m ? m : kevo_status_name(st));
    kevo_free(m);
    return st;
}

/* An option of this session, else the resumed run's, else the default. */
int64_t kevo_run_opt_i(const struct runctx *r, int64_t v, const char *key, int64_t dflt)
{
    int64_t c = r->set.cfg ? json_integer_value(json_object_get(r->set.cfg, key)) : 0;
    return v ? v : c ? c : dflt;
}

enum kevo_status kevo_run_reference_candidate(const char *text, size_t len, char **out,
                                              size_t *out_len)
{
    struct kevo_buf b;
    const char *p = text, *end = text + len;
    enum kevo_status st = KEVO_OK;

    kevo_buf_init(&b, len + 4096);
    while (p < end && !st) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *e = nl ? nl + 1 : end, *kw;
        size_t kl;
        int dir = kevo_task_directive(p, (size_t)((nl ? nl : end) - p), &kw, &kl);
        if (dir && kl == 7 && !strncmp(kw, "holdout", 7)) {
            /* held-out sizes stay secret: this text reaches archives and prompts */
            st = kevo_buf_adds(&b, nl ? "//\n" : "//");
        } else if (dir && !(kl == 6 && !strncmp(kw, "launch", 6)) &&
                   !(kl == 4 && !strncmp(kw, "call", 4))) {
            const char *k = strstr(p, "kevo");   /* "// kevo size" becomes "// task: size" */
            st = kevo_buf_add(&b, p, (size_t)(k - p));
            if (!st)
                st = kevo_buf_adds(&b, "task:");
            if (!st)
                st = kevo_buf_add(&b, k + 4, (size_t)(e - k - 4));
        } else {
            st = kevo_buf_add(&b, p, (size_t)(e - p));
        }
        p = e;
    }
    if (st) {
        kevo_buf_free(&b);
        return st;
    }
    *out_len = b.len;
    *out = kevo_buf_take(&b);
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_run_default_archive(char *out, size_t n)
{
    const char *e = getenv("KEVO_ARCHIVE"), *x = getenv("XDG_DATA_HOME"), *h = getenv("HOME");
    int w;
    if (e && *e)
        w = snprintf(out, n, "%s", e);
    else if (x && *x == '/')
        w = snprintf(out, n, "%s/kevo/archive.db", x);
    else if (h && *h)
        w = snprintf(out, n, "%s/.local/share/kevo/archive.db", h);
    else
        return KEVO_ERR_NOTFOUND;
    return w > 0 && (size_t)w < n ? KEVO_OK : KEVO_ERR_TOOBIG;
}

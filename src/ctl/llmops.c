/*
 * llmops - LLM calls of a run on their own threads, with the cost cap (llmops.h).
 */
#include "ctl/llmops.h"
#include "ctl/genome.h"
#include "base/buf.h"
#include "base/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 32

const char *const kevo_llmop_names[KEVO_LLMOP_COUNT] = {
    "llm_generate", "llm_improve", "llm_fix", "llm_crossover", "llm_plan",
};

const char *kevo_llmop_template(enum kevo_llm_op op, int phase)
{
    static const char *const t[KEVO_LLMOP_COUNT] = { "generate", "improve", "fix", "crossover",
                                                     "plan" };
    if (op == KEVO_LLMOP_PLAN && phase)
        return "plan_code";
    return (unsigned)op < KEVO_LLMOP_COUNT ? t[op] : "improve";
}

void kevo_llm_call_free(struct kevo_llm_call *c)
{
    if (!c)
        return;
    kevo_free(c->system);
    kevo_free(c->user);
    kevo_free(c->parent_text);
    kevo_free(c->carrier);
    kevo_llm_reply_clear(&c->reply);
    kevo_free(c);
}

struct item {
    struct kevo_llm_call *call;
    struct item *next;
};

struct model_stat {
    char *name;
    int64_t done, ok, improved;
};

struct kevo_llmops {
    struct kevo_llmops_cfg cfg;
    kevo_llmops_done_fn done;
    void *user;
    struct kevo_llm *client;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct item *head, *tail;
    int closing, in_flight, n_threads;
    double spent, reserved;
    pthread_t threads[MAX_THREADS];
    struct model_stat *models;
    struct kevo_llm_model *eff;   /* cfg.models with cfg's defaults filled in (shallow
                                     copies: the strings are cfg.models') */
};

/* What in tokens of input (cached of them read from the provider's cache) and out of
 * output cost at m's prices. */
static double price(const struct kevo_llm_model *m, int64_t in, int64_t cached, int64_t out)
{
    double pc = m->price_cached_in > 0 ? m->price_cached_in : m->price_in;
    cached = cached < 0 ? 0 : cached > in ? in : cached;
    return ((double)(in - cached) * m->price_in + (double)cached * pc +
            (double)out * m->price_out) / 1e6;
}

static void *worker(void *p)
{
    struct kevo_llmops *o = p;
    for (;;) {
        pthread_mutex_lock(&o->mu);
        while (!o->head && !o->closing)
            pthread_cond_wait(&o->cv, &o->mu);
        struct item *it = o->head;
        if (!it) {
            pthread_mutex_unlock(&o->mu);
            return NULL;
        }
        o->head = it->next;
        if (!o->head)
            o->tail = NULL;
        pthread_mutex_unlock(&o->mu);

        struct kevo_llm_call *c = it->call;
        const struct kevo_llm_model *m = &o->eff[c->model];
        if (!c->from_cache) {
            struct kevo_llm_req rq = { c->system, c->user };
            if (kevo_llm_complete(o->client, m, &rq, &c->reply) != KEVO_OK &&
                !c->reply.status[0])
                snprintf(c->reply.status, sizeof c->reply.status, "kevo_error");
            c->cost = price(m, c->reply.tokens_in, c->reply.tokens_cached_in,
                            c->reply.tokens_out);
            /* a reply without usage is charged its worst case: the cap must hold */
            if ((!strcmp(c->reply.status, "ok") || !strcmp(c->reply.status, "truncated")) &&
                !c->reply.tokens_in && !c->reply.tokens_out)
                c->cost = c->reserve;
        }
        pthread_mutex_lock(&o->mu);
        o->in_flight--;
        pthread_mutex_unlock(&o->mu);
        kevo_free(it);
        o->done(o->user, c);
    }
}

enum kevo_status kevo_llmops_new(const struct kevo_llmops_cfg *cfg, kevo_llmops_done_fn done,
                                 void *user, struct kevo_llmops **out)
{
    struct kevo_llmops *o = kevo_calloc(1, sizeof *o);
    enum kevo_status st = o ? KEVO_OK : KEVO_ERR_NOMEM;

    *out = NULL;
    if (st)
        return st;
    o->cfg = *cfg;
    o->spent = cfg->spent_before;
    o->done = done;
    o->user = user;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    o->models = kevo_calloc((size_t)cfg->n_models + 1, sizeof *o->models);
    o->eff = kevo_calloc((size_t)cfg->n_models + 1, sizeof *o->eff);
    if (!o->models || !o->eff || cfg->n_models < 1)
        st = o->models && o->eff ? KEVO_ERR_INVALID : KEVO_ERR_NOMEM;
    for (int i = 0; !st && i < cfg->n_models; i++) {
        const struct kevo_llm_model *m = &cfg->models[i];
        /* what a model's spec leaves unset, the run's defaults say (llmops.h) */
        o->eff[i] = *m;
        if (!m->has_temperature && cfg->temperature >= 0) {
            o->eff[i].has_temperature = 1;
            o->eff[i].temperature = cfg->temperature;
        }
        if (m->max_output <= 0)
            o->eff[i].max_output = cfg->max_tokens > 0 ? cfg->max_tokens : KEVO_LLM_MAX_OUTPUT;
        const char *api = m->api == KEVO_LLM_ANTHROPIC ? "anthropic" : "openai";
        o->models[i].name = kevo_strdupf("%s:%s@%s", api, m->name, m->base_url);
        if (!o->models[i].name)
            st = KEVO_ERR_NOMEM;
    }
    int n = cfg->max_concurrent > 0 ? cfg->max_concurrent : 4;
    n = cfg->replay ? 0 : n > MAX_THREADS ? MAX_THREADS : n;
    if (!st && !cfg->replay)
        st = kevo_llm_new(n, &cfg->limits, &o->client);
    for (int i = 0; !st && i < n; i++) {
        if (pthread_create(&o->threads[i], NULL, worker, o) != 0)
            st = KEVO_ERR_SYSTEM;
        else
            o->n_threads++;
    }
    if (st) {
        kevo_llmops_free(o);
        return st;
    }
    *out = o;
    return KEVO_OK;
}

void kevo_llmops_free(struct kevo_llmops *o)
{
    if (!o)
        return;
    pthread_mutex_lock(&o->mu);
    o->closing = 1;
    /* calls not started are dropped (their prompts were never sent) */
    while (o->head) {
        struct item *it = o->head;
        o->head = it->next;
        o->in_flight--;
        kevo_llm_call_free(it->call);
        kevo_free(it);
    }
    o->tail = NULL;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
    for (int i = 0; i < o->n_threads; i++)
        pthread_join(o->threads[i], NULL);
    kevo_llm_free(o->client);
    for (int i = 0; o->models && i < o->cfg.n_models; i++)
        kevo_free(o->models[i].name);
    kevo_free(o->models);
    kevo_free(o->eff);   /* shallow copies: nothing of theirs to free */
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    kevo_free(o);
}

int kevo_llmops_pick_model(struct kevo_llmops *o, double u)
{
    double w[64], total = 0;
    int n = o->cfg.n_models < 64 ? o->cfg.n_models : 64;
    for (int i = 0; i < n; i++) {
        const struct model_stat *s = &o->models[i];
        double wt = o->cfg.models[i].weight > 0 ? o->cfg.models[i].weight : 1.0;
        w[i] = wt * (1.0 + 4.0 * ((double)s->improved + 1.0) / ((double)s->done + 4.0));
        total += w[i];
    }
    double x = u * total;
    for (int i = 0; i < n; i++) {
        x -= w[i];
        if (x < 0)
            return i;
    }
    return n - 1;
}

void kevo_llmops_model_result(struct kevo_llmops *o, int model, int ok, int improved)
{
    if (model < 0 || model >= o->cfg.n_models)
        return;
    o->models[model].done++;
    o->models[model].ok += ok != 0;
    o->models[model].improved += improved != 0;
}

enum kevo_status kevo_llmops_hash(const struct kevo_llmops *o, struct kevo_llm_call *c)
{
    const struct kevo_llm_model *m = &o->eff[c->model];
    struct kevo_buf b;
    enum kevo_status st;

    /* the model, not where it is served from: the same model behind another URL answers
     * from the same cache; then the settings it is asked with (t=-1: no temperature).
     * Settings that runs recorded before them could not have add nothing, so a replay of
     * such a run asks its prompts under their old hashes ("...|t=0.7|max=8192|") */
    kevo_buf_init(&b, 0);
    st = kevo_buf_addf(&b, "%s:%s|t=%.6g|max=%d|",
                       m->api == KEVO_LLM_ANTHROPIC ? "anthropic" : "openai", m->name,
                       m->has_temperature ? m->temperature : -1.0, m->max_output);
    if (!st && m->reasoning_effort)
        st = kevo_buf_addf(&b, "effort=%s|", m->reasoning_effort);
    if (!st && m->thinking)
        st = kevo_buf_addf(&b, "thinking=%d|", m->thinking);
    if (!st && m->extra)
        st = kevo_buf_addf(&b, "extra=%s|", m->extra);
    if (!st)
        st = kevo_buf_adds(&b, c->system ? c->system : "");
    if (!st)
        st = kevo_buf_add(&b, "\x1e", 1);
    if (!st)
        st = kevo_buf_adds(&b, c->user ? c->user : "");
    if (!st)
        st = kevo_sha256_hex(b.data, b.len, c->prompt_hash);
    kevo_buf_free(&b);
    return st;
}

enum kevo_status kevo_llmops_submit(struct kevo_llmops *o, struct kevo_llm_call *c)
{
    const struct kevo_llm_model *m = &o->eff[c->model];
    /* the worst case: a token per byte of prompt, none of it cached, and the model's whole
     * output limit */
    double reserve = c->from_cache ? 0 : price(m, (int64_t)((c->user ? strlen(c->user) : 0) +
                                                            (c->system ? strlen(c->system) : 0)) + 1,
                                               0, m->max_output);
    struct item *it = kevo_calloc(1, sizeof *it);

    if (!it) {
        kevo_llm_call_free(c);
        return KEVO_ERR_NOMEM;
    }
    pthread_mutex_lock(&o->mu);
    if (o->cfg.cost_cap > 0 && o->spent + o->reserved + reserve > o->cfg.cost_cap) {
        pthread_mutex_unlock(&o->mu);
        kevo_free(it);
        kevo_llm_call_free(c);
        return KEVO_ERR_TOOBIG;
    }
    it->call = c;
    c->reserve = reserve;
    o->reserved += reserve;
    o->in_flight++;
    if (o->tail)
        o->tail->next = it;
    else
        o->head = it;
    o->tail = it;
    pthread_cond_signal(&o->cv);
    pthread_mutex_unlock(&o->mu);
    return KEVO_OK;
}

void kevo_llmops_settle(struct kevo_llmops *o, struct kevo_llm_call *c)
{
    if (c->settled)
        return;
    pthread_mutex_lock(&o->mu);
    o->spent += c->cost;
    o->reserved -= c->reserve;
    pthread_mutex_unlock(&o->mu);
    c->settled = 1;
}

struct kevo_llm_call *kevo_llmops_take(struct kevo_llmops *o, int64_t sub)
{
    struct kevo_llm_call *c = NULL;
    pthread_mutex_lock(&o->mu);
    for (struct item **p = &o->head; *p; p = &(*p)->next) {
        struct item *it = *p;
        if (it->call->sub != sub)
            continue;
        *p = it->next;
        if (o->tail == it) {   /* the new tail is the item before it, if any */
            o->tail = NULL;
            for (struct item *x = o->head; x; x = x->next)
                o->tail = x;
        }
        o->in_flight--;
        c = it->call;
        kevo_free(it);
        break;
    }
    pthread_mutex_unlock(&o->mu);
    return c;
}

int kevo_llmops_in_flight(struct kevo_llmops *o)
{
    pthread_mutex_lock(&o->mu);
    int n = o->in_flight;
    pthread_mutex_unlock(&o->mu);
    return n;
}

double kevo_llmops_spent(struct kevo_llmops *o)
{
    pthread_mutex_lock(&o->mu);
    double s = o->spent;
    pthread_mutex_unlock(&o->mu);
    return s;
}

const char *kevo_llmops_model_name(const struct kevo_llmops *o, int i)
{
    return i >= 0 && i < o->cfg.n_models ? o->models[i].name : "?";
}

const struct kevo_llm_model *kevo_llmops_model(const struct kevo_llmops *o, int i)
{
    return i >= 0 && i < o->cfg.n_models ? &o->eff[i] : NULL;
}

/* ---- the price table ---- */

enum kevo_status kevo_prices_load(const char *opt, json_t **out, char **path, char **msg)
{
    const char *env = getenv("KEVO_PRICES");
    int named = opt || (env && *env);
    char *file = opt     ? kevo_strdup(opt)
                 : named ? kevo_strdup(env)
                         : kevo_strdupf("%s/prices.json", kevo_data_dir(NULL));
    json_error_t e;

    *out = NULL;
    *msg = NULL;
    if (path)
        *path = NULL;
    if (!file)
        return KEVO_ERR_NOMEM;
    *out = json_load_file(file, 0, &e);
    if (!*out && named) {
        *msg = kevo_strdupf("%s:%d: %s", file, e.line, e.text);
        kevo_free(file);
        return KEVO_ERR_PARSE;
    }
    if (path)
        *path = file;
    else
        kevo_free(file);
    return KEVO_OK;
}

int kevo_prices_apply(json_t *table, struct kevo_llm_model *m)
{
    json_t *p = json_object_get(table, m->name);
    json_t *cached = json_object_get(p, "cached_in");

    m->priced = json_is_object(p);
    m->price_in = json_number_value(json_object_get(p, "in"));
    m->price_out = json_number_value(json_object_get(p, "out"));
    m->price_cached_in = json_is_number(cached) ? json_number_value(cached) : m->price_in;
    return m->priced;
}

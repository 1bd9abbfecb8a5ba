/*
 * relay - the envelopes of relay.h and the hub: rank 0's side of the hosts (relay.h).
 *
 * The hub keeps one record per rank (its state, when it was last heard, its slots) and one
 * per call in flight. The threads that make pool calls queue a call and wait on the hub's
 * condition variable; the hub's own thread is the only one that touches the transport: it
 * sends queued calls to hosts it hears, receives replies, beats and byes, and loses a host
 * that falls silent or leaves a call unanswered past its deadline plus a grace. Losing a
 * host finishes its calls with KEVO_ERR_LOST, which the run takes as "send it elsewhere".
 * One mutex guards all of it; a call never waits on the transport itself.
 */
#include "ctl/relay.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/proc.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HUB_TICK_S       0.002   /* the hub's wait for a message between its chores */
#define HUB_FRESH_S      (4 * KEVO_RELAY_BEAT_S)   /* sends go only to hosts heard this
                                                      recently */
#define HUB_GRACE_S      30.0    /* past a call's deadline (and a worker's restart there) */
#define HUB_HELLO_S      30.0    /* past the workers' start, for the HELLOs */
#define HUB_BYE_S        5.0     /* the BYEs awaited at the end */
#define HUB_START_S      60.0    /* a worker's first ping, by default */
#define RELAY_MAX_DEVICES 64     /* per host, as --gpus */

static const char *const kind_names[] = {
    "?", "start", "hello", "call", "reply", "beat", "stop", "bye", "fault",
};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == KEVO_RELAY_KIND_END,
               "kind_names out of sync with enum kevo_relay_kind");

const char *kevo_relay_kind_name(int kind)
{
    return kind > 0 && kind < KEVO_RELAY_KIND_END ? kind_names[kind] : "?";
}

/* ---- envelopes ---- */

/* Integer field key of j within lo..hi into *out; else a message in *why. */
static int int_field(json_t *j, const char *key, json_int_t lo, json_int_t hi, json_int_t *out,
                     char **why)
{
    json_t *v = json_object_get(j, key);

    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        *why = kevo_strdupf("\"%s\" must be an integer in %lld..%lld", key, (long long)lo,
                            (long long)hi);
        return -1;
    }
    if (out)
        *out = json_integer_value(v);
    return 0;
}

static int str_field(json_t *j, const char *key, char **why)
{
    if (json_is_string(json_object_get(j, key)))
        return 0;
    *why = kevo_strdupf("\"%s\" must be a string", key);
    return -1;
}

/* An array field of objects or integers, 0..max entries, each checked by int_field on
 * `sub` (objects) or as itself (sub NULL). */
static int list_field(json_t *j, const char *key, size_t max, const char *sub, char **why)
{
    json_t *a = json_object_get(j, key), *e;
    size_t i;

    if (!json_is_array(a) || json_array_size(a) > max) {
        *why = kevo_strdupf("\"%s\" must be an array of at most %zu entries", key, max);
        return -1;
    }
    json_array_foreach(a, i, e) {
        if (sub ? int_field(e, sub, 0, INT_MAX, NULL, why)
                : !json_is_integer(e) || json_integer_value(e) < 0 ||
                  json_integer_value(e) > INT_MAX) {
            if (!sub)
                *why = kevo_strdupf("\"%s\"[%zu] must be a non-negative integer", key, i);
            return -1;
        }
    }
    return 0;
}

static int check_start(json_t *j, char **why)
{
    const char *b = json_string_value(json_object_get(j, "backend"));
    json_t *c = json_object_get(j, "controller");
    double t = json_number_value(json_object_get(j, "start_timeout_s"));

    if (!b || (strcmp(b, "cpu") != 0 && strcmp(b, "cuda") != 0)) {
        *why = kevo_strdupf("\"backend\" must be \"cpu\" or \"cuda\"");
        return -1;
    }
    if (list_field(j, "devices", RELAY_MAX_DEVICES, NULL, why))
        return -1;
    if (!json_array_size(json_object_get(j, "devices"))) {
        *why = kevo_strdupf("\"devices\" must name at least one device");
        return -1;
    }
    if (!(t > 0) || t > 1e6) {
        *why = kevo_strdupf("\"start_timeout_s\" must be a number of seconds above 0");
        return -1;
    }
    if (!json_is_object(c)) {
        *why = kevo_strdupf("\"controller\" must be an object");
        return -1;
    }
    if (int_field(c, "pid", 1, INT_MAX, NULL, why) || str_field(c, "host", why) ||
        int_field(c, "start", 0, INT64_MAX, NULL, why))
        return -1;
    return 0;
}

static int check_hello(json_t *j, char **why)
{
    if (str_field(j, "host", why) || int_field(j, "pid", 1, INT_MAX, NULL, why))
        return -1;
    if (json_object_get(j, "error"))
        return str_field(j, "error", why);
    if (list_field(j, "slots", RELAY_MAX_DEVICES, "device", why))
        return -1;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(j, "slots"), i, e)
        if (str_field(e, "name", why))
            return -1;
    return 0;
}

static int check_call(json_t *j, char **why)
{
    double d = json_number_value(json_object_get(j, "deadline_s"));

    if (int_field(j, "call", 1, INT64_MAX, NULL, why) ||
        int_field(j, "slot", 0, RELAY_MAX_DEVICES - 1, NULL, why))
        return -1;
    if (!(d > 0) || d > 1e9) {
        *why = kevo_strdupf("\"deadline_s\" must be a number of seconds above 0");
        return -1;
    }
    if (!json_is_object(json_object_get(j, "msg"))) {
        *why = kevo_strdupf("\"msg\" must be an object (the request)");
        return -1;
    }
    return 0;
}

static int check_reply(json_t *j, char **why)
{
    json_int_t st = 0;

    if (int_field(j, "call", 1, INT64_MAX, NULL, why) ||
        int_field(j, "status", 0, KEVO_STATUS_COUNT - 1, &st, why))
        return -1;
    if (st == KEVO_OK && !json_is_object(json_object_get(j, "reply"))) {
        *why = kevo_strdupf("\"reply\" must be an object when \"status\" is 0");
        return -1;
    }
    return 0;
}

enum kevo_status kevo_relay_decode(int kind, const char *text, size_t len, json_t **out,
                                   char **out_why)
{
    json_error_t jerr;
    json_t *j;
    char *why = NULL;
    int bad = 0;

    *out = NULL;
    *out_why = NULL;
    if (kind <= 0 || kind >= KEVO_RELAY_FAULT) {
        *out_why = kevo_strdupf("unknown message kind %d", kind);
        return KEVO_ERR_PARSE;
    }
    j = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    if (!json_is_object(j)) {
        *out_why = kevo_strdupf("%s message is not a JSON object%s%s", kind_names[kind],
                                j || !text ? "" : ": ", j || !text ? "" : jerr.text);
        json_decref(j);
        return KEVO_ERR_PARSE;
    }
    if (kind == KEVO_RELAY_START)
        bad = check_start(j, &why);
    else if (kind == KEVO_RELAY_HELLO)
        bad = check_hello(j, &why);
    else if (kind == KEVO_RELAY_CALL)
        bad = check_call(j, &why);
    else if (kind == KEVO_RELAY_REPLY)
        bad = check_reply(j, &why);
    if (bad) {
        *out_why = kevo_strdupf("%s message: %s", kind_names[kind], why ? why : "?");
        kevo_free(why);
        json_decref(j);
        return KEVO_ERR_PARSE;
    }
    *out = j;
    return KEVO_OK;
}

enum kevo_status kevo_relay_send(const struct kevo_relay_io *io, int to, int kind, json_t *m)
{
    char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
    enum kevo_status st;

    if (!text)
        return m ? KEVO_ERR_NOMEM : KEVO_ERR_INVALID;
    st = io->send(io->ctx, to, kind, text, strlen(text));
    kevo_free(text);
    return st;
}

/* ---- the hub's state ---- */

enum peer_state { PEER_WAITING = 0, PEER_READY, PEER_FAILED, PEER_LOST, PEER_STOPPED };
static const char *const peer_names[] = { "waiting", "ready", "failed", "lost", "stopped" };

struct hub_peer {
    enum peer_state state;
    double heard;                 /* kevo_now() of its last message */
    struct kevo_proc_id id;       /* from its HELLO */
    int *devices;                 /* its slots' devices */
    json_t *slots;                /* its HELLO's [{"device", "name"}] */
    int n_slots;
    char *why;                    /* failed or lost: why */
    long long calls, lost_calls;
    int news;                     /* lost since kevo_relay_hub_news */
    int stop_sent;
};

struct hub_call {
    long long call;
    int rank;
    char *text;                   /* the CALL envelope until it is sent */
    size_t len;
    int done;
    enum kevo_status st;
    json_t *reply;
    double give_up;               /* lose the host when no reply came by then */
    struct hub_call *next;
};

struct kevo_relay_hub {
    const struct kevo_relay_io *io;
    struct kevo_pool_link link;
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* a call finished */
    pthread_t thread;
    int thread_started, quit;
    double silence_s, grace_s, hello_s;
    struct hub_peer *peers;       /* io->size of them; [io->rank] unused */
    struct kevo_pool_remote *slots;
    int n_slots;
    struct hub_call *calls;
    long long next_call;
};

static int is_host(const struct kevo_relay_hub *h, int rank)
{
    return rank >= 0 && rank < h->io->size && rank != h->io->rank;
}

/* Host rank is lost for good: its calls finish with KEVO_ERR_LOST. Under h->mu. */
static void lose(struct kevo_relay_hub *h, int rank, const char *why)
{
    struct hub_peer *p = &h->peers[rank];
    int n = 0;

    if (p->state == PEER_LOST || p->state == PEER_STOPPED)
        return;
    p->state = PEER_LOST;
    kevo_free(p->why);
    p->why = kevo_strdup(why);
    p->news = 1;
    for (struct hub_call *c = h->calls; c; c = c->next)
        if (c->rank == rank && !c->done) {
            c->done = 1;
            c->st = KEVO_ERR_LOST;
            n++;
        }
    p->lost_calls += n;
    pthread_cond_broadcast(&h->cv);
    if (h->io->forget)
        h->io->forget(h->io->ctx, rank);
    KEVO_WARN("rank %d (%s) is lost: %s%s", rank, p->id.host[0] ? p->id.host : "?", why,
              n == 0 ? "" : n == 1 ? "; its evaluation in flight goes elsewhere"
                                   : "; its evaluations in flight go elsewhere");
}

/* The hub's own failure to send to rank (the transport refused): the host is lost. */
static void send_or_lose(struct kevo_relay_hub *h, int rank, int kind, const char *text,
                         size_t len)
{
    enum kevo_status st = h->io->send(h->io->ctx, rank, kind, text, len);
    char why[128];

    if (st) {
        snprintf(why, sizeof why, "cannot send it a %s message (%s)", kind_names[kind],
                 kevo_status_name(st));
        lose(h, rank, why);
    }
}

/* ---- the hub's thread ---- */

/* Queued calls go to the hosts heard lately; the others wait (or are lost). */
static void send_queued(struct kevo_relay_hub *h, double now)
{
    for (struct hub_call *c = h->calls; c; c = c->next) {
        struct hub_peer *p = &h->peers[c->rank];
        if (c->done || !c->text || p->state != PEER_READY || now - p->heard > HUB_FRESH_S)
            continue;
        send_or_lose(h, c->rank, KEVO_RELAY_CALL, c->text, c->len);
        kevo_free(c->text);
        c->text = NULL;
    }
}

/* Hosts that fell silent, calls unanswered past their time: lost. */
static void check_time(struct kevo_relay_hub *h, double now)
{
    char why[160];

    for (int r = 0; r < h->io->size; r++) {
        if (!is_host(h, r) || h->peers[r].state != PEER_READY || now - h->peers[r].heard <= h->silence_s)
            continue;
        snprintf(why, sizeof why, "silent for %.1f s (no beat, no reply)", now - h->peers[r].heard);
        lose(h, r, why);
    }
    for (struct hub_call *c = h->calls; c; c = c->next) {
        if (c->done || now < c->give_up)
            continue;
        snprintf(why, sizeof why, "no reply to call %lld by its deadline and %.0f s more",
                 c->call, h->grace_s);
        lose(h, c->rank, why);
    }
}

static void take_reply(struct kevo_relay_hub *h, int rank, json_t *m)
{
    long long id = (long long)json_integer_value(json_object_get(m, "call"));

    for (struct hub_call *c = h->calls; c; c = c->next) {
        if (c->call != id || c->rank != rank || c->done)
            continue;
        enum kevo_status st = (enum kevo_status)json_integer_value(json_object_get(m, "status"));
        if (st == KEVO_ERR_WORKER || st == KEVO_ERR_SYSTEM) {
            /* its pool cannot start a worker any more: the host is no use, the call is
             * not the candidate's fault (lose() sends it elsewhere) */
            char why[160];
            snprintf(why, sizeof why, "its worker cannot be restarted (%s)", kevo_status_name(st));
            lose(h, rank, why);
            return;
        }
        c->done = 1;
        c->st = st;
        c->reply = json_incref(json_object_get(m, "reply"));
        h->peers[rank].calls++;
        pthread_cond_broadcast(&h->cv);
        return;
    }
    /* a call already given up on (the host was slow): nothing waits for it */
}

/* One message from a host. Under h->mu. */
static void handle(struct kevo_relay_hub *h, struct kevo_relay_msg *m, double now)
{
    struct hub_peer *p;
    json_t *j = NULL;
    char *why = NULL;

    if (!is_host(h, m->from))
        return;
    p = &h->peers[m->from];
    if (m->kind == KEVO_RELAY_FAULT) {
        char text[200];
        snprintf(text, sizeof text, "the transport failed: %.160s", m->text ? m->text : "?");
        lose(h, m->from, text);
        return;
    }
    if (p->state == PEER_LOST) {   /* heard again: it leaves */
        if (!p->stop_sent && m->kind != KEVO_RELAY_BYE)
            send_or_lose(h, m->from, KEVO_RELAY_STOP, "{}", 2);
        p->stop_sent = 1;
        return;
    }
    p->heard = now;
    if (m->kind == KEVO_RELAY_BYE) {
        p->state = PEER_STOPPED;
    } else if (m->kind == KEVO_RELAY_REPLY) {
        if (kevo_relay_decode(m->kind, m->text, m->len, &j, &why) == KEVO_OK)
            take_reply(h, m->from, j);
        else
            lose(h, m->from, why ? why : "a reply that does not parse");
    }
    json_decref(j);
    kevo_free(why);
}

/* Still to wait for at the end: a BYE of a host told to stop, or a sign of life from a
 * lost host (alive after all: stalled, not dead), which handle() then tells to stop. */
static int still_waiting(const struct kevo_relay_hub *h)
{
    for (int r = 0; r < h->io->size; r++) {
        const struct hub_peer *p = &h->peers[r];
        if (is_host(h, r) && (p->state == PEER_LOST ? !p->stop_sent
                                                    : p->stop_sent && p->state != PEER_STOPPED))
            return 1;
    }
    return 0;
}

/*
 * The end: STOP to every host heard, their BYEs awaited a little, and a lost host that
 * speaks meanwhile told to stop too (else a stalled one would serve nobody forever, and
 * keep the job from ending). Under h->mu.
 */
static void stop_hosts(struct kevo_relay_hub *h)
{
    double end = kevo_now() + HUB_BYE_S;

    for (int r = 0; r < h->io->size; r++)
        if (is_host(h, r) && (h->peers[r].state == PEER_READY || h->peers[r].state == PEER_FAILED)) {
            send_or_lose(h, r, KEVO_RELAY_STOP, "{}", 2);
            h->peers[r].stop_sent = 1;
        }
    while (still_waiting(h) && kevo_now() < end) {
        struct kevo_relay_msg m = { 0 };
        pthread_mutex_unlock(&h->mu);
        enum kevo_status st = h->io->recv(h->io->ctx, 0.05, &m);
        pthread_mutex_lock(&h->mu);
        if (!st)
            handle(h, &m, kevo_now());
        kevo_free(m.text);
    }
}

static void *hub_main(void *arg)
{
    struct kevo_relay_hub *h = arg;

    pthread_mutex_lock(&h->mu);
    while (!h->quit) {
        struct kevo_relay_msg m = { 0 };
        send_queued(h, kevo_now());
        check_time(h, kevo_now());
        pthread_mutex_unlock(&h->mu);
        enum kevo_status st = h->io->recv(h->io->ctx, HUB_TICK_S, &m);
        pthread_mutex_lock(&h->mu);
        if (!st)
            handle(h, &m, kevo_now());
        kevo_free(m.text);
    }
    stop_hosts(h);
    for (struct hub_call *c = h->calls; c; c = c->next)   /* none should be left */
        if (!c->done) {
            c->done = 1;
            c->st = KEVO_ERR_LOST;
        }
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- the link: calls from the pool's threads ---- */

static struct hub_call *call_new(struct kevo_relay_hub *h, int rank, int rslot, json_t *msg,
                                 double deadline_s)
{
    struct hub_call *c = kevo_calloc(1, sizeof *c);
    json_t *env;

    if (!c)
        return NULL;
    c->call = ++h->next_call;   /* under h->mu */
    c->rank = rank;
    c->give_up = kevo_now() + deadline_s + h->grace_s;
    env = json_pack("{s:I, s:i, s:f, s:O}", "call", (json_int_t)c->call, "slot", rslot,
                    "deadline_s", deadline_s, "msg", msg);
    c->text = env ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    if (!c->text) {
        kevo_free(c);
        return NULL;
    }
    c->len = strlen(c->text);
    return c;
}

static void call_unlink(struct kevo_relay_hub *h, struct hub_call *c)
{
    for (struct hub_call **pp = &h->calls; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            return;
        }
}

static enum kevo_status hub_call(void *ctx, int rank, int rslot, json_t *msg, double deadline_s,
                                 json_t **out_reply)
{
    struct kevo_relay_hub *h = ctx;
    struct hub_call *c;
    enum kevo_status st;

    *out_reply = NULL;
    if (!is_host(h, rank))
        return KEVO_ERR_INVALID;
    pthread_mutex_lock(&h->mu);
    if (h->peers[rank].state != PEER_READY || h->quit) {
        pthread_mutex_unlock(&h->mu);
        return KEVO_ERR_LOST;
    }
    c = call_new(h, rank, rslot, msg, deadline_s);
    if (!c) {
        pthread_mutex_unlock(&h->mu);
        return KEVO_ERR_NOMEM;
    }
    c->next = h->calls;
    h->calls = c;
    while (!c->done)
        pthread_cond_wait(&h->cv, &h->mu);
    call_unlink(h, c);
    pthread_mutex_unlock(&h->mu);
    st = c->st;
    *out_reply = st ? NULL : c->reply;
    if (st)
        json_decref(c->reply);
    kevo_free(c->text);
    kevo_free(c);
    return st;
}

/* ---- open / free ---- */

static json_t *start_json(const struct kevo_relay_hub_opts *o, double start_timeout_s)
{
    struct kevo_proc_id me;
    json_t *devs = json_array();

    kevo_proc_self(&me);
    for (int i = 0; devs && i < o->n_devices; i++)
        json_array_append_new(devs, json_integer(o->devices[i]));
    return json_pack("{s:s, s:o, s:f, s:{s:I, s:s, s:I}}", "backend", o->backend,
                     "devices", devs, "start_timeout_s", start_timeout_s, "controller",
                     "pid", (json_int_t)me.pid, "host", me.host, "start", (json_int_t)me.start);
}

/* A HELLO: the host's identity, and its slots or why it has none. */
static void take_hello(struct kevo_relay_hub *h, int rank, json_t *m)
{
    struct hub_peer *p = &h->peers[rank];
    json_t *slots = json_object_get(m, "slots");
    size_t n = json_array_size(slots);

    p->id.pid = json_integer_value(json_object_get(m, "pid"));
    p->id.start = json_integer_value(json_object_get(m, "start"));
    snprintf(p->id.host, sizeof p->id.host, "%s", json_string_value(json_object_get(m, "host")));
    if (json_object_get(m, "error")) {
        p->state = PEER_FAILED;
        p->why = kevo_strdup(json_string_value(json_object_get(m, "error")));
        KEVO_WARN("rank %d (%s) has no worker: %s", rank, p->id.host, p->why ? p->why : "?");
        return;
    }
    p->devices = kevo_calloc(n + 1, sizeof *p->devices);
    p->slots = json_incref(slots);
    if (!p->devices) {
        p->state = PEER_FAILED;
        return;
    }
    for (size_t i = 0; i < n; i++)
        p->devices[i] = (int)json_integer_value(json_object_get(json_array_get(slots, i), "device"));
    p->n_slots = (int)n;
    p->state = n ? PEER_READY : PEER_FAILED;
    if (!n)
        p->why = kevo_strdup("it reported no slot");
}

/* Wait for every host's HELLO until `end`; a host silent by then is lost. */
static void await_hellos(struct kevo_relay_hub *h, double end)
{
    int waiting = 1;

    while (waiting && kevo_now() < end) {
        struct kevo_relay_msg m = { 0 };
        json_t *j = NULL;
        char *why = NULL;
        if (h->io->recv(h->io->ctx, 0.05, &m) == KEVO_OK && is_host(h, m.from) &&
            h->peers[m.from].state == PEER_WAITING) {
            h->peers[m.from].heard = kevo_now();
            if (m.kind == KEVO_RELAY_FAULT)
                lose(h, m.from, m.text ? m.text : "the transport failed");
            else if (m.kind == KEVO_RELAY_HELLO && kevo_relay_decode(m.kind, m.text, m.len, &j, &why))
                lose(h, m.from, why ? why : "a hello that does not parse");
            else if (m.kind == KEVO_RELAY_HELLO)
                take_hello(h, m.from, j);
        }
        json_decref(j);
        kevo_free(why);
        kevo_free(m.text);
        waiting = 0;
        for (int r = 0; r < h->io->size; r++)
            waiting += is_host(h, r) && h->peers[r].state == PEER_WAITING;
    }
    for (int r = 0; r < h->io->size; r++)
        if (is_host(h, r) && h->peers[r].state == PEER_WAITING)
            lose(h, r, "no hello within the workers' start time");
}

/* The slots of the ready hosts, in rank order. */
static enum kevo_status list_slots(struct kevo_relay_hub *h)
{
    int n = 0, k = 0;

    for (int r = 0; r < h->io->size; r++)
        n += is_host(h, r) && h->peers[r].state == PEER_READY ? h->peers[r].n_slots : 0;
    if (n > KEVO_RELAY_MAX_SLOTS)
        return KEVO_ERR_TOOBIG;
    h->slots = kevo_calloc((size_t)n + 1, sizeof *h->slots);
    if (!h->slots)
        return KEVO_ERR_NOMEM;
    for (int r = 0; r < h->io->size; r++)
        for (int i = 0; is_host(h, r) && h->peers[r].state == PEER_READY && i < h->peers[r].n_slots;
             i++)
            h->slots[k++] = (struct kevo_pool_remote){ .rank = r, .rslot = i,
                                                       .device = h->peers[r].devices[i],
                                                       .host = h->peers[r].id.host };
    h->n_slots = k;
    return KEVO_OK;
}

/* The silence interval: the option, else $KEVO_MPI_SILENCE_S, else the default. */
static double silence_of(const struct kevo_relay_hub_opts *o)
{
    const char *e = getenv("KEVO_MPI_SILENCE_S");
    char *end = NULL;
    double v = e ? strtod(e, &end) : 0;

    if (o->silence_s > 0)
        return o->silence_s;
    if (e && end != e && !*end && v >= 4 * KEVO_RELAY_BEAT_S && v <= 86400)
        return v;
    if (e)
        KEVO_WARN("KEVO_MPI_SILENCE_S='%s' is not a number of seconds in %g..86400; using %g",
                  e, 4 * KEVO_RELAY_BEAT_S, KEVO_RELAY_SILENCE_S);
    return KEVO_RELAY_SILENCE_S;
}

static enum kevo_status hub_new(const struct kevo_relay_io *io, const struct kevo_relay_hub_opts *o,
                                struct kevo_relay_hub **out)
{
    struct kevo_relay_hub *h = kevo_calloc(1, sizeof *h);
    double start = o->start_timeout_s > 0 ? o->start_timeout_s : HUB_START_S;

    *out = h;
    if (!h)
        return KEVO_ERR_NOMEM;
    h->io = io;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->link.ctx = h;
    h->link.call = hub_call;
    h->silence_s = silence_of(o);
    h->grace_s = start + HUB_GRACE_S;
    /* a host starts its workers one after another, each within `start` */
    h->hello_s = start * (o->n_devices > 0 ? o->n_devices : 1) + HUB_HELLO_S;
    h->peers = kevo_calloc((size_t)io->size + 1, sizeof *h->peers);
    return h->peers ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_relay_hub_open(const struct kevo_relay_io *io,
                                     const struct kevo_relay_hub_opts *o,
                                     struct kevo_relay_hub **out, char **out_msg)
{
    struct kevo_relay_hub *h = NULL;
    json_t *start = NULL;
    enum kevo_status st;

    *out = NULL;
    *out_msg = NULL;
    if (!io || !o || !o->backend || o->n_devices < 1 || !o->devices || io->size < 1) {
        *out_msg = kevo_strdup("relay: a backend, devices and a transport are required");
        return KEVO_ERR_INVALID;
    }
    st = hub_new(io, o, &h);
    start = st ? NULL : start_json(o, o->start_timeout_s > 0 ? o->start_timeout_s : HUB_START_S);
    if (!st && !start)
        st = KEVO_ERR_NOMEM;
    for (int r = 0; !st && r < io->size; r++)
        if (is_host(h, r) && kevo_relay_send(io, r, KEVO_RELAY_START, start) != KEVO_OK)
            lose(h, r, "cannot send it the start message");
    if (!st) {
        await_hellos(h, kevo_now() + h->hello_s);
        st = list_slots(h);
    }
    if (!st && pthread_create(&h->thread, NULL, hub_main, h) != 0)
        st = KEVO_ERR_SYSTEM;
    if (st) {
        *out_msg = kevo_strdupf("relay: cannot start the hub: %s", kevo_status_name(st));
        kevo_relay_hub_free(h);
    } else {
        h->thread_started = 1;
        *out = h;
    }
    json_decref(start);
    return st;
}

void kevo_relay_hub_free(struct kevo_relay_hub *h)
{
    if (!h)
        return;
    if (h->thread_started) {
        pthread_mutex_lock(&h->mu);
        h->quit = 1;
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
    }
    while (h->calls) {   /* a caller still waiting would be a bug: the pool is freed first */
        struct hub_call *c = h->calls;
        h->calls = c->next;
        json_decref(c->reply);
        kevo_free(c->text);
        kevo_free(c);
    }
    for (int r = 0; h->peers && r < h->io->size; r++) {
        kevo_free(h->peers[r].devices);
        json_decref(h->peers[r].slots);
        kevo_free(h->peers[r].why);
    }
    kevo_free(h->peers);
    kevo_free(h->slots);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    kevo_free(h);
}

/* ---- what the hub knows ---- */

int kevo_relay_hub_slots(const struct kevo_relay_hub *h)
{
    return h ? h->n_slots : 0;
}

void kevo_relay_hub_slot(const struct kevo_relay_hub *h, int i, struct kevo_pool_remote *out)
{
    KEVO_ASSERT(h && i >= 0 && i < h->n_slots);
    *out = h->slots[i];
}

const struct kevo_pool_link *kevo_relay_hub_link(struct kevo_relay_hub *h)
{
    return &h->link;
}

static json_t *peer_json(const struct kevo_relay_hub *h, int r)
{
    const struct hub_peer *p = &h->peers[r];

    return json_pack("{s:i, s:s, s:I, s:o, s:s, s:s?, s:I, s:I}", "rank", r, "host",
                     p->id.host[0] ? p->id.host : "?", "pid", (json_int_t)p->id.pid,
                     "slots", p->slots ? json_deep_copy(p->slots) : json_array(),
                     "state", peer_names[p->state],
                     "why", p->why, "calls", (json_int_t)p->calls, "lost_calls",
                     (json_int_t)p->lost_calls);
}

json_t *kevo_relay_hub_ranks(struct kevo_relay_hub *h)
{
    json_t *a = json_array();

    if (!h || !a)
        return a;
    pthread_mutex_lock(&h->mu);
    for (int r = 0; r < h->io->size; r++)
        if (is_host(h, r))
            json_array_append_new(a, peer_json(h, r));
    pthread_mutex_unlock(&h->mu);
    return a;
}

json_t *kevo_relay_hub_news(struct kevo_relay_hub *h)
{
    json_t *a = json_array();

    if (!h || !a)
        return a;
    pthread_mutex_lock(&h->mu);
    for (int r = 0; r < h->io->size; r++)
        if (is_host(h, r) && h->peers[r].news) {
            h->peers[r].news = 0;
            json_array_append_new(a, peer_json(h, r));
        }
    pthread_mutex_unlock(&h->mu);
    return a;
}

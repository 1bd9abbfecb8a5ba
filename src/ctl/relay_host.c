/*
 * relay_host - a host of relay.h: an MPI rank other than 0, serving the controller's calls
 * with a pool of its own workers, started as the controller starts its own (ctl/pool.h).
 *
 * The caller's thread owns the transport: it waits for START, opens the pool and says
 * HELLO, then receives CALLs and queues each for its slot, sends the replies the slot
 * threads queue, beats, and watches the controller. One thread per slot makes the pool
 * call, so the pool keeps the deadline and restarts a worker that hangs or dies exactly as
 * on the controller's host; the reply goes back with the controller's request id.
 * Workers die with the thread that started them (pool.h), so the pool is opened on the
 * caller's thread and the slot threads are joined before it is freed.
 */
#include "ctl/relay.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/proc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HUB_RANK       0        /* the controller's rank */
#define HOST_TICK_S    0.002    /* the wait for a message between chores */
#define HOST_CHECK_S   1.0      /* how often the controller's process is looked at */
#define HOST_START_S   60.0     /* a worker's first ping when START gives none */

/* ---- a queue of JSON objects between threads ---- */

struct item {
    json_t *j;
    struct item *next;
};

struct fifo {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct item *head, *tail;
    int closed;
};

static void fifo_init(struct fifo *f)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
}

static void fifo_destroy(struct fifo *f)
{
    while (f->head) {
        struct item *it = f->head;
        f->head = it->next;
        json_decref(it->j);
        kevo_free(it);
    }
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

/* Queue j (taken); KEVO_ERR_NOMEM drops it. */
static enum kevo_status fifo_push(struct fifo *f, json_t *j)
{
    struct item *it = kevo_calloc(1, sizeof *it);

    if (!it) {
        json_decref(j);
        return KEVO_ERR_NOMEM;
    }
    it->j = j;
    pthread_mutex_lock(&f->mu);
    if (f->tail)
        f->tail->next = it;
    else
        f->head = it;
    f->tail = it;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return KEVO_OK;
}

static void fifo_close(struct fifo *f)
{
    pthread_mutex_lock(&f->mu);
    f->closed = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* The next object (taken): wait 1 blocks until one comes or the queue is closed. */
static json_t *fifo_pop(struct fifo *f, int wait)
{
    struct item *it;
    json_t *j = NULL;

    pthread_mutex_lock(&f->mu);
    while (wait && !f->head && !f->closed)
        pthread_cond_wait(&f->cv, &f->mu);
    it = f->head;
    if (it) {
        f->head = it->next;
        if (!f->head)
            f->tail = NULL;
        j = it->j;
    }
    pthread_mutex_unlock(&f->mu);
    kevo_free(it);
    return j;
}

/* ---- the host ---- */

struct host {
    const struct kevo_relay_io *io;
    struct kevo_pool *pool;
    int n_slots;
    struct fifo *in;              /* per slot: CALL envelopes */
    struct fifo out;              /* REPLY envelopes, for the transport's thread */
    pthread_t *threads;
    int n_threads;
    struct kevo_proc_id controller;
    double beat_s;
    json_t *slots;                /* HELLO's: [{"device", "name"}] */
};

struct slot_arg {
    struct host *h;
    int slot;
};

/* One slot: each call through the pool, its reply (with the controller's id) queued. */
static void *slot_main(void *arg)
{
    struct slot_arg *a = arg;
    struct host *h = a->h;
    json_t *env;

    while ((env = fifo_pop(&h->in[a->slot], 1)) != NULL) {
        json_t *msg = json_object_get(env, "msg"), *reply = NULL;
        double deadline_s = json_number_value(json_object_get(env, "deadline_s"));
        enum kevo_status st = kevo_pool_call(h->pool, a->slot, msg, deadline_s, &reply);
        json_t *r = json_pack("{s:O, s:i}", "call", json_object_get(env, "call"), "status",
                              (int)st);

        if (reply && json_object_get(msg, "id"))   /* the pool here stamped its own */
            json_object_set(reply, "id", json_object_get(msg, "id"));
        if (r && reply && json_object_set_new(r, "reply", reply) == 0)
            reply = NULL;
        json_decref(reply);
        if (!r || fifo_push(&h->out, r))   /* no reply: the hub gives up on the call */
            KEVO_ERROR("out of memory: the reply to call %lld is lost",
                       (long long)json_integer_value(json_object_get(env, "call")));
        json_decref(env);
    }
    kevo_free(a);
    return NULL;
}

static enum kevo_status start_threads(struct host *h)
{
    h->threads = kevo_calloc((size_t)h->n_slots, sizeof *h->threads);
    if (!h->threads)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < h->n_slots; i++) {
        struct slot_arg *a = kevo_malloc(sizeof *a);
        if (!a)
            return KEVO_ERR_NOMEM;
        a->h = h;
        a->slot = i;
        if (pthread_create(&h->threads[i], NULL, slot_main, a) != 0) {
            kevo_free(a);
            return KEVO_ERR_SYSTEM;
        }
        h->n_threads++;
    }
    return KEVO_OK;
}

/* Every slot's backend opens on its device (ping does not open it): h->slots, for HELLO. */
static enum kevo_status probe_slots(struct host *h, double deadline_s, char **out_msg)
{
    enum kevo_status st = KEVO_OK;

    h->slots = json_array();
    for (int i = 0; h->slots && !st && i < h->n_slots; i++) {
        char *name = NULL;
        const char *host;
        int rank, device;
        st = kevo_pool_probe(h->pool, i, deadline_s, &name, out_msg);
        if (!st)
            st = kevo_pool_where(h->pool, i, &rank, &device, &host);
        if (!st && json_array_append_new(h->slots, json_pack("{s:i, s:s}", "device", device,
                                                             "name", name)))
            st = KEVO_ERR_NOMEM;
        kevo_free(name);
    }
    return h->slots ? st : KEVO_ERR_NOMEM;
}

/* The pool of START's backend and devices; *out_msg (kevo_free) says why it failed. */
static enum kevo_status open_pool(struct host *h, json_t *start,
                                  const struct kevo_relay_host_opts *o, char **out_msg)
{
    json_t *devs = json_object_get(start, "devices");
    int devices[64], n = (int)json_array_size(devs);
    struct kevo_pool_opts po = { 0 };
    enum kevo_status st;

    for (int i = 0; i < n && i < 64; i++)   /* decode checked 1..64 of them */
        devices[i] = (int)json_integer_value(json_array_get(devs, (size_t)i));
    po.exe = o && o->exe ? o->exe : getenv("KEVO_WORKER_EXE");
    po.backend = json_string_value(json_object_get(start, "backend"));
    po.n_devices = n;
    po.devices = devices;
    po.start_timeout_s = json_number_value(json_object_get(start, "start_timeout_s"));
    if (!(po.start_timeout_s > 0))
        po.start_timeout_s = HOST_START_S;
    po.rank = h->io->rank;
    st = kevo_pool_open(&po, &h->pool, out_msg);
    if (st)
        return st;
    h->n_slots = kevo_pool_size(h->pool);
    h->in = kevo_calloc((size_t)h->n_slots, sizeof *h->in);
    if (!h->in)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < h->n_slots; i++)
        fifo_init(&h->in[i]);
    return probe_slots(h, po.start_timeout_s, out_msg);
}

/* HELLO: who this host is, and its slots or why it has none (error non-NULL). */
static enum kevo_status say_hello(struct host *h, const char *error)
{
    struct kevo_proc_id me;
    json_t *m;
    enum kevo_status st;

    kevo_proc_self(&me);
    m = json_pack("{s:s, s:I, s:I, s:o}", "host", me.host, "pid", (json_int_t)me.pid, "start",
                  (json_int_t)me.start, "slots",
                  !error && h->slots ? json_incref(h->slots) : json_array());
    if (m && error)
        json_object_set_new(m, "error", json_string(error));
    st = m ? kevo_relay_send(h->io, HUB_RANK, KEVO_RELAY_HELLO, m) : KEVO_ERR_NOMEM;
    json_decref(m);
    return st;
}

/* The controller died (when it runs on this host, where that can be seen). */
static int controller_gone(struct host *h)
{
    return h->controller.pid > 0 && kevo_proc_check(&h->controller) == KEVO_PROC_GONE;
}

/*
 * Wait for the controller's message of `kind` (START or STOP); *out the START (NULL when
 * a STOP came first). KEVO_ERR_LOST when the controller is seen gone.
 */
static enum kevo_status wait_for(struct host *h, int kind, json_t **out, char **out_msg)
{
    double next_check = 0;

    *out = NULL;
    for (;;) {
        struct kevo_relay_msg m = { 0 };
        char *why = NULL;
        enum kevo_status st = h->io->recv(h->io->ctx, 0.1, &m);
        if (!st && m.from == HUB_RANK && m.kind == KEVO_RELAY_STOP) {
            kevo_free(m.text);
            return KEVO_OK;
        }
        if (!st && m.from == HUB_RANK && m.kind == kind && kind == KEVO_RELAY_START) {
            st = kevo_relay_decode(m.kind, m.text, m.len, out, &why);
            kevo_free(m.text);
            if (st)
                *out_msg = kevo_strdupf("the controller's %s", why ? why : "start is bad");
            kevo_free(why);
            return st;
        }
        kevo_free(m.text);
        if (kevo_now() >= next_check) {
            if (controller_gone(h)) {
                *out_msg = kevo_strdupf("the controller (pid %lld) is gone",
                                        (long long)h->controller.pid);
                return KEVO_ERR_LOST;
            }
            next_check = kevo_now() + HOST_CHECK_S;
        }
    }
}

/* A CALL: onto its slot's queue, or answered at once when it names no slot here. */
static enum kevo_status take_call(struct host *h, struct kevo_relay_msg *m)
{
    json_t *env = NULL;
    char *why = NULL;
    enum kevo_status st = kevo_relay_decode(m->kind, m->text, m->len, &env, &why);

    if (st) {   /* nothing to answer: the hub gives up on it in time */
        KEVO_WARN("rank %d: a call from the controller is dropped: %s", h->io->rank,
                  why ? why : "?");
        kevo_free(why);
        return KEVO_OK;
    }
    json_int_t slot = json_integer_value(json_object_get(env, "slot"));
    if (slot < h->n_slots)
        return fifo_push(&h->in[slot], env);
    json_t *r = json_pack("{s:O, s:i}", "call", json_object_get(env, "call"), "status",
                          (int)KEVO_ERR_INVALID);
    json_decref(env);
    st = r ? kevo_relay_send(h->io, HUB_RANK, KEVO_RELAY_REPLY, r) : KEVO_ERR_NOMEM;
    json_decref(r);
    return st;
}

/* The queued replies, and a beat when one is due. */
static enum kevo_status send_out(struct host *h, double *next_beat)
{
    enum kevo_status st = KEVO_OK;
    json_t *r;

    while (!st && (r = fifo_pop(&h->out, 0)) != NULL) {
        st = kevo_relay_send(h->io, HUB_RANK, KEVO_RELAY_REPLY, r);
        json_decref(r);
    }
    if (!st && kevo_now() >= *next_beat) {
        st = h->io->send(h->io->ctx, HUB_RANK, KEVO_RELAY_BEAT, "{}", 2);
        *next_beat = kevo_now() + h->beat_s;
    }
    return st;
}

/* Serve until STOP (KEVO_OK), the controller is gone or cannot be reached. */
static enum kevo_status serve_loop(struct host *h, char **out_msg)
{
    double next_beat = 0, next_check = 0;

    for (;;) {
        struct kevo_relay_msg m = { 0 };
        enum kevo_status st = send_out(h, &next_beat);
        if (st) {
            *out_msg = kevo_strdupf("cannot send to the controller: %s", kevo_status_name(st));
            return st;
        }
        if (kevo_now() >= next_check) {
            if (controller_gone(h)) {
                *out_msg = kevo_strdupf("the controller (pid %lld) is gone",
                                        (long long)h->controller.pid);
                return KEVO_ERR_LOST;
            }
            next_check = kevo_now() + HOST_CHECK_S;
        }
        st = h->io->recv(h->io->ctx, HOST_TICK_S, &m);
        if (!st && m.from == HUB_RANK && m.kind == KEVO_RELAY_STOP) {
            kevo_free(m.text);
            return KEVO_OK;
        }
        if (!st && m.from == HUB_RANK && m.kind == KEVO_RELAY_CALL)
            st = take_call(h, &m);
        kevo_free(m.text);
        if (st && st != KEVO_ERR_TIMEOUT) {
            *out_msg = kevo_strdupf("serving the controller: %s", kevo_status_name(st));
            return st;
        }
    }
}

/* The controller's identity from START, to see it die when it shares this host. */
static void note_controller(struct host *h, json_t *start)
{
    json_t *c = json_object_get(start, "controller");

    h->controller.pid = json_integer_value(json_object_get(c, "pid"));
    h->controller.start = json_integer_value(json_object_get(c, "start"));
    snprintf(h->controller.host, sizeof h->controller.host, "%s",
             json_string_value(json_object_get(c, "host")));
}

static void host_close(struct host *h)
{
    for (int i = 0; h->in && i < h->n_slots; i++)
        fifo_close(&h->in[i]);
    for (int i = 0; i < h->n_threads; i++)   /* each finishes its call first */
        pthread_join(h->threads[i], NULL);
    kevo_pool_free(h->pool);
    for (int i = 0; h->in && i < h->n_slots; i++)
        fifo_destroy(&h->in[i]);
    fifo_destroy(&h->out);
    json_decref(h->slots);
    kevo_free(h->in);
    kevo_free(h->threads);
}

enum kevo_status kevo_relay_host_serve(const struct kevo_relay_io *io,
                                       const struct kevo_relay_host_opts *o, char **out_msg)
{
    struct host h;
    json_t *start = NULL, *none = NULL;
    char *pmsg = NULL;
    enum kevo_status st;

    *out_msg = NULL;
    memset(&h, 0, sizeof h);
    h.io = io;
    h.beat_s = o && o->beat_s > 0 ? o->beat_s : KEVO_RELAY_BEAT_S;
    fifo_init(&h.out);
    st = wait_for(&h, KEVO_RELAY_START, &start, out_msg);
    if (st || !start)   /* a STOP before START: the run never needed workers */
        goto out;
    note_controller(&h, start);
    if (open_pool(&h, start, o, &pmsg)) {
        KEVO_ERROR("rank %d: cannot start its workers: %s", io->rank, pmsg ? pmsg : "?");
        st = say_hello(&h, pmsg ? pmsg : "its workers cannot start");
        if (!st)
            st = wait_for(&h, KEVO_RELAY_STOP, &none, out_msg);
        goto out;
    }
    st = start_threads(&h);
    if (!st)
        st = say_hello(&h, NULL);
    if (!st)
        st = serve_loop(&h, out_msg);
out:
    host_close(&h);
    if (!st && start)   /* stopped: the controller may wait for this */
        st = io->send(io->ctx, HUB_RANK, KEVO_RELAY_BYE, "{}", 2);
    if (st && !*out_msg)
        *out_msg = kevo_strdupf("rank %d: %s", io->rank, kevo_status_name(st));
    kevo_free(pmsg);
    json_decref(start);
    json_decref(none);
    return st;
}

/*
 * test_relay - kevo run across hosts without MPI: the relay's envelopes, and a hub with
 * hosts that talk through in-process queues (the transport vtable of relay.h) instead of
 * MPI, each host with a real pool of fake workers. The fake worker is this program, started
 * as `test_relay __worker ...` the way a pool starts `kevo __worker ...`: it answers ping,
 * info (device 7 has "no such device"), echo, and sleep (never answers).
 *
 * A host is lost by cutting it off the queues (as a dead or stalled rank falls silent):
 * its call in flight must come back KEVO_ERR_LOST, later calls at once, the other host must
 * go on, and the hub must tell it to leave when it is heard again. The MPI run itself (the
 * transport over MPI, a rank killed for real) is tests/mpi/run.sh's.
 */
#include "testutil.h"

#include "base/clock.h"
#include "base/mem.h"
#include "base/proc.h"
#include "core/wire.h"
#include "ctl/mpi_io.h"
#include "ctl/pool.h"
#include "ctl/relay.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake worker ---- */

static int fake_worker(int argc, char **argv)
{
    int fd_in = 3, fd_out = 4, device = 0;
    json_t *req = NULL;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--device") == 0)
            device = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--fd-in") == 0)
            fd_in = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--fd-out") == 0)
            fd_out = (int)strtol(argv[i + 1], NULL, 10);
    }
    while (kevo_wire_recv(fd_in, &req) == KEVO_OK) {
        const char *op = json_string_value(json_object_get(req, "op"));
        json_t *r;
        if (op && strcmp(op, "sleep") == 0)
            pause();
        if (op && strcmp(op, "info") == 0 && device == 7)
            r = json_pack("{s:O, s:s, s:s}", "id", json_object_get(req, "id"), "status",
                          "no device", "message", "no such device");
        else
            r = json_pack("{s:O, s:s, s:{s:b, s:s, s:i, s:i, s:O?}}", "id",
                          json_object_get(req, "id"), "status", "ok", "result", "pong", 1,
                          "name", "fake device", "device", device, "pid", (int)getpid(),
                          "data", json_object_get(req, "data"));
        if (!r || kevo_wire_send(fd_out, r))
            return 9;
        json_decref(r);
        json_decref(req);
    }
    return 0;
}

/* ---- an in-process transport ---- */

#define NET_MAX 4

struct net_item {
    int from, kind;
    char *text;
    size_t len;
    struct net_item *next;
};

struct endpoint {
    struct net *net;
    int rank;
};

struct net {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int size;
    struct net_item *head[NET_MAX], *tail[NET_MAX];
    int cut[NET_MAX];              /* 1: the rank's messages are dropped, both ways */
    struct endpoint ep[NET_MAX];
    struct kevo_relay_io io[NET_MAX];
};

static enum kevo_status net_send(void *ctx, int to, int kind, const char *text, size_t len)
{
    struct endpoint *e = ctx;
    struct net *n = e->net;
    struct net_item *it = kevo_calloc(1, sizeof *it);

    assert_non_null(it);
    assert_true(to >= 0 && to < n->size);
    it->from = e->rank;
    it->kind = kind;
    it->text = kevo_malloc(len + 1);
    memcpy(it->text, text, len);
    it->text[len] = '\0';
    it->len = len;
    pthread_mutex_lock(&n->mu);
    if (n->cut[e->rank] || n->cut[to]) {
        kevo_free(it->text);
        kevo_free(it);
    } else {
        if (n->tail[to])
            n->tail[to]->next = it;
        else
            n->head[to] = it;
        n->tail[to] = it;
        pthread_cond_broadcast(&n->cv);
    }
    pthread_mutex_unlock(&n->mu);
    return KEVO_OK;
}

static enum kevo_status net_recv(void *ctx, double wait_s, struct kevo_relay_msg *out)
{
    struct endpoint *e = ctx;
    struct net *n = e->net;
    struct timespec until;
    struct net_item *it;

    memset(out, 0, sizeof *out);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += (long)(wait_s * 1e9);
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&n->mu);
    while (!n->head[e->rank])
        if (pthread_cond_timedwait(&n->cv, &n->mu, &until) != 0)
            break;
    it = n->head[e->rank];
    if (it) {
        n->head[e->rank] = it->next;
        if (!it->next)
            n->tail[e->rank] = NULL;
    }
    pthread_mutex_unlock(&n->mu);
    if (!it)
        return KEVO_ERR_TIMEOUT;
    out->from = it->from;
    out->kind = it->kind;
    out->text = it->text;
    out->len = it->len;
    kevo_free(it);
    return KEVO_OK;
}

static struct net *net_new(int size)
{
    struct net *n = kevo_calloc(1, sizeof *n);

    assert_non_null(n);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    n->size = size;
    for (int r = 0; r < size; r++) {
        n->ep[r] = (struct endpoint){ n, r };
        n->io[r] = (struct kevo_relay_io){ .ctx = &n->ep[r], .rank = r, .size = size,
                                           .send = net_send, .recv = net_recv };
    }
    return n;
}

static void net_cut(struct net *n, int rank, int cut)
{
    pthread_mutex_lock(&n->mu);
    n->cut[rank] = cut;
    pthread_mutex_unlock(&n->mu);
}

static void net_free(struct net *n)
{
    for (int r = 0; r < n->size; r++)
        while (n->head[r]) {
            struct net_item *it = n->head[r];
            n->head[r] = it->next;
            kevo_free(it->text);
            kevo_free(it);
        }
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    kevo_free(n);
}

/* ---- hosts in threads ---- */

static char self_exe[PATH_MAX];

struct host_run {
    struct net *net;
    int rank;
    pthread_t thread;
    enum kevo_status st;
    char *msg;
};

static void *host_main(void *arg)
{
    struct host_run *h = arg;
    struct kevo_relay_host_opts o = { .exe = self_exe, .beat_s = 0.1 };

    h->st = kevo_relay_host_serve(&h->net->io[h->rank], &o, &h->msg);
    return NULL;
}

static void hosts_start(struct net *n, struct host_run *h, int count)
{
    for (int i = 0; i < count; i++) {
        h[i] = (struct host_run){ .net = n, .rank = i + 1 };
        assert_int_equal(pthread_create(&h[i].thread, NULL, host_main, &h[i]), 0);
    }
}

/* Join the hosts; each must have ended with `want`. */
static void hosts_join(struct host_run *h, int count, enum kevo_status want)
{
    for (int i = 0; i < count; i++) {
        pthread_join(h[i].thread, NULL);
        if (h[i].st != want)
            fail_msg("host %d ended with %s: %s", h[i].rank, kevo_status_name(h[i].st),
                     h[i].msg ? h[i].msg : "");
        kevo_free(h[i].msg);
    }
}

static struct kevo_relay_hub *hub_open(struct net *n, const int *devices, int n_devices,
                                       double silence_s)
{
    struct kevo_relay_hub_opts o = { .backend = "cpu", .devices = devices,
                                     .n_devices = n_devices, .start_timeout_s = 10,
                                     .silence_s = silence_s };
    struct kevo_relay_hub *h = NULL;
    char *msg = NULL;

    if (kevo_relay_hub_open(&n->io[0], &o, &h, &msg) != KEVO_OK)
        fail_msg("hub: %s", msg ? msg : "?");
    kevo_free(msg);
    return h;
}

/* A pool of the hub's slots only (rank 0 evaluates nothing itself). */
static struct kevo_pool *remote_pool(struct kevo_relay_hub *h)
{
    int n = kevo_relay_hub_slots(h);
    struct kevo_pool_remote rem[8];
    struct kevo_pool_opts o = { .backend = "cpu", .n_remote = n, .remote = rem,
                                .link = kevo_relay_hub_link(h) };
    struct kevo_pool *p = NULL;
    char *msg = NULL;

    assert_true(n > 0 && n <= 8);
    for (int i = 0; i < n; i++)
        kevo_relay_hub_slot(h, i, &rem[i]);
    if (kevo_pool_open(&o, &p, &msg) != KEVO_OK)
        fail_msg("pool: %s", msg ? msg : "?");
    return p;
}

/* A call of op on slot; the reply's status (KEVO_OK: *out_reply set). */
static enum kevo_status call(struct kevo_pool *p, int slot, const char *op, double deadline_s,
                             json_t **out_reply)
{
    json_t *req = json_pack("{s:s, s:s}", "op", op, "data", "payload");
    enum kevo_status st = kevo_pool_call(p, slot, req, deadline_s, out_reply);

    json_decref(req);
    return st;
}

static json_t *rank_entry(struct kevo_relay_hub *h, int rank)
{
    json_t *ranks = kevo_relay_hub_ranks(h), *e;
    size_t i;

    json_array_foreach(ranks, i, e)
        if (json_integer_value(json_object_get(e, "rank")) == rank) {
            json_incref(e);
            json_decref(ranks);
            return e;
        }
    json_decref(ranks);
    return NULL;
}

/* ---- envelopes ---- */

static void expect_bad(int kind, const char *text, const char *why_has)
{
    json_t *j = NULL;
    char *why = NULL;

    assert_int_equal(kevo_relay_decode(kind, text, strlen(text), &j, &why), KEVO_ERR_PARSE);
    assert_null(j);
    assert_non_null(why);
    if (!strstr(why, why_has))
        fail_msg("%s: '%s' does not say '%s'", text, why, why_has);
    kevo_free(why);
}

static void expect_good(int kind, const char *text)
{
    json_t *j = NULL;
    char *why = NULL;

    if (kevo_relay_decode(kind, text, strlen(text), &j, &why) != KEVO_OK)
        fail_msg("%s: %s", text, why ? why : "?");
    assert_true(json_is_object(j));
    json_decref(j);
}

static void test_envelopes(void **state)
{
    (void)state;
    expect_good(KEVO_RELAY_CALL, "{\"call\":3,\"slot\":0,\"deadline_s\":120,\"msg\":{\"op\":\"eval\"}}");
    expect_bad(KEVO_RELAY_CALL, "{\"call\":0,\"slot\":0,\"deadline_s\":1,\"msg\":{}}", "\"call\"");
    expect_bad(KEVO_RELAY_CALL, "{\"call\":1,\"slot\":-1,\"deadline_s\":1,\"msg\":{}}", "\"slot\"");
    expect_bad(KEVO_RELAY_CALL, "{\"call\":1,\"slot\":0,\"deadline_s\":0,\"msg\":{}}", "deadline_s");
    expect_bad(KEVO_RELAY_CALL, "{\"call\":1,\"slot\":0,\"deadline_s\":1,\"msg\":3}", "\"msg\"");
    expect_good(KEVO_RELAY_REPLY, "{\"call\":3,\"status\":0,\"reply\":{\"id\":1}}");
    expect_good(KEVO_RELAY_REPLY, "{\"call\":3,\"status\":14}");
    expect_bad(KEVO_RELAY_REPLY, "{\"call\":3,\"status\":0}", "\"reply\"");
    expect_bad(KEVO_RELAY_REPLY, "{\"call\":3,\"status\":999,\"reply\":{}}", "\"status\"");
    expect_good(KEVO_RELAY_HELLO, "{\"host\":\"a\",\"pid\":5,\"slots\":[{\"device\":0,\"name\":\"x\"}]}");
    expect_good(KEVO_RELAY_HELLO, "{\"host\":\"a\",\"pid\":5,\"error\":\"no GPU\"}");
    expect_bad(KEVO_RELAY_HELLO, "{\"host\":\"a\",\"pid\":5,\"slots\":[{\"device\":0}]}", "\"name\"");
    expect_bad(KEVO_RELAY_HELLO, "{\"pid\":5,\"slots\":[]}", "\"host\"");
    expect_good(KEVO_RELAY_START, "{\"backend\":\"cuda\",\"devices\":[0,1],\"start_timeout_s\":60,"
                "\"controller\":{\"pid\":9,\"host\":\"h\",\"start\":0}}");
    expect_bad(KEVO_RELAY_START, "{\"backend\":\"tpu\",\"devices\":[0],\"start_timeout_s\":60,"
               "\"controller\":{\"pid\":9,\"host\":\"h\",\"start\":0}}", "\"backend\"");
    expect_bad(KEVO_RELAY_START, "{\"backend\":\"cpu\",\"devices\":[],\"start_timeout_s\":60,"
               "\"controller\":{\"pid\":9,\"host\":\"h\",\"start\":0}}", "at least one device");
    expect_bad(KEVO_RELAY_START, "{\"backend\":\"cpu\",\"devices\":[0],\"start_timeout_s\":60}",
               "\"controller\"");
    expect_bad(KEVO_RELAY_BEAT, "[1]", "not a JSON object");
    expect_bad(KEVO_RELAY_BEAT, "{\"a\":", "not a JSON object");
    expect_bad(42, "{}", "unknown message kind 42");
    expect_good(KEVO_RELAY_STOP, "{}");
    assert_string_equal(kevo_relay_kind_name(KEVO_RELAY_REPLY), "reply");
    assert_string_equal(kevo_relay_kind_name(99), "?");
}

/* ---- the hub and its hosts ---- */

/* Two hosts with a device each: the pool reaches both, each call comes back with the
 * controller's own id, the hosts leave at the end. */
static void test_calls_reach_hosts(void **state)
{
    struct net *n = net_new(3);
    struct host_run hosts[2];
    int devs[] = { 0 };
    json_t *reply = NULL, *e;

    (void)state;
    hosts_start(n, hosts, 2);
    struct kevo_relay_hub *h = hub_open(n, devs, 1, 0);
    assert_int_equal(kevo_relay_hub_slots(h), 2);
    struct kevo_pool *p = remote_pool(h);
    for (int slot = 0; slot < 2; slot++) {
        int rank = -1, dev = -1;
        const char *host = NULL;
        assert_int_equal(call(p, slot, "echo", 10, &reply), KEVO_OK);
        assert_string_equal(json_string_value(json_object_get(reply, "status")), "ok");
        assert_string_equal(json_string_value(json_object_get(json_object_get(reply, "result"),
                                                              "data")), "payload");
        assert_true(json_is_integer(json_object_get(reply, "id")));
        json_decref(reply);
        assert_int_equal(kevo_pool_where(p, slot, &rank, &dev, &host), KEVO_OK);
        assert_int_equal(rank, slot + 1);
        assert_int_equal(dev, 0);
        assert_non_null(host);
    }
    e = rank_entry(h, 2);
    assert_string_equal(json_string_value(json_object_get(e, "state")), "ready");
    assert_int_equal(json_integer_value(json_object_get(e, "calls")), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(e, "slots"), 0), "name")),
                        "fake device");
    json_decref(e);
    kevo_pool_free(p);
    kevo_relay_hub_free(h);   /* STOP: the hosts return KEVO_OK */
    hosts_join(hosts, 2, KEVO_OK);
    net_free(n);
}

/* A worker that hangs on a host is that host's pool's business: a timeout verdict comes
 * back, the worker there restarted, and the host serves on. */
static void test_remote_timeout_is_a_verdict(void **state)
{
    struct net *n = net_new(2);
    struct host_run hosts[1];
    int devs[] = { 0 };
    json_t *reply = NULL;

    (void)state;
    hosts_start(n, hosts, 1);
    struct kevo_relay_hub *h = hub_open(n, devs, 1, 0);
    struct kevo_pool *p = remote_pool(h);
    assert_int_equal(call(p, 0, "sleep", 0.5, &reply), KEVO_OK);
    json_t *res = json_object_get(reply, "result");
    assert_string_equal(json_string_value(json_object_get(res, "verdict")), "timeout");
    assert_non_null(strstr(json_string_value(json_object_get(res, "message")), "killed"));
    json_decref(reply);
    assert_int_equal(call(p, 0, "echo", 10, &reply), KEVO_OK);
    assert_string_equal(json_string_value(json_object_get(reply, "status")), "ok");
    json_decref(reply);
    kevo_pool_free(p);
    kevo_relay_hub_free(h);
    hosts_join(hosts, 1, KEVO_OK);
    net_free(n);
}

struct bg_call {
    struct kevo_pool *p;
    int slot;
    enum kevo_status st;
    double took;
};

static void *bg_main(void *arg)
{
    struct bg_call *c = arg;
    json_t *reply = NULL;
    double t0 = kevo_now();

    c->st = call(c->p, c->slot, "sleep", 4, &reply);
    c->took = kevo_now() - t0;
    json_decref(reply);
    return NULL;
}

/* A host that falls silent with a call in flight is lost: the call returns KEVO_ERR_LOST
 * soon after the silence interval, not at its deadline; later calls on it at once; the
 * other host serves on; heard again, the lost host is told to leave (once the call it was
 * making is over: its worker's deadline). */
static void test_silent_host_is_lost(void **state)
{
    struct net *n = net_new(3);
    struct host_run hosts[2];
    int devs[] = { 0 };
    json_t *reply = NULL, *e, *news;
    pthread_t t;

    (void)state;
    hosts_start(n, hosts, 2);
    struct kevo_relay_hub *h = hub_open(n, devs, 1, 1.0);
    struct kevo_pool *p = remote_pool(h);
    struct bg_call c = { .p = p, .slot = 1 };
    assert_int_equal(pthread_create(&t, NULL, bg_main, &c), 0);
    usleep(300000);   /* the call reaches rank 2, whose worker sleeps */
    net_cut(n, 2, 1);
    pthread_join(t, NULL);
    assert_int_equal(c.st, KEVO_ERR_LOST);
    assert_true(c.took < 3.5);   /* the silence (1 s), not the call's 4 s deadline */
    double t0 = kevo_now();
    assert_int_equal(call(p, 1, "echo", 10, &reply), KEVO_ERR_LOST);
    assert_true(kevo_now() - t0 < 1);
    assert_null(reply);
    assert_int_equal(call(p, 0, "echo", 10, &reply), KEVO_OK);   /* rank 1 goes on */
    json_decref(reply);
    e = rank_entry(h, 2);
    assert_string_equal(json_string_value(json_object_get(e, "state")), "lost");
    assert_non_null(strstr(json_string_value(json_object_get(e, "why")), "silent"));
    assert_int_equal(json_integer_value(json_object_get(e, "lost_calls")), 1);
    json_decref(e);
    news = kevo_relay_hub_news(h);   /* once */
    assert_int_equal(json_array_size(news), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(news, 0), "rank")), 2);
    json_decref(news);
    news = kevo_relay_hub_news(h);
    assert_int_equal(json_array_size(news), 0);
    json_decref(news);
    net_cut(n, 2, 0);   /* it beats again: the hub sends it STOP */
    kevo_pool_free(p);
    kevo_relay_hub_free(h);
    hosts_join(hosts, 2, KEVO_OK);
    net_free(n);
}

/* A host whose devices cannot be opened says so in its HELLO: it has no slot, the reason
 * is kept, and it still leaves at the end. */
static void test_host_without_device(void **state)
{
    struct net *n = net_new(2);
    struct host_run hosts[1];
    int devs[] = { 7 };   /* the fake worker's missing device */

    (void)state;
    hosts_start(n, hosts, 1);
    struct kevo_relay_hub *h = hub_open(n, devs, 1, 0);
    assert_int_equal(kevo_relay_hub_slots(h), 0);
    json_t *e = rank_entry(h, 1);
    assert_string_equal(json_string_value(json_object_get(e, "state")), "failed");
    assert_non_null(strstr(json_string_value(json_object_get(e, "why")), "no such device"));
    json_decref(e);
    kevo_relay_hub_free(h);
    hosts_join(hosts, 1, KEVO_OK);
    net_free(n);
}

/* A controller that fails before it starts any worker still releases the hosts. */
static void test_stop_before_start(void **state)
{
    struct net *n = net_new(2);
    struct host_run hosts[1];

    (void)state;
    hosts_start(n, hosts, 1);
    assert_int_equal(n->io[0].send(n->io[0].ctx, 1, KEVO_RELAY_STOP, "{}", 2), KEVO_OK);
    hosts_join(hosts, 1, KEVO_OK);
    net_free(n);
}

/* A host sees its controller die when they share a host: it stops serving. */
static void test_controller_gone(void **state)
{
    struct net *n = net_new(2);
    struct host_run hosts[1];
    struct kevo_proc_id me;
    pid_t dead = fork();

    (void)state;
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    kevo_proc_self(&me);
    hosts_start(n, hosts, 1);
    json_t *start = json_pack("{s:s, s:[i], s:f, s:{s:i, s:s, s:i}}", "backend", "cpu",
                              "devices", 0, "start_timeout_s", 10.0, "controller", "pid",
                              (int)dead, "host", me.host, "start", 0);
    assert_int_equal(kevo_relay_send(&n->io[0], 1, KEVO_RELAY_START, start), KEVO_OK);
    json_decref(start);
    pthread_join(hosts[0].thread, NULL);
    assert_int_equal(hosts[0].st, KEVO_ERR_LOST);
    assert_non_null(strstr(hosts[0].msg, "gone"));
    kevo_free(hosts[0].msg);
    net_free(n);
}

/* kevo_mpi_open names what is missing in a kevo built without MPI. */
static void test_mpi_built_in(void **state)
{
    (void)state;
#ifdef KEVO_MPI
    assert_non_null(kevo_mpi_library());
#else
    struct kevo_mpi *m = (struct kevo_mpi *)1;
    char *msg = NULL;
    assert_int_equal(kevo_mpi_open(&m, &msg), KEVO_ERR_UNSUPPORTED);
    assert_null(m);
    assert_non_null(strstr(msg, "not built with MPI"));
    kevo_free(msg);
    assert_null(kevo_mpi_library());
#endif
    assert_int_equal(kevo_mpi_rank(NULL), 0);
    assert_int_equal(kevo_mpi_size(NULL), 1);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "__worker") == 0)
        return fake_worker(argc - 1, argv + 1);
    ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (len <= 0)
        return 1;
    self_exe[len] = '\0';
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelopes),
        cmocka_unit_test(test_calls_reach_hosts),
        cmocka_unit_test(test_remote_timeout_is_a_verdict),
        cmocka_unit_test(test_silent_host_is_lost),
        cmocka_unit_test(test_host_without_device),
        cmocka_unit_test(test_stop_before_start),
        cmocka_unit_test(test_controller_gone),
        cmocka_unit_test(test_mpi_built_in),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * fake_provider - an LLM provider for tests: real HTTP on 127.0.0.1 (an ephemeral port),
 * a thread that answers each connection from a script (request i gets step i, the last
 * step repeats) or, with a respond callback, with a body chosen from the request (with a
 * reply callback, its status too); with pass_check, kevo's model check is answered "OK"
 * aside from the script. Used by test_llm.c (the client), test_llm_run.c (kevo run with
 * LLM operators), test_models.c (kevo models check and the run's check) and
 * test_providers.c (fakes that behave like OpenAI, Anthropic and a local server). A test
 * fixture: a server, not an HTTP client.
 */
#ifndef KEVO_FAKE_PROVIDER_H
#define KEVO_FAKE_PROVIDER_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ctl/models.h"

#define FAKE_REQ_MAX (1 << 20)
#define FAKE_KEEP 16                 /* request bodies kept, in order of arrival */

static inline void fake_sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- the fake provider ---- */

struct step {
    int status;                  /* 0: read the request, never answer */
    const char *headers;         /* extra header lines, each ending "\r\n" */
    const char *body;
    size_t big;                  /* > 0: a body of this many 'x' */
    int echo;                    /* the body is the request as received */
    double delay_s;              /* before answering */
};

/* Instead of the script: the reply body chosen from the request (a test's callback). */
typedef const char *(*fake_respond_fn)(void *user, const char *request);
/* Like fake_respond_fn, with the HTTP status chosen too: *status is 200 unless the
 * callback sets another (a 400 that refuses a parameter, a 401, ...; not 0). */
typedef const char *(*fake_reply_fn)(void *user, const char *request, int *status);

struct fake {
    fake_respond_fn respond;     /* when set, every request is answered 200 with its body */
    fake_reply_fn reply;         /* when set (and respond is not): answered with the status
                                    and body it chooses; respond_user is its user */
    int pass_check;              /* kevo's model check (models.h; its system prompt) is
                                    answered 200 "OK", using no step and not counted */
    void *respond_user;
    int lfd, port;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const struct step *steps;
    int n_steps;
    int n_req;                   /* requests read */
    int active, max_active;      /* requests being answered at once */
    int threads;                 /* connection threads alive */
    atomic_int stop;
    char last[65536];            /* the start of the last request, NUL-terminated */
    char *bodies[FAKE_KEEP];     /* the bodies of the first FAKE_KEEP scripted requests
                                    (fake_body), so a test can hold each one to what its
                                    API family must receive */
};

struct conn {
    struct fake *f;
    int fd;
};

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;            /* the client gave up: fine */
        p += w;
        n -= (size_t)w;
    }
}

/* Read one request (headers, then Content-Length bytes) into buf; its length or -1. */
static ssize_t read_request(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    long clen = -1;
    char *eoh = NULL;

    while (len < cap - 1) {
        ssize_t r = recv(fd, buf + len, cap - 1 - len, 0);
        if (r <= 0)
            return -1;
        len += (size_t)r;
        buf[len] = '\0';
        if (!eoh && (eoh = strstr(buf, "\r\n\r\n")) != NULL) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            clen = cl ? strtol(cl + 17, NULL, 10) : 0;
        }
        if (eoh && len >= (size_t)(eoh + 4 - buf) + (size_t)clen)
            return (ssize_t)len;
    }
    return (ssize_t)len;
}

/* Until the client hangs up or the fake stops. */
static void wait_hangup(struct fake *f, int fd)
{
    char c;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 10) > 0 && recv(fd, &c, 1, 0) <= 0)
            return;
    }
}

static void answer(int fd, const struct step *s, const char *req)
{
    char head[1024];
    const char *body = s->echo ? req : s->body ? s->body : "";
    size_t n = s->big ? s->big : strlen(body);

    snprintf(head, sizeof head, "HTTP/1.1 %d Fake\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n%s\r\n", s->status, n,
             s->headers ? s->headers : "");
    send_all(fd, head, strlen(head));
    if (!s->big) {
        send_all(fd, body, n);
        return;
    }
    char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    for (size_t sent = 0; sent < n; sent += sizeof chunk) {
        size_t k = n - sent < sizeof chunk ? n - sent : sizeof chunk;
        ssize_t w = send(fd, chunk, k, MSG_NOSIGNAL);
        if (w < (ssize_t)k)
            return;
    }
}

/* The check's request, answered as the API it was sent to (the path says which). */
static const struct step *fake_check_step(const char *req)
{
    static const struct step openai = { 200, NULL, "{\"choices\":[{\"index\":0,\"message\":"
        "{\"role\":\"assistant\",\"content\":\"OK\"},\"finish_reason\":\"stop\"}],"
        "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":1}}", 0, 0, 0 };
    static const struct step anthropic = { 200, NULL, "{\"type\":\"message\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"OK\"}],\"stop_reason\":\"end_turn\","
        "\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}", 0, 0, 0 };
    return strstr(req, "/messages HTTP/") ? &anthropic : &openai;
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct fake *f = c->f;
    static _Thread_local char req[FAKE_REQ_MAX];
    ssize_t n = read_request(c->fd, req, sizeof req);
    const struct step *s = NULL, *check = NULL;
    struct step dyn = { 200, NULL, NULL, 0, 0, 0 };

    if (n >= 0 && f->pass_check && strstr(req, KEVO_MODELS_CHECK_SYSTEM))
        check = fake_check_step(req);
    pthread_mutex_lock(&f->mu);
    if (n >= 0 && !check) {
        s = f->respond || f->reply ? &dyn
            : &f->steps[f->n_req < f->n_steps ? f->n_req : f->n_steps - 1];
        if (f->n_req < FAKE_KEEP && strstr(req, "\r\n\r\n"))
            f->bodies[f->n_req] = strdup(strstr(req, "\r\n\r\n") + 4);
        f->n_req++;
        memcpy(f->last, req, (size_t)n + 1 < sizeof f->last ? (size_t)n + 1 : sizeof f->last);
        f->last[sizeof f->last - 1] = '\0';
        if (++f->active > f->max_active)
            f->max_active = f->active;
    }
    pthread_mutex_unlock(&f->mu);
    if (s == &dyn && f->respond)
        dyn.body = f->respond(f->respond_user, req);
    else if (s == &dyn)
        dyn.body = f->reply(f->respond_user, req, &dyn.status);
    if (s && s->status == 0)
        wait_hangup(f, c->fd);
    if (s && s->delay_s > 0)
        fake_sleep_s(s->delay_s);
    pthread_mutex_lock(&f->mu);
    /* before answering: once the client has its answer, the next request may come */
    if (s)
        f->active--;
    pthread_mutex_unlock(&f->mu);
    if (s && s->status)
        answer(c->fd, s, req);
    if (check)
        answer(c->fd, check, req);
    close(c->fd);
    pthread_mutex_lock(&f->mu);
    f->threads--;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    free(c);
    return NULL;
}

static void *accept_main(void *arg)
{
    struct fake *f = arg;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = { f->lfd, POLLIN, 0 };
        if (poll(&p, 1, 10) <= 0)
            continue;
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        struct conn *c = malloc(sizeof *c);
        pthread_t t;
        if (!c)
            abort();
        c->f = f;
        c->fd = fd;
        pthread_mutex_lock(&f->mu);
        f->threads++;
        pthread_mutex_unlock(&f->mu);
        if (!c || pthread_create(&t, NULL, conn_main, c) != 0)
            abort();           /* not in the test's thread: cmocka cannot fail from here */
        pthread_detach(t);
    }
    return NULL;
}

/* A socket bound to 127.0.0.1 on an ephemeral port. */
static int listen_any(int *port)
{
    struct sockaddr_in a = { 0 };
    socklen_t alen = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static struct fake *fake_start(const struct step *steps, int n_steps)
{
    struct fake *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->steps = steps;
    f->n_steps = n_steps;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->lfd = listen_any(&f->port);
    assert_int_equal(listen(f->lfd, 64), 0);
    assert_int_equal(pthread_create(&f->thr, NULL, accept_main, f), 0);
    return f;
}

static void fake_stop(struct fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->thr, NULL);
    pthread_mutex_lock(&f->mu);
    while (f->threads > 0)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
    close(f->lfd);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    for (int i = 0; i < FAKE_KEEP; i++)
        free(f->bodies[i]);
    free(f);
}

/* The body of scripted request i (from 0), as received; "" when there was none. */
static inline const char *fake_body(const struct fake *f, int i)
{
    return i >= 0 && i < FAKE_KEEP && f->bodies[i] ? f->bodies[i] : "";
}

#endif

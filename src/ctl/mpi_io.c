/*
 * mpi_io - kevo in an MPI job (mpi_io.h): MPI's init and finalize, the relay's transport
 * over MPI, the controller's hub, a host's serving. Built only with MPI (the Makefile).
 *
 * Fault tolerance without ULFM. A rank that dies must not take the job with it: mpirun
 * needs --enable-recovery (docs/cluster.md), every MPI error is returned (MPI_ERRORS_RETURN)
 * and no call ever waits on one peer: sends are MPI_Isend completed by MPI_Test in the
 * receive loop, receives are MPI_Iprobe on any source. A send that fails names its peer
 * (a FAULT message for the relay); one that never completes (a dead peer on shared memory)
 * is abandoned when the relay forgets the peer, its buffer kept until after MPI_Finalize.
 */
#include "ctl/mpi_io.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/proc.h"

#include <mpi.h>

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MPI_NAP_MAX_US  1000     /* the longest nap of the receive loop */
#define MPI_DRAIN_S     10.0     /* sends still in progress at close get this long */

/* A send in progress: its buffer must live until MPI_Test says it is done. */
struct mpi_send {
    void *buf;
    MPI_Request req;
    int to;
    struct mpi_send *next;
};

/* A send that failed, for the relay as a FAULT message. */
struct mpi_fault {
    int peer;
    char text[MPI_MAX_ERROR_STRING + 64];
    struct mpi_fault *next;
};

struct kevo_mpi {
    int rank, size;
    MPI_Comm comm;                 /* kevo's own: MPI_COMM_WORLD duplicated */
    struct kevo_relay_io io;
    struct mpi_send *sends;        /* in progress */
    struct mpi_send *abandoned;    /* to peers forgotten: freed after MPI_Finalize */
    struct mpi_fault *faults;
    struct kevo_relay_hub *hub;    /* rank 0, once a run asked for it */
    int hub_tried;
};

/* MPI's text for error code rc. */
static void mpi_text(int rc, char *buf, size_t n)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "MPI error %d", rc);
    snprintf(buf, n, "%s", s);
}

static void nap_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

    nanosleep(&ts, NULL);
}

/* ---- the transport ---- */

static void send_free(struct mpi_send *s)
{
    if (s)
        kevo_free(s->buf);
    kevo_free(s);
}

static void fault(struct kevo_mpi *m, int peer, int rc)
{
    struct mpi_fault *f = kevo_calloc(1, sizeof *f), **pp = &m->faults;
    char why[MPI_MAX_ERROR_STRING];

    mpi_text(rc, why, sizeof why);
    KEVO_WARN("rank %d: MPI: a send to rank %d failed: %s", m->rank, peer, why);
    if (!f)
        return;
    f->peer = peer;
    snprintf(f->text, sizeof f->text, "a send failed: %s", why);
    while (*pp)
        pp = &(*pp)->next;
    *pp = f;
}

/* Drive the sends in progress; those done are freed, those that failed reported. */
static void progress(struct kevo_mpi *m)
{
    struct mpi_send **pp = &m->sends;

    while (*pp) {
        struct mpi_send *s = *pp;
        int done = 0, rc = MPI_Test(&s->req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            fault(m, s->to, rc);
            *pp = s->next;
            s->next = m->abandoned;   /* MPI may still hold the buffer */
            m->abandoned = s;
        } else if (done) {
            *pp = s->next;
            send_free(s);
        } else {
            pp = &s->next;
        }
    }
}

static enum kevo_status io_send(void *ctx, int to, int kind, const char *text, size_t len)
{
    struct kevo_mpi *m = ctx;
    struct mpi_send *s;
    char why[MPI_MAX_ERROR_STRING];
    int rc;

    if (len > INT_MAX)
        return KEVO_ERR_TOOBIG;
    s = kevo_calloc(1, sizeof *s);
    if (s)
        s->buf = kevo_malloc(len ? len : 1);
    if (!s || !s->buf) {
        send_free(s);
        return KEVO_ERR_NOMEM;
    }
    memcpy(s->buf, text, len);
    s->to = to;
    rc = MPI_Isend(s->buf, (int)len, MPI_BYTE, to, kind, m->comm, &s->req);
    if (rc != MPI_SUCCESS) {
        mpi_text(rc, why, sizeof why);
        KEVO_WARN("rank %d: MPI_Isend to rank %d: %s", m->rank, to, why);
        send_free(s);
        return KEVO_ERR_IO;
    }
    s->next = m->sends;
    m->sends = s;
    return KEVO_OK;
}

/* Receive the message st describes into *out. */
static enum kevo_status take(struct kevo_mpi *m, MPI_Status *st, struct kevo_relay_msg *out)
{
    char why[MPI_MAX_ERROR_STRING];
    int n = 0, rc = MPI_Get_count(st, MPI_BYTE, &n);
    char *buf = rc == MPI_SUCCESS && n >= 0 ? kevo_malloc((size_t)n + 1) : NULL;

    if (!buf)
        return rc == MPI_SUCCESS ? KEVO_ERR_NOMEM : KEVO_ERR_IO;
    rc = MPI_Recv(buf, n, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, m->comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        mpi_text(rc, why, sizeof why);
        kevo_free(buf);
        out->from = st->MPI_SOURCE;
        out->kind = KEVO_RELAY_FAULT;
        out->text = kevo_strdupf("a receive failed: %s", why);
        out->len = out->text ? strlen(out->text) : 0;
        return KEVO_OK;
    }
    buf[n] = '\0';
    out->from = st->MPI_SOURCE;
    out->kind = st->MPI_TAG;
    out->text = buf;
    out->len = (size_t)n;
    return KEVO_OK;
}

static enum kevo_status io_recv(void *ctx, double wait_s, struct kevo_relay_msg *out)
{
    struct kevo_mpi *m = ctx;
    double end = kevo_now() + (wait_s > 0 ? wait_s : 0);
    long nap = 20;

    memset(out, 0, sizeof *out);
    for (;;) {
        MPI_Status st;
        int flag = 0, rc;
        progress(m);
        if (m->faults) {
            struct mpi_fault *f = m->faults;
            m->faults = f->next;
            out->from = f->peer;
            out->kind = KEVO_RELAY_FAULT;
            out->text = kevo_strdup(f->text);
            out->len = out->text ? strlen(out->text) : 0;
            kevo_free(f);
            return KEVO_OK;
        }
        rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, m->comm, &flag, &st);
        if (rc != MPI_SUCCESS) {
            char why[MPI_MAX_ERROR_STRING];
            mpi_text(rc, why, sizeof why);
            KEVO_WARN("rank %d: MPI_Iprobe: %s", m->rank, why);
            return KEVO_ERR_IO;
        }
        if (flag)
            return take(m, &st, out);
        double left = end - kevo_now();
        if (left <= 0)
            return KEVO_ERR_TIMEOUT;
        nap_us(nap < left * 1e6 ? nap : (long)(left * 1e6) + 1);
        nap = nap * 2 > MPI_NAP_MAX_US ? MPI_NAP_MAX_US : nap * 2;
    }
}

/* Peer is lost: what is still being sent to it is abandoned, not waited for. */
static void io_forget(void *ctx, int peer)
{
    struct kevo_mpi *m = ctx;
    struct mpi_send **pp = &m->sends;

    while (*pp) {
        struct mpi_send *s = *pp;
        if (s->to == peer) {
            *pp = s->next;
            s->next = m->abandoned;
            m->abandoned = s;
        } else {
            pp = &s->next;
        }
    }
}

/* ---- open / close ---- */

const char *kevo_mpi_library(void)
{
    static char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    if (!lib[0] && MPI_Get_library_version(lib, &len) == MPI_SUCCESS)
        lib[strcspn(lib, "\r\n,")] = '\0';   /* its first line, to its first comma */
    return lib[0] ? lib : "MPI";
}

enum kevo_status kevo_mpi_open(struct kevo_mpi **out, char **out_msg)
{
    struct kevo_mpi *m;
    int inited = 0, provided = 0;

    *out = NULL;
    *out_msg = NULL;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || inited) {
        *out_msg = kevo_strdup("MPI is already initialised in this process");
        return KEVO_ERR_INVALID;
    }
    m = kevo_calloc(1, sizeof *m);
    if (!m)
        return KEVO_ERR_NOMEM;
    /* workers are started with fork and exec, which is safe here: say nothing about it */
    setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        kevo_free(m);
        *out_msg = kevo_strdup("MPI_Init_thread failed");
        return KEVO_ERR_SYSTEM;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED || MPI_Comm_dup(MPI_COMM_WORLD, &m->comm) != MPI_SUCCESS) {
        *out_msg = kevo_strdupf("the MPI library gives thread level %d; kevo needs "
                                "MPI_THREAD_SERIALIZED (%d)", provided, MPI_THREAD_SERIALIZED);
        MPI_Finalize();
        kevo_free(m);
        return KEVO_ERR_UNSUPPORTED;
    }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &m->rank);
    MPI_Comm_size(m->comm, &m->size);
    m->io = (struct kevo_relay_io){ .ctx = m, .rank = m->rank, .size = m->size,
                                    .send = io_send, .recv = io_recv, .forget = io_forget };
    *out = m;
    return KEVO_OK;
}

int kevo_mpi_rank(const struct kevo_mpi *m)
{
    return m ? m->rank : 0;
}

int kevo_mpi_size(const struct kevo_mpi *m)
{
    return m ? m->size : 1;
}

enum kevo_status kevo_mpi_serve(struct kevo_mpi *m, char **out_msg)
{
    struct kevo_relay_host_opts o = { 0 };

    *out_msg = NULL;
    if (!m || m->rank == 0) {
        *out_msg = kevo_strdup("rank 0 is the controller: it runs the search, not a host");
        return KEVO_ERR_INVALID;
    }
    return kevo_relay_host_serve(&m->io, &o, out_msg);
}

enum kevo_status kevo_mpi_hub(struct kevo_mpi *m, const struct kevo_relay_hub_opts *o,
                              struct kevo_relay_hub **out, char **out_msg)
{
    enum kevo_status st;

    *out = NULL;
    *out_msg = NULL;
    if (!m || m->rank != 0 || m->hub_tried) {
        *out_msg = kevo_strdup(m && m->hub_tried ? "the MPI ranks serve one run per job"
                                                 : "only rank 0 runs the hub");
        return KEVO_ERR_INVALID;
    }
    m->hub_tried = 1;
    st = kevo_relay_hub_open(&m->io, o, &m->hub, out_msg);
    *out = m->hub;
    return st;
}

/*
 * Lost ranks that still run on this host would keep MPI_Finalize waiting: end them (their
 * work was given to others). Elsewhere they cannot be seen: say so.
 */
static void end_lost(struct kevo_mpi *m, json_t *ranks)
{
    size_t i;
    json_t *e;

    json_array_foreach(ranks, i, e) {
        const char *state = json_string_value(json_object_get(e, "state"));
        struct kevo_proc_id id;
        if (!state || strcmp(state, "lost") != 0)
            continue;
        memset(&id, 0, sizeof id);
        id.pid = json_integer_value(json_object_get(e, "pid"));
        snprintf(id.host, sizeof id.host, "%s", json_string_value(json_object_get(e, "host")));
        enum kevo_proc_state ps = kevo_proc_check(&id);
        if (ps == KEVO_PROC_ALIVE) {
            KEVO_WARN("rank %d (pid %lld) was lost but still runs: ending it",
                      (int)json_integer_value(json_object_get(e, "rank")), (long long)id.pid);
            kill((pid_t)id.pid, SIGKILL);
        } else if (ps == KEVO_PROC_UNKNOWN) {
            KEVO_WARN("rank %d on %s was lost; if mpirun does not end, that rank still runs: "
                      "end the job (scancel, or kill mpirun)",
                      (int)json_integer_value(json_object_get(e, "rank")), id.host);
        }
    }
    (void)m;
}

/* Rank 0 without a hub: the ranks wait for a START that will not come. */
static void release(struct kevo_mpi *m)
{
    for (int r = 1; r < m->size; r++)
        if (io_send(m, r, KEVO_RELAY_STOP, "{}", 2) != KEVO_OK)
            KEVO_WARN("cannot tell rank %d to stop", r);
}

/* Let the sends in progress finish, for a while. */
static void drain(struct kevo_mpi *m)
{
    double end = kevo_now() + MPI_DRAIN_S;

    while (m->sends && kevo_now() < end) {
        progress(m);
        nap_us(MPI_NAP_MAX_US);
    }
    while (m->sends) {
        struct mpi_send *s = m->sends;
        m->sends = s->next;
        s->next = m->abandoned;
        m->abandoned = s;
    }
}

void kevo_mpi_close(struct kevo_mpi *m)
{
    if (!m)
        return;
    if (m->rank == 0 && m->hub) {
        json_t *ranks = kevo_relay_hub_ranks(m->hub);
        kevo_relay_hub_free(m->hub);   /* STOP, BYE */
        end_lost(m, ranks);
        json_decref(ranks);
    } else if (m->rank == 0) {
        release(m);
    }
    drain(m);
    MPI_Comm_free(&m->comm);
    MPI_Finalize();
    while (m->abandoned) {   /* MPI holds nothing now */
        struct mpi_send *s = m->abandoned;
        m->abandoned = s->next;
        send_free(s);
    }
    while (m->faults) {
        struct mpi_fault *f = m->faults;
        m->faults = f->next;
        kevo_free(f);
    }
    kevo_free(m);
}

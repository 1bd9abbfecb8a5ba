/*
 * worker - the evaluation process (worker.h; docs/internals/worker.md). It speaks the
 * protocol of core/wire.h on two fds; its writes never die of SIGPIPE (base/fdio.h).
 *
 * The worker (kevo_worker_main) is one single-threaded process per device: it reads a
 * request, answers it, reads the next. It owns the device backend, opened at start (before
 * any request is in memory) and kept (context, module cache, buffers) across requests.
 * Its stdout is /dev/null, so nothing a candidate or a device library prints can reach the
 * protocol; stderr carries its log. A sticky device fault is answered and then ends the
 * process with KEVO_WORKER_EXIT_DEVICE; the pool starts a fresh one.
 */
#include "worker/worker.h"

#include "base/clock.h"

#include "worker/backend.h"
#include "base/buf.h"
#include "worker/eval.h"
#include "base/log.h"
#include "base/mem.h"
#include "worker/backend_cpu.h"
#include "worker/calibrate.h"
#include "worker/rtc.h"
#include "core/task.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Exit codes of kevo_worker_main besides 0 (request pipe closed: a clean stop) and
 * KEVO_WORKER_EXIT_DEVICE (worker.h). */
#define WORKER_EXIT_IO    1   /* the protocol stream broke: controller gone, bad frame */
#define WORKER_EXIT_USAGE 2   /* bad options or unusable protocol fds */

#define WORKER_MSG_MAX  (1u << 20)   /* cap on a reply's message text */
#define WORKER_LOG_MAX  (4u << 20)   /* cap on a compile log */

/* ---- the worker process: setup ---- */

struct worker {
    const char *backend;      /* "cpu" or "cuda" */
    int device;
    int fd_in, fd_out;        /* request and reply pipes */
    int b_open;
    struct kevo_backend b;    /* valid when b_open */
};

static void worker_logger(enum kevo_log_level lvl, const char *msg, void *user)
{
    static const char *const names[] = { "error", "warning", "info", "debug" };
    const char *name = (unsigned)lvl < 4 ? names[lvl] : "log";

    (void)user;
    fprintf(stderr, "kevo worker[%d]: %s: %s\n", (int)getpid(), name, msg);
}

/* A non-negative decimal int, the whole string. */
static int parse_nonneg(const char *s, int *out)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_args(int argc, char **argv, struct worker *w)
{
    w->backend = NULL;
    w->device = 0;
    w->fd_in = 3;
    w->fd_out = 4;
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(opt, "--backend") != 0 && strcmp(opt, "--device") != 0 &&
            strcmp(opt, "--fd-in") != 0 && strcmp(opt, "--fd-out") != 0) {
            KEVO_ERROR("unknown option '%s' (--backend, --device, --fd-in, --fd-out)", opt);
            return -1;
        }
        if (!val) {
            KEVO_ERROR("option %s needs a value", opt);
            return -1;
        }
        if (strcmp(opt, "--backend") == 0)
            w->backend = val;
        else if (strcmp(opt, "--device") == 0)
            bad = parse_nonneg(val, &w->device);
        else if (strcmp(opt, "--fd-in") == 0)
            bad = parse_nonneg(val, &w->fd_in);
        else
            bad = parse_nonneg(val, &w->fd_out);
        if (bad) {
            KEVO_ERROR("option %s: '%s' is not a non-negative integer", opt, val);
            return -1;
        }
    }
    if (!w->backend || (strcmp(w->backend, "cpu") != 0 && strcmp(w->backend, "cuda") != 0 &&
                        strcmp(w->backend, "none") != 0)) {
        KEVO_ERROR("option --backend: cpu, cuda or none is required");
        return -1;
    }
    if (w->fd_in == w->fd_out) {
        KEVO_ERROR("--fd-in and --fd-out must differ");
        return -1;
    }
    return 0;
}

/* Close fds first..last; close_range where the kernel has it, else one by one. */
static void close_span(int first, int last)
{
    if (first > last)
        return;
    if (close_range((unsigned)first, (unsigned)last, 0) == 0)
        return;
    struct rlimit rl;
    long top = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)top)
        top = (long)rl.rlim_cur;
    for (long fd = first; fd <= last && fd < top; fd++)
        close((int)fd);
}

/* Keep 0, 1, 2 and the protocol fds a < b; nothing inherited may leak to candidates. */
static void close_other_fds(int a, int b)
{
    close_span(3, a - 1);
    close_span(a + 1, b - 1);
    close_span(b + 1, INT_MAX);
}

/* Move a protocol fd off 0..2 (they are about to become /dev/null); make it close-on-exec
 * so compilers and runners the backend starts never hold the protocol pipes. */
static int protocol_fd(int *fd)
{
    if (fcntl(*fd, F_GETFD) < 0)
        return -1;
    if (*fd < 3) {
        int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
        if (moved < 0)
            return -1;
        *fd = moved;
    }
    return fcntl(*fd, F_SETFD, FD_CLOEXEC);
}

/* stdin and stdout become /dev/null; a candidate must never read or write the protocol. */
static int silence_stdio(void)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

    if (fd < 0)
        return -1;
    fflush(stdout);
    if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* 1 when the controller is already gone: its end of the request pipe is closed. */
static int controller_gone(int fd_in)
{
    struct pollfd pfd = { .fd = fd_in, .events = POLLIN };

    return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP) && !(pfd.revents & POLLIN);
}

static int worker_setup(struct worker *w)
{
    struct sigaction sa;

    /* Die with the controller. PR_SET_PDEATHSIG survives exec, so the pool sets it
     * before exec too; setting it again covers workers started some other way. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    /* A stop signal sent to every kevo process at once (pkill kevo, systemd or Slurm
     * ending a job) is the controller's to act on: it lets the evaluations in flight end,
     * then closes this worker's pipe (or kills its group). Killed by it, a worker would
     * leave a false `crash` verdict for the candidate it was evaluating. What it starts
     * (compiler, CPU runners) inherits the choice; they are ended by SIGKILL. */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (protocol_fd(&w->fd_in) || protocol_fd(&w->fd_out)) {
        KEVO_ERROR("protocol fds %d/%d are not open: %s", w->fd_in, w->fd_out,
                   strerror(errno));
        return -1;
    }
    close_other_fds(w->fd_in < w->fd_out ? w->fd_in : w->fd_out,
                    w->fd_in < w->fd_out ? w->fd_out : w->fd_in);
    if (silence_stdio()) {
        KEVO_ERROR("cannot redirect stdout to /dev/null: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the worker process: requests ---- */

/* What a request handler produced. */
struct op_out {
    json_t *result;           /* the reply's result object, or NULL */
    struct kevo_buf msg;      /* the reply's message, if any */
    int device_lost;          /* 1: answer, then exit with KEVO_WORKER_EXIT_DEVICE */
};

/* The backend: opened at start (worker_open_early), or at the first request needing it. */
static enum kevo_status worker_backend(struct worker *w, struct op_out *o,
                                       struct kevo_backend **out)
{
    enum kevo_status st = KEVO_OK;
    struct kevo_buf err;

    *out = NULL;
    kevo_buf_init(&err, 64u << 10);
    if (strcmp(w->backend, "none") == 0) {   /* a compile-only worker (`kevo check`) */
        kevo_buf_say(&o->msg, "this worker has no backend (started with --backend none)");
        st = KEVO_ERR_UNSUPPORTED;
        goto out;
    }
    if (!w->b_open) {
        if (strcmp(w->backend, "cpu") == 0)
            st = kevo_backend_open_cpu(&w->b, &err);
        else
            st = kevo_backend_open_cuda(w->device, &w->b, &err);
        if (st) {
            kevo_buf_say(&o->msg, "cannot open the %s backend (device %d): %s", w->backend,
                         w->device, err.len ? kevo_buf_str(&err) : kevo_status_name(st));
            goto out;
        }
        KEVO_INFO("opened the %s backend, device %d", w->backend, w->device);
        w->b_open = 1;
    }
    *out = &w->b;
out:
    kevo_buf_free(&err);
    return st;
}

/*
 * Open the backend before the first request arrives: the CPU backend forks its spawner at
 * open, and a fork made while a request is in memory would carry that request (its secret
 * seed) into every runner. A failure here is retried, and reported, at the first request
 * that needs the backend.
 */
static void worker_open_early(struct worker *w)
{
    struct op_out o;
    struct kevo_backend *b = NULL;

    if (strcmp(w->backend, "none") == 0)
        return;
    memset(&o, 0, sizeof o);
    kevo_buf_init(&o.msg, 64u << 10);
    if (worker_backend(w, &o, &b) != KEVO_OK)
        KEVO_DEBUG("backend not opened at start: %s", kevo_buf_str(&o.msg));
    kevo_buf_free(&o.msg);
}

static enum kevo_status op_ping(struct worker *w, json_t *req, struct op_out *o)
{
    (void)w;
    (void)req;
    o->result = json_pack("{s:b, s:i}", "pong", 1, "pid", (int)getpid());
    return o->result ? KEVO_OK : KEVO_ERR_NOMEM;
}

static json_t *device_info_json(const struct kevo_device_info *d)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:i, s:i, s:i, s:i}",
                     "name", d->name, "arch", d->arch, "cc_major", d->cc_major,
                     "cc_minor", d->cc_minor, "n_sms", d->n_sms,
                     "l2_bytes", (json_int_t)d->l2_bytes, "mem_bytes", (json_int_t)d->mem_bytes,
                     "smem_per_block_optin", (json_int_t)d->smem_per_block_optin,
                     "smem_per_sm", (json_int_t)d->smem_per_sm,
                     "max_threads_per_block", d->max_threads_per_block,
                     "clock_mhz", d->clock_mhz, "mem_clock_mhz", d->mem_clock_mhz,
                     "bus_width_bits", d->bus_width_bits);
}

static enum kevo_status op_info(struct worker *w, json_t *req, struct op_out *o)
{
    struct kevo_device_info d;
    struct kevo_backend *b;
    enum kevo_status st;

    (void)req;
    st = worker_backend(w, o, &b);
    if (st)
        return st;
    memset(&d, 0, sizeof d);
    st = b->ops->info(b->ctx, &d);
    if (st) {
        kevo_buf_say(&o->msg, "device info failed: %s", kevo_status_name(st));
        return st;
    }
    d.name[sizeof d.name - 1] = '\0';
    d.arch[sizeof d.arch - 1] = '\0';
    o->result = device_info_json(&d);
    if (!o->result)
        return KEVO_ERR_NOMEM;
    json_object_set_new(o->result, "backend", json_string(w->backend));
    json_object_set_new(o->result, "device", json_integer(w->device));
    return KEVO_OK;
}

static enum kevo_status op_eval(struct worker *w, json_t *req, struct op_out *o)
{
    enum kevo_status st;
    struct kevo_eval_req er;
    struct kevo_backend *b;
    char *emsg = NULL;
    /* A shallow copy without the envelope: eval sees only its own fields. The texts are
     * shared with req, which outlives this call, so er may borrow them. */
    json_t *fields = json_copy(req);

    if (!fields)
        return KEVO_ERR_NOMEM;
    json_object_del(fields, "id");
    json_object_del(fields, "op");
    memset(&er, 0, sizeof er);
    st = kevo_eval_req_from_json(fields, &er, &emsg);
    if (st) {
        kevo_buf_say(&o->msg, "bad eval request: %s", emsg ? emsg : kevo_status_name(st));
        goto out;
    }
    st = worker_backend(w, o, &b);
    if (st)
        goto out;
    st = kevo_eval_run(b, &er, &o->result);
    if (st == KEVO_ERR_DEVICE && o->result) {
        /* The verdict (crash) is in the result; the context is gone, so the process
         * must go too once the reply is out. */
        o->device_lost = 1;
        st = KEVO_OK;
    } else if (st) {
        const char *m = json_string_value(json_object_get(o->result, "message"));
        kevo_buf_say(&o->msg, "evaluation failed: %s", m ? m : kevo_status_name(st));
        json_decref(o->result);
        o->result = NULL;
    }
out:
    kevo_free(emsg);
    json_decref(fields);
    return st;
}

static enum kevo_status op_calibrate(struct worker *w, json_t *req, struct op_out *o)
{
    json_t *jforce = json_object_get(req, "force");
    int force = json_is_true(jforce) || (json_is_integer(jforce) && json_integer_value(jforce));
    struct kevo_backend *b;
    struct kevo_buf err;
    enum kevo_status st;

    st = worker_backend(w, o, &b);
    if (st)
        return st;
    kevo_buf_init(&err, 64u << 10);
    st = kevo_calibrate_run(b, force, &o->result, &err);
    if (st) {
        kevo_buf_say(&o->msg, "calibration failed: %s",
                     err.len ? kevo_buf_str(&err) : kevo_status_name(st));
        json_decref(o->result);
        o->result = NULL;
    }
    kevo_buf_free(&err);
    return st;
}

/* ---- compile (resource report) ---- */

/* Everything one compile request owns, freed in one place. */
struct compile_job {
    struct kevo_task *task, *cand;
    const struct kevo_task *unit;     /* what is compiled: the candidate, else the task */
    struct kevo_compile_src src;      /* its compile request */
    struct kevo_module *mod;
    struct kevo_buf log;
};

static void compile_job_free(struct compile_job *j, struct kevo_backend *b)
{
    if (j->mod && b)
        b->ops->module_free(b->ctx, j->mod);
    kevo_task_free(j->cand);
    kevo_task_free(j->task);
    kevo_compile_src_free(&j->src);
    kevo_buf_free(&j->log);
}

static const char *str_field(json_t *req, const char *key, size_t *out_len)
{
    json_t *v = json_object_get(req, key);

    if (out_len)
        *out_len = json_string_length(v);
    return json_string_value(v);
}

/* Parse the task and, when given, the candidate; j->unit is what will be compiled. */
static enum kevo_status compile_parse(json_t *req, struct compile_job *j, struct op_out *o)
{
    size_t tlen = 0, clen = 0;
    const char *path = str_field(req, "path", NULL);
    const char *text = str_field(req, "text", &tlen);
    const char *cpath = str_field(req, "cand_path", NULL);
    const char *ctext = str_field(req, "cand_text", &clen);
    enum kevo_status st;
    char *pmsg = NULL;

    if (!path || !text) {
        kevo_buf_say(&o->msg, "compile: fields \"path\" and \"text\" (strings) are required");
        return KEVO_ERR_INVALID;
    }
    st = kevo_task_parse(path, text, tlen, &j->task, &pmsg);
    if (!st && ctext)
        st = kevo_candidate_parse(j->task, cpath ? cpath : "<candidate>", ctext, clen,
                                  &j->cand, &pmsg);
    if (st) {
        kevo_buf_say(&o->msg, "%s", pmsg ? pmsg : kevo_status_name(st));
        kevo_free(pmsg);
        return st;
    }
    j->unit = j->cand ? j->cand : j->task;
    return KEVO_OK;
}

/* The compile request, with -D values from the request's "params" (one integer per
 * declared param) or the defaults. */
static enum kevo_status compile_params(json_t *req, struct compile_job *j, struct op_out *o)
{
    const struct kevo_task *u = j->unit;
    json_t *jp = json_object_get(req, "params");
    int64_t *values = NULL;
    enum kevo_status st;

    if (jp && !json_is_null(jp) &&
        (!json_is_array(jp) || json_array_size(jp) != (size_t)u->n_params)) {
        kevo_buf_say(&o->msg,
                     "compile: \"params\" must be an array of %d integers (the params of %s)",
                     u->n_params, u->path);
        return KEVO_ERR_INVALID;
    }
    values = kevo_calloc((size_t)u->n_params + 1, sizeof *values);
    if (!values)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < u->n_params; i++) {
        json_t *v = json_array_get(jp, (size_t)i);
        if (v && !json_is_integer(v)) {
            kevo_buf_say(&o->msg, "compile: params[%d] (%s) is not an integer", i,
                         u->params[i].name);
            kevo_free(values);
            return KEVO_ERR_INVALID;
        }
        values[i] = v ? (int64_t)json_integer_value(v) : u->params[i].values[0];
    }
    st = kevo_compile_src_init(&j->src, u, values);
    kevo_free(values);
    return st;
}

static json_t *kernel_json(const char *name, const struct kevo_func_info *fi)
{
    json_t *sizes = json_array();
    int n = fi->n_params < KEVO_MAX_ARGS ? fi->n_params : KEVO_MAX_ARGS;

    for (int i = 0; sizes && i < n; i++)
        json_array_append_new(sizes, json_integer(fi->param_size[i]));
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:o}", "name", name, "regs", fi->num_regs,
                     "smem", fi->static_smem, "local_bytes", fi->local_bytes,
                     "max_threads_per_block", fi->max_threads_per_block, "params", sizes);
}

/* Compile j->unit and build {"ok","log","kernels"}. A compile error is data (ok false). */
static enum kevo_status compile_run(struct kevo_backend *b, struct compile_job *j,
                                    struct op_out *o)
{
    const struct kevo_task *u = j->unit;
    const struct kevo_compile_req *cr = &j->src.req;
    enum kevo_status st = b->ops->compile(b->ctx, cr, &j->mod, &j->log);
    json_t *kernels = json_array();
    int ok = st == KEVO_OK;

    if (st && st != KEVO_ERR_COMPILE) {
        kevo_buf_say(&o->msg, "compile of %s failed: %s", u->path,
                     j->log.len ? kevo_buf_str(&j->log) : kevo_status_name(st));
        json_decref(kernels);
        return st;
    }
    for (int i = 0; ok && i < cr->n_entries; i++) {
        struct kevo_func_info fi;
        memset(&fi, 0, sizeof fi);
        enum kevo_status fs = b->ops->func_info(b->ctx, j->mod, i, &fi);
        if (fs == KEVO_ERR_DEVICE) {
            json_decref(kernels);
            return fs;
        }
        if (fs) {
            fs = kevo_buf_addf(&j->log, "%serror: kernel '%s' of the launch plan: %s\n",
                               j->log.len ? "\n" : "", cr->entries[i], kevo_status_name(fs));
            (void)fs;   /* the log is capped; a cut note still says ok false */
            ok = 0;
            break;
        }
        json_array_append_new(kernels, kernel_json(cr->entries[i], &fi));
    }
    o->result = json_pack("{s:b, s:s, s:o}", "ok", ok, "log", kevo_buf_str(&j->log),
                          "kernels", kernels);
    return o->result ? KEVO_OK : KEVO_ERR_NOMEM;
}

static enum kevo_status op_compile(struct worker *w, json_t *req, struct op_out *o)
{
    struct compile_job j;
    struct kevo_backend *b = NULL;
    enum kevo_status st;

    memset(&j, 0, sizeof j);
    kevo_buf_init(&j.log, WORKER_LOG_MAX);
    st = compile_parse(req, &j, o);
    if (!st)
        st = compile_params(req, &j, o);
    if (!st)
        st = worker_backend(w, o, &b);
    if (!st)
        st = compile_run(b, &j, o);
    compile_job_free(&j, b);
    return st;
}

/*
 * check: compile only, with the compiler of the file's language and no device (what
 * `kevo check` asks; a worker of any backend, "none" too, answers). Untrusted source is
 * compiled here, not in the controller, so a compiler that crashes on it takes down a
 * worker, never kevo. {"ok", "log"}; a compile error is data (ok false).
 */
static enum kevo_status op_check(struct worker *w, json_t *req, struct op_out *o)
{
    struct compile_job j;
    const char *arch = str_field(req, "arch", NULL);
    enum kevo_status st;

    (void)w;
    memset(&j, 0, sizeof j);
    kevo_buf_init(&j.log, WORKER_LOG_MAX);
    st = compile_parse(req, &j, o);
    if (!st)
        st = compile_params(req, &j, o);
    if (!st && j.unit->lang == KEVO_LANG_CUDA) {
        void *cubin = NULL;
        size_t n = 0;
        st = kevo_rtc_compile(&j.src.req, arch && *arch ? arch : "sm_90a", &cubin, &n, &j.log,
                              NULL);
        kevo_free(cubin);
    } else if (!st) {
        st = kevo_cpu_compile_check(&j.src.req, &j.log);
    }
    if (!st || st == KEVO_ERR_COMPILE) {
        o->result = json_pack("{s:b, s:s}", "ok", st == KEVO_OK, "log", kevo_buf_str(&j.log));
        st = o->result ? KEVO_OK : KEVO_ERR_NOMEM;
    } else if (!o->msg.len) {
        kevo_buf_say(&o->msg, "compile of %s failed: %s", j.unit ? j.unit->path : "?",
                     j.log.len ? kevo_buf_str(&j.log) : kevo_status_name(st));
    }
    compile_job_free(&j, NULL);
    return st;
}

/* ---- dispatch ---- */

typedef enum kevo_status (*op_fn)(struct worker *w, json_t *req, struct op_out *o);

static const struct {
    const char *name;
    op_fn fn;
} ops[] = {
    { "ping", op_ping },
    { "info", op_info },
    { "eval", op_eval },
    { "calibrate", op_calibrate },
    { "compile", op_compile },
    { "check", op_check },
};

/* {"id", "status", "message"?, "result"?, "exiting"?}; result is stolen. */
static json_t *reply_new(json_t *id, enum kevo_status st, const char *msg, json_t *result,
                         int exiting)
{
    json_t *r = json_object();

    if (!r) {
        json_decref(result);
        return NULL;
    }
    json_object_set(r, "id", id ? id : json_null());
    json_object_set_new(r, "status", json_string(kevo_status_name(st)));
    if (msg && *msg)
        json_object_set_new(r, "message", json_string(msg));
    if (result)
        json_object_set_new(r, "result", result);
    if (exiting)
        json_object_set_new(r, "exiting", json_true());   /* tells the pool to reap us */
    return r;
}

/* Run one request; *out_exit becomes an exit code when the process must end after it. */
static json_t *worker_dispatch(struct worker *w, json_t *req, int *out_exit)
{
    struct op_out o;
    json_t *id = json_object_get(req, "id");
    const char *op = json_string_value(json_object_get(req, "op"));
    enum kevo_status st = KEVO_ERR_INVALID;
    size_t i;
    json_t *r;

    memset(&o, 0, sizeof o);
    kevo_buf_init(&o.msg, WORKER_MSG_MAX);
    for (i = 0; op && i < sizeof ops / sizeof ops[0]; i++) {
        if (strcmp(op, ops[i].name) == 0)
            break;
    }
    if (!op)
        kevo_buf_say(&o.msg, "request has no \"op\" string");
    else if (i == sizeof ops / sizeof ops[0])
        kevo_buf_say(&o.msg, "unknown op '%s' (ping, info, eval, calibrate, compile, check)", op);
    else
        st = ops[i].fn(w, req, &o);
    if (st == KEVO_ERR_DEVICE || o.device_lost) {
        /* an expected exit: the reply says so ("exiting") and the controller reports the
         * verdict; on the shared stderr this line would only repeat it, out of order */
        KEVO_INFO("device fault (%s): exiting", o.msg.len ? kevo_buf_str(&o.msg) : "sticky");
        *out_exit = KEVO_WORKER_EXIT_DEVICE;
    }
    if (st) {
        json_decref(o.result);   /* a failed request carries no result */
        o.result = NULL;
    }
    r = reply_new(id, st, kevo_buf_str(&o.msg), o.result, *out_exit >= 0);
    kevo_buf_free(&o.msg);
    return r;
}

/* Send a reply; one that cannot be encoded (too big) becomes a short error reply. */
static enum kevo_status worker_send(struct worker *w, json_t *reply)
{
    enum kevo_status st = kevo_wire_send(w->fd_out, reply);
    json_t *small;

    if (st == KEVO_OK || st == KEVO_ERR_IO)
        return st;
    KEVO_WARN("reply could not be sent (%s); sending an error instead", kevo_status_name(st));
    small = reply_new(json_object_get(reply, "id"), st, "the reply could not be encoded "
                      "(larger than the wire limit, or not valid UTF-8)", NULL,
                      json_is_true(json_object_get(reply, "exiting")));
    if (!small)
        return KEVO_ERR_NOMEM;
    st = kevo_wire_send(w->fd_out, small);
    json_decref(small);
    return st;
}

/* Serve until the controller closes the request pipe (0) or something ends the process. */
static int worker_serve(struct worker *w)
{
    for (;;) {
        struct kevo_wire_result wr;
        json_t *req = NULL, *reply = NULL;
        int exit_code = -1;
        enum kevo_status st = kevo_wire_read(w->fd_in, NULL, &req, &wr);

        if (st == KEVO_ERR_IO && wr.eof)
            return 0;
        if (st == KEVO_ERR_PARSE && wr.in_sync) {
            KEVO_WARN("bad request: %s", wr.why);
            reply = reply_new(NULL, st, wr.why, NULL, 0);   /* keep serving */
        } else if (st) {
            KEVO_ERROR("request stream broken (%s%s%s): exiting", kevo_status_name(st),
                       wr.why[0] ? ": " : "", wr.why);
            return WORKER_EXIT_IO;
        } else {
            reply = worker_dispatch(w, req, &exit_code);
        }
        json_decref(req);
        st = reply ? worker_send(w, reply) : KEVO_ERR_NOMEM;
        json_decref(reply);
        if (st) {
            KEVO_ERROR("cannot send a reply (%s): exiting", kevo_status_name(st));
            return WORKER_EXIT_IO;
        }
        if (exit_code >= 0)
            return exit_code;
    }
}

int kevo_worker_main(int argc, char **argv)
{
    struct worker w;
    int rc;

    memset(&w, 0, sizeof w);
    kevo_log_set(worker_logger, NULL,
                 getenv("KEVO_WORKER_DEBUG") || getenv("KEVO_VERBOSE") ? KEVO_LOG_DEBUG
                                                                       : KEVO_LOG_WARN);
    if (parse_args(argc, argv, &w))
        return WORKER_EXIT_USAGE;
    if (worker_setup(&w))
        return WORKER_EXIT_USAGE;
    if (controller_gone(w.fd_in)) {
        KEVO_INFO("controller already gone: exiting");
        return 0;
    }
    worker_open_early(&w);
    KEVO_DEBUG("serving the %s backend, device %d", w.backend, w.device);
    rc = worker_serve(&w);
    /* After a device fault the context is poisoned; teardown could hang, exit does it. */
    if (w.b_open && rc != KEVO_WORKER_EXIT_DEVICE)
        kevo_backend_close(&w.b);
    return rc;
}

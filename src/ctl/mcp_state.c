/*
 * mcp_state - the session of `kevo mcp` (mcp_int.h): the arguments of a tool call, the
 * paths a call may name (its working directory's tree, the allowed directories, and for
 * reading the data directory; resolved with realpath, so no symlink or ".." leads out),
 * texts written to private files (a 0700 directory of its own, removed at the end), one
 * worker pool per backend kept between calls (started and calibrated once), and the
 * agent's trail in the archive.
 */
#include "ctl/mcp_int.h"

#include "base/fsutil.h"
#include "base/mem.h"
#include "core/sol.h"
#include "ctl/evalreq.h"
#include "ctl/run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEXT_MAX ((size_t)8 << 20)      /* a call's text content, at most */
#define CALIBRATE_DEADLINE_S 600.0

/* ---- the session ---- */

/* dir resolved into out (PATH_MAX); -1 with *out_msg when it cannot be. */
static int resolve_dir(const char *dir, char *out, char **out_msg)
{
    if (!realpath(dir, out)) {
        *out_msg = kevo_strdupf("%s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

enum kevo_status kevo_mcp_state_open(const struct kevo_mcp_opts *o, struct kevo_mcp **out,
                                     char **out_msg)
{
    struct kevo_mcp *m = kevo_calloc(1, sizeof *m);
    enum kevo_status st = KEVO_OK;

    *out = NULL;
    *out_msg = NULL;
    if (!m)
        return KEVO_ERR_NOMEM;
    m->o = o;
    m->refs = json_object();
    m->allow = kevo_calloc((size_t)o->n_allow + 1, sizeof *m->allow);
    if (!m->refs || !m->allow)
        st = KEVO_ERR_NOMEM;
    if (!st && resolve_dir(".", m->root, out_msg))
        st = KEVO_ERR_IO;
    for (int i = 0; !st && i < o->n_allow; i++) {
        char p[PATH_MAX];
        if (resolve_dir(o->allow[i], p, out_msg))
            st = KEVO_ERR_IO;
        else if (!(m->allow[m->n_allow++] = kevo_strdup(p)))
            st = KEVO_ERR_NOMEM;
    }
    if (!st && !realpath(kevo_data_dir(NULL), m->data))
        m->data[0] = '\0';   /* no data directory: nothing to read there */
    if (!st && o->archive)
        snprintf(m->archive, sizeof m->archive, "%s", o->archive);
    else if (!st && kevo_run_default_archive(m->archive, sizeof m->archive) != KEVO_OK) {
        *out_msg = kevo_strdup("no archive path: set KEVO_ARCHIVE or HOME, or give --archive");
        st = KEVO_ERR_INVALID;
    }
    if (st) {
        kevo_mcp_state_close(m);
        return st;
    }
    *out = m;
    return KEVO_OK;
}

/* Remove the private directory and what it holds (files only: it has no folders). */
static void remove_private(struct kevo_mcp *m)
{
    DIR *d = m->tmp[0] ? opendir(m->tmp) : NULL;
    struct dirent *e;

    while (d && (e = readdir(d)) != NULL) {
        char p[PATH_MAX + 256];
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", m->tmp, e->d_name);
        (void)unlink(p);
    }
    if (d)
        closedir(d);
    if (m->tmp[0])
        (void)rmdir(m->tmp);
}

void kevo_mcp_state_close(struct kevo_mcp *m)
{
    if (!m)
        return;
    kevo_trail_free(m->trail);   /* the session's runs recorded stopped */
    for (int b = 0; b < MCP_N_BACKENDS; b++)
        kevo_mcp_pool_close(m, (enum mcp_backend)b);
    remove_private(m);
    for (int i = 0; i < m->n_allow; i++)
        kevo_free(m->allow[i]);
    kevo_free(m->allow);
    json_decref(m->refs);
    kevo_free(m);
}

/* ---- a call's outcome ---- */

void kevo_mcp_say(struct mcp_call *c, const char *fmt, ...)
{
    va_list ap;

    if (!c->text.max)
        kevo_buf_init(&c->text, TEXT_MAX);
    va_start(ap, fmt);
    if (kevo_buf_vaddf(&c->text, fmt, ap) != KEVO_OK) {
        /* past the cap: the text keeps what fitted */
    }
    va_end(ap);
}

int kevo_mcp_fail(struct mcp_call *c, const char *fmt, ...)
{
    va_list ap;
    char *s;

    va_start(ap, fmt);
    s = kevo_vstrdupf(fmt, ap);
    va_end(ap);
    if (!c->text.max)
        kevo_buf_init(&c->text, TEXT_MAX);
    kevo_buf_reset(&c->text);
    kevo_mcp_say(c, "%s", s ? s : "out of memory");
    kevo_free(s);
    json_decref(c->out);
    c->out = NULL;
    c->is_error = 1;
    return -1;
}

int kevo_mcp_bad(struct mcp_call *c, const char *fmt, ...)
{
    va_list ap;

    if (c->rpc_code)   /* the first complaint names the first problem */
        return -1;
    va_start(ap, fmt);
    c->rpc_msg = kevo_vstrdupf(fmt, ap);
    va_end(ap);
    c->rpc_code = -32602;
    return -1;
}

/* ---- arguments ---- */

int kevo_mcp_args_known(struct mcp_call *c, const char *const *names)
{
    const char *k;
    json_t *v;

    json_object_foreach(c->args, k, v) {
        int known = 0;
        for (int i = 0; names[i] && !known; i++)
            known = !strcmp(k, names[i]);
        if (!known)
            return kevo_mcp_bad(c, "unknown argument '%s'", k);
    }
    return 0;
}

int kevo_mcp_arg_str(struct mcp_call *c, const char *key, const char **out)
{
    json_t *v = json_object_get(c->args, key);

    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return kevo_mcp_bad(c, "argument '%s' must be a string", key);
    *out = json_string_value(v);
    return 1;
}

int kevo_mcp_arg_int(struct mcp_call *c, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    json_t *v = json_object_get(c->args, key);
    double d = json_number_value(v);

    if (!v || json_is_null(v))
        return 0;
    /* a client may send 3.0 for 3: a whole number is an integer */
    if (json_is_real(v) && isfinite(d) && d == floor(d) && fabs(d) < 9e15)
        *out = (int64_t)d;
    else if (json_is_integer(v))
        *out = json_integer_value(v);
    else
        return kevo_mcp_bad(c, "argument '%s' must be an integer", key);
    if (*out < lo || *out > hi)
        return kevo_mcp_bad(c, "argument '%s' = %lld: out of range (%lld to %lld)", key,
                            (long long)*out, (long long)lo, (long long)hi);
    return 1;
}

int kevo_mcp_arg_num(struct mcp_call *c, const char *key, double lo, double hi, double *out)
{
    json_t *v = json_object_get(c->args, key);

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v))
        return kevo_mcp_bad(c, "argument '%s' must be a number", key);
    *out = json_number_value(v);
    if (!isfinite(*out) || *out < lo || *out > hi)
        return kevo_mcp_bad(c, "argument '%s' = %g: out of range (%g to %g)", key, *out, lo, hi);
    return 1;
}

int kevo_mcp_arg_bool(struct mcp_call *c, const char *key, int *out)
{
    json_t *v = json_object_get(c->args, key);

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return kevo_mcp_bad(c, "argument '%s' must be true or false", key);
    *out = json_is_true(v);
    return 1;
}

/* ---- paths ---- */

/* Is resolved path p dir itself or inside it? */
static int inside(const char *p, const char *dir)
{
    size_t n = strlen(dir);

    if (!n)
        return 0;
    if (n == 1 && dir[0] == '/')
        return 1;
    return !strncmp(p, dir, n) && (p[n] == '/' || p[n] == '\0');
}

/* -1 with errno e. */
static int fail_errno(int e)
{
    errno = e;
    return -1;
}

/*
 * For writing: path whose end does not exist yet resolved through its deepest existing
 * ancestor, with the rest appended (no "." or ".." in it, which realpath would have
 * judged). 0, or -1 with errno.
 */
static int resolve_new(const char *path, char *out)
{
    char head[PATH_MAX], res[PATH_MAX];
    size_t cut = strlen(path);           /* head is path[0, cut) */
    const char *rest;

    if (cut >= sizeof head)
        return fail_errno(ENAMETOOLONG);
    memcpy(head, path, cut + 1);
    while (!realpath(head, res)) {
        char *slash = strrchr(head, '/');
        if (errno != ENOENT || !strcmp(head, "."))
            return -1;
        if (!slash) {                    /* a relative path none of whose parts exists */
            snprintf(head, sizeof head, ".");
            cut = 0;
        } else if (slash == head) {      /* "/x": the root */
            head[1] = '\0';
            cut = 1;
        } else {
            *slash = '\0';
            cut = (size_t)(slash - head);
        }
    }
    rest = path + cut;
    while (*rest == '/')
        rest++;
    for (const char *p = rest; *p;) {    /* each part of the rest: no . or .. */
        size_t n = strcspn(p, "/");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return fail_errno(EINVAL);
        p += n;
        p += *p == '/';
    }
    int w = *rest ? snprintf(out, PATH_MAX, "%s%s%s", res, strcmp(res, "/") ? "/" : "", rest)
                  : snprintf(out, PATH_MAX, "%s", res);
    return w >= PATH_MAX ? fail_errno(ENAMETOOLONG) : 0;
}

int kevo_mcp_path(struct kevo_mcp *m, struct mcp_call *c, const char *path, enum mcp_access a,
                  char *out)
{
    int ok = 0;

    if (!*path)
        return kevo_mcp_fail(c, "refused: an empty path");
    if (a == MCP_READ ? !realpath(path, out) : resolve_new(path, out) != 0)
        return kevo_mcp_fail(c, "%s: %s", path, strerror(errno));
    ok = inside(out, m->root) || (a == MCP_READ && inside(out, m->data));
    for (int i = 0; i < m->n_allow && !ok; i++)
        ok = inside(out, m->allow[i]);
    if (!ok) {
        struct kevo_buf b;
        kevo_buf_init(&b, 1 << 16);
        kevo_buf_say(&b, "%s", m->root);
        for (int i = 0; i < m->n_allow; i++)
            kevo_buf_say(&b, ", %s", m->allow[i]);
        if (a == MCP_READ && m->data[0] && !inside(m->data, m->root))
            kevo_buf_say(&b, ", %s (reading)", m->data);
        kevo_mcp_fail(c, "refused: %s is outside the directories this server may %s (%s; "
                      "`kevo mcp --allow DIR` adds one)", path,
                      a == MCP_READ ? "read" : "write", kevo_buf_str(&b));
        kevo_buf_free(&b);
        return -1;
    }
    return 0;
}

int kevo_mcp_private_file(struct kevo_mcp *m, struct mcp_call *c, const char *stem,
                          const char *ext, const char *text, size_t len, char *out)
{
    if (!m->tmp[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(m->tmp, sizeof m->tmp, "%s/kevo-mcp-XXXXXX", t && *t == '/' ? t : "/tmp");
        if (!mkdtemp(m->tmp)) {   /* mode 0700: the session's alone */
            int e = errno;
            m->tmp[0] = '\0';
            return kevo_mcp_fail(c, "cannot make a private directory: %s", strerror(e));
        }
    }
    int w = snprintf(out, PATH_MAX, "%s/%s-%d.%s", m->tmp, stem, ++m->n_tmp, ext);
    if (w < 0 || w >= PATH_MAX)
        return kevo_mcp_fail(c, "%s: the private directory's path is too long", m->tmp);
    int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int bad = fd < 0 || kevo_fs_write_all(fd, text, len) != 0;
    if (fd >= 0 && close(fd) != 0)
        bad = 1;
    return bad ? kevo_mcp_fail(c, "%s: cannot write: %s", out, strerror(errno)) : 0;
}

/* A task's language from its directives: `launch` lines are CUDA, `call` lines C. */
static const char *task_ext(const char *text)
{
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        const char *e = strchr(p, '\n'), *kw;
        size_t n;
        if (kevo_task_directive(p, e ? (size_t)(e - p) : strlen(p), &kw, &n)) {
            if (n == 6 && !strncmp(kw, "launch", 6))
                return "cu";
            if (n == 4 && !strncmp(kw, "call", 4))
                return "c";
        }
    }
    return NULL;
}

int kevo_mcp_input(struct kevo_mcp *m, struct mcp_call *c, const char *key, const char *ext,
                   int required, char *out, char **text, size_t *len)
{
    char tkey[64], *msg = NULL;
    const char *path = NULL, *t = NULL;
    int hp, ht;

    *text = NULL;
    *len = 0;
    snprintf(tkey, sizeof tkey, "%s_text", key);
    hp = kevo_mcp_arg_str(c, key, &path);
    ht = kevo_mcp_arg_str(c, tkey, &t);
    if (hp < 0 || ht < 0)
        return -1;
    if (hp && ht)
        return kevo_mcp_bad(c, "give '%s' or '%s', not both", key, tkey);
    if (!hp && !ht)
        return required ? kevo_mcp_bad(c, "'%s' (a path) or '%s' is required", key, tkey) : 0;
    if (ht) {
        ext = ext ? ext : task_ext(t);
        if (!ext)
            return kevo_mcp_fail(c, "%s: no `// kevo launch` or `// kevo call` line says whether "
                                 "it is CUDA or C", tkey);
        if (kevo_mcp_private_file(m, c, key, ext, t, strlen(t), out))
            return -1;
    } else if (kevo_mcp_path(m, c, path, MCP_READ, out)) {
        return -1;
    }
    if (kevo_fs_read_file(out, KEVO_TASK_MAX_FILE, text, len, &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "%s", msg ? msg : out);
        kevo_free(msg);
        return -1;
    }
    return 1;
}

/* ---- workers ---- */

const char *kevo_mcp_backend_name(enum mcp_backend b)
{
    return b == MCP_CUDA ? "cuda" : "cpu";
}

int kevo_mcp_backend(struct kevo_mcp *m, struct mcp_call *c, const struct kevo_task *task,
                     enum mcp_backend *out)
{
    const char *b = NULL;
    int r = kevo_mcp_arg_str(c, "backend", &b);

    (void)m;
    *out = task->lang == KEVO_LANG_C ? MCP_CPU : MCP_CUDA;
    if (r < 0)
        return -1;
    if (r && strcmp(b, "cpu") != 0 && strcmp(b, "cuda") != 0)
        return kevo_mcp_bad(c, "argument 'backend' is \"cpu\" or \"cuda\"");
    if (r)
        *out = !strcmp(b, "cpu") ? MCP_CPU : MCP_CUDA;
    if (*out == MCP_CPU && task->lang == KEVO_LANG_CUDA)
        return kevo_mcp_fail(c, "%s: a CUDA task needs the CUDA backend", task->path);
    return 0;
}

void kevo_mcp_pool_close(struct kevo_mcp *m, enum mcp_backend b)
{
    kevo_pool_free(m->be[b].pool);
    json_decref(m->be[b].calib);
    json_decref(m->be[b].sol);
    m->be[b].pool = NULL;
    m->be[b].calib = m->be[b].sol = NULL;
}

enum kevo_status kevo_mcp_backend_open(struct kevo_mcp *m, enum mcp_backend b, char **out_msg)
{
    const char *name = kevo_mcp_backend_name(b);
    struct kevo_pool_opts po = { 0 };
    struct kevo_sol_figures f;
    char *msg = NULL;
    int dev = m->o->device;
    enum kevo_status st;

    *out_msg = NULL;
    if (m->be[b].pool)
        return KEVO_OK;
    po.backend = name;
    po.n_devices = 1;
    po.devices = &dev;
    po.exe = getenv("KEVO_WORKER_EXE");
    po.start_timeout_s = 60;
    st = kevo_pool_open(&po, &m->be[b].pool, &msg);
    if (!st)
        st = kevo_evalreq_calibrate(m->be[b].pool, 0, name, 0, CALIBRATE_DEADLINE_S,
                                    &m->be[b].calib, &msg);
    if (!st) {
        kevo_sol_figures_from_json(m->be[b].calib, &f);
        m->be[b].sol = kevo_sol_figures_to_json(&f);
        st = m->be[b].sol ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    if (st) {
        *out_msg = kevo_strdupf("cannot start a %s worker: %s", name,
                                msg ? msg : kevo_status_name(st));
        kevo_free(msg);
        kevo_mcp_pool_close(m, b);
    }
    return st;
}

int kevo_mcp_pool(struct kevo_mcp *m, struct mcp_call *c, enum mcp_backend b,
                  struct kevo_pool **pool, json_t **sol, json_t **calib)
{
    char *msg = NULL;

    if (kevo_mcp_backend_open(m, b, &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "%s", msg ? msg : "cannot start a worker");
        kevo_free(msg);
        return -1;
    }
    *pool = m->be[b].pool;
    *sol = m->be[b].sol;
    if (calib)
        *calib = m->be[b].calib;
    return 0;
}

int kevo_mcp_trail(struct kevo_mcp *m, struct mcp_call *c, struct kevo_trail **out)
{
    char *msg = NULL;

    if (!m->trail && kevo_trail_open(m->archive, m->client[0] ? m->client : NULL, &m->trail,
                                     &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "the archive: %s", msg ? msg : m->archive);
        kevo_free(msg);
        return -1;
    }
    *out = m->trail;
    return 0;
}

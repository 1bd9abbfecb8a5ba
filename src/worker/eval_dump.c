/*
 * eval_dump - the dump facility (eval_int.h): when the reference evaluates itself with a
 * dump_dir in the request, the inputs and outputs of trial 0 of each workload are written
 * for other tools (PyTorch checks, debugging) to read:
 *
 *   DIR/w<index>/<tensor>.bin   raw little-endian element bytes, outputs unsealed
 *   DIR/w<index>/manifest.json  {"task", "workload", "holdout", "sizes", "tensors":
 *                                [{"name", "role", "dtype", "shape", "file"}], "scalars"}
 *
 * The manifest is written last, so a directory with a manifest is complete. Any failure
 * (a missing parent that cannot be made, a full disk) is KEVO_ERR_IO with e->msg naming
 * the path; the evaluation then stops with that error.
 */
#include "worker/eval_int.h"
#include "base/fsutil.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static enum kevo_status dump_err(struct kevo_ev *e, const char *what, const char *path, int err)
{
    return kevo_eval_error(e, KEVO_ERR_IO, "dump: cannot %s %s: %s", what, path,
                           strerror(err ? err : EIO));
}

/* path = DIR/w<w>[/name]; KEVO_ERR_IO when it does not fit. */
static enum kevo_status dump_path(struct kevo_ev *e, const struct kevo_wl *x, const char *name,
                                  char *path, size_t n)
{
    int len = name ? snprintf(path, n, "%s/w%d/%s", e->req->dump_dir, x->w, name)
                   : snprintf(path, n, "%s/w%d", e->req->dump_dir, x->w);
    if (len < 0 || (size_t)len >= n)
        return kevo_eval_error(e, KEVO_ERR_IO, "dump: path too long under %s",
                               e->req->dump_dir);
    return KEVO_OK;
}

/* Write n bytes to path (created or truncated). close() is checked too: a full disk may
 * only show there. */
static enum kevo_status write_file(struct kevo_ev *e, const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = 0;

    if (fd < 0)
        return dump_err(e, "create", path, errno);
    if (kevo_fs_write_all(fd, p, n) != 0)
        err = errno ? errno : EIO;
    if (close(fd) != 0 && !err)
        err = errno;
    return err ? dump_err(e, "write", path, err) : KEVO_OK;
}

/* Host memory for a download: the backend's fast (pinned) kind when it has some. */
static void *host_alloc(struct kevo_ev *e, size_t bytes)
{
    const struct kevo_backend_ops *o = e->b->ops;
    void *p = NULL;
    if (o->host_alloc && o->host_free && o->host_alloc(e->b->ctx, bytes, &p) == KEVO_OK)
        return p;
    return kevo_malloc(bytes ? bytes : 1);
}

static void host_free(struct kevo_ev *e, void *p)
{
    const struct kevo_backend_ops *o = e->b->ops;
    if (p && !(o->host_free && o->host_free(e->b->ctx, p)))
        kevo_free(p);
}

/* Tensor k of side s into DIR/w<index>/<name>.bin; outputs are unsealed first. */
static enum kevo_status dump_tensor(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s,
                                    int k)
{
    const struct kevo_tinfo *t = &x->t[k];
    char path[PATH_MAX], name[300];
    void *buf = host_alloc(e, t->bytes);
    enum kevo_status st = buf ? KEVO_OK : KEVO_ERR_NOMEM;

    snprintf(name, sizeof name, "%s.bin", t->decl->name);
    if (!st)
        st = dump_path(e, x, name, path, sizeof path);
    if (!st && t->bytes)
        st = e->b->ops->download(e->b->ctx, buf, s->buf[k].data, t->bytes);
    if (!st && is_out(t))
        kevo_verify_seal(t->decl->dtype, buf, t->numel, x->ref_key[k]);   /* unseal */
    if (!st)
        st = write_file(e, path, buf, t->bytes);
    host_free(e, buf);
    return st;
}

/* The manifest's "tensors" entry of tensor k. */
static json_t *tensor_json(const struct kevo_wl *x, int k)
{
    const struct kevo_tinfo *t = &x->t[k];
    char file[300];

    snprintf(file, sizeof file, "%s.bin", t->decl->name);
    return json_pack("{s:s, s:s, s:s, s:o, s:s}", "name", t->decl->name, "role",
                     is_in(t) ? "input" : "output", "dtype", kevo_dtype_name(t->decl->dtype),
                     "shape", kevo_eval_jdims(t->dims, t->decl->ndim), "file", file);
}

/* {name: value} of the task's scalars (integers exact, floats as numbers). */
static json_t *scalars_json(const struct kevo_task *task)
{
    json_t *o = json_object();
    for (int i = 0; o && i < task->n_scalars; i++) {
        const struct kevo_scalar_decl *sc = &task->scalars[i];
        json_object_set_new(o, sc->name, kevo_dtype_is_float(sc->dtype)
                                             ? kevo_eval_jnum(sc->value)
                                             : json_integer(sc->ivalue));
    }
    return o;
}

static enum kevo_status dump_manifest(struct kevo_ev *e, struct kevo_wl *x)
{
    char path[PATH_MAX];
    char *text = NULL;
    json_t *tensors = json_array();
    json_t *m = NULL;
    enum kevo_status st = KEVO_ERR_NOMEM;

    for (int k = 0; tensors && k < x->n_task; k++) {
        if (is_in(&x->t[k]) || is_out(&x->t[k]))
            json_array_append_new(tensors, tensor_json(x, k));
    }
    m = json_pack("{s:s, s:i, s:b, s:o, s:O, s:o}", "task", e->task->name ? e->task->name : "",
                  "workload", x->w, "holdout", e->task->workloads[x->w].holdout != 0, "sizes",
                  kevo_eval_wl_sizes(e, x), "tensors", tensors, "scalars",
                  scalars_json(e->task));
    text = m ? json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (!text)
        goto out;
    st = dump_path(e, x, "manifest.json", path, sizeof path);
    if (!st)
        st = write_file(e, path, text, strlen(text));
out:
    kevo_free(text);   /* jansson allocates with malloc, which kevo_free releases */
    json_decref(m);
    json_decref(tensors);
    return st;
}

enum kevo_status kevo_eval_dump(struct kevo_ev *e, struct kevo_wl *x, struct kevo_side *s)
{
    char dir[PATH_MAX];
    enum kevo_status st = dump_path(e, x, NULL, dir, sizeof dir);

    if (!st && kevo_fs_mkdirs(dir, 0755) != 0)
        st = errno == ENOMEM ? KEVO_ERR_NOMEM : dump_err(e, "create directory", dir, errno);
    for (int k = 0; k < x->n_task && !st; k++) {
        if (is_in(&x->t[k]) || is_out(&x->t[k]))
            st = dump_tensor(e, x, s, k);
    }
    if (!st)
        st = dump_manifest(e, x);
    return st;
}

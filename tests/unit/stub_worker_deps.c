/*
 * stub_worker_deps - stand-ins for the modules the worker calls (task, eval, sol, backend),
 * so that worker.c and pool.c can be built and tested before those modules exist. Only for
 * the worker helper's own builds (SRCS=... src/../tests/unit/stub_worker_deps.c); never
 * part of libkevo. Every stub refuses with KEVO_ERR_UNSUPPORTED.
 */
#include "backend.h"
#include "eval.h"
#include "sol.h"
#include "task.h"

#include <string.h>

enum kevo_status kevo_task_parse(const char *path, const char *text, size_t len,
                                 struct kevo_task **out, char **out_msg)
{
    *out = NULL;
    *out_msg = NULL;
    return KEVO_ERR_UNSUPPORTED;
}

enum kevo_status kevo_candidate_parse(const struct kevo_task *task, const char *path,
                                      const char *text, size_t len, struct kevo_task **out,
                                      char **out_msg)
{
    *out = NULL;
    *out_msg = NULL;
    return KEVO_ERR_UNSUPPORTED;
}

void kevo_task_free(struct kevo_task *t)
{
    (void)t;
}

enum kevo_status kevo_eval_req_from_json(json_t *j, struct kevo_eval_req *out, char **out_msg)
{
    memset(out, 0, sizeof *out);
    *out_msg = NULL;
    return KEVO_ERR_UNSUPPORTED;
}

enum kevo_status kevo_eval_run(struct kevo_backend *b, const struct kevo_eval_req *req,
                               json_t **out_result)
{
    *out_result = NULL;
    return KEVO_ERR_UNSUPPORTED;
}

enum kevo_status kevo_sol_calibrate(struct kevo_backend *b, int force, json_t **out,
                                    struct kevo_buf *err)
{
    *out = NULL;
    return KEVO_ERR_UNSUPPORTED;
}

enum kevo_status kevo_backend_open_cpu(struct kevo_backend *out, struct kevo_buf *err)
{
    memset(out, 0, sizeof *out);
    return KEVO_ERR_UNSUPPORTED;
}

enum kevo_status kevo_backend_open_cuda(int device, struct kevo_backend *out,
                                        struct kevo_buf *err)
{
    memset(out, 0, sizeof *out);
    return KEVO_ERR_UNSUPPORTED;
}

void kevo_backend_close(struct kevo_backend *b)
{
    (void)b;
}

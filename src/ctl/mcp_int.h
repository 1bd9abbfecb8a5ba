/*
 * mcp_int - what the files of `kevo mcp` share (docs/agents.md): mcp.c speaks the protocol
 * (JSON-RPC 2.0 over stdio, the Model Context Protocol's methods, resources),
 * mcp_schema.c lists the tools (names, descriptions, input and output schemas, handlers),
 * mcp_tools.c and mcp_runs.c are the tools, and mcp_state.c the session they run in: the
 * arguments of a call, paths confined to the allowed directories, texts written to private
 * files, one worker pool per backend (the controller never runs a candidate itself), the
 * agent's trail in the archive. Private to the server; the contract is kevo.h's
 * kevo_mcp_serve. One thread: a call runs to its end before the next is read.
 */
#ifndef KEVO_MCP_INT_H
#define KEVO_MCP_INT_H

#include "kevo.h"
#include "base/buf.h"
#include "ctl/pool.h"
#include "ctl/trail.h"
#include "core/task.h"

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#define MCP_MAX_BG 16                  /* background runs of one session */
#define MCP_DEFAULT_DEADLINE_S 120.0   /* of one evaluation request, as kevo eval's */

enum mcp_backend { MCP_CPU = 0, MCP_CUDA, MCP_N_BACKENDS };

/* A `kevo run` the session started (mcp_runs.c). */
struct mcp_bg {
    pid_t pid;
    int64_t run;                       /* its archive run; 0 until its log names it */
    char log[PATH_MAX];                /* its stdout and stderr (its --json events) */
    double started;
    int exited, status;                /* waitpid's status once exited */
    int stop_sent;
};

struct kevo_mcp {
    const struct kevo_mcp_opts *o;
    char root[PATH_MAX];               /* the working directory, resolved */
    char **allow;                      /* the allowed directories, resolved (n_allow) */
    int n_allow;
    char data[PATH_MAX];               /* the data directory, resolved ("" when missing):
                                          read only */
    char tmp[PATH_MAX];                /* private files (0700); "" until the first */
    int n_tmp;
    char archive[PATH_MAX];
    char client[160];                  /* "NAME VERSION" of the client's initialize */
    struct kevo_trail *trail;          /* opened on first use */
    struct {
        struct kevo_pool *pool;        /* opened and calibrated on first use */
        json_t *calib, *sol;
    } be[MCP_N_BACKENDS];
    json_t *refs;                      /* "BACKEND:TASKHASH" -> the reference's verdict
                                          object {"verdict", "message"} */
    struct mcp_bg bg[MCP_MAX_BG];
    int n_bg;
};

/* One call of a tool: a handler fills out (+ text) or says why it failed. */
struct mcp_call {
    json_t *args;                      /* borrowed: the arguments (an object) */
    json_t *out;                       /* the structured result (owned); NULL on failure */
    struct kevo_buf text;              /* the text content for a person or a model */
    int is_error;                      /* the tool failed: text says why (isError) */
    int rpc_code;                      /* or the request was malformed: a JSON-RPC error */
    char *rpc_msg;                     /*   (-32602 and this message) */
};

typedef void (*mcp_tool_fn)(struct kevo_mcp *m, struct mcp_call *c);

/* ---- the session (mcp_state.c) ---- */

/* Resolve the working and allowed directories; *out_msg names one that cannot be. */
KEVO_NODISCARD enum kevo_status kevo_mcp_state_open(const struct kevo_mcp_opts *o,
                                                    struct kevo_mcp **out, char **out_msg);
/* End the session: the trail's runs stopped, pools closed, private files removed.
 * Background runs are mcp_runs.c's to stop first. NULL: no-op. */
void kevo_mcp_state_close(struct kevo_mcp *m);

/* ---- a call's outcome ---- */

/* The tool failed (isError, text says why). Returns -1, for `return mcp_fail(...)`. */
int kevo_mcp_fail(struct mcp_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The arguments are malformed: JSON-RPC error -32602. Returns -1. */
int kevo_mcp_bad(struct mcp_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Text content, appended (cut at its cap). */
void kevo_mcp_say(struct mcp_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- arguments: 1 given, 0 absent, -1 malformed (then kevo_mcp_bad was called) ---- */
int kevo_mcp_arg_str(struct mcp_call *c, const char *key, const char **out);
int kevo_mcp_arg_int(struct mcp_call *c, const char *key, int64_t lo, int64_t hi, int64_t *out);
int kevo_mcp_arg_num(struct mcp_call *c, const char *key, double lo, double hi, double *out);
int kevo_mcp_arg_bool(struct mcp_call *c, const char *key, int *out);
/* Is every argument one of the NULL-terminated names? Else kevo_mcp_bad naming it. */
int kevo_mcp_args_known(struct mcp_call *c, const char *const *names);

/* ---- files ---- */

enum mcp_access { MCP_READ = 0, MCP_WRITE };
/*
 * path resolved (realpath; for MCP_WRITE the part that does not exist yet appended, without
 * "." or "..") into out (PATH_MAX) when it lies in the working directory's tree or an
 * allowed directory (reading: the data directory too). Else kevo_mcp_fail "refused: ..."
 * and -1. 0 when allowed.
 */
int kevo_mcp_path(struct kevo_mcp *m, struct mcp_call *c, const char *path, enum mcp_access a,
                  char *out);
/*
 * An input file named by argument `key` (a path) or `key`_text (its text, written to a
 * private file NAME.ext, ext "cu" or "c"; for a task, NULL: from its directives). Its
 * resolved path into out (PATH_MAX); *text (kevo_free) its contents. 1 given, 0 neither
 * (fine unless required), -1 failed (the call says why).
 */
int kevo_mcp_input(struct kevo_mcp *m, struct mcp_call *c, const char *key, const char *ext,
                   int required, char *out, char **text, size_t *len);
/* text into a new private file STEM-N.ext; its path into out (PATH_MAX). 0 or -1. */
int kevo_mcp_private_file(struct kevo_mcp *m, struct mcp_call *c, const char *stem,
                          const char *ext, const char *text, size_t len, char *out);

/* ---- workers and the archive ---- */

/* The backend a task is evaluated on: argument "backend", else the task's language. -1
 * after saying why (a CUDA task on the CPU). */
int kevo_mcp_backend(struct kevo_mcp *m, struct mcp_call *c, const struct kevo_task *task,
                     enum mcp_backend *out);
const char *kevo_mcp_backend_name(enum mcp_backend b);
/* Start the backend's pool and calibrate its device, unless it runs already; *out_msg
 * (kevo_free) says why it cannot (no GPU, no worker). m->be[b] holds them. */
KEVO_NODISCARD enum kevo_status kevo_mcp_backend_open(struct kevo_mcp *m, enum mcp_backend b,
                                                      char **out_msg);
/* The backend's pool, started and calibrated on first use; *sol (borrowed) the request's
 * speed-of-light figures, *calib (borrowed, may be NULL) the calibration. 0 or -1. */
int kevo_mcp_pool(struct kevo_mcp *m, struct mcp_call *c, enum mcp_backend b,
                  struct kevo_pool **pool, json_t **sol, json_t **calib);
/* Close the backend's pool (the device to a profiler alone); reopened on next use. */
void kevo_mcp_pool_close(struct kevo_mcp *m, enum mcp_backend b);
/* The trail, opened on first use. 0 or -1. */
int kevo_mcp_trail(struct kevo_mcp *m, struct mcp_call *c, struct kevo_trail **out);

/* ---- the tools (mcp_tools.c, mcp_runs.c) ---- */

void kevo_mcp_tool_check(struct kevo_mcp *m, struct mcp_call *c);
void kevo_mcp_tool_eval(struct kevo_mcp *m, struct mcp_call *c);
void kevo_mcp_tool_prompt(struct kevo_mcp *m, struct mcp_call *c);
void kevo_mcp_tool_runs(struct kevo_mcp *m, struct mcp_call *c);
void kevo_mcp_tool_show(struct kevo_mcp *m, struct mcp_call *c);
void kevo_mcp_tool_export(struct kevo_mcp *m, struct mcp_call *c);
void kevo_mcp_tool_run_start(struct kevo_mcp *m, struct mcp_call *c);
void kevo_mcp_tool_run_status(struct kevo_mcp *m, struct mcp_call *c);
void kevo_mcp_tool_run_stop(struct kevo_mcp *m, struct mcp_call *c);
/* Reap background runs that ended (between calls). */
void kevo_mcp_runs_reap(struct kevo_mcp *m);
/* The end of the session: SIGTERM to every background run still going, then wait for
 * them (a run stops cleanly and is resumable); SIGKILL past the grace seconds. */
void kevo_mcp_runs_stop_all(struct kevo_mcp *m, double grace_s);

/* ---- the tools' table (mcp_schema.c) ---- */

struct mcp_tool {
    const char *name, *title, *description;
    json_t *(*input)(void);            /* the inputSchema (new reference) */
    json_t *(*output)(void);           /* the outputSchema (new reference) */
    mcp_tool_fn fn;
    int read_only;                     /* annotations: changes nothing */
};
/* The tool named name, or NULL. */
const struct mcp_tool *kevo_mcp_tool_find(const char *name);
/* The "tools" array of MCP's tools list (new reference). */
json_t *kevo_mcp_tools_json(void);

#endif

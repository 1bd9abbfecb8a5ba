/*
 * mcp - `kevo mcp` (kevo.h: kevo_mcp_serve; docs/agents.md): a Model Context Protocol
 * server on two file descriptors, for coding agents (Claude Code, Codex CLI, Cursor, ...).
 *
 * Transport: stdio as MCP defines it: JSON-RPC 2.0 messages, one per line (UTF-8, no
 * embedded newline), requests answered in order, one at a time. Protocol versions
 * 2025-06-18 and 2025-11-25 (the client's when it asks for one of them). Methods:
 * initialize, ping, the tools' list and call (results with structuredContent conforming to
 * each tool's outputSchema, and the same as text), resources/list, resources/read,
 * resources/templates/list; notifications are read and need no answer.
 *
 * Robustness: whatever arrives, the answer is a JSON-RPC message or nothing (a
 * notification): a line that is not JSON is -32700, one that is not a request -32600
 * (batches too: MCP 2025-06-18 has none), an unknown method -32601, bad params or tool
 * arguments -32602, and the server goes on reading. A line past MAX_LINE is refused whole.
 * Only this file writes to fd_out, and only protocol messages.
 */
#include "ctl/mcp_int.h"

#include "base/fdio.h"
#include "base/fsutil.h"
#include "base/mem.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_LINE ((size_t)64 << 20)   /* one message, at most (a candidate's text in it) */
#define TICK_MS 500                   /* stop flag and background runs checked this often */
#define STOP_GRACE_S 30.0             /* for background runs to record themselves at the end */
#define DOC_MAX ((size_t)4 << 20)     /* a resource file, at most */

#define RPC_PARSE (-32700)
#define RPC_INVALID (-32600)
#define RPC_METHOD (-32601)
#define RPC_PARAMS (-32602)
#define RPC_INTERNAL (-32603)
#define RPC_NO_RESOURCE (-32002)

/* Protocol versions this server speaks, the latest first. */
static const char *const versions[] = { "2025-11-25", "2025-06-18" };

struct srv {
    struct kevo_mcp *m;
    int out;
    int broken;                       /* fd_out is gone: stop */
};

/* ---- messages ---- */

/* Invalid UTF-8 bytes of s (a file's text in a message) replaced by '?', in place: a JSON
 * string must be UTF-8 (jansson refuses it otherwise). */
static void utf8_clean(char *s)
{
    unsigned char *p = (unsigned char *)s;

    while (*p) {
        int n = *p < 0x80 ? 0 : (*p >> 5) == 6 ? 1 : (*p >> 4) == 14 ? 2 : (*p >> 3) == 30 ? 3 : -1;
        int ok = n >= 0;
        for (int i = 1; ok && i <= n; i++)
            ok = (p[i] & 0xC0) == 0x80;
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n + 1;
    }
}

static void send_msg(struct srv *s, json_t *msg)
{
    char *t = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    size_t n;

    if (!t)
        return;   /* out of memory: the client's deadline is all it gets */
    n = strlen(t);
    t[n] = '\n';   /* json_dumps's terminator becomes the line's end */
    if (kevo_fd_write_all(s->out, t, n + 1) != KEVO_OK)
        s->broken = 1;
    kevo_free(t);
}

/* {"jsonrpc": "2.0", "id": id (borrowed; NULL: null), "error": {code, message, data?}}. */
static json_t *rpc_error(json_t *id, int code, const char *msg, json_t *data)
{
    json_t *e = json_pack("{s:i, s:s}", "code", code, "message", msg);

    if (e && data)
        json_object_set_new(e, "data", data);
    else
        json_decref(data);
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", e);
}

static json_t *rpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* ---- initialize ---- */

static json_t *initialize(struct srv *s, json_t *id, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    json_t *ci = json_object_get(params, "clientInfo");
    const char *v = versions[0];

    if (!want)
        return rpc_error(id, RPC_PARAMS, "initialize: params.protocolVersion (a string) is "
                         "required", NULL);
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        if (!strcmp(want, versions[i]))
            v = versions[i];
    if (json_is_string(json_object_get(ci, "name")))
        snprintf(s->m->client, sizeof s->m->client, "%.80s %.60s",
                 json_string_value(json_object_get(ci, "name")),
                 json_is_string(json_object_get(ci, "version"))
                     ? json_string_value(json_object_get(ci, "version")) : "");
    return rpc_result(id, json_pack(
        "{s:s, s:{s:{s:b}, s:{s:b, s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", v,
        "capabilities", "tools", "listChanged", 0, "resources", "subscribe", 0, "listChanged", 0,
        "serverInfo", "name", "kevo", "title", "kevo: verified GPU and CPU kernels", "version",
        KEVO_VERSION, "instructions",
        "kevo judges kernel candidates: eval verifies a candidate against the task's reference "
        "on fresh secret inputs in a sandboxed worker and times it against the measured speed "
        "of light (SOL). Read the resource kevo://docs/agents first. Every eval is recorded; "
        "pass the id of the candidate you improved as 'parent'. Trust only verdict ok, and "
        "check held-out sizes (holdout: true) before you call a candidate done."));
}

/* ---- tools ---- */

static json_t *tools_call(struct srv *s, json_t *id, json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments"), *content, *res;
    const struct mcp_tool *t = name ? kevo_mcp_tool_find(name) : NULL;
    struct mcp_call c;

    if (!name)
        return rpc_error(id, RPC_PARAMS, "tools/call: params.name (a string) is required", NULL);
    if (!t)
        return rpc_error(id, RPC_PARAMS, "unknown tool", json_pack("{s:s}", "name", name));
    if (args && !json_is_object(args))
        return rpc_error(id, RPC_PARAMS, "tools/call: params.arguments must be an object", NULL);
    memset(&c, 0, sizeof c);
    c.args = args ? args : json_object();
    if (!args)
        json_object_set_new(params, "arguments", c.args);   /* params owns it */
    t->fn(s->m, &c);
    kevo_mcp_runs_reap(s->m);
    if (c.rpc_code) {
        res = rpc_error(id, c.rpc_code, c.rpc_msg ? c.rpc_msg : "invalid arguments",
                        json_pack("{s:s}", "tool", name));
        goto out;
    }
    if (!c.out && !c.is_error)
        kevo_mcp_fail(&c, "%s: no result (kevo's bug)", name);
    if (!c.text.max)
        kevo_mcp_say(&c, "%s", "");
    if (c.text.data)
        utf8_clean(c.text.data);
    content = json_pack("[{s:s, s:s}]", "type", "text", "text", kevo_buf_str(&c.text));
    if (c.out) {   /* the structured result as text too, for clients that show only text */
        char *js = json_dumps(c.out, JSON_COMPACT);
        json_array_append_new(content, json_pack("{s:s, s:s?}", "type", "text", "text", js));
        kevo_free(js);
    }
    res = json_pack("{s:o, s:b}", "content", content, "isError", c.is_error);
    if (res && c.out)
        json_object_set(res, "structuredContent", c.out);
    res = res ? rpc_result(id, res) : rpc_error(id, RPC_INTERNAL, "the result could not be "
                                                "encoded", NULL);
out:
    json_decref(c.out);
    kevo_free(c.rpc_msg);
    kevo_buf_free(&c.text);
    return res;
}

/* ---- resources ---- */

struct doc {
    const char *uri, *name, *title, *file, *description;
};

static const struct doc docs[] = {
    { "kevo://docs/agents", "agents", "Agent brief", "docs/agents.md",
      "What to optimize, how to read verdicts, how to use held-out sizes and SOL" },
    { "kevo://docs/task-format", "task-format", "Task and candidate format",
      "docs/task-format.md", "The // kevo directives of tasks and candidates" },
    { "kevo://docs/harness", "harness", "Evaluation protocol", "docs/harness.md",
      "How each check and each time is made, and what each verdict means" },
    { "kevo://prompts/system", "candidate-rules", "Candidate rules",
      "prompts/system.md", "What kevo tells its own models a candidate must be" },
};

static json_t *resource(const char *uri, const char *name, const char *title, const char *desc,
                        const char *mime)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s}", "uri", uri, "name", name, "title", title,
                     "description", desc, "mimeType", mime);
}

static json_t *resources_list(struct srv *s, json_t *id)
{
    json_t *arr = json_array();
    struct dirent **ents = NULL;
    char dir[PATH_MAX + 32];
    int n;

    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        json_array_append_new(arr, resource(docs[i].uri, docs[i].name, docs[i].title,
                                            docs[i].description, "text/markdown"));
    snprintf(dir, sizeof dir, "%s/docs/playbook", s->m->data);
    n = s->m->data[0] ? scandir(dir, &ents, NULL, alphasort) : -1;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(ents[i]->d_name);
        if (l > 3 && !strcmp(ents[i]->d_name + l - 3, ".md")) {
            char uri[512], name[300];
            snprintf(name, sizeof name, "%.*s", (int)(l - 3), ents[i]->d_name);
            snprintf(uri, sizeof uri, "kevo://playbook/%s", name);
            json_array_append_new(arr, resource(uri, name, name, "A playbook note: one "
                                                "optimization, when it pays, how to apply it",
                                                "text/markdown"));
        }
        kevo_free(ents[i]);   /* scandir's: kevo_free is free() */
    }
    kevo_free(ents);
    for (int b = 0; b < MCP_N_BACKENDS; b++) {
        char uri[64];
        snprintf(uri, sizeof uri, "kevo://calibration/%s", kevo_mcp_backend_name(b));
        json_array_append_new(arr, resource(uri, uri + 7, "Device calibration",
                                            "The device's measured bandwidth and peaks (kevo "
                                            "calibrate --json): the speed of light",
                                            "application/json"));
    }
    return rpc_result(id, json_pack("{s:o}", "resources", arr));
}

/* The text of resource uri into *text (kevo_free); an error response when there is none. */
static json_t *resource_text(struct srv *s, json_t *id, const char *uri, char **text,
                             const char **mime)
{
    char path[PATH_MAX + 300], *msg = NULL;
    const char *file = NULL;
    size_t n;

    *mime = "text/markdown";
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        if (!strcmp(uri, docs[i].uri))
            file = docs[i].file;
    if (!strncmp(uri, "kevo://calibration/", 19)) {
        int b = !strcmp(uri + 19, "cuda") ? MCP_CUDA : !strcmp(uri + 19, "cpu") ? MCP_CPU : -1;
        if (b < 0)
            return rpc_error(id, RPC_NO_RESOURCE, "Resource not found", json_pack("{s:s}", "uri", uri));
        if (kevo_mcp_backend_open(s->m, (enum mcp_backend)b, &msg) != KEVO_OK) {
            json_t *e = rpc_error(id, RPC_INTERNAL, msg ? msg : "calibration failed", NULL);
            kevo_free(msg);
            return e;
        }
        *mime = "application/json";
        *text = json_dumps(s->m->be[b].calib, JSON_INDENT(1));
        return NULL;
    }
    if (!strncmp(uri, "kevo://playbook/", 16) && !strpbrk(uri + 16, "/\\") && uri[16] &&
        uri[16] != '.') {   /* one note by name: no path in it */
        snprintf(path, sizeof path, "%s/docs/playbook/%s.md", s->m->data, uri + 16);
    } else if (file) {
        snprintf(path, sizeof path, "%s/%s", s->m->data, file);
    } else {
        return rpc_error(id, RPC_NO_RESOURCE, "Resource not found", json_pack("{s:s}", "uri", uri));
    }
    if (kevo_fs_read_file(path, DOC_MAX, text, &n, &msg) != KEVO_OK) {
        json_t *e = rpc_error(id, RPC_NO_RESOURCE, "Resource not found",
                              json_pack("{s:s, s:s?}", "uri", uri, "why", msg));
        kevo_free(msg);
        return e;
    }
    utf8_clean(*text);
    return NULL;
}

static json_t *resources_read(struct srv *s, json_t *id, json_t *params)
{
    const char *uri = json_string_value(json_object_get(params, "uri")), *mime = NULL;
    char *text = NULL;
    json_t *err;

    if (!uri)
        return rpc_error(id, RPC_PARAMS, "resources/read: params.uri (a string) is required",
                         NULL);
    err = resource_text(s, id, uri, &text, &mime);
    if (err)
        return err;
    json_t *r = rpc_result(id, json_pack("{s:[{s:s, s:s, s:s?}]}", "contents", "uri", uri,
                                         "mimeType", mime, "text", text));
    kevo_free(text);
    return r;
}

/* ---- dispatch ---- */

/* The response to one message (NULL: none, for a notification or a response). */
static json_t *handle(struct srv *s, json_t *msg)
{
    json_t *id = json_object_get(msg, "id"), *params = json_object_get(msg, "params");
    const char *method = json_string_value(json_object_get(msg, "method"));
    const char *ver = json_string_value(json_object_get(msg, "jsonrpc"));

    if (!json_is_object(msg))
        return rpc_error(NULL, RPC_INVALID, "not a JSON-RPC request (an object; batches are "
                         "not part of MCP 2025-06-18)", NULL);
    if (id && !json_is_string(id) && !json_is_integer(id))
        return rpc_error(NULL, RPC_INVALID, "the id must be a string or an integer", NULL);
    if (!ver || strcmp(ver, "2.0") != 0)
        return rpc_error(id, RPC_INVALID, "\"jsonrpc\": \"2.0\" is required", NULL);
    if (!method)
        return id && (json_object_get(msg, "result") || json_object_get(msg, "error"))
                   ? NULL   /* a response: this server asks nothing, so nothing waits for it */
                   : rpc_error(id, RPC_INVALID, "\"method\" (a string) is required", NULL);
    if (!id)
        return NULL;   /* notifications: initialized, cancelled, ... need no answer */
    if (params && !json_is_object(params))
        return rpc_error(id, RPC_PARAMS, "params must be an object", NULL);
    if (!strcmp(method, "initialize"))
        return initialize(s, id, params);
    if (!strcmp(method, "ping"))
        return rpc_result(id, json_object());
    if (!strcmp(method, "tools/list"))
        return rpc_result(id, json_pack("{s:o}", "tools", kevo_mcp_tools_json()));
    if (!strcmp(method, "tools/call"))
        return params ? tools_call(s, id, params)
                      : rpc_error(id, RPC_PARAMS, "tools/call needs params", NULL);
    if (!strcmp(method, "resources/list"))
        return resources_list(s, id);
    if (!strcmp(method, "resources/templates/list"))
        return rpc_result(id, json_pack("{s:[{s:s, s:s, s:s, s:s}]}", "resourceTemplates",
                                        "uriTemplate", "kevo://playbook/{name}", "name",
                                        "playbook", "description", "A playbook note by name",
                                        "mimeType", "text/markdown"));
    if (!strcmp(method, "resources/read"))
        return params ? resources_read(s, id, params)
                      : rpc_error(id, RPC_PARAMS, "resources/read needs params", NULL);
    return rpc_error(id, RPC_METHOD, "Method not found", json_pack("{s:s}", "method", method));
}

static void handle_line(struct srv *s, char *line, size_t n)
{
    json_error_t e;
    json_t *msg, *resp;

    while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
        n--;
    if (!n)
        return;
    msg = json_loadb(line, n, JSON_REJECT_DUPLICATES, &e);
    resp = msg ? handle(s, msg)
               : rpc_error(NULL, RPC_PARSE, "Parse error",
                           json_pack("{s:i, s:s}", "column", e.column, "why", e.text));
    if (!resp && json_object_get(msg, "method") && json_object_get(msg, "id"))
        resp = rpc_error(json_object_get(msg, "id"), RPC_INTERNAL, "out of memory", NULL);
    if (resp)
        send_msg(s, resp);
    json_decref(resp);
    json_decref(msg);
}

/* ---- the loop ---- */

/* Feed n bytes: each complete line is handled; a line past MAX_LINE is refused whole. */
static void feed(struct srv *s, struct kevo_buf *pend, int *skip, const char *p, size_t n)
{
    while (n && !s->broken) {
        const char *nl = memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) : n;
        if (!*skip && kevo_buf_add(pend, p, k) != KEVO_OK) {
            json_t *r = rpc_error(NULL, RPC_INVALID, "message too large (64 MiB at most)", NULL);
            send_msg(s, r);
            json_decref(r);
            kevo_buf_reset(pend);
            *skip = 1;
        }
        if (nl) {
            if (!*skip)
                handle_line(s, pend->data ? pend->data : (char *)"", pend->len);
            kevo_buf_reset(pend);
            *skip = 0;
        }
        p += k + (nl != NULL);
        n -= k + (nl != NULL);
    }
}

void kevo_mcp_opts_default(struct kevo_mcp_opts *o)
{
    memset(o, 0, sizeof *o);
}

enum kevo_status kevo_mcp_serve(int fd_in, int fd_out, const struct kevo_mcp_opts *o,
                                volatile int *stop, char **out_msg)
{
    struct srv s = { .out = fd_out };
    struct kevo_buf pend;
    static char chunk[1 << 16];
    int skip = 0;
    enum kevo_status st = kevo_mcp_state_open(o, &s.m, out_msg);

    if (st)
        return st;
    kevo_buf_init(&pend, MAX_LINE);
    while (!(stop && *stop) && !s.broken) {
        struct pollfd p = { .fd = fd_in, .events = POLLIN };
        int r = poll(&p, 1, TICK_MS);
        kevo_mcp_runs_reap(s.m);
        if (r <= 0)
            continue;   /* a tick, or a signal (stop is checked) */
        ssize_t n = read(fd_in, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {   /* the client closed its end: a last line without its newline */
            if (pend.len && !skip)
                handle_line(&s, pend.data, pend.len);
            break;
        }
        feed(&s, &pend, &skip, chunk, (size_t)n);
    }
    kevo_buf_free(&pend);
    kevo_mcp_runs_stop_all(s.m, STOP_GRACE_S);
    kevo_mcp_state_close(s.m);
    return KEVO_OK;
}

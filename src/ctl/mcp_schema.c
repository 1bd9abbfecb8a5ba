/*
 * mcp_schema - the tools of `kevo mcp` as a client lists them (MCP's tools list): each one's
 * name, title, description, input schema, output schema (its structured result conforms
 * to it) and handler. The descriptions are written for the model that calls them: what
 * the tool does, what it costs, what to do with its answer. docs/agents.md lists them too.
 */
#include "ctl/mcp_int.h"

#include <stdarg.h>
#include <string.h>

/* ---- schema builders (new references) ---- */

static json_t *ty(const char *type, const char *desc)
{
    return json_pack("{s:s, s:s}", "type", type, "description", desc);
}

static json_t *ty_or_null(const char *type, const char *desc)
{
    return json_pack("{s:[s, s], s:s}", "type", type, "null", "description", desc);
}

static json_t *str(const char *desc) { return ty("string", desc); }
static json_t *integer(const char *desc) { return ty("integer", desc); }
static json_t *boolean(const char *desc) { return ty("boolean", desc); }
static json_t *number(const char *desc) { return ty("number", desc); }

static json_t *array_of(json_t *items, const char *desc)
{
    return json_pack("{s:s, s:o, s:s}", "type", "array", "items", items, "description", desc);
}

/* {"type": "object", "properties": {NAME: SCHEMA, ...}, "required": [...]}: pairs of a
 * name and a schema (taken) until NULL; required names the required ones, comma-separated
 * (NULL: none). */
static json_t *object(const char *required, ...)
{
    json_t *o = json_pack("{s:s, s:{}}", "type", "object", "properties"), *req = json_array();
    va_list ap;

    va_start(ap, required);
    for (const char *k = va_arg(ap, const char *); k; k = va_arg(ap, const char *))
        json_object_set_new(json_object_get(o, "properties"), k, va_arg(ap, json_t *));
    va_end(ap);
    for (const char *p = required; p && *p;) {
        size_t n = strcspn(p, ",");
        json_array_append_new(req, json_stringn(p, n));
        p += n + (p[n] == ',');
    }
    if (json_array_size(req))
        json_object_set_new(o, "required", req);
    else
        json_decref(req);
    return o;
}

/* ---- what several tools take ---- */

#define TASK_DESC "a task file (.cu or .c), a path in the server's working directory tree"
#define TASK_TEXT_DESC "the task's text instead of a path (CUDA when it has `// kevo launch` " \
                       "lines, C with `// kevo call`)"
#define CAND_DESC "a candidate file of the task's language, a path in the working directory tree"
#define CAND_TEXT_DESC "the candidate's text instead of a path"

/* ---- inputs ---- */

static json_t *in_check(void)
{
    return object(NULL, "task", str(TASK_DESC), "task_text", str(TASK_TEXT_DESC),
                  "candidate", str(CAND_DESC " (optional: without one the task is checked)"),
                  "candidate_text", str(CAND_TEXT_DESC), NULL);
}

static json_t *in_eval(void)
{
    return object(NULL, "task", str(TASK_DESC), "task_text", str(TASK_TEXT_DESC),
                  "candidate", str(CAND_DESC), "candidate_text", str(CAND_TEXT_DESC),
                  "parent", integer("the candidate id (of an earlier eval) this one was made "
                                    "from: recorded as its lineage"),
                  "holdout", boolean("also run the task's held-out workloads (sizes you do not "
                                     "tune for) when the visible ones pass"),
                  "profile", boolean("hardware counters of each kernel (CUDA: CUPTI in the worker, ~1 s; ncu when CUPTI cannot)"),
                  "trials", integer("correctness trials per workload, 3 to 100 (default 3)"),
                  "time_cap_s", number("timing cap per kernel and workload in seconds "
                                       "(default 2)"),
                  "deadline_s", number("the evaluation's deadline in seconds (default 120)"),
                  "backend", str("\"cuda\" or \"cpu\" (default: the task's language)"), NULL);
}

static json_t *in_prompt(void)
{
    return object(NULL, "op", str("generate, improve, fix or plan (default: improve with a "
                                  "candidate, generate without)"),
                  "task", str(TASK_DESC), "task_text", str(TASK_TEXT_DESC),
                  "candidate", str(CAND_DESC), "candidate_text", str(CAND_TEXT_DESC),
                  "candidate_id", integer("a candidate of the archive (from eval): its source, "
                                          "verdict and measurements are the evidence; its "
                                          "run's task is used when no task is given"), NULL);
}

static json_t *in_run_start(void)
{
    return object(NULL, "task", str(TASK_DESC), "task_text", str(TASK_TEXT_DESC),
                  "budget", integer("evaluations of the search (default 40)"),
                  "time_s", number("wall-clock limit in seconds"),
                  "time_cap_s", number("timing cap per kernel and workload in seconds"),
                  "backend", str("\"cuda\" or \"cpu\""),
                  "seeds", array_of(str("a path"), "candidate files to start from"),
                  "seed_candidates", array_of(integer("an id"), "archive candidates to start "
                                              "from (default: this session's best for the "
                                              "task, when it has one)"), NULL);
}

static json_t *in_run(void)
{
    return object("run", "run", integer("the run's id (from run_start)"), NULL);
}

static json_t *in_runs(void)
{
    return object(NULL, "run", integer("one run's report, lineage of its best and operator "
                                       "statistics (default: the list of runs)"),
                  "candidates", boolean("with run: every candidate of the run, its verdict and "
                                        "figures per workload"), NULL);
}

static json_t *in_show(void)
{
    return object("candidate", "candidate", integer("the candidate's id"), NULL);
}

static json_t *in_export(void)
{
    return object("run,out", "run", integer("the run"),
                  "out", str("the directory to write, in the working directory tree"),
                  "candidate", integer("for an agent's run: export this candidate (it must pass "
                                       "the held-out workloads); default: the best that does"),
                  NULL);
}

/* ---- outputs ---- */

static json_t *out_check(void)
{
    return object("ok,kind,file,message", "ok", boolean("it parses and compiles"),
                  "kind", str("task or candidate"), "file", str("what was checked"),
                  "task", str("the task a candidate was checked against"),
                  "message", str("why not: file, line, column and what was expected"), NULL);
}

static json_t *out_eval(void)
{
    return object("verdict,message,candidate,run,workloads",
                  "verdict", str("ok, compile_error, launch_error, timeout, crash, mismatch, "
                                 "unwritten, out_of_bounds, input_mutated, nondeterministic, "
                                 "degenerate, holdout_fail or implausible"),
                  "message", str("one line: what failed, where, the key numbers"),
                  "evidence", ty("object", "the verdict's evidence (docs/eval-json.md)"),
                  "candidate", integer("its id in the archive: name it as a later eval's parent"),
                  "run", integer("the archive run of this task and session"),
                  "parent", ty_or_null("integer", "the parent named"),
                  "duplicate", boolean("the run had this text already: recorded once"),
                  "task", ty("object", "name and path"), "backend", str("cuda or cpu"),
                  "summary", ty_or_null("object", "geometric means over the workloads: time_s, "
                                        "sol_fraction (of the speed of light), speedup over "
                                        "the reference (same run)"),
                  "workloads", array_of(ty("object", "index, sizes, verdict, time_s, noise, "
                                           "ref_time_s, speedup, sol_fraction, gbps, tflops, "
                                           "t_sol_s"), "each evaluated workload"),
                  "holdout", ty_or_null("object", "the held-out workloads' verdict and message"),
                  "resources", ty("array", "registers, shared memory, spills per kernel"),
                  "compile_log", str("the compiler's output"),
                  "profile", ty_or_null("object", "hardware counters (profile)"),
                  "run_best", ty_or_null("object", "the run's best so far: candidate, time_s, "
                                         "sol_fraction, speedup"), NULL);
}

static json_t *out_prompt(void)
{
    return object("op,system,user", "op", str("the operator"), "template", str("prompts/OP.md"),
                  "system", str("the system prompt"), "user", str("the user prompt"),
                  "evaluated", boolean("the candidate's evaluation is in it"),
                  "device_known", boolean("the device's measured figures are in it"), NULL);
}

static json_t *out_run(void)
{
    return object("run,status", "run", integer("the run"), "task", ty_or_null("string", "its task"),
                  "status", str("running, done, stopped, failed or interrupted"),
                  "candidates", integer("proposed"), "evaluated", integer("with a verdict"),
                  "ok", integer("correct"),
                  "best", ty_or_null("object", "the best so far (its report's, once it has one)"),
                  "lineage_of_best", ty("array", "the best's parents back to a seed"),
                  "reason", ty_or_null("string", "why it stopped"),
                  "progress", ty_or_null("object", "its latest status event"),
                  "process", ty_or_null("object", "pid, running, exit_status (runs this "
                                        "session started)"), NULL);
}

static json_t *out_run_start(void)
{
    return object("pid,state", "run", ty_or_null("integer", "the run's id (null while starting)"),
                  "pid", integer("the kevo run process"), "state", str("running or starting"),
                  "task", str("the task's name"), "budget", integer("evaluations"),
                  "seeds", integer("seed candidates"), NULL);
}

static json_t *out_any(void)
{
    return json_pack("{s:s}", "type", "object");
}

static json_t *out_show(void)
{
    return object("id,verdict", "id", integer("the candidate"), "run", integer("its run"),
                  "verdict", str("its verdict, or pending"),
                  "source", ty_or_null("string", "its text"), NULL);
}

static json_t *out_export(void)
{
    return object("run,out,files", "run", integer("the run"),
                  "candidate", ty_or_null("integer", "the exported candidate (agent runs)"),
                  "out", str("the directory"), "files", array_of(str("a path"), "files written"),
                  "holdout_rejected", ty("array", "candidates that failed the held-out gate"),
                  NULL);
}

/* ---- the table ---- */

static const struct mcp_tool tools[] = {
    { "check", "Check a task or candidate",
      "Parse and compile a task file, or a candidate against its task, without running it "
      "(no GPU needed). Errors name file, line and column. Cheap: use it before eval.",
      in_check, out_check, kevo_mcp_tool_check, 1 },
    { "eval", "Evaluate a candidate",
      "Verify a candidate kernel against the task's reference on fresh secret inputs at every "
      "size (sandboxed worker; poisoned, guarded buffers; determinism; held-out sizes on "
      "request) and time it against the reference in the same run. Returns one verdict with "
      "its evidence, per-workload time, fraction of the speed of light (SOL) and speedup, "
      "resources and the compile log. Every call is recorded in kevo's archive: pass the "
      "id of the candidate you started from as 'parent'.",
      in_eval, out_eval, kevo_mcp_tool_eval, 0 },
    { "prompt", "What kevo would ask a model",
      "The prompt kevo's own LLM operators would send for this task (generate) or candidate "
      "(improve, fix, plan): the task without held-out sizes, the device's measured figures, "
      "the candidate's verdict and measurements, what was tried, playbook notes.",
      in_prompt, out_prompt, kevo_mcp_tool_prompt, 1 },
    { "run_start", "Start a search in the background",
      "Start kevo's evolutionary search (kevo run) on a task in the background, seeded with "
      "your best candidate of this session unless seeds are given. Returns the run id at once; "
      "follow it with run_status, stop it with run_stop (it stays resumable).",
      in_run_start, out_run_start, kevo_mcp_tool_run_start, 0 },
    { "run_status", "A run's progress",
      "A run's status, evaluations and best candidate so far (and its process, for runs this "
      "session started).", in_run, out_run, kevo_mcp_tool_run_status, 1 },
    { "run_stop", "Stop a background search",
      "Stop a run this session started (SIGTERM: it records what it has, stopped and "
      "resumable) and wait for it.", in_run, out_run, kevo_mcp_tool_run_stop, 0 },
    { "runs", "Runs in the archive",
      "The archive's runs; one run's report and the lineage of its best; or with candidates "
      "every candidate of a run with its verdict and figures.",
      in_runs, out_any, kevo_mcp_tool_runs, 1 },
    { "show", "One candidate",
      "One candidate of the archive: operator, parents, verdict, evidence, figures per "
      "workload, compile log and source.", in_show, out_show, kevo_mcp_tool_show, 1 },
    { "export", "Export a run's winner",
      "Write a run's winner as standalone files (kernel, C launcher, reference, a test, a "
      "Makefile). For your own run the best candidates are first tried on the task's held-out "
      "workloads; only one that passes is exported.",
      in_export, out_export, kevo_mcp_tool_export, 0 },
};

const struct mcp_tool *kevo_mcp_tool_find(const char *name)
{
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
        if (!strcmp(tools[i].name, name))
            return &tools[i];
    return NULL;
}

json_t *kevo_mcp_tools_json(void)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
        const struct mcp_tool *t = &tools[i];
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:s, s:b, s:b, s:b, s:b}}",
                                             "name", t->name, "title", t->title, "description",
                                             t->description, "inputSchema", t->input(),
                                             "outputSchema", t->output(), "annotations", "title",
                                             t->title, "readOnlyHint", t->read_only,
                                             "destructiveHint", 0, "idempotentHint",
                                             t->read_only, "openWorldHint", 0));
    }
    return arr;
}

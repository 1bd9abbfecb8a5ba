/*
 * kevo.h - the public API of kevo, a generator and optimizer of GPU kernels.
 *
 * kevo reads a task (a reference implementation plus `// kevo` directives), evaluates
 * candidate kernels against it in sandboxed worker processes, and reports verdicts and
 * timings against the device's measured speed of light. The CLI (cli/) uses only this
 * header; everything under src/ is internal.
 *
 * Conventions: fallible functions return enum kevo_status (KEVO_OK == 0); outputs come back
 * through pointers that are cleared first; memory kevo allocates for the caller is released
 * with kevo_free(); every *_free(NULL) is a no-op.
 */
#ifndef KEVO_H
#define KEVO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KEVO_VERSION "0.1.0"
#define KEVO_NODISCARD __attribute__((warn_unused_result))

/* One append-only list of statuses. Never renumber; add before KEVO_STATUS_COUNT. */
enum kevo_status {
    KEVO_OK = 0,
    KEVO_ERR_NOMEM,        /* 1  out of memory */
    KEVO_ERR_IO,           /* 2  file or pipe I/O failed */
    KEVO_ERR_PARSE,        /* 3  malformed task, candidate, expression or message */
    KEVO_ERR_INVALID,      /* 4  bad argument or inconsistent declarations */
    KEVO_ERR_OVERFLOW,     /* 5  integer overflow in an expression or a size */
    KEVO_ERR_TIMEOUT,      /* 6  a deadline passed */
    KEVO_ERR_COMPILE,      /* 7  source did not compile (a verdict for candidates) */
    KEVO_ERR_LAUNCH,       /* 8  launch refused: plan, resources, argument width */
    KEVO_ERR_DEVICE,       /* 9  sticky device fault: the context is lost */
    KEVO_ERR_CUDA,         /* 10 CUDA driver call failed (not the candidate's doing) */
    KEVO_ERR_NVRTC,        /* 11 NVRTC itself failed (not a compile error) */
    KEVO_ERR_NODEV,        /* 12 no such device, or no GPU at all */
    KEVO_ERR_UNSUPPORTED,  /* 13 feature not available on this backend/device */
    KEVO_ERR_WORKER,       /* 14 a worker died or spoke nonsense */
    KEVO_ERR_SYSTEM,       /* 15 an OS call failed (fork, pipe, mmap, ...) */
    KEVO_ERR_NOTFOUND,     /* 16 a named thing does not exist */
    KEVO_ERR_SANDBOX,      /* 17 the sandbox could not be set up */
    KEVO_ERR_TOOBIG,       /* 18 a size or buffer cap was exceeded */
    KEVO_ERR_DIVERGED,     /* 19 a replay did not reproduce its run */
    KEVO_ERR_LOST,         /* 20 a worker's host (an MPI rank) was lost: not evaluated */
    KEVO_STATUS_COUNT      /* never use */
};

/* Every evaluation ends in exactly one verdict (docs/harness.md). Append-only. */
enum kevo_verdict {
    KEVO_VERDICT_OK = 0,
    KEVO_VERDICT_COMPILE_ERROR,    /* 1 */
    KEVO_VERDICT_LAUNCH_ERROR,     /* 2 */
    KEVO_VERDICT_TIMEOUT,          /* 3 */
    KEVO_VERDICT_CRASH,            /* 4 */
    KEVO_VERDICT_MISMATCH,         /* 5 */
    KEVO_VERDICT_UNWRITTEN,        /* 6 */
    KEVO_VERDICT_OUT_OF_BOUNDS,    /* 7 */
    KEVO_VERDICT_INPUT_MUTATED,    /* 8 */
    KEVO_VERDICT_NONDETERMINISTIC, /* 9 */
    KEVO_VERDICT_DEGENERATE,       /* 10 */
    KEVO_VERDICT_HOLDOUT_FAIL,     /* 11 */
    KEVO_VERDICT_IMPLAUSIBLE,      /* 12 */
    KEVO_VERDICT_COUNT             /* never use */
};

/* Human-readable names; never NULL (out-of-range values give "unknown"). */
const char *kevo_status_name(enum kevo_status st);
const char *kevo_verdict_name(enum kevo_verdict v);
/* Parse a verdict name; returns KEVO_ERR_NOTFOUND for an unknown one. */
KEVO_NODISCARD enum kevo_status kevo_verdict_parse(const char *name, enum kevo_verdict *out);

/* Release memory that kevo allocated for the caller. */
void kevo_free(void *p);

/*
 * The directory of kevo's run-time data: prompts/, docs/playbook/, prices.json, tasks/ and
 * examples/seeds/, laid out as in the source tree. Found once per process, by the first
 * rule that applies: $KEVO_DATA_DIR; share/kevo beside the executable (BINDIR/../share/kevo,
 * where `make install` puts it) when it exists; the source tree when the executable lies in
 * it (a build in a checkout); the compiled-in PREFIX/share/kevo when it exists; else the
 * source tree kevo was built from. *out_rule (may be NULL) says which rule found it. Both
 * strings live as long as the process. Thread-safe.
 */
const char *kevo_data_dir(const char **out_rule);

/* ---- logging: the library never prints; the CLI installs a logger ---- */
enum kevo_log_level { KEVO_LOG_ERROR = 0, KEVO_LOG_WARN, KEVO_LOG_INFO, KEVO_LOG_DEBUG };
typedef void (*kevo_log_fn)(enum kevo_log_level lvl, const char *msg, void *user);
void kevo_log_set(kevo_log_fn fn, void *user, enum kevo_log_level max_level);

/* ---- commands, as the CLI uses them ---- */

/* Backend selection for evaluation. AUTO = CUDA for .cu tasks when a GPU is present. */
enum kevo_backend_kind { KEVO_BACKEND_AUTO = 0, KEVO_BACKEND_CPU, KEVO_BACKEND_CUDA };

struct kevo_eval_opts {
    enum kevo_backend_kind backend;
    int device;               /* device ordinal for CUDA */
    int trials;               /* correctness trials per workload, >= 3 */
    int holdout;              /* 1: also run holdout workloads */
    double deadline_s;        /* per-request deadline; 0 = default */
    double time_cap_s;        /* timing cap per workload; 0 = default */
    int no_timing;            /* 1: verify only */
    const char *dump_dir;     /* (optional) write the reference's trial-0 inputs and outputs
                                 of every workload evaluated (holdouts too with holdout) to
                                 DIR/w<index>/: <tensor>.bin + manifest.json */
    int profile;              /* 1 (kevo_eval_json only): hardware counters of each ok
                                 candidate with Nsight Compute (ncu), as its "profile"
                                 (docs/eval-json.md); CUDA only */
};
void kevo_eval_opts_default(struct kevo_eval_opts *o);

/*
 * Parse and compile a task (and optionally candidates) without running anything.
 * On failure *out_msg (caller frees with kevo_free) names file, line, column and what
 * was expected. Works without a GPU.
 */
KEVO_NODISCARD enum kevo_status kevo_check_file(const char *path, const char *task_path,
                                                char **out_msg);

/*
 * Evaluate the task's reference and each candidate, returning a JSON document
 * (docs/eval-json.md) as a string the caller frees with kevo_free. A candidate's failure
 * is a verdict inside the document, never a non-OK status; a non-OK status means kevo
 * itself could not evaluate (bad task, no worker, ...), with *out_msg set. A reference
 * whose own verdict is not ok judges no candidate: the document then has none.
 * With opts->profile on CUDA, ncu must be found first (else KEVO_ERR_NOTFOUND, nothing
 * evaluated); a profile that fails is an "error" inside the candidate's "profile".
 */
KEVO_NODISCARD enum kevo_status kevo_eval_json(const char *task_path, const char *const *cand_paths,
                                               int n_cands, const struct kevo_eval_opts *opts,
                                               char **out_json, char **out_msg);

/* `kevo bench`: evaluate a suite of tasks and score it (docs/bench.md). */
struct kevo_bench_opts {
    struct kevo_eval_opts eval;   /* for every task */
    const char *cand_dir;         /* NULL: the references; else DIR/NAME.cu|.c, DIR/NAME/... */
    const char *baselines;        /* NULL, or a file written by bench/torch_baseline.py */
};
void kevo_bench_opts_default(struct kevo_bench_opts *o);
/* Called before each task: index, count, path (borrowed). */
typedef void (*kevo_bench_progress_fn)(void *user, int i, int n, const char *path);
/*
 * Evaluate every task file under paths (files, or directories walked in name order) and
 * return the bench document as JSON (kevo_free it). A task kevo cannot evaluate is an
 * entry with verdict "error"; a non-OK status means no bench at all (no task files, a
 * bad baselines file), with *out_msg set.
 */
KEVO_NODISCARD enum kevo_status kevo_bench_json(const char *const *paths, int n_paths,
                                                const struct kevo_bench_opts *o,
                                                kevo_bench_progress_fn progress, void *user,
                                                char **out_json, char **out_msg);

/* ---- MPI: kevo run across the ranks of an MPI job (docs/cluster.md) ----
 * Every rank runs `kevo run ... --mpi`; rank 0 is the controller, each other rank serves
 * it with the workers of its host. */
struct kevo_mpi;
/*
 * Join the MPI job this process was started in (MPI_Init_thread); call it once, before
 * starting threads. KEVO_ERR_UNSUPPORTED with *out_msg when kevo was built without MPI.
 */
KEVO_NODISCARD enum kevo_status kevo_mpi_open(struct kevo_mpi **out, char **out_msg);
/* The MPI library kevo was built with (one line), or NULL when built without MPI. */
const char *kevo_mpi_library(void);
int kevo_mpi_rank(const struct kevo_mpi *m);   /* 0 for NULL */
int kevo_mpi_size(const struct kevo_mpi *m);   /* 1 for NULL */
/* A rank other than 0: serve rank 0's run with this host's workers until it stops them
 * (KEVO_OK), or until it is gone (a non-OK status with *out_msg). */
KEVO_NODISCARD enum kevo_status kevo_mpi_serve(struct kevo_mpi *m, char **out_msg);
/* Leave the job (every rank calls it; rank 0 first stops the ranks it did not stop yet).
 * NULL: no-op. */
void kevo_mpi_close(struct kevo_mpi *m);

/* `kevo run`: an evolutionary search over a persistent archive (docs/search.md). */
struct kevo_run_opts {
    struct kevo_eval_opts eval;   /* backend, trials, time cap, deadline for each evaluation */
    const char *archive;          /* NULL: the default archive (kevo_runs_json says where) */
    int64_t budget;               /* evaluations in the run, all sessions; 0: 200 */
    double time_s;                /* wall-clock seconds for this session; 0: none */
    double target;                /* stop at this fraction of SOL (geomean); 0: none */
    int64_t stagnation;           /* stop after this many evaluations without a new best;
                                     0: max(24, budget / 4) */
    double cost_cap;              /* LLM spending cap in the price table's unit; 0: none */
    int n_gpus;                   /* devices, one worker each; 0: eval.device alone */
    const int *gpus;
    int n_seeds;                  /* starting candidates; none: the task's reference, and the
                                     suite's exemplar (examples/seeds/) when the task is a
                                     suite task's very text */
    const char *const *seeds;
    int no_exemplar;              /* 1: no exemplar seed, the reference alone */
    int64_t resume;               /* 0: a new run; else continue this run */
    int n_islands;                /* 0: 2 */
    uint64_t rng_seed;            /* 0: a fixed default (runs are reproducible) */
    int holdout_tries;            /* candidates the held-out gate may try; 0: 5 */
    int n_models;                 /* LLM models ("openai:gpt-5@URL*2", docs/llm.md); none: */
    const char *const *models;    /*   the operators that need no LLM only */
    int llm_concurrency;          /* LLM calls in flight; 0: 4 */
    const char *prompts_dir;      /* NULL: $KEVO_PROMPTS, else the data directory's prompts/
                                     (kevo_data_dir) */
    const char *playbook_dir;     /* NULL: the data directory's docs/playbook/ */
    int offline;                  /* 1: LLM replies only from the archive's response cache */
    double profile_share;         /* CUDA: each new best gets its hardware counters (in the
                                     worker, through CUPTI) while profiling has cost at most
                                     this share of the run's worker time, so the elites
                                     carry them into improve/fix prompts; default 0.1, 0:
                                     none (docs/search.md) */
    const char *prices;           /* price table; NULL: $KEVO_PRICES, else the data
                                     directory's prices.json */
    int64_t replay;               /* run it again from its archive record: same decisions,
                                     recorded results and replies (no GPU, no network); the
                                     options above are the original's (prompts_dir and
                                     playbook_dir may be given) */
    struct kevo_mpi *mpi;         /* NULL: this host's workers; else rank 0 of an MPI job
                                     (kevo_mpi_open): the other ranks' workers too, each
                                     rank with the devices above (docs/cluster.md) */
};
void kevo_run_opts_default(struct kevo_run_opts *o);
/* Each event of a run as one JSON object text (borrowed for the call). */
typedef void (*kevo_run_event_fn)(void *user, const char *event_json);
/*
 * Run (or resume) a search; *out_json is the final report (kevo_free it) and *run_id the
 * run's id (set as soon as the run exists, so an interrupted caller can name it; 0 for a
 * resume refused before its session began: a done run without a larger budget, a run
 * still running in a live process of this host). *stop, when not NULL, is polled: set it
 * (e.g. from a SIGINT, SIGTERM or SIGHUP handler) to stop at the next result; the run is
 * then "stopped" and resumable. A non-OK status means kevo could not
 * run (bad task or seed, archive unusable, no worker), with *out_msg set. A replay that
 * did not reproduce its run is KEVO_ERR_DIVERGED, *out_msg naming the first difference
 * (and *out_json set when the replay got to its end).
 */
KEVO_NODISCARD enum kevo_status kevo_run(const char *task_path, const struct kevo_run_opts *o,
                                         kevo_run_event_fn ev, void *user,
                                         volatile int *stop, int64_t *run_id, char **out_json,
                                         char **out_msg);
/* `kevo runs`: every run (id 0) or one run's report, lineage of its best and operator
 * statistics, as JSON. */
KEVO_NODISCARD enum kevo_status kevo_runs_json(const char *archive, int64_t id, char **out_json,
                                               char **out_msg);
/*
 * `kevo runs ID --candidates`: every candidate of run id, oldest first, as JSON
 * (kevo_free it): {"run", "task", "path", "reference": [{"index", "sizes", "time_s"}] (from
 * the run's report; [] while it has none), "candidates": [{"id", "op", "parents": [ids],
 * "verdict" ("pending" before it has one), "score_s", "sol_fraction", "speedup" (geomeans
 * over the workloads), "improved", "workloads": [{"index", "sizes", "time_s",
 * "sol_fraction", "speedup"}], "message" (failed candidates; null for the others)}]}.
 * Figures kevo did not measure are null. KEVO_ERR_NOTFOUND for an unknown run.
 */
KEVO_NODISCARD enum kevo_status kevo_runs_cands_json(const char *archive, int64_t id,
                                                     char **out_json, char **out_msg);
/*
 * `kevo show CAND`: candidate id of the archive as JSON (kevo_free it): the fields of a
 * kevo_runs_cands_json entry (its message always), and "run", "task", "island", "cell",
 * "generation", "params", "flags", "evidence", "compile_log", "resources", "profile" and
 * "evaluated_by" (of its eval result, docs/eval-json.md; null while pending or without
 * one), "holdout"
 * ({"verdict", "message"} of the held-out gate, or null) and "source" (its text, params as
 * the run chose them).
 * KEVO_ERR_NOTFOUND for an unknown candidate, *out_msg naming it.
 */
KEVO_NODISCARD enum kevo_status kevo_show_json(const char *archive, int64_t id, char **out_json,
                                               char **out_msg);
/*
 * `kevo report RUN`: run id of the archive (NULL: the default one) as one self-contained
 * HTML page (docs/report.md): progress, roofline, lineage of the best, operators and
 * models, verdicts, and the best kernel with its diff and held-out result; baselines (NULL,
 * or a file of bench/torch_baseline.py) adds PyTorch's times beside the best's. Inline CSS
 * and SVG only: no script, nothing loaded from anywhere. *out_html: kevo_free it.
 * KEVO_ERR_NOTFOUND for an unknown run or archive, *out_msg naming it.
 */
KEVO_NODISCARD enum kevo_status kevo_report_html(const char *archive, int64_t run,
                                                 const char *baselines, char **out_html,
                                                 char **out_msg);
/* `kevo report --bench FILE`: the document of `kevo bench --json` in file path as an HTML
 * page of the same kind: the suite's table, fast_p curves and SOL per task. A file that is
 * not one is KEVO_ERR_PARSE or KEVO_ERR_INVALID with *out_msg naming it. */
KEVO_NODISCARD enum kevo_status kevo_report_bench_html(const char *path, char **out_html,
                                                       char **out_msg);
/*
 * `kevo models check`: one tiny request per LLM model spec (docs/llm.md "Checking
 * models"). *out_json (kevo_free it): {"ok": every model passed, "prices": the price
 * table's path, "models": [{"model": spec, "ok", "stage" (what failed: "spec", "key",
 * "network", "http", "settings", "reply"; null when ok), "status", "http_status",
 * "latency_s", "key" ("env", "file" or "none": where a key was found, never the key),
 * "price_known", "tokens_in", "tokens_out", "adapted", "note", "diagnosis" (one line)}]}.
 * A model that fails is an entry, never a non-OK status; a non-OK status means nothing was
 * checked (no spec, a named price table that does not parse), with *out_msg set. prices:
 * as kevo_run_opts.prices (NULL: $KEVO_PRICES, else the data directory's prices.json).
 */
KEVO_NODISCARD enum kevo_status kevo_models_check_json(const char *const *specs, int n_specs,
                                                       const char *prices, char **out_json,
                                                       char **out_msg);
/* `kevo export`: the best held-out-checked kernel of run id as standalone files in dir. */
KEVO_NODISCARD enum kevo_status kevo_export(const char *archive, int64_t id, const char *dir,
                                            char **out_msg);

/* ---- `kevo llm`: LLM calls across an air gap (docs/llm.md "Air-gapped clusters") ----
 * An offline run records the calls it could not make; pending lists them as JSON lines,
 * answer makes them where there is a network, import stores the replies, and
 * `kevo run --resume` uses them before it asks anything new. A call's id ("call") is
 * "ROWID-HASH": its row in the archive and the head of its prompt's hash. */
/* The calls of run that wait for a reply, one JSON line each (kevo_free *out_jsonl, ""
 * when none): {"call", "run", "op", "model" (the spec, settings included), "settings"
 * (the spec's "?..." as an object), "system", "prompt"}; *n_out how many. */
KEVO_NODISCARD enum kevo_status kevo_exchange_pending(const char *archive, int64_t run,
                                                      char **out_jsonl, int *n_out,
                                                      char **out_msg);
struct kevo_exchange_opts {
    const char *prices;           /* price table; NULL: $KEVO_PRICES, else the data
                                     directory's prices.json */
    double cost_cap;              /* spending cap of this answer session; 0: none */
    int concurrency;              /* calls in flight; 0: 4 */
    const char *const *models;    /* the specs of this machine's models (--model, --config):
                                     a line is asked of the one with its provider and model
                                     name, at that one's base URL with that one's key
                                     variable; the line's spec gives only provider:name and
                                     its "?" settings, never a URL or a key variable */
    int n_models;                 /* 0: a line is asked at its provider's own URL with its
                                     default key variable, refused when its spec names a
                                     URL or a key variable */
};
void kevo_exchange_opts_default(struct kevo_exchange_opts *o);
struct kevo_exchange_stats {
    int n_calls;                  /* lines read (answer: calls to make) */
    int n_ok;                     /* answer: replies; import: replies stored */
    int n_failed;                 /* calls that failed (they stay pending) */
    int n_skipped;                /* answer: left out by the cost cap; import: replies to
                                     calls a session already used one for */
    double spent;                 /* answer: what the calls cost */
};
/* One line of output (no newline; borrowed for the call), from any thread, one at a time. */
typedef void (*kevo_exchange_line_fn)(void *user, const char *line);
/*
 * Make the calls of text (lines of kevo_exchange_pending; name says where they came from,
 * for messages) with o's models (see kevo_exchange_opts), the lines' settings, kevo run's
 * limits and o's cost cap; each answer
 * goes to out as soon as it is back: {"call", "status", "reply" (when ok), "usage": {"in",
 * "out", "cached_in", "reasoning"}, "model", "cost", "latency_s", "error" (when not ok)}.
 * A call that fails is a line with its status; a bad line (named with its field in
 * *out_msg, KEVO_ERR_PARSE) means no call is made at all.
 */
KEVO_NODISCARD enum kevo_status kevo_exchange_answer(const char *name, const char *text,
                                                     size_t len,
                                                     const struct kevo_exchange_opts *o,
                                                     kevo_exchange_line_fn out, void *user,
                                                     struct kevo_exchange_stats *stats,
                                                     char **out_msg);
/*
 * Store the replies of text (lines of kevo_exchange_answer, or written by hand or by an
 * agent: {"call", "reply"} is enough; "usage" and "model" are optional) for the runs'
 * next sessions. All or nothing: a bad line (its number and field in *out_msg,
 * KEVO_ERR_PARSE) stores nothing. A line with a failed "status" and no reply is skipped
 * (its call stays pending), so is one whose call a session already used a reply for; a
 * reply imported again before any session used it replaces the first.
 */
KEVO_NODISCARD enum kevo_status kevo_exchange_import(const char *archive, const char *name,
                                                     const char *text, size_t len,
                                                     struct kevo_exchange_stats *stats,
                                                     char **out_msg);

/* ---- agent mode: `kevo prompt` and `kevo mcp` (docs/agents.md) ---- */

struct kevo_prompt_opts {
    const char *op;               /* "generate", "improve", "fix" or "plan"; NULL: improve
                                     with a candidate, generate without */
    const char *eval_json;        /* (optional) a file: the candidate's `kevo eval --json`
                                     document (its entry with the candidate's path, else
                                     its first) or one eval result (docs/eval-json.md) */
    const char *calibration;      /* (optional) a file of `kevo calibrate --json`; NULL: the
                                     eval document's, else the device's (measured once and
                                     cached; unknown when it cannot be, e.g. no GPU) */
    int device;                   /* the device measured for it */
};
void kevo_prompt_opts_default(struct kevo_prompt_opts *o);
/*
 * The prompt kevo would send a model for task (and candidate; NULL for generate): the
 * templates and evidence of kevo run's LLM operators (docs/llm.md "Prompts"), held-out
 * sizes left out. *out_json (kevo_free it): {"op", "template", "system", "user", "task",
 * "candidate", "evaluated" (an eval result was given), "device" (where its figures came
 * from, or why they are unknown)}. A bad op, a file that does not parse, a template that
 * cannot be read: a non-OK status with *out_msg.
 */
KEVO_NODISCARD enum kevo_status kevo_prompt_json(const char *task_path, const char *cand_path,
                                                 const struct kevo_prompt_opts *o,
                                                 char **out_json, char **out_msg);

struct kevo_mcp_opts {
    const char *archive;          /* NULL: the default archive (kevo_runs_json says where) */
    const char *const *allow;     /* directories paths may name besides the working
                                     directory's tree (n_allow of them) */
    int n_allow;
    int device;                   /* the device evaluations run on */
    const char *exe;              /* the kevo binary run_start starts; NULL: this one */
    const char *const *models;    /* LLM model specs the runs run_start starts may use (the
                                     user's, never a tool call's); n_models of them */
    int n_models;
};
void kevo_mcp_opts_default(struct kevo_mcp_opts *o);
/*
 * `kevo mcp`: serve the Model Context Protocol (JSON-RPC 2.0, one message per line) on
 * fd_in and fd_out until fd_in ends or *stop is set (polled at least twice a second):
 * kevo's tools (check, eval, prompt, run_start, run_status, run_stop, runs, show,
 * export) and resources for a coding agent (docs/agents.md). Every candidate evaluated is
 * recorded in the archive (ctl/trail.h); runs started in the background are stopped
 * (SIGTERM) at the end. Nothing but protocol messages is written to fd_out; logs go
 * through kevo_log_set. A non-OK status means the server could not start (a working
 * directory or allowed directory that cannot be resolved), with *out_msg set.
 */
KEVO_NODISCARD enum kevo_status kevo_mcp_serve(int fd_in, int fd_out,
                                               const struct kevo_mcp_opts *o,
                                               volatile int *stop, char **out_msg);

/* Measure (or load from cache when !force) this device's bandwidth and peaks; JSON out. */
KEVO_NODISCARD enum kevo_status kevo_calibrate_json(enum kevo_backend_kind backend, int device,
                                                    int force, char **out_json, char **out_msg);

/* Entry point of the worker process (`kevo __worker`); returns the process exit code. */
int kevo_worker_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* KEVO_H */

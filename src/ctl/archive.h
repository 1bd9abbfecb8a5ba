/*
 * archive - kevo's persistent record of searches (docs/archive.md): runs, the candidates
 * each run proposed and what the evaluator said about them, sources stored once by hash,
 * every evaluation result, and every LLM call. One SQLite database in WAL mode; every
 * write is its own transaction, committed before the function returns, so a kevo killed
 * with SIGKILL at any moment loses nothing it was told about and `kevo run --resume`
 * continues from the file (synchronous=NORMAL: a power cut may lose the last commits but
 * never corrupts the file; KEVO_ARCHIVE_SYNC=full in the environment syncs every commit).
 *
 * Schema: versioned (PRAGMA user_version), migrated forward on open; a database from a
 * newer kevo is refused (KEVO_ERR_UNSUPPORTED) with a message naming both versions, and a
 * file that is not a kevo archive (another application's SQLite file, or no database at
 * all) with KEVO_ERR_IO "...: not a kevo archive (...)", before anything is written to it.
 * Concurrent readers (`kevo runs` while a run writes) are fine; one writer per database at
 * a time: a writer waits up to 5 s for another, then fails with KEVO_ERR_TIMEOUT.
 * A handle is used by one thread at a time; open one per thread.
 *
 * Ownership: strings in records returned to the caller are owned by the record
 * (kevo_archive_cand_clear / kevo_archive_run_clear); JSON texts are stored as given
 * (the caller builds them with jansson). All functions return KEVO_OK or an error status
 * with a message in the archive's last-error buffer (kevo_archive_errmsg), which names
 * the database path and what failed: a full disk is KEVO_ERR_IO "...: database or disk is
 * full", never a crash, and nothing already committed is lost. A violated constraint (a
 * missing parent, source or run) is KEVO_ERR_INVALID; SQLite's busy/locked is
 * KEVO_ERR_TIMEOUT; other SQLite failures are KEVO_ERR_IO.
 */
#ifndef KEVO_ARCHIVE_H
#define KEVO_ARCHIVE_H

#include "kevo.h"
#include "base/proc.h"
#include "base/sha.h"
#include <stddef.h>
#include <stdint.h>

#define KEVO_ARCHIVE_SCHEMA 5          /* the schema version this kevo writes */

struct kevo_archive;                   /* opaque */

/* Open (creating it and its directory if needed) and migrate. On failure *out_msg (may be
 * NULL; kevo_free it) says why; on success it is set to NULL. */
KEVO_NODISCARD enum kevo_status kevo_archive_open(const char *path, struct kevo_archive **out,
                                                  char **out_msg);
/* The same for commands that only read what a run left: a path that does not exist is
 * KEVO_ERR_NOTFOUND ("PATH: no such archive"), never a new empty database. */
KEVO_NODISCARD enum kevo_status kevo_archive_open_existing(const char *path,
                                                           struct kevo_archive **out,
                                                           char **out_msg);
void kevo_archive_close(struct kevo_archive *a);           /* NULL: no-op */
const char *kevo_archive_errmsg(const struct kevo_archive *a);   /* borrowed */

/* ---- sources: stored once by SHA-256 of the text ---- */

/* Store text (if new) and give its hash. */
KEVO_NODISCARD enum kevo_status kevo_archive_source_put(struct kevo_archive *a, const char *text,
                                                        size_t len, char hash[KEVO_HASH_HEX]);
/* The text of hash (kevo_free it); KEVO_ERR_NOTFOUND if absent. */
KEVO_NODISCARD enum kevo_status kevo_archive_source_get(struct kevo_archive *a, const char *hash,
                                                        char **text, size_t *len);

/* ---- runs ---- */

enum kevo_run_status { KEVO_RUN_RUNNING = 0, KEVO_RUN_DONE, KEVO_RUN_STOPPED, KEVO_RUN_FAILED };

struct kevo_run_rec {
    int64_t id;
    char *task_name;
    char *task_path;                   /* as given when the run started */
    char task_hash[KEVO_HASH_HEX];     /* the task's text, in sources */
    char *config_json;                 /* budgets, islands, operators, seeds, gpus, ... */
    char *result_json;                 /* the final report, NULL while running */
    enum kevo_run_status status;
    double started, updated;           /* Unix seconds */
    int sessions;                      /* 1 + the times it was resumed */
    struct kevo_proc_id owner;         /* the process that ran its latest session (schema 5;
                                          zeroes in older rows): while the status says
                                          RUNNING, kevo_proc_check tells whether it still
                                          does */
};
void kevo_archive_run_clear(struct kevo_run_rec *r);

/* A new run (status RUNNING) for the task text (stored in sources), owned by the calling
 * process (kevo_proc_self). */
KEVO_NODISCARD enum kevo_status kevo_archive_run_create(struct kevo_archive *a,
                                                        const char *task_name,
                                                        const char *task_path,
                                                        const char *task_text, size_t task_len,
                                                        const char *config_json, int64_t *id);
KEVO_NODISCARD enum kevo_status kevo_archive_run_get(struct kevo_archive *a, int64_t id,
                                                     struct kevo_run_rec *out);
/* Status and (optional, may be NULL: the stored one stays) result; updates `updated`
 * (which also follows candidate activity: the run's last write). Status RUNNING is how a
 * resumed run starts its next session: it counts one more session, owned by the calling
 * process (kevo_proc_self). */
KEVO_NODISCARD enum kevo_status kevo_archive_run_finish(struct kevo_archive *a, int64_t id,
                                                        enum kevo_run_status st,
                                                        const char *result_json);
/* The run's report (result_json) replaced, its status, sessions and owner kept, and
 * `updated` set: for a run that reports as it goes (an agent's session, ctl/trail.h).
 * KEVO_ERR_NOTFOUND for an unknown run. */
KEVO_NODISCARD enum kevo_status kevo_archive_run_report(struct kevo_archive *a, int64_t id,
                                                        const char *result_json);
/* Every run, newest first, as a JSON array text of {id, task, path, status, started,
 * updated, n_candidates, n_ok, best_score, owner: {pid, host, start} or null when not
 * recorded} (kevo_free it). The status is the stored one. */
KEVO_NODISCARD enum kevo_status kevo_archive_runs_json(struct kevo_archive *a, char **out_json);

/* ---- candidates ---- */

enum kevo_cand_state { KEVO_CAND_PENDING = 0, KEVO_CAND_DONE, KEVO_CAND_ANY /* queries */ };

struct kevo_cand_rec {
    int64_t id, run_id;
    int64_t parent1, parent2;          /* 0: none */
    char source_hash[KEVO_HASH_HEX];
    char key[KEVO_HASH_HEX];           /* identity: SHA-256 of source hash + params + flags */
    char op[32];                       /* operator that proposed it: "seed", "param", ... */
    char *params_json;                 /* {"NAME": value, ...} chosen for the candidate */
    char *flags_json;                  /* ["-use_fast_math", ...] */
    char *descriptors_json;            /* the kernel's descriptors (search.c) */
    int island, cell;                  /* MAP-Elites cell; -1 when not placed */
    int generation;
    enum kevo_cand_state state;
    enum kevo_verdict verdict;         /* meaningful only when state is DONE (0 while
                                          pending); stored as its name (kevo_verdict_name) */
    double score;                      /* lower is better (seconds, geomean); valid when ok */
    double sol_fraction, speedup;      /* geomeans over visible workloads */
                                       /* (the three read NAN when not stored) */
    char *metrics_json;                /* per-workload metrics and resources */
    double created, finished;          /* Unix seconds; finished 0 while pending */
    int64_t step;                      /* its verdict's step in the run's log; 0: none */
    int improved;                      /* ok and faster than its (ok) first parent */
};
void kevo_archive_cand_clear(struct kevo_cand_rec *c);
/* c's verdict as stored and shown: its name, or "" while pending. Never NULL. */
const char *kevo_archive_cand_verdict(const struct kevo_cand_rec *c);

/*
 * Record a proposal (state PENDING) before it is evaluated. r->key must be set (the
 * caller computes it from source hash, params and flags); KEVO_ERR_INVALID if the run
 * already has that key (*id gets the existing candidate) - the search never evaluates one
 * twice. r->source_hash must already be stored (kevo_archive_source_put), r->op set, and
 * the run and parents (0: none) must exist, else KEVO_ERR_INVALID with *id 0. Fields id,
 * state, verdict, score, sol_fraction, speedup, metrics_json, finished are ignored;
 * created 0 means now.
 */
KEVO_NODISCARD enum kevo_status kevo_archive_cand_add(struct kevo_archive *a,
                                                      const struct kevo_cand_rec *r,
                                                      int64_t *id);
/* The candidate with key in run, KEVO_ERR_NOTFOUND if none. */
KEVO_NODISCARD enum kevo_status kevo_archive_cand_by_key(struct kevo_archive *a, int64_t run,
                                                         const char *key, int64_t *id);
/*
 * The verdict arrived: store it with its metrics and the full eval result (in the
 * evaluations table, kind "verify"; none when result_json is NULL), state DONE, in one
 * transaction. The verdict is stored as its name (kevo_verdict_name), the text the schema's
 * `verdict = 'ok'` rules read. KEVO_VERDICT_OK needs a finite score, a value outside enum
 * kevo_verdict is refused (KEVO_ERR_INVALID both); non-finite sol_fraction/speedup are
 * stored as "not measured". KEVO_ERR_NOTFOUND for an unknown id.
 */
KEVO_NODISCARD enum kevo_status kevo_archive_cand_finish(struct kevo_archive *a, int64_t id,
                                                         enum kevo_verdict verdict, double score,
                                                         double sol_fraction, double speedup,
                                                         const char *metrics_json,
                                                         const char *result_json);
/* The same, as step `step` (> 0) of the run's log (kevo_archive_steps). */
KEVO_NODISCARD enum kevo_status kevo_archive_cand_finish_step(struct kevo_archive *a, int64_t id,
                                                              int64_t step,
                                                              enum kevo_verdict verdict,
                                                              double score, double sol_fraction,
                                                              double speedup,
                                                              const char *metrics_json,
                                                              const char *result_json);
/* Placement in the grid (after the verdict; cell -1 for none). descriptors_json NULL
 * keeps the stored one. */
KEVO_NODISCARD enum kevo_status kevo_archive_cand_place(struct kevo_archive *a, int64_t id,
                                                        int island, int cell,
                                                        const char *descriptors_json);
/* Candidate id into *out (kevo_archive_cand_clear it); KEVO_ERR_IO for a malformed row, one
 * DONE with a verdict text that names no verdict of enum kevo_verdict among them. */
KEVO_NODISCARD enum kevo_status kevo_archive_cand_get(struct kevo_archive *a, int64_t id,
                                                      struct kevo_cand_rec *out);
/* Ids of the run's candidates in `state` (KEVO_CAND_ANY: all), oldest first (kevo_free
 * *ids). */
KEVO_NODISCARD enum kevo_status kevo_archive_cand_ids(struct kevo_archive *a, int64_t run,
                                                      enum kevo_cand_state state,
                                                      int64_t **ids, int *n);
/* Up to n ids of the run's best `ok` candidates (lowest score first); island -1: all. */
KEVO_NODISCARD enum kevo_status kevo_archive_best(struct kevo_archive *a, int64_t run,
                                                  int island, int n, int64_t *ids, int *n_out);
/* The elite (best ok) of every occupied cell of an island: parallel arrays of at most
 * cap entries (cells ascending). */
KEVO_NODISCARD enum kevo_status kevo_archive_elites(struct kevo_archive *a, int64_t run,
                                                    int island, int cap, int *cells,
                                                    int64_t *ids, int *n_out);
/* Totals of a run: candidates, done, ok (kept by triggers: one row lookup).
 * KEVO_ERR_NOTFOUND for an unknown run. */
KEVO_NODISCARD enum kevo_status kevo_archive_counts(struct kevo_archive *a, int64_t run,
                                                    int64_t *n, int64_t *n_done, int64_t *n_ok);
/* Per operator: {op: {proposed, done, ok, improved}} as JSON text (kevo_free it);
 * "improved" counts ok candidates whose score beat their first parent's, judged when the
 * candidate's verdict is stored (against an ok parent: seeds and children of failed
 * parents never count). Kept by triggers: a lookup, not a scan. */
KEVO_NODISCARD enum kevo_status kevo_archive_op_stats_json(struct kevo_archive *a, int64_t run,
                                                           char **out_json);

/* ---- evaluations ---- */

/* Another evaluation of a candidate (e.g. kind "holdout"): its full result JSON. */
KEVO_NODISCARD enum kevo_status kevo_archive_eval_add(struct kevo_archive *a, int64_t cand,
                                                      const char *kind,
                                                      const char *result_json);
/* The latest evaluation of a kind (kevo_free it); KEVO_ERR_NOTFOUND if none. */
KEVO_NODISCARD enum kevo_status kevo_archive_eval_get(struct kevo_archive *a, int64_t cand,
                                                      const char *kind, char **result_json);

/* ---- LLM calls (the LLM operators' issue fills these) ---- */

struct kevo_llm_call_rec {
    int64_t run_id, cand_id;           /* cand_id 0 when no candidate came of it */
    const char *model;                 /* "openai:gpt-5@https://host/v1" (never a key) */
    const char *op;
    char prompt_hash[KEVO_HASH_HEX];   /* of model + prompt + sampling parameters */
    const char *prompt, *reply;        /* texts (the reply may be NULL on failure) */
    int64_t tokens_in, tokens_out;
    double cost, latency_s;
    const char *status;                /* "ok", "http_429", "timeout", "parse_error", ... */
    int64_t step;                      /* its reply's step in the run's log; 0: none */
    int64_t submitted;                 /* its place among the session's submitted calls */
    /* schema 4: what the call needs to be made elsewhere and its reply used here later
     * (docs/llm.md "Air-gapped clusters"); zeroes where unknown */
    const char *spec;                  /* the model spec as given ("openai:o3?..."; it names
                                          a key's variable, never a key); NULL: unknown */
    const char *settings;              /* JSON: the settings the model is asked with (the
                                          spec's, and the run's defaults where it sets none:
                                          temperature, max_output, ...); NULL: unknown */
    int64_t system_len;                /* bytes of the system text when prompt is
                                          "[system]\n" SYSTEM "\n[user]\n" USER */
    int64_t parent1, parent2;          /* the candidates the prompt showed; 0: none */
    int island;                        /* the island its candidate goes to */
    double parent_score;               /* parent1's score as the call saw it; 0: none */
    char plan_hash[KEVO_HASH_HEX];     /* a plan's second call: the first's prompt hash */
    int64_t tokens_cached_in;          /* of tokens_in, read from the provider's cache */
    int64_t tokens_reasoning;          /* of tokens_out, spent thinking */
    int64_t answers;                   /* the pending call whose imported reply this call
                                          used (which marks that reply used); 0: none */
};
KEVO_NODISCARD enum kevo_status kevo_archive_llm_add(struct kevo_archive *a,
                                                     const struct kevo_llm_call_rec *r,
                                                     int64_t *id);
/* The reply of the latest ok (or imported) call with prompt_hash (any run); NOTFOUND. */
KEVO_NODISCARD enum kevo_status kevo_archive_llm_cached(struct kevo_archive *a,
                                                        const char *prompt_hash, char **reply);
/* Total cost of a run's LLM calls. */
KEVO_NODISCARD enum kevo_status kevo_archive_llm_cost(struct kevo_archive *a, int64_t run,
                                                      double *cost);

/* The run's LLM calls, oldest first (kevo_archive_llm_rows_free them). */
struct kevo_llm_row {
    int64_t id, cand_id, step, submitted, tokens_in, tokens_out;
    int64_t tokens_cached_in, tokens_reasoning;   /* of tokens_in, of tokens_out */
    double cost, latency_s;
    double created;                      /* Unix seconds: when it was recorded */
    char *model, *op, *reply, *status;   /* reply NULL when there was none */
    char prompt_hash[KEVO_HASH_HEX];
};
KEVO_NODISCARD enum kevo_status kevo_archive_llm_rows(struct kevo_archive *a, int64_t run,
                                                      struct kevo_llm_row **rows, int *n);
void kevo_archive_llm_rows_free(struct kevo_llm_row *rows, int n);   /* NULL: no-op */
/*
 * What each model of a run did, as JSON (kevo_free it), models by name: [{"model",
 * "calls": {STATUS: n} (the status without its message: "unusable", "http_429",
 * "cached", "replay: ok", ...), "n_calls", "tokens": {"in", "cached_in", "out",
 * "reasoning"}, "cost", "latency_s" (both summed), "candidates" (evaluated candidates its
 * replies became), "ok" (of those, correct), "improved" (of those, faster than their
 * parent)}]. A model without a price has cost 0 here: the caller knows the prices.
 */
KEVO_NODISCARD enum kevo_status kevo_archive_llm_models_json(struct kevo_archive *a, int64_t run,
                                                             char **out_json);

/* ---- pending calls and imported replies (docs/llm.md "Air-gapped clusters") ---- */

/*
 * A call an offline session could not make (status "not_cached"), with what it takes to
 * make it elsewhere and to turn its reply into a candidate later; for
 * kevo_archive_llm_imported, with the reply imported for it.
 */
struct kevo_llm_wanted {
    int64_t id, run_id;                /* the llm_calls row: the call's id in exchanges */
    char *model, *spec, *op;           /* spec NULL when not recorded (before schema 4) */
    char *settings;                    /* JSON, as recorded; NULL when not recorded */
    char *system, *user;               /* the prompt, split; system NULL when it cannot be
                                          (user is then the whole recorded prompt) */
    char prompt_hash[KEVO_HASH_HEX], plan_hash[KEVO_HASH_HEX];   /* plan_hash "": none */
    int64_t parent1, parent2;          /* 0: none */
    int island;
    double parent_score;
    char *reply;                       /* the imported reply (NULL from _pending) */
    int64_t tokens_in, tokens_out, tokens_cached_in, tokens_reasoning;
    double latency_s;
};
void kevo_archive_llm_wanted_free(struct kevo_llm_wanted *w, int n);   /* NULL: no-op */
/*
 * The calls of run that wait for a reply, oldest first (kevo_archive_llm_wanted_free
 * them): status "not_cached", no reply imported for them, and the newest call of the run
 * that asked their prompt and got no answer (an older one asking the same prompt is not
 * listed twice: one reply serves it).
 */
KEVO_NODISCARD enum kevo_status kevo_archive_llm_pending(struct kevo_archive *a, int64_t run,
                                                         struct kevo_llm_wanted **out, int *n);
/* The run's calls with an imported reply that no session used yet, oldest first. */
KEVO_NODISCARD enum kevo_status kevo_archive_llm_imported(struct kevo_archive *a, int64_t run,
                                                          struct kevo_llm_wanted **out, int *n);

/* Where a call stands for an import (kevo_archive_llm_state). */
enum kevo_llm_call_state {
    KEVO_LLM_CALL_PENDING = 0,         /* not_cached, no reply imported */
    KEVO_LLM_CALL_IMPORTED,            /* a reply was imported, no session used it yet */
    KEVO_LLM_CALL_USED,                /* a session used its imported reply */
    KEVO_LLM_CALL_ANSWERED             /* not a call that waits: it was made (or refused by
                                          a cap, or failed) */
};
/* Call id's run, prompt hash and state; KEVO_ERR_NOTFOUND when the archive has no such
 * call. */
KEVO_NODISCARD enum kevo_status kevo_archive_llm_state(struct kevo_archive *a, int64_t id,
                                                       int64_t *run,
                                                       char prompt_hash[KEVO_HASH_HEX],
                                                       enum kevo_llm_call_state *state);

/* A reply to a pending call, as `kevo llm import` stores it. */
struct kevo_llm_import_rec {
    int64_t call;                      /* the pending call (an llm_calls row id) */
    const char *reply;
    int64_t tokens_in, tokens_out, tokens_cached_in, tokens_reasoning;   /* 0: not said */
    double latency_s;
    const char *model;                 /* who answered, as the file says; NULL: not said */
    const char *source;                /* where it came from (a file name); NULL: none */
};
/*
 * Store n replies in one transaction: all or none. Each call must be pending or imported
 * (an imported reply not used yet is replaced), else KEVO_ERR_INVALID naming the call.
 */
KEVO_NODISCARD enum kevo_status kevo_archive_llm_import(struct kevo_archive *a,
                                                        const struct kevo_llm_import_rec *r,
                                                        int n);

/* ---- the step log ---- */

/*
 * The order in which a run's controller handled what came back to it: each evaluation
 * result (a candidate's verdict) and each LLM reply (a call) is one step, numbered from 1
 * per session. `kevo run --replay` feeds a run's steps back in this order.
 */
enum kevo_step_kind { KEVO_STEP_EVAL = 0, KEVO_STEP_LLM };
struct kevo_step {
    int64_t step;
    enum kevo_step_kind kind;
    int64_t id;                        /* the candidate (EVAL) or the LLM call (LLM) */
};
/* The run's steps in order (kevo_free *steps). */
KEVO_NODISCARD enum kevo_status kevo_archive_steps(struct kevo_archive *a, int64_t run,
                                                   struct kevo_step **steps, int *n);

/* ---- tests only ---- */

/* The SQL of migration step v (schema v to v + 1), to forge old files; NULL past the end. */
const char *kevo_archive_test_migration(int v);
/* Cap the file at max_pages pages (PRAGMA max_page_count, per connection; 0 leaves it)
 * to simulate a full disk, and set the busy timeout to busy_ms (< 0 leaves it). */
KEVO_NODISCARD enum kevo_status kevo_archive_test_limits(struct kevo_archive *a,
                                                         int64_t max_pages, int busy_ms);

#endif

/*
 * trail - the archive record of a coding agent's work through `kevo mcp` (docs/agents.md
 * "The trail"). Every candidate the agent evaluates becomes a candidate of an archive run,
 * one run per task and server session, proposed by operator "agent" with the parent the
 * agent names. So an agent's work has lineage, is listed by `kevo runs`, reads with
 * `kevo show`, exports with `kevo export`, and `kevo run --resume RUN` goes on searching
 * from it: its ok candidates are placed in the search's grid (island 0) as a run's are.
 *
 * A trail run reports as it goes: after each candidate its report (the runs table's
 * result_json, kevo_archive_run_report) is rewritten from the archive: reason "agent",
 * evaluations, ok, best (as kevo run's report has it), the reference's timed workloads
 * (the interleaved reference times of the first timed result), and "final" once the
 * held-out gate chose a candidate for export (kevo_trail_final). The runs stay `running`,
 * owned by the server, while its session lasts; kevo_trail_free records them `stopped`,
 * so they can be resumed. Runs of other sessions are never written but by
 * kevo_trail_final (an export of an older agent run).
 *
 * A trail is used by one thread.
 */
#ifndef KEVO_TRAIL_H
#define KEVO_TRAIL_H

#include "kevo.h"
#include "ctl/archive.h"
#include "ctl/genome.h"
#include "core/task.h"
#include <jansson.h>
#include <stdint.h>

struct kevo_trail;                     /* opaque */

/* Open the archive at path (created when missing). client names the agent in the runs'
 * config ("claude-code 2.1", may be NULL). *out_msg (kevo_free) says why on failure. */
KEVO_NODISCARD enum kevo_status kevo_trail_open(const char *path, const char *client,
                                                struct kevo_trail **out, char **out_msg);
/* End the session: each of its runs recorded `stopped` with its report. NULL: no-op. */
void kevo_trail_free(struct kevo_trail *t);
/* The archive (borrowed while the trail lives). */
struct kevo_archive *kevo_trail_archive(struct kevo_trail *t);
/* Is run an agent's run (its config says operator "agent")? 0 for an unknown one. */
int kevo_trail_is_agent_run(struct kevo_trail *t, int64_t run);

/* The session's run of task (created on first use of its text); backend goes into the
 * run's config, as kevo run's does. */
KEVO_NODISCARD enum kevo_status kevo_trail_run(struct kevo_trail *t, const struct kevo_task *task,
                                               const char *task_path, const char *backend,
                                               int64_t *run, char **out_msg);

/* The best ok candidate of this session's run of task (by its text); 0 when the session
 * has no run of it or no ok candidate there. */
int64_t kevo_trail_best(struct kevo_trail *t, const struct kevo_task *task);

/* One evaluated candidate, as kevo_trail_record takes it (all borrowed). */
struct kevo_trail_cand {
    int64_t run;                       /* kevo_trail_run's */
    const struct kevo_task *task;
    const char *text;                  /* what was evaluated: the genome's text, or the file
                                          as given when it does not parse */
    size_t len;
    const struct kevo_genome *g;       /* NULL when the text does not parse */
    int64_t parent;                    /* a candidate of the archive; 0: none */
    json_t *result;                    /* its eval result (docs/eval-json.md) */
    json_t *holdout;                   /* the held-out evaluation's result, or NULL */
};

/*
 * Record c: a new candidate (op "agent"), its verdict, figures and result, its held-out
 * result (evaluation kind "holdout"), its place in the grid when ok; then the run's
 * report. *id is its id; *dup 1 when the run already had this text (then nothing is
 * recorded and *id is the earlier candidate). A parent the archive does not have is
 * KEVO_ERR_NOTFOUND naming it. *out_msg (kevo_free) says why on failure.
 */
KEVO_NODISCARD enum kevo_status kevo_trail_record(struct kevo_trail *t,
                                                  const struct kevo_trail_cand *c, int64_t *id,
                                                  int *dup, char **out_msg);

/*
 * The held-out gate's outcome for export: final (0: none passed) is written into run's
 * report as its "final" ({"id", "holdout": how, e.g. "ok" or "none declared"}), with
 * rejected (borrowed: [{"id", "verdict", "message"}]) as "holdout_rejected".
 */
KEVO_NODISCARD enum kevo_status kevo_trail_final(struct kevo_trail *t, int64_t run, int64_t final,
                                                 const char *how, json_t *rejected,
                                                 char **out_msg);

/* Geometric means of an eval result over its timed workloads: median time, fraction of
 * SOL, same-run speedup over the reference (0 when none was measured). */
void kevo_trail_summary(json_t *result, double *time_s, double *sol, double *speedup);

#endif

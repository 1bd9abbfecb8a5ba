/*
 * run - `kevo run` (docs/search.md): the controller of one search. It owns the archive
 * record of the run, one thread per worker slot (one slot per device), the search state,
 * the operators, the budgets and the held-out gate. Its public entry points (kevo_run,
 * kevo_runs_json, kevo_run_opts_default) are declared in kevo.h; this header gathers the
 * module's internal helpers that tests use.
 */
#ifndef KEVO_RUN_H
#define KEVO_RUN_H

#include "kevo.h"
#include <jansson.h>
#include <stddef.h>

struct kevo_archive;

/* The task file as a candidate: every directive but launch/call turned into a plain
 * comment (the starting point when no --seed is given). kevo_free the result. */
KEVO_NODISCARD enum kevo_status kevo_run_reference_candidate(const char *task_text, size_t len,
                                                             char **out, size_t *out_len);

/* The archive path: $KEVO_ARCHIVE, else $XDG_DATA_HOME/kevo/archive.db, else
 * ~/.local/share/kevo/archive.db. */
KEVO_NODISCARD enum kevo_status kevo_run_default_archive(char *out, size_t n);

/* What each LLM model of run did (kevo_archive_llm_models_json), "cost" null for a model
 * that has no price: prices ({"NAME": {...}}, the run's "prices_used") lacks its name and
 * its calls cost nothing. A new reference; JSON null when the archive cannot say. */
json_t *kevo_runs_llm_models(struct kevo_archive *a, int64_t run, const json_t *prices);

#endif

/*
 * archive_int - what archive.c (the records) and archive_sql.c (the schema and the SQL
 * of every statement) share. Private to the archive; the contract is archive.h.
 */
#ifndef KEVO_ARCHIVE_INT_H
#define KEVO_ARCHIVE_INT_H

#include "ctl/archive.h"

/* migrations[v] takes a database from user_version v to v + 1 (KEVO_ARCHIVE_SCHEMA steps). */
extern const char *const kevo_archive_migrations[KEVO_ARCHIVE_SCHEMA];

enum stmt_id {
    S_BEGIN, S_COMMIT, S_ROLLBACK,
    S_APP_ID, S_VERSION, S_N_OBJECTS,
    S_SRC_PUT, S_SRC_GET,
    S_RUN_ADD, S_RUN_GET, S_RUN_FINISH, S_RUNS,
    S_CAND_ADD, S_CAND_KEY, S_CAND_FINISH, S_CAND_PLACE, S_CAND_GET, S_CAND_IDS,
    S_BEST_ALL, S_BEST_ISLAND, S_ELITE_NEXT, S_COUNTS, S_OP_STATS,
    S_EVAL_ADD, S_EVAL_GET,
    S_LLM_ADD, S_LLM_CACHED, S_LLM_COST, S_LLM_ROWS, S_STEPS, S_CAND_ALL,
    S_COUNT
};

#define CAND_COLS                                                                        \
    "id, run_id, coalesce(parent1, 0), coalesce(parent2, 0), source_hash, key, op,"      \
    " params_json, flags_json, descriptors_json, island, cell, generation, state,"       \
    " verdict, score, sol_fraction, speedup, metrics_json, created, finished, coalesce(step, 0),"     \
    " improved"

/* The SQL of each statement (prepared once per handle). */
extern const char *const kevo_archive_stmt_sql[S_COUNT];

#endif

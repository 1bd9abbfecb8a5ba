/*
 * archive_sql - the archive's schema (its migrations) and the SQL of every statement it
 * prepares (archive_int.h). Data only: archive.c runs them.
 */
#include "ctl/archive_int.h"

/* ---- schema and migrations ---- */

/*
 * migrations[v] takes a database from user_version v to v + 1. Steps are only ever
 * appended; a released step is never edited (files in the field went through it).
 */
const char *const kevo_archive_migrations[] = {
    /* 0 -> 1: everything */
    "CREATE TABLE meta ("
    "  key   TEXT PRIMARY KEY,"
    "  value TEXT NOT NULL);"
    "INSERT INTO meta(key, value) VALUES ('format', 'kevo-archive'),"
    "  ('created', strftime('%Y-%m-%dT%H:%M:%SZ', 'now')), ('created_by', '" KEVO_VERSION "');"
    "CREATE TABLE sources ("
    "  hash   TEXT PRIMARY KEY,"
    "  text   BLOB NOT NULL,"
    "  length INTEGER NOT NULL);"
    "CREATE TABLE runs ("
    "  id          INTEGER PRIMARY KEY,"
    "  task_name   TEXT NOT NULL,"
    "  task_path   TEXT,"
    "  task_hash   TEXT NOT NULL REFERENCES sources(hash),"
    "  config_json TEXT NOT NULL,"
    "  result_json TEXT,"
    "  status      TEXT NOT NULL"
    "              CHECK (status IN ('running', 'done', 'stopped', 'failed')),"
    "  started     REAL NOT NULL,"
    "  updated     REAL NOT NULL,"
    "  n_cands     INTEGER NOT NULL DEFAULT 0,"
    "  n_done      INTEGER NOT NULL DEFAULT 0,"
    "  n_ok        INTEGER NOT NULL DEFAULT 0);"
    /* small columns first, JSON last: a row's head answers most reads without
     * touching its overflow pages */
    "CREATE TABLE candidates ("
    "  id               INTEGER PRIMARY KEY,"
    "  run_id           INTEGER NOT NULL REFERENCES runs(id),"
    "  key              TEXT NOT NULL,"
    "  source_hash      TEXT NOT NULL REFERENCES sources(hash),"
    "  parent1          INTEGER REFERENCES candidates(id),"
    "  parent2          INTEGER REFERENCES candidates(id),"
    "  op               TEXT NOT NULL,"
    "  island           INTEGER NOT NULL DEFAULT -1,"
    "  cell             INTEGER NOT NULL DEFAULT -1,"
    "  generation       INTEGER NOT NULL DEFAULT 0,"
    "  state            TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done')),"
    "  verdict          TEXT NOT NULL DEFAULT '',"
    "  score            REAL,"
    "  sol_fraction     REAL,"
    "  speedup          REAL,"
    "  improved         INTEGER NOT NULL DEFAULT 0,"
    "  created          REAL NOT NULL,"
    "  finished         REAL,"
    "  params_json      TEXT,"
    "  flags_json       TEXT,"
    "  descriptors_json TEXT,"
    "  metrics_json     TEXT,"
    "  UNIQUE (run_id, key));"
    /* the queries the search makes every step; partial indexes hold only ok rows */
    "CREATE INDEX cand_state ON candidates(run_id, state);"
    "CREATE INDEX cand_ok ON candidates(run_id, score) WHERE verdict = 'ok';"
    "CREATE INDEX cand_ok_island ON candidates(run_id, island, score) WHERE verdict = 'ok';"
    "CREATE INDEX cand_ok_cell ON candidates(run_id, island, cell, score)"
    "  WHERE verdict = 'ok';"
    "CREATE TABLE evaluations ("
    "  id      INTEGER PRIMARY KEY,"
    "  cand_id INTEGER NOT NULL REFERENCES candidates(id),"
    "  kind    TEXT NOT NULL,"
    "  result  TEXT NOT NULL,"
    "  created REAL NOT NULL);"
    "CREATE INDEX eval_cand ON evaluations(cand_id, kind);"
    "CREATE TABLE llm_calls ("
    "  id          INTEGER PRIMARY KEY,"
    "  run_id      INTEGER NOT NULL REFERENCES runs(id),"
    "  cand_id     INTEGER REFERENCES candidates(id),"
    "  model       TEXT NOT NULL,"
    "  op          TEXT NOT NULL,"
    "  prompt_hash TEXT NOT NULL,"
    "  prompt      TEXT NOT NULL,"
    "  reply       TEXT,"
    "  tokens_in   INTEGER NOT NULL,"
    "  tokens_out  INTEGER NOT NULL,"
    "  cost        REAL NOT NULL,"
    "  latency_s   REAL NOT NULL,"
    "  status      TEXT NOT NULL,"
    "  created     REAL NOT NULL);"
    "CREATE INDEX llm_prompt ON llm_calls(prompt_hash);"
    "CREATE INDEX llm_run ON llm_calls(run_id);"
    "CREATE TABLE op_stats ("
    "  run_id   INTEGER NOT NULL REFERENCES runs(id),"
    "  op       TEXT NOT NULL,"
    "  proposed INTEGER NOT NULL DEFAULT 0,"
    "  done     INTEGER NOT NULL DEFAULT 0,"
    "  ok       INTEGER NOT NULL DEFAULT 0,"
    "  improved INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (run_id, op)) WITHOUT ROWID;"
    /* run and operator counters move with the candidate rows, in the same transaction,
     * so counts and op stats are lookups, not scans of the run */
    "CREATE TRIGGER cand_count_ins AFTER INSERT ON candidates BEGIN"
    "  UPDATE runs SET n_cands = n_cands + 1,"
    "                  n_done = n_done + (NEW.state = 'done'),"
    "                  n_ok = n_ok + (NEW.verdict = 'ok'),"
    "                  updated = max(updated, NEW.created)"
    "   WHERE id = NEW.run_id;"
    "  INSERT INTO op_stats(run_id, op) SELECT NEW.run_id, NEW.op WHERE NOT EXISTS"
    "    (SELECT 1 FROM op_stats WHERE run_id = NEW.run_id AND op = NEW.op);"
    "  UPDATE op_stats SET proposed = proposed + 1,"
    "                      done = done + (NEW.state = 'done'),"
    "                      ok = ok + (NEW.verdict = 'ok'),"
    "                      improved = improved + NEW.improved"
    "   WHERE run_id = NEW.run_id AND op = NEW.op;"
    "END;"
    "CREATE TRIGGER cand_count_upd AFTER UPDATE OF state, verdict, improved ON candidates"
    " BEGIN"
    "  UPDATE runs SET n_done = n_done + (NEW.state = 'done') - (OLD.state = 'done'),"
    "                  n_ok = n_ok + (NEW.verdict = 'ok') - (OLD.verdict = 'ok'),"
    "                  updated = max(updated, coalesce(NEW.finished, updated))"
    "   WHERE id = NEW.run_id;"
    "  UPDATE op_stats SET done = done + (NEW.state = 'done') - (OLD.state = 'done'),"
    "                      ok = ok + (NEW.verdict = 'ok') - (OLD.verdict = 'ok'),"
    "                      improved = improved + NEW.improved - OLD.improved"
    "   WHERE run_id = NEW.run_id AND op = NEW.op;"
    "END;"
    "CREATE TRIGGER cand_count_del AFTER DELETE ON candidates BEGIN"
    "  UPDATE runs SET n_cands = n_cands - 1,"
    "                  n_done = n_done - (OLD.state = 'done'),"
    "                  n_ok = n_ok - (OLD.verdict = 'ok')"
    "   WHERE id = OLD.run_id;"
    "  UPDATE op_stats SET proposed = proposed - 1,"
    "                      done = done - (OLD.state = 'done'),"
    "                      ok = ok - (OLD.verdict = 'ok'),"
    "                      improved = improved - OLD.improved"
    "   WHERE run_id = OLD.run_id AND op = OLD.op;"
    "END;",
    /* 1 -> 2: the step log (the order in which the controller handled results and
     * replies, for `kevo run --replay`) and the number of sessions of a run */
    "ALTER TABLE candidates ADD COLUMN step INTEGER;"
    "ALTER TABLE llm_calls ADD COLUMN step INTEGER;"
    "ALTER TABLE runs ADD COLUMN sessions INTEGER NOT NULL DEFAULT 1;",
    /* 2 -> 3: each LLM call's place in its session's submissions (calls in flight
     * together come back in any order; a replay matches them by this) */
    "ALTER TABLE llm_calls ADD COLUMN submitted INTEGER;",
    /* 3 -> 4: what a call needs to be made on another machine and its reply used here
     * later (docs/llm.md "Air-gapped clusters"); the replies imported for the calls an
     * offline session could not make, and which call of a later session used each */
    "ALTER TABLE llm_calls ADD COLUMN spec TEXT;"
    "ALTER TABLE llm_calls ADD COLUMN settings TEXT;"
    "ALTER TABLE llm_calls ADD COLUMN system_len INTEGER;"
    "ALTER TABLE llm_calls ADD COLUMN parent1 INTEGER REFERENCES candidates(id);"
    "ALTER TABLE llm_calls ADD COLUMN parent2 INTEGER REFERENCES candidates(id);"
    "ALTER TABLE llm_calls ADD COLUMN island INTEGER;"
    "ALTER TABLE llm_calls ADD COLUMN parent_score REAL;"
    "ALTER TABLE llm_calls ADD COLUMN plan_hash TEXT;"
    "ALTER TABLE llm_calls ADD COLUMN tokens_cached_in INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE llm_calls ADD COLUMN tokens_reasoning INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE llm_calls ADD COLUMN answers INTEGER REFERENCES llm_calls(id);"
    "CREATE INDEX llm_answers ON llm_calls(answers) WHERE answers IS NOT NULL;"
    "CREATE TABLE llm_imports ("
    "  call_id          INTEGER PRIMARY KEY REFERENCES llm_calls(id),"
    "  reply            TEXT NOT NULL,"
    "  tokens_in        INTEGER NOT NULL DEFAULT 0,"
    "  tokens_out       INTEGER NOT NULL DEFAULT 0,"
    "  tokens_cached_in INTEGER NOT NULL DEFAULT 0,"
    "  tokens_reasoning INTEGER NOT NULL DEFAULT 0,"
    "  latency_s        REAL NOT NULL DEFAULT 0,"
    "  model            TEXT,"
    "  source           TEXT,"
    "  created          REAL NOT NULL);",
    /* 4 -> 5: the process that runs a run (its latest session): a run left `running` by
     * a controller that died shows as interrupted (docs/archive.md "runs"); NULL in rows
     * of older files, which then cannot be told from a live run */
    "ALTER TABLE runs ADD COLUMN owner_pid INTEGER;"
    "ALTER TABLE runs ADD COLUMN owner_host TEXT;"
    "ALTER TABLE runs ADD COLUMN owner_start INTEGER;",
};
_Static_assert(sizeof kevo_archive_migrations / sizeof kevo_archive_migrations[0] == KEVO_ARCHIVE_SCHEMA,
               "one migration step per schema version");

/* ---- statements ---- */

const char *const kevo_archive_stmt_sql[S_COUNT] = {
    [S_BEGIN]    = "BEGIN IMMEDIATE",
    [S_COMMIT]   = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_APP_ID]   = "PRAGMA application_id",
    [S_VERSION]  = "PRAGMA user_version",
    [S_N_OBJECTS] = "SELECT count(*) FROM sqlite_master",
    [S_SRC_PUT]  = "INSERT INTO sources(hash, text, length) VALUES (?1, ?2, ?3)"
                   " ON CONFLICT(hash) DO NOTHING",
    [S_SRC_GET]  = "SELECT text, length FROM sources WHERE hash = ?1",
    [S_RUN_ADD]  = "INSERT INTO runs(task_name, task_path, task_hash, config_json, status,"
                   " started, updated, owner_pid, owner_host, owner_start)"
                   " VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?5, ?6, ?7, ?8)",
    [S_RUN_GET]  = "SELECT id, task_name, task_path, task_hash, config_json, result_json,"
                   " status, started, updated, sessions, coalesce(owner_pid, 0), owner_host,"
                   " coalesce(owner_start, 0) FROM runs WHERE id = ?1",
    /* back to running: a resumed run's next session, run by the process that says so */
    [S_RUN_FINISH] = "UPDATE runs SET status = ?2, result_json = coalesce(?3, result_json),"
                     " updated = ?4, sessions = sessions + (?2 = 'running'),"
                     " owner_pid = CASE ?2 WHEN 'running' THEN ?5 ELSE owner_pid END,"
                     " owner_host = CASE ?2 WHEN 'running' THEN ?6 ELSE owner_host END,"
                     " owner_start = CASE ?2 WHEN 'running' THEN ?7 ELSE owner_start END"
                     " WHERE id = ?1",
    /* the report of a run that reports as it goes (an agent's, ctl/trail.c): no session */
    [S_RUN_REPORT] = "UPDATE runs SET result_json = ?2, updated = ?3 WHERE id = ?1",
    [S_RUNS]     = "SELECT r.id, r.task_name, r.task_path, r.status, r.started, r.updated,"
                   " r.n_cands, r.n_ok, (SELECT min(c.score) FROM candidates c"
                   "  WHERE c.run_id = r.id AND c.verdict = 'ok'),"
                   " coalesce(r.owner_pid, 0), r.owner_host, coalesce(r.owner_start, 0)"
                   " FROM runs r ORDER BY r.id DESC",
    [S_CAND_ADD] = "INSERT INTO candidates(run_id, key, source_hash, parent1, parent2, op,"
                   " params_json, flags_json, descriptors_json, island, cell, generation,"
                   " created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                   " ON CONFLICT(run_id, key) DO NOTHING",
    [S_CAND_KEY] = "SELECT id FROM candidates WHERE run_id = ?1 AND key = ?2",
    /* "improved" is judged once, against the first parent as it stands now */
    [S_CAND_FINISH] = "UPDATE candidates SET state = 'done', verdict = ?2, score = ?3,"
                      " sol_fraction = ?4, speedup = ?5, metrics_json = ?6, finished = ?7, step = ?8,"
                      " improved = (?2 = 'ok' AND coalesce((SELECT ?3 < p.score"
                      "  FROM candidates p WHERE p.id = candidates.parent1"
                      "  AND p.verdict = 'ok'), 0))"
                      " WHERE id = ?1",
    [S_CAND_PLACE] = "UPDATE candidates SET island = ?2, cell = ?3,"
                     " descriptors_json = coalesce(?4, descriptors_json) WHERE id = ?1",
    [S_CAND_GET] = "SELECT " CAND_COLS " FROM candidates WHERE id = ?1",
    [S_CAND_IDS] = "SELECT id FROM candidates WHERE run_id = ?1 AND state = ?2 ORDER BY id",
    [S_BEST_ALL] = "SELECT id FROM candidates WHERE run_id = ?1 AND verdict = 'ok'"
                   " ORDER BY score, id LIMIT ?2",
    [S_BEST_ISLAND] = "SELECT id FROM candidates WHERE run_id = ?1 AND island = ?2"
                      " AND verdict = 'ok' ORDER BY score, id LIMIT ?3",
    /* the elite of the first occupied cell after ?3 (>= -1): one seek in cand_ok_cell,
     * so a grid costs (occupied cells) seeks however many candidates the run has. The
     * one range bound is ?3: a second (cell >= 0) would make SQLite seek to it and scan */
    [S_ELITE_NEXT] = "SELECT cell, id FROM candidates WHERE run_id = ?1 AND island = ?2"
                     " AND verdict = 'ok' AND cell > ?3 ORDER BY cell, score, id LIMIT 1",
    [S_COUNTS]   = "SELECT n_cands, n_done, n_ok FROM runs WHERE id = ?1",
    [S_OP_STATS] = "SELECT op, proposed, done, ok, improved FROM op_stats"
                   " WHERE run_id = ?1 ORDER BY op",
    [S_EVAL_ADD] = "INSERT INTO evaluations(cand_id, kind, result, created)"
                   " VALUES (?1, ?2, ?3, ?4)",
    [S_EVAL_GET] = "SELECT result FROM evaluations WHERE cand_id = ?1 AND kind = ?2"
                   " ORDER BY id DESC LIMIT 1",
    [S_LLM_ADD]  = "INSERT INTO llm_calls(run_id, cand_id, model, op, prompt_hash, prompt,"
                   " reply, tokens_in, tokens_out, cost, latency_s, status, created, step,"
                   " submitted, spec, system_len, parent1, parent2, island, parent_score,"
                   " plan_hash, tokens_cached_in, tokens_reasoning, answers, settings)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,"
                   " ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
    /* a reply a session used from an import answered the prompt too */
    [S_LLM_CACHED] = "SELECT reply FROM llm_calls WHERE prompt_hash = ?1"
                     " AND status IN ('ok', 'imported') AND reply IS NOT NULL"
                     " ORDER BY id DESC LIMIT 1",
    [S_LLM_COST] = "SELECT total(cost) FROM llm_calls WHERE run_id = ?1",
    [S_LLM_ROWS] = "SELECT id, coalesce(cand_id, 0), coalesce(step, 0), tokens_in, tokens_out,"
                   " cost, latency_s, model, op, prompt_hash, reply, status, coalesce(submitted, 0),"
                   " tokens_cached_in, tokens_reasoning, created FROM llm_calls"
                   " WHERE run_id = ?1 ORDER BY id",
    [S_STEPS]    = "SELECT step, 0, id FROM candidates WHERE run_id = ?1 AND step IS NOT NULL"
                   " UNION ALL SELECT step, 1, id FROM llm_calls WHERE run_id = ?1"
                   " AND step IS NOT NULL ORDER BY 1",
    [S_CAND_ALL] = "SELECT id FROM candidates WHERE run_id = ?1 ORDER BY id",
    /* waiting: no reply imported for it; no newer call of the run asked its prompt and
     * waits or was answered; no older one of the same prompt has a reply imported that no
     * session used yet (that reply will serve) */
    [S_LLM_PENDING] = "SELECT " WANTED_COLS ", NULL, 0, 0, 0, 0, 0 FROM llm_calls l"
                      " WHERE l.run_id = ?1 AND l.status = 'not_cached'"
                      " AND NOT EXISTS (SELECT 1 FROM llm_imports i WHERE i.call_id = l.id)"
                      " AND NOT EXISTS (SELECT 1 FROM llm_calls o WHERE o.prompt_hash ="
                      "  l.prompt_hash AND o.run_id = l.run_id AND o.id > l.id"
                      "  AND (o.status = 'not_cached' OR o.reply IS NOT NULL))"
                      " AND NOT EXISTS (SELECT 1 FROM llm_calls p JOIN llm_imports i"
                      "  ON i.call_id = p.id WHERE p.prompt_hash = l.prompt_hash"
                      "  AND p.run_id = l.run_id"
                      "  AND NOT EXISTS (SELECT 1 FROM llm_calls x WHERE x.answers = p.id))"
                      " ORDER BY l.id",
    [S_LLM_IMPORTED] = "SELECT " WANTED_COLS ", i.reply, i.tokens_in, i.tokens_out,"
                       " i.tokens_cached_in, i.tokens_reasoning, i.latency_s"
                       " FROM llm_imports i JOIN llm_calls l ON l.id = i.call_id"
                       " WHERE l.run_id = ?1"
                       " AND NOT EXISTS (SELECT 1 FROM llm_calls x WHERE x.answers = l.id)"
                       " ORDER BY l.id",
    [S_LLM_STATE] = "SELECT run_id, prompt_hash, status = 'not_cached',"
                    " EXISTS (SELECT 1 FROM llm_imports i WHERE i.call_id = l.id),"
                    " EXISTS (SELECT 1 FROM llm_calls x WHERE x.answers = l.id)"
                    " FROM llm_calls l WHERE l.id = ?1",
    /* only for a call that waits, or whose imported reply no session used yet */
    [S_LLM_IMPORT] = "INSERT OR REPLACE INTO llm_imports(call_id, reply, tokens_in, tokens_out,"
                     " tokens_cached_in, tokens_reasoning, latency_s, model, source, created)"
                     " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10 FROM llm_calls"
                     " WHERE id = ?1 AND status = 'not_cached'"
                     " AND NOT EXISTS (SELECT 1 FROM llm_calls x WHERE x.answers = ?1)",
    /* per model and status: calls, tokens, cost, latency, and the evaluated candidates
     * the replies became (ok, better than their parent) */
    [S_LLM_MODELS] = "SELECT l.model, l.status, count(*), sum(l.tokens_in),"
                     " sum(l.tokens_cached_in), sum(l.tokens_out), sum(l.tokens_reasoning),"
                     " total(l.cost), total(l.latency_s), count(c.id),"
                     " coalesce(sum(c.verdict = 'ok'), 0), coalesce(sum(c.improved), 0)"
                     " FROM llm_calls l LEFT JOIN candidates c"
                     "  ON c.id = l.cand_id AND c.state = 'done'"
                     " WHERE l.run_id = ?1 GROUP BY l.model, l.status ORDER BY l.model, l.status",
};

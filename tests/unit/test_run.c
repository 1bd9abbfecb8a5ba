/*
 * test_run - `kevo run` end to end on the CPU backend (src/run.c, docs/search.md): the
 * search finds the known best configuration of tests/search/landscape.c with fewer
 * evaluations than an exhaustive sweep; islands and the elites grid are populated; each
 * budget stops the run; a run killed with SIGKILL resumes without losing or re-evaluating
 * anything, and `kevo runs` shows it interrupted meanwhile (its controller is gone, which
 * test_owner_liveness forges in every way it can be); a done run's resume without a
 * larger budget is refused and leaves it replayable; `kevo runs` reports a run;
 * `kevo export` writes files whose test passes; and
 * `--replay` reproduces a run from its archive record (a time-limited one included),
 * refusing what it cannot reproduce (a resumed run) with the reason.
 * Needs KEVO_BIN (make test sets it): the workers are that binary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "ctl/archive.h"
#include "kevo.h"

#include <jansson.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TASK "tests/search/landscape.c"
#define SEED "tests/search/landscape_seed.c"
#define EXHAUSTIVE 36                      /* 6 x 6 values of A and B */

static char dir[256];
static const char *kevo_bin;

static int setup(void **state)
{
    (void)state;
    kevo_bin = getenv("KEVO_BIN");
    if (!kevo_bin)
        return 0;
    snprintf(dir, sizeof dir, "/tmp/kevo-test-run-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    setenv("KEVO_WORKER_EXE", kevo_bin, 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[512];
    (void)state;
    if (kevo_bin) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            return -1;
    }
    return 0;
}

/* Options for a short run on the landscape task into archive `name` under dir. */
static void opts(struct kevo_run_opts *o, char *archive, size_t n, const char *name)
{
    static const char *seeds[] = { SEED };
    kevo_run_opts_default(o);
    snprintf(archive, n, "%s/%s", dir, name);
    o->archive = archive;
    o->eval.backend = KEVO_BACKEND_CPU;
    o->eval.time_cap_s = 0.05;
    o->n_seeds = 1;
    o->seeds = seeds;
}

static json_t *run(const struct kevo_run_opts *o, int64_t *id)
{
    char *out = NULL, *msg = NULL;
    enum kevo_status st = kevo_run(TASK, o, NULL, NULL, NULL, id, &out, &msg);
    if (st)
        fail_msg("kevo_run: %s", msg ? msg : kevo_status_name(st));
    json_t *r = json_loads(out, 0, NULL);
    assert_non_null(r);
    kevo_free(out);
    kevo_free(msg);
    return r;
}

static const char *reason(json_t *r) { return json_string_value(json_object_get(r, "reason")); }

/* kevo run --replay of; the status, its message and report (either may be NULL). */
static enum kevo_status replay(const char *archive, int64_t of, char **msg, json_t **rep)
{
    struct kevo_run_opts o;
    char *out = NULL;
    int64_t id = 0;
    kevo_run_opts_default(&o);
    o.archive = archive;
    o.replay = of;
    o.budget = 1;        /* this session's options are not the run's: ignored */
    o.time_s = 0.001;
    *msg = NULL;
    enum kevo_status st = kevo_run(NULL, &o, NULL, NULL, NULL, &id, &out, msg);
    *rep = out ? json_loads(out, 0, NULL) : NULL;
    kevo_free(out);
    return st;
}

/* The replay of run `of` reproduces it: same reason, evaluations and best; its id. */
static int64_t replay_identical(const char *archive, int64_t of, json_t *orig)
{
    char *msg = NULL;
    json_t *r = NULL;
    if (replay(archive, of, &msg, &r) != KEVO_OK)
        fail_msg("replay of run %lld: %s", (long long)of, msg ? msg : "?");
    json_t *rp = json_object_get(r, "replay");
    assert_true(json_is_true(json_object_get(rp, "identical")));
    assert_string_equal(reason(r), reason(orig));
    assert_int_equal(json_integer_value(json_object_get(r, "evaluations")),
                     json_integer_value(json_object_get(orig, "evaluations")));
    assert_true(json_real_value(json_object_get(json_object_get(r, "best"), "score_s")) ==
                json_real_value(json_object_get(json_object_get(orig, "best"), "score_s")));
    int64_t id = json_integer_value(json_object_get(r, "run"));
    json_decref(r);
    kevo_free(msg);
    return id;
}

/* sql on the archive db (a raw connection: forging what kevo would not write). */
static void raw_sql(const char *db, const char *sql)
{
    sqlite3 *s = NULL;
    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    if (sqlite3_exec(s, sql, NULL, NULL, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(s));
    sqlite3_close(s);
}

/* Run `of` of archive, forged in copies: a record the replay cannot match is a divergence
 * named by its step; a record from before the step log is refused with the reason. */
static void replay_refusals(const char *archive, int64_t of)
{
    char db[600], cmd[1400], sql[300], *msg = NULL;
    json_t *r = NULL;

    snprintf(db, sizeof db, "%s.forged", archive);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", archive, db);
    assert_int_equal(system(cmd), 0);
    /* the seed's recorded result says mismatch: nothing grows from it, while the original's
     * log goes on with the seed's children */
    snprintf(sql, sizeof sql, "UPDATE evaluations SET result = '{\"verdict\":\"mismatch\"}'"
             " WHERE kind = 'verify' AND cand_id = (SELECT min(id) FROM candidates WHERE"
             " run_id = %lld)", (long long)of);
    raw_sql(db, sql);
    assert_int_equal(replay(db, of, &msg, &r), KEVO_ERR_DIVERGED);
    assert_non_null(strstr(msg, "diverged at step 2: the replay had nothing left to evaluate"));
    assert_non_null(strstr(msg, "but the original went on with its candidate"));
    kevo_free(msg);
    json_decref(r);
    /* the original's second candidate has another text than the replay proposes there */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", archive, db);
    assert_int_equal(system(cmd), 0);
    snprintf(sql, sizeof sql, "UPDATE candidates SET key = (CASE WHEN substr(key, 1, 1) = '0' THEN '1'"
             " ELSE '0' END) || substr(key, 2) WHERE id = (SELECT id"
             " FROM candidates WHERE run_id = %lld AND step = 2)", (long long)of);
    raw_sql(db, sql);
    assert_int_equal(replay(db, of, &msg, &r), KEVO_ERR_DIVERGED);
    assert_non_null(strstr(msg, "diverged at step 2: the original evaluated its candidate"));
    assert_non_null(strstr(msg, "the replay had not proposed it"));
    kevo_free(msg);
    json_decref(r);
    /* a report without the step log's entries: recorded by an older kevo */
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", archive, db);
    assert_int_equal(system(cmd), 0);
    snprintf(sql, sizeof sql, "UPDATE runs SET result_json = json_remove(result_json, '$.stop')"
             " WHERE id = %lld", (long long)of);
    raw_sql(db, sql);
    assert_int_equal(replay(db, of, &msg, &r), KEVO_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "it was recorded without a step log"));
    kevo_free(msg);
    json_decref(r);
}

static void test_finds_the_best_with_fewer_evaluations(void **state)
{
    struct kevo_run_opts o;
    char archive[512];
    int64_t id = 0;
    (void)state;
    if (!kevo_bin)
        skip();
    opts(&o, archive, sizeof archive, "best.db");
    o.budget = 30;
    json_t *r = run(&o, &id);
    json_t *best = json_object_get(r, "best"), *p = json_object_get(best, "params");
    print_message("[ run      ] %s after %d evaluations: best A=%d B=%d\n", reason(r),
                  (int)json_integer_value(json_object_get(r, "evaluations")),
                  (int)json_integer_value(json_object_get(p, "A")),
                  (int)json_integer_value(json_object_get(p, "B")));
    assert_int_equal(json_integer_value(json_object_get(p, "A")), 4);
    assert_int_equal(json_integer_value(json_object_get(p, "B")), 2);
    assert_true(json_integer_value(json_object_get(r, "evaluations")) < EXHAUSTIVE);
    /* islands and the elites grid: both islands hold elites (island 1 by migration) */
    json_t *isl = json_object_get(r, "islands");
    assert_int_equal(json_array_size(isl), 2);
    for (size_t i = 0; i < 2; i++)
        assert_true(json_integer_value(json_object_get(json_array_get(isl, i), "occupied_cells")) >= 1);
    /* the held-out gate passed the winner */
    assert_string_equal(json_string_value(json_object_get(json_object_get(r, "final"), "holdout")),
                        "ok");
    /* replayed: the same run, without workers; a replay is not resumed */
    int64_t rid = replay_identical(archive, id, r);
    replay_refusals(archive, id);
    struct kevo_run_opts ro;
    char *rout = NULL, *rmsg = NULL;
    kevo_run_opts_default(&ro);
    ro.archive = archive;
    ro.resume = rid;
    assert_int_equal(kevo_run(NULL, &ro, NULL, NULL, NULL, NULL, &rout, &rmsg), KEVO_ERR_INVALID);
    assert_non_null(strstr(rmsg, "is a replay of run"));
    kevo_free(rmsg);
    kevo_free(rout);
    json_t *rr = NULL;
    assert_int_equal(replay(archive, rid, &rmsg, &rr), KEVO_ERR_UNSUPPORTED);
    assert_non_null(strstr(rmsg, "it is itself a replay"));
    kevo_free(rmsg);
    /* runs report: lineage back to the seed, operator statistics */
    char *js = NULL, *msg = NULL;
    assert_int_equal(kevo_runs_json(archive, id, &js, &msg), KEVO_OK);
    json_t *doc = json_loads(js, 0, NULL);
    json_t *lin = json_object_get(doc, "lineage_of_best");
    assert_true(json_array_size(lin) >= 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(lin, json_array_size(lin) - 1),
                                                          "op")), "seed");
    assert_non_null(json_object_get(json_object_get(doc, "operators"), "seed"));
    json_decref(doc);
    kevo_free(js);
    /* export: the files build and their test passes against the reference */
    char out[600], cmd[1400];
    snprintf(out, sizeof out, "%s/export", dir);
    assert_int_equal(kevo_export(archive, id, out, &msg), KEVO_OK);
    kevo_free(msg);
    snprintf(cmd, sizeof cmd, "make -s -C '%s' test > '%s/make.log' 2>&1", out, dir);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof cmd, "cat '%s/make.log'", dir);
        if (system(cmd)) {
        }
        fail_msg("the exported test failed");
    }
    json_decref(r);
}

static void test_budgets(void **state)
{
    struct kevo_run_opts o;
    char archive[512];
    int64_t id;
    json_t *r;
    (void)state;
    if (!kevo_bin)
        skip();
    opts(&o, archive, sizeof archive, "budgets.db");
    o.budget = 5;
    r = run(&o, &id);
    assert_string_equal(reason(r), "budget");
    assert_int_equal(json_integer_value(json_object_get(r, "evaluations")), 5);
    json_decref(r);
    opts(&o, archive, sizeof archive, "budgets.db");
    o.target = 1e-9;               /* any ok candidate meets it */
    r = run(&o, &id);
    assert_string_equal(reason(r), "target");
    assert_true(json_integer_value(json_object_get(r, "evaluations")) <= 3);
    json_decref(r);
    opts(&o, archive, sizeof archive, "budgets.db");
    o.stagnation = 2;
    o.budget = 40;
    r = run(&o, &id);
    assert_true(strcmp(reason(r), "stagnation") == 0);
    assert_true(json_integer_value(json_object_get(r, "evaluations")) < 40);
    replay_identical(archive, id, r);
    /* done below its own budget: resumed without a larger --budget it is refused, before
     * anything is written (no second session, no second held-out gate), so it still
     * replays; the refusal names no run of this call */
    struct kevo_run_opts ro;
    char *out = NULL, *msg = NULL;
    int64_t rid = -1;
    kevo_run_opts_default(&ro);
    ro.archive = archive;
    ro.resume = id;
    assert_int_equal(kevo_run(NULL, &ro, NULL, NULL, NULL, &rid, &out, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "is done: stopped by stagnation after"));
    assert_non_null(strstr(msg, "replays it"));
    assert_null(out);
    assert_int_equal(rid, 0);
    kevo_free(msg);
    struct kevo_archive *a = NULL;
    struct kevo_run_rec rec;
    assert_int_equal(kevo_archive_open(archive, &a, NULL), KEVO_OK);
    assert_int_equal(kevo_archive_run_get(a, id, &rec), KEVO_OK);
    assert_int_equal(rec.status, KEVO_RUN_DONE);
    assert_int_equal(rec.sessions, 1);
    kevo_archive_run_clear(&rec);
    kevo_archive_close(a);
    replay_identical(archive, id, r);
    json_decref(r);
    opts(&o, archive, sizeof archive, "budgets.db");
    o.time_s = 2.0;
    o.budget = 1000;
    o.stagnation = 1000;
    time_t t0 = time(NULL);
    r = run(&o, &id);
    assert_string_equal(reason(r), "time");
    assert_true(time(NULL) - t0 < 20);   /* setup, the last evaluation and the gate */
    /* the clock stopped it: the replay stops at the same step without looking at one */
    replay_identical(archive, id, r);
    json_decref(r);
}

static volatile int stop_flag;
static int evals_seen;

/* Ctrl-C after the third verdict. */
static void stop_after_3(void *user, const char *e)
{
    (void)user;
    if (strstr(e, "\"event\":\"eval\"") && ++evals_seen == 3)
        stop_flag = 1;
}

/* Two workers: results come back in an order the clock decides; the replay follows it. */
static void test_replay_two_workers(void **state)
{
    static const int gpus[] = { 0, 1 };
    struct kevo_run_opts o;
    char archive[512];
    int64_t id = 0;
    (void)state;
    if (!kevo_bin)
        skip();
    opts(&o, archive, sizeof archive, "two.db");
    o.budget = 16;
    o.n_gpus = 2;
    o.gpus = gpus;
    json_t *r = run(&o, &id);
    assert_int_equal(json_integer_value(json_object_get(r, "workers")), 2);
    replay_identical(archive, id, r);
    json_decref(r);
    /* the user stops a replay: it stops there (not a divergence), and says it stopped */
    struct kevo_run_opts ro;
    char *out = NULL, *msg = NULL;
    kevo_run_opts_default(&ro);
    ro.archive = archive;
    ro.replay = id;
    stop_flag = 0;
    evals_seen = 0;
    assert_int_equal(kevo_run(NULL, &ro, stop_after_3, NULL, &stop_flag, NULL, &out, &msg), KEVO_OK);
    r = json_loads(out, 0, NULL);
    assert_string_equal(reason(r), "interrupted");
    assert_int_equal(json_integer_value(json_object_get(r, "evaluations")), 3);
    assert_null(json_object_get(r, "replay"));   /* not compared: cut short by the user */
    json_decref(r);
    kevo_free(out);
    kevo_free(msg);
}

/* Searches recorded on an H100 replay here, without a GPU or a network, to the same rows:
 * the controller still makes the decisions it made there, and builds the same prompts
 * from the same records (with the templates and playbook of the time, kept with the
 * results, so editing prompts/ does not break this). bench/results/2026-11-22-h100-replay/
 * (tools/replay-gpu.sh): by budget and by the clock; .../2026-11-22-h100-llm-scripted/
 * (tools/llm-scripted-gpu.sh): 70 LLM calls, up to 2 in flight. A deliberate change to the
 * search or to how prompts are built breaks this test: record the archives again on a
 * GPU with those scripts. */
static void test_replay_h100_archive(void **state)
{
    char db[600], cmd[1400], *msg = NULL;
    json_t *r = NULL;
    (void)state;
    if (!kevo_bin)
        skip();
    snprintf(db, sizeof db, "%s/h100.db", dir);
    snprintf(cmd, sizeof cmd, "cp bench/results/2026-11-22-h100-replay/archive.db '%s'", db);
    assert_int_equal(system(cmd), 0);
    for (int64_t of = 1; of <= 3; of += 2) {   /* softmax by budget, matmul by the clock */
        if (replay(db, of, &msg, &r) != KEVO_OK)
            fail_msg("replay of H100 run %lld: %s", (long long)of, msg ? msg : "?");
        assert_true(json_is_true(json_object_get(json_object_get(r, "replay"), "identical")));
        assert_string_equal(reason(r), of == 1 ? "budget" : "time");
        json_decref(r);
        kevo_free(msg);
    }
#define LLM_RESULTS "bench/results/2026-11-22-h100-llm-scripted"
    snprintf(db, sizeof db, "%s/h100-llm.db", dir);
    snprintf(cmd, sizeof cmd, "cp " LLM_RESULTS "/archive.db '%s'", db);
    assert_int_equal(system(cmd), 0);
    struct kevo_run_opts o;
    char *out = NULL;
    kevo_run_opts_default(&o);
    o.archive = db;
    o.replay = 1;
    o.prompts_dir = LLM_RESULTS "/prompts";
    o.playbook_dir = LLM_RESULTS "/playbook";
    if (kevo_run(NULL, &o, NULL, NULL, NULL, NULL, &out, &msg) != KEVO_OK)
        fail_msg("replay of the H100 LLM run: %s", msg ? msg : "?");
    r = json_loads(out, 0, NULL);
    json_t *rp = json_object_get(r, "replay");
    assert_true(json_is_true(json_object_get(rp, "identical")));
    assert_int_equal(json_integer_value(json_object_get(rp, "llm_calls")), 70);
    json_decref(r);
    kevo_free(out);
    kevo_free(msg);
}

/* Evaluations stored per candidate of run 1 in db: every done candidate exactly one. */
static void check_once(const char *db, int64_t *n_done)
{
    sqlite3 *s = NULL;
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(s, "SELECT c.id, (SELECT count(*) FROM evaluations e "
                                           "WHERE e.cand_id = c.id AND e.kind = 'verify') "
                                           "FROM candidates c WHERE c.state = 'done'",
                                        -1, &q, NULL), SQLITE_OK);
    *n_done = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        if (sqlite3_column_int64(q, 1) != 1)
            fail_msg("candidate %lld was evaluated %lld times", (long long)sqlite3_column_int64(q, 0),
                     (long long)sqlite3_column_int64(q, 1));
        (*n_done)++;
    }
    sqlite3_finalize(q);
    sqlite3_close(s);
}

static char runs_status_text[32];
static int64_t runs_owner_pid;

/* The status `kevo runs` shows for run id of db (0: the first of the list, the newest),
 * and that run's owner pid into runs_owner_pid. */
static const char *runs_status(const char *db, int64_t id)
{
    char *js = NULL, *msg = NULL;

    if (kevo_runs_json(db, id, &js, &msg) != KEVO_OK)
        fail_msg("kevo runs: %s", msg ? msg : "?");
    json_t *d = json_loads(js, 0, NULL);
    json_t *r = id ? d : json_array_get(json_object_get(d, "runs"), 0);
    snprintf(runs_status_text, sizeof runs_status_text, "%s",
             json_string_value(json_object_get(r, "status")));
    runs_owner_pid = json_integer_value(json_object_get(json_object_get(r, "owner"), "pid"));
    json_decref(d);
    kevo_free(js);
    kevo_free(msg);
    return runs_status_text;
}

/* A pid no process has: a child that exited and was reaped. */
static pid_t dead_pid(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    return pid;
}

/* A run whose row says `running`: shown as such while its controller lives (and refused
 * a second controller), `interrupted` once that process is gone from this host (a dead
 * pid, or the pid of another process since), as it was where that cannot be told (another
 * host, a row from before the owner was recorded); and resumed then. */
static void test_owner_liveness(void **state)
{
    struct kevo_run_opts o;
    struct kevo_proc_id me;
    char archive[512], sql[600], *out = NULL, *msg = NULL;
    int64_t id = 0;
    (void)state;
    if (!kevo_bin)
        skip();
    opts(&o, archive, sizeof archive, "owner.db");
    o.budget = 3;
    json_decref(run(&o, &id));
    assert_string_equal(runs_status(archive, id), "done");
    kevo_proc_self(&me);
    assert_int_equal(runs_owner_pid, me.pid);   /* the run was this process's */
    /* "running", by this very process: alive, so a resume is refused */
    snprintf(sql, sizeof sql, "UPDATE runs SET status = 'running', owner_pid = %lld,"
             " owner_host = '%s', owner_start = %lld WHERE id = %lld", (long long)me.pid,
             me.host, (long long)me.start, (long long)id);
    raw_sql(archive, sql);
    assert_string_equal(runs_status(archive, 0), "running");
    assert_string_equal(runs_status(archive, id), "running");
    opts(&o, archive, sizeof archive, "owner.db");
    o.resume = id;
    o.budget = 5;
    assert_int_equal(kevo_run(NULL, &o, NULL, NULL, NULL, NULL, &out, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "is running (kevo pid"));
    kevo_free(msg);
    /* the same pid, another start time: the pid was given to another process since */
    snprintf(sql, sizeof sql, "UPDATE runs SET owner_start = owner_start + 1 WHERE id = %lld",
             (long long)id);
    raw_sql(archive, sql);
    assert_string_equal(runs_status(archive, id), "interrupted");
    /* a pid nobody has: interrupted, in the list and alone */
    snprintf(sql, sizeof sql, "UPDATE runs SET owner_pid = %lld WHERE id = %lld",
             (long long)dead_pid(), (long long)id);
    raw_sql(archive, sql);
    assert_string_equal(runs_status(archive, 0), "interrupted");
    assert_string_equal(runs_status(archive, id), "interrupted");
    /* another host's pid, or none recorded (an archive before schema 5): cannot tell */
    snprintf(sql, sizeof sql, "UPDATE runs SET owner_host = 'elsewhere.invalid' WHERE id = %lld",
             (long long)id);
    raw_sql(archive, sql);
    assert_string_equal(runs_status(archive, id), "running");
    snprintf(sql, sizeof sql, "UPDATE runs SET owner_pid = NULL, owner_host = NULL,"
             " owner_start = NULL WHERE id = %lld", (long long)id);
    raw_sql(archive, sql);
    assert_string_equal(runs_status(archive, 0), "running");
    /* interrupted: resumed to its budget, owned by this process again */
    snprintf(sql, sizeof sql, "UPDATE runs SET owner_pid = %lld, owner_host = '%s' WHERE"
             " id = %lld", (long long)dead_pid(), me.host, (long long)id);
    raw_sql(archive, sql);
    assert_string_equal(runs_status(archive, id), "interrupted");
    if (kevo_run(NULL, &o, NULL, NULL, NULL, NULL, &out, &msg) != KEVO_OK)
        fail_msg("resume of an interrupted run: %s", msg ? msg : "?");
    json_t *r = json_loads(out, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(r, "evaluations")), 5);
    json_decref(r);
    kevo_free(out);
    kevo_free(msg);
    assert_string_equal(runs_status(archive, id), "done");
    assert_int_equal(runs_owner_pid, me.pid);
    /* an archive of schema 4 (no owner columns) with a run left running: migrated on
     * open, read as it was (running, no owner) */
    sqlite3 *db = NULL;
    snprintf(archive, sizeof archive, "%s/v4.db", dir);
    assert_int_equal(sqlite3_open(archive, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA application_id = 1262835279;", NULL, NULL, NULL),
                     SQLITE_OK);
    for (int v = 0; v < 4; v++)
        assert_int_equal(sqlite3_exec(db, kevo_archive_test_migration(v), NULL, NULL, NULL),
                         SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 4;"
                                      "INSERT INTO sources VALUES ('h', 'x', 1);"
                                      "INSERT INTO runs(id, task_name, task_hash, config_json,"
                                      " status, started, updated) VALUES (1, 't', 'h', '{}',"
                                      " 'running', 0, 0);", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_string_equal(runs_status(archive, 1), "running");
    assert_int_equal(runs_owner_pid, 0);
}

static void test_resume_after_sigkill(void **state)
{
    char db[512], budget[16] = "30";
    int64_t done_before = 0, done_after = 0, n, nd = 0, nok;
    struct kevo_archive *a = NULL;
    (void)state;
    if (!kevo_bin)
        skip();
    snprintf(db, sizeof db, "%s/kill.db", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(kevo_bin, kevo_bin, "run", TASK, "--seed", SEED, "--backend", "cpu", "--budget",
              budget, "--time-cap", "0.05", "--archive", db, (char *)NULL);
        _exit(127);
    }
    /* wait for a few verdicts, then kill it (and with it, its workers: PDEATHSIG) */
    for (int i = 0; i < 600 && nd < 4; i++) {
        struct timespec t = { 0, 50 * 1000 * 1000 };
        nanosleep(&t, NULL);
        if (!a && access(db, F_OK) == 0 && kevo_archive_open(db, &a, NULL) != KEVO_OK)
            a = NULL;
        if (a && kevo_archive_counts(a, 1, &n, &nd, &nok) != KEVO_OK)
            nd = 0;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_true(nd >= 4);
    kevo_archive_close(a);
    /* its row still says running, but its controller is gone: shown interrupted */
    assert_string_equal(runs_status(db, 0), "interrupted");
    assert_string_equal(runs_status(db, 1), "interrupted");
    assert_int_equal(runs_owner_pid, pid);
    /* killed: what it had in flight is lost, so it cannot be replayed */
    char *kmsg = NULL;
    json_t *kr = NULL;
    assert_int_equal(replay(db, 1, &kmsg, &kr), KEVO_ERR_UNSUPPORTED);
    assert_non_null(strstr(kmsg, "run 1 cannot be replayed: it has not finished, or it was killed"));
    kevo_free(kmsg);
    check_once(db, &done_before);
    print_message("[ kill     ] after %lld verdicts\n", (long long)done_before);
    assert_true(done_before >= 4 && done_before < 30);
    /* resume: the run goes on to its budget; nothing done before is lost or redone */
    struct kevo_run_opts o;
    char *out = NULL, *msg = NULL;
    int64_t id = 0;
    kevo_run_opts_default(&o);
    o.archive = db;
    o.resume = 1;
    o.eval.backend = KEVO_BACKEND_CPU;
    o.eval.time_cap_s = 0.05;
    enum kevo_status st = kevo_run(NULL, &o, NULL, NULL, NULL, &id, &out, &msg);
    if (st)
        fail_msg("resume: %s", msg ? msg : "?");
    assert_int_equal(id, 1);
    json_t *r = json_loads(out, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(r, "evaluations")), 30);
    check_once(db, &done_after);
    assert_int_equal(done_after, 30);
    /* the operators' record was recounted from the archive, "improved" included (what
     * the search weighs operators by): the same as the archive's own count */
    char *js = NULL, *m2 = NULL;
    assert_int_equal(kevo_runs_json(db, 1, &js, &m2), KEVO_OK);
    json_t *doc = json_loads(js, 0, NULL), *ops = json_object_get(doc, "operators"), *v;
    const char *name;
    int compared = 0;
    json_object_foreach(ops, name, v) {
        if (strcmp(name, "seed") == 0)   /* no parent: the search counts it, the archive not */
            continue;
        json_t *mine = json_object_get(json_object_get(r, "operators"), name);
        assert_non_null(mine);
        assert_int_equal(json_integer_value(json_object_get(mine, "improved")),
                         json_integer_value(json_object_get(v, "improved")));
        compared++;
    }
    assert_true(compared >= 2);
    json_decref(doc);
    kevo_free(js);
    kevo_free(m2);
    json_decref(r);
    kevo_free(out);
    kevo_free(msg);
    /* two sessions: the first one's last steps died with it, so no exact replay */
    assert_int_equal(replay(db, 1, &msg, &r), KEVO_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "run 1 cannot be replayed: it ran in several sessions"));
    assert_null(r);
    kevo_free(msg);
}

static void test_bad_seed_is_a_clear_error(void **state)
{
    struct kevo_run_opts o;
    char archive[512], bad[600], *out = NULL, *msg = NULL;
    static const char *seeds[1];
    (void)state;
    if (!kevo_bin)
        skip();
    opts(&o, archive, sizeof archive, "bad.db");
    snprintf(bad, sizeof bad, "%s/bad_seed.c", dir);
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("// kevo param A 1 2\n// kevo call nope(x, y, Q)\n", f);
    fclose(f);
    seeds[0] = bad;
    o.seeds = seeds;
    assert_int_not_equal(kevo_run(TASK, &o, NULL, NULL, NULL, NULL, &out, &msg), KEVO_OK);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "bad_seed.c:2"));
    kevo_free(msg);
    kevo_free(out);
}

/* The seed texts of run 1 in db, joined (the archive keeps every source). */
static char *seed_texts(const char *db, int *n)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    char *all = calloc(1, 1);
    *n = 0;
    assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT s.text FROM candidates c JOIN sources s ON "
                                        "s.hash = c.source_hash WHERE c.op = 'seed'", -1, &q,
                                        NULL), SQLITE_OK);
    while (sqlite3_step(q) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(q, 0);
        size_t l = strlen(all);
        all = realloc(all, l + strlen(t) + 1);
        strcpy(all + l, t);
        (*n)++;
    }
    sqlite3_finalize(q);
    sqlite3_close(h);
    return all;
}

/* A suite task without --seed starts from its reference and its exemplar
 * (examples/seeds/NAME); --no-exemplar, or a task whose text is not the suite's, from the
 * reference alone. */
static void test_exemplar_seed(void **state)
{
    static const char *task = "tasks/cpu/cpu_softmax_rows.c";
    struct kevo_run_opts o;
    char archive[512], copy[600], cmd[1400], *out = NULL, *msg = NULL, *texts;
    int n = 0;
    (void)state;
    if (!kevo_bin)
        skip();
    for (int k = 0; k < 3; k++) {
        const char *name[] = { "ex.db", "noex.db", "mine.db" };
        opts(&o, archive, sizeof archive, name[k]);
        o.n_seeds = 0;
        o.budget = 2;
        o.no_exemplar = k == 1;
        snprintf(copy, sizeof copy, "%s/cpu_softmax_rows.c", dir);   /* same name, own text */
        snprintf(cmd, sizeof cmd, "sed 's/kevo doc /kevo doc my own: /' %s > %s", task, copy);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(kevo_run(k == 2 ? copy : task, &o, NULL, NULL, NULL, NULL, &out, &msg),
                         KEVO_OK);
        kevo_free(out);
        kevo_free(msg);
        out = msg = NULL;
        texts = seed_texts(archive, &n);
        assert_int_equal(n, k == 0 ? 2 : 1);
        /* the exemplar's own text is in the archive only when it seeded the run */
        assert_int_equal(strstr(texts, "#pragma omp") != NULL, k == 0);
        free(texts);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finds_the_best_with_fewer_evaluations),
        cmocka_unit_test(test_budgets),
        cmocka_unit_test(test_replay_two_workers),
        cmocka_unit_test(test_replay_h100_archive),
        cmocka_unit_test(test_resume_after_sigkill),
        cmocka_unit_test(test_owner_liveness),
        cmocka_unit_test(test_bad_seed_is_a_clear_error),
        cmocka_unit_test(test_exemplar_seed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

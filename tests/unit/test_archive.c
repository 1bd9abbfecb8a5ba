/*
 * test_archive - the SQLite archive (src/archive.c): every function, dedupe by key,
 * best/elites ordering and the island filter, counters, op stats, runs_json, reopen,
 * refusal of files from the future and of files that are no kevo archive, a writer killed
 * with SIGKILL at random moments (nothing it reported committed may be lost), a full disk
 * (PRAGMA max_page_count), a busy writer lock and failed allocations.
 *
 * Each test gets a fresh temporary directory (mkdtemp) and a database path inside it that
 * does not exist yet; the raw sqlite3 API is used only to look at or forge files.
 */
#include "testutil.h"

#include "ctl/archive.h"
#include "base/mem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fix {
    char dir[64];
    char path[128];                   /* dir/sub/a.db: open must create sub/ */
    struct kevo_archive *a;
    int64_t run;
    char src[KEVO_HASH_HEX];          /* a stored source for candidates */
};

static const char task_text[] = "__global__ void k(float *x) { x[0] = 1; }\n";

/* ---- fixture and helpers ---- */

static void rm_tree(const char *dir)
{
    char p[512];
    DIR *d = opendir(dir);
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        struct stat sb;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static struct kevo_archive *open_ok(const char *path)
{
    struct kevo_archive *a = NULL;
    char *msg = NULL;
    enum kevo_status st = kevo_archive_open(path, &a, &msg);

    if (st != KEVO_OK)
        fail_msg("open %s: %s", path, msg ? msg : "?");
    assert_null(msg);
    return a;
}

/* A fresh directory, an archive in a subdirectory of it, one run and one source. */
static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof *f);

    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/kevo-archive-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/sub/a.db", f->dir);
    f->a = open_ok(f->path);
    assert_int_equal(kevo_archive_run_create(f->a, "softmax", "tasks/softmax.cu", task_text,
                                             sizeof task_text - 1, "{\"islands\":4}", &f->run),
                     KEVO_OK);
    assert_true(f->run > 0);
    assert_int_equal(kevo_archive_source_put(f->a, "src", 3, f->src), KEVO_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;

    kevo_archive_close(f->a);
    rm_tree(f->dir);
    free(f);
    return 0;
}

static void reopen(struct fix *f)
{
    kevo_archive_close(f->a);
    f->a = open_ok(f->path);
}

/* A candidate record of run with key "k<n>" and the fixture's source. */
static struct kevo_cand_rec cand(const struct fix *f, int64_t run, int n)
{
    struct kevo_cand_rec r;

    memset(&r, 0, sizeof r);
    r.run_id = run;
    snprintf(r.key, sizeof r.key, "k%063d", n);
    memcpy(r.source_hash, f->src, sizeof r.source_hash);
    snprintf(r.op, sizeof r.op, "param");
    r.island = -1;
    r.cell = -1;
    return r;
}

/* Add a candidate of the fixture's run with key n; its id. */
static int64_t add(struct fix *f, int n, const char *op, int64_t parent)
{
    struct kevo_cand_rec r = cand(f, f->run, n);
    int64_t id = 0;

    snprintf(r.op, sizeof r.op, "%s", op);
    r.parent1 = parent;
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_OK);
    assert_true(id > 0);
    return id;
}

/* Finish candidate id with the verdict of that name (the tests read better by name). */
static void finish(struct fix *f, int64_t id, const char *verdict, double score)
{
    enum kevo_verdict v;

    assert_int_equal(kevo_verdict_parse(verdict, &v), KEVO_OK);
    assert_int_equal(kevo_archive_cand_finish(f->a, id, v, score, 0.5, 2.0, "{}", "{}"),
                     KEVO_OK);
}

/* One integer from sql on a separate raw connection to path. */
static int64_t raw_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t v = -1;

    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

static void raw_exec(const char *path, const char *sql);

/* The journal mode a fresh connection sees, into out (16 bytes). */
static void raw_journal_mode(const char *path, char *out)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;

    out[0] = '\0';
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        snprintf(out, 16, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
}

static void assert_msg_has(const struct kevo_archive *a, const char *path, const char *what)
{
    const char *m = kevo_archive_errmsg(a);

    if (!strstr(m, path) || !strstr(m, what))
        fail_msg("message \"%s\" lacks \"%s\" or \"%s\"", m, path, what);
}

/* ---- open, schema, sources ---- */

static void test_open_creates_schema(void **state)
{
    struct fix *f = *state;
    char *msg = NULL;
    struct kevo_archive *a = NULL;

    assert_int_equal(raw_int(f->path, "PRAGMA user_version"), KEVO_ARCHIVE_SCHEMA);
    assert_int_equal(raw_int(f->path, "PRAGMA application_id"), 0x4B45564F);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                                      " AND name IN ('meta', 'runs', 'sources', 'candidates',"
                                      " 'evaluations', 'llm_calls')"), 6);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM meta WHERE key = 'format'"
                                      " AND value = 'kevo-archive'"), 1);
    char mode[16];
    raw_journal_mode(f->path, mode);
    assert_string_equal(mode, "wal");
    assert_string_equal(kevo_archive_errmsg(f->a), "");
    kevo_archive_close(NULL);                       /* no-ops */
    kevo_archive_cand_clear(NULL);
    kevo_archive_run_clear(NULL);
    assert_string_equal(kevo_archive_errmsg(NULL), "");
    /* a path that cannot be a file: the message names it */
    assert_int_equal(kevo_archive_open(f->dir, &a, &msg), KEVO_ERR_IO);
    assert_null(a);
    assert_non_null(strstr(msg, f->dir));
    kevo_free(msg);
    /* an empty file is a database of version 0: created in place */
    char p[160];
    snprintf(p, sizeof p, "%s/empty.db", f->dir);
    close(open(p, O_CREAT | O_WRONLY, 0644));
    a = open_ok(p);
    kevo_archive_close(a);
    assert_int_equal(raw_int(p, "PRAGMA user_version"), KEVO_ARCHIVE_SCHEMA);
}

static void test_sources(void **state)
{
    struct fix *f = *state;
    char h1[KEVO_HASH_HEX], h2[KEVO_HASH_HEX], *text = NULL;
    size_t len = 0;
    static const char bin[] = { 'a', '\0', 'b' };

    assert_int_equal(kevo_archive_source_put(f->a, "hello", 5, h1), KEVO_OK);
    assert_string_equal(h1, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    assert_int_equal(kevo_archive_source_put(f->a, "hello", 5, h2), KEVO_OK);   /* again */
    assert_string_equal(h1, h2);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM sources WHERE length = 5"), 1);
    assert_int_equal(kevo_archive_source_get(f->a, h1, &text, &len), KEVO_OK);
    assert_int_equal(len, 5);
    assert_string_equal(text, "hello");
    kevo_free(text);
    assert_int_equal(kevo_archive_source_put(f->a, bin, sizeof bin, h2), KEVO_OK);
    assert_int_equal(kevo_archive_source_get(f->a, h2, &text, &len), KEVO_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(text, bin, 3);
    kevo_free(text);
    assert_int_equal(kevo_archive_source_put(f->a, NULL, 0, h2), KEVO_OK);      /* empty */
    assert_int_equal(kevo_archive_source_get(f->a, h2, &text, NULL), KEVO_OK);
    assert_string_equal(text, "");
    kevo_free(text);
    assert_int_equal(kevo_archive_source_get(f->a, "00", &text, &len), KEVO_ERR_NOTFOUND);
    assert_null(text);
    assert_msg_has(f->a, f->path, "no source");
}

/* ---- runs ---- */

static void test_runs(void **state)
{
    struct fix *f = *state;
    struct kevo_run_rec r;
    char *text = NULL;

    assert_int_equal(kevo_archive_run_get(f->a, f->run, &r), KEVO_OK);
    assert_int_equal(r.id, f->run);
    assert_string_equal(r.task_name, "softmax");
    assert_string_equal(r.task_path, "tasks/softmax.cu");
    assert_string_equal(r.config_json, "{\"islands\":4}");
    assert_null(r.result_json);
    assert_int_equal(r.status, KEVO_RUN_RUNNING);
    assert_true(r.started > 1.6e9 && r.updated >= r.started);
    assert_int_equal(kevo_archive_source_get(f->a, r.task_hash, &text, NULL), KEVO_OK);
    assert_string_equal(text, task_text);
    kevo_free(text);
    kevo_archive_run_clear(&r);
    assert_null(r.task_name);

    assert_int_equal(kevo_archive_run_finish(f->a, f->run, KEVO_RUN_DONE, "{\"best\":1}"),
                     KEVO_OK);
    assert_int_equal(kevo_archive_run_finish(f->a, f->run, KEVO_RUN_STOPPED, NULL), KEVO_OK);
    assert_int_equal(kevo_archive_run_get(f->a, f->run, &r), KEVO_OK);
    assert_int_equal(r.status, KEVO_RUN_STOPPED);
    assert_string_equal(r.result_json, "{\"best\":1}");    /* NULL kept the result */
    kevo_archive_run_clear(&r);

    assert_int_equal(kevo_archive_run_finish(f->a, 999, KEVO_RUN_DONE, NULL), KEVO_ERR_NOTFOUND);
    assert_msg_has(f->a, f->path, "no such run");
    assert_int_equal(kevo_archive_run_finish(f->a, f->run, (enum kevo_run_status)7, NULL),
                     KEVO_ERR_INVALID);
    assert_int_equal(kevo_archive_run_get(f->a, 999, &r), KEVO_ERR_NOTFOUND);
    assert_null(r.task_name);
    /* NULL path and config */
    int64_t id2 = 0;
    assert_int_equal(kevo_archive_run_create(f->a, "t2", NULL, "x", 1, NULL, &id2), KEVO_OK);
    assert_int_equal(kevo_archive_run_get(f->a, id2, &r), KEVO_OK);
    assert_null(r.task_path);
    assert_string_equal(r.config_json, "{}");
    kevo_archive_run_clear(&r);
}

static void test_runs_json(void **state)
{
    struct fix *f = *state;
    int64_t run2 = 0, id;
    char *js = NULL;
    json_error_t err;

    assert_int_equal(kevo_archive_run_create(f->a, "gemm \"big\"", NULL, "y", 1, "{}", &run2),
                     KEVO_OK);
    finish(f, add(f, 1, "seed", 0), "ok", 3.0);
    finish(f, add(f, 2, "seed", 0), "ok", 2.0);
    finish(f, add(f, 3, "seed", 0), "mismatch", 1.0);
    id = add(f, 4, "seed", 0);
    (void)id;
    assert_int_equal(kevo_archive_run_finish(f->a, f->run, KEVO_RUN_FAILED, NULL), KEVO_OK);
    assert_int_equal(kevo_archive_runs_json(f->a, &js), KEVO_OK);
    json_t *doc = json_loads(js, 0, &err);
    assert_non_null(doc);
    assert_int_equal(json_array_size(doc), 2);
    json_t *r0 = json_array_get(doc, 0), *r1 = json_array_get(doc, 1);   /* newest first */
    assert_int_equal(json_integer_value(json_object_get(r0, "id")), run2);
    assert_string_equal(json_string_value(json_object_get(r0, "task")), "gemm \"big\"");
    assert_true(json_is_null(json_object_get(r0, "path")));
    assert_string_equal(json_string_value(json_object_get(r0, "status")), "running");
    assert_int_equal(json_integer_value(json_object_get(r0, "n_candidates")), 0);
    assert_true(json_is_null(json_object_get(r0, "best_score")));
    assert_int_equal(json_integer_value(json_object_get(r1, "id")), f->run);
    assert_string_equal(json_string_value(json_object_get(r1, "path")), "tasks/softmax.cu");
    assert_string_equal(json_string_value(json_object_get(r1, "status")), "failed");
    assert_int_equal(json_integer_value(json_object_get(r1, "n_candidates")), 4);
    assert_int_equal(json_integer_value(json_object_get(r1, "n_ok")), 2);
    assert_true(json_real_value(json_object_get(r1, "best_score")) == 2.0);
    double st = json_real_value(json_object_get(r1, "started"));
    double up = json_real_value(json_object_get(r1, "updated"));
    assert_true(st > 1.6e9 && up >= st);
    json_decref(doc);
    kevo_free(js);
}

/* ---- candidates ---- */

static void test_cand_roundtrip(void **state)
{
    struct fix *f = *state;
    struct kevo_cand_rec r = cand(f, f->run, 1), g;
    int64_t p = add(f, 100, "seed", 0), id = 0;
    char *ev = NULL;

    r.parent1 = p;
    r.parent2 = p;
    snprintf(r.op, sizeof r.op, "crossover");
    r.params_json = "{\"BLOCK\":128}";
    r.flags_json = "[\"-use_fast_math\"]";
    r.descriptors_json = "[0.5,2]";
    r.island = 2;
    r.cell = 7;
    r.generation = 3;
    r.created = 1700000000.25;
    r.score = 99;                                   /* ignored */
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_OK);
    assert_int_equal(kevo_archive_cand_get(f->a, id, &g), KEVO_OK);
    assert_int_equal(g.id, id);
    assert_int_equal(g.run_id, f->run);
    assert_int_equal(g.parent1, p);
    assert_int_equal(g.parent2, p);
    assert_string_equal(g.key, r.key);
    assert_string_equal(g.source_hash, f->src);
    assert_string_equal(g.op, "crossover");
    assert_string_equal(g.params_json, r.params_json);
    assert_string_equal(g.flags_json, r.flags_json);
    assert_string_equal(g.descriptors_json, r.descriptors_json);
    assert_int_equal(g.island, 2);
    assert_int_equal(g.cell, 7);
    assert_int_equal(g.generation, 3);
    assert_int_equal(g.state, KEVO_CAND_PENDING);
    assert_string_equal(kevo_archive_cand_verdict(&g), "");     /* pending: no verdict */
    assert_true(isnan(g.score) && isnan(g.sol_fraction) && isnan(g.speedup));
    assert_null(g.metrics_json);
    assert_true(g.created == 1700000000.25);
    assert_true(g.finished == 0);
    kevo_archive_cand_clear(&g);

    assert_int_equal(kevo_archive_cand_finish(f->a, id, KEVO_VERDICT_OK, 1.5e-3, 0.75, 3.5,
                                              "{\"wl\":[1]}", "{\"verdict\":\"ok\"}"), KEVO_OK);
    assert_int_equal(kevo_archive_cand_place(f->a, id, 1, 9, NULL), KEVO_OK);
    assert_int_equal(kevo_archive_cand_get(f->a, id, &g), KEVO_OK);
    assert_int_equal(g.state, KEVO_CAND_DONE);
    assert_int_equal(g.verdict, KEVO_VERDICT_OK);
    assert_string_equal(kevo_archive_cand_verdict(&g), "ok");
    assert_true(g.score == 1.5e-3 && g.sol_fraction == 0.75 && g.speedup == 3.5);
    assert_string_equal(g.metrics_json, "{\"wl\":[1]}");
    assert_true(g.finished >= 1.6e9);
    assert_int_equal(g.island, 1);
    assert_int_equal(g.cell, 9);
    assert_string_equal(g.descriptors_json, "[0.5,2]");         /* NULL kept it */
    kevo_archive_cand_clear(&g);
    assert_int_equal(kevo_archive_eval_get(f->a, id, "verify", &ev), KEVO_OK);
    assert_string_equal(ev, "{\"verdict\":\"ok\"}");
    kevo_free(ev);

    assert_int_equal(kevo_archive_cand_get(f->a, 12345, &g), KEVO_ERR_NOTFOUND);
    assert_msg_has(f->a, f->path, "no candidate 12345");
    assert_int_equal(kevo_archive_cand_place(f->a, 12345, 0, 0, NULL), KEVO_ERR_NOTFOUND);
}

static void test_cand_dedupe(void **state)
{
    struct fix *f = *state;
    struct kevo_cand_rec r = cand(f, f->run, 7);
    int64_t id = 0, again = 0, other = 0, found = 0, run2 = 0, n, nd, nok;

    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_OK);
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &again), KEVO_ERR_INVALID);
    assert_int_equal(again, id);                  /* the existing candidate */
    assert_msg_has(f->a, f->path, "already has candidate");
    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    assert_int_equal(n, 1);
    /* the same key in another run is another candidate */
    assert_int_equal(kevo_archive_run_create(f->a, "t", NULL, "x", 1, NULL, &run2), KEVO_OK);
    r.run_id = run2;
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &other), KEVO_OK);
    assert_true(other != id);
    assert_int_equal(kevo_archive_cand_by_key(f->a, f->run, r.key, &found), KEVO_OK);
    assert_int_equal(found, id);
    assert_int_equal(kevo_archive_cand_by_key(f->a, run2, r.key, &found), KEVO_OK);
    assert_int_equal(found, other);
    assert_int_equal(kevo_archive_cand_by_key(f->a, f->run, "nope", &found), KEVO_ERR_NOTFOUND);
    assert_int_equal(found, 0);
}

static void test_cand_invalid(void **state)
{
    struct fix *f = *state;
    struct kevo_cand_rec r = cand(f, f->run, 1);
    int64_t id = 5;

    snprintf(r.source_hash, sizeof r.source_hash, "%064d", 0);   /* never stored */
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_ERR_INVALID);
    assert_int_equal(id, 0);
    assert_msg_has(f->a, f->path, "FOREIGN KEY");
    r = cand(f, f->run, 1);
    r.parent1 = 4242;                                             /* no such parent */
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_ERR_INVALID);
    r = cand(f, 4242, 1);                                         /* no such run */
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_ERR_INVALID);
    r = cand(f, f->run, 1);
    r.key[0] = '\0';
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_ERR_INVALID);
    assert_msg_has(f->a, f->path, "key");
    r = cand(f, f->run, 1);
    r.op[0] = '\0';
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_ERR_INVALID);
    /* nothing of it was stored */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM candidates"), 0);

    id = add(f, 1, "seed", 0);
    assert_int_equal(kevo_archive_cand_finish(f->a, id, KEVO_VERDICT_OK, NAN, 0, 0, NULL, NULL),
                     KEVO_ERR_INVALID);
    assert_int_equal(kevo_archive_cand_finish(f->a, id, KEVO_VERDICT_COUNT, 1, 0, 0, NULL, NULL),
                     KEVO_ERR_INVALID);
    assert_msg_has(f->a, f->path, "bad verdict");
    assert_int_equal(kevo_archive_cand_finish(f->a, id, (enum kevo_verdict)-1, 1, 0, 0, NULL,
                                              NULL), KEVO_ERR_INVALID);
    assert_int_equal(kevo_archive_cand_finish(f->a, 777, KEVO_VERDICT_OK, 1, 0, 0, NULL, "{}"),
                     KEVO_ERR_NOTFOUND);
    assert_msg_has(f->a, f->path, "no candidate 777");
    /* the failed finish rolled back: no evaluation row */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM evaluations"), 0);
    /* a non-ok verdict needs no score; NaN metrics read back as NaN */
    assert_int_equal(kevo_archive_cand_finish(f->a, id, KEVO_VERDICT_COMPILE_ERROR, NAN, NAN,
                                              INFINITY, NULL, NULL), KEVO_OK);
    struct kevo_cand_rec g;
    assert_int_equal(kevo_archive_cand_get(f->a, id, &g), KEVO_OK);
    assert_true(isnan(g.score) && isnan(g.speedup));
    assert_int_equal(g.verdict, KEVO_VERDICT_COMPILE_ERROR);
    assert_string_equal(kevo_archive_cand_verdict(&g), "compile_error");
    kevo_archive_cand_clear(&g);
    /* the column holds the verdict's name, the text the schema's `verdict = 'ok'` rules read */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM candidates"
                                      " WHERE verdict = 'compile_error'"), 1);
    /* a done row whose text names no verdict is a malformed row, not a guess */
    raw_exec(f->path, "UPDATE candidates SET verdict = 'fast' WHERE verdict = 'compile_error'");
    assert_int_equal(kevo_archive_cand_get(f->a, id, &g), KEVO_ERR_IO);
    assert_msg_has(f->a, f->path, "unknown verdict \"fast\"");
    kevo_archive_cand_clear(&g);
}

static void test_cand_ids(void **state)
{
    struct fix *f = *state;
    int64_t a1 = add(f, 1, "seed", 0), a2 = add(f, 2, "seed", 0), a3 = add(f, 3, "seed", 0);
    int64_t *ids = NULL;
    int n = -1;

    finish(f, a2, "ok", 1);
    assert_int_equal(kevo_archive_cand_ids(f->a, f->run, KEVO_CAND_PENDING, &ids, &n), KEVO_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], a1);
    assert_int_equal(ids[1], a3);
    kevo_free(ids);
    assert_int_equal(kevo_archive_cand_ids(f->a, f->run, KEVO_CAND_DONE, &ids, &n), KEVO_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], a2);
    kevo_free(ids);
    assert_int_equal(kevo_archive_cand_ids(f->a, 999, KEVO_CAND_DONE, &ids, &n), KEVO_OK);
    assert_int_equal(n, 0);
    assert_null(ids);
    /* more than one growth step */
    for (int i = 10; i < 210; i++)
        (void)add(f, i, "seed", 0);
    assert_int_equal(kevo_archive_cand_ids(f->a, f->run, KEVO_CAND_PENDING, &ids, &n), KEVO_OK);
    assert_int_equal(n, 202);
    for (int i = 1; i < n; i++)
        assert_true(ids[i] > ids[i - 1]);
    kevo_free(ids);
}

/* ---- ranking ---- */

/* Candidate n of island isl and cell c, finished with verdict and score. */
static int64_t placed(struct fix *f, int n, int isl, int c, const char *verdict, double score)
{
    int64_t id = add(f, n, "seed", 0);

    finish(f, id, verdict, score);
    assert_int_equal(kevo_archive_cand_place(f->a, id, isl, c, "[1,2]"), KEVO_OK);
    return id;
}

static void test_best(void **state)
{
    struct fix *f = *state;
    int64_t ids[8], c[7];
    int n = -1;

    c[0] = placed(f, 0, 0, 1, "ok", 5.0);
    c[1] = placed(f, 1, 1, 1, "ok", 1.0);
    c[2] = placed(f, 2, 0, 2, "ok", 3.0);
    c[3] = placed(f, 3, 1, 3, "mismatch", 0.1);        /* never ranked */
    c[4] = placed(f, 4, 0, 1, "ok", 3.0);              /* ties with c[2]: older first */
    c[5] = add(f, 5, "seed", 0);                       /* pending */
    c[6] = placed(f, 6, 1, -1, "ok", 4.0);             /* unplaced still ranks */
    assert_int_equal(kevo_archive_best(f->a, f->run, -1, 8, ids, &n), KEVO_OK);
    assert_int_equal(n, 5);
    int64_t want_all[] = { c[1], c[2], c[4], c[6], c[0] };
    assert_memory_equal(ids, want_all, sizeof want_all);
    assert_int_equal(kevo_archive_best(f->a, f->run, -1, 2, ids, &n), KEVO_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], c[2]);
    assert_int_equal(kevo_archive_best(f->a, f->run, 0, 8, ids, &n), KEVO_OK);
    int64_t want0[] = { c[2], c[4], c[0] };
    assert_int_equal(n, 3);
    assert_memory_equal(ids, want0, sizeof want0);
    assert_int_equal(kevo_archive_best(f->a, f->run, 1, 8, ids, &n), KEVO_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], c[1]);
    assert_int_equal(ids[1], c[6]);
    assert_int_equal(kevo_archive_best(f->a, f->run, 3, 8, ids, &n), KEVO_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kevo_archive_best(f->a, f->run, -1, 0, NULL, &n), KEVO_OK);
    assert_int_equal(n, 0);
    assert_int_equal(kevo_archive_best(f->a, 999, -1, 8, ids, &n), KEVO_OK);
    assert_int_equal(n, 0);
}

static void test_elites(void **state)
{
    struct fix *f = *state;
    int cells[8];
    int64_t ids[8], e5, e2, e9;
    int n = -1;

    (void)placed(f, 0, 0, 5, "ok", 4.0);
    e5 = placed(f, 1, 0, 5, "ok", 2.0);                 /* the cell's best */
    (void)placed(f, 2, 0, 5, "ok", 2.0);                /* a tie: the older stays */
    (void)placed(f, 3, 0, 5, "timeout", 0.5);           /* failed: never an elite */
    e9 = placed(f, 4, 0, 9, "ok", 7.0);
    e2 = placed(f, 5, 0, 2, "ok", 9.0);
    (void)placed(f, 6, 0, -1, "ok", 0.1);               /* not placed */
    (void)placed(f, 7, 1, 5, "ok", 0.2);                /* another island */
    assert_int_equal(kevo_archive_elites(f->a, f->run, 0, 8, cells, ids, &n), KEVO_OK);
    assert_int_equal(n, 3);
    int want_cells[] = { 2, 5, 9 };
    int64_t want_ids[] = { e2, e5, e9 };
    assert_memory_equal(cells, want_cells, sizeof want_cells);
    assert_memory_equal(ids, want_ids, sizeof want_ids);
    assert_int_equal(kevo_archive_elites(f->a, f->run, 0, 2, cells, ids, &n), KEVO_OK);
    assert_int_equal(n, 2);                             /* capped */
    assert_int_equal(cells[1], 5);
    assert_int_equal(kevo_archive_elites(f->a, f->run, 1, 8, cells, ids, &n), KEVO_OK);
    assert_int_equal(n, 1);
    assert_int_equal(cells[0], 5);
    assert_int_equal(kevo_archive_elites(f->a, f->run, 2, 8, cells, ids, &n), KEVO_OK);
    assert_int_equal(n, 0);
    /* a move out of a cell and a re-verdict update the grid */
    assert_int_equal(kevo_archive_cand_place(f->a, e9, 0, -1, NULL), KEVO_OK);
    finish(f, e2, "mismatch", 9.0);
    assert_int_equal(kevo_archive_elites(f->a, f->run, 0, 8, cells, ids, &n), KEVO_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], e5);
}

static void test_counts(void **state)
{
    struct fix *f = *state;
    int64_t n = -1, nd = -1, nok = -1, a1, a2;

    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    assert_true(n == 0 && nd == 0 && nok == 0);
    a1 = add(f, 1, "seed", 0);
    a2 = add(f, 2, "seed", 0);
    (void)add(f, 3, "seed", 0);
    finish(f, a1, "ok", 1);
    finish(f, a2, "mismatch", 1);
    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    assert_true(n == 3 && nd == 2 && nok == 1);
    finish(f, a1, "nondeterministic", 1);               /* a re-verdict moves the counts */
    finish(f, a2, "ok", 1);
    finish(f, a2, "ok", 0.5);
    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    assert_true(n == 3 && nd == 2 && nok == 1);
    /* the counters agree with the rows */
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM candidates WHERE verdict = 'ok'"),
                     1);
    assert_int_equal(kevo_archive_counts(f->a, 999, &n, &nd, &nok), KEVO_ERR_NOTFOUND);
    assert_true(n == 0 && nd == 0 && nok == 0);
}

static void test_op_stats(void **state)
{
    struct fix *f = *state;
    char *js = NULL;
    json_error_t err;
    int64_t s1 = add(f, 1, "seed", 0), s2 = add(f, 2, "seed", 0);

    finish(f, s1, "ok", 10);
    finish(f, s2, "compile_error", NAN);
    finish(f, add(f, 3, "param", s1), "ok", 5);         /* beat its parent: improved */
    finish(f, add(f, 4, "param", s1), "ok", 20);        /* worse */
    finish(f, add(f, 5, "param", s1), "ok", 10);        /* equal: not improved */
    finish(f, add(f, 6, "param", s2), "ok", 1);         /* parent failed: not counted */
    finish(f, add(f, 7, "llm", s1), "mismatch", 1);
    (void)add(f, 8, "llm", s1);                          /* pending */
    /* the first parent counts, not the second */
    struct kevo_cand_rec r = cand(f, f->run, 9);
    int64_t id;
    snprintf(r.op, sizeof r.op, "crossover");
    r.parent1 = s1;
    r.parent2 = s2;
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_OK);
    finish(f, id, "ok", 9.5);
    assert_int_equal(kevo_archive_op_stats_json(f->a, f->run, &js), KEVO_OK);
    json_t *doc = json_loads(js, 0, &err);
    assert_non_null(doc);
    struct { const char *op; int proposed, done, ok, improved; } want[] = {
        { "seed", 2, 2, 1, 0 }, { "param", 4, 4, 4, 1 }, { "llm", 2, 1, 0, 0 },
        { "crossover", 1, 1, 1, 1 },
    };
    assert_int_equal(json_object_size(doc), 4);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        json_t *o = json_object_get(doc, want[i].op);
        assert_non_null(o);
        assert_int_equal(json_integer_value(json_object_get(o, "proposed")), want[i].proposed);
        assert_int_equal(json_integer_value(json_object_get(o, "done")), want[i].done);
        assert_int_equal(json_integer_value(json_object_get(o, "ok")), want[i].ok);
        assert_int_equal(json_integer_value(json_object_get(o, "improved")), want[i].improved);
    }
    json_decref(doc);
    kevo_free(js);
    /* a re-verdict of the improved child takes its credit back */
    int64_t c3 = 0;
    char k3[KEVO_HASH_HEX];
    snprintf(k3, sizeof k3, "k%063d", 3);
    assert_int_equal(kevo_archive_cand_by_key(f->a, f->run, k3, &c3), KEVO_OK);
    finish(f, c3, "mismatch", 5);
    assert_int_equal(kevo_archive_op_stats_json(f->a, f->run, &js), KEVO_OK);
    assert_non_null(strstr(js, "\"param\":{\"proposed\":4,\"done\":4,\"ok\":3,\"improved\":0}"));
    kevo_free(js);
    assert_int_equal(kevo_archive_op_stats_json(f->a, 999, &js), KEVO_OK);
    assert_string_equal(js, "{}");
    kevo_free(js);
}

/* ---- evaluations and LLM calls ---- */

static void test_evals(void **state)
{
    struct fix *f = *state;
    int64_t id = add(f, 1, "seed", 0);
    char *ev = NULL;

    assert_int_equal(kevo_archive_eval_get(f->a, id, "holdout", &ev), KEVO_ERR_NOTFOUND);
    assert_null(ev);
    assert_msg_has(f->a, f->path, "evaluation");
    assert_int_equal(kevo_archive_eval_add(f->a, id, "holdout", "{\"n\":1}"), KEVO_OK);
    assert_int_equal(kevo_archive_eval_add(f->a, id, "holdout", "{\"n\":2}"), KEVO_OK);
    assert_int_equal(kevo_archive_eval_add(f->a, id, "other", "{\"n\":3}"), KEVO_OK);
    assert_int_equal(kevo_archive_eval_get(f->a, id, "holdout", &ev), KEVO_OK);
    assert_string_equal(ev, "{\"n\":2}");                  /* the latest */
    kevo_free(ev);
    assert_int_equal(kevo_archive_eval_add(f->a, 999, "holdout", "{}"), KEVO_ERR_INVALID);
}

static void test_llm(void **state)
{
    struct fix *f = *state;
    struct kevo_llm_call_rec r;
    int64_t id = 0, cid = add(f, 1, "llm", 0);
    char *reply = NULL;
    double cost = -1;

    memset(&r, 0, sizeof r);
    r.run_id = f->run;
    r.model = "openai:gpt-5@https://host/v1";
    r.op = "llm";
    snprintf(r.prompt_hash, sizeof r.prompt_hash, "%064d", 1);
    r.prompt = "write a kernel";
    r.reply = "first";
    r.tokens_in = 100;
    r.tokens_out = 50;
    r.cost = 0.25;
    r.latency_s = 1.5;
    r.status = "ok";
    assert_int_equal(kevo_archive_llm_cached(f->a, r.prompt_hash, &reply), KEVO_ERR_NOTFOUND);
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &id), KEVO_OK);
    assert_true(id > 0);
    r.reply = "second";
    r.cand_id = cid;
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &id), KEVO_OK);
    r.reply = NULL;                                  /* a failure: never replayed */
    r.status = "http_429";
    r.cost = 0.5;
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &id), KEVO_OK);
    assert_int_equal(kevo_archive_llm_cached(f->a, r.prompt_hash, &reply), KEVO_OK);
    assert_string_equal(reply, "second");
    kevo_free(reply);
    assert_int_equal(kevo_archive_llm_cost(f->a, f->run, &cost), KEVO_OK);
    assert_true(fabs(cost - 1.0) < 1e-12);
    assert_int_equal(kevo_archive_llm_cost(f->a, 999, &cost), KEVO_OK);
    assert_true(cost == 0);
    r.status = NULL;
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &id), KEVO_ERR_INVALID);
    r.status = "ok";
    r.cand_id = 999;                                 /* no such candidate */
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &id), KEVO_ERR_INVALID);
    assert_int_equal(id, 0);
}

/* One LLM call of model with status, tokens in/cached/out/reasoning and cost (latency:
 * cost x 10), the candidate cand (0: none), in run. */
static void llm_call(struct fix *f, int64_t run, const char *model, const char *status,
                     int64_t cand, const int64_t tok[4], double cost)
{
    static int n;
    struct kevo_llm_call_rec r;
    int64_t id = 0;

    memset(&r, 0, sizeof r);
    r.run_id = run;
    r.model = model;
    r.op = "llm_improve";
    snprintf(r.prompt_hash, sizeof r.prompt_hash, "%064d", ++n);
    r.prompt = "p";
    r.reply = strstr(status, "ok") ? "a reply" : NULL;
    r.status = status;
    r.cand_id = cand;
    r.tokens_in = tok[0];
    r.tokens_cached_in = tok[1];
    r.tokens_out = tok[2];
    r.tokens_reasoning = tok[3];
    r.cost = cost;
    r.latency_s = 10 * cost;
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &id), KEVO_OK);
}

/* Per model: calls by status (without the message), tokens, cost, latency, and the
 * evaluated candidates its replies became, correct and better than their parent. */
static void test_llm_models(void **state)
{
    static const char A[] = "openai:a@http://h/v1", B[] = "anthropic:b@https://h/v1";
    static const int64_t t1[4] = { 100, 40, 50, 10 }, t2[4] = { 200, 0, 20, 0 },
                         t3[4] = { 10, 0, 5, 0 }, t0[4] = { 0, 0, 0, 0 };
    struct fix *f = *state;
    int64_t s1 = add(f, 1, "seed", 0), c1 = add(f, 2, "llm_improve", s1);
    int64_t c2 = add(f, 3, "llm_improve", s1), c3 = add(f, 4, "llm_improve", s1);
    int64_t c4 = add(f, 5, "llm_fix", s1), run2 = 0;
    char *js = NULL;

    finish(f, s1, "ok", 10);
    finish(f, c1, "ok", 5);                     /* better than its parent */
    finish(f, c2, "mismatch", 1);
    finish(f, c4, "ok", 20);                    /* correct, slower; c3 is not evaluated */
    llm_call(f, f->run, A, "ok", c1, t1, 0.25);
    llm_call(f, f->run, A, "ok", c2, t2, 0.5);
    llm_call(f, f->run, A, "unusable: no code block: none", 0, t3, 0.125);
    llm_call(f, f->run, A, "unusable: an edit does not match", 0, t3, 0.125);
    llm_call(f, f->run, A, "http_429", 0, t0, 0);
    llm_call(f, f->run, A, "ok", c3, t3, 0.125);
    llm_call(f, f->run, B, "replay: ok", c4, t2, 0);
    llm_call(f, f->run, B, "replay: unusable: x", 0, t3, 0);
    llm_call(f, f->run, B, "cached unusable: y", 0, t0, 0);
    assert_int_equal(kevo_archive_run_create(f->a, "t2", NULL, "x", 1, NULL, &run2), KEVO_OK);
    llm_call(f, run2, A, "ok", 0, t1, 1.0);    /* another run's: not counted */

    assert_int_equal(kevo_archive_llm_models_json(f->a, f->run, &js), KEVO_OK);
    json_t *doc = json_loads(js, 0, NULL), *a = json_array_get(doc, 1), *b = json_array_get(doc, 0);
    kevo_free(js);
    assert_int_equal(json_array_size(doc), 2);  /* by name: anthropic:b first */
    assert_string_equal(json_string_value(json_object_get(a, "model")), A);
    assert_string_equal(json_string_value(json_object_get(b, "model")), B);
    js = json_dumps(json_object_get(a, "calls"), JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(js, "{\"http_429\":1,\"ok\":3,\"unusable\":2}");
    free(js);
    js = json_dumps(json_object_get(a, "tokens"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_string_equal(js, "{\"in\":330,\"cached_in\":40,\"out\":85,\"reasoning\":10}");
    free(js);
    assert_int_equal(json_integer_value(json_object_get(a, "n_calls")), 6);
    assert_true(fabs(json_real_value(json_object_get(a, "cost")) - 1.125) < 1e-12);
    assert_true(fabs(json_real_value(json_object_get(a, "latency_s")) - 11.25) < 1e-9);
    assert_int_equal(json_integer_value(json_object_get(a, "candidates")), 2);
    assert_int_equal(json_integer_value(json_object_get(a, "ok")), 1);
    assert_int_equal(json_integer_value(json_object_get(a, "improved")), 1);
    js = json_dumps(json_object_get(b, "calls"), JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(js, "{\"cached unusable\":1,\"replay: ok\":1,"
                            "\"replay: unusable\":1}");
    free(js);
    assert_int_equal(json_integer_value(json_object_get(b, "candidates")), 1);
    assert_int_equal(json_integer_value(json_object_get(b, "ok")), 1);
    assert_int_equal(json_integer_value(json_object_get(b, "improved")), 0);
    assert_true(json_real_value(json_object_get(b, "cost")) == 0);
    json_decref(doc);
    /* a run without calls, or no such run: none */
    assert_int_equal(kevo_archive_llm_models_json(f->a, 999, &js), KEVO_OK);
    assert_string_equal(js, "[]");
    kevo_free(js);
}

/* The step log: verdicts and replies interleaved in the order they were handled; the
 * LLM rows read back whole; sessions counted by each return to running. */
static void test_steps(void **state)
{
    struct fix *f = *state;
    struct kevo_llm_call_rec r;
    struct kevo_llm_row *rows = NULL;
    struct kevo_step *steps = NULL;
    struct kevo_run_rec rr;
    struct kevo_cand_rec c;
    int64_t a1 = add(f, 1, "seed", 0), a2 = add(f, 2, "param", a1), a3 = add(f, 3, "param", a1);
    int64_t l1 = 0, l2 = 0;
    int n = -1;

    assert_int_equal(kevo_archive_cand_finish_step(f->a, a1, 1, KEVO_VERDICT_OK, 2.0, 0.5, 1.0,
                                                   "{}", "{}"), KEVO_OK);
    memset(&r, 0, sizeof r);
    r.run_id = f->run;
    r.model = "openai:m@http://h/v1";
    r.op = "llm_improve";
    snprintf(r.prompt_hash, sizeof r.prompt_hash, "%064d", 7);
    r.prompt = "p";
    r.reply = "an answer";
    r.tokens_in = 10;
    r.tokens_out = 20;
    r.tokens_cached_in = 4;
    r.tokens_reasoning = 6;
    r.cost = 0.5;
    r.status = "ok";
    r.step = 2;
    r.submitted = 5;
    r.cand_id = a2;
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &l1), KEVO_OK);
    r.step = 0;                                   /* not a step: a refusal */
    r.reply = NULL;
    r.cand_id = 0;
    r.status = "not_cached";
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &l2), KEVO_OK);
    assert_int_equal(kevo_archive_cand_finish_step(f->a, a3, 3, KEVO_VERDICT_MISMATCH, NAN, NAN,
                                                   NAN, "{}", "{}"), KEVO_OK);
    finish(f, a2, "ok", 1.0);                     /* no step */
    assert_int_equal(kevo_archive_steps(f->a, f->run, &steps, &n), KEVO_OK);
    assert_int_equal(n, 3);
    assert_true(steps[0].step == 1 && steps[0].kind == KEVO_STEP_EVAL && steps[0].id == a1);
    assert_true(steps[1].step == 2 && steps[1].kind == KEVO_STEP_LLM && steps[1].id == l1);
    assert_true(steps[2].step == 3 && steps[2].kind == KEVO_STEP_EVAL && steps[2].id == a3);
    kevo_free(steps);
    assert_int_equal(kevo_archive_cand_get(f->a, a3, &c), KEVO_OK);
    assert_int_equal(c.step, 3);
    kevo_archive_cand_clear(&c);
    assert_int_equal(kevo_archive_cand_get(f->a, a2, &c), KEVO_OK);
    assert_int_equal(c.step, 0);
    kevo_archive_cand_clear(&c);

    assert_int_equal(kevo_archive_llm_rows(f->a, f->run, &rows, &n), KEVO_OK);
    assert_int_equal(n, 2);
    assert_true(rows[0].id == l1 && rows[0].cand_id == a2 && rows[0].step == 2);
    assert_int_equal(rows[0].submitted, 5);
    assert_true(rows[0].tokens_in == 10 && rows[0].tokens_out == 20 && rows[0].cost == 0.5);
    assert_true(rows[0].tokens_cached_in == 4 && rows[0].tokens_reasoning == 6);
    assert_string_equal(rows[0].reply, "an answer");
    assert_string_equal(rows[0].op, "llm_improve");
    assert_string_equal(rows[0].model, "openai:m@http://h/v1");
    assert_string_equal(rows[0].prompt_hash, r.prompt_hash);
    assert_null(rows[1].reply);
    assert_string_equal(rows[1].status, "not_cached");
    assert_true(rows[1].cand_id == 0 && rows[1].step == 0);
    kevo_archive_llm_rows_free(rows, n);
    kevo_archive_llm_rows_free(NULL, 0);
    assert_int_equal(kevo_archive_steps(f->a, 999, &steps, &n), KEVO_OK);   /* no run: none */
    assert_int_equal(n, 0);
    kevo_free(steps);

    int64_t *ids = NULL;
    assert_int_equal(kevo_archive_cand_ids(f->a, f->run, KEVO_CAND_ANY, &ids, &n), KEVO_OK);
    assert_true(n == 3 && ids[0] == a1 && ids[1] == a2 && ids[2] == a3);
    kevo_free(ids);

    assert_int_equal(kevo_archive_run_get(f->a, f->run, &rr), KEVO_OK);
    assert_int_equal(rr.sessions, 1);
    kevo_archive_run_clear(&rr);
    assert_int_equal(kevo_archive_run_finish(f->a, f->run, KEVO_RUN_STOPPED, NULL), KEVO_OK);
    assert_int_equal(kevo_archive_run_finish(f->a, f->run, KEVO_RUN_RUNNING, NULL), KEVO_OK);
    assert_int_equal(kevo_archive_run_finish(f->a, f->run, KEVO_RUN_DONE, "{}"), KEVO_OK);
    assert_int_equal(kevo_archive_run_get(f->a, f->run, &rr), KEVO_OK);
    assert_int_equal(rr.sessions, 2);
    kevo_archive_run_clear(&rr);
}

/* A schema-1 file (before the step log) migrates on open and keeps its rows. */
static void test_migrate_v1(void **state)
{
    struct fix *f = *state;
    struct kevo_archive *a = NULL;
    struct kevo_run_rec rr;
    struct kevo_cand_rec c;
    struct kevo_step *steps = NULL;
    char p[160];
    int n = -1;

    snprintf(p, sizeof p, "%s/v1.db", f->dir);
    raw_exec(p, "PRAGMA application_id = 1262835279;");
    /* schema 1 is migration step 0 exactly; then a run and a done candidate in it */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, kevo_archive_test_migration(0), NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
        "PRAGMA user_version = 1;"
        "INSERT INTO sources VALUES ('h', 'x', 1);"
        "INSERT INTO runs(id, task_name, task_hash, config_json, status, started, updated)"
        " VALUES (1, 't', 'h', '{}', 'done', 0, 0);"
        "INSERT INTO candidates(id, run_id, key, source_hash, op, state, verdict, score,"
        " created) VALUES (1, 1, 'k', 'h', 'seed', 'done', 'ok', 1.5, 0);", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    a = open_ok(p);
    assert_int_equal(raw_int(p, "PRAGMA user_version"), KEVO_ARCHIVE_SCHEMA);
    assert_int_equal(kevo_archive_run_get(a, 1, &rr), KEVO_OK);
    assert_int_equal(rr.sessions, 1);
    kevo_archive_run_clear(&rr);
    assert_int_equal(kevo_archive_cand_get(a, 1, &c), KEVO_OK);
    assert_true(c.score == 1.5 && c.step == 0);
    kevo_archive_cand_clear(&c);
    assert_int_equal(kevo_archive_steps(a, 1, &steps, &n), KEVO_OK);   /* an old run: none */
    assert_int_equal(n, 0);
    kevo_free(steps);
    kevo_archive_close(a);
}

/* ---- persistence and refusal ---- */

static void test_reopen_preserves(void **state)
{
    struct fix *f = *state;
    int64_t s1 = add(f, 1, "seed", 0), c2, ids[4], n, nd, nok;
    struct kevo_cand_rec g;
    char *text = NULL, *js = NULL;
    int cells[4], m = 0;
    double cost = 0;
    struct kevo_llm_call_rec r = { .run_id = f->run, .model = "m", .op = "llm",
                                   .prompt = "p", .reply = "r", .status = "ok", .cost = 2 };

    finish(f, s1, "ok", 4);
    assert_int_equal(kevo_archive_cand_place(f->a, s1, 0, 3, "[7]"), KEVO_OK);
    c2 = add(f, 2, "param", s1);
    assert_int_equal(kevo_archive_eval_add(f->a, s1, "holdout", "{\"h\":1}"), KEVO_OK);
    snprintf(r.prompt_hash, sizeof r.prompt_hash, "%064d", 5);
    assert_int_equal(kevo_archive_llm_add(f->a, &r, &ids[0]), KEVO_OK);
    assert_int_equal(kevo_archive_run_finish(f->a, f->run, KEVO_RUN_DONE, "{\"r\":1}"), KEVO_OK);
    reopen(f);
    assert_int_equal(raw_int(f->path, "PRAGMA user_version"), KEVO_ARCHIVE_SCHEMA);
    assert_int_equal(kevo_archive_cand_get(f->a, s1, &g), KEVO_OK);
    assert_int_equal(g.verdict, KEVO_VERDICT_OK);
    assert_true(g.score == 4);
    assert_string_equal(g.descriptors_json, "[7]");
    kevo_archive_cand_clear(&g);
    assert_int_equal(kevo_archive_cand_get(f->a, c2, &g), KEVO_OK);
    assert_int_equal(g.parent1, s1);
    assert_int_equal(g.state, KEVO_CAND_PENDING);
    kevo_archive_cand_clear(&g);
    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    assert_true(n == 2 && nd == 1 && nok == 1);
    assert_int_equal(kevo_archive_elites(f->a, f->run, 0, 4, cells, ids, &m), KEVO_OK);
    assert_true(m == 1 && cells[0] == 3 && ids[0] == s1);
    assert_int_equal(kevo_archive_eval_get(f->a, s1, "holdout", &text), KEVO_OK);
    assert_string_equal(text, "{\"h\":1}");
    kevo_free(text);
    assert_int_equal(kevo_archive_source_get(f->a, f->src, &text, NULL), KEVO_OK);
    assert_string_equal(text, "src");
    kevo_free(text);
    assert_int_equal(kevo_archive_llm_cost(f->a, f->run, &cost), KEVO_OK);
    assert_true(cost == 2);
    assert_int_equal(kevo_archive_llm_cached(f->a, r.prompt_hash, &text), KEVO_OK);
    kevo_free(text);
    assert_int_equal(kevo_archive_runs_json(f->a, &js), KEVO_OK);
    assert_non_null(strstr(js, "\"done\""));
    kevo_free(js);
    /* a key taken before the reopen is still taken */
    struct kevo_cand_rec dup = cand(f, f->run, 1);
    assert_int_equal(kevo_archive_cand_add(f->a, &dup, &ids[0]), KEVO_ERR_INVALID);
    assert_int_equal(ids[0], s1);
}

/* The whole file's bytes (kevo_free), to show a refused file was left alone. */
static char *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    char *p = kevo_malloc(1 << 16);

    assert_non_null(fp);
    assert_non_null(p);
    *n = fread(p, 1, 1 << 16, fp);
    fclose(fp);
    return p;
}

/* Open must fail with st and a message naming path and what; the file stays as it was. */
static void assert_refused(const char *path, enum kevo_status want, const char *what)
{
    struct kevo_archive *a = (struct kevo_archive *)1;
    char *msg = NULL, *before, *after;
    size_t n0, n1;

    before = slurp(path, &n0);
    assert_int_equal(kevo_archive_open(path, &a, &msg), want);
    assert_null(a);
    assert_non_null(msg);
    if (!strstr(msg, path) || !strstr(msg, what))
        fail_msg("message \"%s\" lacks \"%s\"", msg, what);
    kevo_free(msg);
    after = slurp(path, &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    kevo_free(before);
    kevo_free(after);
}

static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;

    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
}

static void test_future_refused(void **state)
{
    struct fix *f = *state;
    char p[160], want[96];

    snprintf(p, sizeof p, "%s/future.db", f->dir);
    raw_exec(p, "CREATE TABLE runs (id INTEGER PRIMARY KEY); PRAGMA application_id = 1262835279;"
                " PRAGMA user_version = 7;");
    snprintf(want, sizeof want, "archive schema version 7 is newer than this kevo (%d)",
             KEVO_ARCHIVE_SCHEMA);
    assert_refused(p, KEVO_ERR_UNSUPPORTED, want);
    /* and our own file after a newer kevo bumped it */
    kevo_archive_close(f->a);
    f->a = NULL;
    raw_exec(f->path, "PRAGMA user_version = 99");
    assert_refused(f->path, KEVO_ERR_UNSUPPORTED, "archive schema version 99 is newer");
}

static void test_garbage_refused(void **state)
{
    struct fix *f = *state;
    char p[160];
    FILE *fp;

    snprintf(p, sizeof p, "%s/garbage.db", f->dir);
    fp = fopen(p, "wb");
    srand(7);
    for (int i = 0; i < 8192; i++)
        fputc(rand() & 255, fp);
    fclose(fp);
    assert_refused(p, KEVO_ERR_IO, "not a kevo archive");
    fp = fopen(p, "wb");
    fputs("hello, I am a text file\n", fp);
    fclose(fp);
    assert_refused(p, KEVO_ERR_IO, "not a kevo archive");
    /* a SQLite database of some other program: left alone */
    snprintf(p, sizeof p, "%s/other.db", f->dir);
    raw_exec(p, "CREATE TABLE t (x); INSERT INTO t VALUES (1);");
    assert_refused(p, KEVO_ERR_IO, "not a kevo archive");
    char mode[16];
    raw_journal_mode(p, mode);
    assert_string_equal(mode, "delete");                       /* not switched to WAL */
}

/* ---- crash safety ---- */

struct report {
    int64_t i, id;
};

/* The child: add and finish candidates n0.. and report each after it committed. */
static void crash_child(const char *path, int64_t run, const char *src, int n0, int k, int fd)
{
    struct kevo_archive *a = NULL;
    char metrics[64];

    if (kevo_archive_open(path, &a, NULL) != KEVO_OK)
        _exit(2);
    for (int i = n0; i < n0 + k; i++) {
        struct kevo_cand_rec r;
        struct report rep = { i, 0 };
        memset(&r, 0, sizeof r);
        r.run_id = run;
        snprintf(r.key, sizeof r.key, "k%063d", i);
        memcpy(r.source_hash, src, KEVO_HASH_HEX);
        snprintf(r.op, sizeof r.op, "param");
        snprintf(metrics, sizeof metrics, "{\"i\":%d}", i);
        if (kevo_archive_cand_add(a, &r, &rep.id) != KEVO_OK ||
            kevo_archive_cand_finish(a, rep.id, KEVO_VERDICT_OK, i + 0.5, 0.5, 1, metrics,
                                     metrics) !=
                KEVO_OK)
            _exit(3);
        if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep)
            _exit(4);
    }
    kevo_archive_close(a);
    _exit(0);
}

/* Every reported candidate is there, finished and intact. */
static void check_reported(struct fix *f, const struct report *reps, int n)
{
    for (int j = 0; j < n; j++) {
        struct kevo_cand_rec g;
        char key[KEVO_HASH_HEX], metrics[64], *ev = NULL;
        snprintf(key, sizeof key, "k%063d", (int)reps[j].i);
        snprintf(metrics, sizeof metrics, "{\"i\":%d}", (int)reps[j].i);
        assert_int_equal(kevo_archive_cand_get(f->a, reps[j].id, &g), KEVO_OK);
        assert_string_equal(g.key, key);
        assert_int_equal(g.state, KEVO_CAND_DONE);
        assert_int_equal(g.verdict, KEVO_VERDICT_OK);
        assert_true(g.score == reps[j].i + 0.5);
        assert_string_equal(g.metrics_json, metrics);
        kevo_archive_cand_clear(&g);
        assert_int_equal(kevo_archive_eval_get(f->a, reps[j].id, "verify", &ev), KEVO_OK);
        assert_string_equal(ev, metrics);
        kevo_free(ev);
    }
}

/* One round: a child writes k candidates; it is killed after `after` reports, or after
 * delay_us when after is 0. Returns how many it reported. */
static int crash_round(struct fix *f, int n0, int k, int after, int delay_us,
                       struct report *reps)
{
    int fds[2], n = 0, status = 0;
    pid_t pid;
    ssize_t got;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        crash_child(f->path, f->run, f->src, n0, k, fds[1]);
    }
    close(fds[1]);
    if (after == 0)
        usleep((useconds_t)delay_us);
    while (n < after && read(fds[0], &reps[n], sizeof *reps) == (ssize_t)sizeof *reps)
        n++;
    kill(pid, SIGKILL);
    /* what it wrote before the signal landed was committed too */
    while ((got = read(fds[0], &reps[n], sizeof *reps)) == (ssize_t)sizeof *reps)
        n++;
    assert_true(got == 0);
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                (WIFEXITED(status) && WEXITSTATUS(status) == 0));
    return n;
}

static void test_crash_safety(void **state)
{
    struct fix *f = *state;
    enum { K = 400, ROUNDS = 6 };
    struct report *reps = calloc(ROUNDS * K, sizeof *reps);
    int total = 0;
    int64_t n, nd, nok;
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

    assert_non_null(reps);
    kevo_archive_close(f->a);                        /* the child is the writer */
    f->a = NULL;
    srand(seed);
    for (int round = 0; round < ROUNDS; round++) {
        /* half the rounds stop after a random number of reports, half at a random time */
        int after = round % 2 ? 1 + rand() % (K / 2) : 0;
        int delay = 2000 + rand() % 60000;
        total += crash_round(f, round * K, K, after, delay, reps + total);
    }
    f->a = open_ok(f->path);                         /* recovers the WAL */
    print_message("crash safety: seed %u, %d candidates reported over %d kills\n", seed, total,
                  ROUNDS);
    check_reported(f, reps, total);
    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    /* at most one added-but-unfinished candidate per killed child; counters agree */
    assert_true(n >= total && n - nd <= ROUNDS && nd == nok);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM candidates"), n);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM pragma_integrity_check"
                                      " WHERE integrity_check = 'ok'"), 1);
    free(reps);
}

/* ---- full disk, busy lock, failed allocations ---- */

static void test_disk_full(void **state)
{
    struct fix *f = *state;
    enum { MAX = 400 };
    int64_t ids[MAX], n, nd, nok;
    char big[4000];
    int ok = 0;
    enum kevo_status st = KEVO_OK;

    memset(big, 'x', sizeof big - 1);
    big[0] = '"';
    big[sizeof big - 2] = '"';
    big[sizeof big - 1] = '\0';
    assert_int_equal(kevo_archive_test_limits(f->a, 60, -1), KEVO_OK);     /* 60 pages */
    for (ok = 0; ok < MAX; ok++) {
        struct kevo_cand_rec r = cand(f, f->run, ok);
        st = kevo_archive_cand_add(f->a, &r, &ids[ok]);
        if (st == KEVO_OK)
            st = kevo_archive_cand_finish(f->a, ids[ok], KEVO_VERDICT_OK, ok, 0, 0, big, big);
        if (st != KEVO_OK)
            break;
    }
    assert_true(ok > 3 && ok < MAX);
    assert_int_equal(st, KEVO_ERR_IO);
    assert_msg_has(f->a, f->path, "database or disk is full");
    /* what was committed is intact; the failed finish left its candidate pending */
    for (int i = 0; i < ok; i++) {
        struct kevo_cand_rec g;
        assert_int_equal(kevo_archive_cand_get(f->a, ids[i], &g), KEVO_OK);
        assert_int_equal(g.verdict, KEVO_VERDICT_OK);
        assert_string_equal(g.metrics_json, big);
        kevo_archive_cand_clear(&g);
    }
    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    assert_int_equal(nd, ok);
    assert_true(n == ok || n == ok + 1);
    /* room again: writing goes on, and everything is still there after a reopen */
    assert_int_equal(kevo_archive_test_limits(f->a, 100000, -1), KEVO_OK);
    struct kevo_cand_rec r = cand(f, f->run, MAX + 1);
    int64_t id;
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_OK);
    reopen(f);
    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    assert_int_equal(nd, ok);
    assert_int_equal(raw_int(f->path, "SELECT count(*) FROM pragma_integrity_check"
                                      " WHERE integrity_check = 'ok'"), 1);
}

static void test_busy(void **state)
{
    struct fix *f = *state;
    sqlite3 *db = NULL;
    struct kevo_cand_rec r = cand(f, f->run, 1);
    int64_t id = 0, n, nd, nok;

    assert_int_equal(kevo_archive_test_limits(f->a, 0, 50), KEVO_OK);
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_ERR_TIMEOUT);
    assert_msg_has(f->a, f->path, "locked");
    assert_int_equal(kevo_archive_cand_finish(f->a, 1, KEVO_VERDICT_OK, 1, 0, 0, NULL, "{}"),
                     KEVO_ERR_TIMEOUT);
    /* readers do not wait for the writer */
    assert_int_equal(kevo_archive_counts(f->a, f->run, &n, &nd, &nok), KEVO_OK);
    assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(kevo_archive_cand_add(f->a, &r, &id), KEVO_OK);
}

static void test_out_of_memory(void **state)
{
    struct fix *f = *state;
    int64_t id = add(f, 1, "seed", 0);
    struct kevo_cand_rec g;
    char *js = NULL;
    int i;

    finish(f, id, "ok", 1);
    for (i = 1; i < 20; i++) {
        kevo_mem_fail_after(i);
        enum kevo_status st = kevo_archive_cand_get(f->a, id, &g);
        kevo_mem_fail_after(0);
        if (st == KEVO_OK)
            break;
        assert_int_equal(st, KEVO_ERR_NOMEM);
        assert_null(g.metrics_json);
    }
    assert_true(i > 1 && i < 20);
    kevo_archive_cand_clear(&g);
    for (i = 1; i < 20; i++) {
        struct kevo_archive *a = NULL;
        char *msg = NULL;
        kevo_mem_fail_after(i);
        enum kevo_status st = kevo_archive_open(f->path, &a, &msg);
        kevo_mem_fail_after(0);
        kevo_free(msg);
        kevo_archive_close(a);
        if (st == KEVO_OK)
            break;
        assert_int_equal(st, KEVO_ERR_NOMEM);
    }
    assert_int_equal(kevo_archive_runs_json(f->a, &js), KEVO_OK);
    kevo_free(js);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_open_creates_schema),
        T(test_sources),
        T(test_runs),
        T(test_runs_json),
        T(test_cand_roundtrip),
        T(test_cand_dedupe),
        T(test_cand_invalid),
        T(test_cand_ids),
        T(test_best),
        T(test_elites),
        T(test_counts),
        T(test_op_stats),
        T(test_evals),
        T(test_llm),
        T(test_llm_models),
        T(test_steps),
        T(test_migrate_v1),
        T(test_reopen_preserves),
        T(test_future_refused),
        T(test_garbage_refused),
        T(test_crash_safety),
        T(test_disk_full),
        T(test_busy),
        T(test_out_of_memory),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

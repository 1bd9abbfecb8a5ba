/*
 * archive - the search's persistent record in one SQLite database (archive.h for the
 * contract, docs/archive.md for the schema and the durability argument).
 *
 * Invariants:
 * - every value reaches SQL through a bound parameter of a prepared statement; the only
 *   SQL built at run time is a PRAGMA whose integer argument cannot be bound;
 * - every public write is one transaction, committed before the function returns (WAL,
 *   synchronous=NORMAL: a commit is in the WAL file, so a SIGKILL cannot undo it);
 * - statements are prepared once, kept in the handle, and reset after every use so no
 *   read transaction outlives a call (an open one would pin the WAL and block checkpoints);
 * - run counters (runs.n_cands, n_done, n_ok) and operator counters (op_stats) are kept
 *   by triggers in the same transaction as the candidate rows, so counts and op stats are
 *   lookups; best and elites are index seeks (partial indexes over ok rows), so no query
 *   the search makes per step grows with the run.
 *
 * Thread-safety: a handle is used by one thread at a time (it owns an error buffer and
 * the cached statements); open one handle per thread. Processes may share a file.
 * The handle and the helpers are archive_int.h's; the LLM calls are archive_llm.c's.
 */
#include "ctl/archive.h"
#include "ctl/archive_int.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/proc.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define APP_ID    0x4B45564F     /* "KEVO" in the file header: tells our files from others */
#define BUSY_MS   5000           /* how long a writer waits for another one */

static const char *const run_status_names[] = { "running", "done", "stopped", "failed" };
_Static_assert(sizeof run_status_names / sizeof run_status_names[0] == KEVO_RUN_FAILED + 1,
               "run_status_names out of sync with enum kevo_run_status");
static const char *const cand_state_names[] = { "pending", "done" };

/* ---- open, identify, migrate ---- */

/* One integer from a single-row statement (PRAGMA user_version, ...). */
static enum kevo_status read_int(struct kevo_archive *a, enum stmt_id id, int64_t *out)
{
    sqlite3_stmt *s = NULL;
    enum kevo_status st = ar_stmt(a, id, &s);

    *out = 0;
    if (st == KEVO_OK)
        st = ar_step_row(a, s, "reading the archive header");
    if (st == KEVO_ERR_NOTFOUND)
        st = ar_fail(a, KEVO_ERR_IO, "reading the archive header: no result");
    if (st == KEVO_OK)
        *out = sqlite3_column_int64(s, 0);
    ar_done(s);
    return st;
}

/*
 * What the file holds: *version is its schema version (0: empty, to be created). A
 * SQLite file of another application, a file that is no database at all and one from a
 * newer kevo are refused before anything is written to them.
 */
static enum kevo_status check_file(struct kevo_archive *a, int64_t *version)
{
    int64_t app = 0, n_obj = 0;
    enum kevo_status st = read_int(a, S_APP_ID, &app);

    if (st == KEVO_OK)
        st = read_int(a, S_VERSION, version);
    if (st == KEVO_OK)
        st = read_int(a, S_N_OBJECTS, &n_obj);
    if (st != KEVO_OK) {
        int prim = a->last_rc & 0xff;
        if (prim == SQLITE_NOTADB || prim == SQLITE_CORRUPT)
            return ar_fail(a, KEVO_ERR_IO, "not a kevo archive (%s)", sqlite3_errstr(prim));
        return st;
    }
    if (app == 0 && n_obj == 0 && *version == 0)
        return KEVO_OK;
    if (app != APP_ID)
        return ar_fail(a, KEVO_ERR_IO, "not a kevo archive (a SQLite database of something else:"
                    " application_id %lld, %lld schema objects)", (long long)app,
                    (long long)n_obj);
    if (*version > KEVO_ARCHIVE_SCHEMA)
        return ar_fail(a, KEVO_ERR_UNSUPPORTED,
                    "archive schema version %lld is newer than this kevo (%d)",
                    (long long)*version, KEVO_ARCHIVE_SCHEMA);
    return KEVO_OK;
}

static enum kevo_status exec_sql(struct kevo_archive *a, const char *sql, const char *what)
{
    int rc = sqlite3_exec(a->db, sql, NULL, NULL, NULL);

    return rc == SQLITE_OK ? KEVO_OK : ar_fail_db(a, rc, what);
}

/* Apply migrations[v..] under the write lock, with the header, in one transaction. */
static enum kevo_status migrate(struct kevo_archive *a)
{
    char sql[128];
    int64_t v = 0, from;
    enum kevo_status st = ar_tx_begin(a);

    if (st != KEVO_OK)
        return st;
    /* re-read under the lock: another process may have migrated since we looked */
    st = check_file(a, &v);
    from = v;
    for (; st == KEVO_OK && v < KEVO_ARCHIVE_SCHEMA; v++)
        st = exec_sql(a, kevo_archive_migrations[v], "migrating the archive schema");
    if (st == KEVO_OK && from < KEVO_ARCHIVE_SCHEMA) {
        /* PRAGMA arguments cannot be bound; both are compile-time integers */
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
                 APP_ID, KEVO_ARCHIVE_SCHEMA);
        st = exec_sql(a, sql, "writing the archive header");
    }
    return ar_tx_end(a, st);
}

/* sqlite3_exec callback: the first column of a row into out (16 bytes). */
static int first_text(void *out, int n_cols, char **vals, char **names)
{
    if (n_cols > 0 && vals[0])
        snprintf(out, 16, "%s", vals[0]);
    return 0;
}

/*
 * WAL: readers never block the writer, and a commit is a write() to the WAL, so a killed
 * process leaves it for the next open to recover. synchronous=NORMAL syncs only at
 * checkpoints: a power cut may lose the last commits (never corrupt the file);
 * KEVO_ARCHIVE_SYNC=full syncs every commit (docs/archive.md).
 */
static enum kevo_status set_pragmas(struct kevo_archive *a)
{
    const char *sync = getenv("KEVO_ARCHIVE_SYNC");
    char mode[16] = "";
    int rc = sqlite3_exec(a->db, "PRAGMA journal_mode = WAL", first_text, mode, NULL);
    enum kevo_status st;

    if (rc != SQLITE_OK)
        return ar_fail_db(a, rc, "switching to WAL");
    if (strcmp(mode, "wal") != 0)
        return ar_fail(a, KEVO_ERR_IO, "switching to WAL: the file system refused (mode %s)",
                    mode);
    st = exec_sql(a, sync && strcmp(sync, "full") == 0 ? "PRAGMA synchronous = FULL"
                                                        : "PRAGMA synchronous = NORMAL",
                  "setting synchronous");
    if (st == KEVO_OK)
        st = exec_sql(a, "PRAGMA foreign_keys = ON", "enabling foreign keys");
    return st;
}

/* mkdir -p of the directory part of the path, if any. */
static enum kevo_status make_parent(struct kevo_archive *a)
{
    const char *slash = strrchr(a->path, '/');
    struct stat sb;
    char *dir;
    int rc;

    if (!slash || slash == a->path)
        return KEVO_OK;
    dir = kevo_strndup(a->path, (size_t)(slash - a->path));
    if (!dir)
        return ar_fail(a, KEVO_ERR_NOMEM, "out of memory");
    /* the common case, an existing directory, needs no mkdirs (which allocates) */
    rc = stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) ? 0 : kevo_fs_mkdirs(dir, 0777);
    if (rc != 0)
        rc = errno;
    kevo_free(dir);
    return rc ? ar_fail(a, KEVO_ERR_IO, "creating its directory: %s", strerror(rc)) : KEVO_OK;
}

static enum kevo_status open_db(struct kevo_archive *a)
{
    int rc = sqlite3_open_v2(a->path, &a->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                             SQLITE_OPEN_NOMUTEX, NULL);

    if (rc != SQLITE_OK)
        return ar_fail_db(a, rc, "opening");
    sqlite3_extended_result_codes(a->db, 1);
    sqlite3_busy_timeout(a->db, BUSY_MS);
    return KEVO_OK;
}

enum kevo_status kevo_archive_open_existing(const char *path, struct kevo_archive **out,
                                           char **out_msg)
{
    struct stat s;

    *out = NULL;
    *out_msg = NULL;
    if (stat(path, &s) != 0) {
        *out_msg = kevo_strdupf("%s: no such archive (%s; kevo run creates one)", path,
                                strerror(errno));
        return KEVO_ERR_NOTFOUND;
    }
    return kevo_archive_open(path, out, out_msg);
}

enum kevo_status kevo_archive_open(const char *path, struct kevo_archive **out, char **out_msg)
{
    struct kevo_archive *a = NULL;
    enum kevo_status st = KEVO_ERR_NOMEM;
    int64_t version = 0;

    KEVO_ASSERT(path && out);
    *out = NULL;
    if (out_msg)
        *out_msg = NULL;
    a = kevo_calloc(1, sizeof *a);
    if (!a || !(a->path = kevo_strdup(path)))
        goto out;
    st = make_parent(a);
    if (st == KEVO_OK)
        st = open_db(a);
    if (st == KEVO_OK)
        st = check_file(a, &version);
    if (st == KEVO_OK)
        st = set_pragmas(a);
    if (st == KEVO_OK && version < KEVO_ARCHIVE_SCHEMA)
        st = migrate(a);
out:
    if (st != KEVO_OK && out_msg)
        *out_msg = kevo_strdup(a && a->path ? a->err : "out of memory");
    if (st != KEVO_OK)
        kevo_archive_close(a);
    else
        *out = a;
    return st;
}

void kevo_archive_close(struct kevo_archive *a)
{
    if (!a)
        return;
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(a->stmt[i]);
    /* the last connection checkpoints the WAL into the file and removes it */
    if (a->db && sqlite3_close(a->db) != SQLITE_OK)
        KEVO_WARN("%s: closing: %s", a->path, sqlite3_errmsg(a->db));
    kevo_free(a->path);
    kevo_free(a);
}

const char *kevo_archive_errmsg(const struct kevo_archive *a)
{
    return a ? a->err : "";
}

const char *kevo_archive_test_migration(int v)
{
    return v >= 0 && v < KEVO_ARCHIVE_SCHEMA ? kevo_archive_migrations[v] : NULL;
}

enum kevo_status kevo_archive_test_limits(struct kevo_archive *a, int64_t max_pages, int busy_ms)
{
    char sql[64];
    enum kevo_status st = KEVO_OK;

    KEVO_ASSERT(a);
    if (max_pages > 0) {
        snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)max_pages);
        st = exec_sql(a, sql, "setting max_page_count");
    }
    if (st == KEVO_OK && busy_ms >= 0)
        sqlite3_busy_timeout(a->db, busy_ms);
    return st;
}

/* ---- sources ---- */

/* Inside or outside a transaction (run_create stores the task text in its own). */
enum kevo_status kevo_archive_source_put(struct kevo_archive *a, const char *text, size_t len,
                                         char hash[KEVO_HASH_HEX])
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && (text || !len) && hash);
    hash[0] = '\0';
    if (len > INT_MAX)
        return ar_fail(a, KEVO_ERR_TOOBIG, "storing a source: %zu bytes is too big", len);
    st = kevo_sha256_hex(len ? text : "", len, hash);
    if (st != KEVO_OK)
        return ar_fail(a, st, "hashing a source: OpenSSL's SHA-256 failed");
    st = ar_prep(a, S_SRC_PUT, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_text(&b, 1, hash);
    if (b.rc == SQLITE_OK)  /* a blob: the text is stored byte for byte, NULs included */
        b.rc = sqlite3_bind_blob(b.s, 2, len ? text : "", (int)len, SQLITE_STATIC);
    ar_b_int(&b, 3, (int64_t)len);
    return ar_write_stmt(a, &b, "storing a source");
}

enum kevo_status kevo_archive_source_get(struct kevo_archive *a, const char *hash, char **text,
                                         size_t *len)
{
    struct ar_bind b;
    size_t n;
    enum kevo_status st;

    KEVO_ASSERT(a && hash && text);
    *text = NULL;
    if (len)
        *len = 0;
    st = ar_prep(a, S_SRC_GET, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_text(&b, 1, hash);
    st = ar_query_row(a, &b, "reading a source");
    if (st == KEVO_ERR_NOTFOUND)
        ar_fail(a, st, "no source with hash %.64s", hash);
    if (st != KEVO_OK)
        goto out;
    n = (size_t)sqlite3_column_bytes(b.s, 0);
    *text = kevo_malloc(n + 1);
    if (!*text) {
        st = ar_fail(a, KEVO_ERR_NOMEM, "reading a source: out of memory");
        goto out;
    }
    if (n)
        memcpy(*text, sqlite3_column_blob(b.s, 0), n);
    (*text)[n] = '\0';
    if (len)
        *len = n;
out:
    ar_done(b.s);
    return st;
}

/* ---- runs ---- */

/* The owner's pid, host and start as parameters i, i + 1, i + 2 (NULL where unknown). */
static void bind_owner(struct ar_bind *b, int i, const struct kevo_proc_id *p)
{
    if (p->pid > 0)
        ar_b_int(b, i, p->pid);
    ar_b_text(b, i + 1, p->host[0] ? p->host : NULL);
    if (p->start > 0)
        ar_b_int(b, i + 2, p->start);
}

/* Columns i, i + 1, i + 2 of s (pid, host, start; 0 and NULL where unknown) into p. */
static void col_owner(sqlite3_stmt *s, int i, struct kevo_proc_id *p)
{
    const char *host = (const char *)sqlite3_column_text(s, i + 1);

    memset(p, 0, sizeof *p);
    p->pid = sqlite3_column_int64(s, i);
    if (host)
        snprintf(p->host, sizeof p->host, "%s", host);
    p->start = sqlite3_column_int64(s, i + 2);
}

enum kevo_status kevo_archive_run_create(struct kevo_archive *a, const char *task_name,
                                         const char *task_path, const char *task_text,
                                         size_t task_len, const char *config_json, int64_t *id)
{
    char hash[KEVO_HASH_HEX];
    sqlite3_stmt *s = NULL;
    struct kevo_proc_id me;
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && task_name && (task_text || !task_len) && id);
    *id = 0;
    kevo_proc_self(&me);
    st = ar_tx_begin(a);
    if (st != KEVO_OK)
        return st;
    st = kevo_archive_source_put(a, task_text, task_len, hash);
    if (st == KEVO_OK)
        st = ar_stmt(a, S_RUN_ADD, &s);
    if (st != KEVO_OK)
        goto out;
    b = (struct ar_bind){ s, SQLITE_OK };
    ar_b_text(&b, 1, task_name);
    ar_b_text(&b, 2, task_path);
    ar_b_text(&b, 3, hash);
    ar_b_text(&b, 4, config_json ? config_json : "{}");
    ar_b_real(&b, 5, ar_now_s());
    bind_owner(&b, 6, &me);
    st = ar_bound(a, &b);
    if (st == KEVO_OK)
        st = ar_exec_done(a, s, "creating a run");
    if (st == KEVO_OK)
        *id = sqlite3_last_insert_rowid(a->db);
out:
    ar_done(s);
    st = ar_tx_end(a, st);
    if (st != KEVO_OK)
        *id = 0;
    return st;
}

void kevo_archive_run_clear(struct kevo_run_rec *r)
{
    if (!r)
        return;
    kevo_free(r->task_name);
    kevo_free(r->task_path);
    kevo_free(r->config_json);
    kevo_free(r->result_json);
    memset(r, 0, sizeof *r);
}

static int run_status_parse(const char *name)
{
    for (int i = 0; i <= KEVO_RUN_FAILED; i++)
        if (name && strcmp(name, run_status_names[i]) == 0)
            return i;
    return -1;
}

/* The current row of S_RUN_GET into out. */
static enum kevo_status run_fill(struct kevo_archive *a, sqlite3_stmt *s,
                                 struct kevo_run_rec *out)
{
    enum kevo_status st;
    int status = run_status_parse((const char *)sqlite3_column_text(s, 6));

    out->id = sqlite3_column_int64(s, 0);
    st = ar_col_dup(s, 1, &out->task_name);
    if (st == KEVO_OK)
        st = ar_col_dup(s, 2, &out->task_path);
    if (st == KEVO_OK)
        st = ar_col_dup(s, 4, &out->config_json);
    if (st == KEVO_OK)
        st = ar_col_dup(s, 5, &out->result_json);
    if (st != KEVO_OK)
        return ar_fail(a, st, "reading run %lld: out of memory", (long long)out->id);
    if (status < 0 || ar_copy_field(out->task_hash, sizeof out->task_hash,
                                 (const char *)sqlite3_column_text(s, 3)) != 0)
        return ar_fail(a, KEVO_ERR_IO, "run %lld: malformed row", (long long)out->id);
    out->status = (enum kevo_run_status)status;
    out->started = sqlite3_column_double(s, 7);
    out->updated = sqlite3_column_double(s, 8);
    out->sessions = sqlite3_column_int(s, 9);
    col_owner(s, 10, &out->owner);
    return KEVO_OK;
}

enum kevo_status kevo_archive_run_get(struct kevo_archive *a, int64_t id,
                                      struct kevo_run_rec *out)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && out);
    memset(out, 0, sizeof *out);
    st = ar_prep(a, S_RUN_GET, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, id);
    st = ar_query_row(a, &b, "reading a run");
    if (st == KEVO_ERR_NOTFOUND)
        ar_fail(a, st, "no run %lld", (long long)id);
    if (st == KEVO_OK)
        st = run_fill(a, b.s, out);
    if (st != KEVO_OK)
        kevo_archive_run_clear(out);
    ar_done(b.s);
    return st;
}

enum kevo_status kevo_archive_run_finish(struct kevo_archive *a, int64_t id,
                                         enum kevo_run_status status, const char *result_json)
{
    struct kevo_proc_id me;
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a);
    if ((int)status < 0 || status > KEVO_RUN_FAILED)
        return ar_fail(a, KEVO_ERR_INVALID, "finishing run %lld: bad status %d", (long long)id,
                    (int)status);
    st = ar_prep(a, S_RUN_FINISH, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, id);
    ar_b_text(&b, 2, run_status_names[status]);
    ar_b_text(&b, 3, result_json);
    ar_b_real(&b, 4, ar_now_s());
    kevo_proc_self(&me);   /* the owner of a session that starts (status RUNNING) */
    bind_owner(&b, 5, &me);
    st = ar_write_stmt(a, &b, "finishing a run");
    if (st == KEVO_OK && sqlite3_changes(a->db) == 0)
        st = ar_fail(a, KEVO_ERR_NOTFOUND, "finishing run %lld: no such run", (long long)id);
    return st;
}

enum kevo_status kevo_archive_run_report(struct kevo_archive *a, int64_t id,
                                         const char *result_json)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a);
    st = ar_prep(a, S_RUN_REPORT, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, id);
    ar_b_text(&b, 2, result_json);
    ar_b_real(&b, 3, ar_now_s());
    st = ar_write_stmt(a, &b, "writing a run's report");
    if (st == KEVO_OK && sqlite3_changes(a->db) == 0)
        st = ar_fail(a, KEVO_ERR_NOTFOUND, "writing the report of run %lld: no such run",
                     (long long)id);
    return st;
}

/* One row of S_RUNS as a JSON object appended to arr. */
static int runs_row(sqlite3_stmt *s, json_t *arr)
{
    json_t *o = json_object();
    const char *path = (const char *)sqlite3_column_text(s, 2);
    struct kevo_proc_id own;
    int bad = !o;

    col_owner(s, 9, &own);
    bad |= json_object_set_new(o, "id", json_integer(sqlite3_column_int64(s, 0)));
    bad |= json_object_set_new(o, "task", json_string((const char *)sqlite3_column_text(s, 1)));
    bad |= json_object_set_new(o, "path", path ? json_string(path) : json_null());
    bad |= json_object_set_new(o, "status",
                               json_string((const char *)sqlite3_column_text(s, 3)));
    bad |= json_object_set_new(o, "started", json_real(sqlite3_column_double(s, 4)));
    bad |= json_object_set_new(o, "updated", json_real(sqlite3_column_double(s, 5)));
    bad |= json_object_set_new(o, "n_candidates", json_integer(sqlite3_column_int64(s, 6)));
    bad |= json_object_set_new(o, "n_ok", json_integer(sqlite3_column_int64(s, 7)));
    bad |= json_object_set_new(o, "best_score", sqlite3_column_type(s, 8) == SQLITE_NULL
                                                    ? json_null()
                                                    : json_real(sqlite3_column_double(s, 8)));
    bad |= json_object_set_new(o, "owner", own.pid <= 0 ? json_null()
                               : json_pack("{s:I, s:s?, s:I}", "pid", (json_int_t)own.pid,
                                           "host", own.host[0] ? own.host : NULL, "start",
                                           (json_int_t)own.start));
    bad |= json_array_append_new(arr, o);
    return bad;
}

enum kevo_status kevo_archive_runs_json(struct kevo_archive *a, char **out_json)
{
    sqlite3_stmt *s = NULL;
    json_t *arr = json_array();
    enum kevo_status st;

    KEVO_ASSERT(a && out_json);
    *out_json = NULL;
    st = arr ? ar_stmt(a, S_RUNS, &s) : ar_fail(a, KEVO_ERR_NOMEM, "listing runs: out of memory");
    while (st == KEVO_OK) {
        st = ar_step_row(a, s, "listing runs");
        if (st == KEVO_OK && runs_row(s, arr))
            st = ar_fail(a, KEVO_ERR_NOMEM, "listing runs: out of memory");
    }
    if (st == KEVO_ERR_NOTFOUND) {
        *out_json = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        st = *out_json ? KEVO_OK : ar_fail(a, KEVO_ERR_NOMEM, "listing runs: out of memory");
    }
    ar_done(s);
    json_decref(arr);
    return st;
}

/* ---- candidates ---- */

void kevo_archive_cand_clear(struct kevo_cand_rec *c)
{
    if (!c)
        return;
    kevo_free(c->params_json);
    kevo_free(c->flags_json);
    kevo_free(c->descriptors_json);
    kevo_free(c->metrics_json);
    memset(c, 0, sizeof *c);
}

const char *kevo_archive_cand_verdict(const struct kevo_cand_rec *c)
{
    return c->state == KEVO_CAND_DONE ? kevo_verdict_name(c->verdict) : "";
}

enum kevo_status kevo_archive_cand_by_key(struct kevo_archive *a, int64_t run, const char *key,
                                          int64_t *id)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && key && id);
    *id = 0;
    st = ar_prep(a, S_CAND_KEY, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, run);
    ar_b_text(&b, 2, key);
    st = ar_query_row(a, &b, "looking up a candidate");
    if (st == KEVO_ERR_NOTFOUND)
        ar_fail(a, st, "run %lld has no candidate with key %.64s", (long long)run, key);
    if (st == KEVO_OK)
        *id = sqlite3_column_int64(b.s, 0);
    ar_done(b.s);
    return st;
}

static void cand_add_bind(struct ar_bind *b, const struct kevo_cand_rec *r)
{
    ar_b_int(b, 1, r->run_id);
    ar_b_text(b, 2, r->key);
    ar_b_text(b, 3, r->source_hash);
    ar_b_id(b, 4, r->parent1);
    ar_b_id(b, 5, r->parent2);
    ar_b_text(b, 6, r->op);
    ar_b_text(b, 7, r->params_json);
    ar_b_text(b, 8, r->flags_json);
    ar_b_text(b, 9, r->descriptors_json);
    ar_b_int(b, 10, r->island);
    ar_b_int(b, 11, r->cell);
    ar_b_int(b, 12, r->generation);
    ar_b_real(b, 13, r->created > 0 ? r->created : ar_now_s());
}

/* The fixed-size fields are NUL-terminated within their arrays and not empty. */
static int cand_rec_ok(const struct kevo_cand_rec *r)
{
    return r->key[0] && memchr(r->key, '\0', sizeof r->key) && r->source_hash[0] &&
           memchr(r->source_hash, '\0', sizeof r->source_hash) && r->op[0] &&
           memchr(r->op, '\0', sizeof r->op);
}

enum kevo_status kevo_archive_cand_add(struct kevo_archive *a, const struct kevo_cand_rec *r,
                                       int64_t *id)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && r && id);
    *id = 0;
    if (!cand_rec_ok(r))
        return ar_fail(a, KEVO_ERR_INVALID, "adding a candidate: key, source_hash and op must"
                    " be set");
    st = ar_prep(a, S_CAND_ADD, &b);
    if (st != KEVO_OK)
        return st;
    cand_add_bind(&b, r);
    st = ar_write_stmt(a, &b, "adding a candidate");
    if (st != KEVO_OK)
        return st;
    if (sqlite3_changes(a->db) == 1) {
        *id = sqlite3_last_insert_rowid(a->db);
        return KEVO_OK;
    }
    /* ON CONFLICT DO NOTHING: the run already has this key */
    st = kevo_archive_cand_by_key(a, r->run_id, r->key, id);
    if (st != KEVO_OK)
        return st;
    return ar_fail(a, KEVO_ERR_INVALID, "run %lld already has candidate %lld with key %s",
                (long long)r->run_id, (long long)*id, r->key);
}

/* The UPDATE of cand_finish; NOTFOUND when there is no such candidate. */
static enum kevo_status finish_update(struct kevo_archive *a, int64_t id, int64_t step,
                                      enum kevo_verdict verdict, const double v[3],
                                      const char *metrics_json, double t)
{
    struct ar_bind b;
    enum kevo_status st = ar_prep(a, S_CAND_FINISH, &b);

    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, id);
    ar_b_text(&b, 2, kevo_verdict_name(verdict));   /* the schema's text: 'ok', 'mismatch', ... */
    ar_b_real(&b, 3, v[0]);
    ar_b_real(&b, 4, v[1]);
    ar_b_real(&b, 5, v[2]);
    ar_b_text(&b, 6, metrics_json);
    ar_b_real(&b, 7, t);
    ar_b_id(&b, 8, step);
    st = ar_write_stmt(a, &b, "storing a verdict");
    if (st == KEVO_OK && sqlite3_changes(a->db) == 0)
        st = ar_fail(a, KEVO_ERR_NOTFOUND, "storing a verdict: no candidate %lld", (long long)id);
    return st;
}

static enum kevo_status eval_insert(struct kevo_archive *a, int64_t cand, const char *kind,
                                    const char *result_json, double t)
{
    struct ar_bind b;
    enum kevo_status st = ar_prep(a, S_EVAL_ADD, &b);

    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, cand);
    ar_b_text(&b, 2, kind);
    ar_b_text(&b, 3, result_json);
    ar_b_real(&b, 4, t);
    return ar_write_stmt(a, &b, "storing an evaluation");
}

enum kevo_status kevo_archive_cand_finish(struct kevo_archive *a, int64_t id,
                                          enum kevo_verdict verdict, double score,
                                          double sol_fraction, double speedup,
                                          const char *metrics_json, const char *result_json)
{
    return kevo_archive_cand_finish_step(a, id, 0, verdict, score, sol_fraction, speedup,
                                         metrics_json, result_json);
}

enum kevo_status kevo_archive_cand_finish_step(struct kevo_archive *a, int64_t id, int64_t step,
                                               enum kevo_verdict verdict, double score,
                                               double sol_fraction, double speedup,
                                               const char *metrics_json, const char *result_json)
{
    const double v[3] = { score, sol_fraction, speedup };
    double t = ar_now_s();
    enum kevo_status st;

    KEVO_ASSERT(a);
    if ((unsigned)verdict >= KEVO_VERDICT_COUNT)
        return ar_fail(a, KEVO_ERR_INVALID, "candidate %lld: bad verdict %d", (long long)id,
                    (int)verdict);
    /* best/elites order ok candidates by score: an ok one without a score is a bug */
    if (verdict == KEVO_VERDICT_OK && !isfinite(score))
        return ar_fail(a, KEVO_ERR_INVALID, "candidate %lld: verdict ok needs a finite score",
                    (long long)id);
    st = ar_tx_begin(a);
    if (st != KEVO_OK)
        return st;
    st = finish_update(a, id, step, verdict, v, metrics_json, t);
    if (st == KEVO_OK && result_json)
        st = eval_insert(a, id, "verify", result_json, t);
    return ar_tx_end(a, st);
}

enum kevo_status kevo_archive_cand_place(struct kevo_archive *a, int64_t id, int island,
                                         int cell, const char *descriptors_json)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a);
    st = ar_prep(a, S_CAND_PLACE, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, id);
    ar_b_int(&b, 2, island);
    ar_b_int(&b, 3, cell);
    ar_b_text(&b, 4, descriptors_json);
    st = ar_write_stmt(a, &b, "placing a candidate");
    if (st == KEVO_OK && sqlite3_changes(a->db) == 0)
        st = ar_fail(a, KEVO_ERR_NOTFOUND, "placing: no candidate %lld", (long long)id);
    return st;
}

/* The strings of the current S_CAND_GET row into out. */
static enum kevo_status cand_fill_text(sqlite3_stmt *s, struct kevo_cand_rec *out)
{
    enum kevo_status st = ar_col_dup(s, 7, &out->params_json);

    if (st == KEVO_OK)
        st = ar_col_dup(s, 8, &out->flags_json);
    if (st == KEVO_OK)
        st = ar_col_dup(s, 9, &out->descriptors_json);
    if (st == KEVO_OK)
        st = ar_col_dup(s, 18, &out->metrics_json);
    return st;
}

/* The verdict column of a done row; -1 when it names no verdict (a malformed row). */
static int cand_verdict(sqlite3_stmt *s, struct kevo_cand_rec *out)
{
    const char *v = (const char *)sqlite3_column_text(s, 14);

    out->verdict = KEVO_VERDICT_OK;   /* a pending row's verdict is '' and means nothing */
    if (out->state != KEVO_CAND_DONE)
        return 0;
    return v && kevo_verdict_parse(v, &out->verdict) == KEVO_OK ? 0 : -1;
}

/* The current S_CAND_GET row into out (columns: CAND_COLS). */
static enum kevo_status cand_fill(struct kevo_archive *a, sqlite3_stmt *s,
                                  struct kevo_cand_rec *out)
{
    const char *state = (const char *)sqlite3_column_text(s, 13);

    out->id = sqlite3_column_int64(s, 0);
    out->run_id = sqlite3_column_int64(s, 1);
    out->parent1 = sqlite3_column_int64(s, 2);
    out->parent2 = sqlite3_column_int64(s, 3);
    if (ar_copy_field(out->source_hash, sizeof out->source_hash,
                   (const char *)sqlite3_column_text(s, 4)) ||
        ar_copy_field(out->key, sizeof out->key, (const char *)sqlite3_column_text(s, 5)) ||
        ar_copy_field(out->op, sizeof out->op, (const char *)sqlite3_column_text(s, 6)))
        return ar_fail(a, KEVO_ERR_IO, "candidate %lld: malformed row", (long long)out->id);
    out->state = state && strcmp(state, "done") == 0 ? KEVO_CAND_DONE : KEVO_CAND_PENDING;
    if (cand_verdict(s, out)) {
        const char *v = (const char *)sqlite3_column_text(s, 14);
        return ar_fail(a, KEVO_ERR_IO, "candidate %lld: malformed row: unknown verdict \"%.40s\"",
                    (long long)out->id, v ? v : "");
    }
    if (cand_fill_text(s, out) != KEVO_OK)
        return ar_fail(a, KEVO_ERR_NOMEM, "reading candidate %lld: out of memory",
                    (long long)out->id);
    out->island = sqlite3_column_int(s, 10);
    out->cell = sqlite3_column_int(s, 11);
    out->generation = sqlite3_column_int(s, 12);
    out->score = ar_col_real(s, 15);
    out->sol_fraction = ar_col_real(s, 16);
    out->speedup = ar_col_real(s, 17);
    out->created = sqlite3_column_double(s, 19);
    out->finished = sqlite3_column_double(s, 20);     /* NULL (pending): 0 */
    out->step = sqlite3_column_int64(s, 21);
    out->improved = sqlite3_column_int(s, 22);
    return KEVO_OK;
}

enum kevo_status kevo_archive_cand_get(struct kevo_archive *a, int64_t id,
                                       struct kevo_cand_rec *out)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && out);
    memset(out, 0, sizeof *out);
    st = ar_prep(a, S_CAND_GET, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, id);
    st = ar_query_row(a, &b, "reading a candidate");
    if (st == KEVO_ERR_NOTFOUND)
        ar_fail(a, st, "no candidate %lld", (long long)id);
    if (st == KEVO_OK)
        st = cand_fill(a, b.s, out);
    if (st != KEVO_OK)
        kevo_archive_cand_clear(out);
    ar_done(b.s);
    return st;
}

/* ---- queries the search makes every step ---- */

/* Append the int64 column 0 of every remaining row of s to a growing array. */
static enum kevo_status collect_ids(struct kevo_archive *a, sqlite3_stmt *s, int64_t **ids,
                                    int *n)
{
    int cap = 0;
    enum kevo_status st = KEVO_OK;

    while (st == KEVO_OK) {
        st = ar_step_row(a, s, "listing candidates");
        if (st != KEVO_OK)
            break;
        if (*n == cap) {
            int64_t *p = ar_grow(*ids, &cap, sizeof *p);
            if (!p)
                return ar_fail(a, KEVO_ERR_NOMEM, "listing candidates: out of memory");
            *ids = p;
        }
        (*ids)[(*n)++] = sqlite3_column_int64(s, 0);
    }
    return st == KEVO_ERR_NOTFOUND ? KEVO_OK : st;
}

enum kevo_status kevo_archive_cand_ids(struct kevo_archive *a, int64_t run,
                                       enum kevo_cand_state state, int64_t **ids, int *n)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && ids && n);
    *ids = NULL;
    *n = 0;
    if ((int)state < 0 || state > KEVO_CAND_ANY)
        return ar_fail(a, KEVO_ERR_INVALID, "listing candidates: bad state %d", (int)state);
    st = ar_prep(a, state == KEVO_CAND_ANY ? S_CAND_ALL : S_CAND_IDS, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, run);
    if (state != KEVO_CAND_ANY)
        ar_b_text(&b, 2, cand_state_names[state]);
    st = ar_bound(a, &b);
    if (st == KEVO_OK)
        st = collect_ids(a, b.s, ids, n);
    ar_done(b.s);
    if (st != KEVO_OK) {
        kevo_free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return st;
}

enum kevo_status kevo_archive_best(struct kevo_archive *a, int64_t run, int island, int n,
                                   int64_t *ids, int *n_out)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && n_out && (ids || n <= 0));
    *n_out = 0;
    if (n <= 0)
        return KEVO_OK;
    /* two statements, so each has its index: cand_ok for all, cand_ok_island for one */
    st = ar_prep(a, island < 0 ? S_BEST_ALL : S_BEST_ISLAND, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, run);
    if (island >= 0)
        ar_b_int(&b, 2, island);
    ar_b_int(&b, island < 0 ? 2 : 3, n);
    st = ar_bound(a, &b);
    while (st == KEVO_OK && *n_out < n) {
        st = ar_step_row(a, b.s, "ranking candidates");
        if (st == KEVO_OK)
            ids[(*n_out)++] = sqlite3_column_int64(b.s, 0);
    }
    if (st == KEVO_ERR_NOTFOUND)
        st = KEVO_OK;
    ar_done(b.s);
    if (st != KEVO_OK)
        *n_out = 0;
    return st;
}

/* The elite of the island's first occupied cell after `after`: OK, NOTFOUND or an error. */
static enum kevo_status elite_next(struct kevo_archive *a, sqlite3_stmt *s, int64_t run,
                                   int island, int after, int *cell, int64_t *id)
{
    struct ar_bind b = { s, SQLITE_OK };
    enum kevo_status st;

    ar_b_int(&b, 1, run);
    ar_b_int(&b, 2, island);
    ar_b_int(&b, 3, after);
    st = ar_bound(a, &b);
    if (st == KEVO_OK)
        st = ar_step_row(a, s, "reading the grid");
    if (st == KEVO_OK) {
        *cell = sqlite3_column_int(s, 0);
        *id = sqlite3_column_int64(s, 1);
    }
    ar_done(s);
    return st;
}

enum kevo_status kevo_archive_elites(struct kevo_archive *a, int64_t run, int island, int cap,
                                     int *cells, int64_t *ids, int *n_out)
{
    sqlite3_stmt *s = NULL;
    enum kevo_status st;
    int after = -1;

    KEVO_ASSERT(a && n_out && ((cells && ids) || cap <= 0));
    *n_out = 0;
    if (cap <= 0)
        return KEVO_OK;
    st = ar_stmt(a, S_ELITE_NEXT, &s);
    while (st == KEVO_OK && *n_out < cap) {
        st = elite_next(a, s, run, island, after, &cells[*n_out], &ids[*n_out]);
        if (st == KEVO_OK)
            after = cells[(*n_out)++];
    }
    if (st == KEVO_ERR_NOTFOUND)
        st = KEVO_OK;
    if (st != KEVO_OK)
        *n_out = 0;
    return st;
}

enum kevo_status kevo_archive_counts(struct kevo_archive *a, int64_t run, int64_t *n,
                                     int64_t *n_done, int64_t *n_ok)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && n && n_done && n_ok);
    *n = *n_done = *n_ok = 0;
    st = ar_prep(a, S_COUNTS, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, run);
    st = ar_query_row(a, &b, "counting candidates");
    if (st == KEVO_ERR_NOTFOUND)
        ar_fail(a, st, "counting candidates: no run %lld", (long long)run);
    if (st == KEVO_OK) {
        *n = sqlite3_column_int64(b.s, 0);
        *n_done = sqlite3_column_int64(b.s, 1);
        *n_ok = sqlite3_column_int64(b.s, 2);
    }
    ar_done(b.s);
    return st;
}

/* One row of S_OP_STATS as obj[op] = {proposed, done, ok, improved}. */
static int op_row(sqlite3_stmt *s, json_t *obj)
{
    json_t *o = json_object();
    int bad = !o;

    bad |= json_object_set_new(o, "proposed", json_integer(sqlite3_column_int64(s, 1)));
    bad |= json_object_set_new(o, "done", json_integer(sqlite3_column_int64(s, 2)));
    bad |= json_object_set_new(o, "ok", json_integer(sqlite3_column_int64(s, 3)));
    bad |= json_object_set_new(o, "improved", json_integer(sqlite3_column_int64(s, 4)));
    bad |= json_object_set_new(obj, (const char *)sqlite3_column_text(s, 0), o);
    return bad;
}

enum kevo_status kevo_archive_op_stats_json(struct kevo_archive *a, int64_t run,
                                            char **out_json)
{
    sqlite3_stmt *s = NULL;
    json_t *obj = json_object();
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && out_json);
    *out_json = NULL;
    st = obj ? ar_stmt(a, S_OP_STATS, &s) : ar_fail(a, KEVO_ERR_NOMEM, "op stats: out of memory");
    if (st == KEVO_OK) {
        b = (struct ar_bind){ s, SQLITE_OK };
        ar_b_int(&b, 1, run);
        st = ar_bound(a, &b);
    }
    while (st == KEVO_OK) {
        st = ar_step_row(a, s, "op stats");
        if (st == KEVO_OK && op_row(s, obj))
            st = ar_fail(a, KEVO_ERR_NOMEM, "op stats: out of memory");
    }
    if (st == KEVO_ERR_NOTFOUND) {
        *out_json = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
        st = *out_json ? KEVO_OK : ar_fail(a, KEVO_ERR_NOMEM, "op stats: out of memory");
    }
    ar_done(s);
    json_decref(obj);
    return st;
}

/* ---- evaluations ---- */

enum kevo_status kevo_archive_eval_add(struct kevo_archive *a, int64_t cand, const char *kind,
                                       const char *result_json)
{
    KEVO_ASSERT(a && kind && result_json);
    return eval_insert(a, cand, kind, result_json, ar_now_s());
}

enum kevo_status kevo_archive_eval_get(struct kevo_archive *a, int64_t cand, const char *kind,
                                       char **result_json)
{
    struct ar_bind b;
    enum kevo_status st;

    KEVO_ASSERT(a && kind && result_json);
    *result_json = NULL;
    st = ar_prep(a, S_EVAL_GET, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, cand);
    ar_b_text(&b, 2, kind);
    st = ar_bound(a, &b);
    if (st == KEVO_OK)
        st = ar_one_text(a, b.s, "reading an evaluation", result_json);
    ar_done(b.s);
    return st;
}

/* ---- the step log ---- */

enum kevo_status kevo_archive_steps(struct kevo_archive *a, int64_t run, struct kevo_step **steps,
                                    int *n)
{
    struct ar_bind b;
    int cap = 0;
    enum kevo_status st;

    KEVO_ASSERT(a && steps && n);
    *steps = NULL;
    *n = 0;
    st = ar_prep(a, S_STEPS, &b);
    if (st != KEVO_OK)
        return st;
    ar_b_int(&b, 1, run);
    st = ar_bound(a, &b);
    while (st == KEVO_OK && (st = ar_step_row(a, b.s, "reading the step log")) == KEVO_OK) {
        if (*n == cap) {
            struct kevo_step *p = ar_grow(*steps, &cap, sizeof *p);
            if (!p) {
                st = ar_fail(a, KEVO_ERR_NOMEM, "reading the step log: out of memory");
                break;
            }
            *steps = p;
        }
        struct kevo_step *x = &(*steps)[(*n)++];
        x->step = sqlite3_column_int64(b.s, 0);
        x->kind = sqlite3_column_int(b.s, 1) ? KEVO_STEP_LLM : KEVO_STEP_EVAL;
        x->id = sqlite3_column_int64(b.s, 2);
    }
    ar_done(b.s);
    if (st == KEVO_ERR_NOTFOUND)
        return KEVO_OK;
    kevo_free(*steps);
    *steps = NULL;
    *n = 0;
    return st;
}

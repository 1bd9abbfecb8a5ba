/*
 * archive_int - what the files of the archive share: archive.c (open, migrate, sources,
 * runs, candidates, evaluations, the step log), archive_llm.c (LLM calls and the replies
 * imported for them) and archive_sql.c (the schema and the SQL of every statement): the
 * handle, and the small helpers every statement goes through (errors, binding, stepping,
 * transactions), as static inline functions so each file has its own copy and nothing
 * leaves the module. Private to the archive; the contract is archive.h.
 */
#ifndef KEVO_ARCHIVE_INT_H
#define KEVO_ARCHIVE_INT_H

#include "ctl/archive.h"
#include "base/log.h"
#include "base/mem.h"

#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
    S_LLM_PENDING, S_LLM_IMPORTED, S_LLM_STATE, S_LLM_IMPORT, S_LLM_MODELS,
    S_RUN_REPORT,
    S_COUNT
};

#define CAND_COLS                                                                        \
    "id, run_id, coalesce(parent1, 0), coalesce(parent2, 0), source_hash, key, op,"      \
    " params_json, flags_json, descriptors_json, island, cell, generation, state,"       \
    " verdict, score, sol_fraction, speedup, metrics_json, created, finished, coalesce(step, 0),"     \
    " improved"

/* A call that waits for a reply (struct kevo_llm_wanted), columns 0-13 (archive_llm.c);
 * S_LLM_PENDING and S_LLM_IMPORTED add the imported reply's as 14-19. */
#define WANTED_COLS                                                                      \
    "l.id, l.run_id, l.model, l.spec, l.op, l.prompt, coalesce(l.system_len, -1),"      \
    " l.prompt_hash, l.plan_hash, coalesce(l.parent1, 0), coalesce(l.parent2, 0),"      \
    " coalesce(l.island, 0), coalesce(l.parent_score, 0), l.settings"

/* The SQL of each statement (prepared once per handle). */
extern const char *const kevo_archive_stmt_sql[S_COUNT];

/* ---- the handle ---- */

#define ERR_MAX   (PATH_MAX + 512)

struct kevo_archive {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *stmt[S_COUNT];
    int last_rc;                 /* sqlite code of the last failure, 0 for our own */
    char err[ERR_MAX];
};

/* ---- errors ---- */

/* sqlite result code -> kevo status (archive.h says which is which). */
static inline enum kevo_status ar_status_of(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_NOMEM:
        return KEVO_ERR_NOMEM;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return KEVO_ERR_TIMEOUT;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_MISUSE:
        return KEVO_ERR_INVALID;
    case SQLITE_TOOBIG:
        return KEVO_ERR_TOOBIG;
    default:              /* FULL, IOERR, CORRUPT, NOTADB, CANTOPEN, READONLY, PERM, ... */
        return KEVO_ERR_IO;
    }
}

/* "path: <formatted>" into the error buffer; returns st. */
static inline enum kevo_status ar_fail(struct kevo_archive *a, enum kevo_status st,
                                    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline enum kevo_status ar_fail(struct kevo_archive *a, enum kevo_status st,
                                    const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(a->err, sizeof a->err, "%s: ", a->path);

    if (n < 0 || (size_t)n >= sizeof a->err)
        n = 0;
    a->last_rc = 0;
    va_start(ap, fmt);
    vsnprintf(a->err + n, sizeof a->err - (size_t)n, fmt, ap);
    va_end(ap);
    return st;
}

/* "path: what: sqlite's message", mapped; call right after the failing sqlite call. */
static inline enum kevo_status ar_fail_db(struct kevo_archive *a, int rc, const char *what)
{
    int prim = rc & 0xff;
    const char *hint = "";

    if (prim == SQLITE_CORRUPT || prim == SQLITE_NOTADB)
        hint = " (not a kevo archive, or a damaged one)";
    else if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
        hint = " (another process holds the archive's write lock)";
    ar_fail(a, ar_status_of(rc), "%s: %s%s", what,
         a->db ? sqlite3_errmsg(a->db) : sqlite3_errstr(rc), hint);
    a->last_rc = rc;
    return ar_status_of(rc);
}

/* ---- small helpers ---- */

static inline double ar_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Copy into a fixed field; 0, or -1 when it does not fit (dst is then ""). */
static inline int ar_copy_field(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;

    dst[0] = '\0';
    if (n >= cap)
        return -1;
    memcpy(dst, src ? src : "", n + 1);
    return 0;
}

/* The cached statement id, prepared on first use. */
static inline enum kevo_status ar_stmt(struct kevo_archive *a, enum stmt_id id, sqlite3_stmt **out)
{
    int rc;

    *out = NULL;
    if (!a->stmt[id]) {
        rc = sqlite3_prepare_v3(a->db, kevo_archive_stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                &a->stmt[id], NULL);
        if (rc != SQLITE_OK)
            return ar_fail_db(a, rc, "preparing a statement");
    }
    *out = a->stmt[id];
    return KEVO_OK;
}

/* Make s reusable and end its read transaction; NULL is a no-op. */
static inline void ar_done(sqlite3_stmt *s)
{
    if (s) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
}

/* Bindings accumulate the first error, so a statement's binds read as one block. */
struct ar_bind {
    sqlite3_stmt *s;
    int rc;
};

static inline void ar_b_int(struct ar_bind *b, int i, int64_t v)
{
    if (b->rc == SQLITE_OK)
        b->rc = sqlite3_bind_int64(b->s, i, v);
}

/* 0 binds NULL: ids use 0 for "none", the schema NULL (so foreign keys hold). */
static inline void ar_b_id(struct ar_bind *b, int i, int64_t v)
{
    if (b->rc == SQLITE_OK)
        b->rc = v ? sqlite3_bind_int64(b->s, i, v) : sqlite3_bind_null(b->s, i);
}

/* Non-finite numbers are stored as NULL ("not measured"); SQLite has no NaN. */
static inline void ar_b_real(struct ar_bind *b, int i, double v)
{
    if (b->rc == SQLITE_OK)
        b->rc = isfinite(v) ? sqlite3_bind_double(b->s, i, v) : sqlite3_bind_null(b->s, i);
}

/* NULL binds NULL. The text is read during the step, so no copy is made. */
static inline void ar_b_text(struct ar_bind *b, int i, const char *v)
{
    if (b->rc == SQLITE_OK)
        b->rc = sqlite3_bind_text(b->s, i, v, -1, SQLITE_STATIC);
}

static inline enum kevo_status ar_bound(struct kevo_archive *a, const struct ar_bind *b)
{
    return b->rc == SQLITE_OK ? KEVO_OK : ar_fail_db(a, b->rc, "binding a parameter");
}

/* The cached statement id with a fresh binder. */
static inline enum kevo_status ar_prep(struct kevo_archive *a, enum stmt_id id, struct ar_bind *b)
{
    b->rc = SQLITE_OK;
    return ar_stmt(a, id, &b->s);
}

/* Step a statement that returns no rows; on error the message names what. */
static inline enum kevo_status ar_exec_done(struct kevo_archive *a, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);
    enum kevo_status st = KEVO_OK;

    if (rc != SQLITE_DONE)
        st = ar_fail_db(a, rc, what);
    ar_done(s);
    return st;
}

/* Check the binds of b, then run its no-row statement; resets it either way. */
static inline enum kevo_status ar_write_stmt(struct kevo_archive *a, const struct ar_bind *b,
                                   const char *what)
{
    enum kevo_status st = ar_bound(a, b);

    if (st != KEVO_OK) {
        ar_done(b->s);
        return st;
    }
    return ar_exec_done(a, b->s, what);
}

/* Step expecting a row: KEVO_OK with the row, NOTFOUND at the end, else an error. */
static inline enum kevo_status ar_step_row(struct kevo_archive *a, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);

    if (rc == SQLITE_ROW)
        return KEVO_OK;
    if (rc == SQLITE_DONE)
        return KEVO_ERR_NOTFOUND;
    return ar_fail_db(a, rc, what);
}

/* Check b's binds and step its statement for a row (as step_row). */
static inline enum kevo_status ar_query_row(struct kevo_archive *a, const struct ar_bind *b,
                                  const char *what)
{
    enum kevo_status st = ar_bound(a, b);

    return st == KEVO_OK ? ar_step_row(a, b->s, what) : st;
}

/* A cached statement run once with no parameters and no rows (BEGIN, COMMIT, ...). */
static inline enum kevo_status ar_exec_id(struct kevo_archive *a, enum stmt_id id, const char *what)
{
    sqlite3_stmt *s;
    enum kevo_status st = ar_stmt(a, id, &s);

    return st ? st : ar_exec_done(a, s, what);
}

/* Text column i as a new string (NULL for SQL NULL); NOMEM. */
static inline enum kevo_status ar_col_dup(sqlite3_stmt *s, int i, char **out)
{
    const unsigned char *t = sqlite3_column_text(s, i);

    *out = NULL;
    if (!t)
        return sqlite3_column_type(s, i) == SQLITE_NULL ? KEVO_OK : KEVO_ERR_NOMEM;
    *out = kevo_strndup((const char *)t, (size_t)sqlite3_column_bytes(s, i));
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

/* Real column i, NAN for NULL. */
static inline double ar_col_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN : sqlite3_column_double(s, i);
}

/* ---- transactions ---- */

static inline enum kevo_status ar_tx_begin(struct kevo_archive *a)
{
    return ar_exec_id(a, S_BEGIN, "starting a transaction");
}

/* End the transaction: commit when st is OK, else roll back keeping st's message. */
static inline enum kevo_status ar_tx_end(struct kevo_archive *a, enum kevo_status st)
{
    if (st == KEVO_OK)
        st = ar_exec_id(a, S_COMMIT, "committing");
    /* SQLite may already have rolled back (e.g. after SQLITE_FULL); only roll back
     * a transaction that is still open, so the original message survives. */
    if (st != KEVO_OK && !sqlite3_get_autocommit(a->db)) {
        char keep[ERR_MAX];
        memcpy(keep, a->err, sizeof keep);
        if (ar_exec_id(a, S_ROLLBACK, "rolling back") != KEVO_OK)
            KEVO_WARN("%s", a->err);
        memcpy(a->err, keep, sizeof keep);
    }
    return st;
}

/* ---- growing arrays, single texts ---- */

/* arr (n == *cap elements of size) with room for more: the new array, or NULL (out of
 * memory; arr is unchanged). */
static inline void *ar_grow(void *arr, int *cap, size_t size)
{
    int c = *cap ? 2 * *cap : 16;
    void *p = *cap < INT_MAX / 2 ? kevo_reallocarray(arr, (size_t)c, size) : NULL;
    if (p)
        *cap = c;
    return p;
}

/* The text column 0 of the single row s yields into *out; NOTFOUND with msg when none. */
static inline enum kevo_status ar_one_text(struct kevo_archive *a, sqlite3_stmt *s, const char *what,
                                 char **out)
{
    enum kevo_status st = ar_step_row(a, s, what);

    if (st == KEVO_ERR_NOTFOUND)
        ar_fail(a, st, "%s: none", what);
    if (st == KEVO_OK && ar_col_dup(s, 0, out) != KEVO_OK)
        st = ar_fail(a, KEVO_ERR_NOMEM, "%s: out of memory", what);
    if (st == KEVO_OK && !*out)
        st = ar_fail(a, KEVO_ERR_NOTFOUND, "%s: none", what);
    return st;
}

#endif

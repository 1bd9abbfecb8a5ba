/*
 * profile - hardware counters from Nsight Compute's CLI (profile.h): the CSV parser, the
 * one-line diagnosis, the prompt text, and the collector that runs ncu on a
 * verification-only `kevo eval` of one candidate.
 *
 * The parser reads the long form ncu writes with --csv and --metrics: one row per launch
 * and metric ("ID", ..., "Kernel Name", ..., "Block Size", "Grid Size", ..., "Metric Name",
 * "Metric Unit", "Metric Value"), columns found by their header names. Rows are grouped
 * into launches by (Process ID, ID), launches into kernel entries by (name, grid, block);
 * each figure is derived per launch, then the median over the entry's launches is kept.
 */
#include "ctl/profile.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/counters.h"
#include "core/task.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The metrics kevo asks ncu for (core/counters.h; it replays each counted launch as often
 * as they need); the stall reasons by regex, so ncu reports whichever the device has. */
#define M_TIME     KEVO_CTR_TIME
#define M_DRAM_PCT KEVO_CTR_DRAM_PCT
#define M_DRAM_RD  KEVO_CTR_DRAM_RD
#define M_DRAM_WR  KEVO_CTR_DRAM_WR
#define M_L2_HIT   KEVO_CTR_L2_HIT
#define M_L1_HIT   KEVO_CTR_L1_HIT
#define M_SM_PCT   KEVO_CTR_SM_PCT
#define M_HMMA     KEVO_CTR_HMMA
#define M_GMMA     KEVO_CTR_GMMA
#define M_WARPS    KEVO_CTR_WARPS
#define M_LOCAL_LD KEVO_CTR_LOCAL_LD
#define M_LOCAL_ST KEVO_CTR_LOCAL_ST
#define M_SM_HZ    KEVO_CTR_SM_HZ
#define STALL_PFX  KEVO_CTR_STALL_PFX
#define STALL_SFX  KEVO_CTR_STALL_SFX
#define METRICS                                                                               \
    M_TIME "," M_DRAM_PCT "," M_DRAM_RD "," M_DRAM_WR "," M_L2_HIT "," M_L1_HIT "," M_SM_PCT \
    "," M_HMMA "," M_GMMA "," M_WARPS "," M_LOCAL_LD "," M_LOCAL_ST "," M_SM_HZ              \
    ",regex:" STALL_PFX ".*" "_per_issue_active\\.ratio"

#define CSV_MAX_FIELDS 64
#define LOG_MAX ((size_t)64 << 20)         /* of ncu's CSV */
#define OUT_MAX ((size_t)16 << 20)         /* of the profiled eval's and ncu's own output */
#define TAIL_LINES 8                       /* of that output, in a failure's message */
#define DEFAULT_EVAL_DEADLINE_S 300.0

/* ---- CSV ---- */

/*
 * Split one line (no newline) in place into at most max fields: quoted fields lose their
 * quotes and "" becomes ". Returns the number of fields, -1 for a quote that does not
 * close or text after a closing quote, -2 for too many fields.
 */
static int csv_split(char *line, char **f, int max)
{
    int n = 0;
    char *r = line;

    for (;;) {
        char *w;
        if (n == max)
            return -2;
        if (*r == '"') {
            f[n++] = w = ++r;
            for (;;) {
                if (!*r)
                    return -1;
                if (*r == '"' && r[1] == '"') {
                    *w++ = '"';
                    r += 2;
                } else if (*r == '"') {
                    r++;
                    break;
                } else {
                    *w++ = *r++;
                }
            }
            if (*r && *r != ',')
                return -1;
        } else {
            f[n++] = r;
            r += strcspn(r, ",");
            w = r;
        }
        int more = *r == ',';
        *w = '\0';
        if (!more)
            return n;
        r++;
    }
}

/* The columns of the header kevo reads; -1 where absent. */
enum col { C_ID, C_PID, C_NAME, C_BLOCK, C_GRID, C_METRIC, C_UNIT, C_VALUE, N_COLS };
static const char *const col_names[N_COLS] = {
    "ID", "Process ID", "Kernel Name", "Block Size", "Grid Size", "Metric Name", "Metric Unit",
    "Metric Value",
};


struct parse {
    int lineno;                /* 1-based, of the line being read */
    int n_fields;              /* the header's */
    int col[N_COLS];
    json_t *launches;          /* [{"name", "grid", "block", "m": {metric: value or null}}] */
    json_t *by_key;            /* "PID:ID" -> index into launches */
    char *msg;                 /* the first failure */
};

/* Record the failure at the current line (the first one wins); KEVO_ERR_INVALID. */
static enum kevo_status __attribute__((format(printf, 2, 3)))
bad(struct parse *p, const char *fmt, ...)
{
    va_list ap;
    char *what;

    if (p->msg)
        return KEVO_ERR_INVALID;
    va_start(ap, fmt);
    what = kevo_vstrdupf(fmt, ap);
    va_end(ap);
    p->msg = kevo_strdupf("ncu CSV line %d: %s", p->lineno, what ? what : "malformed");
    kevo_free(what);
    return KEVO_ERR_INVALID;
}

static enum kevo_status header(struct parse *p, char **f, int n)
{
    for (int c = 0; c < N_COLS; c++) {
        p->col[c] = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(f[i], col_names[c]))
                p->col[c] = i;
        if (p->col[c] < 0 && c != C_PID)
            return bad(p, "the header has no \"%s\" column", col_names[c]);
    }
    p->n_fields = n;
    return KEVO_OK;
}

/* "(256, 1, 1)" as a new array of 3 integers; NULL when it is not that. */
static json_t *dims(const char *s)
{
    long long v[3];
    const char *q = s;
    char *e;

    while (*q == ' ')
        q++;
    if (*q++ != '(')
        return NULL;
    for (int i = 0; i < 3; i++) {
        errno = 0;
        v[i] = strtoll(q, &e, 10);
        if (e == q || errno || v[i] < 0)
            return NULL;
        q = e;
        while (*q == ' ')
            q++;
        if (*q++ != (i < 2 ? ',' : ')'))
            return NULL;
    }
    while (*q == ' ')
        q++;
    if (*q)
        return NULL;
    return json_pack("[I, I, I]", (json_int_t)v[0], (json_int_t)v[1], (json_int_t)v[2]);
}

/* A value text ("536,879,360", "91.29") as a finite number: 0, or -1 when it is not one. */
static int number(const char *s, double *out)
{
    char t[64], *e;
    size_t k = 0;

    for (; *s && k + 1 < sizeof t; s++)
        if (*s != ',')
            t[k++] = *s;
    if (*s)
        return -1;
    t[k] = '\0';
    errno = 0;
    *out = strtod(t, &e);
    while (*e == ' ')
        e++;
    if (e == t || *e || errno == ERANGE || !isfinite(*out))
        return -1;
    return 0;
}

struct unit {
    const char *name;
    double factor;
};
static const struct unit time_units[] = {   /* to ns */
    { "ns", 1 }, { "nsecond", 1 }, { "us", 1e3 }, { "usecond", 1e3 }, { "ms", 1e6 },
    { "msecond", 1e6 }, { "s", 1e9 }, { "second", 1e9 }, { NULL, 0 },
};
static const struct unit freq_units[] = {    /* to Hz */
    { "hz", 1 }, { "Hz", 1 }, { "cycle/second", 1 }, { "cycle/s", 1 }, { "Khz", 1e3 },
    { "KHz", 1e3 }, { "Mhz", 1e6 }, { "MHz", 1e6 }, { "Ghz", 1e9 }, { "GHz", 1e9 },
    { "cycle/usecond", 1e6 }, { "cycle/us", 1e6 }, { "cycle/nsecond", 1e9 }, { "cycle/ns", 1e9 },
    { NULL, 0 },
};
static const struct unit byte_units[] = {    /* to bytes */
    { "byte", 1 }, { "Kbyte", 1e3 }, { "Mbyte", 1e6 }, { "Gbyte", 1e9 }, { "Tbyte", 1e12 },
    { "B", 1 }, { "KB", 1e3 }, { "MB", 1e6 }, { "GB", 1e9 }, { "KiB", 1024.0 },
    { "MiB", 1048576.0 }, { "GiB", 1073741824.0 }, { NULL, 0 },
};

/* The factor that takes metric's values in unit to ns (the duration), bytes (byte counts)
 * or Hz (the SM clock); 1 for every other metric. -1 for a unit it does not know, except
 * the clock's, which is only left out (NaN): a figure for reading, no reason to fail. */
static int unit_scale(const char *metric, const char *unit, double *scale)
{
    size_t ml = strlen(metric);
    const struct unit *u = NULL;

    *scale = 1;
    if (!strcmp(metric, M_SM_HZ)) {
        for (u = freq_units; u->name; u++)
            if (!strcmp(unit, u->name)) {
                *scale = u->factor;
                return 0;
            }
        *scale = NAN;
        return 0;
    }
    if (!strcmp(metric, M_TIME))
        u = time_units;
    else if (strstr(metric, "bytes") && ml > 4 && !strcmp(metric + ml - 4, ".sum"))
        u = byte_units;
    if (!u)
        return 0;
    for (; u->name; u++)
        if (!strcmp(unit, u->name)) {
            *scale = u->factor;
            return 0;
        }
    return -1;
}

/* The launch of this row (made at its first row), checked against its kernel name.
 * NULL with p->msg set when the row is bad, without it when out of memory. */
static json_t *launch_of(struct parse *p, char **f)
{
    const char *pid = p->col[C_PID] >= 0 ? f[p->col[C_PID]] : "";
    const char *name = f[p->col[C_NAME]];
    char *key = kevo_strdupf("%s:%s", pid, f[p->col[C_ID]]);
    json_t *ix = key ? json_object_get(p->by_key, key) : NULL, *l = NULL, *g, *b;

    if (!key)
        return NULL;
    if (ix) {
        l = json_array_get(p->launches, (size_t)json_integer_value(ix));
        if (strcmp(json_string_value(json_object_get(l, "name")), name) != 0) {
            (void)bad(p, "launch %.40s has rows of two kernels", f[p->col[C_ID]]);
            l = NULL;
        }
        kevo_free(key);
        return l;
    }
    g = dims(f[p->col[C_GRID]]);
    b = dims(f[p->col[C_BLOCK]]);
    if (!*name)
        (void)bad(p, "no kernel name");
    else if (!g || !b)
        (void)bad(p, "%s size \"%.40s\" is not (x, y, z)", g ? "block" : "grid",
                  g ? f[p->col[C_BLOCK]] : f[p->col[C_GRID]]);
    else
        l = json_pack("{s:s, s:O, s:O, s:{}}", "name", name, "grid", g, "block", b, "m");
    if (l) {
        json_object_set_new(p->by_key, key,
                            json_integer((json_int_t)json_array_size(p->launches)));
        json_array_append_new(p->launches, l);
    }
    json_decref(g);
    json_decref(b);
    kevo_free(key);
    return l;
}

/* One data row: its metric's value into its launch (null for "n/a"). */
static enum kevo_status row(struct parse *p, char **f)
{
    const char *metric = f[p->col[C_METRIC]], *val = f[p->col[C_VALUE]];
    double v, scale;
    json_t *l;

    if (!*metric)
        return bad(p, "no metric name");
    l = launch_of(p, f);
    if (!l)
        return p->msg ? KEVO_ERR_INVALID : KEVO_ERR_NOMEM;
    if (!strcmp(val, "n/a") || !*val) {
        json_object_set_new(json_object_get(l, "m"), metric, json_null());
        return KEVO_OK;
    }
    if (number(val, &v))
        return bad(p, "%s: value \"%.40s\" is not a number", metric, val);
    if (unit_scale(metric, f[p->col[C_UNIT]], &scale))
        return bad(p, "%s: unknown unit \"%.20s\"", metric, f[p->col[C_UNIT]]);
    json_object_set_new(json_object_get(l, "m"), metric,
                        isfinite(v * scale) ? json_real(v * scale) : json_null());
    return KEVO_OK;
}

/* One line after the header: skipped (empty, or ncu's own: ==PROF==, ==WARNING==) or a
 * data row. */
static enum kevo_status data_line(struct parse *p, char *line, size_t len)
{
    char *f[CSV_MAX_FIELDS];
    int n;

    if (!len || !strncmp(line, "==", 2))
        return KEVO_OK;
    n = csv_split(line, f, CSV_MAX_FIELDS);
    if (n == -1)
        return bad(p, "a quoted field does not close");
    if (n < 0)
        return bad(p, "more than %d fields", CSV_MAX_FIELDS);
    if (n != p->n_fields)
        return bad(p, "%d fields where the header has %d", n, p->n_fields);
    return row(p, f);
}

/* Every line of text (cut up in place) into p->launches. */
static enum kevo_status read_lines(struct parse *p, char *text)
{
    char *f[CSV_MAX_FIELDS];
    enum kevo_status st = KEVO_OK;

    p->lineno = 1;
    for (char *line = text; line && !st; p->lineno++) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);

        if (len && line[len - 1] == '\r')
            len--;
        line[len] = '\0';
        if (p->n_fields) {
            st = data_line(p, line, len);
        } else if (!strncmp(line, "\"ID\"", 4)) {   /* the header */
            int n = csv_split(line, f, CSV_MAX_FIELDS);
            st = n < 0 ? bad(p, "the header does not split into fields") : header(p, f, n);
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!st && !p->n_fields) {
        p->msg = kevo_strdup("ncu CSV: no \"ID\" header line (not ncu --csv output?)");
        st = KEVO_ERR_INVALID;
    }
    return st;
}

/* ---- launches into kernel entries ---- */

/* The figures of an entry, each derived per launch; NaN where a launch lacks it. */
enum fig { F_TIME, F_GBPS, F_DRAM, F_L2, F_L1, F_SM, F_TENSOR, F_OCC, F_SPILL, F_MHZ, N_FIGS };
static const char *const fig_names[N_FIGS] = {
    "time_us", "dram_gbps", "dram_pct_of_peak", "l2_hit_pct", "l1_hit_pct", "sm_pct",
    "tensor_pct", "achieved_occupancy_pct", "spill_bytes", "sm_clock_mhz",
};

static double mval(const json_t *m, const char *k)
{
    json_t *v = json_object_get(m, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* a + b of those that are there; NaN when neither is. */
static double sum_present(double a, double b)
{
    if (isnan(a))
        return b;
    return isnan(b) ? a : a + b;
}

static void launch_figs(const json_t *m, double *v)
{
    double t = mval(m, M_TIME), rd = mval(m, M_DRAM_RD), wr = mval(m, M_DRAM_WR);

    v[F_TIME] = t / 1e3;
    v[F_GBPS] = t > 0 && !isnan(rd + wr) ? (rd + wr) / t : NAN;   /* bytes per ns = GB/s */
    v[F_DRAM] = mval(m, M_DRAM_PCT);
    v[F_L2] = mval(m, M_L2_HIT);
    v[F_L1] = mval(m, M_L1_HIT);
    v[F_SM] = mval(m, M_SM_PCT);
    v[F_TENSOR] = fmax(mval(m, M_HMMA), mval(m, M_GMMA));         /* NaN only when both are */
    v[F_OCC] = mval(m, M_WARPS);
    v[F_SPILL] = sum_present(mval(m, M_LOCAL_LD), mval(m, M_LOCAL_ST));
    v[F_MHZ] = mval(m, M_SM_HZ) / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the non-NaN values of v[0..n) (v is reordered); NaN when there is none. */
static double median(double *v, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            v[k++] = v[i];
    if (!k)
        return NAN;
    qsort(v, k, sizeof *v, cmp_double);
    return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

/* The stall reason of a metric name ("long_scoreboard"), as a new string; NULL if none. */
static char *stall_reason(const char *metric)
{
    size_t pl = strlen(STALL_PFX), sl = strlen(STALL_SFX), ml = strlen(metric);

    if (ml <= pl + sl || strncmp(metric, STALL_PFX, pl) || strcmp(metric + ml - sl, STALL_SFX))
        return NULL;
    return kevo_strndup(metric + pl, ml - pl - sl);
}

struct stall {
    const char *reason;
    double v;
};

static int by_stall(const void *a, const void *b)
{
    const struct stall *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? 1 : -1;
    return strcmp(x->reason, y->reason);
}

/* The largest KEVO_PROFILE_MAX_STALLS median stall reasons of launches (> 0 only), as a
 * new array; work holds json_array_size(launches) doubles. */
static json_t *stalls_of(const json_t *launches, double *work)
{
    json_t *reasons = json_object(), *out = json_array(), *l, *v;
    struct stall *s = NULL;
    size_t n = json_array_size(launches), ns = 0, i;
    const char *k;

    json_array_foreach(launches, i, l) {
        json_object_foreach(json_object_get(l, "m"), k, v) {
            char *r = stall_reason(k);
            if (r)
                json_object_set_new(reasons, r, json_null());
            kevo_free(r);
        }
    }
    s = kevo_calloc(json_object_size(reasons) + 1, sizeof *s);
    json_object_foreach(reasons, k, v) {
        if (!s)
            break;
        char *metric = kevo_strdupf(STALL_PFX "%s" STALL_SFX, k);
        for (i = 0; i < n; i++)
            work[i] = metric ? mval(json_object_get(json_array_get(launches, i), "m"), metric)
                             : NAN;
        double m = median(work, n);
        if (m > 0)
            s[ns++] = (struct stall){ k, m };
        kevo_free(metric);
    }
    if (ns)
        qsort(s, ns, sizeof *s, by_stall);
    for (i = 0; i < ns && i < KEVO_PROFILE_MAX_STALLS; i++)
        json_array_append_new(out, json_pack("{s:s, s:f}", "reason", s[i].reason, "per_issue",
                                             s[i].v));
    kevo_free(s);
    json_decref(reasons);
    return out;
}

static int is_kevo_counter(const char *metric)
{
    for (int k = 0; k < kevo_counters_count; k++) {
        if (!strcmp(kevo_counters[k], metric))
            return 1;
    }
    return 0;
}

/* The median of each counter of launches that is none of kevo's (KEVO_PROFILE_EXTRA's), as
 * a new object, NULL when there are none; work holds json_array_size(launches) doubles. */
static json_t *extra_counters(const json_t *launches, double *work)
{
    json_t *out = NULL, *l, *v;
    size_t n = json_array_size(launches), i;
    const char *k;

    json_object_foreach(json_object_get(json_array_get(launches, 0), "m"), k, v) {
        if (is_kevo_counter(k))
            continue;
        for (i = 0; i < n; i++) {
            l = json_array_get(launches, i);
            work[i] = mval(json_object_get(l, "m"), k);
        }
        double m = median(work, n);
        if (isnan(m))
            continue;
        if (!out)
            out = json_object();
        json_object_set_new(out, k, json_real(m));
    }
    return out;
}

/* One kernel entry of the launches of one (name, grid, block). */
static json_t *entry_of(const json_t *launches)
{
    size_t n = json_array_size(launches), i;
    double *v = kevo_calloc(n * N_FIGS + n, sizeof *v), *work;
    const json_t *first = json_array_get(launches, 0);
    json_t *e;

    if (!v)
        return NULL;
    work = v + n * N_FIGS;
    for (i = 0; i < n; i++)
        launch_figs(json_object_get(json_array_get(launches, i), "m"), v + i * N_FIGS);
    e = json_pack("{s:O, s:O, s:O, s:I}", "name", json_object_get(first, "name"), "grid",
                  json_object_get(first, "grid"), "block", json_object_get(first, "block"),
                  "launches", (json_int_t)n);
    for (int f = 0; e && f < N_FIGS; f++) {
        for (i = 0; i < n; i++)
            work[i] = v[i * N_FIGS + f];
        double m = median(work, n);
        if (isnan(m))
            continue;
        json_object_set_new(e, fig_names[f], f == F_SPILL ? json_integer((json_int_t)llround(m))
                                                          : json_real(m));
    }
    if (e)
        json_object_set_new(e, "stalls", stalls_of(launches, work));
    json_t *extra = e ? extra_counters(launches, work) : NULL;
    if (extra)
        json_object_set_new(e, "counters", extra);
    kevo_free(v);
    return e;
}

/* launches grouped by (name, grid, block) in order of first launch, as kernel entries. */
static json_t *kernels_of(const json_t *launches)
{
    json_t *groups = json_array(), *ix = json_object(), *out = json_array(), *l, *g;
    size_t i;

    json_array_foreach(launches, i, l) {
        char *gs = json_dumps(json_object_get(l, "grid"), JSON_COMPACT);
        char *bs = json_dumps(json_object_get(l, "block"), JSON_COMPACT);
        char *key = kevo_strdupf("%s|%s|%s", json_string_value(json_object_get(l, "name")),
                                 gs ? gs : "", bs ? bs : "");
        json_t *at = key ? json_object_get(ix, key) : NULL;
        if (key && !at) {
            at = json_integer((json_int_t)json_array_size(groups));
            json_object_set_new(ix, key, at);
            json_array_append_new(groups, json_array());
        }
        json_array_append(json_array_get(groups, (size_t)json_integer_value(at)), l);
        kevo_free(gs);
        kevo_free(bs);
        kevo_free(key);
    }
    json_array_foreach(groups, i, g) {
        json_t *e = entry_of(g);
        if (!e) {
            json_decref(out);
            out = NULL;
            break;
        }
        json_array_append_new(out, e);
    }
    json_decref(groups);
    json_decref(ix);
    return out;
}

enum kevo_status kevo_profile_from_worker(const json_t *raw, json_t **out, char **out_msg)
{
    const json_t *launches = json_object_get(raw, "launches"), *l;
    const char *k;
    json_t *v, *ks;
    size_t i;

    *out = NULL;
    *out_msg = NULL;
    if (!json_is_array(launches) || !json_array_size(launches)) {
        *out_msg = kevo_strdup("profile: the worker's profile has no launches");
        return KEVO_ERR_INVALID;
    }
    json_array_foreach(launches, i, l) {
        if (!json_is_string(json_object_get(l, "name")) || !json_is_object(json_object_get(l, "m"))) {
            *out_msg = kevo_strdupf("profile: the worker's launch %zu has no name or metrics", i);
            return KEVO_ERR_INVALID;
        }
    }
    ks = kernels_of(launches);
    *out = ks ? json_pack("{s:s, s:o}", "tool", "cupti", "kernels", ks) : NULL;
    json_object_foreach((json_t *)raw, k, v) {   /* workload, passes, cost_s */
        if (*out && strcmp(k, "launches") && strcmp(k, "tool"))
            json_object_set(*out, k, v);
    }
    if (!*out) {
        *out_msg = kevo_strdup("profile: out of memory");
        return KEVO_ERR_NOMEM;
    }
    char diag[512];
    kevo_profile_diagnose(*out, diag, sizeof diag);
    json_object_set_new(*out, "diagnosis", json_string(diag));
    return KEVO_OK;
}

enum kevo_status kevo_profile_parse_ncu(const char *csv_text, json_t **out, char **out_msg)
{
    struct parse p = { 0 };
    char *text = kevo_strdup(csv_text ? csv_text : "");
    json_t *ks = NULL;
    enum kevo_status st = KEVO_ERR_NOMEM;

    *out = NULL;
    *out_msg = NULL;
    p.launches = json_array();
    p.by_key = json_object();
    if (text && p.launches && p.by_key)
        st = read_lines(&p, text);
    if (!st) {
        ks = kernels_of(p.launches);
        *out = ks ? json_pack("{s:s, s:o}", "tool", "ncu", "kernels", ks) : NULL;
        st = *out ? KEVO_OK : KEVO_ERR_NOMEM;
    }
    if (st) {
        *out_msg = p.msg ? p.msg : kevo_strdup("ncu CSV: out of memory");
        p.msg = NULL;
    }
    kevo_free(p.msg);
    json_decref(p.launches);
    json_decref(p.by_key);
    kevo_free(text);
    return st;
}

/* ---- diagnosis and text ---- */

static double fig(const json_t *k, const char *name)
{
    json_t *v = json_object_get(k, name);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The entry with the most profiled time (time x launches; the first when none has a
 * time) and its share of the total into *share (NaN when unknown). */
static const json_t *dominant(const json_t *ks, double *share)
{
    double best = -1, total = 0;
    const json_t *top = json_array_get(ks, 0), *k;
    size_t i;

    json_array_foreach(ks, i, k) {
        double t = fig(k, "time_us") * (double)json_integer_value(json_object_get(k, "launches"));
        if (isnan(t))
            continue;
        total += t;
        if (t > best) {
            best = t;
            top = k;
        }
    }
    *share = total > 0 ? best / total : NAN;
    return top;
}

/* "91%", or "?" when unknown, into out. */
static const char *pct(char *out, size_t n, double v)
{
    if (isnan(v))
        snprintf(out, n, "?");
    else
        snprintf(out, n, "%.0f%%", v);
    return out;
}

/* The two largest stalls but "selected" (the warp issued) and "not_selected" (it could
 * have: another eligible warp did), which say that issue is busy, not what waits. */
static void top_stalls(struct kevo_buf *b, const json_t *k)
{
    json_t *s;
    size_t i;
    int n = 0;

    json_array_foreach(json_object_get(k, "stalls"), i, s) {
        const char *r = json_string_value(json_object_get(s, "reason"));
        if (!r || !strcmp(r, "selected") || !strcmp(r, "not_selected") || n == 2)
            continue;
        kevo_buf_say(b, "%s%s %.1f", n ? ", " : "; top stalls: ", r, fig(s, "per_issue"));
        n++;
    }
}

/* The bound and the figures that show it, of one kernel entry. */
static void diagnose_kernel(struct kevo_buf *b, const json_t *k)
{
    double dram = fig(k, "dram_pct_of_peak"), sm = fig(k, "sm_pct");
    double occ = fig(k, "achieved_occupancy_pct"), tensor = fig(k, "tensor_pct");
    double spill = fig(k, "spill_bytes");
    char p1[16], p2[16];

    if (dram >= KEVO_PROFILE_BOUND_PCT && !(sm > dram)) {
        kevo_buf_say(b, "memory-bound: DRAM at %.0f%% of peak", dram);
        if (!isnan(fig(k, "dram_gbps")))
            kevo_buf_say(b, " (%.1f TB/s)", fig(k, "dram_gbps") / 1e3);
        if (!isnan(fig(k, "l2_hit_pct")))
            kevo_buf_say(b, ", L2 hit %.0f%%", fig(k, "l2_hit_pct"));
    } else if (sm >= KEVO_PROFILE_BOUND_PCT) {
        kevo_buf_say(b, "compute-bound: SM at %.0f%%", sm);
        if (tensor < KEVO_PROFILE_TENSOR_IDLE_PCT)
            kevo_buf_say(b, ", tensor pipes idle (%.1f%%)", tensor);
        else if (!isnan(tensor))
            kevo_buf_say(b, ", tensor pipes at %.0f%%", tensor);
    } else {
        kevo_buf_say(b, "latency-bound: neither DRAM (%s) nor SM (%s) busy",
                     pct(p1, sizeof p1, dram), pct(p2, sizeof p2, sm));
    }
    if (!(dram >= KEVO_PROFILE_BOUND_PCT && !(sm > dram)) && !isnan(occ))
        kevo_buf_say(b, "; occupancy %.0f%%", occ);
    top_stalls(b, k);
    if (spill > 0)
        kevo_buf_say(b, "; spills: %.0f B of local memory traffic", spill);
}

/* The diagnosis of profile p into b. */
static void diagnose(struct kevo_buf *b, const json_t *p)
{
    const char *err = json_string_value(json_object_get(p, "error"));
    const json_t *ks = json_object_get(p, "kernels"), *k;
    double share;

    if (err) {
        kevo_buf_say(b, "profiling failed: %s", err);
        return;
    }
    if (!json_array_size(ks)) {
        kevo_buf_say(b, "no kernel launch was profiled");
        return;
    }
    k = dominant(ks, &share);
    if (json_array_size(ks) > 1 && !isnan(share))
        kevo_buf_say(b, "kernel %s (%.0f%% of the profiled time): ",
                     json_string_value(json_object_get(k, "name")), 100 * share);
    diagnose_kernel(b, k);
}

void kevo_profile_diagnose(const json_t *profile, char *buf, size_t n)
{
    struct kevo_buf b;

    if (!n)
        return;
    kevo_buf_init(&b, n - 1);
    diagnose(&b, profile);
    snprintf(buf, n, "%s", kevo_buf_str(&b));
    kevo_buf_free(&b);
}

/* ", NAME 12%" (or with the unit given) when the entry has the figure. */
static void fig_text(struct kevo_buf *b, const json_t *k, const char *key, const char *label,
                     const char *fmt)
{
    double v = fig(k, key);
    if (!isnan(v)) {
        kevo_buf_say(b, ", %s ", label);
        kevo_buf_say(b, fmt, v);
    }
}

static void kernel_text(struct kevo_buf *b, const json_t *k)
{
    json_t *g = json_object_get(k, "grid"), *bl = json_object_get(k, "block"), *s;
    size_t i;

    kevo_buf_say(b, "- kernel %s, grid (%lld, %lld, %lld), block (%lld, %lld, %lld), "
                 "%lld launch(es): ", json_string_value(json_object_get(k, "name")),
                 (long long)json_integer_value(json_array_get(g, 0)),
                 (long long)json_integer_value(json_array_get(g, 1)),
                 (long long)json_integer_value(json_array_get(g, 2)),
                 (long long)json_integer_value(json_array_get(bl, 0)),
                 (long long)json_integer_value(json_array_get(bl, 1)),
                 (long long)json_integer_value(json_array_get(bl, 2)),
                 (long long)json_integer_value(json_object_get(k, "launches")));
    kevo_buf_say(b, "%.4g us", fig(k, "time_us"));
    fig_text(b, k, "dram_gbps", "DRAM", "%.0f GB/s");
    fig_text(b, k, "dram_pct_of_peak", "DRAM throughput", "%.0f%% of peak");
    fig_text(b, k, "l2_hit_pct", "L2 hit", "%.0f%%");
    fig_text(b, k, "l1_hit_pct", "L1 hit", "%.0f%%");
    fig_text(b, k, "sm_pct", "SM throughput", "%.0f%% of peak");
    fig_text(b, k, "tensor_pct", "tensor pipes", "%.1f%% active");
    fig_text(b, k, "achieved_occupancy_pct", "achieved occupancy", "%.0f%%");
    fig_text(b, k, "spill_bytes", "local memory (spill) traffic", "%.0f B");
    json_array_foreach(json_object_get(k, "stalls"), i, s)
        kevo_buf_say(b, "%s%s %.2f", i ? ", " : "; warp stalls per issued instruction: ",
                     json_string_value(json_object_get(s, "reason")), fig(s, "per_issue"));
    kevo_buf_say(b, "\n");
}

void kevo_profile_text(const json_t *profile, struct kevo_buf *b)
{
    const json_t *ks = json_object_get(profile, "kernels");
    const json_t *w = json_object_get(profile, "workload");
    const char *note = json_string_value(json_object_get(profile, "note"));
    char *sizes = json_dumps(json_object_get(w, "sizes"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    const json_t *k;
    size_t i;

    if (json_object_get(profile, "error") || !json_array_size(ks)) {
        kevo_free(sizes);
        return;
    }
    const char *tool = json_string_value(json_object_get(profile, "tool"));
    kevo_buf_say(b, "Hardware counters (%s", tool ? tool : "?");
    if (sizes)
        kevo_buf_say(b, ", workload %s", sizes);
    kevo_buf_say(b, "; medians over the launches):\n");
    kevo_buf_say(b, "Diagnosis: ");
    diagnose(b, profile);
    kevo_buf_say(b, "\n");
    json_array_foreach(ks, i, k)
        kernel_text(b, k);
    if (note)
        kevo_buf_say(b, "Note: %s\n", note);
    kevo_free(sizes);
}

/* ---- finding ncu ---- */

static int is_exe(const char *p)
{
    struct stat s;
    return p && *p && stat(p, &s) == 0 && S_ISREG(s.st_mode) && access(p, X_OK) == 0;
}

static enum kevo_status found(const char *path, char **out_path)
{
    *out_path = kevo_strdup(path);
    return *out_path ? KEVO_OK : KEVO_ERR_NOMEM;
}

enum kevo_status kevo_profile_find_ncu(char **out_path, char **out_msg)
{
    const char *env = getenv("KEVO_NCU"), *path = getenv("PATH");
    const char *homes[] = {
        getenv("CUDA_HOME"),
#ifdef KEVO_CUDA_HOME
        KEVO_CUDA_HOME,
#endif
        "/usr/local/cuda",
    };
    char cand[PATH_MAX];

    *out_path = NULL;
    *out_msg = NULL;
    if (env && *env) {
        if (is_exe(env))
            return found(env, out_path);
        *out_msg = kevo_strdupf("profile: KEVO_NCU=%s is not an executable file", env);
        return KEVO_ERR_NOTFOUND;
    }
    for (const char *p = path; p && *p;) {
        size_t l = strcspn(p, ":");
        int w = snprintf(cand, sizeof cand, "%.*s/ncu", (int)l, p);
        if (l && w > 0 && (size_t)w < sizeof cand && is_exe(cand))
            return found(cand, out_path);
        p += l + (p[l] == ':');
    }
    for (size_t i = 0; i < sizeof homes / sizeof homes[0]; i++) {
        int w = homes[i] && *homes[i] ? snprintf(cand, sizeof cand, "%s/bin/ncu", homes[i]) : -1;
        if (w > 0 && (size_t)w < sizeof cand && is_exe(cand))
            return found(cand, out_path);
    }
    *out_msg = kevo_strdup("profile: ncu not found (install Nsight Compute or set KEVO_NCU)");
    return KEVO_ERR_NOTFOUND;
}

/* ---- what to profile ---- */

static int identifier(const char *s)
{
    if (!*s || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return 0;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

static int task_has_kernel(const struct kevo_task *t, const char *name)
{
    for (int i = 0; t && i < t->n_launches; i++)
        if (!strcmp(t->launches[i].kernel, name))
            return 1;
    return 0;
}

/* "regex:^(k1|k2)$" of the candidate's kernels into re; *shared 1 when the reference has
 * one of those names. */
static enum kevo_status kernel_filter(const struct kevo_profile_req *r, struct kevo_buf *re,
                                      int *shared, char **out_msg)
{
    const struct kevo_task *c = r->cand;
    int n = 0;

    *shared = 0;
    if (!c->n_launches) {
        *out_msg = kevo_strdupf("profile: %s has no launch lines", r->cand_path);
        return KEVO_ERR_INVALID;
    }
    kevo_buf_say(re, "regex:^(");
    for (int i = 0; i < c->n_launches; i++) {
        const char *k = c->launches[i].kernel;
        int dup = 0;
        for (int j = 0; j < i; j++)
            dup |= !strcmp(c->launches[j].kernel, k);
        if (dup)
            continue;
        if (!identifier(k)) {
            *out_msg = kevo_strdupf("profile: kernel name '%s' is not an identifier", k);
            return KEVO_ERR_INVALID;
        }
        kevo_buf_say(re, "%s%s", n++ ? "|" : "", k);
        *shared |= task_has_kernel(r->task, k);
    }
    kevo_buf_say(re, ")$");
    return re->len < re->max ? KEVO_OK : KEVO_ERR_TOOBIG;
}

static int in_workload(const struct kevo_workload *w, const char *name)
{
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->names[i], name))
            return 1;
    return 0;
}

/* {"index", "sizes"} of the first visible workload: the one whose launches are counted. */
static enum kevo_status first_workload(const struct kevo_profile_req *r, json_t **out,
                                       char **out_msg)
{
    const struct kevo_task *t = r->task;
    struct kevo_env env;
    char *m = NULL;
    int w = 0;
    enum kevo_status st;

    while (w < t->n_workloads && t->workloads[w].holdout)
        w++;
    if (w == t->n_workloads) {
        *out_msg = kevo_strdupf("profile: %s has no visible workload", r->task_path);
        return KEVO_ERR_INVALID;
    }
    st = kevo_task_env(t, w, r->cand, NULL, &env, &m);
    if (st) {
        *out_msg = kevo_strdupf("profile: %s", m ? m : kevo_status_name(st));
        kevo_free(m);
        return st;
    }
    json_t *sizes = json_object();
    for (int i = 0; i < env.n; i++)
        if (in_workload(&t->workloads[w], env.names[i]))
            json_object_set_new(sizes, env.names[i], json_integer((json_int_t)env.values[i]));
    *out = json_pack("{s:i, s:o}", "index", w, "sizes", sizes);
    return *out ? KEVO_OK : KEVO_ERR_NOMEM;
}

/* The kevo binary the profiled eval runs: req->exe, $KEVO_WORKER_EXE, else this one
 * (resolved: ncu would read /proc/self/exe as itself). NULL when unknown. */
static char *kevo_exe(const struct kevo_profile_req *r)
{
    const char *e = r->exe ? r->exe : getenv("KEVO_WORKER_EXE");
    char buf[PATH_MAX];
    ssize_t n;

    if (e && *e)
        return kevo_strdup(e);
    n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return kevo_strdup(buf);
}

/* ---- running ncu ---- */

/* In the child: only async-signal-safe calls up to exec. Never returns. */
static void __attribute__((noreturn)) exec_ncu(char *const *argv, char *const *envp, int out_fd,
                                               pid_t parent)
{
    struct sigaction sa;
    sigset_t none;
    int null_fd;

    (void)setpgid(0, 0);   /* its own group: the deadline kills ncu, eval and worker alike */
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    null_fd = open("/dev/null", O_RDONLY);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
        _exit(126);
    (void)close_range(3, ~0u, 0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    (void)sigaction(SIGPIPE, &sa, NULL);
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    execvpe(argv[0], argv, envp);
    dprintf(2, "kevo: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Wait for pid until deadline: 0 reaped (*ws set), 1 the deadline passed. */
static int wait_until(pid_t pid, double deadline, int *ws)
{
    struct timespec tick = { 0, 20 * 1000 * 1000 };

    for (;;) {
        pid_t r = waitpid(pid, ws, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return 0;
        if (kevo_now() >= deadline)
            return 1;
        nanosleep(&tick, NULL);
    }
}

/* This process's environment with KEVO_CUPTI=0 (kevo_free the array, not its strings):
 * ncu holds CUPTI in the profiled process, whose worker must not ask for it too. Built
 * before the fork, since the child may only make async-signal-safe calls. */
static char **ncu_env(void)
{
    static char off[] = "KEVO_CUPTI=0";
    size_t n = 0, k = 0;
    char **envp;

    while (environ[n])
        n++;
    envp = kevo_calloc(n + 2, sizeof *envp);
    for (size_t i = 0; envp && i < n; i++) {
        if (strncmp(environ[i], "KEVO_CUPTI=", 11) != 0)
            envp[k++] = environ[i];
    }
    if (envp)
        envp[k] = off;
    return envp;
}

/* Run argv with its output in out_path, killed (the whole group) at the deadline. */
static enum kevo_status run_ncu(char *const *argv, const char *out_path, double limit_s,
                                int *ws, char **out_msg)
{
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), late;
    pid_t parent = getpid(), pid;
    char **envp = ncu_env();

    *ws = 0;
    if (fd < 0 || !envp) {
        *out_msg = fd < 0 ? kevo_strdupf("profile: %s: %s", out_path, strerror(errno))
                          : kevo_strdup("profile: out of memory");
        if (fd >= 0)
            close(fd);
        kevo_free(envp);
        return fd < 0 ? KEVO_ERR_IO : KEVO_ERR_NOMEM;
    }
    pid = fork();
    if (pid == 0)
        exec_ncu(argv, envp, fd, parent);
    close(fd);
    kevo_free(envp);
    if (pid < 0) {
        *out_msg = kevo_strdupf("profile: fork: %s", strerror(errno));
        return KEVO_ERR_SYSTEM;
    }
    (void)setpgid(pid, pid);   /* also done by the child; whichever runs first */
    late = wait_until(pid, kevo_now() + limit_s, ws);
    if (late) {
        (void)kill(-pid, SIGKILL);
        (void)kill(pid, SIGKILL);
        while (waitpid(pid, ws, 0) < 0 && errno == EINTR)
            ;
    }
    (void)kill(-pid, SIGKILL);   /* nothing it started may outlive it */
    if (late) {
        *out_msg = kevo_strdupf("profile: ncu did not finish within %.0f s (killed)", limit_s);
        return KEVO_ERR_TIMEOUT;
    }
    return KEVO_OK;
}

/* The last TAIL_LINES lines of ncu's messages in its log (==ERROR== ...) and of the
 * output, for a failure's message. */
static void output_tail(struct kevo_buf *b, const char *log, const char *out)
{
    const char *p, *end;
    int n = 0;

    for (p = log ? log : ""; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
        if (!strncmp(p, "==", 2) && n++ < TAIL_LINES)
            kevo_buf_say(b, "\n  %.*s", (int)strcspn(p, "\n"), p);
    out = out ? out : "";
    p = out + strlen(out);
    while (p > out && p[-1] == '\n')
        p--;
    end = p;
    for (n = 0; p > out && n < TAIL_LINES; n++) {
        p--;
        while (p > out && p[-1] != '\n')
            p--;
    }
    while (p < end) {
        int len = (int)strcspn(p, "\n");
        kevo_buf_say(b, "\n  %.*s", len < (int)(end - p) ? len : (int)(end - p), p);
        p += len + 1;
    }
}

/* The status words of a wait status. */
static void exit_text(char *out, size_t n, int ws)
{
    if (WIFEXITED(ws))
        snprintf(out, n, "exit status %d", WEXITSTATUS(ws));
    else if (WIFSIGNALED(ws))
        snprintf(out, n, "killed by signal %d", WTERMSIG(ws));
    else
        snprintf(out, n, "status %d", ws);
}

/* ---- collecting ---- */

/* A temporary directory for ncu's log and the profiled process's output. */
struct scratch {
    char dir[PATH_MAX - 32];
    char log[PATH_MAX];            /* dir/ncu.csv: --log-file */
    char out[PATH_MAX];            /* dir/out.txt: stdout and stderr */
};

static enum kevo_status scratch_make(struct scratch *s, char **out_msg)
{
    const char *tmp = getenv("TMPDIR");
    int w = snprintf(s->dir, sizeof s->dir, "%s/kevo-ncu-XXXXXX", tmp && *tmp ? tmp : "/tmp");

    if (w < 0 || (size_t)w >= sizeof s->dir || !mkdtemp(s->dir)) {
        *out_msg = kevo_strdupf("profile: cannot make a temporary directory %s: %s", s->dir,
                                w < 0 || (size_t)w >= sizeof s->dir ? "name too long"
                                                                    : strerror(errno));
        s->dir[0] = '\0';
        return KEVO_ERR_IO;
    }
    snprintf(s->log, sizeof s->log, "%s/ncu.csv", s->dir);
    snprintf(s->out, sizeof s->out, "%s/out.txt", s->dir);
    return KEVO_OK;
}

static void scratch_remove(const struct scratch *s)
{
    if (!s->dir[0])
        return;
    (void)unlink(s->log);
    (void)unlink(s->out);
    (void)rmdir(s->dir);
}

/* A file ncu or the eval wrote, "" when there is none (kevo_free it). */
static char *slurp(const char *path, size_t cap)
{
    char *t = NULL;
    size_t n;

    if (kevo_fs_read_file(path, cap, &t, &n, NULL) != KEVO_OK)
        return kevo_strdup("");
    return t;
}

/* Run ncu on the eval of r->cand (re: the kernel filter, count: the launches to count)
 * and parse what it wrote into *out; a profile without kernels is a failure. */
static enum kevo_status run_and_parse(const struct kevo_profile_req *r, const char *ncu,
                                      const char *exe, const char *re, int count,
                                      const struct scratch *s, json_t **out, char **out_msg)
{
    double eval_dl = r->eval_deadline_s > 0 ? r->eval_deadline_s : DEFAULT_EVAL_DEADLINE_S;
    double limit = r->deadline_s > 0 ? r->deadline_s : 2 * eval_dl + 120;
    char n_launch[24], dev[24], dl[32], how[48];
    /* clocks free, as kevo times and as the worker's CUPTI counts; KEVO_NCU_CLOCK=base
     * gives ncu's own default (locked to base) for a comparison */
    const char *ck = getenv("KEVO_NCU_CLOCK");
    const char *argv[] = {
        ncu, "--target-processes", "all", "--cache-control", "all", "--clock-control",
        ck && !strcmp(ck, "base") ? "base" : "none",
        "--metrics", METRICS, "-k", re, "--launch-count", n_launch, "--csv", "--log-file",
        s->log, exe, "eval", "--no-timing", "--trials", "3", "--deadline", dl, "--backend",
        "cuda", "--device", dev, r->task_path, r->cand_path, NULL,
    };
    char *log = NULL, *txt = NULL, *m = NULL;
    struct kevo_buf b;
    int ws = 0;
    enum kevo_status st;

    snprintf(n_launch, sizeof n_launch, "%d", count);
    snprintf(dev, sizeof dev, "%d", r->device);
    snprintf(dl, sizeof dl, "%g", eval_dl);
    KEVO_INFO("profile: %s with %s (%d launches of %s)", r->cand_path, ncu, count, re);
    st = run_ncu((char *const *)argv, s->out, limit, &ws, out_msg);
    if (st)
        return st;
    log = slurp(s->log, LOG_MAX);
    st = log ? kevo_profile_parse_ncu(log, out, &m) : KEVO_ERR_NOMEM;
    if (st == KEVO_ERR_INVALID && !strstr(log, "\"ID\""))
        st = KEVO_OK;   /* ncu failed before it wrote any row: said below */
    if (!st && json_array_size(json_object_get(*out, "kernels")) == 0) {
        json_decref(*out);
        *out = NULL;
        txt = slurp(s->out, OUT_MAX);
        exit_text(how, sizeof how, ws);
        kevo_buf_init(&b, 8 << 10);
        kevo_buf_say(&b, "profile: ncu (%s) counted no launch of %s; its output ends:", how,
                     re);
        output_tail(&b, log, txt);
        *out_msg = kevo_buf_take(&b);
        st = KEVO_ERR_WORKER;
    } else if (st) {
        *out_msg = kevo_strdupf("profile: %s", m ? m : kevo_status_name(st));
    }
    kevo_free(m);
    kevo_free(log);
    kevo_free(txt);
    return st;
}

/* Profiled at all: only CUDA has counters. */
static int on_cuda(const struct kevo_profile_req *r)
{
    if (r->backend)
        return !strcmp(r->backend, "cuda");
    return r->task->lang == KEVO_LANG_CUDA;
}

enum kevo_status kevo_profile_collect(const struct kevo_profile_req *r, json_t **out,
                                      char **out_msg)
{
    struct kevo_buf re;
    struct scratch s;
    char *ncu = NULL, *exe = NULL, diag[512];
    json_t *wl = NULL, *prof = NULL;
    int shared = 0, count = 2 * r->cand->n_launches;   /* runs A and B of the first trial */
    double t0 = kevo_now();
    enum kevo_status st;

    *out = NULL;
    *out_msg = NULL;
    s.dir[0] = '\0';
    if (!on_cuda(r))
        return KEVO_OK;
    kevo_buf_init(&re, 64 << 10);
    st = kernel_filter(r, &re, &shared, out_msg);
    if (!st)
        st = first_workload(r, &wl, out_msg);
    if (!st)
        st = r->ncu ? found(r->ncu, &ncu) : kevo_profile_find_ncu(&ncu, out_msg);
    if (!st && !(exe = kevo_exe(r))) {
        *out_msg = kevo_strdup("profile: cannot tell where the kevo executable is");
        st = KEVO_ERR_NOTFOUND;
    }
    if (!st)
        st = scratch_make(&s, out_msg);
    if (!st)
        st = run_and_parse(r, ncu, exe, kevo_buf_str(&re), count, &s, &prof, out_msg);
    if (!st) {
        json_object_set_new(prof, "workload", wl);
        wl = NULL;
        json_object_set_new(prof, "launch_count", json_integer(count));
        json_object_set_new(prof, "cost_s", json_real(kevo_now() - t0));
        kevo_profile_diagnose(prof, diag, sizeof diag);
        json_object_set_new(prof, "diagnosis", json_string(diag));
        if (shared)
            json_object_set_new(prof, "note", json_string(
                "the reference has a kernel of the same name: its launches may be among "
                "those counted"));
        *out = prof;
    }
    scratch_remove(&s);
    json_decref(wl);
    kevo_free(ncu);
    kevo_free(exe);
    kevo_buf_free(&re);
    return st;
}

/* Profile the candidate of one eval entry into its "profile". */
static void profile_entry(const struct kevo_profile_req *base, const char *path, json_t *entry)
{
    struct kevo_profile_req r = *base;
    struct kevo_task *cand = NULL;
    char *msg = NULL;
    json_t *prof = NULL;
    double t0 = kevo_now();
    enum kevo_status st = kevo_candidate_load(base->task, path, &cand, &msg);

    if (!st) {
        r.cand_path = path;
        r.cand = cand;
        st = kevo_profile_collect(&r, &prof, &msg);
    }
    if (st) {
        KEVO_WARN("%s: %s", path, msg ? msg : kevo_status_name(st));
        prof = json_pack("{s:s, s:s, s:f}", "tool", "ncu", "error",
                         msg ? msg : kevo_status_name(st), "cost_s", kevo_now() - t0);
    }
    if (prof)
        json_object_set_new(entry, "profile", prof);
    kevo_free(msg);
    kevo_task_free(cand);
}

/* An ok entry without the worker's counters: ncu's to collect. */
static int needs_ncu(const json_t *c)
{
    const char *v = json_string_value(json_object_get(c, "verdict"));
    const json_t *p = json_object_get(c, "profile");

    return v && !strcmp(v, "ok") && json_string_value(json_object_get(c, "path")) &&
           (!p || json_object_get(p, "error"));
}

int kevo_profile_missing(const json_t *cands)
{
    const json_t *c;
    size_t i;

    json_array_foreach(cands, i, c) {
        if (needs_ncu(c))
            return 1;
    }
    return 0;
}

double kevo_profile_cands(const struct kevo_profile_req *base, json_t *cands)
{
    double t0 = kevo_now(), worker_s = 0;
    json_t *c;
    size_t i;

    json_array_foreach(cands, i, c) {
        json_t *p = json_object_get(c, "profile");
        worker_s += json_number_value(json_object_get(p, "cost_s"));
        if (!needs_ncu(c))
            continue;
        char *why = p ? kevo_strdup(json_string_value(json_object_get(p, "error"))) : NULL;
        profile_entry(base, json_string_value(json_object_get(c, "path")), c);
        p = json_object_get(c, "profile");
        if (why && p)   /* why the worker could not count it */
            json_object_set_new(p, "cupti_error", json_string(why));
        kevo_free(why);
    }
    return worker_s + kevo_now() - t0;
}

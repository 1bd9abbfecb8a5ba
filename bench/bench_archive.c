/*
 * bench_archive - the archive (src/archive.c) at the size of a long search: a synthetic run
 * of N candidates (default 100k: random scores, 4 islands, 64 cells, ~30% ok), built
 * through the public API (add + finish + place, each its own transaction), then the
 * queries the search makes every step, timed over 200 repetitions each (median, p99, max;
 * a write's max includes the automatic WAL checkpoint, ~every 1000 pages, with its fsyncs).
 * Target: < 50 ms per query at 100k (docs/archive.md). Needs no GPU; `make bench` runs it.
 * Also reports the insertion rate, the file size, and the insertion rate with
 * KEVO_ARCHIVE_SYNC=full (an fsync per commit) on a smaller archive.
 * Usage: bench_archive [N] [DIR]   (DIR: where the files go; default a new /tmp dir)
 */
#include "ctl/archive.h"
#include "base/clock.h"
#include "base/mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPS     200
#define ISLANDS  4
#define CELLS    64
#define OK_SHARE 0.3
#define SOURCES  1000            /* candidates share sources (param variants of one kernel) */

struct bench {
    struct kevo_archive *a;
    int64_t run;
    char src[SOURCES][KEVO_HASH_HEX];
    int n;                       /* candidates so far; key i is "i" in hex */
    unsigned long long rng;
};

static double now_ms(void) { return kevo_now() * 1e3; }

static int cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

/* xorshift64*: reproducible without touching rand()'s state */
static double urand(struct bench *b)
{
    b->rng ^= b->rng >> 12;
    b->rng ^= b->rng << 25;
    b->rng ^= b->rng >> 27;
    return (double)((b->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void die(struct bench *b, const char *what)
{
    fprintf(stderr, "bench_archive: %s: %s\n", what, kevo_archive_errmsg(b->a));
    exit(1);
}

/* Key i: 64 hex digits that look random (as SHA-256 keys do), the same on every call. */
static void key_of(int i, char key[KEVO_HASH_HEX])
{
    unsigned long long x = (unsigned long long)i;

    for (int part = 0; part < 4; part++) {
        unsigned long long z = (x += 0x9e3779b97f4a7c15ull);    /* splitmix64 */
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        snprintf(key + 16 * part, 17, "%016llx", z ^ (z >> 31));
    }
}

/* ~1.5 KB of kernel-like text, different for each i. */
static void put_sources(struct bench *b)
{
    char text[1600];

    for (int i = 0; i < SOURCES; i++) {
        int n = snprintf(text, sizeof text, "// variant %d\n__global__ void k%d(float *x) {\n",
                         i, i);
        while (n < (int)sizeof text - 64)
            n += snprintf(text + n, sizeof text - (size_t)n, "  x[%d] += %d.0f;\n", n, i);
        if (kevo_archive_source_put(b->a, text, (size_t)n, b->src[i]) != KEVO_OK)
            die(b, "source_put");
    }
}

/* One candidate as the search makes it: proposal, verdict, placement. */
static int64_t add_one(struct bench *b)
{
    struct kevo_cand_rec r;
    char metrics[256], result[1024];
    int64_t id = 0;
    int i = b->n++, ok = urand(b) < OK_SHARE, island = (int)(urand(b) * ISLANDS);
    double score = 1e-4 * exp(3 * urand(b));

    memset(&r, 0, sizeof r);
    r.run_id = b->run;
    key_of(i, r.key);
    memcpy(r.source_hash, b->src[i % SOURCES], KEVO_HASH_HEX);
    snprintf(r.op, sizeof r.op, "%s", i % 3 ? "param" : "llm");
    r.parent1 = i > 100 ? 1 + (int64_t)(urand(b) * (i - 1)) : 0;
    r.params_json = "{\"BLOCK\":256,\"UNROLL\":4}";
    r.flags_json = "[\"-use_fast_math\"]";
    r.island = island;
    r.cell = -1;
    r.generation = i / 1000;
    snprintf(metrics, sizeof metrics, "{\"workloads\":[{\"median_s\":%.9f,\"regs\":%d}]}",
             score, 32 + i % 64);
    snprintf(result, sizeof result, "{\"verdict\":\"%s\",\"metrics\":%s,\"log\":\"%0400d\"}",
             ok ? "ok" : "mismatch", metrics, i);
    if (kevo_archive_cand_add(b->a, &r, &id) != KEVO_OK)
        die(b, "cand_add");
    if (kevo_archive_cand_finish(b->a, id, ok ? KEVO_VERDICT_OK : KEVO_VERDICT_MISMATCH, score,
                                 0.4, 1.7, metrics, result) != KEVO_OK)
        die(b, "cand_finish");
    if (kevo_archive_cand_place(b->a, id, island, ok ? (int)(urand(b) * CELLS) : -1,
                                "[0.3,0.7]") != KEVO_OK)
        die(b, "cand_place");
    return id;
}

static void open_run(struct bench *b, const char *path)
{
    char *msg = NULL;

    if (kevo_archive_open(path, &b->a, &msg) != KEVO_OK) {
        fprintf(stderr, "bench_archive: %s\n", msg);
        exit(1);
    }
    if (kevo_archive_run_create(b->a, "bench", "bench/synthetic.cu", "task", 4, "{}",
                                &b->run) != KEVO_OK)
        die(b, "run_create");
    put_sources(b);
}

/* Candidates per second over n more. */
static double build(struct bench *b, int n)
{
    double t0 = now_ms();

    for (int i = 0; i < n; i++)
        add_one(b);
    return n / ((now_ms() - t0) / 1e3);
}

enum query { Q_BEST_ALL, Q_BEST_ISLAND, Q_ELITES, Q_COUNTS, Q_BY_KEY, Q_GET, Q_ADD_FINISH,
             Q_OP_STATS, Q_RUNS, Q_COUNT };
static const char *const query_names[Q_COUNT] = {
    "best n=16, all islands", "best n=16, one island", "elites, one island (cap 64)",
    "counts", "cand_by_key", "cand_get", "cand_add + cand_finish (+ place)",
    "op_stats_json", "runs_json",
};

static void run_query(struct bench *b, enum query q, int rep)
{
    int64_t ids[CELLS], n, nd, nok, id;
    int cells[CELLS], got;
    char key[KEVO_HASH_HEX], *js = NULL;
    struct kevo_cand_rec c;
    enum kevo_status st = KEVO_OK;

    switch (q) {
    case Q_BEST_ALL: st = kevo_archive_best(b->a, b->run, -1, 16, ids, &got); break;
    case Q_BEST_ISLAND: st = kevo_archive_best(b->a, b->run, rep % ISLANDS, 16, ids, &got); break;
    case Q_ELITES:
        st = kevo_archive_elites(b->a, b->run, rep % ISLANDS, CELLS, cells, ids, &got);
        break;
    case Q_COUNTS: st = kevo_archive_counts(b->a, b->run, &n, &nd, &nok); break;
    case Q_BY_KEY:
        key_of((int)(urand(b) * b->n), key);
        st = kevo_archive_cand_by_key(b->a, b->run, key, &id);
        break;
    case Q_GET:
        st = kevo_archive_cand_get(b->a, 1 + (int64_t)(urand(b) * b->n), &c);
        kevo_archive_cand_clear(&c);
        break;
    case Q_ADD_FINISH: add_one(b); break;
    case Q_OP_STATS: st = kevo_archive_op_stats_json(b->a, b->run, &js); break;
    case Q_RUNS: st = kevo_archive_runs_json(b->a, &js); break;
    case Q_COUNT: break;
    }
    kevo_free(js);
    if (st != KEVO_OK)
        die(b, query_names[q]);
}

static void time_queries(struct bench *b)
{
    double t[REPS];

    printf("%-36s %10s %10s %10s\n", "query (200 repetitions)", "median ms", "p99 ms",
           "max ms");
    for (int q = 0; q < Q_COUNT; q++) {
        for (int r = 0; r < REPS; r++) {
            double t0 = now_ms();
            run_query(b, (enum query)q, r);
            t[r] = now_ms() - t0;
        }
        qsort(t, REPS, sizeof t[0], cmp);
        printf("%-36s %10.4f %10.4f %10.4f\n", query_names[q],
               0.5 * (t[REPS / 2 - 1] + t[REPS / 2]), t[REPS * 99 / 100 - 1], t[REPS - 1]);
    }
}

static double file_mb(const char *path)
{
    char wal[620];
    struct stat sb;
    double n = 0;

    if (stat(path, &sb) == 0)
        n += (double)sb.st_size;
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (stat(wal, &sb) == 0)
        n += (double)sb.st_size;
    return n / (1 << 20);
}

/* Remove an archive's files (the database, its WAL and shared-memory index). */
static void remove_archive(const char *path)
{
    char p[620];

    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", path);
    unlink(p);
}

int main(int argc, char **argv)
{
    static struct bench b, full;
    char dir[512], path[600];
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    double rate, rate_full;

    if (argc > 2)
        snprintf(dir, sizeof dir, "%s", argv[2]);
    else if (snprintf(dir, sizeof dir, "/tmp/kevo-bench-archive-XXXXXX") && !mkdtemp(dir))
        return perror("mkdtemp"), 1;
    snprintf(path, sizeof path, "%s/bench.db", dir);
    remove_archive(path);
    b.rng = 88172645463325252ull;
    open_run(&b, path);
    rate = build(&b, n);
    printf("archive: %d candidates in one run (%d islands, %d cells, ~%.0f%% ok), %s\n", n,
           ISLANDS, CELLS, 100 * OK_SHARE, path);
    printf("insert (add + finish + place, 3 commits, synchronous=NORMAL): %.0f candidates/s\n",
           rate);
    printf("file: %.1f MiB (with the WAL)\n\n", file_mb(path));
    time_queries(&b);
    kevo_archive_close(b.a);
    remove_archive(path);

    /* power-loss durability costs an fsync per commit: measured on a small archive */
    snprintf(path, sizeof path, "%s/bench-full.db", dir);
    remove_archive(path);
    setenv("KEVO_ARCHIVE_SYNC", "full", 1);
    full.rng = 1;
    open_run(&full, path);
    rate_full = build(&full, 500);
    kevo_archive_close(full.a);
    remove_archive(path);
    if (argc <= 2)
        rmdir(dir);
    printf("\ninsert with KEVO_ARCHIVE_SYNC=full (500 candidates): %.0f candidates/s\n",
           rate_full);
    return 0;
}

/*
 * mcp_runs - the background searches of `kevo mcp` (docs/agents.md): run_start starts
 * `kevo run` as a child process of kevo's own binary (posix_spawn of /proc/self/exe with
 * an argument vector, never a shell; its output, the run's --json events, to a private log
 * file; stdin from /dev/null, so it never reads the protocol), run_status reads the run
 * from the archive and the process's state, run_stop sends it SIGTERM (a run stops at its
 * next result, recorded `stopped` and resumable) and waits for it. A search seeded with
 * the agent's best goes on from the agent's work. At the end of the session every run
 * still going is stopped the same way (kevo_mcp_runs_stop_all).
 */
#include "ctl/mcp_int.h"

#include "base/clock.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "ctl/archive.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_WAIT_S 120.0        /* for a run's "start" event: calibration and reference */
#define STOP_WAIT_S 60.0          /* for a stopped run to record itself and exit */
#define LOG_MAX ((size_t)64 << 20)
#define MAX_SEEDS 16
#define DEFAULT_BUDGET 40

extern char **environ;

static void nap(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Has bg ended? Reaps it (once). */
static int ended(struct mcp_bg *bg)
{
    int status = 0;

    if (!bg->exited && waitpid(bg->pid, &status, WNOHANG) == bg->pid) {
        bg->exited = 1;
        bg->status = status;
    }
    return bg->exited;
}

void kevo_mcp_runs_reap(struct kevo_mcp *m)
{
    for (int i = 0; i < m->n_bg; i++)
        (void)ended(&m->bg[i]);
}

/* The last event of kind in bg's log (new reference), or NULL. */
static json_t *last_event(const struct mcp_bg *bg, const char *kind)
{
    char *text = NULL;
    size_t n = 0;
    json_t *found = NULL;

    if (kevo_fs_read_file(bg->log, LOG_MAX, &text, &n, NULL) != KEVO_OK)
        return NULL;
    for (char *p = text; p && *p;) {
        char *e = strchr(p, '\n');
        if (e)
            *e = '\0';
        if (*p == '{') {
            json_t *ev = json_loads(p, 0, NULL);
            const char *k = json_string_value(json_object_get(ev, "event"));
            if (k && !strcmp(k, kind)) {
                json_decref(found);
                found = ev;
            } else {
                json_decref(ev);
            }
        }
        p = e ? e + 1 : NULL;
    }
    kevo_free(text);
    return found;
}

/* The last lines of bg's log that are not events (what kevo said on stderr). */
static char *log_tail(const struct mcp_bg *bg, size_t max)
{
    char *text = NULL;
    size_t n = 0;
    struct kevo_buf b;

    kevo_buf_init(&b, max + 1);
    if (kevo_fs_read_file(bg->log, LOG_MAX, &text, &n, NULL) != KEVO_OK)
        return kevo_buf_take(&b);
    for (char *p = text; p && *p;) {
        char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (*p != '{' && len) {
            if (b.len + len + 1 > max)
                kevo_buf_reset(&b);   /* keep the latest lines */
            kevo_buf_say(&b, "%.*s\n", (int)len, p);
        }
        p = e ? e + 1 : NULL;
    }
    kevo_free(text);
    return kevo_buf_take(&b);
}

/* ---- run_start ---- */

struct argv {
    char *a[64 + 2 * MAX_SEEDS];
    int n;
    char store[24][64];           /* the numbers, printed */
    int n_store;
};

static void arg(struct argv *v, const char *s)
{
    if (v->n < (int)(sizeof v->a / sizeof v->a[0]) - 1)
        v->a[v->n++] = (char *)s;
    v->a[v->n] = NULL;
}

static void arg_num(struct argv *v, const char *opt, const char *fmt, double x)
{
    if (v->n_store == 24)
        return;
    snprintf(v->store[v->n_store], sizeof v->store[0], fmt, x);
    arg(v, opt);
    arg(v, v->store[v->n_store++]);
}

/* Seed files of the archive's candidates in ids (written privately) into paths. */
static int seed_files(struct kevo_mcp *m, struct mcp_call *c, const int64_t *ids, int n,
                      const char *ext, char paths[][PATH_MAX])
{
    struct kevo_trail *t = NULL;

    if (kevo_mcp_trail(m, c, &t))
        return -1;
    for (int i = 0; i < n; i++) {
        struct kevo_cand_rec k;
        char *text = NULL;
        size_t len = 0;
        int bad;
        memset(&k, 0, sizeof k);
        bad = kevo_archive_cand_get(kevo_trail_archive(t), ids[i], &k) != KEVO_OK ||
              kevo_archive_source_get(kevo_trail_archive(t), k.source_hash, &text, &len) != KEVO_OK;
        if (bad)
            kevo_mcp_fail(c, "seed candidate %lld: %s", (long long)ids[i],
                          kevo_archive_errmsg(kevo_trail_archive(t)));
        else if (kevo_mcp_private_file(m, c, "seed", ext, text, len, paths[i]))
            bad = 1;
        kevo_free(text);
        kevo_archive_cand_clear(&k);
        if (bad)
            return -1;
    }
    return 0;
}

/* The call's seeds: "seeds" (paths), "seed_candidates" (ids), else the session's best of
 * the task. Paths into paths (resolved), their count into *n. */
static int start_seeds(struct kevo_mcp *m, struct mcp_call *c, const struct kevo_task *task,
                       char paths[][PATH_MAX], int *n)
{
    json_t *sp = json_object_get(c->args, "seeds"), *sc = json_object_get(c->args, "seed_candidates");
    int64_t ids[MAX_SEEDS];
    int n_ids = 0;
    size_t i;
    json_t *v;

    *n = 0;
    if ((sp && !json_is_array(sp)) || (sc && !json_is_array(sc)) ||
        json_array_size(sp) + json_array_size(sc) > MAX_SEEDS)
        return kevo_mcp_bad(c, "'seeds' (paths) and 'seed_candidates' (ids) are arrays of at "
                            "most %d together", MAX_SEEDS);
    json_array_foreach(sp, i, v) {
        if (!json_is_string(v))
            return kevo_mcp_bad(c, "'seeds' holds paths (strings)");
        if (kevo_mcp_path(m, c, json_string_value(v), MCP_READ, paths[(*n)++]))
            return -1;
    }
    json_array_foreach(sc, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 1)
            return kevo_mcp_bad(c, "'seed_candidates' holds candidate ids");
        ids[n_ids++] = json_integer_value(v);
    }
    if (!sp && !sc && m->trail && (ids[0] = kevo_trail_best(m->trail, task)) != 0)
        n_ids = 1;   /* the agent's best goes on in the search */
    if (seed_files(m, c, ids, n_ids, task->lang == KEVO_LANG_C ? "c" : "cu", paths + *n))
        return -1;
    *n += n_ids;
    return 0;
}

/* posix_spawn of `kevo run` with v, its output to bg->log; the pid into bg. */
static int spawn(struct kevo_mcp *m, struct mcp_call *c, struct argv *v, struct mcp_bg *bg)
{
    const char *exe = m->o->exe ? m->o->exe : "/proc/self/exe";
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t def, none;
    int rc;

    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, bg->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    /* the run stops on SIGTERM, whatever this process does with it */
    sigemptyset(&def);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGHUP);
    sigaddset(&def, SIGPIPE);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    rc = posix_spawn(&bg->pid, exe, &fa, &at, v->a, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0)
        return kevo_mcp_fail(c, "cannot start %s run: %s", exe, strerror(rc));
    bg->started = kevo_now();
    return 0;
}

/* Wait for the run's "start" event (its id) or its end. */
static void await_start(struct mcp_bg *bg)
{
    double until = kevo_now() + START_WAIT_S;

    while (!bg->run && !ended(bg) && kevo_now() < until) {
        json_t *ev = last_event(bg, "start");
        if (ev)
            bg->run = json_integer_value(json_object_get(ev, "run"));
        json_decref(ev);
        if (!bg->run)
            nap(0.1);
    }
    if (!bg->run) {   /* ended before it said so: its log may still name it */
        json_t *ev = last_event(bg, "start");
        bg->run = json_integer_value(json_object_get(ev, "run"));
        json_decref(ev);
    }
}

static int start_args(struct kevo_mcp *m, struct mcp_call *c, struct argv *v, int64_t *budget)
{
    static const char *const known[] = { "task", "task_text", "budget", "time_s", "backend",
                                         "time_cap_s", "seeds", "seed_candidates", NULL };
    double time_s = 0, cap = 0;
    const char *b = NULL;

    *budget = DEFAULT_BUDGET;
    if (kevo_mcp_args_known(c, known) ||
        kevo_mcp_arg_int(c, "budget", 1, 1000000, budget) < 0 ||
        kevo_mcp_arg_num(c, "time_s", 1, 1e7, &time_s) < 0 ||
        kevo_mcp_arg_num(c, "time_cap_s", 0.001, 600, &cap) < 0 ||
        kevo_mcp_arg_str(c, "backend", &b) < 0)
        return -1;
    if (b && strcmp(b, "cpu") && strcmp(b, "cuda"))
        return kevo_mcp_bad(c, "argument 'backend' is \"cpu\" or \"cuda\"");
    arg(v, "kevo");
    arg(v, "run");
    arg(v, NULL);   /* the task, once known */
    arg(v, "--archive");
    arg(v, m->archive);
    arg(v, "--json");
    arg_num(v, "--budget", "%.0f", (double)*budget);
    if (time_s > 0)
        arg_num(v, "--time", "%.17g", time_s);
    if (cap > 0)
        arg_num(v, "--time-cap", "%.17g", cap);
    if (b) {
        arg(v, "--backend");
        arg(v, b);
    }
    for (int i = 0; i < m->o->n_models; i++) {   /* the user's models, never the call's */
        arg(v, "--model");
        arg(v, m->o->models[i]);
    }
    return 0;
}

void kevo_mcp_tool_run_start(struct kevo_mcp *m, struct mcp_call *c)
{
    struct argv v;
    char tpath[PATH_MAX], seeds[MAX_SEEDS + 1][PATH_MAX], *text = NULL, *msg = NULL;
    struct kevo_task *task = NULL;
    size_t len = 0;
    int64_t budget = 0;
    int n_seeds = 0;

    memset(&v, 0, sizeof v);
    if (m->n_bg == MCP_MAX_BG) {
        kevo_mcp_fail(c, "this session started %d runs already", MCP_MAX_BG);
        return;
    }
    if (start_args(m, c, &v, &budget) || kevo_mcp_input(m, c, "task", NULL, 1, tpath, &text, &len) < 0)
        goto out;
    if (kevo_task_parse(tpath, text, len, &task, &msg) != KEVO_OK) {
        kevo_mcp_fail(c, "%s", msg ? msg : "the task does not parse");
        goto out;
    }
    if (start_seeds(m, c, task, seeds, &n_seeds))
        goto out;
    v.a[2] = tpath;
    for (int i = 0; i < n_seeds; i++) {
        arg(&v, "--seed");
        arg(&v, seeds[i]);
    }
    struct mcp_bg *bg = &m->bg[m->n_bg];
    memset(bg, 0, sizeof *bg);
    char lname[PATH_MAX];
    if (kevo_mcp_private_file(m, c, "run", "log", "", 0, lname))
        goto out;
    snprintf(bg->log, sizeof bg->log, "%s", lname);
    if (spawn(m, c, &v, bg))
        goto out;
    m->n_bg++;
    await_start(bg);
    char *tail = bg->run ? NULL : log_tail(bg, 4000);
    if (!bg->run && bg->exited) {
        kevo_mcp_fail(c, "the run ended before it started: %s", tail && *tail ? tail : "(no output)");
        kevo_free(tail);
        goto out;
    }
    c->out = json_pack("{s:o, s:I, s:s, s:s, s:I, s:i}", "run",
                       bg->run ? json_integer(bg->run) : json_null(), "pid", (json_int_t)bg->pid,
                       "state", bg->run ? "running" : "starting", "task", task->name, "budget",
                       (json_int_t)budget, "seeds", n_seeds);
    kevo_mcp_say(c, "run %lld of %s started in the background (pid %lld, budget %lld, %d seed%s); "
                 "run_status follows it, run_stop stops it\n", (long long)bg->run, task->name,
                 (long long)bg->pid, (long long)budget, n_seeds, n_seeds == 1 ? "" : "s");
    kevo_free(tail);
out:
    kevo_free(msg);
    kevo_free(text);
    kevo_task_free(task);
}

/* ---- run_status, run_stop ---- */

static struct mcp_bg *bg_of(struct kevo_mcp *m, int64_t run)
{
    for (int i = 0; i < m->n_bg; i++) {
        if (!m->bg[i].run && !ended(&m->bg[i]))
            await_start(&m->bg[i]);
        if (m->bg[i].run == run)
            return &m->bg[i];
    }
    return NULL;
}

/* run's state: the archive's record and, for a run this session started, its process. */
static void status_of(struct kevo_mcp *m, struct mcp_call *c, int64_t run)
{
    struct mcp_bg *bg = bg_of(m, run);
    char *js = NULL, *msg = NULL;
    json_t *doc = NULL, *rep, *best, *prog = NULL;

    if (kevo_runs_json(m->archive, run, &js, &msg) != KEVO_OK || !(doc = json_loads(js, 0, NULL))) {
        kevo_mcp_fail(c, "%s", msg ? msg : "cannot read the run");
        goto out;
    }
    rep = json_object_get(doc, "report");
    best = json_object_get(rep, "best");
    if (!json_is_object(best)) {   /* running: the best so far heads its lineage */
        json_t *head = json_array_get(json_object_get(doc, "lineage_of_best"), 0);
        const char *v = json_string_value(json_object_get(head, "verdict"));
        best = v && !strcmp(v, "ok") ? head : NULL;
    }
    if (bg)
        prog = last_event(bg, "status");
    c->out = json_pack("{s:I, s:O, s:O, s:O, s:O, s:O, s:O}", "run", (json_int_t)run, "task",
                       json_object_get(doc, "task"), "status", json_object_get(doc, "status"),
                       "candidates", json_object_get(doc, "candidates"), "evaluated",
                       json_object_get(doc, "evaluated"), "ok", json_object_get(doc, "ok"),
                       "lineage_of_best", json_object_get(doc, "lineage_of_best"));
    json_object_set_new(c->out, "best", json_is_object(best) ? json_incref(best) : json_null());
    json_object_set_new(c->out, "reason", json_incref(json_object_get(rep, "reason")
                                                          ? json_object_get(rep, "reason")
                                                          : json_null()));
    json_object_set_new(c->out, "progress", prog ? prog : json_null());
    json_object_set_new(c->out, "process", !bg ? json_null()
                        : json_pack("{s:I, s:b, s:o}", "pid", (json_int_t)bg->pid, "running",
                                    !ended(bg), "exit_status", !bg->exited ? json_null()
                                    : json_integer(WIFEXITED(bg->status) ? WEXITSTATUS(bg->status)
                                                   : 128 + WTERMSIG(bg->status))));
    kevo_mcp_say(c, "run %lld (%s): %s, %lld evaluated, %lld ok", (long long)run,
                 json_string_value(json_object_get(doc, "task")),
                 json_string_value(json_object_get(doc, "status")),
                 (long long)json_integer_value(json_object_get(doc, "evaluated")),
                 (long long)json_integer_value(json_object_get(doc, "ok")));
    if (json_is_object(best))
        kevo_mcp_say(c, "; best: candidate %lld (%s), %.4g us, %.2fx the reference",
                     (long long)json_integer_value(json_object_get(best, "id")),
                     json_string_value(json_object_get(best, "op")),
                     json_number_value(json_object_get(best, "score_s")) * 1e6,
                     json_number_value(json_object_get(best, "speedup")));
    if (prog && json_is_number(json_object_get(prog, "speedup")))
        kevo_mcp_say(c, "; so far %.2fx the reference after %lld evaluations",
                     json_number_value(json_object_get(prog, "speedup")),
                     (long long)json_integer_value(json_object_get(prog, "evaluations")));
    kevo_mcp_say(c, "\n");
out:
    json_decref(doc);
    kevo_free(js);
    kevo_free(msg);
}

static int run_arg(struct mcp_call *c, int64_t *run)
{
    static const char *const known[] = { "run", NULL };
    int r;

    if (kevo_mcp_args_known(c, known) || (r = kevo_mcp_arg_int(c, "run", 1, INT64_MAX, run)) < 0)
        return -1;
    return r ? 0 : kevo_mcp_bad(c, "'run' (an id) is required");
}

void kevo_mcp_tool_run_status(struct kevo_mcp *m, struct mcp_call *c)
{
    int64_t run = 0;

    if (!run_arg(c, &run))
        status_of(m, c, run);
}

void kevo_mcp_tool_run_stop(struct kevo_mcp *m, struct mcp_call *c)
{
    int64_t run = 0;
    struct mcp_bg *bg;

    if (run_arg(c, &run))
        return;
    bg = bg_of(m, run);
    if (!bg) {
        kevo_mcp_fail(c, "run %lld was not started by this session (only its own runs are "
                      "stopped here; kevo run stops on Ctrl-C or SIGTERM)", (long long)run);
        return;
    }
    if (!ended(bg) && kill(bg->pid, SIGTERM) == 0) {
        double until = kevo_now() + STOP_WAIT_S;
        bg->stop_sent = 1;
        while (!ended(bg) && kevo_now() < until)
            nap(0.1);
    }
    status_of(m, c, run);
}

void kevo_mcp_runs_stop_all(struct kevo_mcp *m, double grace_s)
{
    double until = kevo_now() + grace_s;
    int left = 0;

    for (int i = 0; i < m->n_bg; i++)
        if (!ended(&m->bg[i]) && kill(m->bg[i].pid, SIGTERM) == 0)
            left++;
    while (left && kevo_now() < until) {
        nap(0.1);
        left = 0;
        for (int i = 0; i < m->n_bg; i++)
            left += !ended(&m->bg[i]);
    }
    for (int i = 0; i < m->n_bg; i++)
        if (!ended(&m->bg[i])) {   /* past the grace: the archive loses nothing stored */
            kill(m->bg[i].pid, SIGKILL);
            (void)waitpid(m->bg[i].pid, &m->bg[i].status, 0);
            m->bg[i].exited = 1;
        }
}

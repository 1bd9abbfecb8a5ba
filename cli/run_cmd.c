/*
 * run_cmd - `kevo run`, `kevo runs` and `kevo export` (docs/cli.md, docs/search.md). The
 * search itself is kevo_run in the library; this file parses options, shows progress (a
 * live status line on a terminal, plain lines otherwise, the events as JSON lines with
 * --json) and stops the run cleanly on the first Ctrl-C, SIGTERM or SIGHUP (a second one
 * kills kevo).
 */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int stop_flag;

/* SIGINT (Ctrl-C), SIGTERM (kill, a batch scheduler's time limit, systemd) and SIGHUP (the
 * terminal went away) stop the run alike: at the next result, recorded as stopped, so
 * `kevo run --resume` goes on. A second one kills kevo at once with 128 + its number (130
 * for Ctrl-C), which loses nothing stored either (the archive commits every write). */
static void on_stop_signal(int sig)
{
    if (stop_flag)
        _exit(128 + sig);
    stop_flag = 1;
}

/* Install on_stop_signal, except where kevo was started with the signal ignored (nohup,
 * a background job of a script): that choice is the caller's to keep. */
static void catch_stop_signals(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa, old;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[i], &sa, NULL);
}

struct show {
    int json, tty, status_shown;
    int mpi;                  /* an MPI run: eval lines name their rank */
};

static void clear_status(struct show *s)
{
    if (s->status_shown) {
        fputs("\r\033[K", stderr);
        s->status_shown = 0;
    }
}

static void show_status(struct show *s, json_t *e)
{
    char best[32] = "-";
    double el = cli_num(e, "elapsed_s"), eta = cli_num(e, "eta_s");
    if (json_is_number(json_object_get(e, "best_s")))
        cli_fmt_time(best, sizeof best, cli_num(e, "best_s"));
    fprintf(stderr, "\r\033[K[run %d] %d/%d evaluations, %.0f%% valid, best %s (%.0f%% of SOL",
            (int)cli_num(e, "run"), (int)cli_num(e, "evaluations"), (int)cli_num(e, "budget"),
            100 * cli_num(e, "valid"), best, 100 * cli_num(e, "best_sol"));
    if (json_is_number(json_object_get(e, "speedup")))
        fprintf(stderr, ", %.2fx the reference", cli_num(e, "speedup"));
    fprintf(stderr, "), %d:%02d elapsed", (int)el / 60, (int)el % 60);
    if (eta > 0)
        fprintf(stderr, ", ETA %d:%02d", (int)eta / 60, (int)eta % 60);
    fflush(stderr);
    s->status_shown = 1;
}

static void show_eval(struct show *s, json_t *e)
{
    char t[32] = "";
    const char *v = cli_str(e, "verdict", "?");
    if (strcmp(v, "ok") == 0)
        cli_fmt_time(t, sizeof t, cli_num(e, "score_s"));
    clear_status(s);
    printf("cand %d (%s): %s %s", (int)cli_num(e, "id"), cli_str(e, "op", "?"), v, t);
    if (strcmp(v, "ok") == 0)
        printf("  %.0f%% of SOL  %.2fx ref", 100 * cli_num(e, "sol_fraction"),
               cli_num(e, "speedup"));
    if (s->mpi && json_is_integer(json_object_get(e, "rank")))
        printf("  [rank %d]", (int)cli_num(e, "rank"));
    if (json_is_true(json_object_get(e, "best")))
        printf("  [new best]");
    if (strcmp(v, "ok") != 0)
        printf("  %.160s", cli_str(e, "message", ""));
    printf("\n");
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(e, "log"), i, l)   /* a compile error's first lines */
        printf("    %.200s\n", json_string_value(l));
    if (cli_num(e, "log_more") > 0)
        printf("    ... %d more line%s: kevo show %d\n", (int)cli_num(e, "log_more"),
               cli_num(e, "log_more") == 1 ? "" : "s", (int)cli_num(e, "id"));
    fflush(stdout);
}

/* An MPI run's ranks: the controller's own workers, then each other rank's. */
static void show_ranks(struct show *s, json_t *e)
{
    json_t *c = json_object_get(e, "controller"), *r;
    size_t i;

    s->mpi = 1;
    printf("MPI: rank 0 (%s): %d worker%s, the controller\n", cli_str(c, "host", "?"),
           (int)cli_num(c, "workers"), cli_num(c, "workers") == 1 ? "" : "s");
    json_array_foreach(json_object_get(e, "ranks"), i, r) {
        json_t *slots = json_object_get(r, "slots");
        printf("MPI: rank %d (%s): ", (int)cli_num(r, "rank"), cli_str(r, "host", "?"));
        if (strcmp(cli_str(r, "state", ""), "ready") == 0)
            printf("%d worker%s (%s)\n", (int)json_array_size(slots),
                   json_array_size(slots) == 1 ? "" : "s",
                   cli_str(json_array_get(slots, 0), "name", "?"));
        else
            printf("%s: %s\n", cli_str(r, "state", "?"), cli_str(r, "why", "?"));
    }
}

static void on_event(void *user, const char *text)
{
    struct show *s = user;
    json_t *e;
    const char *kind;

    if (s->json) {
        printf("%s\n", text);
        fflush(stdout);
        return;
    }
    e = json_loads(text, 0, NULL);
    kind = cli_str(e, "event", "");
    if (strcmp(kind, "status") == 0 && s->tty)
        show_status(s, e);
    else if (strcmp(kind, "eval") == 0)
        show_eval(s, e);
    else if (strcmp(kind, "start") == 0 && cli_num(e, "replay_of") > 0)
        printf("run %d: %s, a replay of run %d (its recorded results and replies; no worker)\n",
               (int)cli_num(e, "run"), cli_str(e, "task", "?"), (int)cli_num(e, "replay_of"));
    else if (strcmp(kind, "start") == 0)
        printf("run %d: %s on %s, budget %d evaluations, %d worker%s%s\n", (int)cli_num(e, "run"),
               cli_str(e, "task", "?"), cli_str(e, "backend", "?"), (int)cli_num(e, "budget"),
               (int)cli_num(e, "workers"), cli_num(e, "workers") == 1 ? "" : "s",
               json_is_true(json_object_get(e, "resumed")) ? " (resumed)" : "");
    else if (strcmp(kind, "ranks") == 0)
        show_ranks(s, e);
    else if (strcmp(kind, "rank_lost") == 0) {
        clear_status(s);
        printf("MPI: rank %d (%s) lost: %s; %d evaluation%s sent elsewhere\n",
               (int)cli_num(e, "rank"), cli_str(e, "host", "?"), cli_str(e, "why", "?"),
               (int)cli_num(e, "lost_calls"), cli_num(e, "lost_calls") == 1 ? "" : "s");
    } else if (strcmp(kind, "llm_check") == 0 && json_is_true(json_object_get(e, "ok")))
        printf("model %s: ok (%.1f s)\n", cli_str(e, "model", "?"), cli_num(e, "latency_s"));
    else if (strcmp(kind, "llm_check") == 0)
        printf("model %s: FAIL %s; not used in this session\n", cli_str(e, "model", "?"),
               cli_str(e, "diagnosis", "?"));
    else if (strcmp(kind, "llm") == 0 && !strcmp(cli_str(e, "status", ""), "imported") &&
             json_object_get(e, "replies"))   /* the summary, not a call of an imported reply */
        printf("imported replies: %d used first, %d wait for the next session\n",
               (int)cli_num(e, "replies"), (int)cli_num(e, "waiting"));
    else if (strcmp(kind, "holdout") == 0) {
        clear_status(s);
        printf("held-out gate: cand %d %s\n", (int)cli_num(e, "id"), cli_str(e, "verdict", "?"));
    }
    json_decref(e);
}

/* A reply came back (made now, from the cache, imported; a replay's too)? */
static int reply_status(const char *k)
{
    if (!strncmp(k, "replay: ", 8))
        k += 8;
    return !strcmp(k, "ok") || !strcmp(k, "cached") || !strcmp(k, "imported");
}

/* What each LLM model did ("llm_models" of a report or of `kevo runs ID --json`). */
static void print_llm_models(json_t *models)
{
    size_t i;
    json_t *m;

    if (!json_array_size(models))
        return;
    printf("LLM models:\n  %-40s %14s  %-31s %10s  %s\n", "model", "calls ok/other",
           "tokens in/cached/out/reasoning", "cost", "cands/ok/improved");
    json_array_foreach(models, i, m) {
        json_t *calls = json_object_get(m, "calls"), *t = json_object_get(m, "tokens"), *n;
        const char *k;
        char cost[32] = "-", tok[96], ok[32];
        int good = 0;

        json_object_foreach(calls, k, n)
            good += reply_status(k) ? (int)json_integer_value(n) : 0;
        snprintf(ok, sizeof ok, "%d/%d", good, (int)cli_num(m, "n_calls") - good);
        snprintf(tok, sizeof tok, "%.0f/%.0f/%.0f/%.0f", cli_num(t, "in"), cli_num(t, "cached_in"),
                 cli_num(t, "out"), cli_num(t, "reasoning"));
        if (json_is_number(json_object_get(m, "cost")))   /* null: the model has no price */
            snprintf(cost, sizeof cost, "%.4f", cli_num(m, "cost"));
        printf("  %-40s %14s  %-31s %10s  %d/%d/%d\n", cli_str(m, "model", "?"), ok, tok, cost,
               (int)cli_num(m, "candidates"), (int)cli_num(m, "ok"), (int)cli_num(m, "improved"));
        if (json_object_size(calls) > 1 || (json_object_size(calls) == 1 && !good)) {
            const char *sep = "    calls: ";
            json_object_foreach(calls, k, n) {
                printf("%s%s %d", sep, k, (int)json_integer_value(n));
                sep = ", ";
            }
            printf("\n");
        }
    }
}

static void print_summary(const char *report, int64_t id)
{
    json_t *r = json_loads(report, 0, NULL), *b = json_object_get(r, "best");
    json_t *fin = json_object_get(r, "final");

    printf("\nrun %lld: stopped by %s after %d evaluations (%d ok)\n", (long long)id,
           cli_str(r, "reason", "?"), (int)cli_num(r, "evaluations"), (int)cli_num(r, "ok"));
    cli_print_best(b);
    if (json_is_object(fin))
        printf("held-out gate: cand %d passed (%s)\n", (int)cli_num(fin, "id"),
               cli_str(fin, "holdout", "?"));
    else if (json_object_get(r, "final"))
        printf("held-out gate: no candidate passed\n");
    json_t *rp = json_object_get(r, "replay");
    if (json_is_object(rp))
        printf("replay of run %d: %s (%d steps, %d candidates, %d LLM calls)\n",
               (int)cli_num(rp, "of"), json_is_true(json_object_get(rp, "identical"))
               ? "identical" : cli_str(rp, "difference", "differs"), (int)cli_num(rp, "steps"),
               (int)cli_num(rp, "candidates"), (int)cli_num(rp, "llm_calls"));
    if (cli_num(r, "llm_pending") > 0)
        printf("offline: %d LLM call(s) wait for a reply: kevo llm pending %lld (docs/llm.md)\n",
               (int)cli_num(r, "llm_pending"), (long long)id);
    print_llm_models(json_object_get(r, "llm_models"));
    printf("details: kevo runs %lld    export: kevo export %lld --out DIR\n", (long long)id,
           (long long)id);
    json_decref(r);
}

/* "0,1,3" -> devices (each checked like --device, at most CLI_MAX_GPUS); the count, or
 * -1 after the usage message. */
static int parse_gpus(const char *s, int *out)
{
    int n = 0, bad;

    do {
        size_t len = strcspn(s, ",");
        char *item = strndup(s, len);
        int64_t v = 0;
        if (n == CLI_MAX_GPUS) {
            free(item);
            cli_usage("--gpus names at most 64 devices");
            return -1;
        }
        bad = !item || cli_parse_int("--gpus", item, 0, CLI_MAX_DEVICE, &v);
        free(item);
        if (bad)
            return -1;
        out[n++] = (int)v;
        s += len;
    } while (*s++ == ',');
    return n;
}

/* The integer options of run, their ranges (docs/cli.md "Option values"). */
enum run_int { RI_BUDGET, RI_STAGNATION, RI_RESUME, RI_REPLAY, RI_ISLANDS, RI_RNG_SEED,
               RI_LLM_CONCURRENCY, RI_COUNT };
static const struct {
    const char *name;
    int64_t lo, hi;
} run_ints[RI_COUNT] = {
    [RI_BUDGET]          = { "--budget", 1, CLI_MAX_EVALS },
    [RI_STAGNATION]      = { "--stagnation", 1, CLI_MAX_EVALS },
    [RI_RESUME]          = { "--resume", 1, INT64_MAX },
    [RI_REPLAY]          = { "--replay", 1, INT64_MAX },
    [RI_ISLANDS]         = { "--islands", 1, CLI_MAX_ISLANDS },
    [RI_RNG_SEED]        = { "--rng-seed", 1, INT64_MAX },   /* kept as a JSON integer */
    [RI_LLM_CONCURRENCY] = { "--llm-concurrency", 1, CLI_MAX_LLM_CONCURRENCY },
};

/* Integer option k of run with value v into o: 0, or -1 after the usage message. */
static int run_int_option(enum run_int k, const char *v, struct kevo_run_opts *o)
{
    int64_t n;

    if (cli_parse_int(run_ints[k].name, v, run_ints[k].lo, run_ints[k].hi, &n))
        return -1;
    if (k == RI_BUDGET)
        o->budget = n;
    else if (k == RI_STAGNATION)
        o->stagnation = n;
    else if (k == RI_RESUME)
        o->resume = n;
    else if (k == RI_REPLAY)
        o->replay = n;
    else if (k == RI_ISLANDS)
        o->n_islands = (int)n;            /* the ranges above fit an int */
    else if (k == RI_RNG_SEED)
        o->rng_seed = (uint64_t)n;
    else
        o->llm_concurrency = (int)n;
    return 0;
}

/* Options of run besides the eval ones: 1 consumed, 0 not one, -1 bad usage. */
static int run_option(int argc, char **argv, int *i, struct kevo_run_opts *o, int *gpus,
                      const char **seeds, const char **models, int *json)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;

    if (strcmp(a, "--json") == 0) {
        *json = 1;
        return 1;
    }
    if (strcmp(a, "--offline") == 0) {
        o->offline = 1;
        return 1;
    }
    if (strcmp(a, "--no-profile") == 0) {
        o->profile_share = 0;
        return 1;
    }
    if (strcmp(a, "--no-exemplar") == 0) {
        o->no_exemplar = 1;
        return 1;
    }
    for (int k = 0; k < RI_COUNT; k++)
        if (strcmp(a, run_ints[k].name) == 0) {
            if (run_int_option((enum run_int)k, v, o))
                return -1;
            (*i)++;
            return 1;
        }
    double *real = NULL;
    double hi = 0;
    if (strcmp(a, "--time") == 0) {
        real = &o->time_s;
        hi = CLI_MAX_SECONDS;
    } else if (strcmp(a, "--target") == 0) {
        real = &o->target;
        hi = 1.0;   /* a fraction of SOL: one above 1 would never be met */
    } else if (strcmp(a, "--cost-cap") == 0) {
        real = &o->cost_cap;
        hi = CLI_MAX_AMOUNT;
    } else if (strcmp(a, "--profile-share") == 0) {
        real = &o->profile_share;
        hi = 1.0;   /* a share of the worker time */
    }
    if (real) {
        if (cli_parse_real(a, v, hi, real))
            return -1;
        (*i)++;
        return 1;
    }
    if (!v)
        return 0;
    if (strcmp(a, "--gpus") == 0) {
        if ((o->n_gpus = parse_gpus(v, gpus)) < 0)
            return -1;
        o->gpus = gpus;
    } else if (strcmp(a, "--seed") == 0) {
        seeds[o->n_seeds++] = v;
    } else if (strcmp(a, "--model") == 0) {
        models[o->n_models++] = v;
    } else if (strcmp(a, "--prompts") == 0) {
        o->prompts_dir = v;
    } else if (strcmp(a, "--prices") == 0) {
        o->prices = v;
    } else if (strcmp(a, "--archive") == 0) {
        o->archive = v;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/*
 * --mpi: join the job. Rank 0 goes on as the controller (0, with o->mpi set); every other
 * rank serves it with this host's workers until it is stopped (1, *rc its exit status).
 * -1: no MPI (*rc set, after the message).
 */
static int mpi_join(struct kevo_run_opts *o, struct kevo_mpi **out, int *rc)
{
    char *msg = NULL;
    enum kevo_status st = kevo_mpi_open(out, &msg);

    if (st) {
        fprintf(stderr, "kevo: --mpi: %s\n", msg ? msg : kevo_status_name(st));
        kevo_free(msg);
        *rc = st == KEVO_ERR_UNSUPPORTED ? EXIT_USAGE : EXIT_FAILED;
        return -1;
    }
    if (kevo_mpi_rank(*out) == 0) {
        o->mpi = *out;
        return 0;
    }
    st = kevo_mpi_serve(*out, &msg);
    if (st)
        fprintf(stderr, "kevo: rank %d: %s\n", kevo_mpi_rank(*out),
                msg ? msg : kevo_status_name(st));
    kevo_free(msg);
    *rc = st ? EXIT_FAILED : 0;
    return 1;
}

int cli_cmd_run(int argc, char **argv)
{
    struct kevo_run_opts o;
    struct show sh = { 0, isatty(2), 0, 0 };
    struct kevo_mpi *mpi = NULL;
    int gpus[CLI_MAX_GPUS], rc = 0, use_mpi = 0;
    const char **seeds = calloc((size_t)argc + 1, sizeof *seeds), *task = NULL;
    const char **models = calloc((size_t)argc + 65, sizeof *models), *config = NULL;
    char *json = NULL, *msg = NULL;
    int64_t id = 0;
    json_t *cfg = NULL;

    if (!seeds || !models) {
        free(seeds);
        free(models);
        return EXIT_FAILED;
    }
    kevo_run_opts_default(&o);
    o.seeds = seeds;
    o.models = models;
    for (int i = 0; i < argc; i++) {
        int r = cli_eval_option(argc, argv, &i, &o.eval);
        if (r == 0)
            r = run_option(argc, argv, &i, &o, gpus, seeds, models, &sh.json);
        if (r < 0) {
            rc = EXIT_USAGE;
            goto out;
        }
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
            continue;
        }
        if (strcmp(argv[i], "--mpi") == 0) {
            use_mpi = 1;
            continue;
        }
        if (argv[i][0] == '-' || task) {
            fprintf(stderr, "kevo: unexpected '%s'\n", argv[i]);
            rc = cli_usage(NULL);
            goto out;
        }
        task = argv[i];
    }
    if (!task && !o.resume && !o.replay) {
        rc = cli_usage("run needs a task file (or --resume ID, or --replay ID)");
        goto out;
    }
    if (o.replay && (task || o.resume)) {
        rc = cli_usage("--replay takes the run's own task and options: no task file, no --resume");
        goto out;
    }
    if (o.replay && use_mpi) {
        rc = cli_usage("--replay evaluates nothing: no --mpi");
        goto out;
    }
    if (cli_load_config(config, &o, models, &cfg) < 0) {
        rc = EXIT_USAGE;
        goto out;
    }
    if (use_mpi && mpi_join(&o, &mpi, &rc) != 0) {
        json_decref(cfg);
        goto out;
    }
    catch_stop_signals();
    enum kevo_status st = kevo_run(task, &o, on_event, &sh, &stop_flag, &id, &json, &msg);
    json_decref(cfg);
    clear_status(&sh);
    if (st) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        if (id && o.replay)
            fprintf(stderr, "kevo: the replay is run %lld in the archive\n", (long long)id);
        else if (id)
            fprintf(stderr, "kevo: run %lld is in the archive; kevo run --resume %lld goes on\n",
                    (long long)id, (long long)id);
        rc = EXIT_FAILED;
    } else if (!sh.json) {
        print_summary(json, id);
    }
out:
    fflush(stdout);
    kevo_mpi_close(mpi);   /* rank 0: stops the other ranks */
    kevo_free(json);
    kevo_free(msg);
    free(seeds);
    free(models);
    return rc;
}

static void print_runs(json_t *doc)
{
    size_t i;
    json_t *r;
    printf("archive: %s\n%5s  %-28s %-11s %6s %6s %6s  %s\n", cli_str(doc, "archive", "?"), "id",
           "task", "status", "cands", "ok", "best", "path");
    json_array_foreach(json_object_get(doc, "runs"), i, r) {
        char t[32] = "-";
        if (cli_num(r, "best_score") > 0)
            cli_fmt_time(t, sizeof t, cli_num(r, "best_score"));
        printf("%5d  %-28s %-11s %6d %6d %10s  %s\n", (int)cli_num(r, "id"),
               cli_str(r, "task", "?"),
               cli_str(r, "status", "?"), (int)cli_num(r, "n_candidates"), (int)cli_num(r, "n_ok"),
               t, cli_str(r, "path", ""));
    }
}

static void print_run(json_t *r)
{
    size_t i;
    json_t *e, *ops = json_object_get(r, "operators");
    const char *k;
    printf("run %d: %s (%s), %s; %d candidates, %d evaluated, %d ok\n", (int)cli_num(r, "id"),
           cli_str(r, "task", "?"), cli_str(r, "path", "?"), cli_str(r, "status", "?"),
           (int)cli_num(r, "candidates"), (int)cli_num(r, "evaluated"), (int)cli_num(r, "ok"));
    json_t *rep = json_object_get(r, "report");
    if (json_is_object(rep)) {
        printf("stopped by: %s\n", cli_str(rep, "reason", "?"));
        cli_print_best(json_object_get(rep, "best"));
    }
    if (strcmp(cli_str(r, "status", ""), "interrupted") == 0)   /* its controller died */
        printf("its kevo process (pid %d) is gone: kevo run --resume %d goes on\n",
               (int)cli_num(json_object_get(r, "owner"), "pid"), (int)cli_num(r, "id"));
    print_llm_models(json_object_get(r, "llm_models"));
    printf("lineage of the best (newest first):\n");
    json_array_foreach(json_object_get(r, "lineage_of_best"), i, e) {
        char t[32] = "-", *p = json_dumps(json_object_get(e, "params"), JSON_COMPACT);
        char *f = json_dumps(json_object_get(e, "flags"), JSON_COMPACT);
        if (cli_num(e, "score_s") > 0)
            cli_fmt_time(t, sizeof t, cli_num(e, "score_s"));
        printf("  cand %-6d %-10s %-10s %12s  params %s flags %s\n", (int)cli_num(e, "id"),
               cli_str(e, "op", "?"), cli_str(e, "verdict", "?"), t, p ? p : "{}", f ? f : "[]");
        free(p);
        free(f);
    }
    printf("operators:\n");
    json_object_foreach(ops, k, e)
        printf("  %-10s proposed %4d  done %4d  ok %4d  improved %4d\n", k,
               (int)cli_num(e, "proposed"), (int)cli_num(e, "done"), (int)cli_num(e, "ok"),
               (int)cli_num(e, "improved"));
}

int cli_cmd_runs(int argc, char **argv)
{
    const char *archive = NULL;
    int as_json = 0, cands = 0;
    int64_t id = 0;
    char *json = NULL, *msg = NULL;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (strcmp(argv[i], "--candidates") == 0)
            cands = 1;
        else if (strcmp(argv[i], "--archive") == 0 && i + 1 < argc)
            archive = argv[++i];
        else if (id || argv[i][0] == '-')
            return cli_usage("runs takes a run id [--archive PATH] [--json]");
        else if (cli_parse_int("run id", argv[i], 1, INT64_MAX, &id))
            return EXIT_USAGE;
    }
    if (cands && !id)
        return cli_usage("runs --candidates takes a run id");
    enum kevo_status st = cands ? kevo_runs_cands_json(archive, id, &json, &msg)
                                : kevo_runs_json(archive, id, &json, &msg);
    if (st) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
    } else if (as_json) {
        printf("%s\n", json);
    } else {
        json_t *doc = json_loads(json, 0, NULL);
        if (cands)
            cli_print_cands(doc);
        else if (id)
            print_run(doc);
        else
            print_runs(doc);
        json_decref(doc);
    }
    kevo_free(json);
    kevo_free(msg);
    return st ? EXIT_FAILED : 0;
}

int cli_cmd_export(int argc, char **argv)
{
    const char *archive = NULL, *dir = NULL;
    int64_t id = 0;
    char *msg = NULL;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--archive") == 0 && i + 1 < argc)
            archive = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (id || argv[i][0] == '-')
            return cli_usage("export takes a run id and --out DIR");
        else if (cli_parse_int("run id", argv[i], 1, INT64_MAX, &id))
            return EXIT_USAGE;
    }
    if (!id || !dir)
        return cli_usage("export takes a run id and --out DIR");
    enum kevo_status st = kevo_export(archive, id, dir, &msg);
    if (st)
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
    else
        printf("%s", msg ? msg : "");
    kevo_free(msg);
    return st ? EXIT_FAILED : 0;
}

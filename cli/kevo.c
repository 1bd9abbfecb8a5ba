/*
 * kevo - the command-line tool. A thin layer over include/kevo.h: it parses arguments,
 * installs the stderr logger, prints results, and maps outcomes to exit codes:
 *   0  the command completed (for eval: every candidate got a verdict, whatever it is)
 *   1  kevo itself failed (bad task file, worker could not start, I/O error, ...), or for
 *      eval the task's own reference failed its evaluation
 *   2  bad usage
 * `kevo check` exits 1 when a file does not parse or compile.
 */
#include "kevo.h"
#include "cli.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int verbose;

static void log_stderr(enum kevo_log_level lvl, const char *msg, void *user)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    (void)user;
    fprintf(stderr, "kevo: %s: %s\n", names[lvl], msg);
}

/* ---- check ---- */

static int is_task_file(const char *name)
{
    size_t n = strlen(name);
    return (n > 3 && strcmp(name + n - 3, ".cu") == 0) || (n > 2 && strcmp(name + n - 2, ".c") == 0);
}

static int check_path(const char *path, const char *task, int *n_files);

static int check_dir(const char *dir, const char *task, int *n_files)
{
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, alphasort), bad = 0;
    if (n < 0) {
        fprintf(stderr, "kevo: %s: cannot read directory\n", dir);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        const char *nm = ents[i]->d_name;
        if (nm[0] != '.') {
            size_t len = strlen(dir) + strlen(nm) + 2;
            char *p = malloc(len);
            if (p) {
                snprintf(p, len, "%s/%s", dir, nm);
                struct stat sb;
                if (stat(p, &sb) == 0 && (S_ISDIR(sb.st_mode) || is_task_file(nm)))
                    bad += check_path(p, task, n_files);
                free(p);
            }
        }
        free(ents[i]);
    }
    free(ents);
    return bad;
}

static int check_path(const char *path, const char *task, int *n_files)
{
    struct stat sb;
    char *msg = NULL;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return check_dir(path, task, n_files);
    (*n_files)++;
    enum kevo_status st = kevo_check_file(path, task, &msg);
    if (st != KEVO_OK) {
        fprintf(stderr, "%s\n", msg ? msg : kevo_status_name(st));
        printf("FAIL %s\n", path);
    } else {
        printf("ok   %s\n", path);
    }
    kevo_free(msg);
    return st != KEVO_OK;
}

static int cmd_check(int argc, char **argv)
{
    const char *task = NULL;
    int bad = 0, n_files = 0, n_paths = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--task") == 0) {
            if (++i >= argc)
                return cli_usage("--task needs a task file");
            task = argv[i];
        } else if (argv[i][0] == '-') {
            return cli_usage("unknown option for check");
        }
    }
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--task") == 0) {
            i++;
            continue;
        }
        n_paths++;
        bad += check_path(argv[i], task, &n_files);
    }
    if (!n_paths)
        return cli_usage("check needs at least one file or directory");
    printf("%d file(s) checked, %d failed\n", n_files, bad);
    return bad ? EXIT_FAILED : 0;
}

/* ---- eval: human-readable report ---- */

static void print_sizes(json_t *sizes)
{
    const char *k;
    json_t *v;
    int first = 1;
    json_object_foreach(sizes, k, v) {
        printf("%s%s=%lld", first ? "" : " ", k, (long long)json_integer_value(v));
        first = 0;
    }
}

static void print_evidence(json_t *ev)
{
    char *s;
    if (!json_is_object(ev) || json_object_size(ev) == 0)
        return;
    s = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s) {
        printf("      evidence: %.600s%s\n", s, strlen(s) > 600 ? " ..." : "");
        free(s);
    }
}

static void print_workload(json_t *w, int with_speedup)
{
    json_t *t = json_object_get(w, "time");
    char med[32];
    printf("    [");
    print_sizes(json_object_get(w, "sizes"));
    printf("] %s", cli_str(w, "verdict", "?"));
    if (json_is_object(t)) {
        cli_fmt_time(med, sizeof med, cli_num(t, "median_s"));
        printf("  %s +-%.1f%% (n=%lld%s%s)", med, 100 * cli_num(t, "noise"),
               (long long)json_integer_value(json_object_get(t, "count")),
               json_is_true(json_object_get(t, "capped")) ? ", capped" : "",
               json_integer_value(json_object_get(t, "batch")) > 1 ? ", batched" : "");
        printf("  %.1f GB/s  %.2f TFLOP/s  %.1f%% of SOL", cli_num(w, "gbps"), cli_num(w, "tflops"),
               100 * cli_num(w, "sol_fraction"));
        json_t *rt = json_object_get(w, "ref_time");
        if (with_speedup && cli_num(w, "speedup") > 0) {
            cli_fmt_time(med, sizeof med, cli_num(rt, "median_s"));
            printf("  %.2fx vs ref (%s)", cli_num(w, "speedup"), med);
        }
    }
    printf("\n");
    if (strcmp(cli_str(w, "verdict", "ok"), "ok") != 0)
        print_evidence(json_object_get(w, "evidence"));
}

/* Registers, shared memory, spills and occupancy of each compiled kernel. */
static void print_resources(json_t *res)
{
    json_t *k;
    size_t i;
    json_array_foreach(res, i, k) {
        if (!json_integer_value(json_object_get(k, "regs")))
            continue;                    /* a CPU function: nothing to report */
        printf("    kernel %s: %lld regs, %lld B static smem, %lld B local/thread%s",
               cli_str(k, "kernel", "?"), (long long)json_integer_value(json_object_get(k, "regs")),
               (long long)json_integer_value(json_object_get(k, "static_smem")),
               (long long)json_integer_value(json_object_get(k, "local_bytes")),
               json_integer_value(json_object_get(k, "local_bytes")) > 0 ? " (spills/stack)" : "");
        if (json_object_get(k, "blocks_per_sm"))
            printf(", %lld blocks/SM at %lld threads",
                   (long long)json_integer_value(json_object_get(k, "blocks_per_sm")),
                   (long long)json_integer_value(json_object_get(k, "block")));
        printf("\n");
    }
}

/* r's evidence less what is printed anyway (NULL: nothing left): a workload's verdict
 * comes with its workload's evidence, the compile log is printed whole, and the message of
 * a candidate that does not parse is the verdict line's. */
static json_t *unshown_evidence(json_t *r)
{
    json_t *ev = json_object_get(r, "evidence"), *w;
    const char *m;
    size_t i;

    json_array_foreach(json_object_get(r, "workloads"), i, w)
        if (strcmp(cli_str(w, "verdict", "ok"), "ok") != 0)
            return NULL;
    ev = json_is_object(ev) ? json_deep_copy(ev) : NULL;
    json_object_del(ev, "log");
    m = json_string_value(json_object_get(ev, "message"));
    if (m && strstr(cli_str(r, "message", ""), m))
        json_object_del(ev, "message");
    return ev;
}

static void print_result(const char *label, json_t *r, int with_speedup)
{
    json_t *ws = json_object_get(r, "workloads"), *w;
    size_t i;
    printf("%s: %s", label, cli_str(r, "verdict", "?"));
    if (json_object_get(r, "message"))
        printf(" -- %.300s", cli_str(r, "message", ""));
    printf("\n");
    if (with_speedup)
        print_resources(json_object_get(r, "resources"));
    json_array_foreach(ws, i, w) print_workload(w, with_speedup);
    cli_print_profile(json_object_get(r, "profile"), "    ");
    if (strcmp(cli_str(r, "verdict", "ok"), "ok") != 0) {
        json_t *ev = unshown_evidence(r);
        print_evidence(ev);
        json_decref(ev);
        const char *log = cli_str(r, "compile_log", NULL);
        if (log && *log)
            printf("      compile log:\n%.2000s\n", log);
    }
    json_t *h = json_object_get(r, "holdout");
    if (json_is_object(h))
        print_result("  holdout", h, with_speedup);
}

static void print_report(json_t *doc)
{
    json_t *c, *cal = json_object_get(doc, "calibration");
    size_t i;
    json_t *bw = json_object_get(cal, "bandwidth");
    printf("task %s (%s backend", cli_str(json_object_get(doc, "task"), "name", "?"),
           cli_str(doc, "backend", "?"));
    json_t *dev = json_object_get(cal, "device");
    if (json_is_object(dev))
        printf(", %s", cli_str(dev, "name", "?"));
    if (json_is_object(bw))
        printf(", %.0f GB/s measured", cli_num(bw, "best_bytes_per_s") / 1e9);
    printf(")\n");
    print_result("reference", json_object_get(doc, "reference"), 0);
    json_array_foreach(json_object_get(doc, "candidates"), i, c)
        print_result(cli_str(c, "path", "?"), c, 1);
}

/* The task's own reference failed its evaluation (its verdict, or its holdout's, is not
 * ok; then no candidate was evaluated): say why on stderr and return 1, else 0. */
static int ref_failed(json_t *doc)
{
    json_t *r = json_object_get(doc, "reference");
    json_t *h = json_object_get(r, "holdout");

    if (!strcmp(cli_str(r, "verdict", "?"), "ok")) {
        if (!json_is_object(h) || !strcmp(cli_str(h, "verdict", "?"), "ok"))
            return 0;
        r = h;
    }
    fprintf(stderr, "kevo: the task's reference failed: %s -- %.2000s\n",
            cli_str(r, "verdict", "?"), cli_str(r, "message", "no result"));
    return 1;
}

static int cmd_eval(int argc, char **argv)
{
    struct kevo_eval_opts o;
    const char *task = NULL;
    const char **cands = calloc((size_t)argc + 1, sizeof *cands);
    int n_cands = 0, as_json = 0, rc = 0;
    char *json = NULL, *msg = NULL;

    kevo_eval_opts_default(&o);
    if (!cands)
        return EXIT_FAILED;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = cli_eval_option(argc, argv, &i, &o);
        if (r < 0) {
            rc = EXIT_USAGE;
            goto out;
        }
        if (r > 0)
            continue;
        if (strcmp(a, "--json") == 0) {
            as_json = 1;
        } else if (strcmp(a, "--profile") == 0) {
            o.profile = 1;
        } else if (strcmp(a, "--dump") == 0) {
            if (i + 1 >= argc) {
                rc = cli_usage("--dump needs a directory");
                goto out;
            }
            o.dump_dir = argv[++i];
        } else if (a[0] == '-') {
            fprintf(stderr, "kevo: unknown option '%s'\n", a);
            rc = cli_usage(NULL);
            goto out;
        } else if (!task) {
            task = a;
        } else {
            cands[n_cands++] = a;
        }
    }
    if (!task) {
        rc = cli_usage("eval needs a task file");
        goto out;
    }
    enum kevo_status st = kevo_eval_json(task, cands, n_cands, &o, &json, &msg);
    if (st != KEVO_OK) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        rc = EXIT_FAILED;
    } else {
        json_t *doc = json_loads(json, 0, NULL);
        if (as_json)
            printf("%s\n", json);
        else
            print_report(doc);
        fflush(stdout);   /* the report first, then why the command failed */
        rc = ref_failed(doc) ? EXIT_FAILED : 0;
        json_decref(doc);
    }
out:
    kevo_free(json);
    kevo_free(msg);
    free(cands);
    return rc;
}

/* ---- bench ---- */

static void bench_progress(void *user, int i, int n, const char *path)
{
    int tty = *(int *)user;
    fprintf(stderr, tty ? "\r\033[K[%d/%d] %s" : "[%d/%d] %s\n", i + 1, n, path);
    fflush(stderr);
}

/* "x1.23" or "-" */
static void fmt_ratio(char *out, size_t n, json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (json_is_number(v) && json_number_value(v) > 0)
        snprintf(out, n, "%.2fx", json_number_value(v));
    else
        snprintf(out, n, "-");
}

static void print_fast(json_t *sc, const char *key, const char *label)
{
    json_t *f = json_object_get(sc, key);
    if (f)
        printf("fast_p vs %-10s p=1: %.2f  p=1.5: %.2f  p=2: %.2f\n", label,
               cli_num(f, "1"), cli_num(f, "1.5"), cli_num(f, "2"));
}

static void print_bench(json_t *doc)
{
    size_t i;
    json_t *e, *sc = json_object_get(doc, "scores");

    printf("%-32s %-10s %11s %6s %8s %8s %8s  %s\n", "task", "verdict", "time", "%SOL",
           "vs ref", "vs eager", "vs comp", "subject");
    json_array_foreach(json_object_get(doc, "tasks"), i, e) {
        json_t *w0 = json_array_get(json_object_get(e, "workloads"), 0);
        char t[32] = "-", r[16], ea[16], co[16];
        if (w0 && cli_num(w0, "time_s") > 0)
            cli_fmt_time(t, sizeof t, cli_num(w0, "time_s"));
        fmt_ratio(r, sizeof r, e, "speedup");
        fmt_ratio(ea, sizeof ea, e, "speedup_eager");
        fmt_ratio(co, sizeof co, e, "speedup_compile");
        printf("%-32s %-10s %11s %5.1f%% %8s %8s %8s  %s\n", cli_str(e, "task", "?"),
               cli_str(e, "verdict", "?"), t, 100 * cli_num(e, "sol_fraction"), r, ea, co,
               cli_str(e, "subject", "?"));
        if (strcmp(cli_str(e, "verdict", "?"), "ok") != 0)
            printf("    %s\n", cli_str(e, "message", ""));
    }
    printf("\n%d tasks, %d ok (correctness %.2f); geomean fraction of SOL %.3f",
           (int)cli_num(sc, "tasks"), (int)cli_num(sc, "ok"), cli_num(sc, "correctness"),
           cli_num(sc, "geomean_sol_fraction"));
    if (json_object_get(sc, "mean_sol_score"))
        printf("; SOL score %.3f (base: %s)", cli_num(sc, "mean_sol_score"),
               cli_str(sc, "sol_score_base", "?"));
    printf("\n(time and %%SOL: the first workload; speedups: geometric means over workloads)\n");
    print_fast(sc, "fast_p_vs_reference", "reference");
    print_fast(sc, "fast_p_vs_eager", "eager");
    print_fast(sc, "fast_p_vs_compile", "compile");
}

/* The suite `kevo bench` evaluates when given none: ./tasks where there is one (a
 * checkout), else the data directory's (an installed kevo run anywhere). */
static const char *default_suite(char *buf, size_t n)
{
    struct stat s;

    if (stat("tasks", &s) == 0 && S_ISDIR(s.st_mode))
        return "tasks";
    snprintf(buf, n, "%s/tasks", kevo_data_dir(NULL));
    return buf;
}

static int cmd_bench(int argc, char **argv)
{
    struct kevo_bench_opts o;
    const char **paths = calloc((size_t)argc + 1, sizeof *paths);
    int n = 0, as_json = 0, rc = 0, tty = isatty(2);
    char *json = NULL, *msg = NULL, suite[4096];

    kevo_bench_opts_default(&o);
    if (!paths)
        return EXIT_FAILED;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = cli_eval_option(argc, argv, &i, &o.eval);
        if (r < 0) {
            rc = EXIT_USAGE;
            goto out;
        }
        if (r > 0)
            continue;
        if (strcmp(a, "--json") == 0) {
            as_json = 1;
        } else if (strcmp(a, "--candidates") == 0 || strcmp(a, "--baselines") == 0) {
            if (i + 1 >= argc) {
                rc = cli_usage("--candidates/--baselines need a path");
                goto out;
            }
            *(a[2] == 'c' ? &o.cand_dir : &o.baselines) = argv[++i];
        } else if (a[0] == '-') {
            fprintf(stderr, "kevo: unknown option '%s'\n", a);
            rc = cli_usage(NULL);
            goto out;
        } else {
            paths[n++] = a;
        }
    }
    if (!n)
        paths[n++] = default_suite(suite, sizeof suite);
    enum kevo_status st = kevo_bench_json(paths, n, &o, bench_progress, &tty, &json, &msg);
    if (tty)
        fprintf(stderr, "\r\033[K");
    if (st != KEVO_OK) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        rc = EXIT_FAILED;
    } else if (as_json) {
        printf("%s\n", json);
    } else {
        json_t *doc = json_loads(json, 0, NULL);
        print_bench(doc);
        json_decref(doc);
    }
out:
    kevo_free(json);
    kevo_free(msg);
    free(paths);
    return rc;
}

/* ---- calibrate ---- */

static int cmd_calibrate(int argc, char **argv)
{
    enum kevo_backend_kind b = KEVO_BACKEND_AUTO;
    int device = 0, force = 0, as_json = 0;
    char *json = NULL, *msg = NULL;
    for (int i = 0; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--force") == 0) {
            force = 1;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = 1;
        } else if (strcmp(argv[i], "--device") == 0) {
            int64_t d;
            if (cli_parse_int("--device", v, 0, CLI_MAX_DEVICE, &d))
                return EXIT_USAGE;
            device = (int)d;
            i++;
        } else if (strcmp(argv[i], "--backend") == 0) {
            if (cli_parse_backend(v, &b))
                return cli_usage("--backend is cpu or cuda");
            i++;
        } else {
            return cli_usage("unknown option for calibrate");
        }
    }
    if (b == KEVO_BACKEND_AUTO)
        b = access("/dev/nvidia0", F_OK) == 0 ? KEVO_BACKEND_CUDA : KEVO_BACKEND_CPU;
    enum kevo_status st = kevo_calibrate_json(b, device, force, &json, &msg);
    if (st != KEVO_OK) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        kevo_free(msg);
        return EXIT_FAILED;
    }
    if (as_json) {
        printf("%s\n", json);
    } else {
        json_t *c = json_loads(json, 0, NULL), *bw = json_object_get(c, "bandwidth");
        json_t *pk = json_object_get(c, "peaks"), *d = json_object_get(c, "device");
        const char *k;
        json_t *v;
        printf("device: %s (%s, %lld %s)%s\n", cli_str(d, "name", "?"), cli_str(d, "arch", "?"),
               (long long)json_integer_value(json_object_get(d, "sms")),
               strncmp(cli_str(d, "arch", ""), "sm_", 3) == 0 ? "SMs" : "cores",
               json_is_true(json_object_get(c, "cached")) ? " [cached]" : "");
        json_object_foreach(bw, k, v) {
            size_t kl = strlen(k);
            if (kl > 12 && strcmp(k + kl - 12, "_bytes_per_s") == 0)
                printf("  bandwidth %-6.*s %8.1f GB/s\n", (int)(kl - 12), k,
                       json_number_value(v) / 1e9);
        }
        json_object_foreach(pk, k, v) {
            if (json_is_object(v))
                printf("  peak %-6s measured %8.2f TFLOP/s  spec %8.2f  used %8.2f\n", k,
                       cli_num(v, "measured_flops_per_s") / 1e12, cli_num(v, "spec_flops_per_s") / 1e12,
                       cli_num(v, "used_flops_per_s") / 1e12);
        }
        printf("  launch floor %.2f us\n", cli_num(c, "launch_floor_s") * 1e6);
        json_decref(c);
    }
    kevo_free(json);
    return 0;
}

/* ---- version ---- */

/* The version, and where the run-time data is read from and which rule found it
 * (kevo_data_dir): an installed kevo that reads the wrong prompts says so here. */
static int cmd_version(void)
{
    const char *rule = NULL, *dir = kevo_data_dir(&rule);
    struct stat s;

    printf("kevo %s\n", KEVO_VERSION);
    printf("data: %s (%s)%s\n", dir, rule,
           stat(dir, &s) == 0 && S_ISDIR(s.st_mode) ? "" : " [missing]");
    printf("mpi: %s\n", kevo_mpi_library() ? kevo_mpi_library()   /* run --mpi */
                                             : "not built in (docs/cluster.md)");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "__worker") == 0)
        return kevo_worker_main(argc - 1, argv + 1);
    verbose = getenv("KEVO_VERBOSE") != NULL;
    kevo_log_set(log_stderr, NULL, verbose ? KEVO_LOG_DEBUG : KEVO_LOG_WARN);
    if (argc < 2)
        return cli_usage(NULL);
    const char *cmd = argv[1];
    if (cli_wants_help(argc - 2, argv + 2) && cli_help(cmd) == 0)
        return 0;
    if (strcmp(cmd, "check") == 0)
        return cmd_check(argc - 2, argv + 2);
    if (strcmp(cmd, "eval") == 0)
        return cmd_eval(argc - 2, argv + 2);
    if (strcmp(cmd, "run") == 0)
        return cli_cmd_run(argc - 2, argv + 2);
    if (strcmp(cmd, "runs") == 0)
        return cli_cmd_runs(argc - 2, argv + 2);
    if (strcmp(cmd, "show") == 0)
        return cli_cmd_show(argc - 2, argv + 2);
    if (strcmp(cmd, "export") == 0)
        return cli_cmd_export(argc - 2, argv + 2);
    if (strcmp(cmd, "report") == 0)
        return cli_cmd_report(argc - 2, argv + 2);
    if (strcmp(cmd, "models") == 0)
        return cli_cmd_models(argc - 2, argv + 2);
    if (strcmp(cmd, "mcp") == 0)
        return cli_cmd_mcp(argc - 2, argv + 2);
    if (strcmp(cmd, "prompt") == 0)
        return cli_cmd_prompt(argc - 2, argv + 2);
    if (strcmp(cmd, "llm") == 0)
        return cli_cmd_llm(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "calibrate") == 0)
        return cmd_calibrate(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
        return cmd_version();
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        if (argc >= 3 && strcmp(cmd, "help") == 0 && cli_help(argv[2]) < 0) {
            fprintf(stderr, "kevo: no command '%s'\n", argv[2]);
            return cli_usage(NULL);
        }
        if (argc < 3 || strcmp(cmd, "help") != 0)
            fputs(cli_usage_text, stdout);
        return 0;
    }
    fprintf(stderr, "kevo: unknown command '%s'\n", cmd);
    return cli_usage(NULL);
}

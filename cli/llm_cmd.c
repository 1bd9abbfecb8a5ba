/*
 * llm_cmd - `kevo llm pending|answer|import`: LLM calls across an air gap (docs/cli.md,
 * docs/llm.md "Air-gapped clusters"). An offline run records the calls it could not make;
 * pending writes them as JSON lines, answer makes them on a machine with a network and
 * writes each reply as soon as it is back, import stores the replies in the archive for
 * `kevo run --resume`. Files are read whole ("-" is stdin); output goes to --out FILE
 * (written under a temporary name and renamed for pending, line by line for answer) or
 * stdout. Exit status: 0 done, 1 kevo failed (a bad line included), 2 bad usage.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FILE_MAX ((size_t)256 << 20)   /* a file of lines (replies of up to 4 MiB each) */
#define MODELS_MAX 64                  /* --model given to answer (cli_load_config's room) */

/* The whole of path ("-": stdin) into *out (free it), its length in *len; 0, or -1 after
 * saying why. A file over FILE_MAX is refused before its bytes are allocated. */
static int read_all(const char *path, char **out, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    size_t cap = 1 << 16, n = 0;
    char *b = NULL;
    struct stat sb;

    *out = NULL;
    if (!f) {
        fprintf(stderr, "kevo: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && (size_t)sb.st_size > FILE_MAX) {
        fprintf(stderr, "kevo: %s: %lld bytes, more than kevo llm reads from one file (%zu "
                "MiB): split it into several files\n", path, (long long)sb.st_size,
                FILE_MAX >> 20);
        if (f != stdin)
            fclose(f);
        return -1;
    }
    for (;;) {
        int big = b && n + 1 >= cap && cap > FILE_MAX;   /* full at FILE_MAX bytes */
        char *p = b;
        if (!big && (!b || n + 1 >= cap)) {
            cap = cap * 2 > FILE_MAX + 1 ? FILE_MAX + 1 : cap * 2;
            p = realloc(b, cap);
        }
        if (big || !p) {
            if (big)
                fprintf(stderr, "kevo: %s: more than kevo llm reads from one file (%zu MiB): "
                        "split it into several files\n", path, FILE_MAX >> 20);
            else
                fprintf(stderr, "kevo: %s: out of memory\n", path);
            free(b);
            if (f != stdin)
                fclose(f);
            return -1;
        }
        b = p;
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (bad) {
        fprintf(stderr, "kevo: %s: cannot read it\n", path);
        free(b);
        return -1;
    }
    b[n] = '\0';
    *out = b;
    *len = n;
    return 0;
}

/* text written to path ("-" or NULL: stdout), through a temporary name; 0 or -1. */
static int write_all(const char *path, const char *text)
{
    char tmp[4200];
    FILE *f;

    if (!path || !strcmp(path, "-"))
        return fputs(text, stdout) < 0 ? -1 : 0;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "kevo: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* `kevo llm pending RUN [--archive PATH] [--out FILE|-]` */
static int cmd_pending(int argc, char **argv)
{
    const char *archive = NULL, *out = NULL;
    int64_t run = 0;
    char *jsonl = NULL, *msg = NULL;
    int n = 0, rc = 0;

    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--archive") && i + 1 < argc)
            archive = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (run || argv[i][0] == '-')
            return cli_usage("llm pending takes a run id [--archive PATH] [--out FILE]");
        else if (cli_parse_int("run id", argv[i], 1, INT64_MAX, &run))
            return EXIT_USAGE;
    }
    if (!run)
        return cli_usage("llm pending takes a run id [--archive PATH] [--out FILE]");
    enum kevo_status st = kevo_exchange_pending(archive, run, &jsonl, &n, &msg);
    if (st) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        rc = EXIT_FAILED;
    } else if (write_all(out, jsonl) != 0) {
        rc = EXIT_FAILED;
    } else if (out && strcmp(out, "-")) {
        fprintf(stderr, "kevo: run %lld: %d call(s) wait for a reply; written to %s\n",
                (long long)run, n, out);
    }
    kevo_free(jsonl);
    kevo_free(msg);
    return rc;
}

/* answer's output, one line at a time, flushed: what came back is kept if kevo dies */
static void put_line(void *user, const char *line)
{
    FILE *f = user;
    fprintf(f, "%s\n", line);
    fflush(f);
}

/* The options of answer (models: room for MODELS_MAX, counted in ro): 1 consumed, 0 not
 * one, -1 bad usage. */
static int answer_option(int argc, char **argv, int *i, struct kevo_exchange_opts *o,
                         const char **out, const char **config, struct kevo_run_opts *ro,
                         const char **models)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;

    if (!v)
        return 0;
    if (!strcmp(a, "--out")) {
        *out = v;
    } else if (!strcmp(a, "--model")) {
        if (ro->n_models >= MODELS_MAX) {
            cli_usage("llm answer takes at most 64 --model");
            return -1;
        }
        models[ro->n_models++] = v;
    } else if (!strcmp(a, "--config")) {
        *config = v;
    } else if (!strcmp(a, "--prices")) {
        o->prices = v;
    } else if (!strcmp(a, "--cost-cap")) {
        if (cli_parse_real(a, v, CLI_MAX_AMOUNT, &o->cost_cap))
            return -1;
    } else if (!strcmp(a, "--llm-concurrency")) {
        int64_t n;
        if (cli_parse_int(a, v, 1, CLI_MAX_LLM_CONCURRENCY, &n))
            return -1;
        o->concurrency = (int)n;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/* `kevo llm answer FILE|- [--model SPEC]... [--config FILE] [--out FILE|-] [--cost-cap X]
 * [--prices FILE] [--llm-concurrency N]`: the models, and the price table unless given,
 * from the command line and the config file as kevo run reads them (cli_load_config). */
static int cmd_answer(int argc, char **argv)
{
    struct kevo_exchange_opts o;
    struct kevo_exchange_stats s;
    struct kevo_run_opts ro;
    const char *in = NULL, *out = NULL, *config = NULL, *models[MODELS_MAX];
    char *text = NULL, *msg = NULL;
    json_t *cfg = NULL;
    size_t len = 0;
    FILE *f = stdout;
    int rc = 0;

    kevo_exchange_opts_default(&o);
    kevo_run_opts_default(&ro);
    ro.models = models;
    for (int i = 0; i < argc; i++) {
        int r = answer_option(argc, argv, &i, &o, &out, &config, &ro, models);
        if (r < 0)
            return EXIT_USAGE;
        if (r == 0 && (in || (argv[i][0] == '-' && argv[i][1])))
            return cli_usage("llm answer takes a file of pending calls (- for stdin)");
        if (r == 0)
            in = argv[i];
    }
    if (!in)
        return cli_usage("llm answer takes a file of pending calls (- for stdin)");
    if (cli_load_config(config, &ro, models, &cfg) < 0)
        return EXIT_USAGE;
    o.models = models;
    o.n_models = ro.n_models;
    if (!o.prices)
        o.prices = ro.prices;
    if (read_all(in, &text, &len) != 0) {
        json_decref(cfg);
        return EXIT_FAILED;
    }
    if (out && strcmp(out, "-") && !(f = fopen(out, "w"))) {
        fprintf(stderr, "kevo: %s: %s\n", out, strerror(errno));
        free(text);
        json_decref(cfg);
        return EXIT_FAILED;
    }
    enum kevo_status st = kevo_exchange_answer(in, text, len, &o, put_line, f, &s, &msg);
    if (f != stdout && fclose(f) != 0 && !st) {
        fprintf(stderr, "kevo: %s: %s\n", out, strerror(errno));
        rc = EXIT_FAILED;
    }
    if (st) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        rc = EXIT_FAILED;
    } else {
        fprintf(stderr, "kevo: %d call(s): %d answered, %d failed, %d left out by the cost "
                "cap; %.4f spent\n", s.n_calls, s.n_ok, s.n_failed, s.n_skipped, s.spent);
    }
    kevo_free(msg);
    free(text);
    json_decref(cfg);
    return rc;
}

/* `kevo llm import FILE|- [--archive PATH]` */
static int cmd_import(int argc, char **argv)
{
    struct kevo_exchange_stats s;
    const char *archive = NULL, *in = NULL;
    char *text = NULL, *msg = NULL;
    size_t len = 0;

    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--archive") && i + 1 < argc)
            archive = argv[++i];
        else if (in || (argv[i][0] == '-' && argv[i][1]))
            return cli_usage("llm import takes a file of replies (- for stdin) [--archive PATH]");
        else
            in = argv[i];
    }
    if (!in)
        return cli_usage("llm import takes a file of replies (- for stdin) [--archive PATH]");
    if (read_all(in, &text, &len) != 0)
        return EXIT_FAILED;
    enum kevo_status st = kevo_exchange_import(archive, in, text, len, &s, &msg);
    if (st)
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
    else
        printf("imported %d repl%s from %s (%d failed call(s) skipped: they stay pending; %d "
               "already used); kevo run --resume RUN uses them\n", s.n_ok,
               s.n_ok == 1 ? "y" : "ies", in, s.n_failed, s.n_skipped);
    kevo_free(msg);
    free(text);
    return st ? EXIT_FAILED : 0;
}

int cli_cmd_llm(int argc, char **argv)
{
    if (argc >= 1 && !strcmp(argv[0], "pending"))
        return cmd_pending(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "answer"))
        return cmd_answer(argc - 1, argv + 1);
    if (argc >= 1 && !strcmp(argv[0], "import"))
        return cmd_import(argc - 1, argv + 1);
    return cli_usage("llm takes pending, answer or import");
}

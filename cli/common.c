/*
 * common - what the command files of the kevo program share (cli.h): the usage text,
 * option values, the eval options every evaluating command takes, and reading the JSON
 * documents of the public API. Below kevo.c and run_cmd.c, which both use it.
 */
#include "kevo.h"
#include "cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_usage_text[] =
    "usage: kevo COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  check TASK|DIR... [--task TASK]   parse and compile only (no GPU needed); with --task,\n"
    "                                    the files are candidates for TASK\n"
    "  eval TASK [CANDIDATE...]          verify and time the reference and the candidates\n"
    "       [--json] [--device N] [--backend cpu|cuda] [--trials N] [--holdout]\n"
    "       [--no-timing] [--deadline SECONDS] [--time-cap SECONDS] [--dump DIR]\n"
    "  bench [TASK|DIR...] [--candidates DIR] [--baselines FILE] [--json]\n"
    "       [eval options]               evaluate a suite (default: tasks/) and score it\n"
    "  run TASK [--budget N] [--time SECONDS] [--target F] [--gpus LIST] [--seed CAND]...\n"
    "      [--resume ID] [--replay ID] [--islands N] [--stagnation N] [--archive PATH] [--json]\n"
    "      [--model SPEC]... [--cost-cap X] [--llm-concurrency N] [--offline] [--prompts DIR]\n"
    "      [--prices FILE] [--config FILE]   (LLM operators: docs/llm.md)\n"
    "      [eval options]                evolve faster candidates (docs/search.md)\n"
    "  runs [ID] [--archive PATH] [--json]  the runs in the archive, or one run's report\n"
    "  export ID --out DIR [--archive PATH]  the run's best kernel as standalone files\n"
    "  calibrate [--device N] [--backend cpu|cuda] [--force] [--json]\n"
    "                                    measure bandwidth and peaks of this device\n"
    "  version                           print the version\n"
    "\n"
    "exit status: 0 completed, 1 kevo failed, 2 bad usage (docs/cli.md)\n";

int cli_usage(const char *why)
{
    if (why)
        fprintf(stderr, "kevo: %s\n\n", why);
    fputs(cli_usage_text, stderr);
    return EXIT_USAGE;
}

/* Parse a non-negative integer option value; -1 on error. */
long cli_parse_count(const char *s)
{
    char *end = NULL;
    long v;
    if (!s || !*s)
        return -1;
    v = strtol(s, &end, 10);
    if (*end || v < 0)
        return -1;
    return v;
}

double cli_parse_seconds(const char *s)
{
    char *end = NULL;
    double v;
    if (!s || !*s)
        return -1;
    v = strtod(s, &end);
    if (*end || !(v > 0))
        return -1;
    return v;
}

int cli_parse_backend(const char *s, enum kevo_backend_kind *out)
{
    if (s && strcmp(s, "cpu") == 0)
        *out = KEVO_BACKEND_CPU;
    else if (s && strcmp(s, "cuda") == 0)
        *out = KEVO_BACKEND_CUDA;
    else
        return -1;
    return 0;
}

double cli_num(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

const char *cli_str(json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : dflt;
}

void cli_fmt_time(char *out, size_t n, double s)
{
    if (s <= 0)
        snprintf(out, n, "-");
    else if (s < 1e-3)
        snprintf(out, n, "%.2f us", s * 1e6);
    else if (s < 1)
        snprintf(out, n, "%.3f ms", s * 1e3);
    else
        snprintf(out, n, "%.3f s", s);
}

/* One option shared by eval and bench at argv[*i]: 1 consumed (and *i advanced past its
 * value), 0 not an eval option, -1 bad usage (already reported). */
int cli_eval_option(int argc, char **argv, int *i, struct kevo_eval_opts *o)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;

    if (strcmp(a, "--holdout") == 0) {
        o->holdout = 1;
        return 1;
    }
    if (strcmp(a, "--no-timing") == 0) {
        o->no_timing = 1;
        return 1;
    }
    if (strcmp(a, "--device") == 0) {
        long d = cli_parse_count(v);
        if (d < 0 || d > 1024) {
            cli_usage("--device needs a device number");
            return -1;
        }
        o->device = (int)d;
    } else if (strcmp(a, "--trials") == 0) {
        long t = cli_parse_count(v);
        if (t < 3 || t > 100) {
            cli_usage("--trials needs a number from 3 to 100");
            return -1;
        }
        o->trials = (int)t;
    } else if (strcmp(a, "--backend") == 0) {
        if (cli_parse_backend(v, &o->backend)) {
            cli_usage("--backend is cpu or cuda");
            return -1;
        }
    } else if (strcmp(a, "--deadline") == 0 || strcmp(a, "--time-cap") == 0) {
        double sec = cli_parse_seconds(v);
        if (sec <= 0) {
            cli_usage("--deadline/--time-cap need a number of seconds");
            return -1;
        }
        if (a[2] == 'd')
            o->deadline_s = sec;
        else
            o->time_cap_s = sec;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

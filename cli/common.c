/*
 * common - what the command files of the kevo program share (cli.h): the usage text,
 * option values, the eval options every evaluating command takes, and reading the JSON
 * documents of the public API and the config file. Below kevo.c, run_cmd.c and models_cmd.c,
 * which use it.
 */
#include "kevo.h"
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char cli_usage_text[] =
    "usage: kevo COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  check TASK|DIR... [--task TASK]   parse and compile only (no GPU needed); with --task,\n"
    "                                    the files are candidates for TASK\n"
    "  eval TASK [CANDIDATE...]          verify and time the reference and the candidates\n"
    "       [--json] [--device N] [--backend cpu|cuda] [--trials N] [--holdout]\n"
    "       [--no-timing] [--deadline SECONDS] [--time-cap SECONDS] [--dump DIR]\n"
    "       [--profile]\n"
    "  bench [TASK|DIR...] [--candidates DIR] [--baselines FILE] [--json]\n"
    "       [eval options]               evaluate a suite (default: ./tasks, else the\n"
    "                                    installed one) and score it\n"
    "  run TASK [--budget N] [--time SECONDS] [--target F] [--gpus LIST] [--seed CAND]...\n"
    "      [--resume ID] [--replay ID] [--islands N] [--stagnation N] [--archive PATH] [--json]\n"
    "      [--model SPEC]... [--cost-cap X] [--llm-concurrency N] [--offline] [--prompts DIR]\n"
    "      [--prices FILE] [--config FILE]   (LLM operators: docs/llm.md)\n"
    "      [--mpi]                       under mpirun: across hosts (docs/cluster.md)\n"
    "      [eval options]                evolve faster candidates (docs/search.md)\n"
    "  runs [ID] [--candidates] [--archive PATH] [--json]\n"
    "                                    the runs in the archive, or one run's report\n"
    "                                    (with --candidates: every candidate's figures)\n"
    "  show CAND [--archive PATH] [--json]  one candidate: source, verdict, log, figures\n"
    "  export ID --out DIR [--archive PATH]  the run's best kernel as standalone files\n"
    "  report RUN [--archive PATH] [--baselines FILE] [--out FILE]\n"
    "                                    the run as one HTML page with plots (docs/report.md)\n"
    "  report --bench FILE [--out FILE]  a kevo bench --json document as an HTML page\n"
    "  models check [--model SPEC]... [--config FILE] [--prices FILE] [--json]\n"
    "                                    one tiny request per LLM model: does it work?\n"
    "  llm pending RUN [--archive PATH] [--out FILE]   the calls an offline run could not\n"
    "                                    make, as JSON lines (docs/llm.md, air-gapped)\n"
    "  llm answer FILE [--model SPEC]... [--config FILE] [--out FILE] [--cost-cap X]\n"
    "      [--prices FILE] [--llm-concurrency N]\n"
    "                                    make those calls where there is a network\n"
    "  llm import FILE [--archive PATH]  store the replies; kevo run --resume uses them\n"
    "  prompt TASK [CANDIDATE] [--op generate|improve|fix|plan] [--eval-json FILE]\n"
    "      [--calibration FILE] [--json]  the prompt kevo would send a model (docs/agents.md)\n"
    "  mcp [--archive PATH] [--allow DIR]... [--device N] [--model SPEC]...\n"
    "                                    serve coding agents over stdio (Model Context\n"
    "                                    Protocol; docs/agents.md)\n"
    "  calibrate [--device N] [--backend cpu|cuda] [--force] [--json]\n"
    "                                    measure bandwidth and peaks of this device\n"
    "  version                           print the version and the data directory\n"
    "  help [COMMAND]                    this list, or COMMAND's usage (kevo COMMAND --help)\n"
    "\n"
    "exit status: 0 completed, 1 kevo failed, 2 bad usage (docs/cli.md)\n";

int cli_usage(const char *why)
{
    if (why)
        fprintf(stderr, "kevo: %s\n\n", why);
    fputs(cli_usage_text, stderr);
    return EXIT_USAGE;
}

/* Says why the value s of option opt (NULL: none given) is refused, and the range; -1. */
static int refuse(const char *opt, const char *s, const char *what, const char *range)
{
    char why[512];

    if (!s)
        snprintf(why, sizeof why, "%s needs a value (allowed: %s)", opt, range);
    else
        snprintf(why, sizeof why, "%s %.80s: %s (allowed: %s)", opt, s, what, range);
    cli_usage(why);
    return -1;
}

/*
 * Every integer option goes through here, so that none wraps or is cut: the whole string
 * must be decimal digits after an optional '-' (no spaces, no '+', no "0x"), and the value
 * must fit int64_t and lie in [lo, hi]. 0 with *out set, or -1 after the usage message.
 */
int cli_parse_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char range[96], *end = NULL;
    const char *digits = s && *s == '-' ? s + 1 : s;
    long long v = 0;

    snprintf(range, sizeof range, "an integer from %lld to %lld", (long long)lo, (long long)hi);
    if (!s)
        return refuse(opt, s, "", range);
    errno = 0;
    if (*digits >= '0' && *digits <= '9')   /* strtoll would skip spaces and take a '+' */
        v = strtoll(s, &end, 10);
    if (!end || *end)
        return refuse(opt, s, "not an integer", range);
    if (errno == ERANGE || v < lo || v > hi)
        return refuse(opt, s, "out of range", range);
    *out = (int64_t)v;
    return 0;
}

/* The same for a real number: finite, above 0 and at most hi ("0.5", "2e3"). */
int cli_parse_real(const char *opt, const char *s, double hi, double *out)
{
    char range[96], *end = NULL;
    double v = 0;

    snprintf(range, sizeof range, "a number above 0, at most %.15g", hi);
    if (!s)
        return refuse(opt, s, "", range);
    errno = 0;
    if (*s && !isspace((unsigned char)*s))
        v = strtod(s, &end);
    if (!end || *end || isnan(v))
        return refuse(opt, s, "not a number", range);
    if (errno == ERANGE || !(v > 0) || !(v <= hi))   /* inf, overflow, underflow too */
        return refuse(opt, s, "out of range", range);
    *out = v;
    return 0;
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
        int64_t n;
        if (cli_parse_int(a, v, 0, CLI_MAX_DEVICE, &n))
            return -1;
        o->device = (int)n;
    } else if (strcmp(a, "--trials") == 0) {
        int64_t n;
        if (cli_parse_int(a, v, CLI_MIN_TRIALS, CLI_MAX_TRIALS, &n))
            return -1;
        o->trials = (int)n;
    } else if (strcmp(a, "--backend") == 0) {
        if (cli_parse_backend(v, &o->backend)) {
            cli_usage("--backend is cpu or cuda");
            return -1;
        }
    } else if (strcmp(a, "--deadline") == 0 || strcmp(a, "--time-cap") == 0) {
        double *sec = strcmp(a, "--deadline") == 0 ? &o->deadline_s : &o->time_cap_s;
        if (cli_parse_real(a, v, CLI_MAX_SECONDS, sec))
            return -1;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

/*
 * models[i] of a config file written as an object, {"spec": "openai:o3", "max_output":
 * 64000, "reasoning_effort": "high", "extra": {"top_p": 0.9}}: the same model as a spec
 * string whose "?" settings are the other members (docs/llm.md "Model settings"), each
 * value %-escaped where the spec's syntax needs it, put in its place in the array (the
 * library checks the settings). Returns 0, or -1 after saying why.
 */
static int config_model_spec(const char *path, json_t *models, size_t i)
{
    json_t *obj = json_array_get(models, i), *val;
    const char *spec = json_string_value(json_object_get(obj, "spec")), *key;
    char *text = NULL, sep;
    size_t n = 0;
    FILE *f;

    if (!spec) {
        fprintf(stderr, "kevo: %s: models[%zu]: a model object needs \"spec\"\n", path, i);
        return -1;
    }
    f = open_memstream(&text, &n);
    if (!f)
        return -1;
    fputs(spec, f);
    sep = strchr(spec, '?') ? '&' : '?';
    json_object_foreach(obj, key, val) {
        char *v = json_is_string(val) ? strdup(json_string_value(val))
                  : json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
        if (strcmp(key, "spec") == 0 || !v) {
            free(v);
            continue;
        }
        fprintf(f, "%c%s=", sep, key);
        sep = '&';
        for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
            if (*p == '%' || *p == '&' || *p <= 0x20 || *p >= 0x7f)
                fprintf(f, "%%%02X", *p);
            else
                fputc(*p, f);
        }
        free(v);
    }
    fclose(f);
    json_array_set_new(models, i, json_string(text ? text : spec));
    free(text);
    return 0;
}

/* The config file's numbers hold what their options may (--llm-concurrency, --cost-cap):
 * 0, or -1 after naming the file, the key, the value and the range. */
static int config_ranges(const char *path, json_t *c)
{
    json_t *n = json_object_get(c, "llm_concurrency"), *cap = json_object_get(c, "cost_cap");
    json_int_t k = json_integer_value(n);
    double x = json_number_value(cap);

    /* 0 is "not set" in either, as in struct kevo_run_opts */
    if (n && (!json_is_integer(n) || k < 0 || k > CLI_MAX_LLM_CONCURRENCY)) {
        fprintf(stderr, "kevo: %s: llm_concurrency: not an integer from 0 (the default) to "
                "%d\n", path, CLI_MAX_LLM_CONCURRENCY);
        return -1;
    }
    if (cap && (!json_is_number(cap) || !(x >= 0) || !(x <= CLI_MAX_AMOUNT))) {
        fprintf(stderr, "kevo: %s: cost_cap: not a number from 0 (none) to %.15g\n", path,
                CLI_MAX_AMOUNT);
        return -1;
    }
    return 0;
}

/*
 * The config file of run and models check ($KEVO_CONFIG, else ~/.config/kevo/config.json
 * when it exists, or --config FILE): {"models": ["openai:gpt-5", {"spec": "openai:o3",
 * "max_output": 64000}, ...], "llm_concurrency": 4, "cost_cap": 5.0,
 * "prices": "path", "prompts": "dir", "archive": "path"}. Command-line options win; the
 * strings stay in *keep (decref it after the run); models has room for 64. Returns 0, or
 * -1 after saying why.
 */
int cli_load_config(const char *path, struct kevo_run_opts *o, const char **models,
                    json_t **keep)
{
    char def[4096];
    const char *home = getenv("HOME"), *env = getenv("KEVO_CONFIG");
    json_error_t e;

    *keep = NULL;
    if (!path && env && *env)
        path = env;
    if (!path && home) {
        snprintf(def, sizeof def, "%s/.config/kevo/config.json", home);
        if (access(def, F_OK) != 0)
            return 0;
        path = def;
    }
    if (!path)
        return 0;
    json_t *c = json_load_file(path, 0, &e);
    if (!c || !json_is_object(c)) {
        fprintf(stderr, "kevo: %s:%d: %s\n", path, e.line, c ? "not a JSON object" : e.text);
        json_decref(c);
        return -1;
    }
    json_t *m = json_object_get(c, "models"), *v;
    size_t i;
    if (!o->n_models && json_is_array(m))
        json_array_foreach(m, i, v) {
            if (json_is_object(v) && config_model_spec(path, m, i) < 0) {
                json_decref(c);
                return -1;
            }
            v = json_array_get(m, i);
            if (json_is_string(v) && o->n_models < 64)
                models[o->n_models++] = json_string_value(v);
        }
    if (config_ranges(path, c) < 0) {
        json_decref(c);
        return -1;
    }
    if (!o->llm_concurrency && json_is_integer(json_object_get(c, "llm_concurrency")))
        o->llm_concurrency = (int)json_integer_value(json_object_get(c, "llm_concurrency"));
    if (!o->cost_cap && json_is_number(json_object_get(c, "cost_cap")))
        o->cost_cap = json_number_value(json_object_get(c, "cost_cap"));
    if (!o->prices)
        o->prices = json_string_value(json_object_get(c, "prices"));
    if (!o->prompts_dir)
        o->prompts_dir = json_string_value(json_object_get(c, "prompts"));
    if (!o->archive)
        o->archive = json_string_value(json_object_get(c, "archive"));
    *keep = c;
    return 0;
}

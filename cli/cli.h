/*
 * cli - what the command files of the kevo program share (cli/common.c), between
 * cli/kevo.c (the dispatcher, check, eval, bench, calibrate), cli/run_cmd.c (run,
 * runs, export), cli/models_cmd.c (models check), cli/llm_cmd.c (llm pending, answer,
 * import), cli/show_cmd.c (show, the candidates of a run) and cli/help.c (each command's
 * usage). Exit statuses as
 * docs/cli.md says: 0 completed, 1 kevo failed, 2 bad usage.
 */
#ifndef KEVO_CLI_H
#define KEVO_CLI_H

#include "kevo.h"
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define EXIT_FAILED 1
#define EXIT_USAGE 2

/* The ranges of the options' values (docs/cli.md "Option values"). */
#define CLI_MAX_DEVICE 1024                        /* --device, --gpus: 0 to this */
#define CLI_MAX_GPUS 64                            /* devices in --gpus */
#define CLI_MIN_TRIALS 3                           /* --trials */
#define CLI_MAX_TRIALS 100
#define CLI_MAX_EVALS 1000000000                   /* --budget, --stagnation: 1 to this */
#define CLI_MAX_ISLANDS 16                         /* --islands (KEVO_MAX_ISLANDS of search) */
#define CLI_MAX_LLM_CONCURRENCY 32                 /* --llm-concurrency */
#define CLI_MAX_SECONDS 1e9                        /* --time, --deadline, --time-cap */
#define CLI_MAX_AMOUNT 1e9                         /* --cost-cap */

extern const char cli_usage_text[];               /* the whole usage, for help */
int cli_usage(const char *why);                    /* prints usage; returns EXIT_USAGE */
/* Option opt's value s: an integer in [lo, hi] (the whole string, no overflow), or a
 * finite number in (0, hi]. 0 with *out set, or -1 after a usage message naming the
 * option, the value and the range (s NULL: no value given). */
int cli_parse_int(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_real(const char *opt, const char *s, double hi, double *out);
int cli_parse_backend(const char *s, enum kevo_backend_kind *out);   /* 0, or -1 */
double cli_num(json_t *o, const char *key);
const char *cli_str(json_t *o, const char *key, const char *dflt);
void cli_fmt_time(char *out, size_t n, double s);  /* "1.234 ms" */
/* An option shared with eval at argv[*i]: 1 consumed, 0 not one, -1 bad usage. */
int cli_eval_option(int argc, char **argv, int *i, struct kevo_eval_opts *o);
/* The config file into o where the command line left a value unset (models: room for 64
 * specs); *keep holds its strings (json_decref it after use). 0, or -1 after saying why. */
int cli_load_config(const char *path, struct kevo_run_opts *o, const char **models,
                    json_t **keep);

/* cli/run_cmd.c */
int cli_cmd_run(int argc, char **argv);
int cli_cmd_runs(int argc, char **argv);
int cli_cmd_export(int argc, char **argv);

/* cli/models_cmd.c */
int cli_cmd_models(int argc, char **argv);

/* cli/llm_cmd.c: pending, answer, import (docs/llm.md "Air-gapped clusters") */
int cli_cmd_llm(int argc, char **argv);

/* cli/mcp_cmd.c: agent mode (docs/agents.md) */
int cli_cmd_mcp(int argc, char **argv);
int cli_cmd_prompt(int argc, char **argv);

/* cli/help.c: cmd's usage on stdout, 0; -1 for a command it does not know. */
int cli_help(const char *cmd);
int cli_wants_help(int argc, char **argv);         /* is --help or -h among the args? */

/* cli/show_cmd.c: `kevo show`, and what run_cmd.c prints of candidates */
int cli_cmd_show(int argc, char **argv);
void cli_print_cands(json_t *doc);                 /* kevo_runs_cands_json's document */
void cli_print_best(json_t *best);                 /* a report's "best" (geomeans, workloads) */

/* cli/report_cmd.c: `kevo report RUN`, `kevo report --bench FILE` (docs/report.md) */
int cli_cmd_report(int argc, char **argv);

/* cli/profile_print.c: a result's "profile" (hardware counters), each line after indent */
void cli_print_profile(json_t *profile, const char *indent);

#endif

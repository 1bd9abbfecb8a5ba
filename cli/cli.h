/*
 * cli - what the command files of the kevo program share (cli/common.c), between
 * cli/kevo.c (the dispatcher, check, eval, bench, calibrate), cli/run_cmd.c (run,
 * runs, export), cli/models_cmd.c (models check) and cli/llm_cmd.c (llm pending, answer,
 * import). Exit statuses as
 * docs/cli.md says: 0 completed, 1 kevo failed, 2 bad usage.
 */
#ifndef KEVO_CLI_H
#define KEVO_CLI_H

#include "kevo.h"
#include <jansson.h>
#include <stddef.h>

#define EXIT_FAILED 1
#define EXIT_USAGE 2

extern const char cli_usage_text[];               /* the whole usage, for help */
int cli_usage(const char *why);                    /* prints usage; returns EXIT_USAGE */
long cli_parse_count(const char *s);               /* a count >= 0, else -1 */
double cli_parse_seconds(const char *s);           /* > 0, else -1 */
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

#endif

/*
 * cli - what the command files of the kevo program share (cli/common.c), between
 * cli/kevo.c (the dispatcher, check, eval, bench, calibrate) and cli/run_cmd.c (run,
 * runs, export). Exit statuses as
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

/* cli/run_cmd.c */
int cli_cmd_run(int argc, char **argv);
int cli_cmd_runs(int argc, char **argv);
int cli_cmd_export(int argc, char **argv);

#endif

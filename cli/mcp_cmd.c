/*
 * mcp_cmd - agent mode (docs/agents.md): `kevo mcp`, the Model Context Protocol server a
 * coding agent starts over stdio, and `kevo prompt`, the prompt kevo would send a model,
 * for any chat UI or agent. The server is kevo_mcp_serve in the library; this file keeps
 * its stdout for protocol messages alone and stops it cleanly on SIGTERM, SIGINT or SIGHUP.
 */
#include "cli.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* SIGTERM, SIGINT, SIGHUP end the session at the next tick (the server's poll is
 * interrupted: no SA_RESTART): background runs are stopped, the agent's runs recorded. */
static void catch_stop(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

/*
 * The protocol's descriptors moved off 0 and 1 (close-on-exec, so no worker or child
 * inherits them); then fd 1 is stderr and fd 0 /dev/null, so nothing this process or a
 * child prints or reads can reach the protocol. 0, or -1 after saying why.
 */
static int protocol_fds(int *in, int *out)
{
    int null_fd;

    *in = fcntl(0, F_DUPFD_CLOEXEC, 3);
    *out = fcntl(1, F_DUPFD_CLOEXEC, 3);
    null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    fflush(stdout);
    if (*in < 0 || *out < 0 || null_fd < 0 || dup2(2, 1) < 0 || dup2(null_fd, 0) < 0) {
        perror("kevo mcp: setting up stdio");
        return -1;
    }
    close(null_fd);
    return 0;
}

int cli_cmd_mcp(int argc, char **argv)
{
    struct kevo_mcp_opts o;
    const char **allow = calloc((size_t)argc + 1, sizeof *allow);
    const char **models = calloc((size_t)argc + 1, sizeof *models);
    char *msg = NULL;
    int in, out, rc = 0;

    kevo_mcp_opts_default(&o);
    if (!allow || !models) {
        free(allow);
        free(models);
        return EXIT_FAILED;
    }
    o.allow = allow;
    o.models = models;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t d;
        if (!strcmp(a, "--archive") || !strcmp(a, "--allow") || !strcmp(a, "--model")) {
            if (!v) {
                rc = cli_usage("--archive, --allow and --model need a value");
                goto out;
            }
            if (a[2] == 'a' && a[3] == 'r')
                o.archive = v;
            else if (a[2] == 'a')
                allow[o.n_allow++] = v;
            else
                models[o.n_models++] = v;
            i++;
        } else if (!strcmp(a, "--device")) {
            if (cli_parse_int("--device", v, 0, CLI_MAX_DEVICE, &d)) {
                rc = EXIT_USAGE;
                goto out;
            }
            o.device = (int)d;
            i++;
        } else {
            fprintf(stderr, "kevo: unknown argument '%s' for mcp\n", a);
            rc = cli_usage(NULL);
            goto out;
        }
    }
    if (protocol_fds(&in, &out)) {
        rc = EXIT_FAILED;
        goto out;
    }
    catch_stop();
    enum kevo_status st = kevo_mcp_serve(in, out, &o, &stop_flag, &msg);
    if (st) {
        fprintf(stderr, "kevo mcp: %s\n", msg ? msg : kevo_status_name(st));
        rc = EXIT_FAILED;
    }
out:
    kevo_free(msg);
    free(allow);
    free(models);
    return rc;
}

/* ---- kevo prompt ---- */

static int prompt_option(int argc, char **argv, int *i, struct kevo_prompt_opts *o, int *json)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    int64_t d;

    if (!strcmp(a, "--json")) {
        *json = 1;
        return 1;
    }
    if (!strcmp(a, "--device")) {
        if (cli_parse_int("--device", v, 0, CLI_MAX_DEVICE, &d))
            return -1;
        o->device = (int)d;
    } else if (!strcmp(a, "--op") || !strcmp(a, "--eval-json") || !strcmp(a, "--calibration")) {
        if (!v) {
            cli_usage("--op, --eval-json and --calibration need a value");
            return -1;
        }
        *(a[2] == 'o' ? &o->op : a[2] == 'e' ? &o->eval_json : &o->calibration) = v;
    } else {
        return 0;
    }
    (*i)++;
    return 1;
}

int cli_cmd_prompt(int argc, char **argv)
{
    struct kevo_prompt_opts o;
    const char *task = NULL, *cand = NULL;
    char *out = NULL, *msg = NULL;
    int json = 0;

    kevo_prompt_opts_default(&o);
    for (int i = 0; i < argc; i++) {
        int r = prompt_option(argc, argv, &i, &o, &json);
        if (r < 0)
            return EXIT_USAGE;
        if (r)
            continue;
        if (argv[i][0] == '-' || (task && cand)) {
            fprintf(stderr, "kevo: unexpected argument '%s' for prompt\n", argv[i]);
            return cli_usage(NULL);
        }
        *(task ? &cand : &task) = argv[i];
    }
    if (!task)
        return cli_usage("prompt needs a task file");
    if (o.op && strcmp(o.op, "generate") && strcmp(o.op, "improve") && strcmp(o.op, "fix") &&
        strcmp(o.op, "plan"))
        return cli_usage("--op is generate, improve, fix or plan");
    if (o.op && strcmp(o.op, "generate") && !cand)
        return cli_usage("--op improve, fix and plan need a CANDIDATE");
    enum kevo_status st = kevo_prompt_json(task, cand, &o, &out, &msg);
    if (st) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        kevo_free(msg);
        return EXIT_FAILED;
    }
    json_t *doc = json_loads(out, 0, NULL);
    if (json) {
        printf("%s\n", out);
    } else {
        printf("=== system (prompts/system.md) ===\n%s\n=== user (prompts/%s.md) ===\n%s\n",
               cli_str(doc, "system", ""), cli_str(doc, "template", "?"), cli_str(doc, "user", ""));
    }
    if (!strncmp(cli_str(doc, "device", ""), "unknown", 7))
        fprintf(stderr, "kevo: the device's figures are %s (--calibration FILE gives them)\n",
                cli_str(doc, "device", ""));
    json_decref(doc);
    kevo_free(out);
    return 0;
}

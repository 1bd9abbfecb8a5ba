/*
 * models_cmd - `kevo models check` (docs/cli.md, docs/llm.md "Checking models"): one tiny
 * request per model named by --model, else by the config file's "models" (the ones
 * `kevo run` would use); one line per model, and exit status 0 only when every model
 * passed (1 when one failed, 2 bad usage).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "ok   openai:gpt-5  1.8 s  price known" or "FAIL spec  diagnosis". */
static void print_model(json_t *m)
{
    const char *spec = cli_str(m, "model", "?");

    if (!json_is_true(json_object_get(m, "ok"))) {
        printf("FAIL %s  %s\n", spec, cli_str(m, "diagnosis", "?"));
        return;
    }
    printf("ok   %s  %.1f s  %s", spec, cli_num(m, "latency_s"),
           json_is_true(json_object_get(m, "price_known")) ? "price known"
                                                           : "no price in the price table");
    if (json_object_get(m, "adapted"))
        printf("  (adapted: %s)", cli_str(m, "adapted", ""));
    if (json_object_get(m, "note"))
        printf("  (%s)", cli_str(m, "note", ""));
    printf("\n");
}

static int print_doc(const char *text, int as_json)
{
    json_t *doc = json_loads(text, 0, NULL), *m;
    size_t i, n_bad = 0;
    int ok = json_is_true(json_object_get(doc, "ok"));

    if (as_json) {
        printf("%s\n", text);
    } else {
        json_array_foreach(json_object_get(doc, "models"), i, m) {
            print_model(m);
            n_bad += !json_is_true(json_object_get(m, "ok"));
        }
        printf("%zu model(s) checked, %zu failed\n",
               json_array_size(json_object_get(doc, "models")), n_bad);
    }
    json_decref(doc);
    return ok ? 0 : EXIT_FAILED;
}

/* `kevo models check [--model SPEC]... [--config FILE] [--prices FILE] [--json]` */
static int cmd_check(int argc, char **argv)
{
    struct kevo_run_opts o;
    const char **models = calloc((size_t)argc + 65, sizeof *models), *config = NULL;
    char *json = NULL, *msg = NULL;
    json_t *cfg = NULL;
    int as_json = 0, rc = 0;

    if (!models)
        return EXIT_FAILED;
    kevo_run_opts_default(&o);
    o.models = models;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            as_json = 1;
        } else if (v && strcmp(a, "--model") == 0) {
            models[o.n_models++] = argv[++i];
        } else if (v && strcmp(a, "--config") == 0) {
            config = argv[++i];
        } else if (v && strcmp(a, "--prices") == 0) {
            o.prices = argv[++i];
        } else {
            fprintf(stderr, "kevo: unexpected '%s'\n", a);
            rc = cli_usage(NULL);
            goto out;
        }
    }
    if (cli_load_config(config, &o, models, &cfg) < 0) {
        rc = EXIT_USAGE;
        goto out;
    }
    if (!o.n_models) {
        rc = cli_usage("models check needs a model: --model SPEC, or \"models\" in the config "
                       "file");
        goto out;
    }
    enum kevo_status st = kevo_models_check_json(o.models, o.n_models, o.prices, &json, &msg);
    if (st) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        rc = EXIT_FAILED;
    } else {
        rc = print_doc(json, as_json);
    }
out:
    json_decref(cfg);
    kevo_free(json);
    kevo_free(msg);
    free(models);
    return rc;
}

int cli_cmd_models(int argc, char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "check") == 0)
        return cmd_check(argc - 1, argv + 1);
    return cli_usage("models takes a subcommand: kevo models check [--model SPEC]...");
}

/*
 * report_cmd - `kevo report RUN` and `kevo report --bench FILE` (docs/report.md): a run of
 * the archive, or a bench document, as one self-contained HTML page, written to --out FILE
 * (through a temporary file renamed into place, so a reader never sees half a page) or to
 * stdout.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPORT_USAGE "report takes a run id [--archive PATH] [--baselines FILE] [--out FILE], " \
                     "or --bench FILE [--out FILE]"

/* html into path (via path.tmp), or stdout for NULL; 0, or 1 after saying why. */
static int write_out(const char *path, const char *html)
{
    size_t len = strlen(html);
    char tmp[4096];
    FILE *f;
    int ok;

    if (!path)
        return fwrite(html, 1, len, stdout) == len ? 0 : EXIT_FAILED;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "kevo: %s: path too long\n", path);
        return EXIT_FAILED;
    }
    f = fopen(tmp, "w");
    if (!f) {
        perror(tmp);
        return EXIT_FAILED;
    }
    ok = fwrite(html, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        perror(ok ? path : tmp);
        unlink(tmp);
        return EXIT_FAILED;
    }
    fprintf(stderr, "kevo: wrote %s (%zu KiB)\n", path, (len + 1023) / 1024);
    return 0;
}

int cli_cmd_report(int argc, char **argv)
{
    const char *archive = NULL, *out = NULL, *bench = NULL, *baselines = NULL;
    int64_t id = 0;
    char *html = NULL, *msg = NULL;
    enum kevo_status st;
    int rc;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--archive") == 0 && i + 1 < argc)
            archive = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--bench") == 0 && i + 1 < argc)
            bench = argv[++i];
        else if (strcmp(argv[i], "--baselines") == 0 && i + 1 < argc)
            baselines = argv[++i];
        else if (id || argv[i][0] == '-')
            return cli_usage(REPORT_USAGE);
        else if (cli_parse_int("run id", argv[i], 1, INT64_MAX, &id))
            return EXIT_USAGE;
    }
    if (!id == !bench || (bench && (archive || baselines)))
        return cli_usage(REPORT_USAGE);
    st = bench ? kevo_report_bench_html(bench, &html, &msg)
               : kevo_report_html(archive, id, baselines, &html, &msg);
    if (st) {
        fprintf(stderr, "kevo: %s\n", msg ? msg : kevo_status_name(st));
        rc = EXIT_FAILED;
    } else {
        rc = write_out(out, html);
    }
    kevo_free(html);
    kevo_free(msg);
    return rc;
}

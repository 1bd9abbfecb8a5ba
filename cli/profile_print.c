/*
 * profile_print - a candidate's hardware counters (the "profile" of docs/eval-json.md) as
 * `kevo eval --profile` and `kevo show` print them: the diagnosis line with what was
 * profiled and what it cost, then one compact row of counters per kernel and its largest
 * warp stall reasons.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

/* A figure of k into out, "-" when the profile does not have it. */
static const char *cell(char *out, size_t n, json_t *k, const char *key, const char *fmt)
{
    json_t *v = json_object_get(k, key);

    if (!json_is_number(v))
        snprintf(out, n, "-");
    else
        snprintf(out, n, fmt, json_number_value(v));
    return out;
}

/* "65536,1,1" of a [x, y, z] array. */
static const char *dim3(char *out, size_t n, json_t *a)
{
    snprintf(out, n, "%lld,%lld,%lld", (long long)json_integer_value(json_array_get(a, 0)),
             (long long)json_integer_value(json_array_get(a, 1)),
             (long long)json_integer_value(json_array_get(a, 2)));
    return out;
}

/* The first line: tool, workload, launches, cost, diagnosis. */
static void print_head(json_t *p, const char *indent)
{
    json_t *w = json_object_get(p, "workload"), *v;
    const char *k;
    int first = 1;

    printf("%sprofile (%s", indent, cli_str(p, "tool", "?"));
    if (json_is_object(w)) {
        printf(", workload %lld [", (long long)json_integer_value(json_object_get(w, "index")));
        json_object_foreach(json_object_get(w, "sizes"), k, v) {
            printf("%s%s=%lld", first ? "" : " ", k, (long long)json_integer_value(v));
            first = 0;
        }
        printf("]");
    }
    if (json_is_integer(json_object_get(p, "launch_count")))
        printf(", %lld launches counted",
               (long long)json_integer_value(json_object_get(p, "launch_count")));
    printf(", %.1f s): %s\n", cli_num(p, "cost_s"), cli_str(p, "diagnosis", "?"));
}

static void print_kernel(json_t *k, const char *indent)
{
    char g[40], b[40], t[32], c[8][24];
    json_t *s;
    size_t i;

    cli_fmt_time(t, sizeof t, cli_num(k, "time_us") * 1e-6);
    printf("%s  %-20s %-14s %-10s %11s %7s %6s %6s %6s %6s %7s %6s %9s\n", indent,
           cli_str(k, "name", "?"), dim3(g, sizeof g, json_object_get(k, "grid")),
           dim3(b, sizeof b, json_object_get(k, "block")),
           json_is_number(json_object_get(k, "time_us")) ? t : "-",
           cell(c[0], sizeof c[0], k, "dram_gbps", "%.0f"),
           cell(c[1], sizeof c[1], k, "dram_pct_of_peak", "%.1f"),
           cell(c[2], sizeof c[2], k, "l2_hit_pct", "%.1f"),
           cell(c[3], sizeof c[3], k, "l1_hit_pct", "%.1f"),
           cell(c[4], sizeof c[4], k, "sm_pct", "%.1f"),
           cell(c[5], sizeof c[5], k, "tensor_pct", "%.1f"),
           cell(c[6], sizeof c[6], k, "achieved_occupancy_pct", "%.1f"),
           cell(c[7], sizeof c[7], k, "spill_bytes", "%.0f"));
    json_array_foreach(json_object_get(k, "stalls"), i, s)
        printf("%s%s %.2f", i ? ", " : "      warp stalls per issue: ",
               cli_str(s, "reason", "?"), cli_num(s, "per_issue"));
    if (json_array_size(json_object_get(k, "stalls")))
        printf("\n");
}

void cli_print_profile(json_t *p, const char *indent)
{
    json_t *k;
    size_t i;

    if (!json_is_object(p))
        return;
    if (json_object_get(p, "error")) {
        printf("%sprofile (%s) failed after %.1f s: %s\n", indent, cli_str(p, "tool", "?"),
               cli_num(p, "cost_s"), cli_str(p, "error", "?"));
        return;
    }
    print_head(p, indent);
    if (!json_array_size(json_object_get(p, "kernels")))
        return;
    printf("%s  %-20s %-14s %-10s %11s %7s %6s %6s %6s %6s %7s %6s %9s\n", indent, "kernel",
           "grid", "block", "time", "DRAM", "DRAM", "L2", "L1", "SM", "tensor", "occup",
           "spill");
    printf("%s  %-20s %-14s %-10s %11s %7s %6s %6s %6s %6s %7s %6s %9s\n", indent, "", "", "",
           "(median)", "GB/s", "%peak", "hit%", "hit%", "%peak", "%activ", "%", "bytes");
    json_array_foreach(json_object_get(p, "kernels"), i, k)
        print_kernel(k, indent);
    if (json_is_string(json_object_get(p, "note")))
        printf("%s  note: %s\n", indent, cli_str(p, "note", ""));
}

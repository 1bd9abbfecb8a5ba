/*
 * test_profile - hardware counters (src/ctl/profile.c) without a GPU: the CSV that ncu
 * 2025.3.1 wrote on an H100 for three kernels (tests/fixtures/profile/) parses into the
 * profile object of docs/eval-json.md with the fixture's own medians; the diagnosis
 * names the bound; malformed CSV is refused naming its line, never a crash; the
 * collector runs a fake ncu (KEVO_NCU, a shell script that writes a fixture to its
 * --log-file) with the command line it should, kills it at the deadline and reports its
 * failures; the worker's CUPTI counters become the same object and spare ncu;
 * {{profile}} shows a parent's counters in prompts and nothing without them;
 * `kevo show` prints a stored profile.
 */
#include "testutil.h"

#include "base/fsutil.h"
#include "base/mem.h"
#include "ctl/archive.h"
#include "ctl/profile.h"
#include "ctl/prompt.h"
#include "core/counters.h"
#include "core/task.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FIX KEVO_SOURCE_DIR "/tests/fixtures/profile/"
#define VADD_TASK KEVO_SOURCE_DIR "/tasks/level1/vector_add.cu"
#define VADD_CAND KEVO_SOURCE_DIR "/tests/exploits/cuda/control_vector_add.cu"

static char scratch[256];

static int setup(void **state)
{
    (void)state;
    test_scratch(scratch, sizeof scratch, "profile");
    return scratch[0] ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return test_scratch_remove(scratch);
}

static char *read_text(const char *path)
{
    char *t = NULL, *msg = NULL;
    size_t n;

    if (kevo_fs_read_file(path, 1 << 24, &t, &n, &msg) != KEVO_OK)
        fail_msg("%s", msg ? msg : path);
    return t;
}

/* The fixture file's profile (fails the test when it does not parse). */
static json_t *parse_fixture(const char *name)
{
    char path[512], *text, *msg = NULL;
    json_t *p = NULL;

    snprintf(path, sizeof path, FIX "ncu-%s.csv", name);
    text = read_text(path);
    if (kevo_profile_parse_ncu(text, &p, &msg) != KEVO_OK)
        fail_msg("%s: %s", path, msg ? msg : "?");
    assert_null(msg);
    kevo_free(text);
    return p;
}

/* The median over the fixture's rows of metric (thousands separators dropped), read here
 * independently of the parser: the mean of the two launches' values. */
static double fixture_median(const char *name, const char *metric)
{
    char path[512], *text, *p;
    double v[8];
    int n = 0;

    snprintf(path, sizeof path, FIX "ncu-%s.csv", name);
    text = read_text(path);
    for (p = strstr(text, metric); p && n < 8; p = strstr(p + 1, metric)) {
        char *nl = strchr(p, '\n'), *q = nl ? nl : p + strlen(p), num[64];
        size_t k = 0;
        while (q > p && strncmp(q, "\",\"", 3))   /* the last field: after the last "," */
            q--;
        for (q += 3; *q && *q != '\n' && k + 1 < sizeof num; q++)
            if (*q != '"' && *q != ',')
                num[k++] = *q;
        num[k] = '\0';
        v[n++] = strtod(num, NULL);
    }
    kevo_free(text);
    assert_int_equal(n, 2);
    return (v[0] + v[1]) / 2;
}

static double num(const json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_number(v))
        fail_msg("no number \"%s\"", k);
    return json_number_value(v);
}

static void assert_near(double got, double want, double rel)
{
    if (!(fabs(got - want) <= rel * fabs(want)))
        fail_msg("%g is not within %g%% of %g", got, rel * 100, want);
}

static void assert_dims(json_t *a, long long x, long long y, long long z)
{
    assert_int_equal(json_array_size(a), 3);
    assert_int_equal(json_integer_value(json_array_get(a, 0)), x);
    assert_int_equal(json_integer_value(json_array_get(a, 1)), y);
    assert_int_equal(json_integer_value(json_array_get(a, 2)), z);
}

/* stalls: at most 4, largest first, reasons without the metric's prefix and suffix */
static void assert_stalls(json_t *k, const char *first)
{
    json_t *s = json_object_get(k, "stalls");
    double prev = INFINITY;

    assert_true(json_array_size(s) >= 1 && json_array_size(s) <= KEVO_PROFILE_MAX_STALLS);
    assert_string_equal(json_string_value(json_object_get(json_array_get(s, 0), "reason")),
                        first);
    for (size_t i = 0; i < json_array_size(s); i++) {
        double v = num(json_array_get(s, i), "per_issue");
        const char *r = json_string_value(json_object_get(json_array_get(s, i), "reason"));
        assert_true(v > 0 && v <= prev);
        assert_null(strstr(r, "stalled"));
        assert_null(strstr(r, "per_issue"));
        prev = v;
    }
}

/* ---- parsing the fixtures ---- */

static void check_fixture(const char *name, long long gx, long long gy, long long bx,
                          double hmma, const char *top_stall)
{
    json_t *p = parse_fixture(name), *ks = json_object_get(p, "kernels"), *k;

    assert_string_equal(json_string_value(json_object_get(p, "tool")), "ncu");
    assert_int_equal(json_array_size(ks), 1);
    k = json_array_get(ks, 0);
    assert_string_equal(json_string_value(json_object_get(k, "name")), name);
    assert_dims(json_object_get(k, "grid"), gx, gy, 1);
    assert_dims(json_object_get(k, "block"), bx, 1, 1);
    assert_int_equal(json_integer_value(json_object_get(k, "launches")), 2);
    assert_near(num(k, "time_us"), fixture_median(name, "gpu__time_duration.sum") / 1e3, 0.01);
    assert_near(num(k, "dram_pct_of_peak"),
                fixture_median(name, "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                1e-9);
    double bytes = fixture_median(name, "dram__bytes_read.sum") +
                   fixture_median(name, "dram__bytes_write.sum");
    assert_near(num(k, "dram_gbps"), bytes / (num(k, "time_us") * 1e3), 0.01);
    assert_near(num(k, "sm_pct"),
                fixture_median(name, "sm__throughput.avg.pct_of_peak_sustained_elapsed"), 1e-9);
    assert_near(num(k, "l2_hit_pct"), fixture_median(name, "lts__t_sector_hit_rate.pct"), 1e-9);
    assert_near(num(k, "achieved_occupancy_pct"),
                fixture_median(name, "sm__warps_active.avg.pct_of_peak_sustained_active"), 1e-9);
    assert_true(json_is_number(json_object_get(k, "l1_hit_pct")));
    /* gmma is n/a in every fixture: tensor_pct is hmma's */
    assert_true(fabs(num(k, "tensor_pct") - hmma) < 1e-9);
    assert_int_equal(json_integer_value(json_object_get(k, "spill_bytes")), 0);
    assert_stalls(k, top_stall);
    json_decref(p);
}

static void test_parse_fixtures(void **state)
{
    (void)state;
    check_fixture("vadd_vec4", 65536, 1, 256, 0, "long_scoreboard");
    check_fixture("sgemm_tiled", 64, 64, 128, 0.83, "not_selected");
    check_fixture("softmax_fast", 4096, 1, 256, 0.06, "long_scoreboard");
}

/* ---- parsing what else ncu may write ---- */

#define HDR "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\"," \
            "\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\","      \
            "\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
#define ROW(id, name, grid, metric, unit, value)                                             \
    "\"" id "\",\"7\",\"kevo\",\"h\",\"" name "\",\"1\",\"13\",\"(128, 1, 1)\",\"" grid       \
    "\",\"0\",\"9.0\",\"s\",\"" metric "\",\"" unit "\",\"" value "\"\n"

static json_t *parse_ok(const char *text)
{
    json_t *p = NULL;
    char *msg = NULL;

    if (kevo_profile_parse_ncu(text, &p, &msg) != KEVO_OK)
        fail_msg("%s", msg ? msg : "?");
    return p;
}

static void test_parse_forms(void **state)
{
    (void)state;
    /* ncu's own lines before the header and among the rows; CRLF; other units; a third
     * launch (median of 3); another grid (another entry); gmma over hmma; "" in a name */
    const char *t =
        "==PROF== Connected to process 7 (/usr/bin/kevo)\n"
        "some preamble, with a comma\n" HDR
        ROW("0", "k", "(4, 1, 1)", "gpu__time_duration.sum", "usecond", "1.5")
        "==PROF== Profiling \"k\" - 0: 0%....50%....100% - 38 passes\r\n"
        ROW("0", "k", "(4, 1, 1)", "dram__bytes_read.sum", "Mbyte", "3")
        ROW("0", "k", "(4, 1, 1)", "dram__bytes_write.sum", "Kbyte", "1,000")
        ROW("0", "k", "(4, 1, 1)", "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "%", "40")
        ROW("0", "k", "(4, 1, 1)", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "%", "2")
        ROW("0", "k", "(4, 1, 1)", "sm__cycles_elapsed.avg.per_second", "cycle/nsecond", "1.98")
        ROW("1", "k", "(4, 1, 1)", "gpu__time_duration.sum", "ns", "1,000")
        ROW("2", "k", "(4, 1, 1)", "gpu__time_duration.sum", "msecond", "0.002")
        ROW("3", "k", "(8, 2, 1)", "gpu__time_duration.sum", "ns", "800")
        ROW("3", "k", "(8, 2, 1)", "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "", "n/a")
        ROW("3", "k", "(8, 2, 1)", "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "", "n/a")
        ROW("3", "k", "(8, 2, 1)", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", "byte", "4,096")
        ROW("3", "k", "(8, 2, 1)", "sm__cycles_elapsed.avg.per_second", "furlong/week", "7")
        ROW("4", "odd\"\"name", "(1, 1, 1)", "gpu__time_duration.sum", "ns", "10")
        "\n==PROF== Disconnected from process 7\n";
    json_t *p = parse_ok(t), *ks = json_object_get(p, "kernels"), *k;

    assert_int_equal(json_array_size(ks), 3);
    k = json_array_get(ks, 0);
    assert_int_equal(json_integer_value(json_object_get(k, "launches")), 3);
    assert_near(num(k, "time_us"), 1.5, 1e-9);               /* 1.5, 1.0, 2.0 us */
    assert_near(num(k, "dram_gbps"), 4e6 / 1500, 1e-9);      /* only launch 0 has bytes */
    assert_near(num(k, "tensor_pct"), 40, 1e-9);             /* gmma's, the larger */
    assert_near(num(k, "sm_clock_mhz"), 1980, 1e-6);          /* 1.98 cycles per ns */
    assert_null(json_object_get(k, "sm_pct"));               /* never measured: absent */
    assert_null(json_object_get(k, "spill_bytes"));
    assert_int_equal(json_array_size(json_object_get(k, "stalls")), 0);
    k = json_array_get(ks, 1);
    assert_dims(json_object_get(k, "grid"), 8, 2, 1);
    assert_null(json_object_get(k, "tensor_pct"));           /* both n/a: absent */
    assert_int_equal(json_integer_value(json_object_get(k, "spill_bytes")), 4096);
    assert_null(json_object_get(k, "sm_clock_mhz"));         /* a clock unit kevo does not know */
    assert_string_equal(json_string_value(json_object_get(json_array_get(ks, 2), "name")),
                        "odd\"name");
    json_decref(p);
    /* a header and no row: no kernel, no error */
    p = parse_ok(HDR);
    assert_int_equal(json_array_size(json_object_get(p, "kernels")), 0);
    json_decref(p);
}

/* text is refused as KEVO_ERR_INVALID with a message holding want. */
static void refused(const char *text, const char *want)
{
    json_t *p = NULL;
    char *msg = NULL;

    assert_int_equal(kevo_profile_parse_ncu(text, &p, &msg), KEVO_ERR_INVALID);
    assert_null(p);
    assert_non_null(msg);
    if (!strstr(msg, want))
        fail_msg("message \"%s\" lacks \"%s\"", msg, want);
    kevo_free(msg);
}

static void test_parse_malformed(void **state)
{
    char many[2048];
    (void)state;
    refused("", "no \"ID\" header");
    refused(NULL, "no \"ID\" header");
    refused("hello\nworld\n", "no \"ID\" header");
    refused("\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"Metric Name\"\n",
            "line 1: the header has no \"Metric Unit\" column");
    refused("x\n" HDR "\"0\",\"7\",\"kevo\"\n", "line 3: 3 fields where the header has 15");
    refused(HDR "\"0\",\"7\",\"kevo\",\"h\",\"k,\n", "line 2: a quoted field does not close");
    refused(HDR "\"0\"x,\"7\"\n", "line 2: a quoted field does not close");
    refused(HDR ROW("0", "k", "(4, 1, 1)", "gpu__time_duration.sum", "ns", "12abc"),
            "line 2: gpu__time_duration.sum: value \"12abc\" is not a number");
    refused(HDR ROW("0", "k", "(4, 1, 1)", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                    "%", "nan"), "is not a number");
    refused(HDR ROW("0", "k", "(4, 1)", "gpu__time_duration.sum", "ns", "1"),
            "line 2: grid size \"(4, 1)\" is not (x, y, z)");
    refused(HDR ROW("0", "k", "(4, -1, 1)", "gpu__time_duration.sum", "ns", "1"),
            "line 2: grid size");
    refused(HDR ROW("0", "k", "(4, 1, 1)", "gpu__time_duration.sum", "fortnight", "1"),
            "line 2: gpu__time_duration.sum: unknown unit \"fortnight\"");
    refused(HDR ROW("0", "k", "(4, 1, 1)", "dram__bytes_read.sum", "furlong", "1"),
            "unknown unit");
    refused(HDR ROW("0", "", "(4, 1, 1)", "gpu__time_duration.sum", "ns", "1"),
            "line 2: no kernel name");
    refused(HDR ROW("0", "k", "(4, 1, 1)", "", "ns", "1"), "line 2: no metric name");
    refused(HDR ROW("0", "k", "(4, 1, 1)", "gpu__time_duration.sum", "ns", "1")
                ROW("0", "j", "(4, 1, 1)", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                    "%", "1"), "line 3: launch 0 has rows of two kernels");
    snprintf(many, sizeof many, "%s", HDR);
    for (int i = 0; i < 70; i++)
        strncat(many, "\"x\",", sizeof many - strlen(many) - 1);
    refused(many, "line 2: more than 64 fields");
}

/* Every prefix of a fixture, and copies with bytes overwritten, parse or are refused:
 * never a crash (ASan and UBSan watch this under make asan); allocation failures too. */
static void test_parse_robust(void **state)
{
    char *text = read_text(FIX "ncu-sgemm_tiled.csv"), *msg = NULL;
    size_t len = strlen(text);
    uint32_t rng = 12345;
    json_t *p = NULL;
    enum kevo_status st;
    (void)state;

    for (size_t cut = 0; cut <= len; cut += 37) {
        char *c = kevo_strndup(text, cut);
        st = kevo_profile_parse_ncu(c, &p, &msg);
        assert_true(st == KEVO_OK || st == KEVO_ERR_INVALID);
        assert_true((st == KEVO_OK) == (p != NULL) && (st == KEVO_OK) == (msg == NULL));
        json_decref(p);
        kevo_free(msg);
        kevo_free(c);
    }
    for (int round = 0; round < 300; round++) {
        char *c = kevo_strdup(text);
        for (int j = 0; j < 4; j++) {
            rng = rng * 1103515245u + 12345u;
            size_t at = (rng >> 8) % len;
            rng = rng * 1103515245u + 12345u;
            c[at] = "\",\n(0a-=9 x%"[(rng >> 8) % 12];
        }
        st = kevo_profile_parse_ncu(c, &p, &msg);
        assert_true(st == KEVO_OK || st == KEVO_ERR_INVALID);
        json_decref(p);
        kevo_free(msg);
        kevo_free(c);
    }
    for (long n = 1; n < 400; n++) {
        kevo_mem_fail_after(n);
        st = kevo_profile_parse_ncu(text, &p, &msg);
        kevo_mem_fail_after(0);
        assert_true(st == KEVO_OK || st == KEVO_ERR_NOMEM);
        json_decref(p);
        kevo_free(msg);
        if (st == KEVO_OK)
            break;
    }
    kevo_free(text);
}

/* ---- diagnosis ---- */

static void diag_of(const json_t *p, char *buf, size_t n)
{
    kevo_profile_diagnose(p, buf, n);
    print_message("[ diagnose ] %s\n", buf);
}

static void test_diagnose(void **state)
{
    char d[512];
    json_t *p;
    (void)state;

    p = parse_fixture("vadd_vec4");
    diag_of(p, d, sizeof d);
    assert_string_equal(d, "memory-bound: DRAM at 91% of peak (3.1 TB/s), L2 hit 35%; "
                           "top stalls: long_scoreboard 120.1, drain 2.5");
    json_decref(p);
    p = parse_fixture("sgemm_tiled");
    diag_of(p, d, sizeof d);
    assert_string_equal(d, "compute-bound: SM at 71%, tensor pipes idle (0.8%); occupancy 36%; "
                           "top stalls: long_scoreboard 1.5, wait 0.9");
    assert_null(strstr(d, "selected"));   /* an issuing (or eligible) warp is no stall */
    json_decref(p);
    p = parse_fixture("softmax_fast");
    diag_of(p, d, sizeof d);
    assert_true(!strncmp(d, "memory-bound: DRAM at 84% of peak", 33));
    json_decref(p);
    /* neither unit busy, with spills; two kernels: the one with most time is diagnosed */
    p = json_loads("{\"tool\":\"ncu\",\"kernels\":["
                   "{\"name\":\"small\",\"launches\":1,\"time_us\":1,\"dram_pct_of_peak\":90},"
                   "{\"name\":\"big\",\"launches\":3,\"time_us\":1,\"dram_pct_of_peak\":8,"
                   "\"sm_pct\":20.4,\"achieved_occupancy_pct\":12,\"spill_bytes\":256,"
                   "\"stalls\":[{\"reason\":\"selected\",\"per_issue\":9},"
                   "{\"reason\":\"barrier\",\"per_issue\":4.25}]}]}", 0, NULL);
    diag_of(p, d, sizeof d);
    assert_string_equal(d, "kernel big (75% of the profiled time): latency-bound: neither "
                           "DRAM (8%) nor SM (20%) busy; occupancy 12%; top stalls: barrier "
                           "4.2; spills: 256 B of local memory traffic");
    kevo_profile_diagnose(p, d, 12);   /* cut, terminated */
    assert_string_equal(d, "kernel big ");
    kevo_profile_diagnose(p, d, 1);
    assert_string_equal(d, "");
    json_decref(p);
    p = json_pack("{s:s, s:s}", "tool", "ncu", "error", "profile: ncu not found");
    diag_of(p, d, sizeof d);
    assert_string_equal(d, "profiling failed: profile: ncu not found");
    json_decref(p);
    diag_of(NULL, d, sizeof d);
    assert_string_equal(d, "no kernel launch was profiled");
}

/* ---- prompts ---- */

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* prompts/NAME.md with {{profile}} taken out, into dir (and system.md): the template as
 * it was before the placeholder. */
static void template_without_profile(const char *dir, const char *name)
{
    char path[512], *t, *at;

    snprintf(path, sizeof path, KEVO_SOURCE_DIR "/prompts/%s.md", name);
    t = read_text(path);
    at = strstr(t, "{{profile}}");
    assert_non_null(at);
    memmove(at, at + 11, strlen(at + 11) + 1);
    snprintf(path, sizeof path, "%s/%s.md", dir, name);
    write_file(path, t);
    kevo_free(t);
    t = read_text(KEVO_SOURCE_DIR "/prompts/system.md");
    snprintf(path, sizeof path, "%s/system.md", dir);
    write_file(path, t);
    kevo_free(t);
}

static char *user_prompt(const char *tdir, const char *name, json_t *result)
{
    struct kevo_prompt_ctx c = { .template_dir = tdir, .task_text = "// kevo task t\n",
                                 .lang = "cuda", .parent = "PARENT", .result = result };
    char *sys = NULL, *usr = NULL, *why = NULL;

    if (kevo_prompt_build(name, &c, &sys, &usr, &why) != KEVO_OK)
        fail_msg("%s", why ? why : "?");
    kevo_free(sys);
    return usr;
}

static void test_prompt_profile(void **state)
{
    char old[300], d[512];
    const char *names[] = { "improve", "fix" };
    (void)state;

    snprintf(old, sizeof old, "%s/old-prompts", scratch);
    assert_int_equal(mkdir(old, 0700), 0);
    json_t *res = json_loads("{\"verdict\":\"ok\",\"workloads\":[{\"index\":0,"
                             "\"sizes\":{\"N\":67108864},\"verdict\":\"ok\","
                             "\"time\":{\"median_s\":2.6e-4},\"sol_fraction\":0.9,"
                             "\"gbps\":3000,\"bytes\":8e8,\"flops\":6.7e7}],"
                             "\"resources\":[]}", 0, NULL);
    json_t *prof = parse_fixture("vadd_vec4");
    kevo_profile_diagnose(prof, d, sizeof d);
    json_object_set_new(prof, "diagnosis", json_string(d));
    json_object_set_new(prof, "workload", json_pack("{s:i, s:{s:I}}", "index", 0, "sizes", "N",
                                                    (json_int_t)67108864));
    for (int i = 0; i < 2; i++) {
        /* no profile: exactly the prompt of the template without the placeholder */
        template_without_profile(old, names[i]);
        char *a = user_prompt(KEVO_SOURCE_DIR "/prompts", names[i], res);
        char *b = user_prompt(old, names[i], res);
        assert_string_equal(a, b);
        assert_null(strstr(a, "Hardware counters"));
        kevo_free(a);
        kevo_free(b);
    }
    json_object_set(res, "profile", prof);
    char *u = user_prompt(KEVO_SOURCE_DIR "/prompts", "improve", res);
    print_message("%s\n", strstr(u, "## What kevo measured"));
    assert_non_null(strstr(u, "\n\nHardware counters (ncu, workload {\"N\":67108864}"));
    assert_non_null(strstr(u, "Diagnosis: memory-bound: DRAM at 91% of peak (3.1 TB/s)"));
    assert_non_null(strstr(u, "- kernel vadd_vec4, grid (65536, 1, 1), block (256, 1, 1)"));
    assert_non_null(strstr(u, "long_scoreboard 120.09"));
    assert_true(strstr(u, "Hardware counters") < strstr(u, "## What was tried"));
    assert_true(strstr(u, "Per workload") < strstr(u, "Hardware counters"));
    kevo_free(u);
    u = user_prompt(KEVO_SOURCE_DIR "/prompts", "fix", res);
    assert_non_null(strstr(u, "Verdict: ok\n\nHardware counters"));
    kevo_free(u);
    /* a failed profile says nothing in a prompt */
    json_object_set_new(res, "profile", json_pack("{s:s, s:s}", "tool", "ncu", "error", "x"));
    u = user_prompt(KEVO_SOURCE_DIR "/prompts", "improve", res);
    assert_null(strstr(u, "Hardware counters"));
    kevo_free(u);
    json_decref(prof);
    json_decref(res);
}

/* ---- collecting with a fake ncu ---- */

/* An executable script at scratch/NAME with body (after #!/bin/sh); its path into out. */
static void script(char *out, size_t n, const char *name, const char *body)
{
    snprintf(out, n, "%s/%s", scratch, name);
    write_file(out, body);
    assert_int_equal(chmod(out, 0755), 0);
}

struct vadd {
    struct kevo_task *task, *cand;
    struct kevo_profile_req req;
};

static void vadd_load(struct vadd *v)
{
    char *msg = NULL;

    memset(v, 0, sizeof *v);
    if (kevo_task_load(VADD_TASK, &v->task, &msg) != KEVO_OK ||
        kevo_candidate_load(v->task, VADD_CAND, &v->cand, &msg) != KEVO_OK)
        fail_msg("%s", msg ? msg : "?");
    v->req = (struct kevo_profile_req){ .task_path = VADD_TASK, .cand_path = VADD_CAND,
                                        .task = v->task, .cand = v->cand, .device = 3,
                                        .exe = "/nonexistent/kevo" };
}

static void vadd_free(struct vadd *v)
{
    kevo_task_free(v->cand);
    kevo_task_free(v->task);
}

/* The fake ncu: its arguments one per line into scratch/args, then the KEVO_CUPTI it got,
 * the vadd fixture into its --log-file, a line of its own on stdout. */
static const char FAKE_NCU[] =
    "#!/bin/sh\n"
    "printf '%%s\\n' \"$@\" \"KEVO_CUPTI=${KEVO_CUPTI-unset}\" > '%s/args'\n"
    "while [ $# -gt 0 ]; do\n"
    "  if [ \"$1\" = --log-file ]; then cp '" FIX "ncu-vadd_vec4.csv' \"$2\"; fi\n"
    "  shift\n"
    "done\n"
    "echo '==PROF== Disconnected'\n";

/* Line i (0-based) of scratch/args, the fake's arguments ("" past the end; kevo_free). */
static char *arg_line(int i)
{
    char path[300], *t, *p, *r;

    snprintf(path, sizeof path, "%s/args", scratch);
    t = read_text(path);
    p = t;
    for (int k = 0; k < i && p; k++)
        p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
    r = kevo_strndup(p ? p : "", p ? strcspn(p, "\n") : 0);
    kevo_free(t);
    return r;
}

/* The argument after the one equal to name. */
static char *arg_after(const char *name)
{
    for (int i = 0; i < 200; i++) {
        char *a = arg_line(i);
        int hit = !strcmp(a, name), end = !*a;
        kevo_free(a);
        if (hit)
            return arg_line(i + 1);
        if (end)
            break;
    }
    fail_msg("the fake ncu did not get %s", name);
    return NULL;
}

static void assert_arg_after(const char *name, const char *want)
{
    char *a = arg_after(name);
    assert_string_equal(a, want);
    kevo_free(a);
}

static void test_collect_fake_ncu(void **state)
{
    char body[2048], ncu[300], *msg = NULL, *log;
    struct vadd v;
    json_t *p = NULL, *k;
    (void)state;

    snprintf(body, sizeof body, FAKE_NCU, scratch);
    script(ncu, sizeof ncu, "ncu", body);
    setenv("KEVO_NCU", ncu, 1);
    vadd_load(&v);
    if (kevo_profile_collect(&v.req, &p, &msg) != KEVO_OK)
        fail_msg("%s", msg ? msg : "?");
    assert_null(msg);
    k = json_array_get(json_object_get(p, "kernels"), 0);
    assert_string_equal(json_string_value(json_object_get(k, "name")), "vadd_vec4");
    assert_int_equal(json_integer_value(json_object_get(p, "launch_count")),
                     2 * v.cand->n_launches);
    json_t *w = json_object_get(p, "workload");
    assert_int_equal(json_integer_value(json_object_get(w, "index")), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(w, "sizes"), "N")),
                     67108864);
    assert_true(num(p, "cost_s") >= 0 && num(p, "cost_s") < 60);
    assert_true(!strncmp(json_string_value(json_object_get(p, "diagnosis")), "memory-bound", 12));
    assert_null(json_object_get(p, "note"));
    /* the command line, and CUPTI left to ncu: the profiled worker must not take it */
    setenv("KEVO_CUPTI", "1", 1);
    json_decref(p);
    p = NULL;
    if (kevo_profile_collect(&v.req, &p, &msg) != KEVO_OK)
        fail_msg("%s", msg ? msg : "?");
    unsetenv("KEVO_CUPTI");
    char *path = kevo_strdupf("%s/args", scratch), *args = read_text(path);
    assert_non_null(strstr(args, "\nKEVO_CUPTI=0\n"));
    kevo_free(args);
    kevo_free(path);
    assert_arg_after("-k", "regex:^(vadd_vec4)$");
    assert_arg_after("--launch-count", "2");
    assert_arg_after("--target-processes", "all");
    assert_arg_after("--cache-control", "all");
    assert_arg_after("--clock-control", "none");
    assert_arg_after("--csv", "--log-file");
    assert_arg_after("/nonexistent/kevo", "eval");
    assert_arg_after("--no-timing", "--trials");
    assert_arg_after("--trials", "3");
    assert_arg_after("--deadline", "300");
    assert_arg_after("--backend", "cuda");
    assert_arg_after("--device", "3");
    assert_arg_after(VADD_TASK, VADD_CAND);
    char *metrics = arg_after("--metrics");
    assert_non_null(strstr(metrics, "gpu__time_duration.sum,"));
    assert_non_null(strstr(metrics, "regex:smsp__average_warps_issue_stalled_.*_per_issue_"
                                    "active\\.ratio"));
    kevo_free(metrics);
    /* the temporary directory is gone */
    log = arg_after("--log-file");
    assert_int_equal(access(log, F_OK), -1);
    assert_true(strrchr(log, '/') != NULL);
    *strrchr(log, '/') = '\0';
    assert_int_equal(access(log, F_OK), -1);
    kevo_free(log);
    json_decref(p);
    p = NULL;

    /* a candidate whose kernel has the reference's name gets a note */
    char *sname = v.cand->launches[0].kernel;
    v.cand->launches[0].kernel = v.task->launches[0].kernel;
    assert_int_equal(kevo_profile_collect(&v.req, &p, &msg), KEVO_OK);
    assert_non_null(strstr(json_string_value(json_object_get(p, "note")), "same name"));
    assert_arg_after("-k", "regex:^(vector_add_ref)$");
    v.cand->launches[0].kernel = sname;
    json_decref(p);
    p = NULL;

    /* a CPU evaluation has no counters: no profile, no error */
    v.req.backend = "cpu";
    assert_int_equal(kevo_profile_collect(&v.req, &p, &msg), KEVO_OK);
    assert_null(p);
    assert_null(msg);
    vadd_free(&v);
    unsetenv("KEVO_NCU");
}

static void test_collect_failures(void **state)
{
    char ncu[300], body[512], pidfile[300], *msg = NULL;
    struct vadd v;
    json_t *p = NULL;
    (void)state;

    vadd_load(&v);
    /* ncu that cannot read counters: its error in the message */
    script(ncu, sizeof ncu, "ncu-perm", "#!/bin/sh\n"
           "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'\n"
           "echo 'kevo: something on stderr' >&2\nexit 1\n");
    setenv("KEVO_NCU", ncu, 1);
    assert_int_equal(kevo_profile_collect(&v.req, &p, &msg), KEVO_ERR_WORKER);
    assert_null(p);
    print_message("[ failure  ] %s\n", msg);
    assert_non_null(strstr(msg, "profile: ncu (exit status 1) counted no launch"));
    assert_non_null(strstr(msg, "ERR_NVGPUCTRPERM"));
    assert_non_null(strstr(msg, "\n  kevo: something on stderr"));
    kevo_free(msg);
    msg = NULL;

    /* one that hangs, with a child of its own: both killed at the deadline */
    snprintf(pidfile, sizeof pidfile, "%s/pid", scratch);
    snprintf(body, sizeof body, "#!/bin/sh\nsleep 60 &\necho $! > '%s'\nwait\n", pidfile);
    script(ncu, sizeof ncu, "ncu-hang", body);
    setenv("KEVO_NCU", ncu, 1);
    v.req.deadline_s = 1;
    double t0 = (double)time(NULL);
    assert_int_equal(kevo_profile_collect(&v.req, &p, &msg), KEVO_ERR_TIMEOUT);
    assert_true((double)time(NULL) - t0 < 20);
    assert_non_null(strstr(msg, "did not finish within 1 s"));
    kevo_free(msg);
    msg = NULL;
    char *pid_text = read_text(pidfile);
    pid_t pid = (pid_t)strtol(pid_text, NULL, 10);
    kevo_free(pid_text);
    assert_true(pid > 0);
    int gone = 0;
    for (int i = 0; i < 200 && !gone; i++) {   /* reaped by init soon after */
        char stat_path[64], *st = NULL;
        size_t n;
        snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", (int)pid);
        gone = kevo_fs_read_file(stat_path, 4096, &st, &n, NULL) != KEVO_OK ||
               (strrchr(st, ')') && strrchr(st, ')')[2] == 'Z');
        kevo_free(st);
        if (!gone)
            usleep(10000);
    }
    assert_true(gone);
    v.req.deadline_s = 0;

    /* KEVO_NCU naming nothing runnable */
    setenv("KEVO_NCU", "/nonexistent/ncu", 1);
    assert_int_equal(kevo_profile_collect(&v.req, &p, &msg), KEVO_ERR_NOTFOUND);
    assert_non_null(strstr(msg, "KEVO_NCU=/nonexistent/ncu is not an executable file"));
    kevo_free(msg);
    msg = NULL;
    /* no ncu anywhere (where this machine has none in the built-in places either) */
    unsetenv("KEVO_NCU");
    char *path = getenv("PATH") ? kevo_strdup(getenv("PATH")) : NULL, empty[300];
    char *home = getenv("CUDA_HOME") ? kevo_strdup(getenv("CUDA_HOME")) : NULL;
    snprintf(empty, sizeof empty, "%s/empty", scratch);
    assert_int_equal(mkdir(empty, 0700), 0);
    setenv("PATH", empty, 1);
    setenv("CUDA_HOME", empty, 1);
    if (access("/usr/local/cuda/bin/ncu", X_OK) != 0 && access(KEVO_CUDA_HOME "/bin/ncu", X_OK)) {
        char *where = NULL;
        assert_int_equal(kevo_profile_find_ncu(&where, &msg), KEVO_ERR_NOTFOUND);
        assert_null(where);
        assert_string_equal(msg, "profile: ncu not found (install Nsight Compute or set "
                                 "KEVO_NCU)");
        kevo_free(msg);
        msg = NULL;
        assert_int_equal(kevo_profile_collect(&v.req, &p, &msg), KEVO_ERR_NOTFOUND);
        assert_non_null(strstr(msg, "ncu not found"));
        kevo_free(msg);
        msg = NULL;
    }
    /* found on PATH */
    script(ncu, sizeof ncu, "empty/ncu", "#!/bin/sh\nexit 0\n");
    char *where = NULL;
    assert_int_equal(kevo_profile_find_ncu(&where, &msg), KEVO_OK);
    assert_string_equal(where, ncu);
    kevo_free(where);
    if (path)
        setenv("PATH", path, 1);
    kevo_free(path);
    if (home)
        setenv("CUDA_HOME", home, 1);
    else
        unsetenv("CUDA_HOME");
    kevo_free(home);
    vadd_free(&v);
}

/* `kevo eval --profile` on what the worker judged: ok candidates get a profile (or an
 * error in it), the others none. */
static void test_profile_cands(void **state)
{
    char body[2048], ncu[300];
    struct vadd v;
    (void)state;

    snprintf(body, sizeof body, FAKE_NCU, scratch);
    script(ncu, sizeof ncu, "ncu", body);
    vadd_load(&v);
    v.req.ncu = ncu;
    json_t *cands = json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "verdict", "ok", "path",
                              VADD_CAND, "verdict", "mismatch", "path", VADD_CAND, "verdict",
                              "ok", "path", "/nonexistent/cand.cu");
    double t = kevo_profile_cands(&v.req, cands);
    assert_true(t >= 0);
    json_t *p0 = json_object_get(json_array_get(cands, 0), "profile");
    assert_true(json_is_object(p0));
    assert_int_equal(json_array_size(json_object_get(p0, "kernels")), 1);
    assert_true(json_is_string(json_object_get(p0, "diagnosis")));
    assert_null(json_object_get(json_array_get(cands, 1), "profile"));
    json_t *p2 = json_object_get(json_array_get(cands, 2), "profile");
    assert_string_equal(json_string_value(json_object_get(p2, "tool")), "ncu");
    assert_non_null(strstr(json_string_value(json_object_get(p2, "error")), "cand.cu"));
    assert_true(json_is_number(json_object_get(p2, "cost_s")));
    json_decref(cands);
    vadd_free(&v);
}

/* ---- kevo eval --profile ---- */

/* What the worker's CUPTI collector returns (worker/eval_profile.c): per launch the
 * counters of core/counters.h, as ncu's CSV gives them per launch. */
static json_t *raw_worker_profile(void)
{
    return json_pack(
        "{s:s, s:[{s:s, s:[i,i,i], s:[i,i,i], s:{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}},"
        " {s:s, s:[i,i,i], s:[i,i,i], s:{s:f, s:f, s:f, s:f}}], s:i, s:f, s:{s:i}}",
        "tool", "cupti", "launches",
        "name", "vadd", "grid", 4096, 1, 1, "block", 256, 1, 1, "m",
        KEVO_CTR_TIME, 20000.0, KEVO_CTR_DRAM_RD, 4.0e7, KEVO_CTR_DRAM_WR, 2.0e7,
        KEVO_CTR_DRAM_PCT, 90.0, KEVO_CTR_SM_PCT, 12.0, KEVO_CTR_L2_HIT, 33.0,
        KEVO_CTR_STALL_PFX "long_scoreboard" KEVO_CTR_STALL_SFX, 40.0, KEVO_CTR_LOCAL_LD, 0.0,
        "name", "vadd", "grid", 4096, 1, 1, "block", 256, 1, 1, "m",
        KEVO_CTR_TIME, 22000.0, KEVO_CTR_DRAM_RD, 4.0e7, KEVO_CTR_DRAM_WR, 2.0e7,
        KEVO_CTR_DRAM_PCT, 86.0,
        "passes", 14, "cost_s", 0.25, "workload", "index", 0);
}

/* The worker's raw counters become the same profile object ncu's CSV does. */
static void test_from_worker(void **state)
{
    json_t *raw = raw_worker_profile(), *prof = NULL;
    char *msg = NULL;
    (void)state;

    assert_non_null(raw);
    assert_int_equal(kevo_profile_from_worker(raw, &prof, &msg), KEVO_OK);
    assert_string_equal(json_string_value(json_object_get(prof, "tool")), "cupti");
    json_t *ks = json_object_get(prof, "kernels"), *k = json_array_get(ks, 0);
    assert_int_equal(json_array_size(ks), 1);   /* one (name, grid, block) */
    assert_int_equal(json_integer_value(json_object_get(k, "launches")), 2);
    assert_true(fabs(json_real_value(json_object_get(k, "time_us")) - 21.0) < 1e-9);
    /* each figure is the median of the per-launch figures */
    assert_true(fabs(json_real_value(json_object_get(k, "dram_gbps")) -
                     (6.0e7 / 20000 + 6.0e7 / 22000) / 2) < 1e-6);
    assert_true(fabs(json_real_value(json_object_get(k, "dram_pct_of_peak")) - 88.0) < 1e-9);
    assert_null(json_object_get(k, "tensor_pct"));       /* absent: not counted */
    assert_string_equal(json_string_value(json_object_get(json_array_get(
                            json_object_get(k, "stalls"), 0), "reason")), "long_scoreboard");
    assert_int_equal(json_integer_value(json_object_get(prof, "passes")), 14);
    assert_non_null(strstr(json_string_value(json_object_get(prof, "diagnosis")), "memory-bound"));
    json_decref(prof);
    /* no launches, or a launch without metrics: refused with a message */
    json_object_set_new(raw, "launches", json_array());
    assert_int_equal(kevo_profile_from_worker(raw, &prof, &msg), KEVO_ERR_INVALID);
    assert_null(prof);
    assert_non_null(strstr(msg, "no launches"));
    kevo_free(msg);
    json_object_set_new(raw, "launches", json_pack("[{s:s}]", "name", "k"));
    assert_int_equal(kevo_profile_from_worker(raw, &prof, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "launch 0"));
    kevo_free(msg);
    json_decref(raw);
}

/* KEVO_PROFILE_EXTRA's list: kevo's counters first, then well-spelled names, once each. */
static void test_counters_list(void **state)
{
    struct kevo_counter_list l;
    char many[40 * 20] = "", long_name[KEVO_COUNTER_NAME_MAX + 2];
    (void)state;

    assert_int_equal(kevo_counters_list(&l, NULL), 0);
    assert_int_equal(l.n, kevo_counters_count);
    assert_string_equal(l.name[0], kevo_counters[0]);
    assert_int_equal(kevo_counters_list(&l, ""), 0);
    assert_int_equal(l.n, kevo_counters_count);
    /* a bad spelling is left out and counted; empty entries and repeats are skipped */
    assert_int_equal(kevo_counters_list(&l, "smsp__inst_issued.sum,BAD;rm,,x_y.avg,"
                                             "smsp__inst_issued.sum," KEVO_CTR_TIME), 1);
    assert_int_equal(l.n, kevo_counters_count + 2);
    assert_string_equal(l.name[kevo_counters_count], "smsp__inst_issued.sum");
    assert_string_equal(l.name[kevo_counters_count + 1], "x_y.avg");
    /* at most KEVO_COUNTERS_EXTRA_MAX, each at most KEVO_COUNTER_NAME_MAX characters */
    for (int i = 0; i < KEVO_COUNTERS_EXTRA_MAX + 2; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "m%d.sum,", i);
    assert_int_equal(kevo_counters_list(&l, many), 2);
    assert_int_equal(l.n, kevo_counters_count + KEVO_COUNTERS_EXTRA_MAX);
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_int_equal(kevo_counters_list(&l, long_name), 1);
    assert_int_equal(l.n, kevo_counters_count);
    long_name[KEVO_COUNTER_NAME_MAX] = '\0';
    assert_int_equal(kevo_counters_list(&l, long_name), 0);
    assert_int_equal((int)strlen(l.name[kevo_counters_count]), KEVO_COUNTER_NAME_MAX);
}

/* Counters that are none of kevo's come back as they are, the median over the launches,
 * under the kernel's "counters"; a profile without them has no such key. */
static void test_from_worker_extra(void **state)
{
    json_t *raw = raw_worker_profile(), *prof = NULL, *l;
    char *msg = NULL;
    size_t i;
    (void)state;

    assert_int_equal(kevo_profile_from_worker(raw, &prof, &msg), KEVO_OK);
    assert_null(json_object_get(json_array_get(json_object_get(prof, "kernels"), 0), "counters"));
    json_decref(prof);
    json_array_foreach(json_object_get(raw, "launches"), i, l)
        json_object_set_new(json_object_get(l, "m"), "smsp__inst_issued.sum",
                            json_real(i ? 300.0 : 100.0));
    assert_int_equal(kevo_profile_from_worker(raw, &prof, &msg), KEVO_OK);
    json_t *c = json_object_get(json_array_get(json_object_get(prof, "kernels"), 0), "counters");
    assert_int_equal(json_object_size(c), 1);   /* kevo's own counters are not repeated */
    assert_true(fabs(json_real_value(json_object_get(c, "smsp__inst_issued.sum")) - 200.0) < 1e-9);
    json_decref(prof);
    json_decref(raw);
}

/* ncu runs only for ok candidates the worker could not count; why it could not is kept. */
static void test_cands_worker_first(void **state)
{
    char body[2048], ncu[300];
    struct vadd v;
    (void)state;

    snprintf(body, sizeof body, FAKE_NCU, scratch);
    script(ncu, sizeof ncu, "ncu", body);
    vadd_load(&v);
    v.req.ncu = ncu;
    json_t *counted = json_pack("{s:s, s:[], s:f}", "tool", "cupti", "kernels", "cost_s", 0.5);
    json_t *cands = json_pack("[{s:s, s:s, s:o}, {s:s, s:s, s:{s:s, s:s, s:b}}]", "verdict",
                              "ok", "path", VADD_CAND, "profile", counted, "verdict", "ok",
                              "path", VADD_CAND, "profile", "tool", "cupti", "error",
                              "no libcupti", "unavailable", 1);
    assert_int_equal(kevo_profile_missing(cands), 1);
    double t = kevo_profile_cands(&v.req, cands);
    assert_true(t >= 0.5);                    /* the worker's own cost counts */
    json_t *p0 = json_object_get(json_array_get(cands, 0), "profile");
    assert_ptr_equal(p0, counted);            /* left alone */
    json_t *p1 = json_object_get(json_array_get(cands, 1), "profile");
    assert_string_equal(json_string_value(json_object_get(p1, "tool")), "ncu");
    assert_int_equal(json_array_size(json_object_get(p1, "kernels")), 1);
    assert_string_equal(json_string_value(json_object_get(p1, "cupti_error")), "no libcupti");
    assert_int_equal(kevo_profile_missing(cands), 0);
    json_decref(cands);
    vadd_free(&v);
}

/* A CPU evaluation has no counters: no profile, and no failure for asking. */
static void test_eval_cpu_no_profile(void **state)
{
    const char *cands[] = { KEVO_SOURCE_DIR "/examples/seeds/cpu_softmax_rows.c" };
    struct kevo_eval_opts o;
    char *json = NULL, *msg = NULL;
    (void)state;

    if (!getenv("KEVO_BIN"))
        skip();
    kevo_eval_opts_default(&o);
    o.profile = 1;
    o.no_timing = 1;
    setenv("KEVO_NCU", "/nonexistent/ncu", 1);   /* never looked for */
    if (kevo_eval_json(KEVO_SOURCE_DIR "/tasks/cpu/cpu_softmax_rows.c", cands, 1, &o, &json,
                       &msg) != KEVO_OK)
        fail_msg("%s", msg ? msg : "?");
    json_t *doc = json_loads(json, 0, NULL), *c = json_array_get(json_object_get(doc,
                                                                               "candidates"), 0);
    assert_string_equal(json_string_value(json_object_get(c, "verdict")), "ok");
    assert_null(json_object_get(c, "profile"));
    assert_null(json_object_get(json_object_get(doc, "wall_s"), "profile"));
    json_decref(doc);
    kevo_free(json);
    unsetenv("KEVO_NCU");
}

/* ---- kevo show ---- */

static void test_show_profile(void **state)
{
    char db[300], src[KEVO_HASH_HEX], d[512], *msg = NULL, *json = NULL;
    struct kevo_archive *a = NULL;
    struct kevo_cand_rec r;
    int64_t run = 0, id = 0;
    (void)state;

    snprintf(db, sizeof db, "%s/a.db", scratch);
    assert_int_equal(kevo_archive_open(db, &a, &msg), KEVO_OK);
    assert_int_equal(kevo_archive_run_create(a, "vector_add", VADD_TASK, "t", 1, "{}", &run),
                     KEVO_OK);
    assert_int_equal(kevo_archive_source_put(a, "src", 3, src), KEVO_OK);
    memset(&r, 0, sizeof r);
    r.run_id = run;
    snprintf(r.key, sizeof r.key, "k%063d", 1);
    memcpy(r.source_hash, src, sizeof r.source_hash);
    snprintf(r.op, sizeof r.op, "seed");
    r.island = r.cell = -1;
    assert_int_equal(kevo_archive_cand_add(a, &r, &id), KEVO_OK);
    json_t *prof = parse_fixture("vadd_vec4");
    kevo_profile_diagnose(prof, d, sizeof d);
    json_object_set_new(prof, "diagnosis", json_string(d));
    json_object_set_new(prof, "cost_s", json_real(5.5));
    json_t *res = json_pack("{s:s, s:[], s:[], s:o}", "verdict", "ok", "workloads",
                            "resources", "profile", prof);
    char *rtext = json_dumps(res, JSON_COMPACT);
    assert_int_equal(kevo_archive_cand_finish(a, id, KEVO_VERDICT_OK, 1e-3, 0.9, 2, "{}", rtext),
                     KEVO_OK);
    kevo_free(rtext);
    json_decref(res);
    kevo_archive_close(a);
    assert_int_equal(kevo_show_json(db, id, &json, &msg), KEVO_OK);
    json_t *doc = json_loads(json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "profile"),
                                                          "diagnosis")), d);
    json_decref(doc);
    kevo_free(json);
    const char *bin = getenv("KEVO_BIN");
    if (bin) {   /* the text: the diagnosis and the counter table */
        char cmd[1024], out[8192];
        size_t n;
        snprintf(cmd, sizeof cmd, "'%s' show %lld --archive '%s'", bin, (long long)id, db);
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        assert_int_equal(pclose(f), 0);
        print_message("%s", out);
        assert_non_null(strstr(out, "profile (ncu, 5.5 s): memory-bound: DRAM at 91% of peak"));
        assert_non_null(strstr(out, "vadd_vec4            65536,1,1      256,1,1"));
        assert_non_null(strstr(out, "warp stalls per issue: long_scoreboard 120.09"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_fixtures),
        cmocka_unit_test(test_parse_forms),
        cmocka_unit_test(test_parse_malformed),
        cmocka_unit_test(test_parse_robust),
        cmocka_unit_test(test_diagnose),
        cmocka_unit_test(test_prompt_profile),
        cmocka_unit_test(test_collect_fake_ncu),
        cmocka_unit_test(test_collect_failures),
        cmocka_unit_test(test_profile_cands),
        cmocka_unit_test(test_from_worker),
        cmocka_unit_test(test_counters_list),
        cmocka_unit_test(test_from_worker_extra),
        cmocka_unit_test(test_cands_worker_first),
        cmocka_unit_test(test_eval_cpu_no_profile),
        cmocka_unit_test(test_show_profile),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

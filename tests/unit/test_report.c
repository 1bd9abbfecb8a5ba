/*
 * test_report - `kevo report` (src/ctl/report*.c, docs/report.md) on runs made here on the
 * CPU backend: a search's page has its plots (at least 3 <svg>), names the task and the
 * best candidate, loads nothing from anywhere (no script, no src=, no url(), no http) and
 * escapes what a candidate wrote (a seed whose source says </pre><script>); a run with
 * no correct candidate and a run of one candidate still give a whole page; a recorded H100
 * run with LLM operators shows its models and tokens; PyTorch baselines join the best's
 * table; `--bench` renders a bench document (recorded from `kevo bench --json` on CPU
 * tasks, and the H100 suite of bench/results/) and refuses a file that is not one; the
 * command writes --out and exits 1 or 2 as docs/cli.md says. Needs KEVO_BIN (make test
 * sets it): the workers and the CLI are that binary.
 */
#include "testutil.h"

#include "base/mem.h"
#include "kevo.h"

#include <jansson.h>
#include <string.h>
#include <sys/wait.h>

#define TASK "tests/search/landscape.c"
#define SEED "tests/search/landscape_seed.c"
#define BENCH_CPU "tests/fixtures/report/bench-cpu.json"
#define BENCH_H100 "bench/results/2026-11-22-h100-bench-suite.json"
#define H100_LLM "bench/results/2026-11-22-h100-llm-scripted/archive.db"

static char dir[256];
static const char *kevo_bin;

static int setup(void **state)
{
    (void)state;
    kevo_bin = test_scratch(dir, sizeof dir, "report");
    return dir[0] ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return test_scratch_remove(dir);
}

/* A file under the scratch directory holding text; its path in out. */
static void scratch_file(const char *name, const char *text, char *out, size_t n)
{
    FILE *f;

    snprintf(out, n, "%s/%s", dir, name);
    f = fopen(out, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* A run of the landscape task from seed into archive (budget evaluations); its id. */
static int64_t make_run(const char *archive, const char *seed, int64_t budget)
{
    struct kevo_run_opts o;
    const char *seeds[] = { seed };
    char *out = NULL, *msg = NULL;
    int64_t id = 0;

    kevo_run_opts_default(&o);
    o.archive = archive;
    o.eval.backend = KEVO_BACKEND_CPU;
    o.eval.time_cap_s = 0.05;
    o.n_seeds = 1;
    o.seeds = seeds;
    o.budget = budget;
    if (kevo_run(TASK, &o, NULL, NULL, NULL, &id, &out, &msg) != KEVO_OK)
        fail_msg("kevo_run: %s", msg ? msg : "?");
    kevo_free(out);
    kevo_free(msg);
    return id;
}

static int count(const char *s, const char *what)
{
    int n = 0;

    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
        n++;
    return n;
}

/* A whole, self-contained page: its frame, its elements closed, nothing loaded. */
static void whole_page(const char *html)
{
    assert_int_equal(strncmp(html, "<!DOCTYPE html>", 15), 0);
    assert_non_null(strstr(html, "</html>\n"));
    assert_int_equal(count(html, "<svg"), count(html, "</svg>"));
    assert_int_equal(count(html, "<section"), count(html, "</section>"));
    assert_int_equal(count(html, "<table"), count(html, "</table>"));
    assert_int_equal(count(html, "<pre"), count(html, "</pre>"));
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "<img"));
    assert_null(strstr(html, "<iframe"));
    assert_null(strstr(html, "<object"));
    assert_null(strstr(html, "<embed"));
    assert_int_equal(count(html, "<style"), 1);
    /* no tag loads anything (text may say src=: it is escaped, so it is no tag) */
    for (const char *p = strchr(html, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        char *tag;
        assert_non_null(end);
        tag = kevo_strndup(p, (size_t)(end - p));
        assert_null(strstr(tag, "src="));
        assert_null(strstr(tag, "xlink:"));
        kevo_free(tag);
    }
    assert_null(strstr(html, "url("));
    assert_null(strstr(html, "@import"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    /* every href is an anchor of the page itself */
    for (const char *p = strstr(html, "href=\""); p; p = strstr(p + 1, "href=\""))
        assert_int_equal(p[6], '#');
    /* no coordinate or label of a number that does not exist, in any plot */
    for (const char *p = strstr(html, "<svg"); p; p = strstr(p + 1, "<svg")) {
        const char *end = strstr(p, "</svg>");
        char *svg;
        assert_non_null(end);
        svg = kevo_strndup(p, (size_t)(end - p));
        assert_null(strstr(svg, "nan"));
        assert_null(strstr(svg, "inf"));
        kevo_free(svg);
    }
}

static char *report(const char *archive, int64_t id, const char *baselines)
{
    char *html = NULL, *msg = NULL;

    if (kevo_report_html(archive, id, baselines, &html, &msg) != KEVO_OK)
        fail_msg("kevo_report_html: %s", msg ? msg : "?");
    assert_null(msg);
    whole_page(html);
    return html;
}

/* The id of the best of run id, as `kevo runs` names it. */
static int64_t best_of(const char *archive, int64_t id)
{
    char *text = NULL, *msg = NULL;
    json_t *doc;
    int64_t best;

    assert_int_equal(kevo_runs_json(archive, id, &text, &msg), KEVO_OK);
    doc = json_loads(text, 0, NULL);
    best = json_integer_value(json_object_get(json_array_get(json_object_get(doc,
                                                             "lineage_of_best"), 0), "id"));
    json_decref(doc);
    kevo_free(text);
    kevo_free(msg);
    return best;
}

static void test_search_report(void **state)
{
    char archive[512], want[64], seed[512], *html, *text = NULL;
    size_t len = 0;
    FILE *f;
    int64_t id, best;

    (void)state;
    if (!kevo_bin)
        skip();
    /* the seed, with a comment that would end the page's <pre> and open a script */
    f = fopen(SEED, "r");
    assert_non_null(f);
    assert_int_equal(getdelim(&text, &len, '\0', f) > 0, 1);
    fclose(f);
    char *src = kevo_strdupf("/* </pre><script>alert(1)</script> & \"q\" */\n%s", text);
    free(text);
    scratch_file("seed.c", src, seed, sizeof seed);
    kevo_free(src);
    snprintf(archive, sizeof archive, "%s/search.db", dir);
    id = make_run(archive, seed, 10);
    best = best_of(archive, id);
    assert_true(best > 0);
    html = report(archive, id, NULL);
    print_message("[ report   ] run %lld: %zu bytes, %d plots, best cand %lld\n", (long long)id,
                  strlen(html), count(html, "<svg"), (long long)best);
    assert_true(count(html, "<svg") >= 3);
    assert_non_null(strstr(html, "cpu_landscape"));
    snprintf(want, sizeof want, "cand %lld", (long long)best);
    assert_non_null(strstr(html, want));
    assert_non_null(strstr(html, "Roofline"));
    assert_non_null(strstr(html, "DRAM"));
    assert_non_null(strstr(html, "Lineage of the best"));
    assert_non_null(strstr(html, "(seed)"));
    assert_non_null(strstr(html, "No LLM calls in this run"));
    assert_non_null(strstr(html, "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; "
                                 "&quot;q&quot;"));
    kevo_free(html);
}

static void test_no_ok_candidate(void **state)
{
    char archive[512], seed[512], *html;
    int64_t id;

    (void)state;
    if (!kevo_bin)
        skip();
    scratch_file("bad.c", "// kevo call landscape(x, y, N)\n"
                 "void landscape(const float *x, float *y, int n) { <oops> }\n", seed,
                 sizeof seed);
    snprintf(archive, sizeof archive, "%s/bad.db", dir);
    id = make_run(archive, seed, 4);
    html = report(archive, id, NULL);
    assert_non_null(strstr(html, "cpu_landscape"));
    assert_non_null(strstr(html, "none: no candidate was correct"));
    assert_non_null(strstr(html, "No candidate was correct: there is no best to trace."));
    assert_non_null(strstr(html, "compile_error"));
    assert_non_null(strstr(html, "does not compile"));
    assert_true(count(html, "<svg") >= 3);     /* the plots are there, saying "no data" */
    assert_non_null(strstr(html, "no data"));
    kevo_free(html);
}

static void test_one_candidate(void **state)
{
    char archive[512], *html, bl[512], *text;
    int64_t id;

    (void)state;
    if (!kevo_bin)
        skip();
    snprintf(archive, sizeof archive, "%s/one.db", dir);
    id = make_run(archive, SEED, 1);
    html = report(archive, id, NULL);
    assert_non_null(strstr(html, "1 candidates, 1 evaluated, 1 ok"));
    assert_non_null(strstr(html, "cand 1 (seed)"));
    assert_non_null(strstr(html, "The best is a seed: it has no parent to compare with."));
    kevo_free(html);
    /* PyTorch's times beside the best's, matched by workload index and sizes */
    text = kevo_strdupf("{\"kevo_baselines\": 1, \"tasks\": {\"cpu_landscape\": {\"workloads\":"
                        " [{\"index\": 0, \"sizes\": {\"N\": 200000}, \"eager_s\": 0.001,"
                        " \"compile_s\": 0.0005}]}}}");
    scratch_file("baselines.json", text, bl, sizeof bl);
    kevo_free(text);
    html = report(archive, id, bl);
    assert_non_null(strstr(html, "PyTorch eager"));
    assert_non_null(strstr(html, "1 ms"));
    kevo_free(html);
}

static void test_refusals(void **state)
{
    char archive[512], bl[512], *html = NULL, *msg = NULL;

    (void)state;
    if (!kevo_bin)
        skip();
    snprintf(archive, sizeof archive, "%s/one.db", dir);
    assert_int_equal(kevo_report_html(archive, 999, NULL, &html, &msg), KEVO_ERR_NOTFOUND);
    assert_null(html);
    assert_non_null(msg);
    kevo_free(msg);
    snprintf(archive, sizeof archive, "%s/none.db", dir);
    assert_int_equal(kevo_report_html(archive, 1, NULL, &html, &msg), KEVO_ERR_NOTFOUND);
    assert_non_null(strstr(msg, "no such archive"));
    kevo_free(msg);
    scratch_file("notbl.json", "{\"nothing\": 1}", bl, sizeof bl);
    snprintf(archive, sizeof archive, "%s/one.db", dir);
    assert_int_equal(kevo_report_html(archive, 1, bl, &html, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "notbl.json"));
    assert_non_null(strstr(msg, "not a baselines file"));
    kevo_free(msg);
}

/* A run recorded on an H100 with LLM operators (a scripted model): its models and tokens. */
static void test_recorded_llm_run(void **state)
{
    char archive[512], cmd[1200], *html;

    (void)state;
    snprintf(archive, sizeof archive, "%s/h100.db", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", H100_LLM, archive);   /* opening migrates */
    assert_int_equal(system(cmd), 0);
    html = report(archive, 1, NULL);
    assert_true(count(html, "<svg") >= 6);
    assert_non_null(strstr(html, "NVIDIA H100 80GB HBM3"));
    assert_non_null(strstr(html, "LLM tokens, summed over time"));
    assert_non_null(strstr(html, "llm_improve \xc2\xb7 openai:scripted"));
    assert_non_null(strstr(html, "fp16, bf16"));
    assert_null(strstr(html, "127.0.0.1"));     /* a model's address is not shown */
    kevo_free(html);
}

static void test_bench(void **state)
{
    char *html = NULL, *msg = NULL, path[512];
    json_t *doc;
    json_error_t e;

    (void)state;
    assert_int_equal(kevo_report_bench_html(BENCH_CPU, &html, &msg), KEVO_OK);
    whole_page(html);
    assert_non_null(strstr(html, "fast_p: the tasks faster than p times the base"));
    assert_non_null(strstr(html, "cpu_softmax_rows"));
    assert_non_null(strstr(html, "SOL per task"));
    assert_true(count(html, "<svg") >= 2);
    kevo_free(html);
    assert_int_equal(kevo_report_bench_html(BENCH_H100, &html, &msg), KEVO_OK);
    whole_page(html);
    assert_non_null(strstr(html, "vs torch.compile"));
    kevo_free(html);
    /* a failed task's message is escaped; a bench of references alone has no curve */
    doc = json_load_file(BENCH_CPU, 0, &e);
    assert_non_null(doc);
    json_t *t = json_array_get(json_object_get(doc, "tasks"), 0);
    size_t i;
    json_object_set_new(t, "verdict", json_string("mismatch"));
    json_object_set_new(t, "message", json_string("<img src=x onerror=alert(1)>"));
    json_array_foreach(json_object_get(doc, "tasks"), i, t)
        json_object_del(t, "speedup");
    snprintf(path, sizeof path, "%s/bench.json", dir);
    assert_int_equal(json_dump_file(doc, path, 0), 0);
    json_decref(doc);
    assert_int_equal(kevo_report_bench_html(path, &html, &msg), KEVO_OK);
    whole_page(html);
    assert_non_null(strstr(html, "&lt;img src=x onerror=alert(1)&gt;"));
    assert_non_null(strstr(html, "No speedups to plot"));
    kevo_free(html);
    /* not a bench document; not JSON */
    assert_int_equal(kevo_report_bench_html("bench/results/2026-11-22-h100-llm-scripted/run.txt",
                                            &html, &msg), KEVO_ERR_PARSE);
    assert_non_null(strstr(msg, "run.txt"));
    kevo_free(msg);
    assert_int_equal(kevo_report_bench_html("prices.json", &html, &msg), KEVO_ERR_INVALID);
    assert_non_null(strstr(msg, "not a bench document"));
    kevo_free(msg);
}

/* The command: --out FILE written whole, exit 1 for a run it cannot find, 2 bad usage. */
static void test_cli(void **state)
{
    char cmd[1400], out[512];
    FILE *f;

    (void)state;
    if (!kevo_bin)
        skip();
    snprintf(out, sizeof out, "%s/one.html", dir);
    snprintf(cmd, sizeof cmd, "'%s' report 1 --archive '%s/one.db' --out '%s' 2>/dev/null",
             kevo_bin, dir, out);
    assert_int_equal(system(cmd), 0);
    f = fopen(out, "r");
    assert_non_null(f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' report 7 --archive '%s/one.db' --out '%s' 2>/dev/null",
             kevo_bin, dir, out);
    assert_int_equal(WEXITSTATUS(system(cmd)), 1);
    snprintf(cmd, sizeof cmd, "'%s' report 2>/dev/null", kevo_bin);
    assert_int_equal(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "'%s' report 1 --bench x.json 2>/dev/null", kevo_bin);
    assert_int_equal(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "'%s' report --bench '%s' >/dev/null", kevo_bin, BENCH_CPU);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "'%s' report --help | grep -q 'report --bench FILE'", kevo_bin);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_report),
        cmocka_unit_test(test_no_ok_candidate),
        cmocka_unit_test(test_one_candidate),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_recorded_llm_run),
        cmocka_unit_test(test_bench),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

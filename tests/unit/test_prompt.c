/*
 * test_prompt - LLM prompts (src/prompt.c) from the shipped templates in prompts/: the
 * holdout workloads never appear, every placeholder is filled with the evidence, playbook
 * notes are chosen by tags and bottleneck, the shipped playbook brings the right exemplar
 * code for a GEMM and for row reductions within the budget, a task's `notes` are honoured,
 * and a template with an unknown placeholder or a missing file is refused with its name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/mem.h"
#include "ctl/playbook.h"
#include "ctl/prompt.h"
#include "core/task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char TASK[] =
    "// kevo task   t\n// kevo tags   reduction norm\n// kevo size   M=4096 N=8192\n"
    "//   kevo   holdout M=7 N=100003\n// kevo input  x f32[M,N] normal(0,1)\n"
    "// kevo output y f32[M,N]\n// kevo bytes  8*M*N\n"
    "// kevo launch k grid=M block=256 (x, y, N)\n"
    "// the holdout sizes are secret (this comment line stays)\n"
    "extern \"C\" __global__ void k(const float *x, float *y, int n) {}\n";

static char dir[64];

static void note(const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kevo-test-prompt-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    note("a.md", "---\ntitle: A\ntags: reduction softmax\nbottleneck: memory\nlang: cuda\n---\n"
                 "NOTE-A reductions that are memory-bound\n");
    note("b.md", "---\ntitle: B\ntags: gemm\nbottleneck: compute\nlang: cuda\n---\nNOTE-B gemm\n");
    note("c.md", "---\ntitle: C\ntags: any\nbottleneck: any\nlang: cuda\n---\nNOTE-C general\n");
    note("d.md", "---\ntitle: D\ntags: reduction\nbottleneck: memory\nlang: c\n---\nNOTE-D cpu\n");
    note("README.md", "how to write notes NOTE-README\n");
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) ? -1 : 0;
}

static void test_task_text_drops_holdouts(void **state)
{
    (void)state;
    char *t = kevo_prompt_task_text(TASK);
    assert_null(strstr(t, "100003"));
    assert_null(strstr(t, "holdout M"));
    assert_non_null(strstr(t, "// kevo size   M=4096 N=8192\n"));
    assert_non_null(strstr(t, "the holdout sizes are secret"));
    kevo_free(t);
}

static void test_improve_prompt(void **state)
{
    (void)state;
    const char *tags[] = { "reduction", "norm" };
    json_t *calib = json_pack("{s:{s:s, s:s, s:i, s:f, s:f, s:i}, s:{s:f, s:f, s:f, s:f}, s:{s:{s:f}}, "
                              "s:f}", "device", "name", "NVIDIA H100", "arch", "sm_90a", "sms", 132,
                              "l2_bytes", 5.2e7, "mem_bytes", 8.5e10, "clock_mhz", 1980,
                              "bandwidth", "best_bytes_per_s", 3.1e12, "read_bytes_per_s", 3.0e12,
                              "write_bytes_per_s", 3.1e12, "copy_bytes_per_s", 2.8e12, "peaks",
                              "fp32", "measured_flops_per_s", 6.5e13, "launch_floor_s", 1.9e-6);
    json_t *res = json_loads("{\"verdict\":\"ok\",\"workloads\":[{\"index\":0,"
                             "\"sizes\":{\"M\":4096,\"N\":8192},"
                             "\"verdict\":\"ok\",\"time\":{\"median_s\":1.2e-4},\"sol_fraction\":0.7,"
                             "\"gbps\":2200,\"tflops\":0.3,\"bytes\":2.7e8,\"flops\":3.3e7}],"
                             "\"resources\":[{\"kernel\":\"k\",\"regs\":40,\"static_smem\":0,"
                             "\"local_bytes\":16,\"block\":256,\"blocks_per_sm\":8}]}", 0, NULL);
    struct kevo_prompt_ctx c = { .template_dir = "prompts", .playbook_dir = dir,
                                 .task_text = TASK, .lang = "cuda", .tags = tags, .n_tags = 2,
                                 .calib = calib, .parent = "PARENT-SOURCE", .result = res,
                                 .siblings = "cand 4 (param): ok, 1.3x", .max_notes = 2 };
    char *sys = NULL, *usr = NULL, *why = NULL;
    if (kevo_prompt_build("improve", &c, &sys, &usr, &why) != KEVO_OK)
        fail_msg("%s", why ? why : "?");
    assert_non_null(strstr(sys, "SEARCH"));
    assert_null(strstr(usr, "{{"));
    assert_null(strstr(usr, "100003"));
    assert_non_null(strstr(usr, "PARENT-SOURCE"));
    assert_non_null(strstr(usr, "NVIDIA H100 (sm_90a): 132 SMs"));
    assert_non_null(strstr(usr, "DRAM 3100 GB/s"));
    assert_non_null(strstr(usr, "Verdict: ok"));
    assert_non_null(strstr(usr, "70% of SOL"));
    assert_non_null(strstr(usr, "memory-bound"));
    assert_non_null(strstr(usr, "40 registers/thread"));
    assert_non_null(strstr(usr, "<- spilling"));
    assert_non_null(strstr(usr, "cand 4 (param): ok, 1.3x"));
    /* notes: the tag-and-bottleneck match first, the general one second; no gemm, no C, no README */
    char *a = strstr(usr, "NOTE-A"), *cc = strstr(usr, "NOTE-C");
    assert_non_null(a);
    assert_non_null(cc);
    assert_true(a < cc);
    assert_null(strstr(usr, "NOTE-B"));
    assert_null(strstr(usr, "NOTE-D"));
    assert_null(strstr(usr, "NOTE-README"));
    assert_null(strstr(usr, "title:"));
    /* no note names exemplars: a format-1 playbook, chosen from as before them (recorded
     * runs replay), so no "chosen for" line and no budget */
    assert_null(strstr(usr, "(Chosen for"));
    kevo_free(sys);
    kevo_free(usr);
    /* a failing parent: the evidence and the compiler's output */
    json_decref(res);
    res = json_pack("{s:s, s:s, s:{s:s, s:i}, s:s}", "verdict", "mismatch", "message",
                    "y[17] = 1, expected 2", "evidence", "output", "y", "index", 17,
                    "compile_log", "warning: unused variable");
    c.result = res;
    assert_int_equal(kevo_prompt_build("fix", &c, &sys, &usr, &why), KEVO_OK);
    assert_non_null(strstr(usr, "Verdict: mismatch - y[17] = 1, expected 2"));
    assert_non_null(strstr(usr, "\"index\":17"));
    assert_non_null(strstr(usr, "warning: unused variable"));
    kevo_free(sys);
    kevo_free(usr);
    json_decref(res);
    json_decref(calib);
}

/* ---- the shipped playbook and its exemplars (ctl/playbook.h) ---- */

/* The prompt of op for the suite task at path (a parent for improve), its playbook
 * section cut to max_chars (0: the default): the user prompt (kevo_free). */
static char *suite_prompt(const char *path, const char *op, const char *parent, json_t *result,
                          size_t max_chars)
{
    struct kevo_task *t = NULL;
    char *msg = NULL, *sys = NULL, *usr = NULL, *why = NULL;

    if (kevo_task_load(path, &t, &msg) != KEVO_OK)
        fail_msg("%s", msg ? msg : path);
    struct kevo_prompt_ctx c = { .template_dir = "prompts", .playbook_dir = "docs/playbook",
                                 .task_text = t->source, .lang = "cuda",
                                 .tags = (const char *const *)t->tags, .n_tags = t->n_tags,
                                 .task = t, .parent = parent, .result = result,
                                 .max_chars = max_chars };
    if (kevo_prompt_build(op, &c, &sys, &usr, &why) != KEVO_OK)
        fail_msg("%s", why ? why : "?");
    kevo_free(sys);
    kevo_task_free(t);
    return usr;
}

/* The playbook section of a generate/improve prompt: from its heading to the next one. */
static size_t section_len(const char *usr)
{
    const char *s = strstr(usr, "## Notes that may help\n");
    assert_non_null(s);
    s += strlen("## Notes that may help\n");
    const char *e = strstr(s, "\nGive the whole candidate file.");
    if (!e)
        e = strstr(s, "\nFind the bottleneck");
    assert_non_null(e);
    return (size_t)(e - s);
}

static char *file_text(const char *path)
{
    FILE *f = fopen(path, "r");
    char *t = calloc(1, 1 << 20);
    assert_non_null(f);
    assert_non_null(t);
    assert_true(fread(t, 1, (1 << 20) - 1, f) > 0);
    fclose(f);
    return t;
}

/* A compute-bound bf16 GEMM gets the wgmma note and the bf16 GEMM exemplar's code; the
 * f32 GEMM gets the SIMT one. */
static void test_gemm_exemplar(void **state)
{
    (void)state;
    char *usr = suite_prompt("tasks/level1/matmul_bf16.cu", "generate", NULL, NULL, 0);
    assert_non_null(strstr(usr, "(Chosen for a compute-bound task; words: gemm bf16)"));
    char *note = strstr(usr, "### Hopper wgmma"), *ex = strstr(usr, "### Exemplar: "
                                                              "examples/seeds/matmul_bf16.cu\n");
    assert_non_null(note);
    assert_non_null(ex);
    assert_true(note < ex);
    assert_non_null(strstr(ex, "```cuda\n"));
    assert_non_null(strstr(ex, "wgmma.mma_async.sync.aligned"));
    assert_true(section_len(usr) <= KEVO_PLAYBOOK_CHARS + 200);
    kevo_free(usr);
    usr = suite_prompt("tasks/level1/matmul_f32.cu", "generate", NULL, NULL, 0);
    assert_non_null(strstr(usr, "### Exemplar: examples/seeds/matmul_f32.cu\n"));
    assert_null(strstr(usr, "examples/seeds/matmul_bf16.cu"));
    kevo_free(usr);
    /* the fused-epilogue GEMM and attention get their own, the largest exemplar included */
    usr = suite_prompt("tasks/level2/matmul_bias_gelu_bf16.cu", "generate", NULL, NULL, 0);
    assert_non_null(strstr(usr, "### Exemplar: examples/seeds/matmul_bias_gelu_bf16.cu\n"));
    kevo_free(usr);
    usr = suite_prompt("tasks/level3/causal_attention_bf16.cu", "generate", NULL, NULL, 0);
    assert_non_null(strstr(usr, "### Exemplar: examples/seeds/causal_attention_bf16.cu\n"));
    assert_non_null(strstr(usr, "cp.async.bulk.tensor"));
    assert_true(section_len(usr) <= KEVO_PLAYBOOK_CHARS + 200);
    kevo_free(usr);
}

/* Row reductions (memory-bound) get the row-reduction note and their own exemplar. */
static void test_row_reduction_exemplar(void **state)
{
    (void)state;
    const char *tasks[][2] = { { "tasks/level1/rmsnorm_f32.cu", "rmsnorm_f32.cu" },
                               { "tasks/level1/softmax_rows.cu", "softmax_rows.cu" } };
    for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++) {
        char *usr = suite_prompt(tasks[i][0], "generate", NULL, NULL, 0), want[128];
        assert_non_null(strstr(usr, "(Chosen for a memory-bound task"));
        snprintf(want, sizeof want, "### Exemplar: examples/seeds/%s\n", tasks[i][1]);
        if (!strstr(usr, want))
            fail_msg("%s: no '%s' in the prompt", tasks[i][0], want);
        assert_non_null(strstr(usr, "### Row reductions"));
        assert_null(strstr(usr, "### Hopper wgmma"));   /* compute notes stay out */
        kevo_free(usr);
    }
}

/* The budget holds: what does not fit is left out and named; the parent's own code is
 * never repeated as the exemplar. */
static void test_playbook_budget(void **state)
{
    (void)state;
    char *usr = suite_prompt("tasks/level1/matmul_bf16.cu", "generate", NULL, NULL, 3000);
    assert_true(section_len(usr) <= 3000 + 200);   /* + the "chosen for" and "left out" lines */
    assert_null(strstr(usr, "### Exemplar:"));
    assert_non_null(strstr(usr, "(left out for length: "));
    assert_non_null(strstr(usr, "exemplar examples/seeds/matmul_bf16.cu"));
    kevo_free(usr);
    /* an improve of the exemplar itself: the next best exemplar instead */
    char *seed = file_text("examples/seeds/rmsnorm_f32.cu");
    json_t *res = json_pack("{s:s}", "verdict", "ok");
    usr = suite_prompt("tasks/level1/rmsnorm_f32.cu", "improve", seed, res, 0);
    char *notes = strstr(usr, "## Notes that may help");
    assert_non_null(notes);
    assert_null(strstr(notes, "### Exemplar: examples/seeds/rmsnorm_f32.cu"));
    assert_non_null(strstr(notes, "### Exemplar: examples/seeds/"));
    kevo_free(usr);
    json_decref(res);
    free(seed);
}

/* A task's `// kevo notes` brings the notes it names, first, whatever their tags. */
static void test_asked_notes(void **state)
{
    (void)state;
    char path[128], *usr;
    const char *src = "// kevo task   my_rows\n// kevo tags   reduction\n"
                      "// kevo notes  scan-and-sort-patterns\n// kevo size   M=4096 N=8192\n"
                      "// kevo input  x f32[M,N] normal(0,1)\n// kevo output y f32[M,N]\n"
                      "// kevo bytes  8*M*N\n// kevo launch k grid=M block=256 (x, y, N)\n"
                      "extern \"C\" __global__ void k(const float *x, float *y, int n) {}\n";
    snprintf(path, sizeof path, "%s/my_rows.cu", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(src, f);
    fclose(f);
    usr = suite_prompt(path, "generate", NULL, NULL, 0);
    char *scan = strstr(usr, "### Scan"), *rows = strstr(usr, "### Row reductions");
    assert_non_null(scan);
    assert_non_null(rows);
    assert_true(scan < rows);
    kevo_free(usr);
}

/* A profile that finds the parent memory-bound lets memory notes compete for a GEMM. */
static void test_profiled_bound(void **state)
{
    (void)state;
    json_t *res = json_loads("{\"verdict\":\"ok\",\"profile\":{\"tool\":\"ncu\","
                             "\"kernels\":[{\"name\":\"k\",\"time_us\":900,"
                             "\"dram_pct_of_peak\":92,\"sm_pct\":20}]}}", 0, NULL);
    assert_non_null(res);
    assert_string_equal(kevo_playbook_profiled(json_object_get(res, "profile")), "memory");
    char *usr = suite_prompt("tasks/level1/matmul_f32.cu", "improve", "PARENT", res, 0);
    assert_non_null(strstr(usr, "(Chosen for a compute-bound task whose parent is "
                                "memory-bound; words: gemm fp32)"));
    kevo_free(usr);
    json_decref(res);
    assert_null(kevo_playbook_profiled(NULL));
}

static void test_bad_templates(void **state)
{
    (void)state;
    struct kevo_prompt_ctx c = { .template_dir = dir, .task_text = TASK };
    char *sys = NULL, *usr = NULL, *why = NULL;
    assert_int_equal(kevo_prompt_build("improve", &c, &sys, &usr, &why), KEVO_ERR_NOTFOUND);
    assert_non_null(strstr(why, "system.md: cannot read"));
    kevo_free(why);
    note("system.md", "system\n");
    note("odd.md", "{{task}} and {{secret_seed}}\n");
    assert_int_equal(kevo_prompt_build("odd", &c, &sys, &usr, &why), KEVO_ERR_PARSE);
    assert_non_null(strstr(why, "odd.md: unknown placeholder {{secret_seed}}"));
    assert_null(sys);
    assert_null(usr);
    kevo_free(why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_text_drops_holdouts),
        cmocka_unit_test(test_improve_prompt),
        cmocka_unit_test(test_gemm_exemplar),
        cmocka_unit_test(test_row_reduction_exemplar),
        cmocka_unit_test(test_playbook_budget),
        cmocka_unit_test(test_asked_notes),
        cmocka_unit_test(test_profiled_bound),
        cmocka_unit_test(test_bad_templates),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

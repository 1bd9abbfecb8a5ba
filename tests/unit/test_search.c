/*
 * test_search - the search's pieces without workers: genomes (src/genome.c), the islands
 * and grids (src/search.c), the operators (src/ops.c) and the reference-as-candidate
 * conversion (src/run.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "ctl/genome.h"
#include "base/mem.h"
#include "ctl/ops.h"
#include "ctl/run.h"
#include "ctl/search.h"
#include "core/task.h"

#include <string.h>

static const char TASK[] =
    "// kevo task t\n// kevo size N=1024\n// kevo size N=100\n// kevo holdout N=77\n"
    "// kevo input x f32[N] normal(0,1)\n// kevo output y f32[N]\n// kevo bytes 8*N\n"
    "// kevo launch ref grid=cdiv(N,256) block=256 (x, y, N)\n"
    "extern \"C\" __global__ void ref(const float *x, float *y, int n) {}\n";

static const char CAND[] =
    "// kevo param THREADS 256 64 128 512\n"
    "// kevo param UNROLL 2 1 4\n"
    "// kevo launch k grid=cdiv(N,THREADS) block=THREADS (x, y, N)\n"
    "/* __shared__ in a comment is not a kernel feature */\n"
    "extern \"C\" __global__ void k(const float *x, float *y, int n) { float4 v; }\n";

static struct kevo_task *task;

static int setup(void **state)
{
    char *m = NULL;
    (void)state;
    return kevo_task_parse("t.cu", TASK, strlen(TASK), &task, &m) == KEVO_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    kevo_task_free(task);
    return 0;
}

static void genome(struct kevo_genome *g, const char *text)
{
    char *m = NULL;
    if (kevo_genome_from_text(task, "c.cu", text, strlen(text), g, &m) != KEVO_OK)
        fail_msg("%s", m ? m : "?");
}

static void test_genome_text_is_canonical(void **state)
{
    struct kevo_genome g, h;
    char *t = NULL, k1[KEVO_HASH_HEX], k2[KEVO_HASH_HEX];
    size_t n;
    (void)state;
    genome(&g, CAND);
    /* values sorted, the first listed chosen; THREADS used by the launch geometry */
    assert_int_equal(g.n_params, 2);
    assert_int_equal(g.values[0][0], 64);
    assert_int_equal(g.values[0][g.choice[0]], 256);
    assert_int_equal(g.geometry[0], 1);
    assert_int_equal(g.geometry[1], 0);
    g.choice[0] = 0;   /* THREADS = 64 */
    assert_int_equal(kevo_genome_set_flag(&g, "-use_fast_math", 1), KEVO_OK);
    assert_int_equal(kevo_genome_text(&g, &t, &n), KEVO_OK);
    assert_non_null(strstr(t, "// kevo param THREADS 64 128 256 512\n"));
    assert_non_null(strstr(t, "// kevo param UNROLL 2 1 4\n"));
    assert_non_null(strstr(t, "// kevo flags -use_fast_math\n"));
    /* read back, the same configuration has the same text and key */
    genome(&h, t);
    assert_int_equal(kevo_genome_key(&g, k1), KEVO_OK);
    assert_int_equal(kevo_genome_key(&h, k2), KEVO_OK);
    assert_string_equal(k1, k2);
    assert_true(kevo_genome_has_flag(&h, "-use_fast_math"));
    h.choice[1] = 0;
    assert_int_equal(kevo_genome_key(&h, k2), KEVO_OK);
    assert_string_not_equal(k1, k2);
    kevo_free(t);
    kevo_genome_clear(&g);
    kevo_genome_clear(&h);
    kevo_genome_clear(NULL);
}

/* The op context's "seen" set: keys proposed so far. */
struct seen {
    char keys[64][KEVO_HASH_HEX];
    int n;
};

static int seen_fn(void *u, const char *key)
{
    struct seen *s = u;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->keys[i], key) == 0)
            return 1;
    return 0;
}

/* Review findings: a flag added then removed, or flags set in another order, is the same
 * configuration and must have the same key; crossover works across different choices. */
static void test_one_configuration_one_key(void **state)
{
    struct kevo_genome g, h, a, child;
    char k0[KEVO_HASH_HEX], k1[KEVO_HASH_HEX], *t = NULL;
    size_t n;
    (void)state;
    genome(&g, CAND);
    assert_int_equal(kevo_genome_key(&g, k0), KEVO_OK);
    assert_int_equal(kevo_genome_set_flag(&g, "-use_fast_math", 1), KEVO_OK);
    assert_int_equal(kevo_genome_text(&g, &t, &n), KEVO_OK);
    genome(&h, t);                       /* the materialized text read back */
    kevo_free(t);
    assert_int_equal(kevo_genome_set_flag(&h, "-use_fast_math", 0), KEVO_OK);
    assert_int_equal(kevo_genome_key(&h, k1), KEVO_OK);
    assert_string_equal(k0, k1);         /* added then removed: the seed again */
    assert_int_equal(kevo_genome_set_flag(&g, "-restrict", 1), KEVO_OK);
    assert_int_equal(kevo_genome_set_flag(&h, "-restrict", 1), KEVO_OK);
    assert_int_equal(kevo_genome_set_flag(&h, "-use_fast_math", 1), KEVO_OK);
    assert_int_equal(kevo_genome_key(&g, k0), KEVO_OK);
    assert_int_equal(kevo_genome_key(&h, k1), KEVO_OK);
    assert_string_equal(k0, k1);         /* the same flags in another order */
    /* crossover between parents of one source with different choices */
    genome(&a, CAND);
    a.choice[0] = 0;
    a.choice[1] = 2;
    assert_true(kevo_genome_same_source(&g, &a));
    int n_ops;
    const struct kevo_operator *const *ops = kevo_ops_builtin(&n_ops);
    struct seen seen = { .n = 0 };
    struct kevo_rng rng = { 7 };
    struct kevo_op_ctx c = { &rng, seen_fn, &seen };
    for (int i = 0; i < n_ops; i++)
        if (strcmp(ops[i]->name, "crossover") == 0) {
            assert_int_equal(ops[i]->propose(&c, &g, &a, &child), KEVO_OK);
            kevo_genome_clear(&child);
        }
    kevo_genome_clear(&g);
    kevo_genome_clear(&h);
    kevo_genome_clear(&a);
}

static void test_descriptors(void **state)
{
    struct kevo_genome g;
    struct kevo_desc d;
    (void)state;
    genome(&g, CAND);
    json_t *res = json_pack("{s:s, s:[{s:i}]}", "verdict", "ok", "resources", "regs", 40);
    struct kevo_result rs;
    char *why = NULL;
    assert_int_equal(kevo_result_decode(res, &rs, &why), KEVO_OK);
    kevo_desc_of(&g, &rs, &d);
    kevo_result_clear(&rs);
    assert_int_equal(d.mem, 1);     /* float4 in code; __shared__ only in a comment */
    assert_int_equal(d.comp, 0);
    assert_int_equal(d.res, 1);     /* 40 registers */
    assert_int_equal(kevo_desc_cell(&d), (1 * KEVO_DESC_COMP + 0) * KEVO_DESC_RES + 1);
    json_decref(res);
    kevo_genome_clear(&g);
}

static void test_grid_migration_and_parents(void **state)
{
    struct kevo_search_cfg c;
    struct kevo_search *s = NULL;
    (void)state;
    kevo_search_cfg_default(&c);
    c.migrate_every = 3;
    assert_int_equal(kevo_search_new(&c, &s), KEVO_OK);
    assert_int_equal(kevo_search_parent(s, 0), 0);             /* empty */
    assert_int_equal(kevo_search_place(s, 0, 5, 11, 2.0), 1);  /* first: the best */
    assert_int_equal(kevo_search_place(s, 0, 5, 12, 3.0), 0);  /* worse: not the elite */
    assert_int_equal(kevo_search_cell(s, 0, 5)->id, 11);
    assert_int_equal(kevo_search_place(s, 0, 7, 13, 1.0), 1);
    assert_int_equal(kevo_search_best(s)->id, 13);
    assert_int_equal(kevo_search_occupied(s, 0), 2);
    assert_int_equal(kevo_search_occupied(s, 1), 0);
    for (int i = 0; i < 50; i++) {
        int64_t p = kevo_search_parent(s, 0);
        assert_true(p == 11 || p == 13);
        assert_int_equal(kevo_search_mate(s, 0, p), p == 11 ? 13 : 11);
    }
    assert_int_equal(kevo_search_tick(s), 0);
    assert_int_equal(kevo_search_tick(s), 0);
    assert_int_equal(kevo_search_tick(s), 1);                   /* island 0's best moves */
    assert_int_equal(kevo_search_cell(s, 1, 7)->id, 13);
    assert_int_equal(kevo_search_next_island(s), 0);
    assert_int_equal(kevo_search_next_island(s), 1);
    assert_int_equal(kevo_search_next_island(s), 0);
    kevo_search_free(s);
    c.n_islands = 0;
    assert_int_equal(kevo_search_new(&c, &s), KEVO_ERR_INVALID);
}

static void test_operator_weights(void **state)
{
    struct kevo_search_cfg c;
    struct kevo_search *s = NULL;
    int hits[2] = { 0, 0 };
    (void)state;
    kevo_search_cfg_default(&c);
    assert_int_equal(kevo_search_new(&c, &s), KEVO_OK);
    kevo_search_op_register(s, 0, "good", 1.0);
    kevo_search_op_register(s, 1, "bad", 1.0);
    for (int i = 0; i < 20; i++) {
        kevo_search_op_proposed(s, 0);
        kevo_search_op_result(s, 0, 1, 1);
        kevo_search_op_proposed(s, 1);
        kevo_search_op_result(s, 1, 0, 0);
    }
    for (int i = 0; i < 2000; i++)
        hits[kevo_search_op_pick(s, 0)]++;
    assert_true(hits[0] > 2 * hits[1]);      /* success raises the weight */
    assert_true(hits[1] > 0);                /* but never to the exclusion of the others */
    assert_int_equal(kevo_search_op_pick(s, 1u), 1);
    assert_int_equal(kevo_search_op_pick(s, 3u), -1);
    kevo_search_free(s);
}

static void test_sweep_covers_each_param_once(void **state)
{
    int n_ops;
    const struct kevo_operator *const *ops = kevo_ops_builtin(&n_ops);
    const struct kevo_operator *sweep = NULL;
    struct kevo_rng rng = { 42 };
    struct seen seen = { .n = 0 };
    struct kevo_op_ctx c = { &rng, seen_fn, &seen };
    struct kevo_genome g, child;
    (void)state;
    for (int i = 0; i < n_ops; i++)
        if (strcmp(ops[i]->name, "sweep") == 0)
            sweep = ops[i];
    assert_non_null(sweep);
    genome(&g, CAND);
    assert_int_equal(kevo_genome_key(&g, seen.keys[seen.n++]), KEVO_OK);
    /* from the seed: 3 other THREADS + 2 other UNROLL, each once, then nothing new */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sweep->propose(&c, &g, NULL, &child), KEVO_OK);
        assert_int_equal(kevo_genome_key(&child, seen.keys[seen.n]), KEVO_OK);
        assert_false(seen_fn(&seen, seen.keys[seen.n]));
        seen.n++;
        kevo_genome_clear(&child);
    }
    assert_int_equal(sweep->propose(&c, &g, NULL, &child), KEVO_ERR_NOTFOUND);
    /* param and flags still find new children; crossover needs a second parent */
    for (int i = 0; i < n_ops; i++) {
        if (strcmp(ops[i]->name, "crossover") == 0) {
            assert_int_equal(ops[i]->propose(&c, &g, NULL, &child), KEVO_ERR_NOTFOUND);
        } else if (strcmp(ops[i]->name, "flags") == 0) {
            assert_int_equal(ops[i]->propose(&c, &g, NULL, &child), KEVO_OK);
            assert_int_equal(child.n_flags, 1);
            kevo_genome_clear(&child);
        }
    }
    kevo_genome_clear(&g);
}

/* pair moves exactly two params; with one movable param it has nothing to offer. */
static void test_pair_moves_two(void **state)
{
    int n_ops;
    const struct kevo_operator *const *ops = kevo_ops_builtin(&n_ops);
    const struct kevo_operator *pair = NULL;
    struct kevo_rng rng = { 7 };
    struct seen seen = { .n = 0 };
    struct kevo_op_ctx c = { &rng, seen_fn, &seen };
    struct kevo_genome g, child;
    (void)state;
    for (int i = 0; i < n_ops; i++)
        if (strcmp(ops[i]->name, "pair") == 0)
            pair = ops[i];
    assert_non_null(pair);
    genome(&g, CAND);
    assert_true(g.n_params == 2);
    for (int k = 0; k < 20; k++) {
        assert_int_equal(pair->propose(&c, &g, NULL, &child), KEVO_OK);
        int moved = 0;
        for (int i = 0; i < g.n_params; i++)
            moved += child.choice[i] != g.choice[i];
        assert_int_equal(moved, 2);
        kevo_genome_clear(&child);
    }
    g.n_values[1] = 1;   /* one movable param left */
    assert_int_equal(pair->propose(&c, &g, NULL, &child), KEVO_ERR_NOTFOUND);
    kevo_genome_clear(&g);
}

static void test_reference_as_candidate(void **state)
{
    char *t = NULL, *m = NULL;
    size_t n = 0;
    struct kevo_task *c = NULL;
    (void)state;
    assert_int_equal(kevo_run_reference_candidate(TASK, strlen(TASK), &t, &n), KEVO_OK);
    assert_non_null(strstr(t, "// task: size N=1024\n"));
    assert_null(strstr(t, "holdout"));
    assert_non_null(strstr(t, "// kevo launch ref grid"));
    if (kevo_candidate_parse(task, "ref.cu", t, n, &c, &m) != KEVO_OK)
        fail_msg("%s", m ? m : "?");
    assert_int_equal(c->n_launches, 1);
    kevo_task_free(c);
    kevo_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_genome_text_is_canonical),
        cmocka_unit_test(test_one_configuration_one_key),
        cmocka_unit_test(test_descriptors),
        cmocka_unit_test(test_grid_migration_and_parents),
        cmocka_unit_test(test_operator_weights),
        cmocka_unit_test(test_sweep_covers_each_param_once),
        cmocka_unit_test(test_pair_moves_two),
        cmocka_unit_test(test_reference_as_candidate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

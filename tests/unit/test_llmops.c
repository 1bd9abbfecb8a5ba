/*
 * test_llmops - the LLM operators' call queue and cost account (src/llmops.c), in replay
 * mode (no threads, no network: calls wait until taken by prompt hash), which makes the
 * accounting observable step by step: a call holds its worst case in reserve from submit
 * until the controller settles it; the cap refuses a call whose reserve would pass it;
 * settling twice counts once; a cached call reserves nothing; calls are taken by their
 * submission number, in any order; prompt hashes depend on the
 * model and the prompt but not on the URL; model choice follows the measured success.
 */
#include "testutil.h"

#include "ctl/llm.h"
#include "ctl/llmops.h"
#include "base/mem.h"

#include <math.h>
#include <string.h>

struct fix {
    struct kevo_llm_model m[2];
    struct kevo_llmops *o;
};

static void dummy_done(void *user, struct kevo_llm_call *c)
{
    (void)user;
    kevo_llm_call_free(c);
}

/* Two models (1 per million tokens in, 10 out), 100 tokens of output, a cap. */
static struct kevo_llmops *ops_new(struct fix *f, double cap)
{
    struct kevo_llmops_cfg cfg;
    char *msg = NULL;
    assert_int_equal(kevo_llm_model_parse("openai:a@http://127.0.0.1:1/v1", &f->m[0], &msg),
                     KEVO_OK);
    assert_int_equal(kevo_llm_model_parse("openai:b@http://127.0.0.1:1/v1*3", &f->m[1], &msg),
                     KEVO_OK);
    for (int i = 0; i < 2; i++) {
        f->m[i].price_in = 1.0;
        f->m[i].price_out = 10.0;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.n_models = 2;
    cfg.models = f->m;
    cfg.max_concurrent = 2;
    kevo_llm_limits_default(&cfg.limits);
    cfg.cost_cap = cap;
    cfg.temperature = 0.5;
    cfg.max_tokens = 100;
    cfg.replay = 1;
    assert_int_equal(kevo_llmops_new(&cfg, dummy_done, NULL, &f->o), KEVO_OK);
    return f->o;
}

static void fix_free(struct fix *f)
{
    kevo_llmops_free(f->o);
    for (int i = 0; i < 2; i++)
        kevo_llm_model_clear(&f->m[i]);
}

/* A call of model 0 with a prompt of len bytes of c. */
static struct kevo_llm_call *call(struct kevo_llmops *o, size_t len, char c)
{
    struct kevo_llm_call *x = kevo_calloc(1, sizeof *x);
    assert_non_null(x);
    x->user = kevo_malloc(len + 1);
    memset(x->user, c, len);
    x->user[len] = '\0';
    assert_int_equal(kevo_llmops_hash(o, x), KEVO_OK);
    return x;
}

static void test_reserve_and_settle(void **state)
{
    struct fix f;
    (void)state;
    memset(&f, 0, sizeof f);
    /* worst case of a call: (999 + 1) tokens in x 1 + 100 out x 10 = 2000 / 1e6 */
    struct kevo_llmops *o = ops_new(&f, 0.005);
    struct kevo_llm_call *a = call(o, 999, 'a'), *b = call(o, 999, 'b'), *c = call(o, 999, 'c');
    assert_string_not_equal(a->prompt_hash, b->prompt_hash);
    a->sub = 1;
    b->sub = 2;
    c->sub = 3;
    assert_int_equal(kevo_llmops_submit(o, a), KEVO_OK);
    assert_int_equal(kevo_llmops_submit(o, b), KEVO_OK);
    /* 0.004 held: a third worst case would pass 0.005 */
    assert_int_equal(kevo_llmops_submit(o, c), KEVO_ERR_TOOBIG);
    assert_int_equal(kevo_llmops_in_flight(o), 2);
    /* nothing runs them (replay): taken by submission number, in any order */
    struct kevo_llm_call *tb = kevo_llmops_take(o, 2);
    assert_non_null(tb);
    assert_null(kevo_llmops_take(o, 2));
    assert_true(fabs(tb->reserve - 0.002) < 1e-12);
    tb->cost = 0.0005;
    /* finished but not settled: the reserve still holds */
    struct kevo_llm_call *d = call(o, 999, 'd');
    assert_int_equal(kevo_llmops_submit(o, d), KEVO_ERR_TOOBIG);
    kevo_llmops_settle(o, tb);
    kevo_llmops_settle(o, tb);   /* once */
    assert_true(fabs(kevo_llmops_spent(o) - 0.0005) < 1e-12);
    d = call(o, 999, 'd');
    assert_int_equal(kevo_llmops_submit(o, d), KEVO_OK);   /* 0.0005 + 0.004 <= 0.005 */
    /* a cached call reserves nothing */
    struct kevo_llm_call *e = call(o, 999, 'e');
    e->from_cache = 1;
    assert_int_equal(kevo_llmops_submit(o, e), KEVO_OK);
    assert_int_equal(kevo_llmops_in_flight(o), 3);
    struct kevo_llm_call *ta = kevo_llmops_take(o, 1);
    assert_non_null(ta);
    ta->cost = 0.001;
    kevo_llmops_settle(o, ta);
    assert_true(fabs(kevo_llmops_spent(o) - 0.0015) < 1e-12);
    kevo_llm_call_free(ta);
    kevo_llm_call_free(tb);
    fix_free(&f);   /* drops the calls still waiting */
}

static void test_hash_and_models(void **state)
{
    struct fix f;
    (void)state;
    memset(&f, 0, sizeof f);
    struct kevo_llmops *o = ops_new(&f, 0);
    struct kevo_llm_call *a = call(o, 10, 'x'), *b = call(o, 10, 'x');
    assert_string_equal(a->prompt_hash, b->prompt_hash);
    b->model = 1;
    assert_int_equal(kevo_llmops_hash(o, b), KEVO_OK);
    assert_string_not_equal(a->prompt_hash, b->prompt_hash);
    assert_string_equal(kevo_llmops_model_name(o, 1), "openai:b@http://127.0.0.1:1/v1");
    assert_string_equal(kevo_llmops_model_name(o, 7), "?");
    kevo_llm_call_free(a);
    kevo_llm_call_free(b);
    /* weights 1 and 3: u below 1/4 picks a */
    assert_int_equal(kevo_llmops_pick_model(o, 0.2), 0);
    assert_int_equal(kevo_llmops_pick_model(o, 0.3), 1);
    /* a keeps improving, b keeps failing: a's share grows past a half */
    for (int i = 0; i < 40; i++) {
        kevo_llmops_model_result(o, 0, 1, 1);
        kevo_llmops_model_result(o, 1, 0, 0);
    }
    assert_int_equal(kevo_llmops_pick_model(o, 0.5), 0);
    kevo_llmops_model_result(o, 9, 1, 1);   /* no such model: ignored */
    fix_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reserve_and_settle),
        cmocka_unit_test(test_hash_and_models),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_result - core/result: decoding the worker's eval result document (a real `ok`
 * result with workloads, timings and resources; every verdict name; what is refused: an
 * unknown or missing verdict, a non-object, a workload without an index; "nan"/"inf"
 * strings; empty arrays), kevo_result_wl_at, kevo_result_clear and kevo_result_doc_new.
 */
#include "testutil.h"
#include "base/mem.h"
#include "core/result.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A timed `ok` result as the worker writes it (docs/eval-json.md), one holdout workload. */
static const char OK_DOC[] =
    "{\"verdict\": \"ok\", \"message\": \"\", \"evidence\": {}, \"compile_log\": \"\","
    " \"resources\": [{\"kernel\": \"axpy_fast\", \"n_params\": 5, \"regs\": 16,"
    "   \"static_smem\": 0, \"local_bytes\": 8, \"max_threads_per_block\": 1024,"
    "   \"block\": 256, \"smem\": 0, \"blocks_per_sm\": 8},"
    "  {\"kernel\": \"tail\", \"regs\": 4}],"
    " \"workloads\": ["
    "  {\"index\": 0, \"holdout\": false, \"sizes\": {\"N\": 16777216}, \"verdict\": \"ok\","
    "   \"time\": {\"median_s\": 6.02e-05, \"min_s\": 5.98e-05, \"p20_s\": 6.0e-05,"
    "     \"p80_s\": 6.05e-05, \"noise\": 0.006, \"count\": 10, \"capped\": false,"
    "     \"batch\": 1, \"sm_clock_mhz\": 1980.0, \"sets\": 2, \"warmup\": 168},"
    "   \"ref_time\": {\"median_s\": 1.21e-04, \"count\": 12, \"capped\": true, \"batch\": 3},"
    "   \"speedup\": 2.01, \"bytes\": 201326592.0, \"flops\": 33554432, \"gbps\": 3344.3,"
    "   \"tflops\": 0.557, \"t_sol_s\": 5.9e-05, \"sol_fraction\": 0.98,"
    "   \"verify_s\": 0.1, \"time_s\": 0.5},"
    "  {\"index\": 3, \"holdout\": true, \"sizes\": {\"N\": 4099}, \"verdict\": \"ok\"}],"
    " \"phases_s\": {\"compile\": 0.2, \"verify\": 0.1, \"time\": 0.5},"
    " \"request_s\": 1.25, \"path\": \"cand.cu\"}";

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j)
        fail_msg("test JSON: %s at %d", e.text, e.position);
    return j;
}

/* Decode text; the status, with *out_msg checked against want_msg (NULL: no message). */
static enum kevo_status decode_text(const char *text, struct kevo_result *r, const char *want_msg)
{
    json_t *doc = load(text);
    char *msg = (char *)"not cleared";
    enum kevo_status st = kevo_result_decode(doc, r, &msg);

    json_decref(doc);   /* a decoded result holds its own reference */
    if (want_msg) {
        assert_non_null(msg);
        if (!strstr(msg, want_msg))
            fail_msg("message \"%s\" lacks \"%s\"", msg, want_msg);
    } else {
        assert_null(msg);
    }
    kevo_free(msg);
    return st;
}

/* A failed decode leaves the result clear. */
static void assert_clear(const struct kevo_result *r)
{
    assert_null(r->doc);
    assert_null(r->wl);
    assert_null(r->res);
    assert_int_equal(r->n_wl, 0);
    assert_int_equal(r->n_res, 0);
}

static void test_ok_document(void **state)
{
    (void)state;
    struct kevo_result r;

    assert_int_equal(decode_text(OK_DOC, &r, NULL), KEVO_OK);
    assert_int_equal(r.verdict, KEVO_VERDICT_OK);
    assert_string_equal(r.message, "");
    assert_true(json_is_object(r.evidence) && json_object_size(r.evidence) == 0);
    assert_true(r.request_s == 1.25);
    assert_non_null(r.doc);
    assert_string_equal(json_string_value(json_object_get(r.doc, "path")), "cand.cu");

    assert_int_equal(r.n_wl, 2);
    const struct kevo_result_wl *w = &r.wl[0];
    assert_int_equal(w->index, 0);
    assert_false(w->holdout);
    assert_int_equal(w->verdict, KEVO_VERDICT_OK);
    assert_string_equal(w->message, "");
    assert_null(w->evidence);
    assert_int_equal(json_integer_value(json_object_get(w->sizes, "N")), 16777216);
    assert_true(w->time.present);
    assert_true(w->time.median_s == 6.02e-05 && w->time.min_s == 5.98e-05);
    assert_true(w->time.p20_s == 6.0e-05 && w->time.p80_s == 6.05e-05);
    assert_true(w->time.noise == 0.006 && w->time.sm_clock_mhz == 1980.0);
    assert_int_equal(w->time.count, 10);
    assert_int_equal(w->time.batch, 1);
    assert_false(w->time.capped);
    assert_true(w->ref_time.present);
    assert_true(w->ref_time.median_s == 1.21e-04 && w->ref_time.min_s == 0);
    assert_int_equal(w->ref_time.count, 12);
    assert_int_equal(w->ref_time.batch, 3);
    assert_true(w->ref_time.capped);
    assert_true(w->speedup == 2.01 && w->gbps == 3344.3 && w->tflops == 0.557);
    assert_true(w->t_sol_s == 5.9e-05 && w->sol_fraction == 0.98);
    assert_true(w->bytes == 201326592.0 && w->flops == 33554432.0);   /* an integer reads too */

    w = &r.wl[1];   /* untimed holdout: no figures */
    assert_int_equal(w->index, 3);
    assert_true(w->holdout);
    assert_false(w->time.present);
    assert_false(w->ref_time.present);
    assert_true(w->time.median_s == 0 && w->speedup == 0 && w->sol_fraction == 0);

    assert_int_equal(r.n_res, 2);
    assert_string_equal(r.res[0].kernel, "axpy_fast");
    assert_int_equal(r.res[0].n_params, 5);
    assert_int_equal(r.res[0].regs, 16);
    assert_int_equal(r.res[0].static_smem, 0);
    assert_int_equal(r.res[0].local_bytes, 8);
    assert_int_equal(r.res[0].max_threads_per_block, 1024);
    assert_int_equal(r.res[0].block, 256);
    assert_int_equal(r.res[0].smem, 0);
    assert_int_equal(r.res[0].blocks_per_sm, 8);
    assert_string_equal(r.res[1].kernel, "tail");   /* absent figures: 0, launch ones -1 */
    assert_int_equal(r.res[1].regs, 4);
    assert_int_equal(r.res[1].n_params, 0);
    assert_int_equal(r.res[1].block, -1);
    assert_int_equal(r.res[1].smem, -1);
    assert_int_equal(r.res[1].blocks_per_sm, -1);
    kevo_result_clear(&r);
    assert_clear(&r);
}

static void test_every_verdict(void **state)
{
    (void)state;
    for (int v = 0; v < KEVO_VERDICT_COUNT; v++) {
        char text[512];
        struct kevo_result r;
        const char *name = kevo_verdict_name((enum kevo_verdict)v);

        snprintf(text, sizeof text, "{\"verdict\": \"%s\", \"message\": \"m%d\", \"workloads\":"
                 " [{\"index\": 1, \"verdict\": \"%s\", \"evidence\": {\"k\": %d}}]}",
                 name, v, name, v);
        assert_int_equal(decode_text(text, &r, NULL), KEVO_OK);
        assert_int_equal(r.verdict, v);
        assert_int_equal(r.wl[0].verdict, v);
        assert_int_equal(json_integer_value(json_object_get(r.wl[0].evidence, "k")), v);
        snprintf(text, sizeof text, "m%d", v);
        assert_string_equal(r.message, text);
        assert_null(r.evidence);
        kevo_result_clear(&r);

        /* and back: a document kevo writes itself decodes to the same verdict */
        json_t *doc = kevo_result_doc_new((enum kevo_verdict)v, "why", NULL);
        char *msg = NULL;
        assert_non_null(doc);
        assert_string_equal(json_string_value(json_object_get(doc, "verdict")), name);
        assert_int_equal(kevo_result_decode(doc, &r, &msg), KEVO_OK);
        assert_int_equal(r.verdict, v);
        assert_string_equal(r.message, "why");
        assert_true(json_is_object(r.evidence) && json_object_size(r.evidence) == 0);
        assert_int_equal(r.n_wl, 0);
        kevo_result_clear(&r);
        json_decref(doc);
    }
}

static void test_refused(void **state)
{
    (void)state;
    struct kevo_result r;
    char *msg = (char *)"not cleared";

    assert_int_equal(decode_text("{\"verdict\": \"fast\"}", &r, "unknown verdict \"fast\""),
                     KEVO_ERR_PARSE);
    assert_clear(&r);
    assert_int_equal(decode_text("{\"verdict\": \"OK\"}", &r, "unknown verdict"),
                     KEVO_ERR_PARSE);   /* names are exact */
    assert_int_equal(decode_text("{\"verdict\": \"error\", \"message\": \"x\"}", &r,
                                 "unknown verdict \"error\""), KEVO_ERR_PARSE);
    /* kevo's own failure (docs/eval-json.md): no verdict at all */
    assert_int_equal(decode_text("{\"error\": \"parse error\", \"message\": \"t.cu:7\"}", &r,
                                 "verdict: missing"), KEVO_ERR_PARSE);
    assert_clear(&r);
    assert_int_equal(decode_text("{\"verdict\": 0}", &r, "verdict: missing or not a string"),
                     KEVO_ERR_PARSE);
    assert_int_equal(decode_text("[\"ok\"]", &r, "not a JSON object"), KEVO_ERR_PARSE);
    assert_int_equal(decode_text("\"ok\"", &r, "not a JSON object"), KEVO_ERR_PARSE);
    assert_int_equal(kevo_result_decode(NULL, &r, &msg), KEVO_ERR_PARSE);
    assert_non_null(msg);
    kevo_free(msg);
    assert_clear(&r);

    /* workloads: an integer index and a known verdict each */
    assert_int_equal(decode_text("{\"verdict\": \"ok\", \"workloads\": [{\"index\": 0, "
                                 "\"verdict\": \"ok\"}, {\"verdict\": \"ok\"}]}", &r,
                                 "workloads[1].index"), KEVO_ERR_PARSE);
    assert_clear(&r);
    assert_int_equal(decode_text("{\"verdict\": \"ok\", \"workloads\": [{\"index\": \"0\", "
                                 "\"verdict\": \"ok\"}]}", &r, "workloads[0].index"),
                     KEVO_ERR_PARSE);
    assert_int_equal(decode_text("{\"verdict\": \"ok\", \"workloads\": [{\"index\": -1, "
                                 "\"verdict\": \"ok\"}]}", &r, "workloads[0].index"),
                     KEVO_ERR_PARSE);
    assert_int_equal(decode_text("{\"verdict\": \"ok\", \"workloads\": [{\"index\": 1.0, "
                                 "\"verdict\": \"ok\"}]}", &r, "workloads[0].index"),
                     KEVO_ERR_PARSE);
    assert_int_equal(decode_text("{\"verdict\": \"ok\", \"workloads\": [7]}", &r,
                                 "workloads[0].index"), KEVO_ERR_PARSE);
    assert_int_equal(decode_text("{\"verdict\": \"ok\", \"workloads\": [{\"index\": 2}]}", &r,
                                 "workloads[0].verdict: missing"), KEVO_ERR_PARSE);
    assert_int_equal(decode_text("{\"verdict\": \"ok\", \"workloads\": [{\"index\": 2, "
                                 "\"verdict\": \"slow\"}]}", &r,
                                 "workloads[0].verdict: unknown verdict \"slow\""),
                     KEVO_ERR_PARSE);
    assert_int_equal(decode_text("{\"verdict\": \"ok\", \"workloads\": {}}", &r,
                                 "workloads: not an array"), KEVO_ERR_PARSE);
    assert_clear(&r);
}

/* The device was lost mid-workload (eval.c phase_verify): the worker's crash leaves that
 * workload without a verdict; it reads as the document's, and the rest is kept. */
static void test_device_lost_workload(void **state)
{
    (void)state;
    struct kevo_result r;
    char *msg = NULL;
    json_t *doc = json_loads("{\"verdict\": \"crash\", \"message\": \"the device context was "
                             "lost\", \"workloads\": [{\"index\": 0, \"verdict\": \"ok\"}, "
                             "{\"index\": 1, \"sizes\": {\"N\": 7}}], \"request_s\": 0.5}",
                             0, NULL);

    assert_non_null(doc);
    assert_int_equal(kevo_result_decode(doc, &r, &msg), KEVO_OK);
    assert_null(msg);
    assert_int_equal(r.verdict, KEVO_VERDICT_CRASH);
    assert_int_equal(r.n_wl, 2);
    assert_int_equal(r.wl[0].verdict, KEVO_VERDICT_OK);
    assert_int_equal(r.wl[1].verdict, KEVO_VERDICT_CRASH);
    assert_string_equal(r.message, "the device context was lost");
    assert_true(r.request_s == 0.5);
    kevo_result_clear(&r);
    json_decref(doc);
}

static void test_nonfinite_and_lenient(void **state)
{
    (void)state;
    struct kevo_result r;

    assert_int_equal(decode_text("{\"verdict\": \"implausible\", \"request_s\": \"inf\","
                                 " \"workloads\": [{\"index\": 0, \"verdict\": \"ok\","
                                 " \"time\": {\"median_s\": \"nan\", \"noise\": \"-inf\","
                                 "   \"count\": \"many\", \"batch\": 2.9, \"capped\": 1},"
                                 " \"sol_fraction\": \"inf\", \"gbps\": \"-inf\","
                                 " \"tflops\": \"fast\", \"speedup\": null, \"t_sol_s\": true}],"
                                 " \"resources\": [3, {\"kernel\": 5, \"regs\": \"nan\","
                                 "   \"block\": \"256\", \"smem\": 2.0}]}", &r, NULL),
                     KEVO_OK);
    assert_int_equal(r.verdict, KEVO_VERDICT_IMPLAUSIBLE);
    assert_true(isinf(r.request_s) && r.request_s > 0);
    const struct kevo_result_wl *w = &r.wl[0];
    assert_true(w->time.present);
    assert_true(isnan(w->time.median_s));
    assert_true(isinf(w->time.noise) && w->time.noise < 0);
    assert_int_equal(w->time.count, 0);            /* not a number: 0 */
    assert_int_equal(w->time.batch, 2);            /* a real: truncated */
    assert_false(w->time.capped);                  /* only true is true */
    assert_true(isinf(w->sol_fraction) && w->sol_fraction > 0);
    assert_true(isinf(w->gbps) && w->gbps < 0);
    assert_true(w->tflops == 0 && w->speedup == 0 && w->t_sol_s == 0);
    assert_int_equal(r.n_res, 2);
    assert_string_equal(r.res[0].kernel, "");      /* not an object: defaults */
    assert_int_equal(r.res[0].block, -1);
    assert_string_equal(r.res[1].kernel, "");
    assert_int_equal(r.res[1].regs, 0);            /* an integer figure is never NaN */
    assert_int_equal(r.res[1].block, -1);
    assert_int_equal(r.res[1].smem, 2);
    kevo_result_clear(&r);
}

static void test_empty(void **state)
{
    (void)state;
    struct kevo_result r;

    assert_int_equal(decode_text("{\"verdict\": \"compile_error\", \"message\": \"k.cu:3: x\","
                                 " \"evidence\": {\"log\": \"x\"}, \"compile_log\": \"x\","
                                 " \"resources\": [], \"workloads\": []}", &r, NULL), KEVO_OK);
    assert_int_equal(r.verdict, KEVO_VERDICT_COMPILE_ERROR);
    assert_string_equal(r.message, "k.cu:3: x");
    assert_string_equal(json_string_value(json_object_get(r.evidence, "log")), "x");
    assert_int_equal(r.n_wl, 0);
    assert_null(r.wl);
    assert_int_equal(r.n_res, 0);
    assert_null(r.res);
    assert_null(kevo_result_wl_at(&r, 0));
    assert_true(r.request_s == 0);
    kevo_result_clear(&r);
    /* no arrays and no message at all */
    assert_int_equal(decode_text("{\"verdict\": \"crash\"}", &r, NULL), KEVO_OK);
    assert_int_equal(r.verdict, KEVO_VERDICT_CRASH);
    assert_string_equal(r.message, "");
    assert_null(r.evidence);
    assert_int_equal(r.n_wl + r.n_res, 0);
    kevo_result_clear(&r);
}

static void test_clear_and_wl_at(void **state)
{
    (void)state;
    struct kevo_result r;

    kevo_result_clear(NULL);
    assert_int_equal(decode_text(OK_DOC, &r, NULL), KEVO_OK);
    assert_ptr_equal(kevo_result_wl_at(&r, 0), &r.wl[0]);
    assert_ptr_equal(kevo_result_wl_at(&r, 3), &r.wl[1]);   /* by task index, not position */
    assert_null(kevo_result_wl_at(&r, 1));
    assert_null(kevo_result_wl_at(&r, -1));
    assert_null(kevo_result_wl_at(NULL, 0));
    kevo_result_clear(&r);
    kevo_result_clear(&r);                                   /* twice: a no-op */
    assert_clear(&r);
    assert_null(kevo_result_wl_at(&r, 0));
}

/* The result holds its own reference: the document outlives the caller's. */
static void test_reference(void **state)
{
    (void)state;
    json_t *doc = load(OK_DOC);
    struct kevo_result r;
    char *msg = NULL;

    assert_int_equal(kevo_result_decode(doc, &r, &msg), KEVO_OK);
    assert_ptr_equal(r.doc, doc);
    assert_int_equal(doc->refcount, 2);
    json_decref(doc);
    assert_string_equal(r.res[0].kernel, "axpy_fast");   /* borrowed from the live document */
    kevo_result_clear(&r);
}

static void test_doc_new(void **state)
{
    (void)state;
    json_t *ev = json_pack("{s:f}", "deadline_s", 2.5);
    json_t *doc = kevo_result_doc_new(KEVO_VERDICT_TIMEOUT, "no reply within 2.5 s", ev);
    char *text = json_dumps(doc, JSON_COMPACT);

    /* the order of a result document: verdict, message, evidence */
    assert_string_equal(text, "{\"verdict\":\"timeout\",\"message\":\"no reply within 2.5 s\","
                              "\"evidence\":{\"deadline_s\":2.5}}");
    kevo_free(text);
    json_decref(doc);
    doc = kevo_result_doc_new(KEVO_VERDICT_CRASH, NULL, NULL);
    text = json_dumps(doc, JSON_COMPACT);
    assert_string_equal(text, "{\"verdict\":\"crash\",\"message\":\"\",\"evidence\":{}}");
    kevo_free(text);
    json_decref(doc);
    /* a message jansson cannot carry (not UTF-8): NULL, and the evidence is not leaked */
    assert_null(kevo_result_doc_new(KEVO_VERDICT_CRASH, "\xff\xfe", json_object()));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ok_document),
        cmocka_unit_test(test_every_verdict),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_device_lost_workload),
        cmocka_unit_test(test_nonfinite_and_lenient),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_clear_and_wl_at),
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_doc_new),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_dump - the dump facility (src/eval_dump.c) end to end through the public API:
 * kevo_eval_json on a small CPU task with opts.dump_dir, then the files and manifests of
 * every workload (the holdout too with opts.holdout), their contents, and the errors a
 * bad directory or a full disk give (a clear message naming the path, never a crash).
 *
 * This program is also its own worker: the pool starts `test_dump __worker ...`, as it
 * starts `kevo __worker ...`.
 */
#include "testutil.h"

#include "kevo.h"
#include "base/mem.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char TASK[] =
    "// kevo task   dump_axpy\n"
    "// kevo size   N=1000\n"
    "// kevo size   N=37\n"
    "// kevo holdout N=5\n"
    "// kevo input  x f32[N] normal(0,1)\n"
    "// kevo input  k i32[N] randint(0,10)\n"
    "// kevo output z f32[N]\n"
    "// kevo scalar alpha f32 2.5\n"
    "// kevo bytes  12*N\n"
    "// kevo call   axpy_ref(x, k, z, alpha, N)\n"
    "void axpy_ref(const float *x, const int *k, float *z, float alpha, int n)\n"
    "{\n"
    "    for (int i = 0; i < n; i++)\n"
    "        z[i] = alpha * x[i] + (float)k[i];\n"
    "}\n";

struct fx {
    char dir[64];          /* private temp dir */
    char task[128];        /* dir/task.c */
};

static int fx_setup(void **state)
{
    struct fx *f = kevo_calloc(1, sizeof *f);
    FILE *fp;

    snprintf(f->dir, sizeof f->dir, "/tmp/kevo_dump_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->task, sizeof f->task, "%s/task.c", f->dir);
    fp = fopen(f->task, "w");
    assert_non_null(fp);
    assert_int_equal(fwrite(TASK, 1, sizeof TASK - 1, fp), sizeof TASK - 1);
    assert_int_equal(fclose(fp), 0);
    *state = f;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *f = *state;
    char cmd[160];

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);   /* our own mkdtemp directory */
    if (system(cmd) != 0)
        print_error("could not remove %s\n", f->dir);
    kevo_free(f);
    return 0;
}

/* The reference evaluated with a dump; returns the status, the document or message. */
static enum kevo_status eval_dump(const struct fx *f, const char *dump, int holdout,
                                  json_t **doc, char **msg)
{
    struct kevo_eval_opts o;
    char *json = NULL;

    kevo_eval_opts_default(&o);
    o.backend = KEVO_BACKEND_CPU;
    o.no_timing = 1;
    o.holdout = holdout;
    o.dump_dir = dump;
    *doc = NULL;
    enum kevo_status st = kevo_eval_json(f->task, NULL, 0, &o, &json, msg);
    if (json)
        *doc = json_loads(json, 0, NULL);
    kevo_free(json);
    return st;
}

/* The whole file at path (kevo_free); *n its size. */
static void *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    void *p;
    long len;

    if (!fp)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    len = ftell(fp);
    rewind(fp);
    p = kevo_malloc(len > 0 ? (size_t)len : 1);
    assert_int_equal(fread(p, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    *n = (size_t)len;
    return p;
}

/* One tensor entry of the manifest, checked against what it must say. */
static void check_tensor(json_t *t, const char *name, const char *role, const char *dtype,
                         int64_t n)
{
    char file[64];

    snprintf(file, sizeof file, "%s.bin", name);
    assert_string_equal(json_string_value(json_object_get(t, "name")), name);
    assert_string_equal(json_string_value(json_object_get(t, "role")), role);
    assert_string_equal(json_string_value(json_object_get(t, "dtype")), dtype);
    assert_string_equal(json_string_value(json_object_get(t, "file")), file);
    json_t *shape = json_object_get(t, "shape");
    assert_int_equal(json_array_size(shape), 1);
    assert_int_equal(json_integer_value(json_array_get(shape, 0)), n);
}

/* DIR/w<w>: the manifest, and the files holding x, k and z = 2.5 x + k. */
static void check_workload(const char *dump, int w, int64_t n, int holdout)
{
    char path[256];
    size_t nx, nk, nz;
    json_error_t jerr;

    snprintf(path, sizeof path, "%s/w%d/manifest.json", dump, w);
    json_t *m = json_load_file(path, 0, &jerr);
    if (!m)
        fail_msg("%s: %s", path, jerr.text);
    assert_string_equal(json_string_value(json_object_get(m, "task")), "dump_axpy");
    assert_int_equal(json_integer_value(json_object_get(m, "workload")), w);
    assert_int_equal(json_is_true(json_object_get(m, "holdout")), holdout);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "sizes"), "N")), n);
    assert_true(json_number_value(json_object_get(json_object_get(m, "scalars"), "alpha")) ==
                2.5);
    json_t *ts = json_object_get(m, "tensors");
    assert_int_equal(json_array_size(ts), 3);
    check_tensor(json_array_get(ts, 0), "x", "input", "f32", n);
    check_tensor(json_array_get(ts, 1), "k", "input", "i32", n);
    check_tensor(json_array_get(ts, 2), "z", "output", "f32", n);
    json_decref(m);

    snprintf(path, sizeof path, "%s/w%d/x.bin", dump, w);
    float *x = slurp(path, &nx);
    snprintf(path, sizeof path, "%s/w%d/k.bin", dump, w);
    int32_t *k = slurp(path, &nk);
    snprintf(path, sizeof path, "%s/w%d/z.bin", dump, w);
    float *z = slurp(path, &nz);
    assert_int_equal(nx, (size_t)n * 4);
    assert_int_equal(nk, (size_t)n * 4);
    assert_int_equal(nz, (size_t)n * 4);
    int distinct = 0;
    for (int64_t i = 0; i < n; i++) {
        float want = 2.5f * x[i] + (float)k[i];
        assert_true(k[i] >= 0 && k[i] < 10);
        assert_true(isfinite(x[i]));
        /* unsealed: the reference's own answer (FMA or not) */
        if (!(fabsf(z[i] - want) <= 1e-5f * (1.0f + fabsf(want))))
            fail_msg("w%d z[%lld] = %.9g, want %.9g", w, (long long)i, z[i], want);
        distinct += i > 0 && x[i] != x[i - 1];
    }
    assert_true(distinct >= n / 2);           /* generated inputs, not zeros */
    kevo_free(x);
    kevo_free(k);
    kevo_free(z);
}

static void test_dump_visible_and_holdout(void **state)
{
    struct fx *f = *state;
    char dump[128];
    json_t *doc = NULL;
    char *msg = NULL;

    snprintf(dump, sizeof dump, "%s/out/deeper", f->dir);   /* parents are created */
    enum kevo_status st = eval_dump(f, dump, 1, &doc, &msg);
    if (st)
        fail_msg("kevo_eval_json: %s: %s", kevo_status_name(st), msg ? msg : "");
    assert_non_null(doc);
    json_t *ref = json_object_get(doc, "reference");
    assert_string_equal(json_string_value(json_object_get(ref, "verdict")), "ok");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(ref, "holdout"), "verdict")), "ok");
    check_workload(dump, 0, 1000, 0);
    check_workload(dump, 1, 37, 0);
    check_workload(dump, 2, 5, 1);
    json_decref(doc);
    kevo_free(msg);
}

/* Without holdout, no holdout directory; a relative path lands under the cwd. */
static void test_dump_relative_visible_only(void **state)
{
    struct fx *f = *state;
    char cwd[256], dump[160];
    json_t *doc = NULL;
    char *msg = NULL;
    struct stat sb;

    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(f->dir), 0);
    enum kevo_status st = eval_dump(f, "rel", 0, &doc, &msg);
    assert_int_equal(chdir(cwd), 0);
    if (st)
        fail_msg("kevo_eval_json: %s: %s", kevo_status_name(st), msg ? msg : "");
    snprintf(dump, sizeof dump, "%s/rel", f->dir);
    check_workload(dump, 0, 1000, 0);
    snprintf(dump, sizeof dump, "%s/rel/w2", f->dir);
    assert_int_equal(stat(dump, &sb), -1);
    json_decref(doc);
    kevo_free(msg);
}

/* A directory that cannot be made, and a full disk: kevo errors naming the path. */
static void test_dump_errors(void **state)
{
    struct fx *f = *state;
    char path[160], dump[160];
    json_t *doc = NULL;
    char *msg = NULL;
    FILE *fp;

    snprintf(path, sizeof path, "%s/plain", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(dump, sizeof dump, "%s/plain/sub", f->dir);      /* a file is in the way */
    enum kevo_status st = eval_dump(f, dump, 0, &doc, &msg);
    assert_int_not_equal(st, KEVO_OK);
    assert_non_null(msg);
    print_message("[ message  ] %s\n", msg);
    assert_non_null(strstr(msg, "plain/sub/w0"));
    assert_non_null(strstr(msg, "Not a directory"));
    kevo_free(msg);
    msg = NULL;
    json_decref(doc);

    /* x.bin is a link to /dev/full: writing it fails with ENOSPC, as on a full disk. */
    snprintf(dump, sizeof dump, "%s/full/w0", f->dir);
    snprintf(path, sizeof path, "%s/full", f->dir);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mkdir(dump, 0755), 0);
    snprintf(path, sizeof path, "%s/full/w0/x.bin", f->dir);
    assert_int_equal(symlink("/dev/full", path), 0);
    snprintf(dump, sizeof dump, "%s/full", f->dir);
    st = eval_dump(f, dump, 0, &doc, &msg);
    assert_int_not_equal(st, KEVO_OK);
    assert_non_null(msg);
    print_message("[ message  ] %s\n", msg);
    assert_non_null(strstr(msg, "full/w0/x.bin"));
    assert_non_null(strstr(msg, strerror(ENOSPC)));
    kevo_free(msg);
    json_decref(doc);
}

#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "__worker") == 0)
        return kevo_worker_main(argc - 1, argv + 1);
    const struct CMUnitTest tests[] = {
        T(test_dump_visible_and_holdout),
        T(test_dump_relative_visible_only),
        T(test_dump_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

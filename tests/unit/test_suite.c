/*
 * test_suite - the shipped benchmark suite (tasks/, docs/bench.md): the counts per level
 * the suite promises, and what every task must carry (a unique name equal to its file
 * name, doc, tags, a torch block, at least two visible workloads and a holdout, inputs with
 * an INIT). `make test` also compiles every task (`kevo check tasks/`). With KEVO_BIN set,
 * every CPU task's reference must evaluate to ok through `kevo bench`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/mem.h"
#include "core/task.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TASKS 256

static char *names[MAX_TASKS];
static int n_names;

/* Check one task file; returns 1 if it is one. */
static int check_task(const char *dir, const char *file)
{
    char path[1024], stem[256];
    struct kevo_task *t = NULL;
    char *msg = NULL;
    int visible = 0, holdout = 0;
    size_t n = strlen(file);

    if (!((n > 3 && strcmp(file + n - 3, ".cu") == 0) || (n > 2 && strcmp(file + n - 2, ".c") == 0)))
        return 0;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(stem, sizeof stem, "%s", file);
    *strrchr(stem, '.') = '\0';
    if (kevo_task_load(path, &t, &msg) != KEVO_OK)
        fail_msg("%s", msg ? msg : path);
    if (strcmp(t->name, stem) != 0)
        fail_msg("%s: task name '%s' differs from the file name", path, t->name);
    for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], t->name) == 0)
            fail_msg("%s: task name '%s' is used twice in the suite", path, t->name);
    assert_true(n_names < MAX_TASKS);
    names[n_names++] = kevo_strdup(t->name);
    if (!t->doc || !t->n_tags || !t->torch)
        fail_msg("%s: needs doc, tags and a torch block", path);
    for (int w = 0; w < t->n_workloads; w++) {
        visible += !t->workloads[w].holdout;
        holdout += t->workloads[w].holdout;
    }
    if (visible < 2 || holdout < 1)
        fail_msg("%s: %d visible workloads and %d holdouts (needs >= 2 and >= 1)", path,
                 visible, holdout);
    for (int i = 0; i < t->n_tensors; i++)
        if (t->tensors[i].role == KEVO_ROLE_INPUT && t->tensors[i].init == KEVO_INIT_NONE)
            fail_msg("%s: input %s has no INIT", path, t->tensors[i].name);
    kevo_task_free(t);
    kevo_free(msg);
    return 1;
}

static int count_dir(const char *dir)
{
    struct dirent **ents = NULL;
    int n = scandir(dir, &ents, NULL, alphasort), k = 0;

    if (n < 0)
        fail_msg("%s: cannot read", dir);
    for (int i = 0; i < n; i++) {
        k += check_task(dir, ents[i]->d_name);
        free(ents[i]);
    }
    free(ents);
    return k;
}

static void test_counts_and_contents(void **state)
{
    (void)state;
    int l1 = count_dir("tasks/level1"), l2 = count_dir("tasks/level2");
    int l3 = count_dir("tasks/level3"), cpu = count_dir("tasks/cpu");

    print_message("[ suite    ] level1 %d, level2 %d, level3 %d, cpu %d: %d tasks\n", l1, l2,
                  l3, cpu, l1 + l2 + l3 + cpu);
    assert_true(l1 >= 25);
    assert_true(l2 >= 12);
    assert_true(l3 >= 6);
    assert_true(cpu >= 8);
    for (int i = 0; i < n_names; i++)
        kevo_free(names[i]);
    n_names = 0;
}

/* Every CPU reference is ok (verification only: timing is what `kevo bench` is for). */
static void test_cpu_references_ok(void **state)
{
    (void)state;
    const char *kevo = getenv("KEVO_BIN");
    char cmd[1024];
    json_error_t e;

    if (!kevo)
        skip();
    snprintf(cmd, sizeof cmd, "'%s' bench --backend cpu --no-timing --json tasks/cpu 2>/dev/null",
             kevo);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    json_t *doc = json_loadf(p, 0, &e);
    assert_int_equal(pclose(p), 0);
    if (!doc)
        fail_msg("kevo bench output is not JSON: %s", e.text);
    json_t *tasks = json_object_get(doc, "tasks"), *t;
    size_t i;
    assert_true(json_array_size(tasks) >= 8);
    json_array_foreach(tasks, i, t) {
        const char *v = json_string_value(json_object_get(t, "verdict"));
        if (!v || strcmp(v, "ok") != 0)
            fail_msg("%s: %s: %s", json_string_value(json_object_get(t, "task")), v,
                     json_string_value(json_object_get(t, "message")));
    }
    json_t *sc = json_object_get(doc, "scores");
    assert_int_equal(json_integer_value(json_object_get(sc, "ok")), (json_int_t)json_array_size(tasks));
    assert_true(json_real_value(json_object_get(sc, "correctness")) == 1.0);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_and_contents),
        cmocka_unit_test(test_cpu_references_ok),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

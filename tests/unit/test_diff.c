/*
 * test_diff - the unified line diff of kevo's reports (src/base/diff.c): equal texts give
 * nothing; a changed line gives one hunk with its context; distant changes give separate
 * hunks; additions at the end, deletions at the start, empty texts and a last line without
 * a newline; texts too large for the table still give a true (non-minimal) diff.
 */
#include "testutil.h"

#include "base/buf.h"
#include "base/diff.h"
#include "base/mem.h"

#include <string.h>

/* The diff as text, one line each: "@@ ...", " same", "-del", "+add". */
static void collect(void *user, enum kevo_diff_op op, const char *line, size_t len)
{
    static const char mark[] = { 0, ' ', '-', '+' };
    struct kevo_buf *b = user;

    if (op != KEVO_DIFF_HUNK)
        assert_int_equal(kevo_buf_add(b, &mark[op], 1), KEVO_OK);
    assert_int_equal(kevo_buf_add(b, line, len), KEVO_OK);
    assert_int_equal(kevo_buf_add(b, "\n", 1), KEVO_OK);
}

static char *diff(const char *a, const char *b, int context, int *changed)
{
    struct kevo_buf out;

    kevo_buf_init(&out, 1 << 24);
    assert_int_equal(kevo_diff_lines(a, b, context, collect, &out, changed), KEVO_OK);
    return kevo_buf_take(&out);
}

static void test_equal(void **state)
{
    int changed = -1;
    char *s = diff("a\nb\n", "a\nb\n", 3, &changed);

    (void)state;
    assert_string_equal(s, "");
    assert_int_equal(changed, 0);
    kevo_free(s);
    s = diff(NULL, "", 3, &changed);
    assert_string_equal(s, "");
    kevo_free(s);
}

static void test_one_change(void **state)
{
    int changed = 0;
    char *s = diff("1\n2\n3\n4\n5\n6\n7\n", "1\n2\n3\nfour\n5\n6\n7\n", 1, &changed);

    (void)state;
    assert_string_equal(s, "@@ -3,3 +3,3 @@\n 3\n-4\n+four\n 5\n");
    assert_int_equal(changed, 2);
    kevo_free(s);
}

static void test_hunks(void **state)
{
    char *s = diff("a\n1\n2\n3\n4\n5\n6\n7\nz\n", "A\n1\n2\n3\n4\n5\n6\n7\nZ\n", 1, NULL);

    (void)state;
    assert_string_equal(s, "@@ -1,2 +1,2 @@\n-a\n+A\n 1\n@@ -8,2 +8,2 @@\n 7\n-z\n+Z\n");
    kevo_free(s);
    /* changes 2 context lines apart stay one hunk */
    s = diff("a\n1\n2\nz\n", "A\n1\n2\nZ\n", 1, NULL);
    assert_string_equal(s, "@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n-z\n+Z\n");
    kevo_free(s);
}

static void test_ends(void **state)
{
    char *s = diff("x\ny", "x\ny\n// kevo flags -O3\n", 3, NULL);   /* no final newline */

    (void)state;
    assert_string_equal(s, "@@ -1,2 +1,3 @@\n x\n y\n+// kevo flags -O3\n");
    kevo_free(s);
    s = diff("gone\nkept\n", "kept\n", 0, NULL);
    assert_string_equal(s, "@@ -1,1 +0,0 @@\n-gone\n");
    kevo_free(s);
    s = diff("", "new\n", 3, NULL);
    assert_string_equal(s, "@@ -0,0 +1,1 @@\n+new\n");
    kevo_free(s);
}

/* Past the table's cap: every differing line removed, then added; nothing lost. */
static void test_large(void **state)
{
    struct kevo_buf a, b;
    int changed = 0;
    char *s;

    (void)state;
    kevo_buf_init(&a, 1 << 24);
    kevo_buf_init(&b, 1 << 24);
    for (int i = 0; i < 3000; i++) {
        assert_int_equal(kevo_buf_addf(&a, "a%d\n", i), KEVO_OK);
        assert_int_equal(kevo_buf_addf(&b, "b%d\n", i), KEVO_OK);
    }
    s = diff(kevo_buf_str(&a), kevo_buf_str(&b), 3, &changed);
    assert_int_equal(changed, 6000);
    assert_non_null(strstr(s, "-a2999\n+b0\n"));
    kevo_free(s);
    kevo_buf_free(&a);
    kevo_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal),
        cmocka_unit_test(test_one_change),
        cmocka_unit_test(test_hunks),
        cmocka_unit_test(test_ends),
        cmocka_unit_test(test_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * test_expr - integer expressions (src/expr.h): precedence, functions, names, every
 * overflow and division case, error columns and messages, nesting limits, check mode and
 * strict float literals.
 */
#include "testutil.h"

#include "core/expr.h"
#include "base/mem.h"

#include <stdio.h>
#include <string.h>

/* Names for the tests: M=4096, N=8192, Z=0, BIG=2^62. */
static int lookup(void *user, const char *name, size_t len, int64_t *out)
{
    static const struct { const char *n; int64_t v; } names[] = {
        { "M", 4096 }, { "N", 8192 }, { "Z", 0 }, { "BIG", (int64_t)1 << 62 },
    };
    (void)user;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i].n) == len && !memcmp(names[i].n, name, len)) {
            *out = names[i].v;
            return 0;
        }
    }
    return -1;
}

static int64_t ok(const char *text)
{
    int64_t v = -12345;
    struct kevo_expr_err e;
    enum kevo_status st = kevo_expr_eval(text, lookup, NULL, &v, &e);
    if (st)
        fail_msg("'%s': status %d: %s (col %d)", text, st, e.msg, e.col);
    return v;
}

/* Expect failure with status st at 0-based column col, message containing msg. */
static void bad(const char *text, enum kevo_status st, int col, const char *msg)
{
    int64_t v = 77;
    struct kevo_expr_err e;
    enum kevo_status got = kevo_expr_eval(text, lookup, NULL, &v, &e);
    if (got != st || e.col != col || !strstr(e.msg, msg))
        fail_msg("'%s': got status %d col %d '%s'; want %d col %d '%s'", text, got, e.col,
                 e.msg, st, col, msg);
    assert_int_equal(v, 0);   /* *out is cleared on failure */
}

static void test_precedence(void **state)
{
    (void)state;
    assert_int_equal(ok("1+2*3"), 7);
    assert_int_equal(ok("(1+2)*3"), 9);
    assert_int_equal(ok("10-4-3"), 3);             /* left-associative */
    assert_int_equal(ok("100/10/5"), 2);
    assert_int_equal(ok("2*3%4"), 2);              /* (2*3)%4 */
    assert_int_equal(ok("7%4"), 3);
    assert_int_equal(ok("-7/2"), -3);              /* truncates toward zero */
    assert_int_equal(ok("-7%2"), -1);
    assert_int_equal(ok("2*-3"), -6);
    assert_int_equal(ok("--5"), 5);
    assert_int_equal(ok("-(2+3)*2"), -10);
    assert_int_equal(ok(" \t1 +\t2 "), 3);
    assert_int_equal(ok("007"), 7);
    assert_int_equal(ok("9223372036854775807"), INT64_MAX);
    assert_int_equal(ok("-9223372036854775807-1"), INT64_MIN);
}

static void test_functions_and_names(void **state)
{
    (void)state;
    assert_int_equal(ok("min(3,4)"), 3);
    assert_int_equal(ok("max(3, -4)"), 3);
    assert_int_equal(ok("cdiv(10,3)"), 4);
    assert_int_equal(ok("cdiv(9,3)"), 3);
    assert_int_equal(ok("cdiv(0,5)"), 0);
    assert_int_equal(ok("cdiv(-7,2)"), -3);        /* exact ceiling for any signs */
    assert_int_equal(ok("cdiv(7,-2)"), -3);
    assert_int_equal(ok("cdiv(-7,-2)"), 4);
    assert_int_equal(ok("cdiv(9223372036854775807, 2)"), 4611686018427387904LL);  /* no a+b-1 */
    assert_int_equal(ok("cdiv (M , 256)"), 16);
    assert_int_equal(ok("M*N"), 4096LL * 8192);
    assert_int_equal(ok("cdiv(max(M,1), min(2,3)) + N%3"), 2048 + 8192 % 3);
    assert_int_equal(ok("BIG-1+BIG"), INT64_MAX);
}

static void test_overflow(void **state)
{
    (void)state;
    bad("9223372036854775807+1", KEVO_ERR_OVERFLOW, 19, "expression overflows 64 bits");
    bad("-9223372036854775807-2", KEVO_ERR_OVERFLOW, 20, "overflows 64 bits");
    bad("BIG*2", KEVO_ERR_OVERFLOW, 3, "overflows 64 bits");
    bad("4294967296 * 4294967296", KEVO_ERR_OVERFLOW, 11, "overflows 64 bits");
    bad("-(-9223372036854775807-1)", KEVO_ERR_OVERFLOW, 0, "overflows 64 bits");
    bad("(-9223372036854775807-1)/-1", KEVO_ERR_OVERFLOW, 24, "overflows 64 bits");
    bad("cdiv(-9223372036854775807-1, -1)", KEVO_ERR_OVERFLOW, 0, "overflows 64 bits");
    bad("9223372036854775808", KEVO_ERR_OVERFLOW, 0, "integer literal overflows 64 bits");
    bad("1 + 99999999999999999999999", KEVO_ERR_OVERFLOW, 4, "literal overflows");
    assert_int_equal(ok("(-9223372036854775807-1)%-1"), 0);   /* would trap in C */
    assert_int_equal(ok("min(-9223372036854775807-1, 0)"), INT64_MIN);
}

static void test_division_by_zero(void **state)
{
    (void)state;
    bad("5/0", KEVO_ERR_INVALID, 1, "division by zero");
    bad("5 % Z", KEVO_ERR_INVALID, 2, "remainder by zero");
    bad("cdiv(5, M-M)", KEVO_ERR_INVALID, 0, "division by zero");
    bad("M/(N-8192)", KEVO_ERR_INVALID, 1, "division by zero");
}

static void test_syntax_errors(void **state)
{
    (void)state;
    bad("", KEVO_ERR_PARSE, 0, "expected an expression, got end of expression");
    bad("   ", KEVO_ERR_PARSE, 3, "expected an expression");
    bad("1+", KEVO_ERR_PARSE, 2, "expected an expression, got end of expression");
    bad("(1", KEVO_ERR_PARSE, 2, "expected ')'");
    bad("1)", KEVO_ERR_PARSE, 1, "unmatched ')'");
    bad("1 2", KEVO_ERR_PARSE, 2, "expected an operator or the end of the expression, got '2'");
    bad("M N", KEVO_ERR_PARSE, 2, "got 'N'");
    bad("M+K", KEVO_ERR_PARSE, 2, "unknown name 'K'");
    bad("foo(1,2)", KEVO_ERR_PARSE, 0, "unknown function 'foo' (expected min, max or cdiv)");
    bad("min(1)", KEVO_ERR_PARSE, 5, "expected ',' between the two arguments, got ')'");
    bad("max(1,2,3)", KEVO_ERR_PARSE, 7, "expected ')' after the second argument");
    bad("min + 1", KEVO_ERR_PARSE, 4, "expected '(' after the function name");
    bad("12ab", KEVO_ERR_PARSE, 0, "malformed number '12ab'");
    bad("0x10", KEVO_ERR_PARSE, 0, "malformed number");
    bad("1 & 2", KEVO_ERR_PARSE, 2, "got '&'");
    bad("1.5", KEVO_ERR_PARSE, 1, "got '.'");
    bad("+1", KEVO_ERR_PARSE, 0, "expected an expression, got '+'");
    bad("1\x01", KEVO_ERR_PARSE, 1, "got '\\x01'");   /* control bytes are escaped */
}

static void test_names_without_lookup(void **state)
{
    int64_t v = 5;
    struct kevo_expr_err e;
    (void)state;
    assert_int_equal(kevo_expr_eval("M", NULL, NULL, &v, &e), KEVO_ERR_PARSE);
    assert_string_equal(e.msg, "unknown name 'M'");
    assert_int_equal(kevo_expr_eval("2*21", NULL, NULL, &v, NULL), KEVO_OK);
    assert_int_equal(v, 42);
    assert_int_equal(kevo_expr_eval(NULL, NULL, NULL, &v, &e), KEVO_ERR_INVALID);
}

static void test_nesting(void **state)
{
    char buf[1024];
    size_t n = 0;
    (void)state;
    /* 64 levels of parentheses are fine, 65 are refused */
    for (int i = 0; i < 64; i++)
        buf[n++] = '(';
    buf[n++] = 'M';
    for (int i = 0; i < 64; i++)
        buf[n++] = ')';
    buf[n] = '\0';
    assert_int_equal(ok(buf), 4096);
    memmove(buf + 1, buf, n + 1);
    buf[0] = '(';
    buf[n + 1] = ')';
    buf[n + 2] = '\0';
    bad(buf, KEVO_ERR_PARSE, 64, "expression nests deeper than 64 levels");
    /* unary minus and function calls count too */
    memset(buf, '-', 100);
    buf[100] = '1';
    buf[101] = '\0';
    bad(buf, KEVO_ERR_PARSE, 64, "nests deeper");
    n = 0;
    for (int i = 0; i < 70; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "min(1,");
    bad(buf, KEVO_ERR_PARSE, 64 * 6 + 3, "nests deeper");
}

/* Hostile input: a megabyte of '(' must fail cleanly, not overflow the stack. */
static void test_hostile(void **state)
{
    size_t n = 1 << 20;
    char *s = kevo_malloc(n + 1);
    struct kevo_expr_err e;
    (void)state;
    assert_non_null(s);
    memset(s, '(', n);
    s[n] = '\0';
    assert_int_equal(kevo_expr_check(s, NULL, NULL, &e), KEVO_ERR_PARSE);
    memset(s, '-', n);
    assert_int_equal(kevo_expr_check(s, NULL, NULL, &e), KEVO_ERR_PARSE);
    memset(s, '9', n);
    assert_int_equal(kevo_expr_check(s, NULL, NULL, &e), KEVO_ERR_OVERFLOW);
    kevo_free(s);
}

static int only_mn(void *user, const char *name, size_t len)
{
    (void)user;
    return len == 1 && (name[0] == 'M' || name[0] == 'N');
}

static void test_check_mode(void **state)
{
    struct kevo_expr_err e;
    (void)state;
    assert_int_equal(kevo_expr_check("cdiv(M*N, 256) + 1", only_mn, NULL, &e), KEVO_OK);
    assert_int_equal(kevo_expr_check("M*K", only_mn, NULL, &e), KEVO_ERR_PARSE);
    assert_int_equal(e.col, 2);
    assert_string_equal(e.msg, "unknown name 'K'");
    assert_int_equal(kevo_expr_check("anything*goes", NULL, NULL, &e), KEVO_OK);
    /* literal sub-expressions are computed, a known zero divisor is caught whatever the
     * dividend */
    assert_int_equal(kevo_expr_check("M/0", only_mn, NULL, &e), KEVO_ERR_INVALID);
    assert_int_equal(e.col, 1);
    assert_int_equal(kevo_expr_check("M % (2-2)", only_mn, NULL, &e), KEVO_ERR_INVALID);
    assert_int_equal(kevo_expr_check("M+4611686018427387904*2", only_mn, NULL, &e),
                     KEVO_ERR_OVERFLOW);
    assert_int_equal(e.col, 21);
    assert_int_equal(kevo_expr_check("M*(", only_mn, NULL, &e), KEVO_ERR_PARSE);
}

static void test_parse_double(void **state)
{
    static const char *good[] = { "1.5", "-2e-3", "4", "+1", "0", ".5", "1e10", "1E+3" };
    static const double want[] = { 1.5, -2e-3, 4, 1, 0, .5, 1e10, 1e3 };
    static const char *badv[] = { "", " 1", "1 ", "nan", "inf", "-inf", "1e400", "0x10",
                                  "1e", "abc", "1.2.3", "--1", "1,5", "infinity" };
    double d;
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(kevo_expr_parse_double(good[i], &d), 0);
        assert_true(d == want[i]);
    }
    for (size_t i = 0; i < sizeof badv / sizeof badv[0]; i++) {
        d = 3;
        if (kevo_expr_parse_double(badv[i], &d) != -1)
            fail_msg("'%s' was accepted", badv[i]);
        assert_true(d == 0);
    }
    assert_int_equal(kevo_expr_parse_double(NULL, &d), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_functions_and_names),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_division_by_zero),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_names_without_lookup),
        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_check_mode),
        cmocka_unit_test(test_parse_double),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

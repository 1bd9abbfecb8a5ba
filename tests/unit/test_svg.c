/*
 * test_svg - the SVG writer and charts of kevo's reports (src/base/svg.c, chart.c): escaping
 * of untrusted text (markup, quotes, control characters, bytes that are not UTF-8), the
 * sticky status of a capped text, scales fitted to degenerate data (one point, zeros, NaN,
 * infinities, nothing; non-positive values on a log scale), nice ticks, number labels, and
 * charts drawn from such data with no "nan" or "inf" written anywhere.
 */
#include "testutil.h"

#include "base/chart.h"
#include "base/mem.h"
#include "base/svg.h"

#include <math.h>
#include <string.h>

/* The text written by fill(w) into a fresh writer (kevo_free it). */
static char *written(void (*fill)(struct kevo_svg *w, const char *arg), const char *arg)
{
    struct kevo_svg w;
    char *out = NULL;

    kevo_svg_init(&w, 1 << 20);
    fill(&w, arg);
    assert_int_equal(kevo_svg_take(&w, &out), KEVO_OK);
    assert_non_null(out);
    return out;
}

static void esc(struct kevo_svg *w, const char *s) { kevo_svg_esc(w, s); }

static void test_escape_markup(void **state)
{
    (void)state;
    char *s = written(esc, "<script>alert('x') & \"y\"</script>");
    assert_string_equal(s, "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;");
    kevo_free(s);
    s = written(esc, "plain text, µs and 3.42x");
    assert_string_equal(s, "plain text, µs and 3.42x");
    kevo_free(s);
}

static void test_escape_bytes(void **state)
{
    (void)state;
    /* control characters dropped (not newline or tab), DEL too */
    char *s = written(esc, "a\x01" "b\x1b[31m\tc\nd\x7f");
    assert_string_equal(s, "ab[31m\tc\nd");
    kevo_free(s);
    /* a byte that is not UTF-8, a cut sequence, an overlong form, a surrogate */
    s = written(esc, "x\xff" "y\xc3" "z\xc0\x80" "w\xed\xa0\x80");
    assert_string_equal(s, "x\xef\xbf\xbdy\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbdw"
                           "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    kevo_free(s);
}

static void escn3(struct kevo_svg *w, const char *s) { kevo_svg_escn(w, s, 3); }
static void esc_null(struct kevo_svg *w, const char *s) { (void)s; kevo_svg_esc(w, NULL); }

static void test_escape_bounds(void **state)
{
    (void)state;
    char *s = written(escn3, "<ab>");
    assert_string_equal(s, "&lt;ab");
    kevo_free(s);
    s = written(esc_null, NULL);
    assert_string_equal(s, "");
    kevo_free(s);
}

/* Past the cap every append fails and the first failure stays. */
static void test_sticky_status(void **state)
{
    struct kevo_svg w;
    char *out = (char *)1;

    (void)state;
    kevo_svg_init(&w, 8);
    kevo_svg_add(&w, "0123456789");
    assert_int_equal(w.st, KEVO_ERR_TOOBIG);
    kevo_svg_esc(&w, "more");
    kevo_svg_addf(&w, "%d", 5);
    assert_int_equal(w.st, KEVO_ERR_TOOBIG);
    assert_int_equal(kevo_svg_take(&w, &out), KEVO_ERR_TOOBIG);
    assert_null(out);
    kevo_svg_free(&w);
    kevo_svg_free(NULL);
}

/* ---- scales ---- */

static struct kevo_svg_scale fit(enum kevo_svg_kind kind, const double *v, size_t n)
{
    struct kevo_svg_scale s = { kind, 0, 0, 0, 100 };

    kevo_svg_scale_fit(&s, v, n);
    assert_true(isfinite(s.lo) && isfinite(s.hi));
    assert_true(s.lo < s.hi);
    if (kind == KEVO_SVG_LOG)
        assert_true(s.lo > 0);
    return s;
}

static void test_scale_linear(void **state)
{
    double v[] = { 3.2, 7.9, NAN, INFINITY, -INFINITY, 5.0 };
    struct kevo_svg_scale s = fit(KEVO_SVG_LINEAR, v, 6);

    (void)state;
    assert_true(s.lo <= 3.2 && s.hi >= 7.9);
    assert_true(s.lo >= 2.0 && s.hi <= 10.0);     /* the infinities were left out */
    assert_true(fabs(kevo_svg_scale_map(&s, s.lo) - 0) < 1e-9);
    assert_true(fabs(kevo_svg_scale_map(&s, s.hi) - 100) < 1e-9);
    assert_true(isnan(kevo_svg_scale_map(&s, NAN)));
    assert_true(isnan(kevo_svg_scale_map(&s, INFINITY)));
}

static void test_scale_degenerate(void **state)
{
    double one = 5.0, zeros[] = { 0.0, 0.0, 0.0 }, nans[] = { NAN, NAN }, neg = -4.0;
    struct kevo_svg_scale s;

    (void)state;
    s = fit(KEVO_SVG_LINEAR, &one, 1);              /* one point: inside, not on the edge */
    assert_true(s.lo < 5.0 && s.hi > 5.0);
    s = fit(KEVO_SVG_LINEAR, zeros, 3);             /* zero time */
    assert_true(s.lo <= 0.0 && s.hi > 0.0);
    s = fit(KEVO_SVG_LINEAR, nans, 2);              /* nothing placeable */
    assert_true(s.lo == 0.0 && s.hi == 1.0);
    s = fit(KEVO_SVG_LINEAR, NULL, 0);
    assert_true(s.lo == 0.0 && s.hi == 1.0);
    s = fit(KEVO_SVG_LINEAR, &neg, 1);
    assert_true(s.lo < -4.0 && s.hi > -4.0);
    s = fit(KEVO_SVG_LINEAR, (double[]){ 1e300, 1e300 }, 2);
    assert_true(s.lo < 1e300 && s.hi >= 1e300);
}

static void test_scale_log(void **state)
{
    double v[] = { 0.0, -3.0, 5.5e-5, 2.1e-4, NAN }, one = 3e-6, zeros[] = { 0.0, -1.0 };
    struct kevo_svg_scale s;

    (void)state;
    s = fit(KEVO_SVG_LOG, v, 5);                    /* zero and negatives left out */
    assert_true(s.lo < 5.5e-5 && s.hi > 2.1e-4);
    assert_true(s.lo >= 1e-5 && s.hi <= 1e-3);
    assert_true(isnan(kevo_svg_scale_map(&s, 0.0)));
    assert_true(isnan(kevo_svg_scale_map(&s, -1.0)));
    s = fit(KEVO_SVG_LOG, &one, 1);
    assert_true(s.lo < one && s.hi > one);
    s = fit(KEVO_SVG_LOG, zeros, 2);                /* no positive value at all */
    assert_true(s.lo == 1.0 && s.hi == 10.0);
}

/* Ticks ascending, inside the domain, no more than asked. */
static int ticks(const struct kevo_svg_scale *s, double *t, int max)
{
    int n = kevo_svg_ticks(s, t, max);

    assert_true(n >= 0 && n <= max);
    for (int i = 0; i < n; i++) {
        assert_true(t[i] >= s->lo * (1 - 1e-9) - 1e-12 && t[i] <= s->hi * (1 + 1e-9) + 1e-12);
        if (i)
            assert_true(t[i] > t[i - 1]);
    }
    return n;
}

static void test_ticks(void **state)
{
    struct kevo_svg_scale lin = { KEVO_SVG_LINEAR, 0, 10, 0, 1 };
    struct kevo_svg_scale lg = { KEVO_SVG_LOG, 1e-5, 1e-3, 0, 1 };
    struct kevo_svg_scale wide = { KEVO_SVG_LOG, 1e-10, 1e10, 0, 1 };
    struct kevo_svg_scale flat = { KEVO_SVG_LINEAR, 3, 3, 0, 1 };
    double t[32];
    int n;

    (void)state;
    n = ticks(&lin, t, 6);
    assert_int_equal(n, 6);
    assert_true(t[0] == 0.0 && t[1] == 2.0 && t[5] == 10.0);
    n = ticks(&lg, t, 12);                          /* two decades: 1, 2, 5 of each */
    assert_int_equal(n, 7);
    assert_true(fabs(t[1] / 2e-5 - 1) < 1e-9 && fabs(t[6] / 1e-3 - 1) < 1e-9);
    lg.lo = 5e-5;
    lg.hi = 2e-3;                                   /* three decades, room for 1 and 3 */
    n = ticks(&lg, t, 9);
    assert_int_equal(n, 3);
    assert_true(fabs(t[0] / 1e-4 - 1) < 1e-9 && fabs(t[1] / 3e-4 - 1) < 1e-9);
    n = ticks(&wide, t, 6);                         /* twenty decades: every k-th */
    assert_true(n >= 3 && n <= 6);
    assert_int_equal(ticks(&flat, t, 6), 0);        /* an empty domain: none, no loop */
    assert_int_equal(ticks(&lin, t, 0), 0);
    lin.lo = 0.1;
    lin.hi = 0.3;                                   /* no 0.30000000000000004 */
    n = ticks(&lin, t, 5);
    assert_true(n >= 2);
}

static void test_labels(void **state)
{
    char s[32];

    (void)state;
    kevo_svg_fmt_num(0, s, sizeof s);
    assert_string_equal(s, "0");
    kevo_svg_fmt_num(1500, s, sizeof s);
    assert_string_equal(s, "1.5k");
    kevo_svg_fmt_num(-2000, s, sizeof s);
    assert_string_equal(s, "-2k");
    kevo_svg_fmt_num(2.5e-6, s, sizeof s);
    assert_string_equal(s, "2.5\xc2\xb5");
    kevo_svg_fmt_num(999.7, s, sizeof s);
    assert_string_equal(s, "1k");
    kevo_svg_fmt_num(2.14e15, s, sizeof s);
    assert_string_equal(s, "2.14P");
    kevo_svg_fmt_num(NAN, s, sizeof s);
    assert_string_equal(s, "-");
    kevo_svg_fmt_time(5e-5, s, sizeof s);
    assert_string_equal(s, "50 \xc2\xb5s");
    kevo_svg_fmt_time(0, s, sizeof s);
    assert_string_equal(s, "0 s");
    kevo_svg_fmt_time(150, s, sizeof s);
    assert_string_equal(s, "2.5 min");
    kevo_svg_fmt_time(-1, s, sizeof s);
    assert_string_equal(s, "-");
    kevo_svg_fmt_unit(3.17e12, "B/s", s, sizeof s);
    assert_string_equal(s, "3.17 TB/s");
    kevo_svg_fmt_pct(0.253, s, sizeof s);
    assert_string_equal(s, "25%");
    kevo_svg_fmt_pct(0.0042, s, sizeof s);
    assert_string_equal(s, "0.42%");
    kevo_svg_fmt_pct(INFINITY, s, sizeof s);
    assert_string_equal(s, "-");
    assert_int_equal(kevo_svg_text_len("a\xc2\xb5" "b"), 3);
}

/* ---- charts ---- */

/* No number that did not exist written as a coordinate or a label. */
static void no_bad_numbers(const char *svg)
{
    assert_null(strstr(svg, "nan"));
    assert_null(strstr(svg, "NaN"));
    assert_null(strstr(svg, "inf"));
    assert_non_null(strstr(svg, "<svg"));
    assert_non_null(strstr(svg, "</svg>"));
}

/* A chart of x, y (n points) on axes of kind kx, ky, rendered (kevo_free it). */
static char *chart(enum kevo_svg_kind kx, enum kevo_svg_kind ky, const double *x,
                   const double *y, size_t n, const char *name)
{
    struct kevo_chart_axis ax = { kx, "time <s>", kevo_svg_fmt_time, NAN, NAN };
    struct kevo_chart_axis ay = { ky, "y", NULL, NAN, NAN };
    struct kevo_chart *c = NULL;
    struct kevo_svg w;
    char *out = NULL;
    const char *tips[8] = { "<b>tip</b>" };

    assert_int_equal(kevo_chart_new(400, 250, "a <title> & more", &ax, &ay, &c), KEVO_OK);
    assert_int_equal(kevo_chart_add(c, name, "#4e79a7", KEVO_CHART_POINTS, x, y, n,
                                    n <= 8 ? tips : NULL), KEVO_OK);
    assert_int_equal(kevo_chart_add(c, "best so far", "#222", KEVO_CHART_STEP, x, y, n, NULL),
                     KEVO_OK);
    assert_int_equal(kevo_chart_note(c, n ? x[0] : 1, n ? y[0] : 1, "end", "#555", "note <1>"),
                     KEVO_OK);
    kevo_svg_init(&w, 1 << 20);
    kevo_chart_render(c, &w);
    kevo_chart_free(c);
    assert_int_equal(kevo_svg_take(&w, &out), KEVO_OK);
    no_bad_numbers(out);
    assert_null(strstr(out, "<title> &"));          /* escaped */
    assert_non_null(strstr(out, "a &lt;title&gt; &amp; more"));
    return out;
}

static void test_chart_degenerate(void **state)
{
    double one_x = 3, one_y = 2e-4, zx[] = { 0, 0 }, zy[] = { 0, 0 };
    double nx[] = { NAN, 1, INFINITY, 2 }, ny[] = { 1, NAN, 3, -INFINITY };
    char *s;

    (void)state;
    s = chart(KEVO_SVG_LINEAR, KEVO_SVG_LOG, &one_x, &one_y, 1, "one");   /* one point */
    assert_non_null(strstr(s, "<circle"));
    assert_null(strstr(s, "no data"));
    kevo_free(s);
    s = chart(KEVO_SVG_LINEAR, KEVO_SVG_LOG, zx, zy, 2, "zero time");     /* zero on log */
    assert_non_null(strstr(s, "no data"));
    kevo_free(s);
    s = chart(KEVO_SVG_LINEAR, KEVO_SVG_LINEAR, zx, zy, 2, "zeros");      /* zero on linear */
    assert_null(strstr(s, "no data"));
    kevo_free(s);
    s = chart(KEVO_SVG_LINEAR, KEVO_SVG_LINEAR, nx, ny, 4, "odd & co");   /* none placeable */
    assert_non_null(strstr(s, "no data"));
    assert_non_null(strstr(s, "odd &amp; co"));
    kevo_free(s);
    s = chart(KEVO_SVG_LOG, KEVO_SVG_LOG, NULL, NULL, 0, NULL);           /* nothing */
    assert_non_null(strstr(s, "no data"));
    kevo_free(s);
    kevo_chart_free(NULL);
}

/* A path through points that cannot be placed is broken there, not drawn through them. */
static void test_path_breaks(void **state)
{
    struct kevo_svg w;
    double x[] = { 1, 2, NAN, 4, 5 }, y[] = { 1, 2, 3, 4, 5 };
    char *out = NULL;

    (void)state;
    kevo_svg_init(&w, 1 << 16);
    kevo_svg_path(&w, x, y, 5, 0, "#000", 1, NULL);
    kevo_svg_path(&w, x, y, 0, 0, "#000", 1, NULL);          /* nothing: no element */
    assert_int_equal(kevo_svg_take(&w, &out), KEVO_OK);
    assert_non_null(strstr(out, "M1.0 1.0L2.0 2.0M4.0 4.0L5.0 5.0"));
    assert_int_equal((int)(strstr(out + 1, "<path") != NULL), 0);
    kevo_free(out);
}

static void test_bars(void **state)
{
    const char *cats[] = { "ok", "<mismatch>" };
    double v[] = { 12, NAN, 0, -1 };
    struct kevo_chart_bars b = { "verdicts", 600, 2, 1, cats, NULL, NULL, v, NULL, 0, NULL };
    struct kevo_svg w;
    char *out = NULL;

    (void)state;
    kevo_svg_init(&w, 1 << 16);
    kevo_chart_bars(&w, &b);
    b.n_cats = 0;                                     /* no category at all */
    kevo_chart_bars(&w, &b);
    assert_int_equal(kevo_svg_take(&w, &out), KEVO_OK);
    no_bad_numbers(out);
    assert_non_null(strstr(out, "&lt;mismatch&gt;"));
    assert_non_null(strstr(out, ">12<"));
    assert_non_null(strstr(out, "no data"));
    kevo_free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_markup),
        cmocka_unit_test(test_escape_bytes),
        cmocka_unit_test(test_escape_bounds),
        cmocka_unit_test(test_sticky_status),
        cmocka_unit_test(test_scale_linear),
        cmocka_unit_test(test_scale_degenerate),
        cmocka_unit_test(test_scale_log),
        cmocka_unit_test(test_ticks),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_chart_degenerate),
        cmocka_unit_test(test_path_breaks),
        cmocka_unit_test(test_bars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

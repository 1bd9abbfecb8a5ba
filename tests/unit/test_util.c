/*
 * test_util - the small foundation modules: mem (fault injection, overflow-checked
 * arrays, kevo_strdupf), buf (the hard cap, take, formatting), log (callback and levels,
 * the name tables), fsutil (whole reads/writes, mkdir -p, the cache root), fdio (deadlines,
 * EOF) and backend.c's compile request builder.
 */
#include "testutil.h"
#include "worker/backend.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/fdio.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"
#include "core/task.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_mem(void **state)
{
    (void)state;
    void *p = kevo_malloc(16);
    assert_non_null(p);
    kevo_free(p);
    kevo_free(NULL);
    kevo_mem_fail_after(2);
    p = kevo_malloc(8);              /* the 1st succeeds */
    assert_non_null(p);
    assert_null(kevo_malloc(8));     /* the 2nd fails */
    void *q = kevo_malloc(8);        /* and only that one */
    assert_non_null(q);
    kevo_free(p);
    kevo_free(q);
    assert_null(kevo_reallocarray(NULL, SIZE_MAX / 2, 3));     /* overflow, not a wrap */
    char *s = kevo_strndup("abcdef", 3);
    assert_string_equal(s, "abc");
    kevo_free(s);
}

/* kevo_strdupf: the whole text whatever its length, NULL only when out of memory. */
static void test_strdupf(void **state)
{
    char big[5000];
    char *s;

    (void)state;
    s = kevo_strdupf("%d-%s", 42, "x");
    assert_string_equal(s, "42-x");
    kevo_free(s);
    s = kevo_strdupf("%s", "");
    assert_string_equal(s, "");
    kevo_free(s);
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    s = kevo_strdupf("<%s>", big);                  /* longer than any stack buffer */
    assert_non_null(s);
    assert_int_equal(strlen(s), sizeof big + 1);
    assert_int_equal(s[0], '<');
    assert_int_equal(s[sizeof big], '>');
    kevo_free(s);
    kevo_mem_fail_after(1);
    assert_null(kevo_strdupf("%d", 1));
    kevo_mem_fail_after(0);
}

static void test_buf_cap_and_take(void **state)
{
    (void)state;
    struct kevo_buf b;
    kevo_buf_init(&b, 10);
    assert_string_equal(kevo_buf_str(&b), "");
    assert_int_equal(kevo_buf_addf(&b, "%d-%s", 42, "x"), KEVO_OK);
    assert_string_equal(kevo_buf_str(&b), "42-x");
    assert_int_equal(kevo_buf_adds(&b, "0123456789"), KEVO_ERR_TOOBIG);
    assert_int_equal(b.len, 10);                 /* what fitted is kept */
    assert_string_equal(kevo_buf_str(&b), "42-x012345");
    char *t = kevo_buf_take(&b);
    assert_string_equal(t, "42-x012345");
    assert_int_equal(b.len, 0);
    kevo_free(t);
    kevo_buf_init(&b, 1 << 20);
    char big[2000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(kevo_buf_addf(&b, "%s!", big), KEVO_OK);   /* longer than the stack copy */
    assert_int_equal(b.len, sizeof big);
    kevo_buf_free(&b);
    kevo_buf_free(&b);                           /* twice is harmless */
}

static int n_logged;
static enum kevo_log_level last_level;
static void logger(enum kevo_log_level lvl, const char *msg, void *user)
{
    (void)user;
    n_logged++;
    last_level = lvl;
    assert_non_null(strstr(msg, "hello 7"));
}

static void test_log_and_names(void **state)
{
    (void)state;
    kevo_log_set(logger, NULL, KEVO_LOG_WARN);
    KEVO_WARN("hello %d", 7);
    KEVO_DEBUG("hello %d", 7);                   /* above the level: dropped */
    assert_int_equal(n_logged, 1);
    assert_int_equal(last_level, KEVO_LOG_WARN);
    kevo_log_set(NULL, NULL, KEVO_LOG_DEBUG);
    KEVO_ERROR("hello %d", 7);                   /* no logger: dropped */
    assert_int_equal(n_logged, 1);
    assert_string_equal(kevo_status_name(KEVO_ERR_TOOBIG), "too big");
    assert_string_equal(kevo_status_name((enum kevo_status)999), "unknown");
    enum kevo_verdict v;
    for (int i = 0; i < KEVO_VERDICT_COUNT; i++) {
        assert_int_equal(kevo_verdict_parse(kevo_verdict_name((enum kevo_verdict)i), &v), KEVO_OK);
        assert_int_equal(v, i);
    }
    assert_int_equal(kevo_verdict_parse("fast", &v), KEVO_ERR_NOTFOUND);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

static void test_fsutil(void **state)
{
    (void)state;
    char root[] = "/tmp/kevo-util-XXXXXX", path[256], got[256];
    assert_non_null(mkdtemp(root));
    snprintf(path, sizeof path, "%s/a/b/c/", root);       /* trailing slash too */
    assert_int_equal(kevo_fs_mkdirs(path, 0700), 0);
    assert_int_equal(kevo_fs_mkdirs(path, 0700), 0);      /* existing: fine */
    snprintf(path, sizeof path, "%s/a/b/c/f", root);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(kevo_fs_write_all(fd, "hello", 5), 0);
    close(fd);
    char in[8] = {0};
    fd = open(path, O_RDONLY);
    assert_int_equal(kevo_fs_read_all(fd, in, 5), 0);
    assert_string_equal(in, "hello");
    assert_int_equal(kevo_fs_read_all(fd, in, 1), -1);    /* EOF is a short read: an error */
    close(fd);
    snprintf(path, sizeof path, "%s/a/b/c/f/g", root);    /* a file in the way */
    assert_int_equal(kevo_fs_mkdirs(path, 0700), -1);
    snprintf(path, sizeof path, "%s/a/b/c/f", root);      /* the last part is a file */
    assert_int_equal(kevo_fs_mkdirs(path, 0700), -1);
    assert_int_equal(kevo_fs_mkdirs("", 0700), -1);
    setenv("KEVO_CACHE_DIR", "/x/y", 1);
    assert_int_equal(kevo_fs_cache_root(got, sizeof got), 0);
    assert_string_equal(got, "/x/y");
    unsetenv("KEVO_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    assert_int_equal(kevo_fs_cache_root(got, sizeof got), 0);
    assert_string_equal(got, "/xdg/kevo");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(kevo_fs_cache_root(got, sizeof got), 0);
    assert_string_equal(got, "/home/u/.cache/kevo");
    assert_int_equal(kevo_fs_cache_root(got, 5), -1);     /* does not fit */
    assert_string_equal(got, "");
    assert_int_equal(nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* fdio's deadlines: a whole read takes what is already there even past its deadline (the
 * sandbox's late sync); a plain wait does not (a stream reader stops at the deadline). */
static void test_fdio_deadline(void **state)
{
    int p[2], s[2], eof = -1;
    double past = kevo_now() - 1.0, soon = kevo_now() + 0.05;
    char in[8] = { 0 };
    size_t got = 99;

    (void)state;
    assert_int_equal(pipe(p), 0);
    assert_int_equal(kevo_fd_write_all(p[1], "abc", 3), KEVO_OK);
    assert_int_equal(kevo_fd_wait_readable(p[0], &past), KEVO_ERR_TIMEOUT);
    assert_int_equal(kevo_fd_read_full(p[0], in, 3, &past, &got, &eof), KEVO_OK);
    assert_string_equal(in, "abc");
    assert_int_equal(got, 3);
    assert_int_equal(kevo_fd_read_full(p[0], in, 1, &past, &got, &eof), KEVO_ERR_TIMEOUT);
    assert_int_equal(got, 0);
    assert_int_equal(kevo_fd_read_full(p[0], in, 1, &soon, &got, &eof), KEVO_ERR_TIMEOUT);
    assert_true(kevo_now() >= soon);
    assert_int_equal(kevo_fd_write_all(p[1], "d", 1), KEVO_OK);
    close(p[1]);
    assert_int_equal(kevo_fd_read_full(p[0], in, 2, NULL, &got, &eof), KEVO_ERR_IO);
    assert_int_equal(got, 1);
    assert_int_equal(eof, 1);                       /* the writer closed */
    close(p[0]);
    /* A socket whose peer closed with bytes unread: ECONNRESET, which is an EOF too. */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
    assert_int_equal(kevo_fd_write_all(s[0], "x", 1), KEVO_OK);
    close(s[1]);
    assert_int_equal(kevo_fd_read_full(s[0], in, 1, &soon, &got, &eof), KEVO_ERR_IO);
    assert_int_equal(eof, 1);
    close(s[0]);
}

static void test_compile_src(void **state)
{
    (void)state;
    static const char task_text[] = "// kevo task   t\n// kevo size   N=8\n"
                                    "// kevo input  x f32[N] normal(0,1)\n"
                                    "// kevo output y f32[N]\n// kevo bytes  8*N\n"
                                    "// kevo call   f(x, y, N)\nvoid f(const float *x, float *y, int n) {}\n";
    static const char cand_text[] = "// kevo param  A 1 2\n// kevo param  B 5 6\n"
                                    "// kevo flags  -O2\n"
                                    "// kevo call   g(x, y, N)\n// kevo call   h(y, N)\n"
                                    "// kevo call   g(x, y, N)\nvoid g(const float *x, float *y, int n) {}\n"
                                    "void h(float *y, int n) {}\n";
    struct kevo_task *t = NULL, *c = NULL;
    char *msg = NULL;
    struct kevo_compile_src s;
    int64_t params[2] = {2, 6};

    assert_int_equal(kevo_task_parse("t.c", task_text, strlen(task_text), &t, &msg), KEVO_OK);
    assert_int_equal(kevo_candidate_parse(t, "c.c", cand_text, strlen(cand_text), &c, &msg),
                     KEVO_OK);
    assert_int_equal(kevo_compile_src_init(&s, c, NULL), KEVO_OK);
    assert_int_equal(s.req.n_entries, 2);                 /* g, h: distinct, first-use order */
    assert_string_equal(s.req.entries[0], "g");
    assert_string_equal(s.req.entries[1], "h");
    assert_int_equal(s.req.n_defines, 2);
    assert_string_equal(s.req.define_names[1], "B");
    assert_int_equal(s.req.define_values[0], 1);          /* defaults */
    assert_int_equal(s.req.n_flags, 1);
    kevo_compile_src_free(&s);
    assert_int_equal(kevo_compile_src_init(&s, c, params), KEVO_OK);
    assert_int_equal(s.req.define_values[1], 6);
    kevo_compile_src_free(&s);
    kevo_compile_src_free(&s);                            /* twice is harmless */
    kevo_mem_fail_after(1);
    assert_int_equal(kevo_compile_src_init(&s, c, NULL), KEVO_ERR_NOMEM);
    kevo_mem_fail_after(0);
    kevo_task_free(c);
    kevo_task_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem),
        cmocka_unit_test(test_strdupf),
        cmocka_unit_test(test_buf_cap_and_take),
        cmocka_unit_test(test_log_and_names),
        cmocka_unit_test(test_fsutil),
        cmocka_unit_test(test_fdio_deadline),
        cmocka_unit_test(test_compile_src),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

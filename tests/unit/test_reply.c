/*
 * test_reply - LLM replies to candidate texts (src/reply.c): whole files in fenced blocks
 * among prose, SEARCH/REPLACE edits, and every way a reply can be unusable (no code, a
 * truncated block or edit, an edit that does not apply or is ambiguous, binary data, too
 * large), each refused with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/mem.h"
#include "ctl/reply.h"

#include <stdlib.h>
#include <string.h>

static const char PARENT[] =
    "// kevo launch k grid=N block=256 (x, y, N)\n"
    "extern \"C\" __global__ void k(const float *x, float *y, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        y[i] = x[i];\n"
    "}\n";

static char *ok(const char *reply, const char *parent, enum kevo_reply_form want)
{
    char *out = NULL, *why = NULL;
    size_t n = 0;
    enum kevo_reply_form f;
    enum kevo_status st = kevo_reply_apply(reply, strlen(reply), parent,
                                           parent ? strlen(parent) : 0, &out, &n, &f, &why);
    if (st)
        fail_msg("refused: %s", why ? why : "?");
    assert_int_equal(f, want);
    assert_int_equal(strlen(out), n);
    return out;
}

static void bad(const char *reply, size_t len, const char *parent, const char *want)
{
    char *out = NULL, *why = NULL;
    size_t n = 0;
    enum kevo_reply_form f;
    assert_int_equal(kevo_reply_apply(reply, len, parent, parent ? strlen(parent) : 0, &out,
                                      &n, &f, &why), KEVO_ERR_PARSE);
    assert_null(out);
    assert_int_equal(f, KEVO_REPLY_NONE);
    if (!why || !strstr(why, want))
        fail_msg("reason '%s', want '%s'", why ? why : "(none)", want);
    kevo_free(why);
}

static void test_file_in_prose(void **state)
{
    (void)state;
    char *o = ok("Here is a faster version.\n\n```cuda\n// kevo launch k grid=N block=128 (x, y, N)\n"
                 "extern \"C\" __global__ void k() {}\n```\n\nThis uses fewer threads. ```x``` "
                 "is inline.\n", NULL, KEVO_REPLY_FILE);
    assert_string_equal(o, "// kevo launch k grid=N block=128 (x, y, N)\n"
                           "extern \"C\" __global__ void k() {}\n");
    kevo_free(o);
    /* several blocks: the one with a launch plan wins over a larger one without */
    o = ok("```bash\nnvcc a.cu\nnvcc b.cu\nnvcc c.cu\n```\n```cpp\n// kevo call f(x)\nvoid f(){}\n"
           "```\n", NULL, KEVO_REPLY_FILE);
    assert_string_equal(o, "// kevo call f(x)\nvoid f(){}\n");
    kevo_free(o);
    /* a four-backtick wrapper holding a fenced example: the inner fences do not close it */
    o = ok("````c\n// kevo call f(x)\n/* usage:\n```\nf(x);\n```\n */\nvoid f(){}\n````\n",
           NULL, KEVO_REPLY_FILE);
    assert_string_equal(o, "// kevo call f(x)\n/* usage:\n```\nf(x);\n```\n */\nvoid f(){}\n");
    kevo_free(o);
    /* ```c is an opening, not a closing fence */
    o = ok("```c\n// kevo call f(x)\nvoid f(){}\n```\ntext\n```c\nint z;\n```\n", NULL,
           KEVO_REPLY_FILE);
    assert_string_equal(o, "// kevo call f(x)\nvoid f(){}\n");
    kevo_free(o);
    /* CRLF replies */
    o = ok("```c\r\n// kevo call f(x)\r\nvoid f(){}\r\n```\r\n", NULL, KEVO_REPLY_FILE);
    assert_string_equal(o, "// kevo call f(x)\nvoid f(){}\n");
    kevo_free(o);
}

static void test_edits(void **state)
{
    (void)state;
    char *o = ok("I will use a grid-stride loop.\n"
                 "<<<<<<< SEARCH\n    if (i < n)\n        y[i] = x[i];\n=======\n"
                 "    for (; i < n; i += gridDim.x * blockDim.x)\n        y[i] = x[i];\n"
                 ">>>>>>> REPLACE\n"
                 "and\n<<<<<<< SEARCH\n// kevo launch k grid=N block=256 (x, y, N)   \n=======\n"
                 "// kevo launch k grid=1024 block=256 (x, y, N)\n>>>>>>> REPLACE\n",
                 PARENT, KEVO_REPLY_EDITS);
    assert_non_null(strstr(o, "for (; i < n; i += gridDim.x * blockDim.x)\n        y[i] = x[i];\n}"));
    assert_non_null(strstr(o, "grid=1024"));
    assert_null(strstr(o, "if (i < n)"));
    kevo_free(o);
    /* an edit inside a fenced block is still an edit */
    o = ok("```\n<<<<<<< SEARCH\n{\n=======\n{ /* hi */\n>>>>>>> REPLACE\n```\n", PARENT,
           KEVO_REPLY_EDITS);
    assert_non_null(strstr(o, "{ /* hi */\n"));
    kevo_free(o);
}

static void test_unusable_replies(void **state)
{
    (void)state;
    const char *t;
    t = "I think you should use shared memory.";
    bad(t, strlen(t), PARENT, "no code block and no SEARCH/REPLACE edit");
    t = "```cuda\n// kevo launch k grid=N block=256 (x, y, N)\nextern \"C\" __global__ void k(";
    bad(t, strlen(t), PARENT, "not closed (a truncated reply?)");
    t = "```\n```\n";
    bad(t, strlen(t), PARENT, "empty");
    t = "<<<<<<< SEARCH\n    y[i] = 2 * x[i];\n=======\n    y[i] = x[i];\n>>>>>>> REPLACE\n";
    bad(t, strlen(t), PARENT, "edit 1: its SEARCH text is not in the parent");
    t = "<<<<<<< SEARCH\n{\n=======\n{ \n>>>>>>> REPLACE\n<<<<<<< SEARCH\n        y[i] = x[i];\n"
        "=======\nx\n>>>>>>> REPLACE\n<<<<<<< SEARCH\n    \n=======\n\n>>>>>>> REPLACE\n";
    bad(t, strlen(t), "a\n\nb\n\n", "edit 1: its SEARCH text is not in the parent");
    t = "<<<<<<< SEARCH\nb\n=======\nc\n>>>>>>> REPLACE\n";
    bad(t, strlen(t), "b\nb\n", "edit 1: its SEARCH text occurs 2 times");
    t = "<<<<<<< SEARCH\n{\n=======\n{ /* cut";
    bad(t, strlen(t), PARENT, "edit 1: not closed by >>>>>>> REPLACE");
    t = "<<<<<<< SEARCH\n{\n>>>>>>> REPLACE\n";
    bad(t, strlen(t), PARENT, "edit 1: no ======= line");
    t = "<<<<<<< SEARCH\n{\n=======\n}\n>>>>>>> REPLACE\n";
    bad(t, strlen(t), NULL, "there is none");
    bad("```c\nvoid f() {}\0\n```\n", 20, NULL, "binary data (byte 0x00) at offset 16");
    t = "```c\nvoid f() { \x1b[31m }\n```\n";
    bad(t, strlen(t), NULL, "binary data (byte 0x1b)");
}

static void test_huge_replies(void **state)
{
    (void)state;
    size_t n = KEVO_REPLY_MAX_BYTES + 1;
    char *big = kevo_malloc(n + 1);
    assert_non_null(big);
    memset(big, 'a', n);
    big[n] = '\0';
    bad(big, n, PARENT, "the reply is");
    /* within the reply cap, but the code block is larger than a candidate may be */
    size_t m = KEVO_REPLY_MAX_OUT + 100;
    memcpy(big, "```\n", 4);
    for (size_t i = 4; i < m; i++)
        big[i] = (i % 80) ? 'x' : '\n';
    memcpy(big + m, "\n```\n", 5);
    bad(big, m + 5, PARENT, "the code block is over");
    kevo_free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_in_prose),
        cmocka_unit_test(test_edits),
        cmocka_unit_test(test_unusable_replies),
        cmocka_unit_test(test_huge_replies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * good - near misses every rule must let pass. It names itself (good.c, src/ctl/good.c),
 * system headers (stdio.h, cuda.h), a placeholder (NAME_test.c), a folder (src/core/)
 * and generated output (build/gen/harness.cu.inc). Do not call sprintf(buf, ...) here.
 */
#include <stdio.h>
#include "kevo.h"
#include "base/mem.h"
#include "core/task.h"
#include "ctl/run.h"

struct ops { void (*free)(void *p); };
struct pair { int a, b; };

static struct pair good_pair(int a, int b)
{
    return (struct pair){ a, b };
}

int good(const struct ops *ops, void *p, char *line, FILE *f)
{
    const char *msg = "strcpy(a, b), atoi(s); return x, y;";
    int n = fgets(line, 8, f) != NULL;
    ops->free(p);
    kevo_free(NULL);
    return good_pair(n, msg[0]).a + snprintf(line, 8, "%d, %d", 1, 2);
}

/* json_pack formats whose arguments match: s# and s% take a length too, n none. */
static void *good_pack(const char *s)
{
    return json_pack("{s:s#, s:n, s:[i, I], s:s%}", "a", s, 1, "b", "c", 2, 3, "d", s, 4);
}

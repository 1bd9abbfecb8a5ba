/*
 * diff - the lines of two texts compared, as a unified diff: hunks of changed lines with a
 * few unchanged ones around them (what `diff -u` prints, without file names). The longest
 * common subsequence of the lines that differ, after the common head and tail are set
 * aside; past a size cap (texts of thousands of differing lines) the middle is shown as
 * all removed and all added, which is still a true diff, only not a minimal one.
 * Pure functions; thread-safe.
 */
#ifndef KEVO_DIFF_H
#define KEVO_DIFF_H

#include "kevo.h"
#include <stddef.h>

enum kevo_diff_op {
    KEVO_DIFF_HUNK = 0,          /* a hunk begins: line is "@@ -A,N +B,M @@" */
    KEVO_DIFF_SAME,              /* a line of both */
    KEVO_DIFF_DEL,               /* a line of a only */
    KEVO_DIFF_ADD                /* a line of b only */
};

/* One line of the diff (line[0..len), without its newline; borrowed for the call). */
typedef void (*kevo_diff_fn)(void *user, enum kevo_diff_op op, const char *line, size_t len);

/* The unified diff of a and b (NULL reads as "") with `context` unchanged lines around each
 * change, line by line through fn; nothing when they are equal. *n_changed (may be NULL)
 * gets the number of removed plus added lines. KEVO_ERR_NOMEM only. */
KEVO_NODISCARD enum kevo_status kevo_diff_lines(const char *a, const char *b, int context,
                                                kevo_diff_fn fn, void *user, int *n_changed);

#endif

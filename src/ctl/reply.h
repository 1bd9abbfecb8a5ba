/*
 * reply - an LLM's reply turned into a candidate's text (docs/llm.md "Reading replies"):
 * either SEARCH/REPLACE edits against the parent, or a whole file in a fenced code block,
 * with any prose around them ignored. A reply that cannot be applied gets a reason and
 * costs no GPU time; nothing here touches the filesystem, and huge, truncated, binary or
 * hostile text is refused with a reason, never a crash.
 *
 * Edits, one or more blocks, applied in order, each SEARCH text found exactly once:
 *
 *     <<<<<<< SEARCH
 *     the parent's lines
 *     =======
 *     their replacement
 *     >>>>>>> REPLACE
 */
#ifndef KEVO_REPLY_H
#define KEVO_REPLY_H

#include "kevo.h"
#include <stddef.h>

#define KEVO_REPLY_MAX_BYTES ((size_t)4 << 20)   /* a reply larger than this is refused */
#define KEVO_REPLY_MAX_OUT ((size_t)1 << 20)     /* a candidate larger than this too */

enum kevo_reply_form { KEVO_REPLY_NONE = 0, KEVO_REPLY_EDITS, KEVO_REPLY_FILE };

/*
 * The candidate text a reply describes. parent (may be NULL: a first implementation)
 * is what SEARCH blocks are matched against. On success *out (kevo_free) and *form; on
 * KEVO_ERR_PARSE, *why (kevo_free) says what was wrong, e.g. "no code block and no
 * SEARCH/REPLACE edit in the reply", "edit 2: its SEARCH text is not in the parent",
 * "edit 1: its SEARCH text occurs 3 times in the parent", "the code block is not closed
 * (a truncated reply?)", "binary data (a NUL byte) at offset 10".
 */
KEVO_NODISCARD enum kevo_status kevo_reply_apply(const char *reply, size_t len, const char *parent,
                                                 size_t parent_len, char **out, size_t *out_len,
                                                 enum kevo_reply_form *form, char **why);

#endif

/*
 * genome - what the search varies about a candidate without an LLM: the value chosen for
 * each of its `param`s and its `flags`, on top of its source text. A genome is turned back
 * into a candidate file (kevo_genome_text) whose `param` lines list the chosen value first
 * (so it is the default the evaluator compiles), then the others in ascending order (so
 * one configuration always has one text), and whose single `flags` line holds the
 * flags, so what the archive stores is exactly what was evaluated, and the SHA-256 of that
 * text is the candidate's identity (duplicates are never evaluated twice).
 */
#ifndef KEVO_GENOME_H
#define KEVO_GENOME_H

#include "ctl/archive.h"
#include "base/sha.h"
#include "kevo.h"
#include "core/task.h"
#include <stdint.h>

#define KEVO_GENOME_MAX_FLAGS 16

struct kevo_genome {
    char *text;                       /* the candidate source as given (owned) */
    size_t len;
    int n_params;
    char **names;                     /* [n_params], owned */
    int *n_values;                    /* [n_params] */
    int64_t **values;                 /* [n_params][n_values]: the listed values, ascending */
    int *geometry;                    /* [n_params] 1: used in a grid=/block=/smem= expression */
    int *choice;                      /* [n_params] index into values */
    int n_flags;
    char *flags[KEVO_GENOME_MAX_FLAGS];
    enum kevo_lang lang;
};

/*
 * A genome from a candidate's text for task (parsed with kevo_candidate_parse: a parse
 * error is KEVO_ERR_PARSE/INVALID with *out_msg naming path:line:col). The choice of each
 * param is its first listed value; the flags are the file's.
 */
KEVO_NODISCARD enum kevo_status kevo_genome_from_text(const struct kevo_task *task,
                                                      const char *path, const char *text,
                                                      size_t len, struct kevo_genome *out,
                                                      char **out_msg);
void kevo_genome_clear(struct kevo_genome *g);        /* NULL or zeroed: no-op */
KEVO_NODISCARD enum kevo_status kevo_genome_copy(const struct kevo_genome *src,
                                                 struct kevo_genome *dst);

/* The candidate file of g (kevo_free it): param lines rewritten, one flags line. */
KEVO_NODISCARD enum kevo_status kevo_genome_text(const struct kevo_genome *g, char **out,
                                                 size_t *len);
/* SHA-256 hex of kevo_genome_text(g): the candidate's key. */
KEVO_NODISCARD enum kevo_status kevo_genome_key(const struct kevo_genome *g,
                                                char key[KEVO_HASH_HEX]);
/* {"NAME": value, ...} and ["flag", ...] as JSON texts (kevo_free them). */
KEVO_NODISCARD enum kevo_status kevo_genome_json(const struct kevo_genome *g, char **params,
                                                 char **flags);
/* Does g carry this exact flag? */
int kevo_genome_has_flag(const struct kevo_genome *g, const char *flag);
/* Add (1) or remove (0) one flag; KEVO_ERR_TOOBIG past KEVO_GENOME_MAX_FLAGS. */
KEVO_NODISCARD enum kevo_status kevo_genome_set_flag(struct kevo_genome *g, const char *flag,
                                                     int on);

/* The same source with the same params, whatever values are chosen and flags set? */
int kevo_genome_same_source(const struct kevo_genome *a, const struct kevo_genome *b);


#endif

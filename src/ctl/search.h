/*
 * search - the evolutionary search's state and decisions (docs/search.md), with no I/O:
 * islands, each with a MAP-Elites grid whose axes describe kernels (memory strategy,
 * compute path, a resource bucket), parent selection mixing exploitation and exploration,
 * migration between islands, and the choice among operators weighted by their measured
 * success. run.c feeds it verdicts and asks it for proposals; ops.c holds the operators.
 *
 * Everything random comes from the search's own seeded generator, so a run is
 * reproducible from its seed and its archive.
 */
#ifndef KEVO_SEARCH_H
#define KEVO_SEARCH_H

#include "core/result.h"
#include "ctl/genome.h"
#include "kevo.h"
#include "core/task.h"
#include <jansson.h>
#include <stdint.h>

/* The grid: 4 memory strategies x 3 compute paths x 4 resource buckets. */
#define KEVO_DESC_MEM 4
#define KEVO_DESC_COMP 3
#define KEVO_DESC_RES 4
#define KEVO_CELLS (KEVO_DESC_MEM * KEVO_DESC_COMP * KEVO_DESC_RES)
#define KEVO_MAX_ISLANDS 16
#define KEVO_MAX_OPS 16

struct kevo_desc {
    int mem;      /* 0 plain loads, 1 vector loads, 2 shared-memory tiling, 3 async copy/TMA;
                     C: 0 plain, 1 SIMD (pragma or intrinsics), 2 blocked loops (a param
                     used as a tile), 3 both */
    int comp;     /* 0 scalar, 1 warp shuffles, 2 tensor cores (mma/wmma/wgmma);
                     C: 0 one thread, 1 OpenMP parallel, 2 OpenMP with SIMD */
    int res;      /* CUDA: registers per thread <= 32, <= 64, <= 128, more;
                     C: the first param's value as a quartile of its list */
};

/* Descriptors of a candidate: its text (genome g) and its eval result (resources). */
void kevo_desc_of(const struct kevo_genome *g, const struct kevo_result *result,
                  struct kevo_desc *out);
int kevo_desc_cell(const struct kevo_desc *d);
/* {"mem": "shared", "comp": "shuffle", "res": "regs<=64"} (new reference). */
json_t *kevo_desc_json(const struct kevo_desc *d, enum kevo_lang lang);

/* A splitmix64 stream: reproducible, independent of libc. */
struct kevo_rng {
    uint64_t s;
};
uint64_t kevo_rng_next(struct kevo_rng *r);
double kevo_rng_unit(struct kevo_rng *r);              /* [0, 1) */
int kevo_rng_below(struct kevo_rng *r, int n);         /* [0, n), n >= 1 */

/* One elite slot. */
struct kevo_elite {
    int64_t id;                  /* 0: empty */
    double score;                /* lower is better */
};

struct kevo_search_cfg {
    int n_islands;               /* 1..KEVO_MAX_ISLANDS */
    double explore;              /* probability of a uniform pick over a tournament */
    int tournament;              /* tournament size */
    int migrate_every;           /* evaluations between migrations; 0: never */
    uint64_t seed;
};
void kevo_search_cfg_default(struct kevo_search_cfg *c);

struct kevo_search;              /* opaque */

KEVO_NODISCARD enum kevo_status kevo_search_new(const struct kevo_search_cfg *c,
                                                struct kevo_search **out);
void kevo_search_free(struct kevo_search *s);

/*
 * An ok candidate placed in island's cell: it becomes the cell's elite when better than
 * the one there. Returns 1 when it is the new best of the whole search.
 */
int kevo_search_place(struct kevo_search *s, int island, int cell, int64_t id, double score);
/* An evaluation finished (any verdict): counts toward migration; migrates when due.
 * Returns the number of elites that moved. */
int kevo_search_tick(struct kevo_search *s);
/* Copy each island's best into the next island's grid (ring) when it is better there. */
int kevo_search_migrate(struct kevo_search *s);

/* The island the next proposal belongs to (round robin). */
int kevo_search_next_island(struct kevo_search *s);
/* A parent from island's grid (tournament, or uniform with probability explore); 0 when
 * the island is empty. */
int64_t kevo_search_parent(struct kevo_search *s, int island);
/* A second parent different from the first when the island has one (else 0). */
int64_t kevo_search_mate(struct kevo_search *s, int island, int64_t first);

/* Occupied cells of an island, and the best overall. */
int kevo_search_occupied(const struct kevo_search *s, int island);
const struct kevo_elite *kevo_search_best(const struct kevo_search *s);
const struct kevo_elite *kevo_search_cell(const struct kevo_search *s, int island, int cell);
struct kevo_rng *kevo_search_rng(struct kevo_search *s);
int kevo_search_islands(const struct kevo_search *s);

/* ---- operator choice ---- */

/* Register operator i by name with a prior weight. */
void kevo_search_op_register(struct kevo_search *s, int i, const char *name, double prior);
/* Pick an operator index by weight x (1 + success rate), skipping those in `exclude`
 * (a bit mask); -1 when none is left. */
int kevo_search_op_pick(struct kevo_search *s, unsigned exclude);
/* Outcome of a candidate the operator proposed: ok, and whether it beat its parent. */
void kevo_search_op_result(struct kevo_search *s, int i, int ok, int improved);
/* {name: {proposed, ok, improved, weight}} (new reference). */
json_t *kevo_search_op_json(const struct kevo_search *s);
void kevo_search_op_proposed(struct kevo_search *s, int i);

#endif

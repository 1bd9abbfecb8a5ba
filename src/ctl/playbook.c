/*
 * playbook - the notes and exemplar code a prompt carries (playbook.h). A note is a
 * docs/playbook/ file with a header (title, tags, bottleneck, lang, and optionally
 * exemplars: paths of candidate files relative to the data directory); everything here
 * reads files and chooses, deterministically, so that the same task, parent and playbook
 * always give the same prompt (replays and the reply cache compare prompts).
 */
#include "ctl/playbook.h"
#include "base/fsutil.h"
#include "base/mem.h"
#include "core/sol.h"
#include "ctl/profile.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOTE_MAX ((size_t)64 << 10)         /* a note file, at most */
#define EXEMPLAR_MAX ((size_t)256 << 10)    /* an exemplar file, at most */
#define NOTES_MAX 256                       /* note files read */
#define WORDS_MAX 300                       /* task words matched (tags, unit) */
#define EXEMPLARS_MAX 32                    /* exemplars considered */
#define ASKED_SCORE 100000                  /* a note the task asks for outranks any other */
#define NAME_MATCH 100                      /* an exemplar named after the task */

/* dir/name as text, NULL when it cannot be read. */
static char *read_at(const char *dir, const char *name, size_t cap)
{
    char path[4096], *t = NULL;
    size_t n;

    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return NULL;
    return kevo_fs_read_file(path, cap, &t, &n, NULL) == KEVO_OK ? t : NULL;
}

/* The value of header field `key` in note text (borrowed up to the line end), or NULL. */
static const char *field(const char *t, const char *key, size_t *n)
{
    size_t k = strlen(key);
    for (const char *p = t; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (!strncmp(p, "---", 3) && p != t)
            break;
        if (!strncmp(p, key, k) && p[k] == ':') {
            const char *v = p + k + 1, *e = strchr(v, '\n');
            while (*v == ' ')
                v++;
            *n = e ? (size_t)(e - v) : strlen(v);
            while (*n && (v[*n - 1] == ' ' || v[*n - 1] == '\r'))
                (*n)--;
            return v;
        }
    }
    return NULL;
}

/* Is w one of the blank-separated words of v[0..n)? */
static int has_word(const char *v, size_t n, const char *w)
{
    size_t k = strlen(w);
    for (size_t i = 0; k && i + k <= n; i++)
        if (!strncmp(v + i, w, k) && (i == 0 || v[i - 1] == ' ') && (i + k == n || v[i + k] == ' '))
            return 1;
    return 0;
}

/* ---- the bound ---- */

/* FLOP per byte where compute meets DRAM on an H100, per enum kevo_unit (fp32 fp64 tf32
 * fp16 bf16 fp8): the rule where no calibration gives the device's own figures */
static const double ridge[KEVO_UNIT_COUNT] = { 20, 20, 120, 250, 250, 500 };

/* The first visible workload: the primary one (holdouts may stand anywhere). */
static int primary(const struct kevo_task *t)
{
    for (int i = 0; i < t->n_workloads; i++)
        if (!t->workloads[i].holdout)
            return i;
    return -1;
}

const char *kevo_playbook_bound(const struct kevo_task *t, json_t *calib)
{
    struct kevo_env env;
    struct kevo_sol_figures f;
    int64_t bytes = 0, flops = 0;
    char *msg = NULL;
    int w = t && t->bytes ? primary(t) : -1;

    if (w < 0 || kevo_task_env(t, w, NULL, NULL, &env, &msg) != KEVO_OK ||
        kevo_env_eval(&env, t->bytes, &bytes, &msg) != KEVO_OK ||
        (t->flops && kevo_env_eval(&env, t->flops, &flops, &msg) != KEVO_OK)) {
        kevo_free(msg);
        return NULL;
    }
    kevo_sol_figures_from_json(calib, &f);
    double pk = f.peak_flops[t->flops_unit];
    if (f.bw_bytes_per_s > 0 && pk > 0)
        return (double)flops / pk > (double)bytes / f.bw_bytes_per_s ? "compute" : "memory";
    return bytes > 0 && (double)flops / (double)bytes > ridge[t->flops_unit] ? "compute" : "memory";
}

const char *kevo_playbook_profiled(const json_t *profile)
{
    char d[512];
    const char *m, *c;

    if (!profile || json_object_get(profile, "error") ||
        !json_array_size(json_object_get(profile, "kernels")))
        return NULL;
    kevo_profile_diagnose(profile, d, sizeof d);
    m = strstr(d, "memory-bound:");
    c = strstr(d, "compute-bound:");
    if (m && (!c || m < c))
        return "memory";
    return c ? "compute" : NULL;
}

/* ---- choosing notes ---- */

struct note {
    char *name;      /* the file name without .md (owned) */
    char *text;      /* the whole file (owned) */
    int score;
};

/* The words notes are matched against: the task's tags, and for a compute-bound task the
 * unit of its flops (fp32 for SIMT notes, bf16 for tensor-core ones). */
struct words {
    const char *w[WORDS_MAX];
    int n;
};

static void task_words(const struct kevo_playbook_req *q, struct words *tw)
{
    tw->n = 0;
    for (int i = 0; i < q->n_tags && tw->n < WORDS_MAX - 1; i++)
        tw->w[tw->n++] = q->tags[i];
    if (q->task && q->task->flops && !strcmp(q->bound, "compute")) {
        const char *u = kevo_unit_name(q->task->flops_unit);
        int have = 0;
        for (int i = 0; i < tw->n; i++)
            have |= !strcmp(tw->w[i], u);
        if (!have)
            tw->w[tw->n++] = u;
    }
}

/* The rank of `name` among the notes the task asks for: 0 when it asks not for it. */
static int asked(const struct kevo_playbook_req *q, const char *name)
{
    for (int i = 0; q->task && i < q->task->n_notes; i++)
        if (!strcmp(q->task->notes[i], name))
            return q->task->n_notes - i;
    return 0;
}

/* How well a note fits: -1 when it does not apply. */
static int note_score(const struct note *nt, const struct kevo_playbook_req *q,
                      const struct words *tw)
{
    size_t n;
    int a = asked(q, nt->name);
    const char *v = field(nt->text, "lang", &n);

    if (a)
        return ASKED_SCORE + a;
    if (v && q->lang && !has_word(v, n, q->lang))
        return -1;
    v = field(nt->text, "bottleneck", &n);
    int in = v && has_word(v, n, q->bound), ob = v && q->observed && has_word(v, n, q->observed);
    if (v && !has_word(v, n, "any") && !in && !ob && strcmp(q->bound, "any") != 0)
        return -1;
    int s = 2 * in + 2 * ob;
    v = field(nt->text, "tags", &n);
    if (!v)
        return -1;
    for (int i = 0; i < tw->n; i++)
        s += 3 * has_word(v, n, tw->w[i]);
    if (!s && !has_word(v, n, "any"))
        return -1;
    return s + 1 + (field(nt->text, "exemplars", &n) != NULL);   /* working code: a tie-break */
}

/* Best first; equal scores by name, so that the order never depends on the sort. */
static int by_score(const void *a, const void *b)
{
    const struct note *x = a, *y = b;
    return x->score != y->score ? (y->score > x->score ? 1 : -1) : strcmp(x->name, y->name);
}

/*
 * The note files of dir (README.md aside), in name order, into notes (score 0); their
 * number. *format: 2 when a note names exemplars, else 1 (a playbook from before them).
 */
static int read_notes(const char *dir, struct note *notes, int *format)
{
    struct dirent **ents = NULL;
    int n = 0, ne = scandir(dir, &ents, NULL, alphasort);
    size_t fl;

    *format = 1;
    for (int i = 0; i < ne; i++) {
        const char *d = ents[i]->d_name;
        size_t l = strlen(d);
        if (n < NOTES_MAX && l > 3 && !strcmp(d + l - 3, ".md") && strcmp(d, "README.md")) {
            struct note nt = { kevo_strndup(d, l - 3), read_at(dir, d, NOTE_MAX), 0 };
            if (nt.name && nt.text) {
                notes[n++] = nt;
                *format = field(nt.text, "exemplars", &fl) ? 2 : *format;
            } else {
                kevo_free(nt.name);
                kevo_free(nt.text);
            }
        }
        kevo_free(ents[i]);   /* scandir's: kevo_free is free() */
    }
    kevo_free(ents);
    return n;
}

/*
 * How well a note of a format-1 playbook fits, as kevo chose before exemplars (tags and
 * the parent's measured bound alone), so that runs recorded with such a playbook replay
 * to the same prompts: -1 when it does not apply.
 */
static int legacy_score(const struct note *nt, const struct kevo_playbook_req *q)
{
    size_t n;
    const char *neck = q->measured ? q->measured : "any";
    const char *v = field(nt->text, "lang", &n);

    if (v && q->lang && !has_word(v, n, q->lang))
        return -1;
    v = field(nt->text, "bottleneck", &n);
    if (v && !has_word(v, n, "any") && !has_word(v, n, neck) && strcmp(neck, "any") != 0)
        return -1;
    int s = v && has_word(v, n, neck) ? 2 : 0;
    v = field(nt->text, "tags", &n);
    if (!v)
        return -1;
    for (int i = 0; i < q->n_tags; i++)
        s += 3 * has_word(v, n, q->tags[i]);
    return s || has_word(v, n, "any") ? s + 1 : -1;
}

/* Best first, equal scores as qsort leaves them: the order of format 1, kept for replays. */
static int by_score_alone(const void *a, const void *b)
{
    return ((const struct note *)b)->score - ((const struct note *)a)->score;
}

/* Scores notes[0..n), drops those that do not apply, sorts the rest: their number. */
static int rank_notes(const struct kevo_playbook_req *q, const struct words *tw,
                      struct note *notes, int n, int format)
{
    int kept = 0;

    for (int i = 0; i < n; i++) {
        notes[i].score = format == 1 ? legacy_score(&notes[i], q) : note_score(&notes[i], q, tw);
        if (notes[i].score >= 0) {
            notes[kept++] = notes[i];
        } else {
            kevo_free(notes[i].name);
            kevo_free(notes[i].text);
        }
    }
    qsort(notes, (size_t)kept, sizeof *notes, format == 1 ? by_score_alone : by_score);
    return kept;
}

/* ---- exemplars ---- */

struct exemplar {
    char path[256];  /* relative to the data directory */
    int score, order;
    int note;        /* the first chosen note that names it */
};

/* Does the '_'-separated word w[0..n) name one of the task's words or name parts? */
static int task_token(const struct kevo_playbook_req *q, const struct words *tw, const char *w,
                      size_t n)
{
    char tok[64];
    const char *name = q->task ? q->task->name : NULL;

    if (!n || n >= sizeof tok)
        return 0;
    memcpy(tok, w, n);
    tok[n] = '\0';
    for (int i = 0; i < tw->n; i++)
        if (!strcmp(tw->w[i], tok))
            return 1;
    for (const char *p = name; p && *p;) {
        size_t k = strcspn(p, "_");
        if (k == n && !strncmp(p, tok, n))
            return 1;
        p += k + (p[k] == '_');
    }
    return 0;
}

/* How well an exemplar fits the task: NAME_MATCH when its file is named after the task,
 * else one point per word of its file name that the task's name or words have. */
static int exemplar_score(const struct kevo_playbook_req *q, const struct words *tw,
                          const char *path)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t stem = strcspn(base, ".");
    int s = 0;

    if (q->task && q->task->name && strlen(q->task->name) == stem &&
        !strncmp(base, q->task->name, stem))
        return NAME_MATCH;
    for (size_t i = 0; i < stem;) {
        size_t k = strcspn(base + i, "_.");
        s += task_token(q, tw, base + i, k < stem - i ? k : stem - i);
        i += k + 1;
    }
    return s;
}

static int by_fit(const void *a, const void *b)
{
    const struct exemplar *x = a, *y = b;
    return x->score != y->score ? (y->score > x->score ? 1 : -1) : x->order - y->order;
}

/* The exemplars the chosen notes name (each once), best first; their number. */
static int exemplars_of(const struct kevo_playbook_req *q, const struct words *tw,
                        const struct note *notes, int n_notes, struct exemplar *ex)
{
    int n = 0;

    for (int i = 0; i < n_notes; i++) {
        size_t len, k;
        const char *v = field(notes[i].text, "exemplars", &len);
        for (size_t j = 0; v && j < len; j += k + 1) {
            k = strcspn(v + j, " ");
            k = k < len - j ? k : len - j;
            int dup = 0;
            for (int e = 0; e < n; e++)
                dup |= strlen(ex[e].path) == k && !strncmp(ex[e].path, v + j, k);
            /* data-directory paths only: never absolute, never up and out */
            if (!k || dup || n == EXEMPLARS_MAX || k >= sizeof ex[0].path || v[j] == '/' ||
                memmem(v + j, k, "..", 2))
                continue;
            memcpy(ex[n].path, v + j, k);
            ex[n].path[k] = '\0';
            ex[n].score = exemplar_score(q, tw, ex[n].path);
            ex[n].order = n;
            ex[n].note = i;
            n++;
        }
    }
    qsort(ex, (size_t)n, sizeof *ex, by_fit);
    return n;
}

/* The next line of t that is not a `// kevo` directive, from *p on; NULL at the end. */
static const char *code_line(const char **p, size_t *n)
{
    const char *kw;
    size_t kl;

    while (**p) {
        const char *l = *p, *nl = strchr(l, '\n');
        *n = nl ? (size_t)(nl - l) : strlen(l);
        *p = nl ? nl + 1 : l + *n;
        if (!kevo_task_directive(l, *n, &kw, &kl))
            return l;
    }
    return NULL;
}

/* Do a and b hold the same code, their directives (params, launches) aside? */
static int same_code(const char *a, const char *b)
{
    const char *la, *lb;
    size_t na = 0, nb = 0;

    if (!a || !b)
        return 0;
    for (;;) {
        la = code_line(&a, &na);
        lb = code_line(&b, &nb);
        if (!la || !lb)
            return !la && !lb;
        if (na != nb || memcmp(la, lb, na) != 0)
            return 0;
    }
}

/* ---- the text ---- */

struct out {
    struct kevo_buf *b;
    size_t left;           /* characters of the budget left */
    struct kevo_buf skipped;
};

/* Adds the piece when it fits what is left, else names it among those left out. */
static void put(struct out *o, const char *piece, const char *what, const char *name)
{
    size_t n = strlen(piece);

    if (n <= o->left) {
        kevo_buf_say(o->b, "%s", piece);
        o->left -= n;
    } else {
        kevo_buf_say(&o->skipped, "%s%s %s", o->skipped.len ? ", " : "", what, name);
    }
}

static void put_note(struct out *o, const struct note *nt)
{
    size_t tn;
    const char *title = field(nt->text, "title", &tn);
    const char *body = strstr(nt->text + 3, "\n---");
    char *piece = kevo_strdupf("### %.*s\n%s\n", title ? (int)tn : (int)strlen(nt->name),
                               title ? title : nt->name, body ? body + 4 : nt->text);
    if (piece)
        put(o, piece, "note", nt->name);
    kevo_free(piece);
}

/* The best exemplar that is not a parent's code and fits what is left: the first of ex
 * (best first) that does; when none does, the best is named among those left out. */
static void put_exemplar(struct out *o, const struct kevo_playbook_req *q,
                         const struct exemplar *ex, int n)
{
    const char *fence = q->lang && !strcmp(q->lang, "c") ? "c" : "cuda";
    const char *best = NULL;
    char *root = kevo_strdupf("%s/../..", q->dir);   /* the data directory */

    for (int i = 0; root && i < n; i++) {
        char *t = read_at(root, ex[i].path, EXEMPLAR_MAX), *piece = NULL;
        if (t && *t && !same_code(t, q->parent) && !same_code(t, q->parent2))
            piece = kevo_strdupf("### Exemplar: %s\nA complete candidate file that passed "
                                 "kevo's checks on every workload of its own suite task. "
                                 "Reuse its structure; check its assumptions (sizes, "
                                 "alignment, dtypes) against this task.\n```%s\n%s%s```\n",
                                 ex[i].path, fence, t, t[strlen(t) - 1] == '\n' ? "" : "\n");
        kevo_free(t);
        if (piece && strlen(piece) <= o->left) {
            put(o, piece, "exemplar", ex[i].path);
            kevo_free(piece);
            best = NULL;
            break;
        }
        best = best ? best : piece ? ex[i].path : NULL;
        kevo_free(piece);
    }
    if (best)
        kevo_buf_say(&o->skipped, "%sexemplar %s", o->skipped.len ? ", " : "", best);
    kevo_free(root);
}

/* One line saying what the notes were chosen for: the bounds and the task's words. */
static void chosen_for(struct kevo_buf *b, const struct kevo_playbook_req *q,
                       const struct words *tw)
{
    if (!strcmp(q->bound, "any"))
        kevo_buf_say(b, "(Chosen for a task of unknown bound");
    else
        kevo_buf_say(b, "(Chosen for a %s-bound task", q->bound);
    if (q->observed && strcmp(q->observed, q->bound) != 0)
        kevo_buf_say(b, " whose parent is %s-bound", q->observed);
    kevo_buf_say(b, "%s", tw->n ? "; words:" : "");
    for (int i = 0; i < tw->n; i++)
        kevo_buf_say(b, " %s", tw->w[i]);
    kevo_buf_say(b, ")\n\n");
}

/* A format-1 playbook: the bodies of the best `max` notes, as before exemplars. */
static void legacy_text(const struct note *notes, int n, int max, struct kevo_buf *b)
{
    for (int i = 0; i < n && i < max; i++) {
        const char *body = strstr(notes[i].text + 3, "\n---");
        kevo_buf_say(b, "%s\n", body ? body + 4 : notes[i].text);
    }
    if (!n)
        kevo_buf_say(b, "(none)");
}

/* The notes asked for (they sort first), then the best `max` others, and one exemplar,
 * within the budget. */
static void notes_text(const struct kevo_playbook_req *q, const struct words *tw,
                       const struct note *notes, int n, int max, struct kevo_buf *b)
{
    struct exemplar *ex = kevo_calloc(EXEMPLARS_MAX, sizeof *ex);
    struct out o = { b, q->max_chars ? q->max_chars : KEVO_PLAYBOOK_CHARS, { 0 } };
    int n_asked = 0;

    while (n_asked < n && notes[n_asked].score >= ASKED_SCORE)
        n_asked++;
    int chosen = n < n_asked + max ? n : n_asked + max;
    int n_ex = ex ? exemplars_of(q, tw, notes, chosen, ex) : 0;
    kevo_buf_init(&o.skipped, 4096);
    if (chosen)
        chosen_for(b, q, tw);
    for (int i = 0; i < chosen; i++) {
        put_note(&o, &notes[i]);
        if (n_ex && i == ex[0].note)   /* the exemplar follows the note that names it */
            put_exemplar(&o, q, ex, n_ex);
    }
    if (o.skipped.len)
        kevo_buf_say(b, "(left out for length: %s)\n", kevo_buf_str(&o.skipped));
    if (!chosen)
        kevo_buf_say(b, "(none)");
    kevo_buf_free(&o.skipped);
    kevo_free(ex);
}

void kevo_playbook_text(const struct kevo_playbook_req *req, struct kevo_buf *b)
{
    struct kevo_playbook_req r = *req;
    struct note *notes = kevo_calloc(NOTES_MAX, sizeof *notes);
    struct words tw;
    int n = 0, format = 2, max = r.max_notes > 0 ? r.max_notes : KEVO_PLAYBOOK_NOTES;

    r.bound = r.bound ? r.bound : "any";
    task_words(&r, &tw);
    if (notes && r.dir) {
        n = read_notes(r.dir, notes, &format);
        n = rank_notes(&r, &tw, notes, n, format);
    }
    if (format == 1)
        legacy_text(notes, n, max, b);
    else
        notes_text(&r, &tw, notes, n, max, b);
    for (int i = 0; i < n; i++) {
        kevo_free(notes[i].name);
        kevo_free(notes[i].text);
    }
    kevo_free(notes);
}

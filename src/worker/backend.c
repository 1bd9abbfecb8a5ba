/*
 * backend - what every user of the device interface shares: turning a parsed task or
 * candidate into a compile request (backend.h). The backends themselves live in
 * backend_cuda.c and backend_cpu.c.
 */
#include "worker/backend.h"
#include "base/mem.h"

#include <string.h>

enum kevo_status kevo_compile_src_init(struct kevo_compile_src *s, const struct kevo_task *t,
                                       const int64_t *params)
{
    struct kevo_compile_req *r = &s->req;

    memset(s, 0, sizeof *s);
    s->entries = kevo_calloc((size_t)t->n_launches + 1, sizeof *s->entries);
    s->names = kevo_calloc((size_t)t->n_params + 1, sizeof *s->names);
    s->values = kevo_calloc((size_t)t->n_params + 1, sizeof *s->values);
    if (!s->entries || !s->names || !s->values) {
        kevo_compile_src_free(s);
        return KEVO_ERR_NOMEM;
    }
    for (int i = 0; i < t->n_launches; i++) {
        int seen = 0;
        for (int k = 0; k < r->n_entries && !seen; k++)
            seen = strcmp(s->entries[k], t->launches[i].kernel) == 0;
        if (!seen)
            s->entries[r->n_entries++] = t->launches[i].kernel;
    }
    for (int i = 0; i < t->n_params; i++) {
        s->names[i] = t->params[i].name;
        s->values[i] = params ? params[i] : t->params[i].values[0];
    }
    r->path = t->path;
    r->source = t->source;
    r->source_len = t->source_len;
    r->entries = s->entries;
    r->n_defines = t->n_params;
    r->define_names = s->names;
    r->define_values = s->values;
    r->n_flags = t->n_flags;
    r->flags = (const char *const *)t->flags;
    return KEVO_OK;
}

void kevo_compile_src_free(struct kevo_compile_src *s)
{
    if (!s)
        return;
    kevo_free(s->entries);
    kevo_free(s->names);
    kevo_free(s->values);
    memset(s, 0, sizeof *s);
}

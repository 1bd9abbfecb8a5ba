/*
 * llm_int - what the files of the llm module share and llm.h does not promise: the
 * providers' own URLs, two helpers of llm_spec.c that llm.c uses too, and llm.c's request
 * body (test_llm.c holds it to the fixtures). Not for other modules.
 */
#ifndef KEVO_LLM_INT_H
#define KEVO_LLM_INT_H

#include "ctl/llm.h"

#include <jansson.h>
#include <stddef.h>

#define KEVO_LLM_OPENAI_BASE    "https://api.openai.com/v1"
#define KEVO_LLM_ANTHROPIC_BASE "https://api.anthropic.com/v1"
#define KEVO_LLM_EXCERPT_MAX    200     /* printable characters of a text in a message */

/* s is not empty and has only printable ASCII other than space (model ids, URLs, keys). */
int kevo_llm_is_token(const char *s);

/* Up to KEVO_LLM_EXCERPT_MAX printable ASCII characters of s (n bytes) into out; the rest
 * become spaces, so a reply cannot put control sequences or lines into a message; "..."
 * ends a text that was cut. */
void kevo_llm_excerpt(const char *s, size_t n, char out[KEVO_LLM_EXCERPT_MAX + 1]);

/* The request body of m's API from m's settings (llm.c), before the adaptations a client
 * keeps; a new reference, NULL when out of memory. Members in a fixed order: model,
 * system (Anthropic), messages, the output limit (max_completion_tokens at OpenAI's own
 * URL, else max_tokens), temperature, reasoning_effort or thinking, then extra's over
 * them. */
json_t *kevo_llm_body(const struct kevo_llm_model *m, const struct kevo_llm_req *r);

#endif

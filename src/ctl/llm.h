/*
 * llm - chat completions from LLM providers over HTTP (docs/llm.md): the OpenAI-compatible
 * chat completions API (OpenAI, vLLM, SGLang, llama.cpp server, Ollama, OpenRouter, ...
 * through a base URL) and the Anthropic Messages API, with libcurl and jansson.
 *
 * A call never wedges a run: each attempt has a connect and a total timeout; 429 and 5xx
 * are retried with exponential backoff and jitter, honouring Retry-After, within a bounded
 * total wait; a reply larger than the cap is cut off and reported, never stored whole. A
 * failed call is a reply with a status, not a failure of kevo. Keys come from the
 * environment (or a key file) and never appear in a message, a log line or a reply.
 *
 * Thread-safe: one client is shared by the run's threads; it allows at most max_concurrent
 * calls in flight and makes the others wait.
 */
#ifndef KEVO_LLM_H
#define KEVO_LLM_H

#include "kevo.h"
#include <stdint.h>

enum kevo_llm_api { KEVO_LLM_OPENAI = 0, KEVO_LLM_ANTHROPIC };

/* The output limit of a model whose spec sets none: room for a reasoning model's thinking
 * (DeepSeek-R1's default is 32K) and its answer. */
#define KEVO_LLM_MAX_OUTPUT 32000

struct kevo_llm_model {
    enum kevo_llm_api api;
    char *name;                   /* the provider's model id, e.g. "gpt-5" */
    char *base_url;               /* e.g. "https://api.openai.com/v1" (no trailing '/') */
    char *key_env;                /* the environment variable holding the key */
    double weight;                /* share of the calls among several models (default 1) */
    double price_in, price_out;   /* per million tokens (0: unknown); parse leaves them 0:
                                     the caller fills them from its price table */
    double price_cached_in;       /* per million input tokens read from the provider's
                                     cache (0: price_in) */
    int priced;                   /* 1: the caller's price table has the model (its prices
                                     may be 0: a local model); 0: no price, so what its
                                     calls cost is unknown (shown as null, never 0) */
    /* request settings, from the spec's "?..." (docs/llm.md "Model settings") */
    int max_output;               /* output tokens, thinking included; 0: KEVO_LLM_MAX_OUTPUT.
                                     Sent as max_completion_tokens to OpenAI's own URL,
                                     max_tokens elsewhere */
    int has_temperature;          /* 0: no temperature sent (the provider's default) */
    double temperature;           /* 0 to 2, sent when has_temperature */
    char *reasoning_effort;       /* OpenAI's reasoning_effort, e.g. "high" (owned); NULL:
                                     not sent */
    int thinking;                 /* Anthropic's extended thinking budget in tokens (>= 1024,
                                     below the output limit); 0: off */
    char *extra;                  /* a JSON object (owned text) whose members are set in the
                                     request body last, over kevo's own; NULL: none */
};

/*
 * "PROVIDER:MODEL[@BASE_URL][#KEY_ENV][*WEIGHT][?SETTINGS]", PROVIDER "openai" or
 * "anthropic":
 *   openai:gpt-5                           https://api.openai.com/v1, key OPENAI_API_KEY
 *   openai:llama3@http://localhost:8080/v1 a local server (a key is optional there)
 *   anthropic:claude-sonnet-4-5*2          https://api.anthropic.com/v1, ANTHROPIC_API_KEY
 *   openai:qwen3@https://openrouter.ai/api/v1#OPENROUTER_API_KEY   another key variable
 *   openai:o3?reasoning_effort=high&max_output=64000
 *   anthropic:claude-opus-4-1?thinking=16000&temperature=1
 *   openai:qwen3@http://localhost:8000/v1?extra={"top_p":0.95}
 * BASE_URL starts with http:// or https://; a '/' at its end is dropped. A key is
 * required only at the provider's own URL. SETTINGS, after the first '?', are NAME=VALUE
 * joined by '&', each value %-decoded (%26 is '&', %25 '%'): max_output (1 to 10^7),
 * temperature (0 to 2), reasoning_effort (openai; lower-case letters), thinking (anthropic;
 * 1024 or more, below the output limit), extra (a JSON object). On KEVO_ERR_PARSE *msg
 * (kevo_free it) names the part or setting that is wrong and what was expected, and *out
 * is empty; kevo_llm_model_clear it either way.
 */
KEVO_NODISCARD enum kevo_status kevo_llm_model_parse(const char *spec, struct kevo_llm_model *out,
                                                     char **msg);
void kevo_llm_model_clear(struct kevo_llm_model *m);

/* What a call asks; how (output limit, temperature, ...) is the model's settings. */
struct kevo_llm_req {
    const char *system;           /* may be NULL */
    const char *prompt;           /* the user message */
};

struct kevo_llm_limits {
    double connect_timeout_s;     /* per attempt (default 10) */
    double total_timeout_s;       /* per attempt (default 900: a reasoning model writing its
                                     whole 32K output limit at ~40 tokens/s) */
    int max_attempts;             /* default 5 */
    double max_wait_s;            /* all backoff sleeps of a call together (default 120) */
    double backoff_s;             /* the first backoff (default 1), doubled each time, +-50% jitter */
    size_t max_reply_bytes;       /* default 4 MiB: larger is status "too_large" */
    double stall_timeout_s;       /* per attempt: under 1 byte/s for this long ends it
                                     (status "timeout"; curl averages over its last 5 s, so
                                     allow ~5 s more); 0 (default): total_timeout_s, since a
                                     non-streamed completion is silent until it is done */
};
/* Defaults for every field. kevo_llm_new refuses timeouts <= 0, max_attempts < 1,
 * negative waits and a zero reply cap. */
void kevo_llm_limits_default(struct kevo_llm_limits *l);

struct kevo_llm_reply {
    char *text;                   /* the model's text (owned); NULL unless status is "ok" */
    int64_t tokens_in, tokens_out;   /* from the reply's usage; 0 when absent. tokens_in
                                        counts all input tokens, cached ones included;
                                        tokens_out all output, reasoning included */
    int64_t tokens_cached_in;     /* of tokens_in, read from the provider's prompt cache */
    int64_t tokens_reasoning;     /* of tokens_out, spent thinking (not in text); 0 where
                                     the provider does not say (Anthropic) */
    double latency_s;             /* the whole call, retries included */
    int http_status;              /* of the last attempt; 0 when none completed */
    int attempts;
    char status[32];              /* "ok", "http_NNN", "timeout", "network", "too_large",
                                     "bad_reply" (not the API's JSON), "no_key" (none where
                                     one is required, or the key file was refused; no
                                     attempt made), "refused" (the model declined: empty
                                     content), "truncated" (the output limit cut the reply:
                                     finish_reason "length", stop_reason "max_tokens"; no
                                     text; the tokens say what was spent) */
    char *error;                  /* one line for a person (owned), NULL when ok; never the key */
    char *adapted;                /* what this call taught the client to change in the
                                     model's requests after the provider refused a parameter
                                     (owned, one line), e.g. "max_tokens sent as
                                     max_completion_tokens"; set on the one reply that
                                     learned it (so the caller says it once), NULL otherwise */
};
void kevo_llm_reply_clear(struct kevo_llm_reply *r);

struct kevo_llm;                  /* opaque client */

/* max_concurrent >= 1; lim NULL: the defaults. KEVO_ERR_INVALID for bad limits,
 * KEVO_ERR_SYSTEM when libcurl cannot be initialised. */
KEVO_NODISCARD enum kevo_status kevo_llm_new(int max_concurrent, const struct kevo_llm_limits *lim,
                                             struct kevo_llm **out);
void kevo_llm_free(struct kevo_llm *c);   /* NULL: no-op; no call may be in flight */

/*
 * One chat completion. KEVO_OK whenever a reply object was filled in (look at
 * out->status); an error status only when kevo itself failed (out of memory, libcurl
 * could not start) or r has no prompt (KEVO_ERR_INVALID); *out is then empty.
 * Blocks while max_concurrent attempts are in flight; backoff sleeps hold no slot.
 * A 400 (or 422) that names a parameter the model refuses (max_tokens, temperature,
 * top_p, ...) is answered by changing the request (max_tokens renamed
 * max_completion_tokens, the output limit lowered to the model's, the parameter left
 * out) and sending it again at once, outside max_attempts; the client keeps the change
 * for every later call of the same model (provider, name, URL) and says it in
 * out->adapted once. The reply text never holds reasoning: <think>...</think> (or the
 * unclosed text before a lone </think>, or after a lone leading <think>) is removed.
 */
KEVO_NODISCARD enum kevo_status kevo_llm_complete(struct kevo_llm *c,
                                                  const struct kevo_llm_model *m,
                                                  const struct kevo_llm_req *r,
                                                  struct kevo_llm_reply *out);

/*
 * The key for m: its key_env variable, else a line "NAME=VALUE" for that name in the key
 * file ($KEVO_KEY_FILE, else ~/.config/kevo/keys, which must not be readable by others).
 * NULL when there is none (a local server may not need one). Caller frees (kevo_free).
 * why (may be NULL) gets a message (kevo_free it) when a key file exists but was refused
 * (group/other permission bits, not a regular file, unreadable) or $KEVO_KEY_FILE names
 * a missing file; then NULL is returned even if the file holds the key.
 */
char *kevo_llm_key(const struct kevo_llm_model *m, char **why);

#endif

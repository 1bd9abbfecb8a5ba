/*
 * sha - SHA-256 as hex (OpenSSL's EVP): the identity of sources in the archive, of
 * candidates in a run and of prompts in the response cache.
 */
#ifndef KEVO_SHA_H
#define KEVO_SHA_H

#include "kevo.h"
#include <stddef.h>

#define KEVO_HASH_HEX 65               /* SHA-256 as 64 hex digits + NUL */

/* SHA-256 of n bytes as 64 hex digits. */
KEVO_NODISCARD enum kevo_status kevo_sha256_hex(const void *p, size_t n, char out[KEVO_HASH_HEX]);

#endif

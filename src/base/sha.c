/*
 * sha - SHA-256 as hex (sha.h).
 */
#include "base/sha.h"

#include <openssl/evp.h>
#include <stdio.h>

enum kevo_status kevo_sha256_hex(const void *p, size_t n, char out[KEVO_HASH_HEX])
{
    unsigned char md[32];
    unsigned int md_len = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(c, p, n) == 1 && EVP_DigestFinal_ex(c, md, &md_len) == 1;

    EVP_MD_CTX_free(c);
    if (!ok || md_len != 32)
        return KEVO_ERR_NOMEM;
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
    return KEVO_OK;
}

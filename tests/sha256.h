/*
 * sha256.h — SHA-256 (FIPS 180-4) of a file or a buffer, for tests that
 * hold a file to the digest `sha256sum` printed for another tool's output.
 */
#ifndef BP_TEST_SHA256_H
#define BP_TEST_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sha256 {
    uint32_t h[8];
    uint8_t block[64];
    size_t used;      /* bytes in block */
    uint64_t total;   /* bytes hashed so far */
};

/* Starts a digest. */
void sha256_init(struct sha256 *s);
/* Adds n bytes. */
void sha256_update(struct sha256 *s, const void *data, size_t n);
/* Finishes the digest as 64 lowercase hex digits and a NUL in hex. */
void sha256_hex(struct sha256 *s, char hex[65]);
/* The digest of a whole file into hex; false when it cannot be read. */
bool sha256_file(const char *path, char hex[65]);

#endif

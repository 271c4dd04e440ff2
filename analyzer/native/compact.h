/* @brief The compact encoding's entry points (compact.c): text dump to compact and back, between
 * file descriptors; each returns 0, or -1 with one sentence in `err`. */
#ifndef MEMDUMP_COMPACT_H
#define MEMDUMP_COMPACT_H

#include <stddef.h>

int mdz_encode(int in, int out, int level, size_t block_text, char *err, size_t elen);
int mdz_decode(int in, int out, char *err, size_t elen);
int mdz_decode_bytes(const unsigned char *p, size_t n, char *err, size_t elen);
int mdz_decode_payload(const unsigned char *p, size_t n, char *err, size_t elen);

#endif

/* @brief The compact encoding's entry points (compact.c, compactdec.c): text dump to compact and back, between
 * file descriptors; each returns 0, or -1 with one sentence in `err`. And the direct output the
 * C replay reads (memdump_core.c): a compact dump decoded a block at a time, its heap records
 * as packed events instead of their text. */
#ifndef MEMDUMP_COMPACT_H
#define MEMDUMP_COMPACT_H

#include <stddef.h>
#include <stdint.h>

int mdz_encode(int in, int out, int level, size_t block_text, char *err, size_t elen);
int mdz_decode(int in, int out, char *err, size_t elen);
int mdz_decode_bytes(const unsigned char *p, size_t n, char *err, size_t elen);
int mdz_decode_payload(const unsigned char *p, size_t n, int direct, char *err, size_t elen);
int mdz_info(int fd, char *first, size_t cap, uint64_t out[4], char *err, size_t elen);
int mdz_last_line(int fd, char *line, size_t cap, uint64_t *len, char *err, size_t elen);

/* The direct output: the text of the dump's records, but for the heap records (`+`, `-`, `+n`,
 * ..., `+m`), each of which is a packed event at the start of a line: 8 bytes MDZ_EVENT, the
 * operation (enum mdc_op), NARGS, 0, the STACK (32 bits, the machine's order), then RESULT (0
 * for a release) and NARGS arguments, 8 bytes each (the `e` record's ARGS: a release's PTR).
 * No line of its text begins with MDZ_EVENT or holds a NUL byte (mdz_dec_next says 2 then). */
#define MDZ_EVENT 0x01
struct mdz_dec;
/* a decoder of the compact dump open as `fd`, read from its offset; NULL with `err` said */
struct mdz_dec *mdz_dec_open(int fd, char *err, size_t elen);
/* the next piece of the direct output (a block's, up to about a MiB of it) at *p, *n bytes
 * (valid until the next call): 1; 0 at the end;
 * -1 with `err` said; 2 when the direct output cannot hold a record (decode the text instead).
 * The blocks' text is neither made nor checked (its length and CRC-32): their deflate streams'
 * Adler-32 and every reference of the model are. */
int mdz_dec_next(struct mdz_dec *d, const unsigned char **p, size_t *n, char *err, size_t elen);
/* the last block's output handed over with its buffer, not copied: *buf (*cap bytes allocated
 * by malloc; NULL, 0: none) becomes the decoder's, and the output's buffer, at least `slack`
 * bytes past its end allocated, goes to *buf and *cap; 0, or -1 out of memory (nothing moved) */
int mdz_dec_exchange(struct mdz_dec *d, unsigned char **buf, size_t *cap, size_t slack);
uint64_t mdz_dec_read(const struct mdz_dec *d); /* the bytes of the compact dump read */
uint64_t mdz_dec_tail(const struct mdz_dec *d); /* the text's bytes after its last line end */
void mdz_dec_close(struct mdz_dec *d);

#endif

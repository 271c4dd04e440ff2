/* @brief A compact dump's direct output decoded a block ahead on a thread (compactfeed.c). */
#ifndef MEMDUMP_COMPACTFEED_H
#define MEMDUMP_COMPACTFEED_H

#include <stddef.h>
#include <stdint.h>

#include "compact.h"

struct feed;
/* the compact dump open as `fd`, its decoding begun on a thread; NULL when it cannot be */
struct feed *feed_open(int fd);
/* the next block's direct output appended to the buffer *buf (*len bytes of *cap; grown to hold it,
 * `slack` bytes more allocated; when *len is 0, *buf may be exchanged for the decoder's buffer,
 * which the output is in: no copy), *read the compact dump's bytes read and *tail the text's bytes
 * after its last line end: mdz_dec_next's result (1, 0 at the end, -1, 2), the same again after
 * the last block */
int feed_take(struct feed *f, char **buf, uint64_t *len, uint64_t *cap, size_t slack,
              uint64_t *read, uint64_t *tail);
void feed_close(struct feed *f);

#endif

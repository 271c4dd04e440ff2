/* @brief A libFuzzer target for the compact encoding's decoder (compactdec.c; docs/dump-format.md,
 * "Compact encoding"): a compact dump is a file users send each other. An input whose first byte
 * is odd is a whole compact file after that byte (signature, blocks, zlib streams or version 1.0's
 * xz, checksums), decoded, and read by mdz_info as a reader opens it and by mdz_last_line as
 * the exports ask for its last SEQ; an even one is a block's
 * payload after that byte, decoded by the model with no compressor and no checksum in the way, so
 * that the mutations reach the streams and the predictions, into text (bit 1 clear) or into the
 * replay's direct output (bit 1 set). Any input must end in text or in one error sentence: what
 * must never happen is a crash, a read or write out of bounds, an undefined behaviour or a leak,
 * which the sanitizers it is built with report.
 *
 * Built and run by scripts/fuzz-core.sh -c (clang -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "compact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (size == 0)
        return 0;
    err[0] = '\0';
    int rc = data[0] & 1 ? mdz_decode_bytes(data + 1, size - 1, err, sizeof err)
                         : mdz_decode_payload(data + 1, size - 1, data[0] & 2, err, sizeof err);
    if (rc < 0 && (err[0] == '\0' || memchr(err, '\n', strlen(err)) != NULL))
        __builtin_trap(); /* an error is one sentence */
    int fd = data[0] & 1 ? memfd_create("fuzz", 0) : -1;
    if (fd >= 0) {
        char first[256];
        uint64_t out[4];
        if (write(fd, data + 1, size - 1) == (ssize_t)(size - 1)
            && mdz_info(fd, first, sizeof first, out, err, sizeof err) == 0
            && (out[2] > out[1] || out[0] > out[1]))
            __builtin_trap(); /* the lengths it gives are the text's */
        char line[64];
        uint64_t len = 0;
        (void)mdz_last_line(fd, line, sizeof line, &len, err, sizeof err);
        close(fd);
    }
    return 0;
}

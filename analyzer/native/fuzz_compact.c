/* @brief A libFuzzer target for the compact encoding's decoder (compact.c; docs/dump-format.md,
 * "Compact encoding"): a compact dump is a file users send each other. An input whose first byte
 * is odd is a whole compact file after that byte (signature, blocks, zlib streams or version 1.0's
 * xz, checksums); an even one is a block's payload after that byte, decoded by the model with no
 * compressor and no checksum in the way, so that the mutations reach the streams and the predictions. Any input must end in
 * text or in one error sentence: what must never happen is a crash, a read or write out of bounds,
 * an undefined behaviour or a leak, which the sanitizers it is built with report.
 *
 * Built and run by scripts/fuzz-core.sh -c (clang -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "compact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (size == 0)
        return 0;
    int rc = data[0] & 1 ? mdz_decode_bytes(data + 1, size - 1, err, sizeof err)
                         : mdz_decode_payload(data + 1, size - 1, err, sizeof err);
    if (rc != 0 && (err[0] == '\0' || memchr(err, '\n', strlen(err)) != NULL))
        __builtin_trap(); /* an error is one sentence */
    return 0;
}

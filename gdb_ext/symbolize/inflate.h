/*
 * A separate debug file with its compressed DWARF sections inflated before libdw opens it
 * (inflate.c): libdw inflates every compressed .debug_* section it knows with zlib when it opens
 * a file, those memdump-symbolize never reads included.
 */
#ifndef MEMDUMP_SYMBOLIZE_INFLATE_H
#define MEMDUMP_SYMBOLIZE_INFLATE_H

#include <stddef.h>
#include <stdint.h>

#include "prefix.h"

/* Who inflates the sections: libdeflate (loaded at run time when it is installed), zlib, or
 * libdw itself (the file is handed to it as it is) */
enum inflater { INFLATE_AUTO, INFLATE_LIBDEFLATE, INFLATE_ZLIB, INFLATE_LIBDW };

/* The inflater named NAME ("libdeflate", "zlib", "libdw", "auto"), or -1 */
int inflater_named(const char *name);

/* A file descriptor (a memfd) holding the ELF file FD with its zlib-compressed sections
 * inflated by WHICH, and those memdump-symbolize never reads (location lists, call frame
 * information, macros, name indexes) left out as SHT_NOBITS; -1 when FD has no such section,
 * is not a 64-bit ELF file of this machine's byte order, has not the build id ID (LEN bytes), or
 * anything fails: then libdw reads the file itself. With the N addresses ADDRS (ELF addresses)
 * and zlib, .debug_info, .debug_abbrev and .debug_line are inflated only as far as libdw reads
 * for them (prefix.c), when that is a small part of them: the bytes kept in *KEEP (all 0 when
 * the sections were inflated whole). */
int inflated_copy(int fd, enum inflater which, const unsigned char *id, size_t len,
                  const uint64_t *addrs, size_t n, struct prefix *keep);

#endif

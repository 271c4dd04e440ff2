/*
 * The prefixes of a debug file's DWARF sections that the asked addresses need (prefix.c): an ELF
 * compressed section is one zlib stream, so a section can be inflated from its start up to the
 * end of what libdw will read, and the copy's section header given that shorter size.
 */
#ifndef MEMDUMP_SYMBOLIZE_PREFIX_H
#define MEMDUMP_SYMBOLIZE_PREFIX_H

#include <stddef.h>
#include <stdint.h>

/* A section's bytes as far as they are inflated: NEED asks for [0, UPTO) */
struct lazy {
    const unsigned char *bytes;
    uint64_t size;  /* the section's whole inflated size */
    int (*need)(struct lazy *self, uint64_t upto);  /* 0 when [0, UPTO) is there */
};

/* How much of each section to keep */
struct prefix {
    uint64_t aranges, info, abbrev, line;
};

/* The prefixes of .debug_info, .debug_abbrev and .debug_line that hold everything libdw reads
 * for ADDRS (N ELF addresses): the units .debug_aranges names for them, every unit header before
 * them (libdw walks them to find a unit), their abbreviations and line tables. .debug_ARANGES is
 * inflated whole and rewritten in place to the sets of the units kept (libdw rejects a set naming
 * a unit past the end of .debug_info), its new length in KEEP->aranges. 0 when the prefixes stand
 * for the whole sections address for address; -1 when they may not (an address in no unit or in
 * two, a reference out of its unit, a form or unit this does not know, a prefix over half of
 * .debug_info, whose whole inflating by libdeflate is cheaper than zlib's of the prefix): then
 * the sections are inflated whole. */
int dwarf_prefix(struct lazy *aranges, struct lazy *info, struct lazy *abbrev, struct lazy *line,
                 const uint64_t *addrs, size_t n, struct prefix *keep);

#endif

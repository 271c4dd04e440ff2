/*
 * What of a debug file's DWARF the asked addresses need, so that only that is inflated.
 *
 * libdw finds an address's unit in .debug_aranges, then walks the unit headers of .debug_info
 * from the start up to that unit (libdw/libdw_findcu.c: each header interned, its first DIE's
 * abbreviation read), reads the unit's DIEs and abbreviations, and its line table at the unit's
 * DW_AT_stmt_list. glibc's libc-start.c, the unit of the two frames below every program's main,
 * is the third unit of libc6-dbg's 4,126: the prefixes it needs are a few kB of the 8 MB those
 * three sections inflate to. The rest of the file (strings, range lists) is inflated whole.
 * References across units (DW_FORM_ref_addr, type signatures, dwz's alternate files) and forms
 * this does not know make the caller inflate the sections whole, as do addresses in no unit or
 * in two: the answers stay libdw's own (tests/e2e/test_late_debug_files.py).
 */
#include "prefix.h"

#include <dwarf.h>
#include <string.h>

/* A reading position in a lazily inflated section; FAILED once anything is out of bounds */
struct cursor {
    struct lazy *sec;
    uint64_t at;
    int failed;
};

static const unsigned char *take(struct cursor *c, uint64_t len)
{
    if (c->failed || len > c->sec->size || c->at > c->sec->size - len ||
        c->sec->need(c->sec, c->at + len) != 0) {
        c->failed = 1;
        return NULL;
    }
    const unsigned char *p = c->sec->bytes + c->at;
    c->at += len;
    return p;
}

/* A little-endian unsigned number of LEN bytes (the copy is made for this machine's order) */
static uint64_t fixed(struct cursor *c, unsigned len)
{
    const unsigned char *p = take(c, len);
    uint64_t v = 0;
    for (unsigned i = 0; p != NULL && i < len; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t leb(struct cursor *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
        const unsigned char *p = take(c, 1);
        if (p == NULL)
            return 0;
        if (shift < 64)
            v |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p & 0x80))
            return v;
    }
}

/* A unit's length field: the length, its offsets' size in *OFFSET (4, or 8 in 64-bit DWARF) */
static uint64_t unit_length(struct cursor *c, unsigned *offset)
{
    uint64_t len = fixed(c, 4);
    *offset = 4;
    if (len == 0xffffffff) {
        len = fixed(c, 8);
        *offset = 8;
    } else if (len >= 0xfffffff0) {
        c->failed = 1;
    }
    return len;
}

/* The end of the unit at C->at (C left after its length field), 0 when out of bounds */
static uint64_t unit_end(struct cursor *c, unsigned *offset)
{
    uint64_t len = unit_length(c, offset);
    if (c->failed || len > c->sec->size - c->at)
        return 0;
    return c->at + len;
}

/* The unit .debug_aranges gives ADDR, in *UNIT; -1 when none or more than one does */
static int unit_of(struct lazy *aranges, uint64_t addr, uint64_t *unit, uint64_t *farthest)
{
    struct cursor c = {aranges, 0, 0};
    int found = 0;
    while (!c.failed && c.at < aranges->size) {
        uint64_t set = c.at;
        unsigned offset;
        uint64_t end = unit_end(&c, &offset);
        uint16_t version = (uint16_t)fixed(&c, 2);
        uint64_t cu = fixed(&c, offset);
        unsigned addr_size = (unsigned)fixed(&c, 1), seg_size = (unsigned)fixed(&c, 1);
        if (c.failed || end == 0 || version != 2 || addr_size != 8 || seg_size != 0)
            return -1;
        c.at += (16 - (c.at - set) % 16) % 16;  /* tuples aligned to their size, from the set */
        while (c.at + 16 <= end) {
            uint64_t start = fixed(&c, 8), len = fixed(&c, 8);
            if (start == 0 && len == 0)
                break;
            if (addr - start < len) {
                if (found && *unit != cu)
                    return -1;
                *unit = cu;
                found = 1;
            }
        }
        if (cu > *farthest)
            *farthest = cu;
        c.at = end;
    }
    return found && !c.failed ? 0 : -1;
}

/* Keep the sets of .debug_aranges that name a unit below END, moved to the section's start; the
 * new length. The section is inflated whole (unit_of read it all). */
static uint64_t keep_sets(struct lazy *aranges, uint64_t end)
{
    unsigned char *bytes = (unsigned char *)aranges->bytes;
    uint64_t kept = 0;
    struct cursor c = {aranges, 0, 0};
    while (c.at < aranges->size) {
        uint64_t start = c.at;
        unsigned offset;
        uint64_t set_end = unit_end(&c, &offset);
        fixed(&c, 2);
        uint64_t cu = fixed(&c, offset);
        if (cu < end) {
            memmove(bytes + kept, bytes + start, set_end - start);
            kept += set_end - start;
        }
        c.at = set_end;
    }
    return kept;
}

/* A unit's header: where its abbreviations and its first DIE are; -1 for a unit this does not
 * read (a type, skeleton or split unit when NEEDED) */
struct unit {
    uint64_t end, abbrev, die;
    unsigned offset, addr_size;
};

static int read_unit(struct lazy *info, uint64_t at, int needed, struct unit *u)
{
    struct cursor c = {info, at, 0};
    u->end = unit_end(&c, &u->offset);
    uint16_t version = (uint16_t)fixed(&c, 2);
    if (version >= 5) {
        unsigned type = (unsigned)fixed(&c, 1);
        u->addr_size = (unsigned)fixed(&c, 1);
        u->abbrev = fixed(&c, u->offset);
        if (needed && type != DW_UT_compile && type != DW_UT_partial)
            return -1;
    } else {
        u->abbrev = fixed(&c, u->offset);
        u->addr_size = (unsigned)fixed(&c, 1);
    }
    u->die = c.at;
    return c.failed || u->end == 0 || version < 2 || version > 5 ? -1 : 0;
}

/* A form's bytes skipped; -1 for a form that refers out of its unit or that this does not know */
static int skip_form(struct cursor *c, uint64_t form, const struct unit *u)
{
    switch (form) {
    case DW_FORM_flag_present: case DW_FORM_implicit_const:
        return 0;
    case DW_FORM_data1: case DW_FORM_ref1: case DW_FORM_flag: case DW_FORM_strx1:
    case DW_FORM_addrx1:
        return take(c, 1) ? 0 : -1;
    case DW_FORM_data2: case DW_FORM_ref2: case DW_FORM_strx2: case DW_FORM_addrx2:
        return take(c, 2) ? 0 : -1;
    case DW_FORM_strx3: case DW_FORM_addrx3:
        return take(c, 3) ? 0 : -1;
    case DW_FORM_data4: case DW_FORM_ref4: case DW_FORM_strx4: case DW_FORM_addrx4:
        return take(c, 4) ? 0 : -1;
    case DW_FORM_data8: case DW_FORM_ref8:
        return take(c, 8) ? 0 : -1;
    case DW_FORM_data16:
        return take(c, 16) ? 0 : -1;
    case DW_FORM_addr:
        return take(c, u->addr_size) ? 0 : -1;
    case DW_FORM_strp: case DW_FORM_line_strp: case DW_FORM_sec_offset:
        return take(c, u->offset) ? 0 : -1;
    case DW_FORM_sdata: case DW_FORM_udata: case DW_FORM_ref_udata: case DW_FORM_strx:
    case DW_FORM_addrx: case DW_FORM_rnglistx: case DW_FORM_loclistx:
        leb(c);
        return c->failed ? -1 : 0;
    case DW_FORM_string:
        for (const unsigned char *p = take(c, 1); p != NULL && *p != 0; p = take(c, 1))
            ;
        return c->failed ? -1 : 0;
    case DW_FORM_block1: return take(c, fixed(c, 1)) ? 0 : -1;
    case DW_FORM_block2: return take(c, fixed(c, 2)) ? 0 : -1;
    case DW_FORM_block4: return take(c, fixed(c, 4)) ? 0 : -1;
    case DW_FORM_block: case DW_FORM_exprloc: return take(c, leb(c)) ? 0 : -1;
    default:  /* ref_addr, ref_sig8, the supplementary and alternate files' forms, indirect */
        return -1;
    }
}

/* Whether FORM may refer out of its unit (libdw would then read another unit's DIEs) or is one
 * whose size is given in the DIE (DW_FORM_indirect) */
static int refers_out(uint64_t form)
{
    switch (form) {
    case DW_FORM_ref_addr: case DW_FORM_ref_sig8: case DW_FORM_ref_sup4: case DW_FORM_ref_sup8:
    case DW_FORM_strp_sup: case DW_FORM_GNU_ref_alt: case DW_FORM_GNU_strp_alt:
    case DW_FORM_indirect:
        return 1;
    default:
        return 0;
    }
}

/* The end of the abbreviation table at C->at; with CODE non-zero, where that code's attribute
 * specifications start in *SPECS (0 when absent) and 0 when any of the table's forms
 * refers out of its unit; 0 when out of bounds */
static uint64_t table_end(struct cursor *c, uint64_t code, uint64_t *specs)
{
    for (;;) {
        uint64_t this = leb(c);
        if (c->failed)
            return 0;
        if (this == 0)
            return c->at;
        leb(c);
        take(c, 1);
        if (this == code)
            *specs = c->at;
        for (;;) {
            uint64_t name = leb(c), form = leb(c);
            if (form == DW_FORM_implicit_const)
                leb(c);
            if (c->failed)
                return 0;
            if (name == 0 && form == 0)
                break;
            if (code != 0 && refers_out(form))  /* a needed unit's */
                return 0;
        }
    }
}

/* The unit's DW_AT_stmt_list, or -1 without one */
static int64_t stmt_list(struct lazy *info, struct lazy *abbrev, const struct unit *u,
                         uint64_t specs)
{
    struct cursor die = {info, u->die, 0};
    leb(&die);  /* the abbreviation's code, found by the caller */
    struct cursor spec = {abbrev, specs, 0};
    for (;;) {
        uint64_t name = leb(&spec), form = leb(&spec);
        if (form == DW_FORM_implicit_const)
            leb(&spec);
        if (spec.failed || (name == 0 && form == 0))
            return -1;
        if (name == DW_AT_stmt_list && (form == DW_FORM_sec_offset || form == DW_FORM_data4 ||
                                        form == DW_FORM_data8)) {
            uint64_t at = fixed(&die, form == DW_FORM_sec_offset ? u->offset
                                      : form == DW_FORM_data4 ? 4 : 8);
            return die.failed || at > INT64_MAX ? -1 : (int64_t)at;
        }
        if (skip_form(&die, form, u) != 0)
            return -1;
    }
}

int dwarf_prefix(struct lazy *aranges, struct lazy *info, struct lazy *abbrev, struct lazy *line,
                 const uint64_t *addrs, size_t n, struct prefix *keep)
{
    uint64_t units[64], farthest = 0;
    if (n == 0 || n > sizeof units / sizeof *units || aranges->need(aranges, aranges->size) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (unit_of(aranges, addrs[i], &units[i], &farthest) != 0 || units[i] > info->size / 2)
            return -1;
    /* every unit header up to the last unit asked; the farthest abbreviation table they use */
    memset(keep, 0, sizeof *keep);
    uint64_t last = 0, abbrev_at = 0;
    for (size_t i = 0; i < n; i++)
        last = units[i] > last ? units[i] : last;
    struct unit u;
    uint64_t at = 0;
    size_t starts = 0;  /* the asked units met at a unit's start */
    for (; at <= last; at = u.end) {
        if (read_unit(info, at, 0, &u) != 0)
            return -1;
        abbrev_at = u.abbrev > abbrev_at ? u.abbrev : abbrev_at;
        for (size_t i = 0; i < n; i++)
            starts += units[i] == at;
    }
    if (starts != n)
        return -1;
    keep->info = at;
    /* each asked unit: its abbreviations (no reference out of it) and its line table */
    for (size_t i = 0; i < n; i++) {
        uint64_t specs = 0;
        struct cursor die = {info, 0, 0};
        if (read_unit(info, units[i], 1, &u) != 0)
            return -1;
        die.at = u.die;
        uint64_t code = leb(&die);
        struct cursor table = {abbrev, u.abbrev, 0};
        uint64_t end = code != 0 ? table_end(&table, code, &specs) : 0;
        if (die.failed || end == 0 || specs == 0)
            return -1;
        keep->abbrev = end > keep->abbrev ? end : keep->abbrev;
        int64_t stmt = stmt_list(info, abbrev, &u, specs);
        if (stmt >= 0) {
            struct cursor lines = {line, (uint64_t)stmt, 0};
            unsigned offset;
            uint64_t line_end = unit_end(&lines, &offset);
            if (line_end == 0 || line->need(line, line_end) != 0)
                return -1;
            keep->line = line_end > keep->line ? line_end : keep->line;
        }
    }
    /* the other units' first DIEs name abbreviations up to the farthest table */
    struct cursor table = {abbrev, abbrev_at, 0};
    uint64_t end = table_end(&table, 0, NULL);
    if (end == 0)
        return -1;
    keep->abbrev = end > keep->abbrev ? end : keep->abbrev;
    if (info->need(info, keep->info) != 0 || abbrev->need(abbrev, keep->abbrev) != 0)
        return -1;
    keep->aranges = farthest < keep->info ? aranges->size : keep_sets(aranges, keep->info);
    return 0;
}

/*
 * memdump-symbolize: the source lines of program counters in a module, from the module's
 * debug information or its separate debug file (found by build id under /usr/lib/debug, as
 * libc6-dbg and the -dbgsym packages install them), with elfutils' libdw.
 *
 * memdump's recording in GDB uses it for the modules whose separate debug files GDB was told not
 * to read (`scripts/memdump.sh` clears GDB's debug-file-directory: reading and indexing glibc's
 * debug information is most of GDB's time on a small program), for the frames the dump needs
 * only (gdb_ext/dbgkit/memdump_symbols.py, from_debug_files).
 *
 * It speaks binutils addr2line's protocol, `-a -f -i [-C] -e MODULE`, addresses (ELF virtual
 * addresses, hex) one per line on standard input, all read before the first answer (the debug
 * file's sections are inflated only as far as those addresses need); for each, the address, then one
 * (function, FILE:LINE) pair per level, innermost first: the function the address is in with
 * the address's line, then each function it was inlined into with the line of the inlined call
 * (`??` and `??:0` when unknown; code without a DWARF function, assembly, is named from the symbol
 * tables as GDB's minimal symbols name it). libdw reads DWARF 5's line tables right where binutils 2.40's
 * addr2line names the wrong file for code inlined from a header (glibc's
 * __libc_start_call_main), and it reads only the compilation units asked for. A separate debug
 * file's compressed sections are inflated before libdw opens it, by libdeflate when it is
 * installed, those it never reads left out (inflate.c; `--inflate=libdw` lets libdw do it).
 */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "inflate.h"

/* libstdc++'s demangler: GDB's and binutils' (libiberty's) spelling of C++ names */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *length, int *status);

static int demangle = 0;

static void put_name(const char *name)
{
    if (name == NULL) {
        fputs("??\n", stdout);
        return;
    }
    if (demangle && name[0] == '_' && name[1] == 'Z') {
        int status = -1;
        char *plain = __cxa_demangle(name, NULL, NULL, &status);
        if (status == 0 && plain != NULL) {
            fputs(plain, stdout);
            fputc('\n', stdout);
            free(plain);
            return;
        }
        free(plain);
    }
    fputs(name, stdout);
    fputc('\n', stdout);
}

/* FILE:LINE, a relative FILE after its compilation directory COMP_DIR as GDB spells it
 * (symtab_to_fullname for a source it cannot open: "./csu" "/" "../csu/libc-start.c") */
static void put_line(const char *comp_dir, const char *file, int line)
{
    if (file == NULL || line <= 0)
        fputs("??:0\n", stdout);
    else if (file[0] != '/' && comp_dir != NULL && comp_dir[0] != '\0')
        printf("%s/%s:%d\n", comp_dir, file, line);
    else
        printf("%s:%d\n", file, line);
}

/* A function's name as GDB prints it: in C++ its linkage name demangled, through
 * DW_AT_abstract_origin and DW_AT_specification (an inlined or out-of-class definition); in C
 * its DW_AT_name (glibc's DIEs carry internal linkage names, __GI_toupper for toupper). */
static const char *die_name(Dwarf_Die *cu, Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *name = NULL;
    int lang = dwarf_srclang(cu);
    int cxx = lang == DW_LANG_C_plus_plus || lang == DW_LANG_C_plus_plus_03 ||
              lang == DW_LANG_C_plus_plus_11 || lang == DW_LANG_C_plus_plus_14;
    if (cxx && (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) != NULL ||
                dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr) != NULL))
        name = dwarf_formstring(&attr);
    if (name == NULL && dwarf_attr_integrate(die, DW_AT_name, &attr) != NULL)
        name = dwarf_formstring(&attr);
    return name;
}

/* The file and line of the call an inlined_subroutine DIE stands for. */
static const char *call_site(Dwarf_Die *cu, Dwarf_Die *inlined, int *line)
{
    Dwarf_Attribute attr;
    Dwarf_Word file = 0, lineno = 0;
    Dwarf_Files *files;
    size_t nfiles;
    *line = 0;
    if (dwarf_attr(inlined, DW_AT_call_line, &attr) == NULL || dwarf_formudata(&attr, &lineno) != 0)
        return NULL;
    if (dwarf_attr(inlined, DW_AT_call_file, &attr) == NULL || dwarf_formudata(&attr, &file) != 0)
        return NULL;
    if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || file >= nfiles)
        return NULL;
    *line = (int)lineno;
    return dwarf_filesrc(files, file, NULL, NULL);
}

/* One entry of GDB's line tables: a row it recorded, or (line 0) the end of a file's run where
 * the line program switched to another file. */
struct entry {
    Dwarf_Line *row;
    Dwarf_Addr addr;
    const char *file;
    int line;
    bool stmt;
    bool dropped;
};

/* The line table's row for ADDR as GDB picks it. GDB's line reader (dwarf2/read.c,
 * lnp_state_machine::record_line and dwarf_record_line_p) keeps one table per source file and
 * does not record every row: not a row of line 0; not a row of the line before it that has (or
 * follows, on that line) a non-zero discriminator; not a row that is not a statement and
 * switches to another file where a statement row is at that address; and a switch of file ends
 * the previous file's run at that address, dropping its rows there. Its lookup
 * (find_pc_sect_line) takes, in each file's table, the last entry at or below ADDR, the file
 * whose entry is highest, and of that file's entries at that address a statement before a row
 * that is not one. libdw's dwarf_getsrc_die takes the last row of all. */
static Dwarf_Line *source_line(Dwarf_Die *cu, Dwarf_Addr addr)
{
    Dwarf_Lines *lines;
    size_t n;
    if (dwarf_getsrclines(cu, &lines, &n) != 0 || n == 0)
        return NULL;
    size_t lo = 0, hi = n;  /* the first row above ADDR */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        Dwarf_Addr a = 0;
        dwarf_lineaddr(dwarf_onesrcline(lines, mid), &a);
        if (a <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    size_t start = lo - 1;  /* the first row of ADDR's sequence */
    bool end = false;
    if (dwarf_lineendsequence(dwarf_onesrcline(lines, start), &end) != 0 || end)
        return NULL;
    while (start > 0) {
        if (dwarf_lineendsequence(dwarf_onesrcline(lines, start - 1), &end) != 0 || end)
            break;
        start--;
    }
    struct entry *table = malloc((2 * (lo - start) + 1) * sizeof *table);
    if (table == NULL)
        return NULL;
    size_t used = 0;
    const char *last_file = NULL;
    int last_line = 0, row_line = 0;
    bool discriminated = false, stmt_at_address = false;
    Dwarf_Addr last_address = (Dwarf_Addr)-1;
    for (size_t i = start; i < lo; i++) {
        Dwarf_Line *row = dwarf_onesrcline(lines, i);
        Dwarf_Addr at = 0;
        int line = 0;
        unsigned int disc = 0;
        bool stmt = false;
        dwarf_lineaddr(row, &at);
        dwarf_lineno(row, &line);
        dwarf_linebeginstatement(row, &stmt);
        dwarf_linediscriminator(row, &disc);
        const char *file = dwarf_linesrc(row, NULL, NULL);
        discriminated = line != row_line ? disc != 0 : discriminated || disc != 0;
        row_line = line;
        if (at != last_address) {
            stmt_at_address = false;
            last_address = at;
        }
        stmt_at_address |= stmt;
        bool switched = file != last_file;
        if (line == 0 || (switched && last_file != NULL && !stmt && stmt_at_address))
            continue;
        if (switched && last_file != NULL) {  /* the previous file's run ends here */
            for (size_t k = used; k > 0 && table[k - 1].addr == at; k--)
                if (table[k - 1].file == last_file)
                    table[k - 1].dropped = true;
            table[used++] = (struct entry){NULL, at, last_file, 0, false, false};
        }
        if (switched || line != last_line || !discriminated)
            table[used++] = (struct entry){row, at, file, line, stmt, false};
        last_file = file;
        last_line = line;
    }
    /* each file's last entry at or below ADDR (walking back, the first seen of its file); the
     * highest wins, the file met first on a tie */
    size_t best = used;
    const char *seen[64];
    size_t nseen = 0;
    for (size_t k = used; k-- > 0;) {
        if (table[k].dropped)
            continue;
        bool known = false;
        for (size_t j = 0; j < nseen && !known; j++)
            known = seen[j] == table[k].file;
        if (known)
            continue;
        if (nseen < sizeof seen / sizeof *seen)
            seen[nseen++] = table[k].file;
        if (table[k].line != 0 && (best == used || table[k].addr >= table[best].addr))
            best = k;
    }
    Dwarf_Line *found = NULL;
    if (best != used) {
        size_t k = best;  /* back to a statement of that file at that address */
        if (!table[k].stmt) {
            size_t j = k;
            while (j > 0 && table[j - 1].addr == table[k].addr &&
                   (table[j - 1].dropped || table[j - 1].file == table[k].file)) {
                j--;
                if (!table[j].dropped && table[j].file == table[k].file && table[j].line != 0 &&
                    table[j].stmt) {
                    k = j;
                    break;
                }
            }
        }
        found = table[k].row;
    }
    free(table);
    return found;
}

/* The function symbol that holds ADDR, as GDB's minimal symbols pick it among aliases
 * (minsyms.c: sorted by address, then name, the last at the highest address at or below ADDR,
 * one with a size before one without, and ADDR inside its size): `clone3`, not `__clone3`. */
static const char *symbol_name(Dwfl_Module *mod, Dwarf_Addr addr)
{
    int n = dwfl_module_getsymtab(mod);
    const char *best = NULL;
    GElf_Addr best_at = 0;
    GElf_Xword best_size = 0;
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr at;
        const char *name = dwfl_module_getsym_info(mod, i, &sym, &at, NULL, NULL, NULL);
        if (name == NULL || name[0] == '\0' || GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
            sym.st_shndx == SHN_UNDEF || at > addr)
            continue;
        if (best != NULL && at < best_at)
            continue;
        if (best != NULL && at == best_at) {
            if ((best_size != 0) != (sym.st_size != 0) ? sym.st_size == 0 : strcmp(name, best) <= 0)
                continue;
        }
        best = name;
        best_at = at;
        best_size = sym.st_size;
    }
    if (best != NULL && best_size != 0 && addr >= best_at + best_size)
        return NULL;
    return best;
}

/* The levels of ADDR (a module address), in addr2line's order. */
static void symbolize(Dwfl_Module *mod, Dwarf_Addr addr)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    const char *file = NULL;
    int line = 0;
    Dwarf_Line *l = cu != NULL ? source_line(cu, addr - bias) : NULL;
    if (l != NULL) {
        file = dwarf_linesrc(l, NULL, NULL);
        dwarf_lineno(l, &line);
    }
    const char *comp_dir = NULL;
    Dwarf_Attribute attr;
    if (cu != NULL && dwarf_attr(cu, DW_AT_comp_dir, &attr) != NULL)
        comp_dir = dwarf_formstring(&attr);
    /* dwarf_getscopes follows an inlined function to its abstract definition (at the unit's
     * level); the concrete functions it sits in are the DIEs that physically contain it */
    Dwarf_Die *scopes = NULL, *chain = NULL;
    /* the assembler's functions (`GNU AS` units: glibc's syscall wrappers, clone3) are not
     * functions to GDB, which names them from the symbol tables (clone3, not __clone3) */
    const char *producer = NULL;
    if (cu != NULL && dwarf_attr(cu, DW_AT_producer, &attr) != NULL)
        producer = dwarf_formstring(&attr);
    bool assembly = producer != NULL && strncmp(producer, "GNU AS", 6) == 0;
    int n = cu != NULL && !assembly ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            m = dwarf_getscopes_die(&scopes[i], &chain);
            break;
        }
    }
    int printed = 0;
    for (int i = 0; i < m; i++) {
        int tag = dwarf_tag(&chain[i]);
        if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
            continue;
        put_name(die_name(cu, &chain[i]));
        put_line(comp_dir, file, line);
        printed = 1;
        if (tag == DW_TAG_subprogram)
            break;
        file = call_site(cu, &chain[i], &line);
    }
    free(chain);
    free(scopes);
    if (!printed) {  /* no DWARF function holds it (assembly): the symbol tables' name */
        put_name(symbol_name(mod, addr));
        put_line(comp_dir, file, line);
    }
}

/* how the separate debug file's compressed sections are inflated (inflate.c) */
static enum inflater inflater = INFLATE_AUTO;

/* the addresses asked (ELF addresses), all read before the debug file is opened: its sections
 * are inflated only as far as they need (prefix.c) */
static uint64_t *asked = NULL;
static size_t nasked = 0;
static int verbose = 0;

/* The separate debug file by the module's build id under /usr/lib/debug (as libc6-dbg and the
 * -dbgsym packages install them), its compressed sections inflated (inflate.c); any other file
 * as dwfl_standard_find_debuginfo finds it (which hands libdw the file as it is: libdw then
 * inflates it) */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                          Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    const unsigned char *id = NULL;
    GElf_Addr at;
    int n = inflater == INFLATE_LIBDW ? 0 : dwfl_module_build_id(mod, &id, &at);
    if (n > 1) {
        char path[sizeof "/usr/lib/debug/.build-id//.debug" + 2 * 64 + 1];
        if ((size_t)n <= 64) {
            int len = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", id[0]);
            for (int i = 1; i < n; i++)
                len += snprintf(path + len, sizeof path - (size_t)len, "%02x", id[i]);
            snprintf(path + len, sizeof path - (size_t)len, ".debug");
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            struct prefix keep;
            int copy = fd >= 0 ? inflated_copy(fd, inflater, id, (size_t)n, asked, nasked, &keep)
                               : -1;
            if (fd >= 0)
                close(fd);
            if (copy >= 0 && verbose && keep.info != 0)
                fprintf(stderr, "memdump-symbolize: %s: inflated the first %" PRIu64 " bytes of "
                        ".debug_info, %" PRIu64 " of .debug_abbrev, %" PRIu64 " of .debug_line\n",
                        path, keep.info, keep.abbrev, keep.line);
            else if (copy >= 0 && verbose)
                fprintf(stderr, "memdump-symbolize: %s: inflated whole\n", path);
            if (copy >= 0) {
                free(*debuginfo_file_name);
                *debuginfo_file_name = strdup(path);
                return copy;
            }
        }
    }
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
}

static int usage(const char *why)
{
    fprintf(stderr, "memdump-symbolize: %s\nusage: memdump-symbolize [-a] [-f] [-i] [-C] "
                    "[--inflate=auto|libdeflate|zlib|libdw] [--verbose] -e MODULE < ADDRESSES\n",
            why);
    return 2;
}

int main(int argc, char **argv)
{
    const char *module = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-e") == 0 && i + 1 < argc)
            module = argv[++i];
        else if (strcmp(argv[i], "-C") == 0)
            demangle = 1;
        else if (strcmp(argv[i], "--verbose") == 0)
            verbose = 1;
        else if (strncmp(argv[i], "--inflate=", 10) == 0) {
            int which = inflater_named(argv[i] + 10);
            if (which < 0)
                return usage("unknown inflater (--inflate=auto|libdeflate|zlib|libdw)");
            inflater = (enum inflater)which;
        }
        else if (strcmp(argv[i], "-a") != 0 && strcmp(argv[i], "-f") != 0 && strcmp(argv[i], "-i") != 0)
            return usage("unknown option");
    }
    if (module == NULL)
        return usage("no module (-e MODULE)");
    static char *debuginfo_path = NULL;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = &debuginfo_path,
    };
    Dwfl *dwfl = dwfl_begin(&callbacks);
    if (dwfl == NULL)
        return usage(dwfl_errmsg(-1));
    dwfl_report_begin(dwfl);
    Dwfl_Module *mod = dwfl_report_offline(dwfl, module, module, -1);
    dwfl_report_end(dwfl, NULL, NULL);
    if (mod == NULL) {
        fprintf(stderr, "memdump-symbolize: %s: %s\n", module, dwfl_errmsg(-1));
        return 1;
    }
    /* an offline module sits at its ELF addresses plus a bias (0 for a shared object) */
    Dwarf_Addr elf_bias = 0;
    if (dwfl_module_getelf(mod, &elf_bias) == NULL)
        elf_bias = 0;
    /* every address before the first answer (the debug file is opened at the first) */
    char buf[256];
    size_t room = 0;
    while (fgets(buf, sizeof buf, stdin) != NULL) {
        char *end;
        uint64_t addr = strtoull(buf, &end, 16);
        if (end == buf)
            continue;
        if (nasked == room) {
            room = room ? 2 * room : 64;
            uint64_t *more = realloc(asked, room * sizeof *asked);
            if (more == NULL) {
                fputs("memdump-symbolize: out of memory\n", stderr);
                return 1;
            }
            asked = more;
        }
        asked[nasked++] = addr;
    }
    for (size_t i = 0; i < nasked; i++) {
        printf("0x%016" PRIx64 "\n", asked[i]);
        symbolize(mod, asked[i] + elf_bias);
    }
    free(asked);
    dwfl_end(dwfl);
    return fflush(stdout) == 0 ? 0 : 1;
}

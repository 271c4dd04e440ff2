/*
 * A separate debug file with its compressed DWARF sections inflated before libdw opens it.
 *
 * Debian's -dbg and -dbgsym files (libc6-dbg) compress their .debug_* sections with zlib
 * (SHF_COMPRESSED), and libdw inflates every section it knows, whole, when it opens the file,
 * whatever the addresses asked: for glibc's debug file 9 MB of output, four fifths of
 * memdump-symbolize's time on a small program's frames. Here the file is copied into a memfd with
 * the sections it reads inflated (by libdeflate, about three times as fast as zlib, loaded at run
 * time when it is installed; else by zlib) and those it never reads (location lists, call frame
 * information, macros, the name indexes: .debug_loclists is a sixth of glibc's compressed DWARF)
 * left out as SHT_NOBITS, which libdw ignores. libdw then reads the same bytes it would have
 * inflated itself: the answers are the same (tests/e2e/test_late_debug_files.py compares them).
 * Given the addresses asked, .debug_info, .debug_abbrev and .debug_line are inflated by zlib's
 * streaming interface only as far as those addresses' units need (prefix.c: glibc's frames below
 * main need 29 kB of their 8.1 MB), the copy's section headers giving the shorter sizes.
 */
#define _GNU_SOURCE
#include "inflate.h"
#include "prefix.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef MEMDUMP_HAVE_ZLIB
#include <zlib.h>
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#define MEMDUMP_NATIVE_ELFDATA ELFDATA2MSB
#else
#define MEMDUMP_NATIVE_ELFDATA ELFDATA2LSB
#endif

/* the DWARF sections memdump-symbolize never reads: libdw inflates them for nothing */
static const char *const unread[] = {
    ".debug_loc", ".debug_loclists", ".debug_frame", ".debug_macro", ".debug_macinfo",
    ".debug_pubnames", ".debug_pubtypes", ".debug_gnu_pubnames", ".debug_gnu_pubtypes",
    NULL,
};

int inflater_named(const char *name)
{
    static const char *const names[] = {"auto", "libdeflate", "zlib", "libdw"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* libdeflate's decompression API (libdeflate.h, stable since 1.0), loaded with dlopen: its
 * development files need not be installed */
struct libdeflate {
    void *(*alloc)(void);
    int (*zlib_decompress)(void *, const void *, size_t, void *, size_t, size_t *);
    void (*free)(void *);
};

static int load_libdeflate(struct libdeflate *lib)
{
    void *handle = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL)
        return -1;
    *(void **)&lib->alloc = dlsym(handle, "libdeflate_alloc_decompressor");
    *(void **)&lib->zlib_decompress = dlsym(handle, "libdeflate_zlib_decompress");
    *(void **)&lib->free = dlsym(handle, "libdeflate_free_decompressor");
    return lib->alloc && lib->zlib_decompress && lib->free ? 0 : -1;
}

/* Inflate the zlib stream IN (LEN bytes) into OUT, exactly SIZE bytes; 0 on success */
static int inflate_into(enum inflater which, struct libdeflate *lib, void *decompressor,
                        const unsigned char *in, size_t len, unsigned char *out, size_t size)
{
    if (which == INFLATE_LIBDEFLATE) {
        size_t got = 0;
        return lib->zlib_decompress(decompressor, in, len, out, size, &got) == 0 && got == size
                   ? 0 : -1;
    }
#ifdef MEMDUMP_HAVE_ZLIB
    uLongf got = size;
    return uncompress(out, &got, in, len) == Z_OK && got == size ? 0 : -1;
#else
    (void)in, (void)len, (void)out, (void)size;
    return -1;
#endif
}

static int is_unread(const char *name)
{
    for (const char *const *u = unread; *u != NULL; u++)
        if (strcmp(name, *u) == 0)
            return 1;
    return 0;
}

/* the sections prefix.c may cut */
enum part { PART_NONE = -1, PART_ARANGES, PART_INFO, PART_ABBREV, PART_LINE, PARTS };

static enum part part_named(const char *name)
{
    static const char *const parts[PARTS] = {
        ".debug_aranges", ".debug_info", ".debug_abbrev", ".debug_line",
    };
    for (int p = 0; p < PARTS; p++)
        if (strcmp(name, parts[p]) == 0)
            return (enum part)p;
    return PART_NONE;
}

/* Whether [OFF, OFF + LEN) lies inside a file of SIZE bytes */
static int inside(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* Whether the notes NOTE (SIZE bytes) hold the GNU build id ID (LEN bytes) */
static int has_build_id(const unsigned char *note, uint64_t size, const unsigned char *id,
                        size_t len)
{
    uint64_t off = 0;
    while (size - off >= sizeof(Elf64_Nhdr)) {
        const Elf64_Nhdr *nh = (const Elf64_Nhdr *)(note + off);
        uint64_t name = ((uint64_t)nh->n_namesz + 3) & ~(uint64_t)3;
        uint64_t desc = ((uint64_t)nh->n_descsz + 3) & ~(uint64_t)3;
        off += sizeof *nh;
        if (name > size - off || desc > size - off - name)
            return 0;
        if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
            memcmp(note + off, "GNU", 4) == 0 && nh->n_descsz == len &&
            memcmp(note + off + name, id, len) == 0)
            return 1;
        off += name + desc;
    }
    return 0;
}

/* The plan for one section: where its inflated bytes go in the copy (0: copied as it is), and
 * which of the sections prefix.c may cut it is (PART_NONE: none; it is inflated whole) */

struct plan {
    uint64_t at;
    int skip;
    enum part part;
    int done;  /* inflated (its prefix) before the other sections */
};

#ifdef MEMDUMP_HAVE_ZLIB
/* A section inflated by zlib as far as prefix.c asks (lazy.need), in place in the copy */
struct stream {
    struct lazy lazy;  /* first: a struct lazy * is a struct stream * */
    z_stream z;
    int open;
};

static int stream_need(struct lazy *self, uint64_t upto)
{
    struct stream *s = (struct stream *)self;
    /* a little more than asked: the unit headers are read one after the other */
    uint64_t want = s->lazy.size - upto > 65536 ? upto + 65536 : s->lazy.size;
    while (s->z.total_out < upto) {
        s->z.next_out = (Bytef *)s->lazy.bytes + s->z.total_out;
        s->z.avail_out = (uInt)(want - s->z.total_out < (1u << 30) ? want - s->z.total_out
                                                                   : 1u << 30);
        int r = inflate(&s->z, Z_NO_FLUSH);
        if (r != Z_OK && !(r == Z_STREAM_END && s->z.total_out == s->lazy.size))
            return -1;
        if (r == Z_STREAM_END)
            break;
    }
    return s->z.total_out >= upto ? 0 : -1;
}

/* Inflate the prefixes of .debug_aranges, .debug_info, .debug_abbrev and .debug_line that the
 * addresses ADDRS (N) need (prefix.c), into OUT where the plans put them, the copy's section
 * headers OSH given the prefixes' sizes; 0 when done, -1 when the sections are to be inflated
 * whole (nothing of the copy was changed but the prefixes' bytes, overwritten then) */
static int inflate_prefixes(const unsigned char *file, const Elf64_Shdr *sh, Elf64_Shdr *osh,
                            struct plan *plans, unsigned nsections, unsigned char *out,
                            const uint64_t *addrs, size_t n, struct prefix *keep)
{
    struct stream streams[PARTS];
    unsigned index[PARTS] = {0};
    for (unsigned i = 1; i < nsections; i++)
        if (plans[i].part != PART_NONE && !plans[i].skip && plans[i].at != 0)
            index[plans[i].part] = i;
    int ok = 1;
    memset(streams, 0, sizeof streams);
    for (int p = 0; p < PARTS && ok; p++) {
        const Elf64_Shdr *s = &sh[index[p]];
        const Elf64_Chdr *ch = (const Elf64_Chdr *)(file + s->sh_offset);
        ok = index[p] != 0 && s->sh_size - sizeof *ch < (1u << 30) &&
             ch->ch_size <= UINT64_MAX - 65536;
        if (!ok)
            break;
        streams[p].lazy = (struct lazy){out + plans[index[p]].at, ch->ch_size, stream_need};
        streams[p].z.next_in = (Bytef *)(ch + 1);
        streams[p].z.avail_in = (uInt)(s->sh_size - sizeof *ch);
        ok = inflateInit(&streams[p].z) == Z_OK;
        streams[p].open = ok;
    }
    ok = ok && dwarf_prefix(&streams[PART_ARANGES].lazy, &streams[PART_INFO].lazy,
                            &streams[PART_ABBREV].lazy, &streams[PART_LINE].lazy, addrs, n,
                            keep) == 0;
    for (int p = 0; p < PARTS; p++)
        if (streams[p].open)
            inflateEnd(&streams[p].z);
    if (!ok) {
        memset(keep, 0, sizeof *keep);
        return -1;
    }
    const uint64_t sizes[PARTS] = {keep->aranges, keep->info, keep->abbrev, keep->line};
    for (int p = 0; p < PARTS; p++) {
        unsigned i = index[p];
        const Elf64_Chdr *ch = (const Elf64_Chdr *)(file + sh[i].sh_offset);
        osh[i].sh_flags &= ~(uint64_t)SHF_COMPRESSED;
        osh[i].sh_size = sizes[p];
        osh[i].sh_addralign = ch->ch_addralign;
        osh[i].sh_offset = plans[i].at;
        plans[i].done = 1;
    }
    return 0;
}
#endif

static int copy_inflated(const unsigned char *file, enum inflater which,
                         struct plan *plans, uint64_t total, const uint64_t *addrs, size_t n,
                         struct prefix *keep)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
    struct libdeflate lib = {0};
    void *decompressor = NULL;
    if (which == INFLATE_LIBDEFLATE) {
        if (load_libdeflate(&lib) != 0 || (decompressor = lib.alloc()) == NULL)
            return -1;
    }
    int fd = memfd_create("memdump-symbolize", MFD_CLOEXEC);
    if (fd < 0)
        goto fail;
    if (ftruncate(fd, (off_t)total) != 0)
        goto fail;
    unsigned char *out = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (out == MAP_FAILED)
        goto fail;
    /* the headers, the section table and every section's bytes but the compressed ones' (the
     * copy's other bytes are a memfd's zeros, never touched) */
    uint64_t head = eh->e_phoff + (uint64_t)eh->e_phnum * eh->e_phentsize;
    memcpy(out, file, head > sizeof *eh ? head : sizeof *eh);
    memcpy(out + eh->e_shoff, sh, (size_t)eh->e_shnum * sizeof *sh);
    Elf64_Shdr *osh = (Elf64_Shdr *)(out + eh->e_shoff);
#ifdef MEMDUMP_HAVE_ZLIB
    if (n > 0)
        inflate_prefixes(file, sh, osh, plans, eh->e_shnum, out, addrs, n, keep);
#else
    (void)addrs, (void)n, (void)keep;
#endif
    int ok = 1;
    for (unsigned i = 1; ok && i < eh->e_shnum; i++) {
        if (sh[i].sh_type == SHT_NOBITS || plans[i].done)
            continue;
        if (!(sh[i].sh_flags & SHF_COMPRESSED)) {
            memcpy(out + sh[i].sh_offset, file + sh[i].sh_offset, sh[i].sh_size);
            continue;
        }
        const Elf64_Chdr *ch = (const Elf64_Chdr *)(file + sh[i].sh_offset);
        osh[i].sh_flags &= ~(uint64_t)SHF_COMPRESSED;
        osh[i].sh_size = ch->ch_size;
        osh[i].sh_addralign = ch->ch_addralign;
        if (plans[i].skip) {
            osh[i].sh_type = SHT_NOBITS;
            continue;
        }
        osh[i].sh_offset = plans[i].at;
        ok = inflate_into(which, &lib, decompressor, (const unsigned char *)(ch + 1),
                          sh[i].sh_size - sizeof *ch, out + plans[i].at, ch->ch_size) == 0;
    }
    munmap(out, total);
    if (decompressor != NULL)
        lib.free(decompressor);
    if (ok)
        return fd;
    close(fd);
    return -1;
fail:
    if (fd >= 0)
        close(fd);
    if (decompressor != NULL)
        lib.free(decompressor);
    return -1;
}

/* The plans of the sections of FILE (SIZE bytes), the copy's size in *TOTAL; 0 when the file is
 * one to inflate (a well-formed 64-bit ELF file of this machine's byte order, with the build id
 * ID of LEN bytes and a zlib section) */
static int plan_sections(const unsigned char *file, uint64_t size, const unsigned char *id,
                         size_t len, struct plan **plans, uint64_t *total)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != MEMDUMP_NATIVE_ELFDATA ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 ||
        eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= eh->e_shnum ||
        !inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size) ||
        !inside(eh->e_phoff, (uint64_t)eh->e_phnum * eh->e_phentsize, size))
        return -1;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
    const Elf64_Shdr *names = &sh[eh->e_shstrndx];
    if (names->sh_type == SHT_NOBITS || (names->sh_flags & SHF_COMPRESSED) ||
        !inside(names->sh_offset, names->sh_size, size) || names->sh_size == 0 ||
        file[names->sh_offset + names->sh_size - 1] != '\0')
        return -1;
    *plans = calloc(eh->e_shnum, sizeof **plans);
    if (*plans == NULL)
        return -1;
    for (unsigned i = 0; i < eh->e_shnum; i++)
        (*plans)[i].part = PART_NONE;
    uint64_t end = (size + 15) & ~(uint64_t)15;
    int compressed = 0, identified = 0;
    for (unsigned i = 1; i < eh->e_shnum; i++) {
        if (sh[i].sh_type == SHT_NOBITS)
            continue;
        if (!inside(sh[i].sh_offset, sh[i].sh_size, size) || sh[i].sh_name >= names->sh_size)
            goto no;
        if (sh[i].sh_type == SHT_NOTE && !(sh[i].sh_flags & SHF_COMPRESSED) &&
            has_build_id(file + sh[i].sh_offset, sh[i].sh_size, id, len))
            identified = 1;
        if (!(sh[i].sh_flags & SHF_COMPRESSED))
            continue;
        const Elf64_Chdr *ch = (const Elf64_Chdr *)(file + sh[i].sh_offset);
        if (sh[i].sh_size < sizeof *ch || ch->ch_type != ELFCOMPRESS_ZLIB ||
            ch->ch_addralign > 4096 || ch->ch_size > (uint64_t)1 << 40)
            goto no;  /* zstd, or not what it says: libdw's business */
        compressed = 1;
        const char *name = (const char *)file + names->sh_offset + sh[i].sh_name;
        (*plans)[i].part = part_named(name);
        if (is_unread(name)) {
            (*plans)[i].skip = 1;
            continue;
        }
        uint64_t align = ch->ch_addralign > 1 ? ch->ch_addralign : 1;
        end = (end + align - 1) / align * align;
        (*plans)[i].at = end;
        end += ch->ch_size;
    }
    if (compressed && identified) {
        *total = end;
        return 0;
    }
no:
    free(*plans);
    *plans = NULL;
    return -1;
}

int inflated_copy(int fd, enum inflater which, const unsigned char *id, size_t len,
                  const uint64_t *addrs, size_t n, struct prefix *keep)
{
    memset(keep, 0, sizeof *keep);
    if (which == INFLATE_LIBDW)
        return -1;
    if (which == INFLATE_AUTO) {
        struct libdeflate lib;
        which = load_libdeflate(&lib) == 0 ? INFLATE_LIBDEFLATE : INFLATE_ZLIB;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
        return -1;
    uint64_t size = (uint64_t)st.st_size;
    unsigned char *file = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file == MAP_FAILED)
        return -1;
    struct plan *plans = NULL;
    uint64_t total = 0;
    int out = -1;
    if (plan_sections(file, size, id, len, &plans, &total) == 0)
        out = copy_inflated(file, which, plans, total, addrs, n, keep);
    free(plans);
    munmap(file, size);
    return out;
}

/* @brief Stacks walked in the process from .eh_frame, as gdb_ext/dbgkit/core/unwind.py walks them from
 * GDB: correct for code built without frame pointers (distribution libraries are).
 *
 * A pc's unwind rule (CFA = rsp or rbp + offset, the return address at CFA-8, rbp saved at a
 * CFA-relative slot or unchanged) is computed once from its module's .eh_frame_hdr search table
 * and FDE, then cached in a direct-mapped table of 64Ki entries (1 MiB). A walk is then one cache
 * probe and one or two loads per frame. Every load is checked against the thread's stack (and
 * signal stack), so a wrong rule ends the walk instead of faulting.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder.h"

/* DWARF register numbers, x86-64 psABI §3.6.2 */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16

enum rule_kind {
    K_EMPTY = 0,
    K_CFA,      /* CFA = (rsp|rbp) + off; ra at CFA-8; rbp at CFA+bp_off or unchanged */
    K_END,      /* the return address is undefined: outermost frame */
    K_STOP,     /* no module, no FDE, unsupported CFI: the walk ends here */
    K_FP,       /* a module without .eh_frame: the frame-pointer chain */
    K_SIGNAL,   /* a signal trampoline (__restore_rt): registers from the ucontext at rsp */
    K_CFA_DEREF /* CFA = *(rbp + off) (functions that realign the stack: main built -mavx) */
};

struct rule {
    uint8_t kind;
    uint8_t cfa_rbp;   /* CFA register: 0 rsp, 1 rbp */
    uint8_t bp_saved;  /* rbp saved at CFA + bp_off */
    uint8_t pad;
    int32_t cfa_off;
    int32_t bp_off;
    int32_t pad2;
};

struct cache_entry {
    volatile uintptr_t key;  /* pc * 2 + exact; 0 empty */
    struct rule rule;
};

#define CACHE_BITS 16
static struct cache_entry *rule_cache;

struct module {
    uintptr_t lo, hi;        /* executable segments */
    uintptr_t bias;
    const uint8_t *eh_hdr;   /* .eh_frame_hdr in memory, NULL when none */
    char *path;
};

struct module_table {
    int count;
    struct module mods[];
};

static struct module_table *volatile modules;

/* -- the module list ------------------------------------------------------------------------ */

struct collect {
    struct module_table *t;
    int cap;
};

static int collect_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct collect *c = data;
    if (c->t->count >= c->cap)
        return 1;
    struct module m = {UINTPTR_MAX, 0, info->dlpi_addr, NULL, NULL};
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            if (lo < m.lo)
                m.lo = lo;
            if (lo + ph->p_memsz > m.hi)
                m.hi = lo + ph->p_memsz;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            m.eh_hdr = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        }
    }
    if (m.hi == 0)
        return 0;
    char buf[PATH_MAX];
    const char *name = info->dlpi_name;
    if (name == NULL || name[0] == '\0') {
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = '\0';
    } else if (realpath(name, buf) == NULL) {
        strncpy(buf, name, sizeof buf - 1);
        buf[sizeof buf - 1] = '\0';
    }
    size_t len = strlen(buf) + 1;
    m.path = mdr_map(len);
    if (m.path == NULL)
        return 1;
    memcpy(m.path, buf, len);
    c->t->mods[c->t->count++] = m;
    return 0;
}

/* A new module list. The old one is not freed: a thread may still read it (a few KiB per
 * dlopen/dlclose). */
static struct module_table *load_modules(void)
{
    int cap = 4096;
    struct module_table *t = mdr_map(sizeof *t + cap * sizeof(struct module));
    if (t == NULL)
        return NULL;
    struct collect c = {t, cap};
    dl_iterate_phdr(collect_module, &c);
    __atomic_store_n(&modules, t, __ATOMIC_RELEASE);
    return t;
}

static const struct module *find_module(const struct module_table *t, uintptr_t pc)
{
    if (t == NULL)
        return NULL;
    for (int i = 0; i < t->count; i++)
        if (pc >= t->mods[i].lo && pc < t->mods[i].hi)
            return &t->mods[i];
    return NULL;
}

int mdr_module_of(uintptr_t pc, const char **path, uintptr_t *bias)
{
    const struct module *m = find_module(__atomic_load_n(&modules, __ATOMIC_ACQUIRE), pc);
    if (m == NULL)
        return 0;
    *path = m->path;
    *bias = m->bias;
    return 1;
}

volatile uint64_t mdr_unwind_gen;

void mdr_unwind_invalidate(void)
{
    __atomic_add_fetch(&mdr_unwind_gen, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&modules, NULL, __ATOMIC_RELEASE);
    if (rule_cache != NULL)
        for (size_t i = 0; i < (1u << CACHE_BITS); i++)
            rule_cache[i].key = 0;
}

/* -- reading CFI ---------------------------------------------------------------------------- */

static uint64_t uleb(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    return v;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    while (*p < end) {
        b = *(*p)++;
        if (shift < 64)
            v |= (int64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

/* A pointer encoded with DW_EH_PE_* ENC at *P; DATA is the base of datarel. 0 on failure. */
static int read_encoded(const uint8_t **p, const uint8_t *end, uint8_t enc, uintptr_t data,
                        uintptr_t *out)
{
    if (enc == 0xff)
        return 0;
    const uint8_t *start = *p;
    uintptr_t v;
    switch (enc & 0x0f) {
    case 0x00: v = *(const uint64_t *)*p; *p += 8; break;
    case 0x01: v = uleb(p, end); break;
    case 0x02: v = *(const uint16_t *)*p; *p += 2; break;
    case 0x03: v = *(const uint32_t *)*p; *p += 4; break;
    case 0x04: v = *(const uint64_t *)*p; *p += 8; break;
    case 0x09: v = (uintptr_t)sleb(p, end); break;
    case 0x0a: v = (uintptr_t)(intptr_t) * (const int16_t *)*p; *p += 2; break;
    case 0x0b: v = (uintptr_t)(intptr_t) * (const int32_t *)*p; *p += 4; break;
    case 0x0c: v = *(const uint64_t *)*p; *p += 8; break;
    default: return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (uintptr_t)start; break;
    case 0x30: v += data; break;
    default: return 0;
    }
    if (enc & 0x80)
        v = *(const uintptr_t *)v;
    *out = v;
    return 1;
}

/* The FDE covering TARGET through the binary-search table of .eh_frame_hdr. */
static const uint8_t *find_fde(const uint8_t *hdr, uintptr_t target)
{
    if (hdr[0] != 1)
        return NULL;
    uint8_t ptr_enc = hdr[1], count_enc = hdr[2], table_enc = hdr[3];
    const uint8_t *p = hdr + 4, *end = hdr + 4 + 64;
    uintptr_t eh_frame, count;
    if (!read_encoded(&p, end, ptr_enc, (uintptr_t)hdr, &eh_frame) ||
        !read_encoded(&p, end, count_enc, (uintptr_t)hdr, &count))
        return NULL;
    if (table_enc != 0x3b || count == 0)  /* datarel | sdata4: what every linker writes */
        return NULL;
    const int32_t *table = (const int32_t *)p;
    size_t lo = 0, hi = count;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if ((uintptr_t)hdr + table[2 * mid] <= target)
            lo = mid;
        else
            hi = mid;
    }
    if ((uintptr_t)hdr + table[2 * lo] > target)
        return NULL;
    return (const uint8_t *)((uintptr_t)hdr + table[2 * lo + 1]);
}

struct row {
    int cfa_reg;
    int64_t cfa_off;
    int cfa_deref;       /* CFA = *(rbp + cfa_off) */
    int bp_rule;         /* 0 unchanged, 1 at CFA+bp_off, 2 other (unsupported) */
    int64_t bp_off;
    int ra_rule;         /* 1 at CFA+ra_off, 3 undefined, 2 other */
    int64_t ra_off;
};

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint8_t fde_enc;
    int signal;
    const uint8_t *insns, *end;
};

static int parse_cie(const uint8_t *p, struct cie *c)
{
    uint32_t len = *(const uint32_t *)p;
    if (len == 0 || len == 0xffffffffu)
        return 0;
    const uint8_t *end = p + 4 + len;
    p += 8;  /* length, CIE id */
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    p += strlen(aug) + 1;
    c->code_align = uleb(&p, end);
    c->data_align = sleb(&p, end);
    if (version == 1)
        p++;
    else
        uleb(&p, end);
    c->fde_enc = 0;
    c->signal = 0;
    if (aug[0] == 'z') {
        uint64_t alen = uleb(&p, end);
        const uint8_t *aend = p + alen;
        for (const char *a = aug + 1; *a; a++) {
            uintptr_t ignored;
            if (*a == 'R') {
                c->fde_enc = *p++;
            } else if (*a == 'P') {
                uint8_t enc = *p++;
                if (!read_encoded(&p, aend, enc & 0x7f, 0, &ignored))
                    return 0;
            } else if (*a == 'L') {
                p++;
            } else if (*a == 'S') {
                c->signal = 1;
            } else if (*a != 'B') {
                return 0;
            }
        }
        p = aend;
    } else if (aug[0] != '\0') {
        return 0;
    }
    c->insns = p;
    c->end = end;
    return 1;
}

#define STATE_DEPTH 8

/* Run the CFA program [P, END) from LOC while LOC <= TARGET. 0: unsupported. */
static int run_cfa(const uint8_t *p, const uint8_t *end, const struct cie *c, uintptr_t loc,
                   uintptr_t target, struct row *r, const struct row *initial)
{
    struct row saved[STATE_DEPTH];
    int depth = 0;
    while (p < end) {
        uint8_t op = *p++;
        uint8_t low = op & 0x3f;
        uint64_t reg, delta;
        int64_t off;
        switch (op >> 6) {
        case 1:
            loc += low * c->code_align;
            if (loc > target)
                return 1;
            continue;
        case 2:
            off = (int64_t)uleb(&p, end) * c->data_align;
            if (low == REG_RBP) { r->bp_rule = 1; r->bp_off = off; }
            if (low == REG_RA) { r->ra_rule = 1; r->ra_off = off; }
            continue;
        case 3:
            if (low == REG_RBP) { r->bp_rule = initial->bp_rule; r->bp_off = initial->bp_off; }
            if (low == REG_RA) { r->ra_rule = initial->ra_rule; r->ra_off = initial->ra_off; }
            continue;
        }
        switch (op) {
        case 0x00: break;
        case 0x01: { uintptr_t v; if (!read_encoded(&p, end, c->fde_enc, 0, &v)) return 0;
                     loc = v; if (loc > target) return 1; break; }
        case 0x02: delta = *p++; goto advance;
        case 0x03: delta = *(const uint16_t *)p; p += 2; goto advance;
        case 0x04: delta = *(const uint32_t *)p; p += 4; goto advance;
        advance:
            loc += delta * c->code_align;
            if (loc > target)
                return 1;
            break;
        case 0x05: case 0x11:
            reg = uleb(&p, end);
            off = op == 0x05 ? (int64_t)uleb(&p, end) * c->data_align : sleb(&p, end) * c->data_align;
            if (reg == REG_RBP) { r->bp_rule = 1; r->bp_off = off; }
            if (reg == REG_RA) { r->ra_rule = 1; r->ra_off = off; }
            break;
        case 0x06: case 0x07: case 0x08:
            reg = uleb(&p, end);
            if (reg == REG_RBP)
                r->bp_rule = op == 0x06 ? initial->bp_rule : op == 0x07 ? 2 : 0;
            if (reg == REG_RA)
                r->ra_rule = op == 0x06 ? initial->ra_rule : op == 0x07 ? 3 : 2;
            if (op == 0x07 && reg == REG_RBP)
                r->bp_rule = 2;
            break;
        case 0x09:
            reg = uleb(&p, end);
            uleb(&p, end);
            if (reg == REG_RBP) r->bp_rule = 2;
            if (reg == REG_RA) r->ra_rule = 2;
            break;
        case 0x0a:
            if (depth == STATE_DEPTH)
                return 0;
            saved[depth++] = *r;
            break;
        case 0x0b:
            if (depth == 0)
                return 0;
            *r = saved[--depth];
            break;
        case 0x0c:
            r->cfa_reg = (int)uleb(&p, end);
            r->cfa_off = (int64_t)uleb(&p, end);
            r->cfa_deref = 0;
            break;
        case 0x0d: r->cfa_reg = (int)uleb(&p, end); r->cfa_deref = 0; break;
        case 0x0e: r->cfa_off = (int64_t)uleb(&p, end); break;
        case 0x12:
            r->cfa_reg = (int)uleb(&p, end);
            r->cfa_off = sleb(&p, end) * c->data_align;
            r->cfa_deref = 0;
            break;
        case 0x13: r->cfa_off = sleb(&p, end) * c->data_align; break;
        case 0x0f: {
            /* DW_OP_breg6 (rbp) OFF; DW_OP_deref: the one expression compilers emit for a
             * function that realigns its stack. Anything else is unsupported. */
            uint64_t len = uleb(&p, end);
            const uint8_t *e = p, *eend = p + len;
            p = eend;
            if (len >= 3 && e[0] == 0x70 + REG_RBP) {
                e++;
                int64_t o = sleb(&e, eend);
                if (e + 1 == eend && *e == 0x06) {
                    r->cfa_reg = REG_RBP;
                    r->cfa_off = o;
                    r->cfa_deref = 1;
                    break;
                }
            }
            r->cfa_reg = -1;
            break;
        }
        case 0x10: case 0x16:
            reg = uleb(&p, end);
            delta = uleb(&p, end);
            p += delta;
            if (reg == REG_RBP) r->bp_rule = 2;
            if (reg == REG_RA) r->ra_rule = 2;
            break;
        case 0x14: case 0x15:
            reg = uleb(&p, end);
            if (op == 0x14) uleb(&p, end); else sleb(&p, end);
            if (reg == REG_RBP) r->bp_rule = 2;
            if (reg == REG_RA) r->ra_rule = 2;
            break;
        case 0x2e: uleb(&p, end); break;
        case 0x2f:
            reg = uleb(&p, end);
            off = -(int64_t)uleb(&p, end) * c->data_align;
            if (reg == REG_RBP) { r->bp_rule = 1; r->bp_off = off; }
            if (reg == REG_RA) { r->ra_rule = 1; r->ra_off = off; }
            break;
        default:
            return 0;
        }
    }
    return 1;
}

/* The rule at PC (EXACT: a signal-interrupted pc; otherwise a return address, looked up at
 * pc-1 as GDB and libgcc do, unless its FDE is a signal trampoline's). */
static struct rule compute_rule(uintptr_t pc, int exact)
{
    struct rule out = {0};
    out.kind = K_STOP;
    struct module_table *t = __atomic_load_n(&modules, __ATOMIC_ACQUIRE);
    const struct module *m = find_module(t, pc);
    if (m == NULL) {
        t = load_modules();
        m = find_module(t, pc);
        if (m == NULL)
            return out;
    }
    if (m->eh_hdr == NULL) {
        out.kind = K_FP;
        return out;
    }
    uintptr_t at = exact ? pc : pc - 1;
    const uint8_t *fde = find_fde(m->eh_hdr, at);
    if (fde == NULL && !exact)
        fde = find_fde(m->eh_hdr, pc);  /* a signal trampoline is entered at the pushed pc */
    if (fde == NULL)
        return out;
    uint32_t len = *(const uint32_t *)fde;
    if (len == 0 || len == 0xffffffffu)
        return out;
    const uint8_t *fend = fde + 4 + len;
    const uint8_t *cie_p = fde + 4 - *(const int32_t *)(fde + 4);
    struct cie c;
    if (!parse_cie(cie_p, &c))
        return out;
    const uint8_t *p = fde + 8;
    uintptr_t begin, range;
    if (!read_encoded(&p, fend, c.fde_enc, 0, &begin) ||
        !read_encoded(&p, fend, c.fde_enc & 0x0f, 0, &range))
        return out;
    if (c.signal)
        at = pc;
    if (at < begin || at - begin >= range)
        return out;
    if (c.signal) {
        out.kind = K_SIGNAL;
        return out;
    }
    if (((const char *)cie_p)[9] == 'z') {  /* the FDE's augmentation data: skipped */
        uint64_t alen = uleb(&p, fend);
        p += alen;
    }
    struct row initial = {REG_RSP, 8, 0, 0, 0, 1, -8};
    if (!run_cfa(c.insns, c.end, &c, begin, UINTPTR_MAX, &initial, &initial))
        return out;
    struct row r = initial;
    if (!run_cfa(p, fend, &c, begin, at, &r, &initial))
        return out;
    if (r.ra_rule == 3) {
        out.kind = K_END;
        return out;
    }
    if (r.ra_rule != 1 || r.ra_off != -8 || r.bp_rule == 2 ||
        (r.cfa_reg != REG_RSP && r.cfa_reg != REG_RBP) ||
        r.cfa_off > INT32_MAX || r.cfa_off < INT32_MIN || r.bp_off > INT32_MAX ||
        r.bp_off < INT32_MIN)
        return out;
    out.kind = r.cfa_deref ? K_CFA_DEREF : K_CFA;
    out.cfa_rbp = r.cfa_reg == REG_RBP;
    out.cfa_off = (int32_t)r.cfa_off;
    out.bp_saved = r.bp_rule == 1;
    out.bp_off = (int32_t)r.bp_off;
    return out;
}

static inline struct rule lookup(uintptr_t pc, int exact)
{
    uintptr_t key = pc * 2 + (uintptr_t)exact;
    size_t i = ((key * 0x9e3779b97f4a7c15ull) >> (64 - CACHE_BITS));
    struct cache_entry *e = &rule_cache[i];
    uintptr_t k1 = e->key;
    __asm__ volatile("" ::: "memory");
    struct rule r = e->rule;
    __asm__ volatile("" ::: "memory");
    if (MDR_LIKELY(k1 == key && e->key == key))
        return r;
    r = compute_rule(pc, exact);
    e->key = 0;
    __asm__ volatile("" ::: "memory");
    e->rule = r;
    __asm__ volatile("" ::: "memory");
    e->key = key;
    return r;
}

#define readable mdr_readable

/* ucontext_t on x86-64: uc_mcontext.gregs at offset 40; REG_RBP 10, REG_RSP 15, REG_RIP 16 */
#define UC_GREGS 40

/* One stack word, logged when LOG is given: a later walk from the same start is the same walk
 * as long as every word it read is unchanged (mdr_walk_valid). */
#define LOAD(dst, where)                                         \
    do {                                                         \
        uintptr_t a_ = (where);                                  \
        if (!readable(b, a_)) {                                  \
            *partial = 1;                                        \
            return n;                                            \
        }                                                        \
        (dst) = *(const uintptr_t *)a_;                          \
        if (log != NULL && log->count < MDR_WALK_READS) {        \
            log->addr[log->count] = a_;                          \
            log->value[log->count++] = (dst);                    \
        } else if (log != NULL) {                                \
            log->overflow = 1;                                   \
        }                                                        \
    } while (0)

/* rbp loaded from the stack: in code without frame pointers it holds data that changes from
 * call to call, and matters only if a later rule computes the CFA from rbp. Its read is logged
 * when (if) that happens, so that such a walk still matches the next call's. */
#define LOAD_FP(where)                                           \
    do {                                                         \
        uintptr_t a_ = (where);                                  \
        if (!readable(b, a_)) {                                  \
            *partial = 1;                                        \
            return n;                                            \
        }                                                        \
        fp = *(const uintptr_t *)a_;                             \
        fp_from = a_;                                            \
        fp_initial = 0;                                          \
    } while (0)

/* The walk is about to use fp: log where it came from (or that it is the caller's own rbp). */
#define USE_FP()                                                 \
    do {                                                         \
        if (log != NULL) {                                       \
            if (fp_initial) {                                    \
                log->fp_used = 1;                                \
            } else if (fp_from != 0) {                           \
                if (log->count < MDR_WALK_READS) {               \
                    log->addr[log->count] = fp_from;             \
                    log->value[log->count++] = fp;               \
                } else {                                         \
                    log->overflow = 1;                           \
                }                                                \
                fp_from = 0;                                     \
            }                                                    \
        }                                                        \
    } while (0)

int mdr_unwind(uintptr_t *out, int max, uintptr_t pc, uintptr_t sp, uintptr_t fp,
               const struct mdr_stack_bounds *b, struct mdr_walk_log *log, int *partial)
{
    if (MDR_UNLIKELY(rule_cache == NULL)) {
        rule_cache = mdr_map(sizeof(struct cache_entry) << CACHE_BITS);
        if (rule_cache == NULL)
            return 0;
    }
    int n = 0;
    int exact = 0;
    int fp_initial = 1;  /* fp still holds the caller's rbp as it was at the call */
    uintptr_t fp_from = 0;  /* where fp was loaded from, while that read is not logged */
    if (log != NULL) {
        log->count = 0;
        log->overflow = 0;
        log->fp_used = 0;
    }
    if (max <= 0 || pc == 0)
        return 0;
    out[n++] = pc;
    while (n < max) {
        struct rule r = lookup(pc, exact);
        uintptr_t cfa;
        exact = 0;
        switch (r.kind) {
        case K_CFA:
            if (r.cfa_rbp)
                USE_FP();
            cfa = (r.cfa_rbp ? fp : sp) + (intptr_t)r.cfa_off;
            break;
        case K_CFA_DEREF:
            USE_FP();
            LOAD(cfa, fp + (intptr_t)r.cfa_off);
            break;
        case K_FP:
            USE_FP();
            *partial = 1;  /* a frame-pointer guess, as GDB's heuristics would make */
            if (fp <= sp)
                return n;
            LOAD(pc, fp + 8);
            sp = fp + 16;
            LOAD_FP(fp);
            goto next;
        case K_SIGNAL: {
            uintptr_t g = sp + UC_GREGS;
            LOAD_FP(g + 8 * 10);
            LOAD(pc, g + 8 * 16);
            LOAD(sp, g + 8 * 15);
            exact = 1;
            goto next;
        }
        case K_END:
            return n;
        default:
            *partial = 1;
            return n;
        }
        if (cfa <= sp) {
            *partial = 1;
            return n;
        }
        if (r.bp_saved)
            LOAD_FP(cfa + (intptr_t)r.bp_off);
        LOAD(pc, cfa - 8);
        sp = cfa;
    next:
        if (pc == 0)
            return n;
        out[n++] = pc;
    }
    return n;
}

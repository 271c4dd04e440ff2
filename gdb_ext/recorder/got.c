/* @brief Recording a process the recorder was loaded into after it started (docs/recorder.md, attach).
 *
 * Loaded by dlopen (RTLD_LOCAL) into a running process, the recorder's malloc & co interpose
 * nothing: every module already resolved its calls to the C library's. This file redirects them:
 * for each loaded module (not the recorder, not the loader) it reads the dynamic section, and
 * each R_X86_64_JUMP_SLOT or R_X86_64_GLOB_DAT relocation naming a hooked function gets the
 * recorder's hook written into its GOT slot (the page made writable for the write when it is in
 * the module's RELRO segment). The C library's own calls (strdup, fopen) go through its GOT as
 * well. dlopen is hooked the same way, so that the modules loaded later are redirected too.
 * With lock counting on (`set memdump locks on`, the lock table's `enabled` written before this
 * runs), the pthread lock calls are redirected to locks.c's hooks the same way.
 *
 * Nothing is ever put back: once GDB disables the recorder (state DISABLED) the hooks call the
 * real functions straight away, and the process goes on with the recorder loaded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "locks.h"
#include "recorder.h"

/* locks.c: the lock hooks by name, redirected while lock counting is on */
extern MDR_HIDDEN const struct mdr_hook mdr_lock_hooks[];
extern MDR_HIDDEN const int mdr_lock_hook_count;

#define EXPORT __attribute__((visibility("default")))
#define MAX_MODULES 1024

/* Modules already redirected, by load address and dynamic section: a later call does the new
 * ones only. Cleared when modules were unloaded (their addresses may be reused). */
static struct {
    uintptr_t base, dynamic;
} done[MAX_MODULES];
static int done_count;
static unsigned long long seen_subs;
static int done_locks;  /* the modules done were redirected with the lock hooks */
static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;

struct patch_state {
    uintptr_t self_lo, self_hi;  /* the recorder's control block lies in its own module */
    uintptr_t page;              /* sysconf(_SC_PAGESIZE) */
    int slots, modules;
};

/* recorder.c's hooks, by hidden aliases: a reference to `malloc` here would resolve to the C
 * library's when the recorder is loaded RTLD_LOCAL. */
#define HOOK(name) extern __typeof(name) mdr_real_hook_##name __attribute__((visibility("hidden")))
HOOK(malloc);
HOOK(calloc);
HOOK(realloc);
HOOK(reallocarray);
HOOK(free);
HOOK(posix_memalign);
HOOK(aligned_alloc);
HOOK(memalign);
HOOK(valloc);
HOOK(pvalloc);
HOOK(dlclose);

static const struct mdr_hook mdr_hooks[] = {
    {"malloc", (const void *)mdr_real_hook_malloc},
    {"calloc", (const void *)mdr_real_hook_calloc},
    {"realloc", (const void *)mdr_real_hook_realloc},
    {"reallocarray", (const void *)mdr_real_hook_reallocarray},
    {"free", (const void *)mdr_real_hook_free},
    {"posix_memalign", (const void *)mdr_real_hook_posix_memalign},
    {"aligned_alloc", (const void *)mdr_real_hook_aligned_alloc},
    {"memalign", (const void *)mdr_real_hook_memalign},
    {"valloc", (const void *)mdr_real_hook_valloc},
    {"pvalloc", (const void *)mdr_real_hook_pvalloc},
    {"dlopen", (const void *)mdr_dlopen_hook},
    {"dlclose", (const void *)mdr_real_hook_dlclose},
};
static const int mdr_hook_count = (int)(sizeof mdr_hooks / sizeof mdr_hooks[0]);

static const void *hook_for(const char *name)
{
    for (int i = 0; i < mdr_hook_count; i++)
        if (strcmp(mdr_hooks[i].name, name) == 0)
            return mdr_hooks[i].fn;
    if (name[0] == '_' && name[1] == 'Z')  /* the C++ operators (cxx.c) */
        for (int i = 0; i < mdr_cxx_hook_count; i++)
            if (strcmp(mdr_cxx_hooks[i].name, name) == 0)
                return mdr_cxx_hooks[i].fn;
    if (strncmp(name, "exec", 4) == 0 || strcmp(name, "fexecve") == 0)  /* exec.c */
        for (int i = 0; i < mdr_exec_hook_count; i++)
            if (strcmp(mdr_exec_hooks[i].name, name) == 0)
                return mdr_exec_hooks[i].fn;
    if (done_locks && strncmp(name, "pthread_", 8) == 0)  /* the lock calls (locks.c) */
        for (int i = 0; i < mdr_lock_hook_count; i++)
            if (strcmp(mdr_lock_hooks[i].name, name) == 0)
                return mdr_lock_hooks[i].fn;
    return NULL;
}

static int is_loader(const char *name)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    return strncmp(base, "ld-linux", 8) == 0 || strncmp(base, "ld.so", 5) == 0 ||
           strncmp(base, "ld64.so", 7) == 0;
}

static inline uintptr_t dyn_ptr(uintptr_t value, uintptr_t base)
{
    /* The loader relocates most modules' dynamic entries in place; not every one (the vDSO). */
    return value >= base ? value : value + base;
}

static int write_slot(uintptr_t *slot, const void *value, uintptr_t relro_lo, uintptr_t relro_hi,
                      uintptr_t pagesize)
{
    if (*slot == (uintptr_t)value)
        return 0;
    uintptr_t at = (uintptr_t)slot;
    int protect = at >= relro_lo && at < relro_hi;
    uintptr_t page = at & ~(pagesize - 1);
    if (protect && mprotect((void *)page, pagesize, PROT_READ | PROT_WRITE) != 0)
        return -1;
    __atomic_store_n(slot, (uintptr_t)value, __ATOMIC_RELEASE);
    if (protect)
        mprotect((void *)page, pagesize, PROT_READ);
    return 1;
}

static void patch_relocs(const ElfW(Rela) *r, size_t bytes, uintptr_t base, const ElfW(Sym) *symtab,
                         const char *strtab, uintptr_t relro_lo, uintptr_t relro_hi,
                         struct patch_state *st)
{
    for (size_t i = 0; i < bytes / sizeof *r; i++) {
        unsigned long type = ELF64_R_TYPE(r[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
            continue;
        unsigned long sym = ELF64_R_SYM(r[i].r_info);
        if (sym == 0)
            continue;
        const void *hook = hook_for(strtab + symtab[sym].st_name);
        if (hook == NULL)
            continue;
        if (write_slot((uintptr_t *)(base + r[i].r_offset), hook, relro_lo, relro_hi,
                       st->page) > 0)
            st->slots++;
    }
}

static int patch_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct patch_state *st = data;
    uintptr_t base = info->dlpi_addr;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const ElfW(Dyn) *dynamic = NULL;
    uintptr_t relro_lo = 0, relro_hi = 0, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            dynamic = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        else if (ph->p_type == PT_GNU_RELRO) {
            /* the pages the loader made read-only: its end rounded down (the rest of the last
             * page stays writable, and must stay so) */
            relro_lo = (base + ph->p_vaddr) & ~(st->page - 1);
            relro_hi = (base + ph->p_vaddr + ph->p_memsz) & ~(st->page - 1);
        } else if (ph->p_type == PT_LOAD) {
            if (base + ph->p_vaddr < lo)
                lo = base + ph->p_vaddr;
            if (base + ph->p_vaddr + ph->p_memsz > hi)
                hi = base + ph->p_vaddr + ph->p_memsz;
        }
    }
    if (dynamic == NULL || is_loader(name) || strncmp(name, "linux-vdso", 10) == 0 ||
        (st->self_lo >= lo && st->self_lo < hi))
        return 0;
    for (int i = 0; i < done_count; i++)
        if (done[i].base == base && done[i].dynamic == (uintptr_t)dynamic)
            return 0;
    uintptr_t jmprel = 0, rela = 0, symtab = 0, strtab = 0;
    size_t pltrelsz = 0, relasz = 0;
    for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_JMPREL: jmprel = dyn_ptr(d->d_un.d_ptr, base); break;
        case DT_PLTRELSZ: pltrelsz = d->d_un.d_val; break;
        case DT_RELA: rela = dyn_ptr(d->d_un.d_ptr, base); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        case DT_SYMTAB: symtab = dyn_ptr(d->d_un.d_ptr, base); break;
        case DT_STRTAB: strtab = dyn_ptr(d->d_un.d_ptr, base); break;
        default: break;
        }
    }
    if (symtab == 0 || strtab == 0)
        return 0;
    const ElfW(Sym) *syms = (const ElfW(Sym) *)symtab;
    if (jmprel)
        patch_relocs((const ElfW(Rela) *)jmprel, pltrelsz, base, syms, (const char *)strtab,
                     relro_lo, relro_hi, st);
    if (rela)
        patch_relocs((const ElfW(Rela) *)rela, relasz, base, syms, (const char *)strtab,
                     relro_lo, relro_hi, st);
    if (done_count < MAX_MODULES) {
        done[done_count].base = base;
        done[done_count].dynamic = (uintptr_t)dynamic;
        done_count++;
    }
    st->modules++;
    return 0;
}

static int count_subs(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_subs;
    return 1;
}

/* Redirect the allocator calls of every module loaded and not redirected yet: returns how many
 * GOT slots were written. GDB reads the total in the control block (`patched`). */
EXPORT int memdump_recorder_patch_all(void)
{
    struct patch_state st = {0};
    st.self_lo = (uintptr_t)&memdump_recorder_control;
    long page = sysconf(_SC_PAGESIZE);
    st.page = page > 0 ? (uintptr_t)page : 4096;
    pthread_mutex_lock(&patch_lock);
    unsigned long long subs = 0;
    dl_iterate_phdr(count_subs, &subs);
    if (subs != seen_subs) {  /* modules were unloaded since: look at every one again */
        done_count = 0;
        seen_subs = subs;
    }
    const int locks = __atomic_load_n(&memdump_recorder_locks.enabled, __ATOMIC_RELAXED) != 0;
    if (locks && !done_locks)  /* counting turned on since: the lock calls of every module */
        done_count = 0;
    done_locks |= locks;
    dl_iterate_phdr(patch_module, &st);
    memdump_recorder_control.patched += (uint64_t)st.slots;
    memdump_recorder_control.patched_modules += (uint64_t)st.modules;
    pthread_mutex_unlock(&patch_lock);
    return st.slots;
}

/* dlopen, as the redirected modules call it: the new module (and its dependencies) are
 * redirected before it is handed back. */
MDR_HIDDEN void *mdr_dlopen_hook(const char *file, int mode)
{
    static void *(*real_dlopen)(const char *, int);
    if (real_dlopen == NULL)
        real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_DEFAULT, "dlopen");
    void *handle = real_dlopen(file, mode);
    if (handle != NULL && memdump_recorder_control.attach)
        memdump_recorder_patch_all();
    return handle;
}

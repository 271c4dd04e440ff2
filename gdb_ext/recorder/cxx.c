/* The C++ operators, interposed: libstdc++'s operator new and operator delete in every form
 * (docs/recorder.md, "C++ operators"; docs/dump-format.md 2.1).
 *
 * Each form is defined here under its mangled name (a valid C identifier, C linkage) and records
 * one `new`, `new[]`, `delete` or `delete[]` event at the outermost hooked call of its thread, as
 * recorder.c's hooks do: the malloc, free and operator calls libstdc++ makes inside (operator
 * new[] jumps to operator new, which calls malloc; operator delete[] to operator delete, which
 * calls free) find the thread's in-call flag set and pass through. The real functions are looked
 * up when first called (a C program may dlopen a C++ library later): dlsym(RTLD_NEXT), else in
 * libstdc++.so.6 when it is loaded where RTLD_NEXT does not look (a library dlopen'ed RTLD_LOCAL,
 * or the recorder itself loaded into a running process).
 *
 * Exceptions: operator new throws std::bad_alloc, and an exception unwinding through a hook
 * would leave the thread's state set (its in-call flag, its in-flight slot). So the throwing
 * forms call the real *nothrow* form of their operator (libstdc++'s catches what its throwing
 * form throws: that call comes back here nested, and passes through), record its result,
 * clear the thread's state, and only then, when it was NULL, throw std::bad_alloc with
 * libstdc++'s own std::__throw_bad_alloc(), from a frame with nothing left to clean up. No
 * exception crosses a hook while the thread's state is set, so this file needs no -fexceptions
 * (unwinding through a C frame needs only its CFI, which GCC emits by default). The deletes are
 * noexcept: their event is written before the block is released (free's rule: another thread's
 * new may get the same address at once).
 *
 * The direct path: libstdc++'s operators are the C library's calls and nothing more (new:
 * malloc(size ? size : 1), new_handler only when it fails; aligned new: aligned_alloc of the size
 * rounded up to the alignment; every delete: free). When every real form is libstdc++'s and its
 * calls of malloc, free and aligned_alloc reach the recorder's hooks, a recorded operator makes
 * that call itself, without the nested hooks it would go through (each a thread look-up and a
 * counter); a new whose call fails takes the real nothrow form (the new_handler loop, the
 * bad_alloc), as every operator does when the real ones are another library's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

#define EXPORT __attribute__((visibility("default")))

/* the real functions, by index: the forms of new, then the forms of delete */
enum {
    NW, NW_NT, NW_AL, NW_AL_NT, NA, NA_NT, NA_AL, NA_AL_NT,
    DL, DL_SZ, DL_NT, DL_AL, DL_SZ_AL, DL_AL_NT,
    DA, DA_SZ, DA_NT, DA_AL, DA_SZ_AL, DA_AL_NT,
    THROW_BAD_ALLOC, REAL_COUNT
};
static const char *const real_names[REAL_COUNT] = {
    "_Znwm", "_ZnwmRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_Znam", "_ZnamRKSt9nothrow_t", "_ZnamSt11align_val_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdlPvm", "_ZdlPvRKSt9nothrow_t", "_ZdlPvSt11align_val_t", "_ZdlPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPv", "_ZdaPvm", "_ZdaPvRKSt9nothrow_t", "_ZdaPvSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
    "_ZSt17__throw_bad_allocv",
};
static void *real_fns[REAL_COUNT];

/* std::nothrow: libstdc++'s nothrow forms take it by reference and never read it. */
static const char nothrow_tag;

static int is_hook(const void *fn);

/* The real function INDEX; NULL when no libstdc++ is loaded (nothing then calls the hooks but a
 * module that defines the operators itself, which binds to its own). */
static void *real(int index)
{
    void *fn = __atomic_load_n(&real_fns[index], __ATOMIC_ACQUIRE);
    if (MDR_LIKELY(fn != NULL))
        return fn;
    fn = dlsym(RTLD_NEXT, real_names[index]);
    if (fn == NULL || is_hook(fn)) {
        /* kept open: dlclose is hooked (GDB stops there), and the reference costs nothing */
        void *lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
        fn = lib != NULL ? dlsym(lib, real_names[index]) : NULL;
        if (fn != NULL && is_hook(fn))
            fn = NULL;
    }
    if (fn != NULL)
        __atomic_store_n(&real_fns[index], fn, __ATOMIC_RELEASE);
    return fn;
}

/* 1: the direct path (above) is the operators' own; -1: it is not; 0: not known yet */
static int direct_state;

static int is_libstdcxx(const void *fn)
{
    Dl_info info;
    if (dladdr(fn, &info) == 0 || info.dli_fname == NULL)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    base = base != NULL ? base + 1 : info.dli_fname;
    return strncmp(base, "libstdc++.so", 12) == 0;
}

/* direct()'s first answer, out of line (its prologue, for the loop and the look-ups, was a
 * tenth of a recorded operator's cost when every call went through it) */
static __attribute__((noinline)) int direct_first(void)
{
    for (int i = 0; i < REAL_COUNT; i++)
        if (real(i) == NULL)
            return 0;  /* no libstdc++ yet (a C program): asked again at the next call */
    int d = mdr_allocator_hooked() ? 1 : -1;
    for (int i = 0; i < REAL_COUNT && d > 0; i++)
        if (!is_libstdcxx(real_fns[i]))
            d = -1;
    __atomic_store_n(&direct_state, d, __ATOMIC_RELEASE);
    return d > 0;
}

/* Whether a recorded operator may call the C library itself (inside a recorded call only: the
 * first answer looks the functions up, and their allocations must pass through). */
static inline int direct(void)
{
    int d = __atomic_load_n(&direct_state, __ATOMIC_ACQUIRE);
    if (MDR_LIKELY(d != 0))
        return d > 0;
    return direct_first();
}

/* The size libstdc++'s new of SIZE (aligned to ALIGN when ALIGNED) asks the C library for, and
 * in *AL the alignment (0: malloc); 0 when the alignment is not a power of two or the size
 * overflows (the real form then decides: new_handler, bad_alloc) */
static size_t direct_size(size_t size, size_t align, int aligned, size_t *al)
{
    size_t n = size != 0 ? size : 1;
    *al = 0;
    if (!aligned)
        return n;
    if (align == 0 || (align & (align - 1)) != 0 || n > SIZE_MAX - (align - 1))
        return 0;
    *al = align;
    return (n + align - 1) & ~(align - 1);
}

typedef void *(*new_fn)(size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void *(*new_aligned_fn)(size_t, size_t);
typedef void *(*new_aligned_nothrow_fn)(size_t, size_t, const void *);
typedef void (*delete_fn)(void *);
typedef void (*delete_sized_fn)(void *, size_t);
typedef void (*delete_nothrow_fn)(void *, const void *);
typedef void (*delete_aligned_nothrow_fn)(void *, size_t, const void *);
typedef void (*delete_sized_aligned_fn)(void *, size_t, size_t);

/* A failed throwing new, its event written and the thread's state clear: throw as it would. */
static void throw_bad_alloc(void)
{
    void (*thrower)(void) = (void (*)(void))real(THROW_BAD_ALLOC);
    if (thrower != NULL)
        thrower();  /* [[noreturn]] */
    abort();
}

/* The real form INDEX of a new (SIZE; ALIGN when ALIGNED; NOTHROW: it takes std::nothrow), or
 * the C library's allocation when no libstdc++ is loaded. */
static void *real_new(int index, size_t size, size_t align, int aligned, int nothrow)
{
    void *fn = real(index);
    if (MDR_UNLIKELY(fn == NULL))
        return aligned ? aligned_alloc(align, (size + align - 1) & ~(align - 1)) : malloc(size);
    if (aligned)
        return nothrow ? ((new_aligned_nothrow_fn)fn)(size, align, &nothrow_tag)
                       : ((new_aligned_fn)fn)(size, align);
    return nothrow ? ((new_nothrow_fn)fn)(size, &nothrow_tag) : ((new_fn)fn)(size);
}

/* One new of OP by the hook whose frame is FRAME, recorded: the real nothrow form NOTHROW_INDEX
 * makes the block; THROWING: the hooked form throws std::bad_alloc when it failed, once the
 * thread's state is clear. */
static void *record_new(struct mdr_thread *t, enum mdr_op op, int nothrow_index, size_t size,
                        size_t align, int aligned, int throwing, const void *frame)
{
    struct mdr_call c = {.op = op, .args = {size, 0, 0}};
    size_t al, n = direct_size(size, align, aligned, &al);
    void *r = NULL;
    if (n != 0 && direct()) {
        r = mdr_hook_new(t, &c, frame, al, n);  /* the block, its event written: over */
        if (MDR_LIKELY(r != NULL))
            return r;
    } else {
        mdr_hook_begin(t, &c, frame);
    }
    r = real_new(nothrow_index, size, align, aligned, 1);
    mdr_hook_write(t, &c, (uint64_t)(uintptr_t)r);
    mdr_hook_leave(t);
    if (r == NULL && throwing)
        throw_bad_alloc();
    return r;
}

/* The hooks' own names are hidden (got.c takes their addresses: a reference to `_Znwm` would
 * bind to libstdc++'s when the recorder is loaded RTLD_LOCAL); the mangled names are aliases. */
#define EXPORT_AS(name) \
    extern __typeof(mdr_hook##name) name __attribute__((alias("mdr_hook" #name), EXPORT_VISIBLE))
#define EXPORT_VISIBLE visibility("default")

/* operator new in form NAME (PARAMS), recorded as OP through the real nothrow form NT; INDEX:
 * its own real form, for a nested call (ALIGN, NOTHROW as real_new) */
#define NEW_HOOK(name, OP, index, NT, aligned, nothrow, PARAMS, align)                   \
    MDR_HIDDEN void *mdr_hook##name PARAMS                                               \
    {                                                                                    \
        struct mdr_thread *t = mdr_hook_enter();                                         \
        if (t == NULL) {                                                                 \
            void *r = real_new(index, size, align, aligned, nothrow);                   \
            if (MDR_UNLIKELY(r == NULL && !nothrow && real(index) == NULL))              \
                throw_bad_alloc();                                                       \
            return r;                                                                    \
        }                                                                                \
        return record_new(t, OP, NT, size, align, aligned, !nothrow,                     \
                          __builtin_frame_address(0));                                   \
    }                                                                                    \
    EXPORT_AS(name)

#define UNUSED __attribute__((unused))
#define NEW_FORMS(N, OP, plain, nothrow, aligned, aligned_nothrow)                            \
    NEW_HOOK(N, OP, plain, nothrow, 0, 0, (size_t size), 0);                                  \
    NEW_HOOK(N##RKSt9nothrow_t, OP, nothrow, nothrow, 0, 1,                                   \
             (size_t size, const void *nt UNUSED), 0);                                        \
    NEW_HOOK(N##St11align_val_t, OP, aligned, aligned_nothrow, 1, 0, (size_t size, size_t al), \
             al);                                                                             \
    NEW_HOOK(N##St11align_val_tRKSt9nothrow_t, OP, aligned_nothrow, aligned_nothrow, 1, 1,    \
             (size_t size, size_t al, const void *nt UNUSED), al)

NEW_FORMS(_Znwm, MDR_NEW, NW, NW_NT, NW_AL, NW_AL_NT);
NEW_FORMS(_Znam, MDR_NEW_ARRAY, NA, NA_NT, NA_AL, NA_AL_NT);

/* operator delete in form NAME (PARAMS), recorded as OP, then released by free on the direct
 * path, else by its real form INDEX of type TYPE called with ARGS (free when no libstdc++ is
 * loaded); the thread's flag stays set across the real call, so that the free inside passes
 * through */
#define DELETE_HOOK(name, OP, index, PARAMS, TYPE, ARGS)                                 \
    MDR_HIDDEN void mdr_hook##name PARAMS                                                \
    {                                                                                    \
        struct mdr_thread *t = mdr_hook_enter();                                         \
        if (t != NULL) {                                                                 \
            struct mdr_call c = {.op = OP, .args = {(uint64_t)(uintptr_t)ptr, 0, 0}};    \
            if (direct()) {                                                              \
                mdr_hook_delete(t, &c, __builtin_frame_address(0));                      \
                return;                                                                  \
            }                                                                            \
            mdr_hook_begin(t, &c, __builtin_frame_address(0));                           \
            mdr_hook_write(t, &c, 0);                                                    \
        }                                                                                \
        void *fn = real(index);                                                          \
        if (MDR_LIKELY(fn != NULL))                                                      \
            ((TYPE)fn) ARGS;                                                             \
        else                                                                             \
            free(ptr);                                                                   \
        if (t != NULL)                                                                   \
            mdr_hook_leave(t);                                                           \
    }                                                                                    \
    EXPORT_AS(name)

#define DELETE_FORMS(D, OP, plain, sized, nothrow, aligned, sized_aligned, aligned_nothrow)  \
    DELETE_HOOK(D##Pv, OP, plain, (void *ptr), delete_fn, (ptr));                            \
    DELETE_HOOK(D##Pvm, OP, sized, (void *ptr, size_t size), delete_sized_fn, (ptr, size));  \
    DELETE_HOOK(D##PvRKSt9nothrow_t, OP, nothrow, (void *ptr, const void *nt),              \
                delete_nothrow_fn, (ptr, nt));                                              \
    DELETE_HOOK(D##PvSt11align_val_t, OP, aligned, (void *ptr, size_t al), delete_sized_fn, \
                (ptr, al));                                                                 \
    DELETE_HOOK(D##PvmSt11align_val_t, OP, sized_aligned, (void *ptr, size_t size, size_t al), \
                delete_sized_aligned_fn, (ptr, size, al));                                  \
    DELETE_HOOK(D##PvSt11align_val_tRKSt9nothrow_t, OP, aligned_nothrow,                    \
                (void *ptr, size_t al, const void *nt), delete_aligned_nothrow_fn, (ptr, al, nt))

DELETE_FORMS(_Zdl, MDR_DELETE, DL, DL_SZ, DL_NT, DL_AL, DL_SZ_AL, DL_AL_NT);
DELETE_FORMS(_Zda, MDR_DELETE_ARRAY, DA, DA_SZ, DA_NT, DA_AL, DA_SZ_AL, DA_AL_NT);

#define HOOK_ENTRY(name) {#name, (const void *)mdr_hook##name}
MDR_HIDDEN const struct mdr_hook mdr_cxx_hooks[] = {
    HOOK_ENTRY(_Znwm), HOOK_ENTRY(_ZnwmRKSt9nothrow_t), HOOK_ENTRY(_ZnwmSt11align_val_t),
    HOOK_ENTRY(_ZnwmSt11align_val_tRKSt9nothrow_t),
    HOOK_ENTRY(_Znam), HOOK_ENTRY(_ZnamRKSt9nothrow_t), HOOK_ENTRY(_ZnamSt11align_val_t),
    HOOK_ENTRY(_ZnamSt11align_val_tRKSt9nothrow_t),
    HOOK_ENTRY(_ZdlPv), HOOK_ENTRY(_ZdlPvm), HOOK_ENTRY(_ZdlPvRKSt9nothrow_t),
    HOOK_ENTRY(_ZdlPvSt11align_val_t), HOOK_ENTRY(_ZdlPvmSt11align_val_t),
    HOOK_ENTRY(_ZdlPvSt11align_val_tRKSt9nothrow_t),
    HOOK_ENTRY(_ZdaPv), HOOK_ENTRY(_ZdaPvm), HOOK_ENTRY(_ZdaPvRKSt9nothrow_t),
    HOOK_ENTRY(_ZdaPvSt11align_val_t), HOOK_ENTRY(_ZdaPvmSt11align_val_t),
    HOOK_ENTRY(_ZdaPvSt11align_val_tRKSt9nothrow_t),
};
MDR_HIDDEN const int mdr_cxx_hook_count = (int)(sizeof mdr_cxx_hooks / sizeof mdr_cxx_hooks[0]);

static int is_hook(const void *fn)
{
    for (int i = 0; i < mdr_cxx_hook_count; i++)
        if (mdr_cxx_hooks[i].fn == fn)
            return 1;
    return 0;
}

/* @brief The C++ operators, interposed: libstdc++'s operator new and operator delete in every form
 * (docs/recorder.md, "C++ operators"; docs/dump-format.md 2.1).
 *
 * Each form is defined in recorder.c under its mangled name (a valid C identifier, C linkage),
 * where the direct path (below) is inline; this file has every other way of a call: it records
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
 * counter): recorder.c's entry points do, inline, once this file has found the path is theirs
 * (mdr_cxx_direct); a new whose call fails takes the real nothrow form (the new_handler loop,
 * the bad_alloc, mdr_cxx_new_failed), as every operator does when the real ones are another
 * library's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"

/* the real functions, by index (recorder.h: MDR_NW ...) */
static const char *const real_names[MDR_CXX_REAL_COUNT] = {
    "_Znwm", "_ZnwmRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_Znam", "_ZnamRKSt9nothrow_t", "_ZnamSt11align_val_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv", "_ZdlPvm", "_ZdlPvRKSt9nothrow_t", "_ZdlPvSt11align_val_t", "_ZdlPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPv", "_ZdaPvm", "_ZdaPvRKSt9nothrow_t", "_ZdaPvSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
    "_ZSt17__throw_bad_allocv",
};
static void *real_fns[MDR_CXX_REAL_COUNT];

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

/* recorder.h */
MDR_HIDDEN int mdr_cxx_direct;

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
    for (int i = 0; i < MDR_CXX_REAL_COUNT; i++)
        if (real(i) == NULL)
            return 0;  /* no libstdc++ yet (a C program): asked again at the next call */
    int d = mdr_allocator_hooked() ? 1 : -1;
    for (int i = 0; i < MDR_CXX_REAL_COUNT && d > 0; i++)
        if (!is_libstdcxx(real_fns[i]))
            d = -1;
    __atomic_store_n(&mdr_cxx_direct, d, __ATOMIC_RELEASE);
    return d > 0;
}

/* Whether a recorded operator may call the C library itself (inside a recorded call only: the
 * first answer looks the functions up, and their allocations must pass through). */
static inline int direct(void)
{
    int d = __atomic_load_n(&mdr_cxx_direct, __ATOMIC_ACQUIRE);
    if (MDR_LIKELY(d != 0))
        return d > 0;
    return direct_first();
}

typedef void *(*new_fn)(size_t);
typedef void *(*new_nothrow_fn)(size_t, const void *);
typedef void *(*new_aligned_fn)(size_t, size_t);
typedef void *(*new_aligned_nothrow_fn)(size_t, size_t, const void *);
typedef void (*delete_fn)(void *);
typedef void (*delete_sized_fn)(void *, size_t);
typedef void (*delete_sized_aligned_fn)(void *, size_t, size_t);

/* A failed throwing new, its event written and the thread's state clear: throw as it would. */
static void throw_bad_alloc(void)
{
    void (*thrower)(void) = (void (*)(void))real(MDR_THROW_BAD_ALLOC);
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

/* A recorded new of FORM (SIZE, ALIGN), its stack walked into C: the real nothrow form makes the
 * block, the event is written, the call is over, and a throwing form throws std::bad_alloc when
 * it failed, the thread's state clear. */
MDR_HIDDEN void *mdr_cxx_new_failed(struct mdr_thread *t, struct mdr_call *c, int form,
                                    size_t size, size_t align)
{
    void *r = real_new(form | 1, size, align, form & 2, 1);
    mdr_hook_write(t, c, (uint64_t)(uintptr_t)r);
    mdr_hook_leave(t);
    if (r == NULL && !(form & 1))
        throw_bad_alloc();
    return r;
}

MDR_HIDDEN void *mdr_cxx_new(struct mdr_thread *t, int form, size_t size, size_t align,
                             const void *frame)
{
    int aligned = form & 2, nothrow = form & 1;
    if (t == NULL) {
        void *r = real_new(form, size, align, aligned, nothrow);
        if (MDR_UNLIKELY(r == NULL && !nothrow && real(form) == NULL))
            throw_bad_alloc();
        return r;
    }
    direct();  /* found out here, inside a recorded call: its look-ups' allocations pass through */
    struct mdr_call c = {.op = form >= MDR_NA ? MDR_NEW_ARRAY : MDR_NEW, .args = {size, 0, 0}};
    mdr_hook_begin(t, &c, frame);
    return mdr_cxx_new_failed(t, &c, form, size, align);
}

MDR_HIDDEN void mdr_cxx_delete(struct mdr_thread *t, int form, void *ptr, uintptr_t a1,
                               uintptr_t a2, const void *frame)
{
    if (t != NULL) {
        direct();
        struct mdr_call c = {.op = form >= MDR_DA ? MDR_DELETE_ARRAY : MDR_DELETE,
                             .args = {(uint64_t)(uintptr_t)ptr, 0, 0}};
        mdr_hook_begin(t, &c, frame);
        mdr_hook_write(t, &c, 0);
    }
    /* the thread's flag stays set across the real call: the free inside passes through */
    void *fn = real(form);
    if (MDR_UNLIKELY(fn == NULL))
        free(ptr);
    else if ((form - MDR_DL) % 6 == 0)  /* plain */
        ((delete_fn)fn)(ptr);
    else if ((form - MDR_DL) % 6 < 4)  /* sized, nothrow, aligned */
        ((delete_sized_fn)fn)(ptr, a1);
    else  /* sized aligned, aligned nothrow */
        ((delete_sized_aligned_fn)fn)(ptr, a1, a2);
    if (t != NULL)
        mdr_hook_leave(t);
}

static int is_hook(const void *fn)
{
    for (int i = 0; i < mdr_cxx_hook_count; i++)
        if (mdr_cxx_hooks[i].fn == fn)
            return 1;
    return 0;
}

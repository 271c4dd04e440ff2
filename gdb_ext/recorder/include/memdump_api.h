/* memdump_api.h: a custom allocator reports its objects to memdump (docs/recorder.md).
 *
 *     MEMDUMP_ALLOC(ptr, size)   the pool handed out the object PTR of SIZE bytes
 *     MEMDUMP_FREE(ptr)          the pool took the object PTR back
 *
 * memdump then treats the objects like blocks of malloc: a leaked object is reported with the
 * stack of its MEMDUMP_ALLOC, and the malloc'd block a pool carves its objects from (its
 * superblock) is left out of the leak check while it holds live objects (docs/dump-format.md,
 * "Custom blocks"), as valgrind does for VALGRIND_MALLOCLIKE_BLOCK and mempools.
 *
 * Header only, C and C++, no dependency, nothing to link. Without memdump the macros cost one
 * test of a weak symbol's address and one call to an empty function.
 *
 * How both of memdump's recorders see the calls:
 * - in-process: the preloaded recorder (libmemdump_recorder.so) defines memdump_api_alloc and
 *   memdump_api_free. They are declared weak here, so that a program runs without the recorder
 *   (their address is then null); when the loader found them, the macros call them.
 * - breakpoints (memdump --breakpoints): nothing is preloaded, or the recorder is but does not
 *   record. The macros call memdump_api_alloc_hook / memdump_api_free_hook instead (or the
 *   recorder's functions, which then do nothing): empty functions defined here, weak (so that
 *   every program and library that includes this header holds one, and the linker keeps one
 *   per module; a weak definition may be replaced, so the compiler never inlines nor elides
 *   the call) and noinline. GDB puts its breakpoints on these four names, wherever a module's
 *   symbol table (.dynsym, or .symtab: an executable exports nothing without -rdynamic)
 *   defines them.
 * The call is in the macro itself, so that the recorded stack begins in the function that
 * invokes MEMDUMP_ALLOC / MEMDUMP_FREE, at its line, at every optimisation level.
 *
 * Both symbols are declared with default visibility: a library built with -fvisibility=hidden
 * must still look the recorder's up at run time (a hidden weak undefined symbol is null for
 * good). A non-PIE executable (-no-pie) resolves an undefined weak symbol to null at link time:
 * there, only the breakpoint recorder sees the calls; PIE, the default, works with both.
 */
#ifndef MEMDUMP_API_H
#define MEMDUMP_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(__ELF__)

#define MEMDUMP_API_VISIBLE __attribute__((visibility("default")))

/* The in-process recorder's (weak: null without it). */
MEMDUMP_API_VISIBLE __attribute__((weak)) void memdump_api_alloc(void *ptr, size_t size);
MEMDUMP_API_VISIBLE __attribute__((weak)) void memdump_api_free(void *ptr);

/* The breakpoint recorder's: empty, never inlined nor folded into one another. */
MEMDUMP_API_VISIBLE __attribute__((weak, noinline, used))
void memdump_api_alloc_hook(void *ptr, size_t size);
MEMDUMP_API_VISIBLE __attribute__((weak, noinline, used))
void memdump_api_free_hook(void *ptr);

MEMDUMP_API_VISIBLE __attribute__((weak, noinline, used))
void memdump_api_alloc_hook(void *ptr, size_t size)
{
    __asm__ volatile("" : : "r"(ptr), "r"(size) : "memory");
}

MEMDUMP_API_VISIBLE __attribute__((weak, noinline, used))
void memdump_api_free_hook(void *ptr)
{
    __asm__ volatile("" : : "r"(ptr) : "memory");
}

#define MEMDUMP_ALLOC(ptr, size)                                              \
    do {                                                                      \
        void *memdump_p_ = (void *)(ptr);                                     \
        size_t memdump_n_ = (size_t)(size);                                   \
        if (memdump_api_alloc)                                                \
            memdump_api_alloc(memdump_p_, memdump_n_);                        \
        else                                                                  \
            memdump_api_alloc_hook(memdump_p_, memdump_n_);                   \
    } while (0)

#define MEMDUMP_FREE(ptr)                                                     \
    do {                                                                      \
        void *memdump_p_ = (void *)(ptr);                                     \
        if (memdump_api_free)                                                 \
            memdump_api_free(memdump_p_);                                     \
        else                                                                  \
            memdump_api_free_hook(memdump_p_);                                \
    } while (0)

#else /* neither GCC nor Clang, or not ELF: memdump cannot record there */

#define MEMDUMP_ALLOC(ptr, size) do { (void)(ptr); (void)(size); } while (0)
#define MEMDUMP_FREE(ptr) do { (void)(ptr); } while (0)

#endif

#ifdef __cplusplus
}
#endif

#endif /* MEMDUMP_API_H */

/* @brief A custom allocator reports its objects to memdump (docs/recorder.md).
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
 * The four symbols have default visibility: a library built with -fvisibility=hidden must still
 * look the recorder's up at run time (a hidden weak undefined symbol is null for good) and show
 * its hooks in .dynsym. The macros load the recorder's address from the GOT, which the loader
 * fills (on x86-64 with an explicit GOTPCREL load: code built with -fno-pie would use the null
 * address the linker gave the undefined weak symbol). Checked with PIE and -no-pie
 * executables, -O0 and -O2, and a -fvisibility=hidden shared library (tests/programs/pool_*,
 * tests/e2e/test_memdump_api.py). A statically linked
 * program cannot be recorded by memdump at all.
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

/* The address of the recorder's function SYM, from the GOT: code built with -fno-pie would
 * otherwise use the address the linker gave the undefined weak symbol, null, for good. */
#if defined(__x86_64__)
#define MEMDUMP_API_ADDRESS_(sym, var) \
    __asm__(".weak " #sym "\n\tmovq " #sym "@GOTPCREL(%%rip), %0" : "=r"(var))
#else
#define MEMDUMP_API_ADDRESS_(sym, var) ((var) = &sym)
#endif

#define MEMDUMP_ALLOC(ptr, size)                                              \
    do {                                                                      \
        void *memdump_p_ = (void *)(ptr);                                     \
        size_t memdump_n_ = (size_t)(size);                                   \
        void (*memdump_f_)(void *, size_t);                                   \
        MEMDUMP_API_ADDRESS_(memdump_api_alloc, memdump_f_);                  \
        if (memdump_f_)                                                       \
            memdump_f_(memdump_p_, memdump_n_);                               \
        else                                                                  \
            memdump_api_alloc_hook(memdump_p_, memdump_n_);                   \
    } while (0)

#define MEMDUMP_FREE(ptr)                                                     \
    do {                                                                      \
        void *memdump_p_ = (void *)(ptr);                                     \
        void (*memdump_f_)(void *);                                           \
        MEMDUMP_API_ADDRESS_(memdump_api_free, memdump_f_);                   \
        if (memdump_f_)                                                       \
            memdump_f_(memdump_p_);                                           \
        else                                                                  \
            memdump_api_free_hook(memdump_p_);                                \
    } while (0)

/* -- categories and phases ----------------------------------------------------------------
 *
 *     memdump_tag_push("physics"); ... memdump_tag_pop();   this thread's allocations in between
 *                                                           are tagged "physics" (the innermost
 *                                                           tag of the thread's stack of tags)
 *     MEMDUMP_TAG_SCOPE("physics");                         C++: pushed here, popped at the end
 *                                                           of the enclosing block
 *     MEMDUMP_PHASE("level 2");                             the whole process enters a phase
 *
 * Names are copied when recorded: any string will do. When memdump is not recording, each is one
 * load of this module's memdump_api_enabled and a branch not taken: memdump sets that variable
 * to 1 in every module that has it (it is in each module's symbol table) while it records, and
 * back to 0 when it stops. The calls then reach the in-process recorder (memdump_api_tag_push,
 * memdump_api_tag_pop, memdump_api_phase), or the empty hooks below, on which the breakpoint
 * recorder breaks. */
MEMDUMP_API_VISIBLE __attribute__((weak)) volatile int memdump_api_enabled;

MEMDUMP_API_VISIBLE __attribute__((weak)) void memdump_api_tag_push(const char *name);
MEMDUMP_API_VISIBLE __attribute__((weak)) void memdump_api_tag_pop(void);
MEMDUMP_API_VISIBLE __attribute__((weak)) void memdump_api_phase(const char *name);

MEMDUMP_API_VISIBLE __attribute__((weak, noinline, used))
void memdump_api_tag_push_hook(const char *name)
{
    __asm__ volatile("" : : "r"(name) : "memory");
}

MEMDUMP_API_VISIBLE __attribute__((weak, noinline, used))
void memdump_api_tag_pop_hook(void)
{
    __asm__ volatile("" : : : "memory");
}

MEMDUMP_API_VISIBLE __attribute__((weak, noinline, used))
void memdump_api_phase_hook(const char *name)
{
    __asm__ volatile("" : : "r"(name) : "memory");
}

static inline __attribute__((always_inline)) void memdump_tag_push(const char *name)
{
    if (__builtin_expect(memdump_api_enabled, 0)) {
        void (*f)(const char *);
        MEMDUMP_API_ADDRESS_(memdump_api_tag_push, f);
        if (f)
            f(name);
        else
            memdump_api_tag_push_hook(name);
    }
}

static inline __attribute__((always_inline)) void memdump_tag_pop(void)
{
    if (__builtin_expect(memdump_api_enabled, 0)) {
        void (*f)(void);
        MEMDUMP_API_ADDRESS_(memdump_api_tag_pop, f);
        if (f)
            f();
        else
            memdump_api_tag_pop_hook();
    }
}

#define MEMDUMP_PHASE(name)                                                   \
    do {                                                                      \
        if (__builtin_expect(memdump_api_enabled, 0)) {                       \
            const char *memdump_s_ = (name);                                  \
            void (*memdump_f_)(const char *);                                 \
            MEMDUMP_API_ADDRESS_(memdump_api_phase, memdump_f_);              \
            if (memdump_f_)                                                   \
                memdump_f_(memdump_s_);                                       \
            else                                                              \
                memdump_api_phase_hook(memdump_s_);                           \
        }                                                                     \
    } while (0)

#else /* neither GCC nor Clang, or not ELF: memdump cannot record there */

#define MEMDUMP_ALLOC(ptr, size) do { (void)(ptr); (void)(size); } while (0)
#define MEMDUMP_FREE(ptr) do { (void)(ptr); } while (0)
#define MEMDUMP_PHASE(name) do { (void)(name); } while (0)
static inline void memdump_tag_push(const char *name) { (void)name; }
static inline void memdump_tag_pop(void) {}

#endif

#ifdef __cplusplus
}

/* MEMDUMP_TAG_SCOPE("physics"): the enclosing block's allocations (this thread's) are tagged */
class memdump_tag_scope_ {
public:
    explicit memdump_tag_scope_(const char *name) { memdump_tag_push(name); }
    ~memdump_tag_scope_() { memdump_tag_pop(); }
    memdump_tag_scope_(const memdump_tag_scope_ &) = delete;
    memdump_tag_scope_ &operator=(const memdump_tag_scope_ &) = delete;
};
#define MEMDUMP_TAG_CAT2_(a, b) a##b
#define MEMDUMP_TAG_CAT_(a, b) MEMDUMP_TAG_CAT2_(a, b)
#define MEMDUMP_TAG_SCOPE(name) memdump_tag_scope_ MEMDUMP_TAG_CAT_(memdump_tag_, __LINE__)(name)
#endif

#endif /* MEMDUMP_API_H */

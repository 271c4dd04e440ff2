/* @brief The in-process recorder's internal interfaces (docs/recorder.md): the shared macros, the
 * region allocator (region.h), stacks, frames and live blocks (intern.c), the dump's window (out.c),
 * the record formatting (fmt.c) and the hooks' helpers. */
#ifndef MEMDUMP_RECORDER_H
#define MEMDUMP_RECORDER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "control.h"
#include "region.h"   /* memory the recorder allocates for itself (region.c) */

#define MDR_LIKELY(x) __builtin_expect(!!(x), 1)
#define MDR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MDR_HIDDEN __attribute__((visibility("hidden")))
/* inline in every hook, whatever GCC's unit-growth limits say (the C++ operators' inline entry
 * points took recorder.c past them, and the hooks' walk check, formatting and live-block
 * updates became calls) */
#define MDR_INLINE static inline __attribute__((always_inline))

extern struct mdr_control memdump_recorder_control;

/* -- unwind.c: stacks from .eh_frame, one cached rule per pc -- */
struct mdr_stack_bounds {
    uintptr_t lo, hi;            /* the thread's stack */
    uintptr_t alt_lo, alt_hi;    /* its signal stack, if any */
};
/* The stack words a walk read (addresses and values), when it read at most MDR_WALK_READS. */
#define MDR_WALK_READS 96
struct mdr_walk_log {
    int count, overflow;
    int fp_used;   /* the walk used the caller's rbp as it was at the call */
    uintptr_t addr[MDR_WALK_READS];
    uintptr_t value[MDR_WALK_READS];
};
/* Return addresses, innermost first: PC (where the hooked function returns to), then its
 * callers', walking from the caller's SP and FP. At most MAX; returns how many. LOG, when
 * given, gets every stack word read. *PARTIAL is set when the walk stopped on something it
 * could not walk (no CFI, unreadable stack) before the outermost frame or the limit. */
MDR_HIDDEN int mdr_unwind(uintptr_t *out, int max, uintptr_t pc, uintptr_t sp, uintptr_t fp,
                          const struct mdr_stack_bounds *bounds, struct mdr_walk_log *log,
                          int *partial);
/* ADDR's word lies in the thread's stack or signal stack. */
static inline int mdr_readable(const struct mdr_stack_bounds *b, uintptr_t addr)
{
    return (addr >= b->lo && addr + 8 <= b->hi) || (addr >= b->alt_lo && addr + 8 <= b->alt_hi);
}
/* The first MDR_WALK_FIXED entries of a log are always set: past its count they name a word that
 * holds 0 (mdr_walk_pad), so that the check reads them all without a loop. */
#define MDR_WALK_FIXED 8
extern MDR_HIDDEN const uintptr_t mdr_walk_zero;
static inline void mdr_walk_pad(struct mdr_walk_log *log)
{
    for (int i = log->count; i < MDR_WALK_FIXED; i++) {
        log->addr[i] = (uintptr_t)&mdr_walk_zero;
        log->value[i] = 0;
    }
}
/* Every word LOG recorded still holds its value: the walk is the same. Each address was checked
 * against the thread's stack bounds when the walk read it, and a thread's bounds are fixed from
 * its first heap call (thread_init), so they are not checked again: the loads are independent,
 * their differences ORed together and tested once, the first MDR_WALK_FIXED without a loop (a
 * walk of a few frames reads a word or two a frame; the bounds' compares and the loop's were
 * most of a cached walk's cost). Inline, as the generation below: both are on every event's
 * path. */
MDR_INLINE int mdr_walk_valid(const struct mdr_walk_log *log)
{
    uintptr_t diff = 0;
#pragma GCC unroll 8
    for (int i = 0; i < MDR_WALK_FIXED; i++)
        diff |= *(const uintptr_t *)log->addr[i] ^ log->value[i];
    for (int i = MDR_WALK_FIXED; i < log->count; i++)
        diff |= *(const uintptr_t *)log->addr[i] ^ log->value[i];
    return diff == 0;
}
/* recorder.c: this thread's stack bounds, as its allocations' walks use them (from
 * pthread_getattr_np and sigaltstack at its first heap call); 0 when the thread made no heap
 * call yet (nothing is made here: a lock hook may call it). */
MDR_HIDDEN int mdr_thread_bounds(struct mdr_stack_bounds *out);
/* Changes whenever cached unwind rules are dropped (modules unloaded). */
extern MDR_HIDDEN volatile uint64_t mdr_unwind_gen;
MDR_INLINE uint64_t mdr_unwind_generation(void)
{
    return mdr_unwind_gen;
}
/* Modules were loaded or unloaded: forget the module list and every cached rule. */
MDR_HIDDEN void mdr_unwind_invalidate(void);
/* The module holding PC: its path (realpath) and load bias; 0 when none. */
MDR_HIDDEN int mdr_module_of(uintptr_t pc, const char **path, uintptr_t *bias);

/* -- out.c: the dump, appended through a shared file mapping (under the lock) -- */
MDR_HIDDEN int mdr_out_open(const char *path, uint64_t end);
/* The mapped window of the dump: BASE maps the file from offset OFF, LEN bytes. */
struct mdr_window {
    char *base;
    uint64_t off;
    size_t len;
};
extern MDR_HIDDEN struct mdr_window mdr_out_window;
/* mdr_out_reserve past the current window: the next one mapped (out.c) */
MDR_HIDDEN char *mdr_out_grow(size_t bytes);
/* Room for at least BYTES at the end of the dump; NULL when the file cannot grow. */
MDR_INLINE char *mdr_out_reserve(size_t bytes)
{
    uint64_t end = memdump_recorder_control.end;
    const struct mdr_window *w = &mdr_out_window;
    if (MDR_LIKELY(w->base != NULL && end >= w->off && end + bytes <= w->off + w->len))
        return w->base + (end - w->off);
    return mdr_out_grow(bytes);
}
/* BYTES written at the pointer mdr_out_reserve returned: they become part of the dump. */
MDR_INLINE void mdr_out_commit(size_t bytes)
{
    memdump_recorder_control.end += bytes;
}
MDR_HIDDEN char *mdr_fmt_str(char *p, const char *s);
/* V in decimal, and in hexadecimal after `0x` (lower case, no leading zero), at P; returns the
 * end. Inline, two digits a step from a table: they are a tenth of an event's cost. */
extern MDR_HIDDEN const char mdr_dec_pairs[200];   /* "00" ... "99" */
extern MDR_HIDDEN const char mdr_hex_pairs[512];   /* "00" ... "ff" */
extern MDR_HIDDEN const uint64_t mdr_pow10[20];    /* 1, 10, ... 10^19 */

/* The decimal digits of V: t, from its bits, is the number's or one less */
MDR_INLINE int mdr_dec_len(uint64_t v)
{
    v |= v == 0;
    int t = ((64 - __builtin_clzll(v)) * 1233) >> 12;
    return t + (v >= mdr_pow10[t]);
}

MDR_INLINE char *mdr_fmt_dec(char *p, uint64_t v)
{
    char *end = p + mdr_dec_len(v), *q = end;
    while (v >= 100) {
        q -= 2;
        __builtin_memcpy(q, mdr_dec_pairs + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10)
        __builtin_memcpy(q - 2, mdr_dec_pairs + 2 * v, 2);
    else
        q[-1] = (char)('0' + v);
    return end;
}

static inline char *mdr_fmt_hex(char *p, uint64_t v)
{
    *p++ = '0';
    *p++ = 'x';
    char *end = p + (v ? (67 - __builtin_clzll(v)) / 4 : 1), *q = end;
    while (v >= 256) {
        q -= 2;
        __builtin_memcpy(q, mdr_hex_pairs + 2 * (v & 0xff), 2);
        v >>= 8;
    }
    if (v >= 16)
        __builtin_memcpy(q - 2, mdr_hex_pairs + 2 * v, 2);
    else
        q[-1] = mdr_hex_pairs[2 * v + 1];
    return end;
}

/* V as mdr_fmt_hex writes it, for an event record's buffer (mdr_out_reserve's room): it stores
 * 18 bytes at P, `0x`, the digits and NULs to the end (the dump past its last record stays NUL,
 * as a cut recording needs). The 16 nibbles are spread to bytes and turned to digits in one SSE2
 * register, without a loop or a table look-up a digit pair: the address of every event is most
 * of its formatting. */
extern MDR_HIDDEN const unsigned char mdr_hex_mask[32];  /* 16 times 0xff, then 16 zeros */
MDR_INLINE char *mdr_fmt_hex_wide(char *p, uint64_t v)
{
#ifdef __SSE2__
    int nd = v ? (67 - __builtin_clzll(v)) / 4 : 1;
    uint64_t x = __builtin_bswap64(v << (64 - 4 * nd));  /* the first digit in the low byte */
    __m128i b = _mm_cvtsi64_si128((long long)x);
    __m128i low4 = _mm_set1_epi8(0x0f);
    __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), low4),
                                    _mm_and_si128(b, low4));
    __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(nib, _mm_set1_epi8(9)),
                                   _mm_set1_epi8('a' - '0' - 10));
    __m128i dig = _mm_add_epi8(_mm_add_epi8(nib, _mm_set1_epi8('0')), letter);
    dig = _mm_and_si128(dig, _mm_loadu_si128((const __m128i *)(mdr_hex_mask + 16 - nd)));
    p[0] = '0';
    p[1] = 'x';
    _mm_storeu_si128((__m128i *)(p + 2), dig);
    return p + 2 + nd;
#else
    return mdr_fmt_hex(p, v);
#endif
}

/* -- intern.c: frames, stack nodes, the live blocks (under the lock) -- */
/* The node of the stack PCS[0..N) (innermost first), writing the definitions it needs. */
MDR_HIDDEN uint64_t mdr_intern_stack(const uintptr_t *pcs, int n, uint64_t hash);
MDR_HIDDEN uint64_t mdr_stack_hash(const uintptr_t *pcs, int n);

/* The live blocks: {address, size, stack} entries, address 0 empty, in a table of MDR_LIVE_CAP
 * (a power of two) at most half full, GDB's to read at a stop (control block `live_table`).
 * Linear probing without tombstones: a removal moves the later entries of its run that may sit
 * at the hole back into it (backward shift), so a run ends at its first empty entry. A program
 * reuses an address as soon as it frees it (glibc's tcache), and with tombstones each such
 * allocation probed past the deleted entries of its run, and each release left one more. An
 * address's home is its Fibonacci hash (a multiplication and a shift). Inline: on every event,
 * under the lock; intern.c makes and doubles the table. */
extern MDR_HIDDEN uint64_t *mdr_live;
extern MDR_HIDDEN size_t mdr_live_cap;
extern MDR_HIDDEN int mdr_live_shift;   /* 64 - log2(mdr_live_cap) */
/* the table made, or doubled; 0 when there is no memory for it */
MDR_HIDDEN int mdr_live_grow(void);

MDR_INLINE size_t mdr_live_home(uint64_t addr)
{
    return (size_t)((addr * 0x9e3779b97f4a7c15ull) >> mdr_live_shift);
}

/* ADDR's entry, or the empty one where it goes */
MDR_INLINE uint64_t *mdr_live_probe(uint64_t addr)
{
    size_t mask = mdr_live_cap - 1;
    for (size_t i = mdr_live_home(addr);; i = (i + 1) & mask) {
        uint64_t *e = &mdr_live[3 * i];
        if (e[0] == addr || e[0] == 0)
            return e;
    }
}

MDR_INLINE void mdr_live_add(uint64_t addr, uint64_t size, uint64_t stack)
{
    if (MDR_UNLIKELY((memdump_recorder_control.live_count + 1) * 2 > mdr_live_cap) &&
        !mdr_live_grow())
        return;
    uint64_t *e = mdr_live_probe(addr);
    if (e[0] == addr)
        memdump_recorder_control.live_bytes -= e[1];
    else
        memdump_recorder_control.live_count++;
    e[0] = addr;
    e[1] = size;
    /* the allocation's time, in seconds since the recording began (memdump leaks --older-than):
     * time() is one load from the vDSO's page (1.3 ns here, against 9 for the coarse clock) */
    e[2] = stack | (((uint64_t)time(NULL) - memdump_recorder_control.clock_base) << 32
                    & 0x7fffffff00000000ull);
    memdump_recorder_control.live_bytes += size;
}

MDR_INLINE int mdr_live_remove(uint64_t addr)
{
    if (mdr_live == NULL || addr <= 1)
        return 0;
    uint64_t *e = mdr_live_probe(addr);
    if (e[0] != addr)
        return 0;
    memdump_recorder_control.live_count--;
    memdump_recorder_control.live_bytes -= e[1];
    /* the backward shift: each later entry of the run whose home is not in (hole, it] moves
     * into the hole, which moves to where it was */
    size_t mask = mdr_live_cap - 1, hole = (size_t)(e - mdr_live) / 3;
    for (size_t j = (hole + 1) & mask; mdr_live[3 * j] != 0; j = (j + 1) & mask) {
        size_t home = mdr_live_home(mdr_live[3 * j]);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            memcpy(&mdr_live[3 * hole], &mdr_live[3 * j], 3 * sizeof(uint64_t));
            hole = j;
        }
    }
    mdr_live[3 * hole] = 0;
    return 1;
}
MDR_HIDDEN int mdr_intern_init(void);

/* -- recorder.c's hooked call, for cxx.c's hooks (the C++ operators) -- */
struct mdr_thread;
struct walk;
struct mdr_call {
    enum mdr_op op;
    uint64_t args[3];
    int n, partial;
    uintptr_t *pcs;
    struct walk *walk;
};
/* Walk the stack of the hook whose frame pointer is FRAME (C->op and C->args set). */
MDR_HIDDEN void mdr_hook_begin(struct mdr_thread *t, struct mdr_call *c, const void *frame);
/* Write the call's event with RESULT; the in-call flag stays set. */
MDR_HIDDEN void mdr_hook_write(struct mdr_thread *t, struct mdr_call *c, uint64_t result);
/* The hooked call is over: the thread's next call is recorded again. */
MDR_HIDDEN void mdr_hook_leave(struct mdr_thread *t);

/* -- the C++ operators: recorder.c's entry points (the direct path), cxx.c's other ways -- */
/* The forms, by index: new's (nothrow: bit 0, aligned: bit 1, new[]: 4 to 7), then delete's
 * (six each: plain, sized, nothrow, aligned, sized aligned, aligned nothrow), then the thrower */
enum {
    MDR_NW, MDR_NW_NT, MDR_NW_AL, MDR_NW_AL_NT, MDR_NA, MDR_NA_NT, MDR_NA_AL, MDR_NA_AL_NT,
    MDR_DL, MDR_DL_SZ, MDR_DL_NT, MDR_DL_AL, MDR_DL_SZ_AL, MDR_DL_AL_NT,
    MDR_DA, MDR_DA_SZ, MDR_DA_NT, MDR_DA_AL, MDR_DA_SZ_AL, MDR_DA_AL_NT,
    MDR_THROW_BAD_ALLOC, MDR_CXX_REAL_COUNT
};
/* 1: the direct path is the operators' (libstdc++'s operators are the C library's calls, which
 * reach the recorder's hooks: a recorded operator makes that call itself); -1: it is not; 0: not
 * known yet (cxx.c finds out at the first recorded operator call) */
extern MDR_HIDDEN int mdr_cxx_direct;
/* operator new of form FORM (SIZE; ALIGN for the aligned forms), the hook's frame FRAME, by the
 * real operators: recorded when T (this thread, its in-call flag set), else passed through */
MDR_HIDDEN void *mdr_cxx_new(struct mdr_thread *t, int form, size_t size, size_t align,
                             const void *frame);
/* The rest of a recorded new of FORM whose stack C holds, after the direct path's allocation
 * failed: the real nothrow form (new_handler), the event, the call over, bad_alloc if it throws */
MDR_HIDDEN void *mdr_cxx_new_failed(struct mdr_thread *t, struct mdr_call *c, int form,
                                    size_t size, size_t align);
/* operator delete of form FORM (PTR, then its other arguments A1, A2 in order), as mdr_cxx_new */
MDR_HIDDEN void mdr_cxx_delete(struct mdr_thread *t, int form, void *ptr, uintptr_t a1,
                               uintptr_t a2, const void *frame);
/* Whether a module's call of malloc, free and aligned_alloc binds to the recorder's hooks (the
 * recorder is preloaded and no module before it defines them). */
MDR_HIDDEN int mdr_allocator_hooked(void);

/* -- got.c: a running process (attach): the modules' GOT entries redirected to the hooks -- */
struct mdr_hook {
    const char *name;
    const void *fn;
};
/* recorder.c: the C++ operators' hooks, for got.c and cxx.c */
extern MDR_HIDDEN const struct mdr_hook mdr_cxx_hooks[];
extern MDR_HIDDEN const int mdr_cxx_hook_count;
/* exec.c: the exec functions' hooks, for got.c */
extern MDR_HIDDEN const struct mdr_hook mdr_exec_hooks[];
extern MDR_HIDDEN const int mdr_exec_hook_count;
int memdump_recorder_patch_all(void);
MDR_HIDDEN void *mdr_dlopen_hook(const char *file, int mode);
/* out.c: forget the dump (a new recording of the same process opens another) */
MDR_HIDDEN void mdr_out_close(void);
/* intern.c: forget the live blocks and the module strings (a new dump) */
MDR_HIDDEN void mdr_intern_reset(void);
/* out.c: the recording is over: cut the file after its last record, and close it */
MDR_HIDDEN void mdr_out_finish(void);

/* -- recorder.c: a record of another file's, under the writer's lock (guardrun.c) -- */
/* the lock taken when the recording is on (1), else 0 and not taken */
MDR_HIDDEN int mdr_record_lock(uint64_t tid);
MDR_HIDDEN void mdr_record_unlock(void);
/* The FNV-1a hash of this thread's innermost memdump_api.h tag; 0 without one (guardrun.c) */
MDR_HIDDEN uint64_t mdr_thread_tag(void);
/* This thread's guard sampler, in its state (no allocation); NULL when it has none (guardrun.c) */
struct mdr_guard_sampler;
MDR_HIDDEN struct mdr_guard_sampler *mdr_thread_sampler(void);
/* guardrun.c: a forked child's samplers reseeded (its draws not its parent's), from atfork */
MDR_HIDDEN void mdr_guard_forked(void);

/* -- children.c: a process GDB does not record, when children are asked for -- */
/* Configure a recording of this process alone (FORKED: it inherited its parent's blocks) into
 * its own dump, its header written; 0 when it is not one to record (or the dump cannot be made:
 * control block `failure`). */
MDR_HIDDEN int mdr_children_configure(int forked);
/* This process is the one GDB records: its children must know it. */
MDR_HIDDEN void mdr_children_traced(void);
/* The `end` record of a process recorded alone that exits with STATUS, at P. */
MDR_HIDDEN char *mdr_children_end(char *p, int status);
/* tags.c: memdump_api.h's tag names as the dump's strings (under the writer lock) */
#define MDR_TAG_MAX 255
#define MDR_NO_TAG UINT64_MAX
MDR_HIDDEN uint64_t mdr_tag_string(const char *name);
MDR_HIDDEN void mdr_tags_reset(void);
/* clock.c: the dump's clock samples (`c` records) */
MDR_HIDDEN void mdr_clock_start(void);
MDR_HIDDEN void mdr_clock_sample(void);

/* -- exec.c: the image the recorded process executes keeps the recorder -- */
/* GDB's breakpoint: the image's modules are about to go (dlclose, exec) */
void memdump_recorder_unloading(struct mdr_control *control);
/* This process is the one GDB configured, recording: an exec of its keeps the recorder. */
MDR_HIDDEN int mdr_exec_keeps_recorder(void);

#endif

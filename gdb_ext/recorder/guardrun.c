/* @brief Guard pages at run time (docs/heap-errors.md): the allocator's functions that place
 * the blocks SPEC chooses in the guarded pool (guard.c), and the SIGSEGV/SIGBUS handler that
 * writes an `ae` record for a fault in the pool, then lets the signal kill the process (or, when
 * GDB in batch mode asks, lets the access through once: the control block's guard_let_through).
 *
 * The hooks (recorder.c, cxx.c) call the allocator through one table of function pointers; with
 * guarding on, mdr_guard_start points it at these functions, so every path (a recorded call,
 * one passed through, the C++ operators') reaches the pool, and a pool block is never given to
 * the C library's free or realloc. The events are the same as without guarding: a guarded block
 * is recorded at its address, as any other.
 *
 * The handler is installed only when guarding is on. A fault outside the pool goes to the
 * action that was installed before (the program's handler, or the default action: the access
 * repeats and the signal kills the process); a program that installs its own handler later
 * replaces this one, and its pool faults are not reported.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "guard.h"
#include "recorder.h"
#include "redzone.h"

#define C (memdump_recorder_control)
#define EXPORT __attribute__((visibility("default")))

static struct mdr_alloc_fns libc;  /* the C library's, saved before the table is changed */
static struct mdr_guard_spec spec;
static int guarding;
static uint64_t sample_counter;  /* a thread without its state's sampler (no memory) */
static uint64_t sample_seed;     /* the process's, new in a forked child */
static int exhausted_said;
static struct sigaction previous[2];  /* SIGSEGV's, SIGBUS's */

#define DEFAULT_SLOTS 4096
#define MAX_SLOT_PAGES 16

static void say(const char *a, const char *b, const char *c)
{
    const char *parts[4] = {"memdump: ", a, b, c};
    for (int i = 0; i < 4; i++)
        if (parts[i] != NULL && write(2, parts[i], strlen(parts[i])) < 0)
            return;
    if (write(2, "\n", 1) < 0)
        return;
}

/* -- which blocks --------------------------------------------------------------------------- */

#define FN_DEPTH 64

/* `fn:NAME`: whether NAME is on the calling thread's stack, walked as the hooks walk theirs
 * (from this function's caller: its frame's return address, stack and frame pointers) */
static __attribute__((noinline)) int fn_on_stack(void)
{
    const uintptr_t *f = __builtin_frame_address(0);
    struct mdr_stack_bounds bounds;
    uintptr_t pcs[FN_DEPTH];
    int partial = 0;
    if (!mdr_thread_bounds(&bounds))
        return 0;
    int n = mdr_unwind(pcs, FN_DEPTH, f[1], (uintptr_t)(f + 2), f[0], &bounds, NULL, &partial);
    return mdr_guard_fn_on_stack(&spec, pcs, n);
}

static int chosen(size_t size)
{
    if (size < spec.size_min || size > spec.size_max)
        return 0;
    if (spec.tag != 0 && mdr_thread_tag() != spec.tag)
        return 0;
    if (spec.fn[0] != '\0' && !fn_on_stack())  /* the costly test last: a walk of the stack */
        return 0;
    if (spec.ppm >= 1000000)
        return 1;
    /* each thread draws from its own generator, in its recorder state: no shared cache line
     * written at every allocation (a shared atomic counter was one) */
    struct mdr_guard_sampler *own = mdr_thread_sampler();
    if (own != NULL)
        return mdr_guard_sample(own, spec.ppm, sample_seed);
    uint64_t n = __atomic_fetch_add(&sample_counter, 1, __ATOMIC_RELAXED);
    return ((n * 0x9e3779b97f4a7c15ull) >> 32) % 1000000 < spec.ppm;
}

void mdr_guard_forked(void)
{
    if (!guarding || spec.ppm >= 1000000)
        return;
    sample_seed ^= (uint64_t)getpid() << 32;
    struct mdr_guard_sampler *own = mdr_thread_sampler();  /* the forking thread's copy */
    if (own != NULL)
        own->x = 0;
}

/* `fn:NAME`'s code: [LO, HI) written by GDB after the name (`fn:NAME@LO-HI`, hex: it finds any
 * function, static ones too), else the dynamic symbol NAME's (an exported function) */
static int find_function(void)
{
    char *at = strchr(spec.fn, '@');
    if (at != NULL) {
        char *end;
        *at = '\0';
        spec.fn_lo = (uintptr_t)strtoull(at + 1, &end, 16);
        spec.fn_hi = *end == '-' ? (uintptr_t)strtoull(end + 1, NULL, 16) : 0;
        return spec.fn_lo < spec.fn_hi;
    }
    void *p = dlsym(RTLD_DEFAULT, spec.fn);
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (p == NULL || !dladdr1(p, &info, (void **)&sym, RTLD_DL_SYMENT) || sym == NULL ||
        sym->st_size == 0)
        return 0;
    spec.fn_lo = (uintptr_t)p;
    spec.fn_hi = (uintptr_t)p + sym->st_size;
    return 1;
}

static void *place(size_t size, size_t align)
{
    void *p = mdr_guard_alloc(size, align);
    if (p != NULL) {
        __atomic_fetch_add(&C.guard_blocks, 1, __ATOMIC_RELAXED);
    } else if (size <= (size_t)C.guard_slot_bytes && align <= 4096) {
        __atomic_fetch_add(&C.guard_missed, 1, __ATOMIC_RELAXED);
        if (!__atomic_exchange_n(&exhausted_said, 1, __ATOMIC_RELAXED))
            say("guard pool full (every slot holds a live block, or vm.max_map_count is "
                "reached): the blocks that find no free slot are not guarded", NULL, NULL);
    }
    return p;
}

/* -- the allocator's functions -------------------------------------------------------------- */

static void *g_malloc(size_t size)
{
    void *p = chosen(size) ? place(size, 0) : NULL;
    return p != NULL ? p : libc.malloc(size);
}

static void *g_calloc(size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        return libc.calloc(n, size);  /* its ENOMEM */
    void *p = chosen(bytes) ? place(bytes, 0) : NULL;  /* a slot's pages are zero */
    return p != NULL ? p : libc.calloc(n, size);
}

static void g_free(void *p)
{
    if (mdr_guard_owns(p))
        mdr_guard_release(p);  /* a double or interior free: the dump's events report it */
    else
        libc.free(p);
}

static void *g_realloc(void *old, size_t size)
{
    if (old == NULL)
        return g_malloc(size);
    int ours = mdr_guard_owns(old);
    if (!ours && !chosen(size))
        return libc.realloc(old, size);
    if (ours && size == 0) {  /* as glibc's realloc(p, 0): freed, NULL */
        mdr_guard_release(old);
        return NULL;
    }
    size_t had = ours ? mdr_guard_size(old) : malloc_usable_size(old);
    void *p = ours && !chosen(size) ? NULL : place(size, 0);
    if (p == NULL)
        p = libc.malloc(size);
    if (p == NULL)
        return NULL;
    memcpy(p, old, had < size ? had : size);
    g_free(old);
    return p;
}

static void *g_reallocarray(void *old, size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return g_realloc(old, bytes);
}

static void *aligned(size_t align, size_t size)
{
    return (align & (align - 1)) == 0 && chosen(size) ? place(size, align) : NULL;
}

static int g_posix_memalign(void **out, size_t align, size_t size)
{
    void *p = align % sizeof(void *) == 0 ? aligned(align, size) : NULL;
    if (p == NULL)
        return libc.posix_memalign(out, align, size);
    *out = p;
    return 0;
}

static void *g_aligned_alloc(size_t align, size_t size)
{
    void *p = aligned(align, size);
    return p != NULL ? p : libc.aligned_alloc(align, size);
}

static void *g_memalign(size_t align, size_t size)
{
    void *p = aligned(align, size);
    return p != NULL ? p : libc.memalign(align, size);
}

/* malloc_usable_size of a pool block is its size (glibc's would read a chunk header there is
 * none of); the others are the C library's */
static size_t (*next_usable_size)(void *);

EXPORT size_t malloc_usable_size(void *p)
{
    if (mdr_guard_owns(p))
        return mdr_guard_size(p);
    size_t zoned;
    if (mdr_rz_usable_size(p, &zoned))  /* a red-zoned block: its user size (redzone.c) */
        return zoned;
    if (next_usable_size == NULL)  /* dlsym may allocate: found before guarding starts */
        next_usable_size = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    return next_usable_size != NULL ? next_usable_size(p) : 0;
}

/* -- the fault ------------------------------------------------------------------------------ */

/* The mapping holding ADDR, from /proc/self/maps (the faulting thread's stack: the handler
 * cannot ask pthread_getattr_np, which allocates) */
static int mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[4096];
    size_t have = 0;
    int found = 0, eof = 0;
    while (!found && !(eof && have == 0)) {
        if (!eof) {
            ssize_t r = read(fd, buf + have, sizeof buf - have);
            if (r <= 0)
                eof = 1;
            else
                have += (size_t)r;
        }
        char *nl = memchr(buf, '\n', have);
        if (nl == NULL) {
            if (eof || have == sizeof buf)
                break;
            continue;
        }
        uintptr_t a = 0, b = 0;
        const char *q = buf;
        for (; *q != '-'; q++)
            a = a * 16 + (uintptr_t)(*q <= '9' ? *q - '0' : *q - 'a' + 10);
        for (q++; *q != ' '; q++)
            b = b * 16 + (uintptr_t)(*q <= '9' ? *q - '0' : *q - 'a' + 10);
        if (addr >= a && addr < b) {
            *lo = a;
            *hi = b;
            found = 1;
        }
        size_t used = (size_t)(nl + 1 - buf);
        memmove(buf, nl + 1, have - used);
        have -= used;
    }
    close(fd);
    return found;
}

static char *field(char *p, const char *word)
{
    *p++ = ' ';
    return mdr_fmt_str(p, word);
}

/* The `ae` record (docs/dump-format.md): the access, the faulting thread's stack (its first
 * frame the faulting instruction's address plus one, as a return address), the block */
static void write_error(const ucontext_t *uc, uintptr_t addr, const struct mdr_guard_hit *hit)
{
    uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    uintptr_t rsp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    uintptr_t rbp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
    int write_access = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
    uintptr_t pcs[MDR_MAX_DEPTH];
    struct mdr_stack_bounds bounds = {0, 0, 0, 0};
    int n = 1, partial = 0;
    int depth = C.depth > 0 && C.depth <= MDR_MAX_DEPTH ? (int)C.depth : 32;
    pcs[0] = rip + 1;
    if (mapping_of(rsp, &bounds.lo, &bounds.hi))
        n = mdr_unwind(pcs, depth, rip + 1, rsp, rbp, &bounds, NULL, &partial);
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    uint64_t hash = mdr_stack_hash(pcs, n);
    if (!mdr_record_lock(tid))
        return;
    uint64_t stack = mdr_intern_stack(pcs, n, hash);
    char *p = mdr_out_reserve(256);
    if (p != NULL) {
        char *start = p;
        p = mdr_fmt_str(p, MEMDUMP_TAG_AE " ");
        p = mdr_fmt_dec(p, tid);
        p = field(p, write_access ? "write" : "read");
        *p++ = ' ';
        p = mdr_fmt_hex(p, addr);
        *p++ = ' ';
        p = mdr_fmt_dec(p, stack);
        *p++ = ' ';
        p = mdr_fmt_hex(p, hit->block);
        *p++ = ' ';
        p = mdr_fmt_dec(p, hit->size);
        *p++ = ' ';
        p = mdr_fmt_dec(p, hit->offset);
        p = field(p, hit->relation);
        p = field(p, hit->state);
        *p++ = '\n';
        mdr_out_commit((size_t)(p - start));
        C.guard_errors++;
    }
    mdr_record_unlock();
}

static void on_fault(int sig, siginfo_t *si, void *context)
{
    int saved_errno = errno;
    struct sigaction *before = &previous[sig == SIGBUS];
    uintptr_t addr = (uintptr_t)si->si_addr;
    struct mdr_guard_hit hit;
    if (si->si_code > 0 && mdr_guard_classify(addr, &hit)) {
        write_error((const ucontext_t *)context, addr, &hit);
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        if (!C.guard_let_through ||
            mprotect((void *)(addr & ~(uintptr_t)(page - 1)), page, PROT_READ | PROT_WRITE) != 0)
            /* the access repeats when the handler returns, and the signal kills the process as
             * it would have: its core and GDB's stop at the instruction */
            signal(sig, SIG_DFL);
        /* else (GDB in batch, docs/heap-errors.md) the access completes, and GDB, stopped
         * after the instruction, makes the page inaccessible again */
    } else if (before->sa_flags & SA_SIGINFO) {
        before->sa_sigaction(sig, si, context);
    } else if (before->sa_handler != SIG_DFL && before->sa_handler != SIG_IGN) {
        before->sa_handler(sig);
    } else {
        sigaction(sig, before, NULL);  /* the access repeats: the default action */
    }
    errno = saved_errno;
}

/* -- turning it on -------------------------------------------------------------------------- */

void mdr_guard_start(struct mdr_alloc_fns *real, int environment)
{
    static int tried;
    const char *text = C.guard[0] != '\0' ? C.guard : NULL;
    char copy[sizeof C.guard];
    if (text == NULL && environment)
        text = getenv("MEMDUMP_GUARD");
    if (guarding || text == NULL || *text == '\0' || tried)
        return;
    tried = 1;
    size_t len = strnlen(text, sizeof copy - 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    char err[160];
    if (mdr_guard_parse(copy, &spec, err, sizeof err) != 0) {
        say(err, "; recording without guard pages", NULL);
        return;
    }
    if (spec.fn[0] != '\0' && !find_function()) {
        say("guard pages: fn:", spec.fn, ": no such function (without GDB, only an exported one "
            "is found); recording without guard pages");
        return;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = 1;
    if (spec.size_max != UINT64_MAX && spec.size_max > page)
        pages = spec.size_max / page + (spec.size_max % page != 0);
    if (pages > MAX_SLOT_PAGES)
        pages = MAX_SLOT_PAGES;
    if (!mdr_guard_pool_init(&spec, DEFAULT_SLOTS, pages)) {
        say("guard pages: the pool cannot be mapped; recording without guard pages", NULL, NULL);
        return;
    }
    uintptr_t base;
    size_t bytes;
    mdr_guard_region(&base, &bytes);
    C.guard_pool = base;
    C.guard_pool_size = bytes;
    C.guard_slots = DEFAULT_SLOTS;
    C.guard_slot_bytes = pages * page;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous[0]);
    sigaction(SIGBUS, &sa, &previous[1]);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);  /* a seed per run: each run samples other blocks */
    sample_seed = ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) ^
                  (uint64_t)getpid() << 32;
    libc = *real;
    malloc_usable_size(NULL);  /* the C library's found now, not inside a realloc's lock */
    struct mdr_alloc_fns g = {
        .malloc = g_malloc, .calloc = g_calloc, .realloc = g_realloc,
        .reallocarray = g_reallocarray, .free = g_free, .posix_memalign = g_posix_memalign,
        .aligned_alloc = g_aligned_alloc, .memalign = g_memalign,
        .valloc = libc.valloc, .pvalloc = libc.pvalloc,
    };
    guarding = 1;
    __atomic_store_n(&real->free, g.free, __ATOMIC_RELEASE);  /* first: frees of pool blocks */
    *real = g;
}

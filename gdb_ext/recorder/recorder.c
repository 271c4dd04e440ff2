/* @brief memdump's in-process recorder: the allocator's entry points, interposed (docs/recorder.md).
 *
 * Each hooked call walks its stack before the real function runs (into the thread's in-flight
 * slot, so that a call a fatal signal stops is still known), then, under one process-wide lock,
 * interns the stack, writes its event and updates the live blocks. The lock makes the file
 * order the SEQ order and puts every definition before its first use. malloc and free, nearly
 * every event, are written in the short form (`+` and `-` after a `t` record naming the thread,
 * docs/dump-format.md), and so are the C++ operators (cxx.c; `+n`, `-n`, `+a`, `-a`), calloc,
 * realloc and the aligned allocations (`+c`, `+r`, `+p`, `+l`, `+m`, format 2.5): half the
 * bytes of an `e` record, and the bytes are most of the cost. Nothing here calls
 * the allocator it records: the recorder's memory is mmap'd.
 *
 * Reentrancy: a thread flag marks a thread inside a hooked call. A hooked call it makes then
 * (glibc's realloc(NULL, n) calling malloc, pthread_getattr_np allocating for the recorder, a
 * signal handler that interrupted the call) passes through unrecorded, as the breakpoint
 * recorder records only the outermost call of a thread.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guard.h"
#include "redzone.h"
#include "recorder.h"

#define C (memdump_recorder_control)
#define EXPORT __attribute__((visibility("default")))

EXPORT struct mdr_control memdump_recorder_control = {
    .magic = MDR_MAGIC,
    .version = MDR_VERSION,
    .size = sizeof(struct mdr_control),
    .depth = 32,
};

/* GDB stops here before a module is unloaded: it symbolises the frames recorded in it while it
 * can still read its symbols. */
/* memdump break's condition (control.h), and where a matching event calls (GDB stops there) */
EXPORT struct mdr_break memdump_recorder_break_at;

EXPORT __attribute__((noinline)) void memdump_recorder_break(void)
{
    __asm__ volatile("" ::: "memory");
}

EXPORT __attribute__((noinline)) void memdump_recorder_unloading(struct mdr_control *control)
{
    __asm__ volatile("" : : "r"(control) : "memory");
}

/* GDB stops here (a breakpoint on this address from .dynsym) and fills in the control block. */
EXPORT __attribute__((noinline)) void memdump_recorder_configure(struct mdr_control *control)
{
    __asm__ volatile("" : : "r"(control) : "memory");
}

static const char *const op_names[MDR_OP_COUNT] = MEMDUMP_OP_NAMES_INIT;
static const uint8_t op_len[MDR_OP_COUNT] = MEMDUMP_OP_NAME_LENGTHS_INIT;
/* the short records' tags (`+`, `-`; 2.1: `+n`, `+a`, `-n`, `-a`); "" for the other operations */
static const char short_tag[MDR_OP_COUNT][3] = MEMDUMP_OP_SHORT_TAGS_INIT;
static const uint8_t short_tag_len[MDR_OP_COUNT] = MEMDUMP_OP_SHORT_TAG_LENGTHS_INIT;

/* -- the real functions --------------------------------------------------------------------- */

/* the C library's, or guard.c's when guarding is on (mdr_guard_start) */
static struct mdr_alloc_fns real;

/* dlsym may allocate before the real functions are known: it gets memory from here. */
static char bootstrap[64 * 1024] __attribute__((aligned(64)));
static size_t bootstrap_used;
static volatile int resolving;

static void *bootstrap_alloc(size_t size)
{
    size = (size + 63) & ~(size_t)63;
    size_t at = __atomic_fetch_add(&bootstrap_used, size, __ATOMIC_RELAXED);
    if (at + size > sizeof bootstrap)
        return NULL;
    return bootstrap + at;
}

static inline int is_bootstrap(const void *p)
{
    return (const char *)p >= bootstrap && (const char *)p < bootstrap + sizeof bootstrap;
}

static void resolve_real(void)
{
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&m);
    if (real.free == NULL) {
        resolving = 1;
        real.malloc = dlsym(RTLD_NEXT, "malloc");
        real.calloc = dlsym(RTLD_NEXT, "calloc");
        real.realloc = dlsym(RTLD_NEXT, "realloc");
        real.reallocarray = dlsym(RTLD_NEXT, "reallocarray");
        real.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
        real.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
        real.memalign = dlsym(RTLD_NEXT, "memalign");
        real.valloc = dlsym(RTLD_NEXT, "valloc");
        real.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
        __atomic_store_n(&real.free, (void (*)(void *))dlsym(RTLD_NEXT, "free"),
                         __ATOMIC_RELEASE);
        resolving = 0;
    }
    pthread_mutex_unlock(&m);
}

/* the word a walk log's unused fixed entries name (recorder.h, mdr_walk_pad) */
MDR_HIDDEN const uintptr_t mdr_walk_zero = 0;

/* -- threads -------------------------------------------------------------------------------- */

/* A recent walk of the thread's stack: a call from the same place (same return address, stack
 * and frame pointers) whose every stack word read is unchanged has the same stack, already
 * interned: no walk, no hash, no look-up. Sound because a walk is a function of its start and of
 * the words it reads (and of the unwind rules: the generation). A thread keeps WALK_SETS sets of
 * two, a call's set chosen by its return address and stack pointer, the walk that replaces one
 * the set's least recently used: with one walk a set, two call sites of a loop that fell in the
 * same set (a third of the runs of op_bench's realloc, which calls from three) walked their
 * stacks again at every call. */
#define WALK_SETS 16  /* begin's set: 4 bits of a hash */
struct walk {
    uintptr_t pc0, sp0, fp0;
    uint64_t generation, depth, node;
    int n, valid, node_len, partial;
    char node_text[24];
    struct mdr_walk_log log;
    uintptr_t pcs[MDR_MAX_DEPTH];
};

/* A thread's state. The recorder has no ELF TLS of its own: a TLS module would change the
 * program's own allocations (glibc sizes each thread's dtv by the number of TLS modules, and a
 * valgrind comparison sees 16 bytes more). The state hangs off a pthread key instead (keys below
 * 32 live in the thread descriptor: no allocation), and is reused after the thread exits.
 *
 * A key's value outlives its destructor in one case: glibc runs the destructors (thread_exit),
 * clears the values, then still frees for the thread (__libc_thread_freeres: free calls after
 * thread_exit), and clears nothing after that. A state set as the key's value then stayed in the
 * descriptor, which glibc gives, with its stack, to a later thread (its cache of joined threads'
 * stacks): that thread recorded its events under the exited thread's id (in the tags that thread
 * left pushed, for the analyser), its in-flight slot named so too. So the key is set only at a
 * call from the program, never from the C library (all that runs past the destructors), and
 * never after thread_exit. A call that finds no state (new_thread) looks the caller up, by
 * descriptor and gettid, among the parked states: those thread_exit parks, and those of threads
 * whose calls so far all came from the C library (on probation: parked when made, the key set
 * at the thread's first call from the program). A thread finds its own; a new thread gets a
 * state of its own, and frees the parked states of threads that are gone: the one parked on its
 * descriptor (glibc reuses a descriptor only once its thread is dead), others when it needs a
 * state (tgkill finds no such thread). current(), the common path, is unchanged. */
#define TAG_DEPTH 32 /* tags a thread's stack keeps the hashes of (deeper ones count) */

struct mdr_thread {
    int in_call;
    int ready;
    int tag_depth;
    uint64_t tag_hash[TAG_DEPTH];
    uint64_t tid;
    struct mdr_slot *slot;
    struct mdr_thread *next_free;
    pthread_t parked_self;  /* parked: the descriptor of its thread */
    int exited;  /* parked by thread_exit (else on probation: new_thread) */
    int tid_len;
    char tid_text[24];
    struct mdr_stack_bounds bounds;
    struct mdr_guard_sampler sampler;  /* guard pages' `N%` (guardrun.c) */
    uint8_t walk_mru[WALK_SETS];  /* the way of each set used last */
    struct walk walks[2 * WALK_SETS];
};

#define SLOTS 4096
static struct mdr_slot *slots;
static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static int thread_key_made;
static struct mdr_thread *free_threads;
static struct mdr_thread *parked_threads;  /* states of exited threads, maybe still freeing */
static volatile int free_threads_lock;  /* both lists */

static void threads_lock(void)
{
    while (__atomic_exchange_n(&free_threads_lock, 1, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
}

static void threads_unlock(void) { __atomic_store_n(&free_threads_lock, 0, __ATOMIC_RELEASE); }

/* T's in-flight slot free for another thread */
static void release_slot(struct mdr_thread *t)
{
    if (t->slot != NULL) {
        t->slot->op = 0;
        __atomic_store_n(&t->slot->tid, 0, __ATOMIC_RELEASE);
        t->slot = NULL;
    }
}

static void thread_exit(void *p)
{
    struct mdr_thread *t = p;
    if (t == NULL)
        return;
    release_slot(t);
    pthread_setspecific(thread_key, NULL);
    t->parked_self = pthread_self();
    t->exited = 1;
    if (!t->ready)  /* no call recorded yet: its id is needed to find it */
        t->tid = (uint64_t)syscall(SYS_gettid);
    threads_lock();
    t->next_free = parked_threads;
    parked_threads = t;
    threads_unlock();
}

/* Thread TID of this process has exited (errno kept: the hooks' callers see theirs) */
static int thread_gone(uint64_t tid)
{
    int saved = errno;
    int gone = syscall(SYS_tgkill, getpid(), (pid_t)tid, 0) != 0 && errno == ESRCH;
    errno = saved;
    return gone;
}

/* Under the lock: the link to the parked state of the calling thread (descriptor SELF, kernel id
 * TID), or NULL. Moves to the free list the states parked on SELF by another thread (gone: glibc
 * gave its descriptor to this one), and with SWEEP those of threads gone elsewhere. */
static struct mdr_thread **unpark(pthread_t self, uint64_t tid, int sweep)
{
    struct mdr_thread **own = NULL;
    for (struct mdr_thread **pp = &parked_threads; *pp != NULL;) {
        struct mdr_thread *t = *pp;
        int here = pthread_equal(t->parked_self, self);
        if (here && t->tid == tid) {
            own = pp;
        } else if (here || (sweep && thread_gone(t->tid))) {
            release_slot(t);  /* one taken while parked (thread_init) */
            *pp = t->next_free;
            t->next_free = free_threads;
            free_threads = t;
            continue;
        }
        pp = &t->next_free;
    }
    return own;
}

/* The C library's code: the executable segment that holds gnu_get_libc_version */
static struct { uintptr_t lo, hi; } libc_text;
static pthread_once_t libc_text_once = PTHREAD_ONCE_INIT;

static int find_libc_text(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t pc = *(const uintptr_t *)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && pc - lo < ph->p_memsz) {
            libc_text.lo = lo;
            libc_text.hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static void find_libc(void)
{
    uintptr_t pc = (uintptr_t)gnu_get_libc_version;
    dl_iterate_phdr(find_libc_text, &pc);
}

/* PC lies in the C library's code */
static int in_libc(uintptr_t pc)
{
    pthread_once(&libc_text_once, find_libc);
    return pc - libc_text.lo < libc_text.hi - libc_text.lo;
}

static void make_thread_key(void)
{
    pthread_key_create(&thread_key, thread_exit);
}

int mdr_thread_bounds(struct mdr_stack_bounds *out)
{
    if (!__atomic_load_n(&thread_key_made, __ATOMIC_ACQUIRE))
        return 0;
    const struct mdr_thread *t = pthread_getspecific(thread_key);
    if (t == NULL || !t->ready || t->bounds.hi == 0)
        return 0;
    *out = t->bounds;
    return 1;
}

/* current()'s first call in a thread: its state made (or one of an exited thread's reused) */
static __attribute__((noinline)) struct mdr_thread *new_thread(void)
{
    if (MDR_UNLIKELY(!__atomic_load_n(&thread_key_made, __ATOMIC_ACQUIRE))) {
        pthread_once(&thread_key_once, make_thread_key);
        __atomic_store_n(&thread_key_made, 1, __ATOMIC_RELEASE);
    }
    struct mdr_thread *t = pthread_getspecific(thread_key);
    if (t != NULL)
        return t;
    /* the hooked call's caller (current() is inlined in the hooks, built with frame pointers) */
    const uintptr_t *hook_frame = *(const uintptr_t *const *)__builtin_frame_address(0);
    int from_program = !in_libc(hook_frame[1]);
    pthread_t self = pthread_self();
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    threads_lock();
    struct mdr_thread **link = unpark(self, tid, 0);
    if (link == NULL && free_threads == NULL && parked_threads != NULL)
        unpark(self, tid, 1);
    struct mdr_thread *own = link != NULL ? *link : NULL;
    if (own != NULL && from_program && !own->exited)
        *link = own->next_free;  /* on probation, now called from the program: its key set */
    else if (own != NULL)
        from_program = 0;  /* past its destructors, or still on probation: no key set */
    t = own != NULL ? own : free_threads;
    if (own == NULL && t != NULL)
        free_threads = t->next_free;
    threads_unlock();
    if (own == NULL && t == NULL) {
        t = mdr_map(sizeof *t);
    } else if (own == NULL) {
        /* an exited thread's state: all of it new but the guard sampler's generator, which goes
         * on (restarted from the same seed, the threads of a pool that take turns would each
         * draw what the last one drew: the same blocks guarded, or none) */
        struct mdr_guard_sampler sampler = t->sampler;
        memset(t, 0, sizeof *t);
        t->sampler = sampler;
    }
    if (t == NULL)
        return NULL;
    if (from_program) {
        pthread_setspecific(thread_key, t);
    } else if (own == NULL) {  /* a call from the C library: on probation, parked */
        t->parked_self = self;
        t->tid = tid;
        threads_lock();
        t->next_free = parked_threads;
        parked_threads = t;
        threads_unlock();
    }
    return t;
}

/* This thread's state, made at its first call; NULL when it cannot be (no memory). The making
 * is out of line: the hooks' own prologues stay those of the common path. */
static inline struct mdr_thread *current(void)
{
    if (MDR_LIKELY(__atomic_load_n(&thread_key_made, __ATOMIC_ACQUIRE))) {
        struct mdr_thread *t = pthread_getspecific(thread_key);
        if (MDR_LIKELY(t != NULL))
            return t;
    }
    return new_thread();
}

static void thread_init(struct mdr_thread *t)
{
    t->ready = 1;
    t->tid = (uint64_t)syscall(SYS_gettid);
    t->tid_len = (int)(mdr_fmt_dec(t->tid_text, t->tid) - t->tid_text);
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *addr;
        size_t size;
        if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
            t->bounds.lo = (uintptr_t)addr;
            t->bounds.hi = (uintptr_t)addr + size;
        }
        pthread_attr_destroy(&attr);
    }
    stack_t ss;
    if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE)) {
        t->bounds.alt_lo = (uintptr_t)ss.ss_sp;
        t->bounds.alt_hi = (uintptr_t)ss.ss_sp + ss.ss_size;
    }
    if (slots != NULL) {
        for (size_t i = 0; i < SLOTS; i++) {
            uint64_t expected = 0;
            if (__atomic_compare_exchange_n(&slots[i].tid, &expected, t->tid, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
                t->slot = &slots[i];
                break;
            }
        }
    }
}

/* -- the lock ------------------------------------------------------------------------------- */

/* glibc's own flag (2.32 and later; weak: an older one has none, and every lock is atomic):
 * true while the process has never had a second thread (pthread_create clears it before the
 * thread exists; a forked child has it again). libstdc++'s shared_ptr counts rely on it alike. */
extern char __libc_single_threaded __attribute__((weak));

/* Taken around every record. The word also tells GDB, at a stop, that a thread is inside a
 * record (memdump_inprocess.py waits for it to be 0 before it appends). A process with one
 * thread only stores its id: no other thread can contend, and the store is what GDB sees; the
 * locked compare-and-swap, which also waits for every earlier store to reach the cache (the
 * record's bytes), was a sixth of the cost of an event (docs/recorder.md). */
static inline void lock(uint64_t tid)
{
    if (MDR_LIKELY(&__libc_single_threaded != NULL && __libc_single_threaded)) {
        C.lock = tid;
        __asm__ volatile("" ::: "memory");
        return;
    }
    for (unsigned spins = 0;; spins++) {
        uint64_t expected = 0;
        if (__atomic_compare_exchange_n(&C.lock, &expected, tid, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        if (spins > 64)
            sched_yield();
        else
            __builtin_ia32_pause();
    }
}

static inline void unlock(void)
{
    __atomic_store_n(&C.lock, 0, __ATOMIC_RELEASE);
}

/* guardrun.c's record, written as the hooks write theirs: 0 when nothing is recorded */
MDR_HIDDEN int mdr_record_lock(uint64_t tid)
{
    lock(tid);
    if (C.state == MDR_RECORDING || C.state == MDR_DRAINING)
        return 1;
    unlock();
    return 0;
}

MDR_HIDDEN void mdr_record_unlock(void)
{
    unlock();
}

/* -- start-up ------------------------------------------------------------------------------- */

static int configure_state;  /* 0 not yet, 1 in progress, 2 done */
/* children asked for (children.c): this process is a forked child, recorded alone */
static int forked_child, recorded_alone;
/* the thread of the last `t` record written (under the lock): short records follow it */
static uint64_t short_tid;

static void forget_environment(void)
{
    if (C.inherit) {  /* children asked for: they keep the recorder, and know this process */
        if (!recorded_alone)
            mdr_children_traced();
        return;
    }
    const char *pre = getenv("LD_PRELOAD");
    if (pre != NULL) {
        char kept[4096];
        size_t k = 0;
        const char *p = pre;
        while (*p) {
            size_t len = strcspn(p, ": ");
            int ours = len >= 22 && memcmp(p + len - 22, "libmemdump_recorder.so", 22) == 0;
            if (!ours && len > 0 && k + len + 1 < sizeof kept) {
                if (k)
                    kept[k++] = ':';
                memcpy(kept + k, p, len);
                k += len;
            }
            p += len;
            if (*p)
                p++;
        }
        kept[k] = '\0';
        if (k)
            setenv("LD_PRELOAD", kept, 1);
        else
            unsetenv("LD_PRELOAD");
    }
}

int mdr_exec_keeps_recorder(void)
{
    return C.state == MDR_RECORDING && !recorded_alone && C.pid == (uint64_t)getpid();
}

static void atfork_prepare(void)
{
    mdr_guard_atfork(0);
    if (C.state == MDR_RECORDING)
        lock((uint64_t)syscall(SYS_gettid));
    mdr_rz_atfork(0);  /* after the writer's lock: a recorded realloc takes it inside that */
    threads_lock();  /* last: new_thread takes no other lock inside it */
}
static void atfork_parent(void)
{
    threads_unlock();
    mdr_rz_atfork(1);
    if (C.lock)
        unlock();
    mdr_guard_atfork(1);
}
static void forget_recording(void);

static void atfork_child(void)
{
    /* The child shares the dump's mapping: it must never write to it. */
    threads_unlock();
    mdr_rz_atfork(1);
    if (C.lock)
        unlock();
    mdr_guard_atfork(1);
    mdr_guard_forked();
    if (C.inherit && C.state == MDR_RECORDING) {  /* children asked for: its own dump */
        forget_recording();
        forked_child = 1;
        struct mdr_thread *t = current();  /* the one thread, with the parent thread's id */
        if (t != NULL && t->ready) {
            t->tid = (uint64_t)syscall(SYS_gettid);
            t->tid_len = (int)(mdr_fmt_dec(t->tid_text, t->tid) - t->tid_text);
            if (t->slot != NULL)
                t->slot->tid = t->tid;
        }
    } else {
        C.state = MDR_DISABLED;
    }
}

/* A process recorded alone (children.c) ends: its `end` record, the file cut after it. */
static void recorded_alone_exit(int status, void *arg)
{
    (void)arg;
    if (!recorded_alone || C.state != MDR_RECORDING)
        return;
    lock((uint64_t)syscall(SYS_gettid));
    char *p = mdr_out_reserve(64);
    if (p != NULL)
        mdr_out_commit((size_t)(mdr_children_end(p, status) - p));
    C.state = MDR_DISABLED;
    unlock();
    mdr_out_finish();
}

/* The first call into the recorder: ask GDB for the configuration, open the dump. */
static void configure(void)
{
    int expected = 0;
    if (!__atomic_compare_exchange_n(&configure_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&configure_state, __ATOMIC_ACQUIRE) == 1)
            sched_yield();
        return;
    }
    static int once;
    C.pid = (uint64_t)getpid();
    if (!once) {  /* configure() runs again for each recording of a running process */
        once = 1;
        slots = mdr_map(SLOTS * sizeof(struct mdr_slot));
        C.slots = (uint64_t)(uintptr_t)slots;
        C.slot_count = slots ? SLOTS : 0;
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    }
    memdump_recorder_configure(&C);
    recorded_alone = C.path[0] == '\0' && mdr_children_configure(forked_child);
    if (recorded_alone) {
        static int registered;  /* a forked child inherits its parent's exit handlers */
        if (!registered)
            registered = on_exit(recorded_alone_exit, NULL) == 0;
    }
    if (C.path[0] == '\0') {
        C.failure = MDR_NO_GDB;
        C.state = MDR_DISABLED;
    } else if (!mdr_intern_init()) {
        C.failure = MDR_MEMORY;
        C.state = MDR_DISABLED;
    } else {
        int rc = mdr_out_open(C.path, C.end);
        if (rc < 0) {
            C.failure = MDR_OPEN;
            C.failure_errno = (uint64_t)-rc;
            C.state = MDR_DISABLED;
        } else {
            if (C.depth > MDR_MAX_DEPTH)
                C.depth = MDR_MAX_DEPTH;
            short_tid = 0;  /* a new dump: its first short record needs its `t` */
            C.clock_base = (uint64_t)time(NULL);
            mdr_clock_start();
            __atomic_store_n(&C.state, MDR_RECORDING, __ATOMIC_RELEASE);
            mdr_rz_start(&real);  /* red zones first: guard pages pass their other blocks on */
            mdr_guard_start(&real, 0);  /* SPEC from GDB (control block `guard`) */
            if (C.attach)  /* loaded into a running process: nothing calls the hooks yet */
                memdump_recorder_patch_all();
        }
    }
    __atomic_store_n(&configure_state, 2, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void recorder_init(void)
{
    if (real.free == NULL)
        resolve_real();
    struct mdr_thread *t = current();
    if (t == NULL)
        return;
    t->in_call++;
    if (configure_state != 2)
        configure();
    /* here, not in configure(): a call before the C library's own start-up sees no environ */
    if (C.state == MDR_RECORDING) {
        mdr_rz_start(&real);  /* MEMDUMP_REDZONE: before guard pages, which pass blocks on */
        mdr_guard_start(&real, 1);  /* MEMDUMP_GUARD (memdump.sh, children) */
        forget_environment();
    }
    t->in_call--;
}

/* enter()'s other cases, out of line: no thread state, a nested call, a recording not started
 * or over, the thread's first recorded call */
static __attribute__((noinline)) int enter_slow(struct mdr_thread *t)
{
    if (MDR_UNLIKELY(t == NULL))
        return 0;
    if (MDR_UNLIKELY(t->in_call)) {
        if (C.state == MDR_RECORDING)
            __atomic_fetch_add(&C.unrecorded, 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (MDR_UNLIKELY(C.state != MDR_RECORDING)) {
        if (C.state != MDR_UNCONFIGURED || configure_state == 2)
            return 0;
        t->in_call = 1;
        if (real.free == NULL)
            resolve_real();
        configure();
        t->in_call = 0;
        if (C.state != MDR_RECORDING)
            return 0;
    }
    t->in_call = 1;
    if (MDR_UNLIKELY(!t->ready))
        thread_init(t);
    return 1;
}

/* Is this call to be recorded? Sets the thread's flag when it is. */
static inline int enter(struct mdr_thread *t)
{
    if (MDR_LIKELY(t != NULL && !t->in_call && C.state == MDR_RECORDING && t->ready)) {
        t->in_call = 1;
        return 1;
    }
    return enter_slow(t);
}

/* -- recording ------------------------------------------------------------------------------ */

#define call mdr_call  /* recorder.h: cxx.c's hooks make calls too */

/* W is the walk of a call from PC, SP and FP, still valid */
MDR_INLINE int walk_hit(const struct walk *w, uintptr_t pc, uintptr_t sp, uintptr_t fp,
                        uint64_t depth)
{
    return w->valid && w->pc0 == pc && w->sp0 == sp && (w->fp0 == fp || !w->log.fp_used) &&
           w->depth == depth && w->generation == mdr_unwind_generation() &&
           mdr_walk_valid(&w->log);
}

/* A new walk, into SET's least recently used way (out of line: the hooks keep the common path's
 * registers and prologue) */
static __attribute__((noinline)) struct walk *walk_fresh(struct mdr_thread *t, size_t set,
                                                         uintptr_t pc, uintptr_t sp,
                                                         uintptr_t fp, int depth)
{
    int way = t->walk_mru[set] ^ 1;
    struct walk *w = &t->walks[2 * set + (size_t)way];
    t->walk_mru[set] = (uint8_t)way;
    w->valid = 0;
    w->generation = mdr_unwind_generation();
    w->partial = 0;
    w->n = depth > 0 ? mdr_unwind(w->pcs, depth, pc, sp, fp, &t->bounds, &w->log, &w->partial)
                     : 0;
    w->pc0 = pc;
    w->sp0 = sp;
    w->fp0 = fp;
    w->depth = (uint64_t)depth;
    w->node = 0;
    w->valid = !w->log.overflow;
    mdr_walk_pad(&w->log);
    return w;
}

/* Walk the stack of the hooked function whose frame pointer is FRAME (hooks keep rbp), or
 * find it unchanged among the thread's recent walks. */
static inline __attribute__((always_inline)) void begin(struct mdr_thread *t, struct call *c,
                                                        const void *frame)
{
    const uintptr_t *f = frame;
    uintptr_t pc = f[1], sp = (uintptr_t)(f + 2), fp = f[0];
    uint64_t depth = C.depth;
    size_t set = ((pc ^ (pc >> 12) ^ (sp >> 4)) * 0x9e3779b97f4a7c15ull) >> 60;  /* of 16 */
    struct walk *w = &t->walks[2 * set];
    if (walk_hit(w, pc, sp, fp, depth)) {
        t->walk_mru[set] = 0;
    } else if (walk_hit(w + 1, pc, sp, fp, depth)) {
        t->walk_mru[set] = 1;
        w++;
    } else {
        w = walk_fresh(t, set, pc, sp, fp, (int)depth);
    }
    c->walk = w;
    c->pcs = w->pcs;
    c->n = w->n;
    c->partial = w->partial;
    struct mdr_slot *s = t->slot;
    if (s != NULL) {
        /* one word at a time: the hook has just stored them one by one, and a 16-byte load of
         * two of them (GCC pairs the copies) waits for both stores to reach the cache */
        uint64_t a0 = c->args[0], a1 = c->args[1];
        __asm__("" : "+r"(a0), "+r"(a1));
        s->args[0] = a0;
        s->args[1] = a1;
        s->args[2] = c->args[2];
        s->npcs = (uint64_t)c->n;
        s->pcs = (uint64_t)(uintptr_t)c->pcs;
        __atomic_store_n(&s->op, (uint64_t)c->op + 1, __ATOMIC_RELEASE);
    }
}

/* The bytes an operation allocates (0 for those that release) */
static uint64_t size_of(enum mdr_op op, const uint64_t *a)
{
    switch (op) {
    case MDR_MALLOC: case MDR_VALLOC: case MDR_PVALLOC: case MDR_NEW: case MDR_NEW_ARRAY:
    case MDR_CUSTOM_ALLOC:
        return a[0];
    case MDR_CALLOC: return a[0] * a[1];
    case MDR_REALLOC: case MDR_ALIGNED_ALLOC: case MDR_MEMALIGN: return a[1];
    case MDR_REALLOCARRAY: return a[1] * a[2];
    case MDR_POSIX_MEMALIGN: return a[2];
    default: return 0;
    }
}

/* Whether the event just written (SEQ) matches memdump break's condition B; keeps it in B */
static int break_matches(struct mdr_break *b, const struct mdr_thread *t, const struct call *c,
                         uint64_t result)
{
    enum mdr_op op = c->op;
    if (!(b->ops >> op & 1) || (b->seq && b->seq != C.seq))
        return 0;
    uint64_t size = size_of(op, c->args);
    int releases = op == MDR_FREE || op == MDR_DELETE || op == MDR_DELETE_ARRAY
                   || op == MDR_CUSTOM_FREE;
    if (!releases && (size < b->size_min || size > b->size_max))
        return 0;
    if (b->tag && (t->tag_depth == 0 || t->tag_depth > TAG_DEPTH
                   || t->tag_hash[t->tag_depth - 1] != b->tag))
        return 0;
    if (b->n_ranges) {
        int in = 0;
        for (int i = 0; i < c->n && !in; i++)
            for (uint64_t r = 0; r < b->n_ranges && r < MDR_BREAK_RANGES; r++)
                in |= c->pcs[i] >= b->ranges[2 * r] && c->pcs[i] < b->ranges[2 * r + 1];
        if (!in)
            return 0;
    }
    if (b->n_pcs) {
        if ((uint64_t)c->n < b->n_pcs || b->n_pcs > MDR_BREAK_PCS)
            return 0;
        for (uint64_t i = 0; i < b->n_pcs; i++)
            if (c->pcs[i] != b->pcs[i])
                return 0;
    }
    uint64_t hits = ++b->hits;
    if (b->count && hits != b->count)
        return 0;
    b->last_seq = C.seq;
    b->last_op = (uint64_t)op;
    b->last_size = size;
    b->last_address = releases ? c->args[0] : result;
    return 1;
}

static inline __attribute__((always_inline)) void apply(enum mdr_op op, uint64_t result, const uint64_t *a, uint64_t rc, uint64_t stack)
{
    switch (op) {
    case MDR_MALLOC: case MDR_VALLOC: case MDR_PVALLOC: case MDR_NEW: case MDR_NEW_ARRAY:
        if (result) mdr_live_add(result, a[0], stack);
        break;
    case MDR_CALLOC:
        if (result) mdr_live_add(result, a[0] * a[1], stack);
        break;
    case MDR_FREE: case MDR_DELETE: case MDR_DELETE_ARRAY:
        mdr_live_remove(a[0]);
        break;
    case MDR_POSIX_MEMALIGN:
        if (rc == 0 && result) mdr_live_add(result, a[2], stack);
        break;
    case MDR_ALIGNED_ALLOC: case MDR_MEMALIGN:
        if (result) mdr_live_add(result, a[1], stack);
        break;
    case MDR_CUSTOM_ALLOC:
        if (result) mdr_live_add(result | MDR_CUSTOM_KEY, a[0], stack);
        break;
    case MDR_CUSTOM_FREE:
        if (a[0]) mdr_live_remove(a[0] | MDR_CUSTOM_KEY);
        break;
    case MDR_REALLOC: case MDR_REALLOCARRAY: {
        uint64_t size = op == MDR_REALLOC ? a[1] : a[1] * a[2];
        if (a[0] == 0) {
            if (result) mdr_live_add(result, size, stack);
        } else if (size == 0) {
            mdr_live_remove(a[0]);
            if (result) mdr_live_add(result, 0, stack);
        } else if (result) {
            mdr_live_remove(a[0]);
            mdr_live_add(result, size, stack);
        }
        break;
    }
    default:
        break;
    }
}

/* The call returned RESULT (posix_memalign: its return value RC): write its event. */
/* The next SEQ (under the lock), formatted straight into the record: the short records between
 * two `e` records (SEQ implicit) made a text kept and incremented in place a reformatting nearly
 * every time, read back by a 16-byte load that waited for its byte stores. */
MDR_INLINE char *next_seq(char *p)
{
    return mdr_fmt_dec(p, ++C.seq);
}

/* STACK's id: the text the walk W kept of it when W's stack is STACK, else formatted (0, no
 * stack: `--depth 0`, or a walk that found no frame, is never kept, and is written `0`). */
MDR_INLINE char *put_stack(char *p, uint64_t stack, const struct walk *w)
{
    if (w != NULL && stack != 0 && w->node == stack) {
        memcpy(p, w->node_text, 24);
        return p + w->node_len;
    }
    return mdr_fmt_dec(p, stack);
}

/* An operation's ARGS (the "Heap operations" table), after its RESULT: the same in its `e` record
 * and its short one; OP is a constant in each hook's inlined copy, the switch folded away. */
static inline __attribute__((always_inline)) char *put_args(char *p, enum mdr_op op,
                                                            const uint64_t *a, uint64_t rc)
{
    switch (op) {
    case MDR_REALLOC:
        p = mdr_fmt_hex_wide(p, a[0]);
        *p++ = ' ';
        return mdr_fmt_dec(p, a[1]);
    case MDR_REALLOCARRAY:
        p = mdr_fmt_hex_wide(p, a[0]);
        *p++ = ' ';
        p = mdr_fmt_dec(p, a[1]);
        *p++ = ' ';
        return mdr_fmt_dec(p, a[2]);
    case MDR_CALLOC: case MDR_ALIGNED_ALLOC: case MDR_MEMALIGN:
        p = mdr_fmt_dec(p, a[0]);
        *p++ = ' ';
        return mdr_fmt_dec(p, a[1]);
    case MDR_POSIX_MEMALIGN:
        p = mdr_fmt_dec(p, a[1]);
        *p++ = ' ';
        p = mdr_fmt_dec(p, a[2]);
        *p++ = ' ';
        return mdr_fmt_dec(p, rc);
    default:
        return mdr_fmt_dec(p, a[0]);
    }
}

/* `+ STACK RESULT SIZE` (malloc) or `- STACK PTR` (free), the C++ operators' `+n`, `+a`
 * (new, new[]: as malloc) and `-n`, `-a` (delete, delete[]: as free, format 2.1), and (2.5)
 * `+c`, `+r`, `+p`, `+l`, `+m` (calloc, realloc, posix_memalign, aligned_alloc, memalign:
 * `TAG STACK RESULT ARGS`), after `t TID` when the previous short record was another thread's;
 * SEQ is implicit: one more than the last sequenced record. */
static inline __attribute__((always_inline)) char *short_record(char *p, struct mdr_thread *t,
                                                                enum mdr_op op, uint64_t stack,
                                                                const struct walk *w,
                                                                uint64_t result,
                                                                const uint64_t *a, uint64_t rc)
{
    ++C.seq;
    if (MDR_UNLIKELY(t->tid != short_tid)) {
        *p++ = MEMDUMP_TAG_T_CHAR;
        *p++ = ' ';
        memcpy(p, t->tid_text, 24);
        p += t->tid_len;
        *p++ = '\n';
        short_tid = t->tid;
    }
    int release = op == MDR_FREE || op == MDR_DELETE || op == MDR_DELETE_ARRAY;
    memcpy(p, short_tag[op], 2);
    p += short_tag_len[op];
    *p++ = ' ';
    p = put_stack(p, stack, w);
    *p++ = ' ';
    if (release)
        return mdr_fmt_hex_wide(p, a[0]);
    p = mdr_fmt_hex_wide(p, result);
    *p++ = ' ';
    return put_args(p, op, a, rc);
}

/* The N bytes (1 to 16) of S at P, in two overlapping copies: a memcpy of a variable length is
 * a `rep movs`, whose start-up was a quarter of an `e` record's formatting. */
MDR_INLINE char *copy_name(char *p, const char *s, size_t n)
{
    if (n >= 8) {
        memcpy(p, s, 8);
        memcpy(p + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(p, s, 4);
        memcpy(p + n - 4, s + n - 4, 4);
    } else {
        p[0] = s[0];
        p[n / 2] = s[n / 2];
        p[n - 1] = s[n - 1];
    }
    return p + n;
}

/* `e SEQ TID OP STACK RESULT ARGS...`: every operation but those of short records. */
static inline __attribute__((always_inline)) char *event_record(char *p, struct mdr_thread *t, enum mdr_op op, uint64_t stack,
                          const struct walk *w, uint64_t result, const uint64_t *a, uint64_t rc)
{
    *p++ = MEMDUMP_TAG_E_CHAR;
    *p++ = ' ';
    p = next_seq(p);
    *p++ = ' ';
    memcpy(p, t->tid_text, 24);
    p += t->tid_len;
    *p++ = ' ';
    p = copy_name(p, op_names[op], op_len[op]);
    *p++ = ' ';
    p = put_stack(p, stack, w);
    *p++ = ' ';
    if (op == MDR_CUSTOM_FREE || op == MDR_DELETE || op == MDR_DELETE_ARRAY) {
        *p++ = '-';
        *p++ = ' ';
        return mdr_fmt_hex_wide(p, a[0]);
    }
    p = mdr_fmt_hex_wide(p, result);
    *p++ = ' ';
    return put_args(p, op, a, rc);
}

/* Inline in every hook, OP a constant there (c->op's value): each hook's copy keeps its own
 * operation's record and live-block update, without the switches on OP or the calls. */
static inline __attribute__((always_inline)) void finish(struct mdr_thread *t, struct call *c,
                                                         enum mdr_op op, uint64_t result,
                                                         uint64_t rc, int locked)
{
    struct walk *w = c->walk;
    uint64_t hash = w != NULL && w->node ? 0 : mdr_stack_hash(c->pcs, c->n);
    int hit = 0;
    if (!locked)
        lock(t->tid);
    if (MDR_LIKELY(C.state == MDR_RECORDING || C.state == MDR_DRAINING)) {
        uint64_t stack;
        if (w != NULL && w->node) {
            stack = w->node;
        } else {
            stack = mdr_intern_stack(c->pcs, c->n, hash);
            if (w != NULL && stack) {
                w->node = stack;
                w->node_len = (int)(mdr_fmt_dec(w->node_text, stack) - w->node_text);
            }
        }
        char *p = mdr_out_reserve(256);
        if (MDR_UNLIKELY(p == NULL)) {
            C.state = MDR_DISABLED;
        } else {
            char *start = p;
            if (MDR_LIKELY(short_tag_len[op] != 0))
                p = short_record(p, t, op, stack, w, result, c->args, rc);
            else
                p = event_record(p, t, op, stack, w, result, c->args, rc);
            *p++ = '\n';
            mdr_out_commit((size_t)(p - start));
            C.events++;
            C.partial_stacks += (uint64_t)c->partial;
            apply(op, result, c->args, rc, stack);
            if (MDR_UNLIKELY((C.events & 63) == 0))
                mdr_clock_sample();
            struct mdr_break *b = &memdump_recorder_break_at;
            hit = MDR_UNLIKELY(b->ops != 0) && break_matches(b, t, c, result);
        }
    }
    unlock();
    if (MDR_UNLIKELY(hit))
        memdump_recorder_break();
    if (t->slot != NULL)
        __atomic_store_n(&t->slot->op, 0, __ATOMIC_RELEASE);
}

/* -- cxx.c's hooks: the same steps, out of line ------------------------------------------- */

MDR_HIDDEN void mdr_hook_begin(struct mdr_thread *t, struct mdr_call *c, const void *frame)
{
    begin(t, c, frame);
}

MDR_HIDDEN void mdr_hook_write(struct mdr_thread *t, struct mdr_call *c, uint64_t result)
{
    switch (c->op) {  /* the C++ operators' own copies (finish) */
    case MDR_NEW: finish(t, c, MDR_NEW, result, 0, 0); break;
    case MDR_NEW_ARRAY: finish(t, c, MDR_NEW_ARRAY, result, 0, 0); break;
    case MDR_DELETE: finish(t, c, MDR_DELETE, result, 0, 0); break;
    case MDR_DELETE_ARRAY: finish(t, c, MDR_DELETE_ARRAY, result, 0, 0); break;
    default: finish(t, c, c->op, result, 0, 0); break;
    }
}

MDR_HIDDEN void mdr_hook_leave(struct mdr_thread *t)
{
    t->in_call = 0;
}

#define HOOK_BEGIN(OP, A0, A1, A2)                                  \
    struct mdr_thread *t = self;                                    \
    const enum mdr_op op = (OP); /* finish's constant */            \
    struct call c;                                                  \
    c.op = op;                                                      \
    c.args[0] = (uint64_t)(A0);                                     \
    c.args[1] = (uint64_t)(A1);                                     \
    c.args[2] = (uint64_t)(A2);                                     \
    begin(t, &c, __builtin_frame_address(0))

#define HOOK_END(RESULT, RC)                                        \
    finish(t, &c, op, (uint64_t)(RESULT), (RC), 0);                 \
    t->in_call = 0

#define REAL(name)                                                  \
    (MDR_UNLIKELY(real.free == NULL) ? (resolve_real(), real.name) : real.name)

static inline void real_free(void *ptr)
{
    if (MDR_LIKELY(!is_bootstrap(ptr)))
        REAL(free)(ptr);
}

/* -- the C++ operators' entry points (cxx.c has the rest) ----------------------------------- */

/* The size libstdc++'s aligned new of SIZE asks aligned_alloc for, SIZE (at least 1) rounded up
 * to ALIGN; 0 when ALIGN is not a power of two or the size overflows (the real form decides:
 * new_handler, bad_alloc) */
static inline size_t cxx_aligned_size(size_t size, size_t align)
{
    size_t n = size != 0 ? size : 1;
    if (align == 0 || (align & (align - 1)) != 0 || n > SIZE_MAX - (align - 1))
        return 0;
    return (n + align - 1) & ~(align - 1);
}

/* operator new in form NAME (PARAMS: SIZE, and AL for the aligned forms), index FORM. On the
 * direct path (docs/recorder.md, "C++ operators") a recorded call is malloc's hook's own steps,
 * inline, around the C library's call libstdc++'s operator makes (malloc(size ? size : 1), the
 * aligned forms aligned_alloc): no call into cxx.c. The rest, in cxx.c: a call that passes
 * through, one made before the path is known or when it is not the operators', and a failed
 * allocation (the real nothrow form: new_handler, bad_alloc). */
#define CXX_NEW(name, FORM, PARAMS, ALIGN)                                                  \
    MDR_HIDDEN void *mdr_hook##name PARAMS                                                  \
    {                                                                                       \
        const size_t align = (ALIGN);                                                       \
        struct mdr_thread *self = current();                                                \
        if (!enter(self))                                                                   \
            return mdr_cxx_new(NULL, FORM, size, align, __builtin_frame_address(0));        \
        size_t n = (FORM) & 2 ? cxx_aligned_size(size, align) : size != 0 ? size : 1;      \
        if (MDR_UNLIKELY(__atomic_load_n(&mdr_cxx_direct, __ATOMIC_ACQUIRE) <= 0 || n == 0)) \
            return mdr_cxx_new(self, FORM, size, align, __builtin_frame_address(0));        \
        HOOK_BEGIN((FORM) >= MDR_NA ? MDR_NEW_ARRAY : MDR_NEW, size, 0, 0);                 \
        void *r = (FORM) & 2 ? REAL(aligned_alloc)(align, n) : REAL(malloc)(n);            \
        if (MDR_UNLIKELY(r == NULL))                                                        \
            return mdr_cxx_new_failed(t, &c, FORM, size, align);                            \
        HOOK_END(r, 0);                                                                     \
        return r;                                                                           \
    }                                                                                       \
    EXPORT_AS(name)

/* operator delete in form NAME (PARAMS: PTR, then A1 and A2 when it has them), index FORM; on
 * the direct path free's hook's steps (the event, then the C library's free), the rest in cxx.c.
 * The in-call flag stays set across the free, as a delete's through the real operator. */
#define CXX_DELETE(name, FORM, PARAMS, A1, A2)                                              \
    MDR_HIDDEN void mdr_hook##name PARAMS                                                   \
    {                                                                                       \
        struct mdr_thread *self = current();                                                \
        if (!enter(self)) {                                                                 \
            mdr_cxx_delete(NULL, FORM, ptr, A1, A2, __builtin_frame_address(0));            \
            return;                                                                         \
        }                                                                                   \
        if (MDR_UNLIKELY(__atomic_load_n(&mdr_cxx_direct, __ATOMIC_ACQUIRE) <= 0)) {       \
            mdr_cxx_delete(self, FORM, ptr, A1, A2, __builtin_frame_address(0));            \
            return;                                                                         \
        }                                                                                   \
        HOOK_BEGIN((FORM) >= MDR_DA ? MDR_DELETE_ARRAY : MDR_DELETE, ptr, 0, 0);            \
        finish(t, &c, op, 0, 0, 0);                                                         \
        real_free(ptr);                                                                     \
        t->in_call = 0;                                                                     \
    }                                                                                       \
    EXPORT_AS(name)

/* The hooks' own names are hidden (got.c takes their addresses: a reference to `_Znwm` would
 * bind to libstdc++'s when the recorder is loaded RTLD_LOCAL); the mangled names are aliases. */
#define EXPORT_AS(name) \
    extern __typeof(mdr_hook##name) name __attribute__((alias("mdr_hook" #name), EXPORT_VISIBLE))
#define EXPORT_VISIBLE visibility("default")
#define CXX_NT const void *nt
#define CXX_NEW_FORMS(N, F)                                                                 \
    CXX_NEW(N, F, (size_t size), 0);                                                        \
    CXX_NEW(N##RKSt9nothrow_t, F + 1, (size_t size, CXX_NT __attribute__((unused))), 0);        \
    CXX_NEW(N##St11align_val_t, F + 2, (size_t size, size_t al), al);                       \
    CXX_NEW(N##St11align_val_tRKSt9nothrow_t, F + 3,                                        \
            (size_t size, size_t al, CXX_NT __attribute__((unused))), al)
#define CXX_DELETE_FORMS(D, F)                                                              \
    CXX_DELETE(D##Pv, F, (void *ptr), 0, 0);                                                \
    CXX_DELETE(D##Pvm, F + 1, (void *ptr, size_t size), size, 0);                           \
    CXX_DELETE(D##PvRKSt9nothrow_t, F + 2, (void *ptr, CXX_NT), (uintptr_t)nt, 0);              \
    CXX_DELETE(D##PvSt11align_val_t, F + 3, (void *ptr, size_t al), al, 0);                 \
    CXX_DELETE(D##PvmSt11align_val_t, F + 4, (void *ptr, size_t size, size_t al), size, al); \
    CXX_DELETE(D##PvSt11align_val_tRKSt9nothrow_t, F + 5, (void *ptr, size_t al, CXX_NT), al,  \
               (uintptr_t)nt)

CXX_NEW_FORMS(_Znwm, MDR_NW);
CXX_NEW_FORMS(_Znam, MDR_NA);
CXX_DELETE_FORMS(_Zdl, MDR_DL);
CXX_DELETE_FORMS(_Zda, MDR_DA);

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

/* -- the entry points ----------------------------------------------------------------------- */

EXPORT void *malloc(size_t size)
{
    if (MDR_UNLIKELY(resolving))
        return bootstrap_alloc(size);
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(malloc)(size);
    HOOK_BEGIN(MDR_MALLOC, size, 0, 0);
    void *r = real.malloc(size);
    HOOK_END(r, 0);
    return r;
}

EXPORT void free(void *ptr)
{
    if (MDR_UNLIKELY(is_bootstrap(ptr)))
        return;
    struct mdr_thread *self = current();
    if (!enter(self)) {
        REAL(free)(ptr);
        return;
    }
    /* Written before the block is released: once it is, another thread's malloc may get the
     * same address, and its event must come after this one. */
    HOOK_BEGIN(MDR_FREE, ptr, 0, 0);
    HOOK_END(0, 0);
    real.free(ptr);
}

EXPORT void *calloc(size_t nmemb, size_t size)
{
    if (MDR_UNLIKELY(resolving)) {
        void *p = bootstrap_alloc(nmemb * size);
        return p;  /* the bootstrap buffer is zero and never reused */
    }
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(calloc)(nmemb, size);
    HOOK_BEGIN(MDR_CALLOC, nmemb, size, 0);
    void *r = real.calloc(nmemb, size);
    HOOK_END(r, 0);
    return r;
}

EXPORT void *realloc(void *ptr, size_t size)
{
    if (MDR_UNLIKELY(is_bootstrap(ptr))) {
        void *p = REAL(malloc)(size);
        if (p != NULL)
            memcpy(p, ptr, size);  /* bootstrap blocks are tiny and the buffer is readable */
        return p;
    }
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(realloc)(ptr, size);
    HOOK_BEGIN(MDR_REALLOC, ptr, size, 0);
    /* The old block is released inside the call: hold the lock across it, so that no other
     * thread's event for its address is written before this one (see free). */
    if (ptr != NULL)
        lock(t->tid);
    void *r = real.realloc(ptr, size);
    finish(t, &c, op, (uint64_t)(uintptr_t)r, 0, ptr != NULL);
    t->in_call = 0;
    return r;
}

EXPORT void *reallocarray(void *ptr, size_t nmemb, size_t size)
{
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(reallocarray)(ptr, nmemb, size);
    HOOK_BEGIN(MDR_REALLOCARRAY, ptr, nmemb, size);
    if (ptr != NULL)
        lock(t->tid);
    void *r = real.reallocarray(ptr, nmemb, size);
    finish(t, &c, op, (uint64_t)(uintptr_t)r, 0, ptr != NULL);
    t->in_call = 0;
    return r;
}

EXPORT int posix_memalign(void **memptr, size_t alignment, size_t size)
{
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(posix_memalign)(memptr, alignment, size);
    HOOK_BEGIN(MDR_POSIX_MEMALIGN, memptr, alignment, size);
    int rc = real.posix_memalign(memptr, alignment, size);
    HOOK_END(rc == 0 ? (uint64_t)(uintptr_t)*memptr : 0, (uint64_t)(unsigned)rc);
    return rc;
}

EXPORT void *aligned_alloc(size_t alignment, size_t size)
{
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(aligned_alloc)(alignment, size);
    HOOK_BEGIN(MDR_ALIGNED_ALLOC, alignment, size, 0);
    void *r = real.aligned_alloc(alignment, size);
    HOOK_END(r, 0);
    return r;
}

EXPORT void *memalign(size_t alignment, size_t size)
{
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(memalign)(alignment, size);
    HOOK_BEGIN(MDR_MEMALIGN, alignment, size, 0);
    void *r = real.memalign(alignment, size);
    HOOK_END(r, 0);
    return r;
}

EXPORT void *valloc(size_t size)
{
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(valloc)(size);
    HOOK_BEGIN(MDR_VALLOC, size, 0, 0);
    void *r = real.valloc(size);
    HOOK_END(r, 0);
    return r;
}

EXPORT void *pvalloc(size_t size)
{
    struct mdr_thread *self = current();
    if (!enter(self))
        return REAL(pvalloc)(size);
    HOOK_BEGIN(MDR_PVALLOC, size, 0, 0);
    void *r = real.pvalloc(size);
    HOOK_END(r, 0);
    return r;
}

/* -- memdump_api.h: a custom allocator's objects ------------------------------------------- */

/* MEMDUMP_ALLOC(ptr, size): the object PTR of SIZE bytes is live, allocated here. */
EXPORT void memdump_api_alloc(void *ptr, size_t size)
{
    struct mdr_thread *self = current();
    if (!enter(self))
        return;
    HOOK_BEGIN(MDR_CUSTOM_ALLOC, size, 0, 0);
    HOOK_END(ptr, 0);
}

/* MEMDUMP_FREE(ptr): the object PTR went back to its pool. */
EXPORT void memdump_api_free(void *ptr)
{
    struct mdr_thread *self = current();
    if (!enter(self))
        return;
    HOOK_BEGIN(MDR_CUSTOM_FREE, ptr, 0, 0);
    HOOK_END(0, 0);
}

MDR_HIDDEN struct mdr_guard_sampler *mdr_thread_sampler(void)
{
    struct mdr_thread *t = current();
    return t != NULL ? &t->sampler : NULL;
}

MDR_HIDDEN uint64_t mdr_thread_tag(void)
{
    struct mdr_thread *t = current();
    if (t == NULL || t->tag_depth == 0 || t->tag_depth > TAG_DEPTH)
        return 0;
    return t->tag_hash[t->tag_depth - 1];
}

/* -- categories and phases (memdump_api.h) ------------------------------------------------- */

/* `g TID STRING` (KIND 'g': this thread pushed the tag NAME), `u TID` ('u': it popped its
 * innermost tag) or `p SEQ phase NAME` ('p': the process entered the phase NAME); format 2.2.
 * The tags are not sequenced: like `t`, they sit between the events they separate. */
static void api_record(int kind, const char *name)
{
    struct mdr_thread *t = current();
    if (!enter(t))
        return;
    if (kind == MEMDUMP_TAG_G_CHAR) { /* memdump break --tag compares the innermost tag's hash */
        if (t->tag_depth < TAG_DEPTH) {
            uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name as recorded */
            for (size_t i = 0; i < MDR_TAG_MAX && name[i]; i++)
                h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
            t->tag_hash[t->tag_depth] = h;
        }
        t->tag_depth++;
    } else if (kind == MEMDUMP_TAG_U_CHAR && t->tag_depth > 0) {
        t->tag_depth--;
    }
    lock(t->tid);
    if (C.state == MDR_RECORDING || C.state == MDR_DRAINING) {
        uint64_t id = kind == MEMDUMP_TAG_G_CHAR ? mdr_tag_string(name) : 0;
        size_t len = kind == MEMDUMP_TAG_P_CHAR ? strnlen(name, MDR_TAG_MAX) : 0;
        char *p = id == MDR_NO_TAG ? NULL : mdr_out_reserve(2 * len + 80);
        if (p != NULL) {
            char *start = p;
            *p++ = (char)kind;
            *p++ = ' ';
            if (kind == MEMDUMP_TAG_P_CHAR) {
                p = next_seq(p);
                *p++ = ' ';
                memcpy(p, MEMDUMP_PROCESS_PHASE, sizeof MEMDUMP_PROCESS_PHASE - 1);
                p += sizeof MEMDUMP_PROCESS_PHASE - 1;
                *p++ = ' ';
                char copy[MDR_TAG_MAX + 1];
                memcpy(copy, name, len);
                copy[len] = '\0';
                char *text = p;
                p = mdr_fmt_str(p, copy);
                if (p == text)
                    *p++ = '-'; /* empty: `-`, as GDB writes it */
            } else {
                memcpy(p, t->tid_text, 24);
                p += t->tid_len;
                if (kind == MEMDUMP_TAG_G_CHAR) {
                    *p++ = ' ';
                    p = mdr_fmt_dec(p, id);
                }
            }
            *p++ = '\n';
            mdr_out_commit((size_t)(p - start));
        }
    }
    unlock();
    t->in_call = 0;
}

/* memdump_tag_push(NAME): this thread's allocations are tagged NAME until its pop */
EXPORT void memdump_api_tag_push(const char *name)
{
    api_record(MEMDUMP_TAG_G_CHAR, name != NULL ? name : "");
}

/* memdump_tag_pop(): this thread's innermost tag ends */
EXPORT void memdump_api_tag_pop(void)
{
    api_record(MEMDUMP_TAG_U_CHAR, NULL);
}

/* MEMDUMP_PHASE(NAME): the process enters the phase NAME */
EXPORT void memdump_api_phase(const char *name)
{
    api_record(MEMDUMP_TAG_P_CHAR, name != NULL ? name : "");
}

/* Modules come and go: cached unwind rules of an unloaded module must not serve its successor. */
EXPORT int dlclose(void *handle)
{
    static int (*real_dlclose)(void *);
    if (real_dlclose == NULL)
        real_dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
    if (C.state == MDR_RECORDING)
        memdump_recorder_unloading(&C);
    int rc = real_dlclose(handle);
    mdr_unwind_invalidate();
    return rc;
}

/* -- a running process (got.c) ------------------------------------------------------------- */

/* A new recording of a process the recorder is loaded into and disabled in (GDB attached again):
 * configure again (GDB's breakpoint fills the control block with the new dump), on new tables. */
EXPORT void memdump_recorder_reattach(void)
{
    struct mdr_thread *t = current();
    if (t == NULL)
        return;
    t->in_call++;
    if (__atomic_load_n(&configure_state, __ATOMIC_ACQUIRE) == 2 && C.state == MDR_DISABLED) {
        forget_recording();
        configure();
    }
    t->in_call--;
}

/* Forget the dump and the tables: the next hooked call (or reattach) configures a new one. */
static void forget_recording(void)
{
    mdr_out_close();
    mdr_intern_reset();
    mdr_tags_reset();
    mdr_unwind_invalidate();  /* the threads' cached walks name the old dump's nodes */
    C.path[0] = '\0';
    C.failure = MDR_OK;
    C.failure_errno = 0;
    C.events = 0;
    C.unrecorded = 0;
    C.partial_stacks = 0;
    C.next_string = C.next_frame = C.next_node = 0;
    C.clock_start = 0;  /* a new dump, a new clock */
    C.state = MDR_UNCONFIGURED;
    __atomic_store_n(&configure_state, 0, __ATOMIC_RELEASE);
}

/* The hooks' own addresses (hidden aliases: a reference to `malloc` here would resolve to the
 * C library's when the recorder is loaded RTLD_LOCAL). */
#define ALIAS(name) extern __typeof(name) mdr_real_hook_##name \
    __attribute__((alias(#name), copy(name), visibility("hidden")))
ALIAS(malloc);
ALIAS(calloc);
ALIAS(realloc);
ALIAS(reallocarray);
ALIAS(free);
ALIAS(posix_memalign);
ALIAS(aligned_alloc);
ALIAS(memalign);
ALIAS(valloc);
ALIAS(pvalloc);
ALIAS(dlclose);

MDR_HIDDEN int mdr_allocator_hooked(void)
{
    return dlsym(RTLD_DEFAULT, "malloc") == (void *)mdr_real_hook_malloc
           && dlsym(RTLD_DEFAULT, "free") == (void *)mdr_real_hook_free
           && dlsym(RTLD_DEFAULT, "aligned_alloc") == (void *)mdr_real_hook_aligned_alloc;
}

/* @brief Red zones and a quarantine for every block (docs/heap-errors.md, "Red zones"): the
 * allocator's functions that give each block a front and a tail zone of pattern bytes
 * (rzcheck.h's layout), keep freed blocks, filled with a pattern, in a bounded quarantine, and
 * write an `hc` record (docs/dump-format.md, "Heap corruption") for each zone or freed block
 * found changed: at its free or realloc, when it leaves the quarantine, at exit, and on demand
 * (memdump_recorder_check_heap, GDB's `memdump check-heap`).
 *
 * The hooks call the allocator through recorder.c's table (guard.h's struct mdr_alloc_fns):
 * mdr_rz_start points it at these functions, before guard pages start, so that guardrun.c's
 * functions, when guarding is on too, pass the blocks they do not place in their pool to these.
 * The program and the recording see the user block: its address and size in the events, the
 * live-block table and the leak scan; malloc_usable_size gives its size.
 *
 * A pointer whose 16 bytes before it hold no tag of ours (a block from before the red zones
 * started, valloc's and pvalloc's, left to the C library) goes to the C library as it is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guard.h"
#include "recorder.h"
#include "redzone.h"
#include "rzcheck.h"

#define C (memdump_recorder_control)
#define EXPORT __attribute__((visibility("default")))

static struct mdr_alloc_fns libc;
static size_t tail_min;       /* the tail zone's bytes asked for (at least) */
static int zoning;

/* the quarantine: a ring of freed user blocks, at most QCAP of them and QBYTES of user bytes */
#define QCAP 16384
static void **ring;
static size_t head, count, held_bytes, max_bytes;
static volatile int qlock;

static void take(void)
{
    for (unsigned spins = 0; __atomic_exchange_n(&qlock, 1, __ATOMIC_ACQUIRE); spins++)
        if (spins > 64)
            sched_yield();
}

static void give(void)
{
    __atomic_store_n(&qlock, 0, __ATOMIC_RELEASE);
}

void mdr_rz_atfork(int phase)
{
    if (!zoning)
        return;
    if (phase == 0)
        take();
    else
        give();
}

/* -- the records ---------------------------------------------------------------------------- */

static char *word(char *p, const char *w)
{
    *p++ = ' ';
    return mdr_fmt_str(p, w);
}

static char *num(char *p, uint64_t v)
{
    *p++ = ' ';
    return mdr_fmt_dec(p, v);
}

/* One `hc` record, the writer's lock held: SEQ the event that found it (or the last one) */
static void write_one(uint64_t seq, uint64_t tid, const char *kind, const void *user,
                      uint64_t offset, uint64_t bytes, const char *found)
{
    char *p = mdr_out_reserve(192);
    if (p == NULL)
        return;
    char *start = p;
    p = mdr_fmt_str(p, MEMDUMP_TAG_HC);
    p = num(p, seq);
    p = num(p, tid);
    p = word(p, kind);
    *p++ = ' ';
    p = mdr_fmt_hex(p, (uint64_t)(uintptr_t)user);
    p = num(p, mdr_rz_size(user));
    p = num(p, offset);
    p = num(p, bytes);
    p = word(p, found);
    *p++ = '\n';
    mdr_out_commit((size_t)(p - start));
    C.rz_errors++;
}

/* USER's damage D as records, the writer's lock held */
static void write_damage(uint64_t seq, uint64_t tid, const void *user,
                         const struct mdr_rz_damage *d, const char *found)
{
    if (d->before_bytes)
        write_one(seq, tid, "underrun", user, d->before_offset, d->before_bytes, found);
    if (d->after_bytes)
        write_one(seq, tid, "overrun", user, d->after_offset, d->after_bytes, found);
    if (d->inside_bytes)
        write_one(seq, tid, "freed", user, d->inside_offset, d->inside_bytes, found);
}

/* USER checked, found at FOUND ("free": by the call that releases it; "quarantine": as it
 * left the quarantine): its records. A recorded realloc holds the writer's lock across the C
 * library's call (recorder.c): its event, the next SEQ, is the one that found it. */
static void check(void *user, const char *found)
{
    struct mdr_rz_damage d;
    if (!mdr_rz_check(user, &d))
        return;
    mdr_rz_repair(user);
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    if (__atomic_load_n(&C.lock, __ATOMIC_RELAXED) == tid) {
        if (C.state == MDR_RECORDING || C.state == MDR_DRAINING)
            write_damage(C.seq + 1, tid, user, &d, found);
        return;
    }
    if (!mdr_record_lock(tid))
        return;
    write_damage(C.seq, tid, user, &d, found);
    mdr_record_unlock();
}

/* -- the quarantine ------------------------------------------------------------------------- */

/* USER (live, checked) freed: into the quarantine, which gives back its oldest blocks past its
 * bounds, each checked as it leaves; a block larger than a quarter of the bounds goes back at
 * once. */
static void retire(void *user)
{
    uint64_t size = mdr_rz_size(user);
    if (size > max_bytes / 4 || ring == NULL) {
        ((uint64_t *)user)[-2] = (uint64_t)(uintptr_t)user ^ MDR_RZ_KEY_FREED;
        libc.free(mdr_rz_raw(user));
        return;
    }
    mdr_rz_retire(user);
    void *out[8];
    int n = 0;
    take();
    while (count > 0 && n < 8 && (count == QCAP || held_bytes + size > max_bytes)) {
        void *old = ring[head];
        head = (head + 1) % QCAP;
        count--;
        held_bytes -= mdr_rz_size(old);
        out[n++] = old;
    }
    if (count < QCAP) {
        ring[(head + count) % QCAP] = user;
        count++;
        held_bytes += size;
        user = NULL;
    }
    give();
    for (int i = 0; i < n; i++) {
        check(out[i], "quarantine");
        libc.free(mdr_rz_raw(out[i]));
    }
    if (user != NULL)  /* no room (eight blocks out did not make it): back at once */
        libc.free(mdr_rz_raw(user));
}

/* -- the allocator's functions -------------------------------------------------------------- */

/* The tail zone is the N bytes asked for: malloc's rounding slack of the block asked (0 to 15
 * bytes) lies in it, and its own slack past the zone is left unchecked (filling it to the usable
 * end cost a malloc_usable_size call and a longer fill at every allocation) */
static void *wrap(void *raw, size_t offset, size_t size)
{
    return raw == NULL ? NULL : mdr_rz_place(raw, offset, size, tail_min);
}

static int too_big(size_t size, size_t offset)
{
    return size > SIZE_MAX - offset - tail_min;
}

static void *rz_malloc(size_t size)
{
    if (too_big(size, MDR_RZ_HEAD))
        return libc.malloc(size);  /* its ENOMEM */
    return wrap(libc.malloc(MDR_RZ_HEAD + size + tail_min), MDR_RZ_HEAD, size);
}

static void *rz_calloc(size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes) || too_big(bytes, MDR_RZ_HEAD))
        return libc.calloc(n, size);
    return wrap(libc.calloc(1, MDR_RZ_HEAD + bytes + tail_min), MDR_RZ_HEAD, bytes);
}

static void rz_free(void *p)
{
    if (p == NULL)
        return;
    int state = mdr_rz_state(p);
    if (state == MDR_RZ_FOREIGN) {
        libc.free(p);
        return;
    }
    if (state == MDR_RZ_DEAD)  /* a double free: the events say it; the block stays */
        return;
    check(p, "free");
    retire(p);
}

static void *rz_realloc(void *old, size_t size)
{
    if (old == NULL)
        return rz_malloc(size);
    int state = mdr_rz_state(old);
    if (state == MDR_RZ_FOREIGN)
        return libc.realloc(old, size);
    if (size == 0) {  /* as glibc's realloc(p, 0): freed, NULL */
        rz_free(old);
        return NULL;
    }
    void *p = rz_malloc(size);
    if (p == NULL)
        return NULL;
    uint64_t had = mdr_rz_size(old);
    memcpy(p, old, had < size ? had : size);
    if (state == MDR_RZ_LIVE) {  /* a freed one (realloc after free) stays where it is */
        check(old, "free");
        retire(old);
    }
    return p;
}

static void *rz_reallocarray(void *old, size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes)) {
        errno = ENOMEM;
        return NULL;
    }
    return rz_realloc(old, bytes);
}

/* A block of SIZE aligned to ALIGN (a power of two): its header in the ALIGN bytes before it */
static void *aligned(size_t align, size_t size)
{
    if (align <= 16)
        return rz_malloc(size);
    if (too_big(size, align))
        return NULL;
    return wrap(libc.memalign(align, align + size + tail_min), align, size);
}

static int valid_align(size_t align)
{
    return align != 0 && (align & (align - 1)) == 0;
}

static int rz_posix_memalign(void **out, size_t align, size_t size)
{
    if (!valid_align(align) || align % sizeof(void *) != 0)
        return libc.posix_memalign(out, align, size);  /* its EINVAL */
    void *p = aligned(align, size);
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

static void *rz_aligned_alloc(size_t align, size_t size)
{
    return valid_align(align) ? aligned(align, size) : libc.aligned_alloc(align, size);
}

static void *rz_memalign(size_t align, size_t size)
{
    return valid_align(align) ? aligned(align, size) : libc.memalign(align, size);
}

int mdr_rz_usable_size(const void *p, size_t *out)
{
    if (!zoning || p == NULL || mdr_rz_state(p) != MDR_RZ_LIVE)
        return 0;
    *out = mdr_rz_size(p);
    return 1;
}

/* -- every block ---------------------------------------------------------------------------- */

/* Every live block of ours in the live-block table, and every block in the quarantine,
 * checked; the writer's lock taken (the live-block table changes under it). The quarantine's
 * lock is waited for at exit only: at a GDB stop (WAIT 0) a stopped thread may hold it, and
 * then the quarantine is left unchecked. Returns the records written. */
static uint64_t check_all(const char *found, int wait)
{
    if (!zoning)
        return 0;
    uint64_t tid = (uint64_t)syscall(SYS_gettid);
    if (!mdr_record_lock(tid))
        return 0;
    uint64_t before = C.rz_errors;
    struct mdr_rz_damage d;
    for (size_t i = 0; mdr_live != NULL && i < mdr_live_cap; i++) {
        uint64_t a = mdr_live[3 * i];
        if (a == 0 || (a & MDR_CUSTOM_KEY) || mdr_guard_owns((const void *)a))
            continue;
        void *user = (void *)a;
        if (mdr_rz_state(user) == MDR_RZ_LIVE && mdr_rz_check(user, &d)) {
            write_damage(C.seq, tid, user, &d, found);
            mdr_rz_repair(user);
        }
    }
    if (wait)
        take();
    else if (__atomic_exchange_n(&qlock, 1, __ATOMIC_ACQUIRE))
        goto done;
    for (size_t i = 0; i < count; i++) {
        void *user = ring[(head + i) % QCAP];
        if (mdr_rz_check(user, &d)) {
            write_damage(C.seq, tid, user, &d, found);
            mdr_rz_repair(user);
        }
    }
    give();
done:;
    uint64_t written = C.rz_errors - before;
    mdr_record_unlock();
    return written;
}

/* GDB's `memdump check-heap` calls it at a stop: the records written (docs/heap-errors.md) */
EXPORT uint64_t memdump_recorder_check_heap(void)
{
    return check_all("check", 0);
}

static void at_exit(int status, void *arg)
{
    (void)status;
    (void)arg;
    if (C.pid == (uint64_t)getpid())
        check_all("exit", 1);
}

/* -- turning it on -------------------------------------------------------------------------- */

int mdr_rz_parse(const char *text, size_t *tail, size_t *quarantine)
{
    char *end;
    if (text == NULL || *text < '0' || *text > '9')
        return 0;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (errno != 0 || n < 1 || n > 4096)
        return 0;
    unsigned long long q = 256ull << 10;  /* in L2: 4 MiB cost alloc_bench 1.8x, this 1.4x */
    if (*end == ',') {
        const char *t = end + 1;
        if (*t < '0' || *t > '9')
            return 0;
        q = strtoull(t, &end, 10);
        if (errno != 0 || q > (1ull << 40))
            return 0;
    }
    if (*end != '\0')
        return 0;
    *tail = (size_t)n;
    *quarantine = (size_t)q;
    return 1;
}

void mdr_rz_start(struct mdr_alloc_fns *real)
{
    static int tried;
    const char *text = getenv("MEMDUMP_REDZONE");
    if (zoning || tried || text == NULL || *text == '\0')
        return;
    tried = 1;
    if (!mdr_rz_parse(text, &tail_min, &max_bytes)) {
        static const char msg[] = "memdump: MEMDUMP_REDZONE is N (1 to 4096 bytes) or "
                                  "N,QUARANTINE_BYTES; recording without red zones\n";
        if (write(2, msg, sizeof msg - 1) < 0)
            return;
        return;
    }
    ring = mdr_map(QCAP * sizeof(void *));
    libc = *real;
    C.rz_tail = tail_min;
    C.rz_quarantine = max_bytes;
    on_exit(at_exit, NULL);
    struct mdr_alloc_fns z = {
        .malloc = rz_malloc, .calloc = rz_calloc, .realloc = rz_realloc,
        .reallocarray = rz_reallocarray, .free = rz_free, .posix_memalign = rz_posix_memalign,
        .aligned_alloc = rz_aligned_alloc, .memalign = rz_memalign,
        .valloc = libc.valloc, .pvalloc = libc.pvalloc,
    };
    zoning = 1;
    __atomic_store_n(&real->free, z.free, __ATOMIC_RELEASE);
    *real = z;
}

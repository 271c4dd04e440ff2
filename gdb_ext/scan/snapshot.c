/* @brief libmemdump_scan's copy of the heap (memdump_scan.c says when it is taken and what
 * it costs).
 *
 * The blocks' bytes are copied into this process before the marking starts, with few large
 * process_vm_readv(2) calls: the ranges of blocks at most MERGE_GAP apart (within one mapping,
 * each with its chunk header) are merged, and one call takes up to BATCH_IOVS of them into one
 * buffer. The scan then finds a block's bytes in the snapshot, without a system call; what the
 * snapshot does not hold whole is read as without one (pread on /proc/PID/mem), so the answers
 * are the same either way.
 *
 * A read stops at the first page it cannot copy: the copy resumes after that page, which stays
 * out of the snapshot (pread may still read it: /proc/PID/mem reads PROT_NONE pages, which
 * process_vm_readv does not). When process_vm_readv is refused (ENOSYS, EPERM: another kernel
 * or security module) or there is no pid, the same ranges are filled with one pread each. */
#include "scan.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>

struct ranges { struct seg *at; uint64_t n, cap; };

#define SPLIT_MIN (64u << 20) /* a copy this large is made by two threads */

static int add(struct ranges *r, uint64_t lo, uint64_t hi)
{
    if (r->n == r->cap) {
        uint64_t cap = r->cap ? 2 * r->cap : 1024;
        struct seg *at = realloc(r->at, cap * sizeof *at);
        if (!at)
            return -1;
        r->at = at;
        r->cap = cap;
    }
    r->at[r->n++] = (struct seg){lo, hi, NULL};
    return 0;
}

/* The ranges to copy: each block from its chunk header (the 16 bytes before it, which the
 * next-header test reads) to its end rounded up to a word, within the mapping holding its
 * start; blocks at most MERGE_GAP apart in one mapping share a range. Blocks outside every
 * mapping are left to pread (which fails as it did). */
static int plan(struct scanner *s, struct ranges *r, uint64_t *total)
{
    const uint64_t *maps = s->a->maps;
    int64_t cur_map = -1;
    *total = 0;
    for (uint64_t i = 0; i < s->n; i++) {
        uint64_t start = s->starts[i], size = s->sizes[i];
        int64_t m = in_ranges(maps, s->a->n_maps, start);
        if (m < 0 || size > UINT64_MAX - 8 - start)
            continue;
        uint64_t lo = (start >= 16 ? start - 16 : 0) & ~(uint64_t)7;
        uint64_t hi = (start + size + 7) & ~(uint64_t)7;
        if (lo < maps[2 * m])
            lo = maps[2 * m];
        if (hi > maps[2 * m + 1])
            hi = maps[2 * m + 1];
        if (hi <= lo)
            continue;
        struct seg *last = r->n ? &r->at[r->n - 1] : NULL;
        if (last && m == cur_map && lo <= last->hi + MERGE_GAP) {
            if (hi > last->hi) { /* the gap between them is read too */
                *total += hi - last->hi;
                last->hi = hi;
            }
            continue;
        }
        if (add(r, lo, hi))
            return -1;
        *total += hi - lo;
        cur_map = m;
    }
    return 0;
}

/* Bytes of REMOTE (N pieces, together TOTAL long) copied into DST, or -1 with errno */
static ssize_t transfer(struct scanner *s, int how, uint8_t *dst, struct iovec *remote,
                        unsigned n, uint64_t total)
{
    if (how == SNAP_VM) {
        struct iovec local = {dst, total};
        return process_vm_readv(s->pid, &local, 1, remote, n, 0);
    }
    return pread(s->fd, dst, remote[0].iov_len, (off_t)(uintptr_t)remote[0].iov_base);
}

/* Fill the ranges R (their data set, back to back in s->snap); the pages that could not be
 * copied go to HOLES, the system calls are counted in CALLS. 0, or 1 when the tick callback
 * (TICKS: the caller's thread only) stopped it, -1 out of memory. */
static int fill(struct scanner *s, struct ranges *r, struct ranges *holes, int *how,
                uint64_t *calls, int ticks)
{
    struct iovec remote[BATCH_IOVS];
    uint64_t k = 0, addr = r->n ? r->at[0].lo : 0, since_tick = 0;
    while (k < r->n) {
        unsigned n = 0;
        uint64_t total = 0, kk = k, a = addr;
        unsigned most = *how == SNAP_VM ? BATCH_IOVS : 1;
        while (kk < r->n && n < most && total < BATCH_BYTES) {
            uint64_t len = r->at[kk].hi - a;
            if (len > BATCH_BYTES - total)
                len = BATCH_BYTES - total;
            remote[n++] = (struct iovec){(void *)(uintptr_t)a, len};
            total += len;
            a += len;
            if (a == r->at[kk].hi && ++kk < r->n)
                a = r->at[kk].lo;
        }
        uint8_t *dst = (uint8_t *)r->at[k].data + (addr - r->at[k].lo);
        ssize_t got = transfer(s, *how, dst, remote, n, total);
        ++*calls;
        if (got < 0 && *how == SNAP_VM && errno != EFAULT) {
            *how = SNAP_PREAD; /* refused: the same ranges with pread */
            continue;
        }
        since_tick += got > 0 ? (uint64_t)got : 0;
        if (ticks && (since_tick >= TICK_EVERY || *calls % 4096 == 0)) {
            since_tick = 0;
            if (s->a->tick && s->a->tick(s->scanned, 0))
                return 1;
        }
        if (got == (ssize_t)total) {
            k = kk;
            addr = a;
            continue;
        }
        /* stopped at a page it could not copy: skip that page */
        for (uint64_t left = got > 0 ? (uint64_t)got : 0; left;) {
            uint64_t step = r->at[k].hi - addr < left ? r->at[k].hi - addr : left;
            addr += step;
            left -= step;
            if (addr == r->at[k].hi && ++k < r->n)
                addr = r->at[k].lo;
        }
        if (k == r->n)
            break;
        uint64_t bad_end = (addr & ~(uint64_t)(PAGE - 1)) + PAGE;
        if (bad_end > r->at[k].hi)
            bad_end = r->at[k].hi;
        if (add(holes, addr, bad_end))
            return -1;
        addr = bad_end;
        if (addr == r->at[k].hi && ++k < r->n)
            addr = r->at[k].lo;
    }
    return 0;
}

/* The second half of a copy, in a thread of its own: two cores fault in and fill the fresh
 * pages at once (the copy is most of its time in the kernel, zeroing and copying pages). */
struct half {
    struct scanner *s;
    struct ranges r, holes;
    int how, rc;
    uint64_t calls;
};

static void *fill_half(void *arg)
{
    struct half *h = arg;
    h->rc = fill(h->s, &h->r, &h->holes, &h->how, &h->calls, 0);
    return NULL;
}

/* R split at the page boundary nearest half its bytes: ranges [0, k] with the k-th cut at MID
 * stay in R's copy FIRST; the rest go to SECOND. -1: out of memory, 1: too small to split. */
static int split(const struct ranges *r, uint64_t total, uint64_t s_split,
                 struct ranges *first, struct ranges *second)
{
    if (total < (s_split ? s_split : SPLIT_MIN) || r->n == 0)
        return 1;
    uint64_t k = 0, before = 0;
    while (before + (r->at[k].hi - r->at[k].lo) < total / 2) {
        before += r->at[k].hi - r->at[k].lo;
        k++;
    }
    uint64_t mid = (r->at[k].lo + (total / 2 - before)) & ~(uint64_t)(PAGE - 1);
    if (mid <= r->at[k].lo || mid >= r->at[k].hi)
        mid = r->at[k].lo; /* cut before range k */
    first->n = mid == r->at[k].lo ? k : k + 1;
    second->n = r->n - k;
    first->at = malloc((first->n + 1) * sizeof *first->at);
    second->at = malloc(second->n * sizeof *second->at);
    if (!first->at || !second->at)
        return -1;
    first->cap = first->n + 1;
    second->cap = second->n;
    memcpy(first->at, r->at, first->n * sizeof *r->at);
    memcpy(second->at, r->at + k, second->n * sizeof *r->at);
    if (first->n == k + 1)
        first->at[k].hi = mid;
    second->at[0].data += mid - second->at[0].lo;
    second->at[0].lo = mid;
    return first->n ? 0 : 1;
}

/* Fill R, in two threads when it is large; the holes of both, in order, in HOLES. */
static int fill_all(struct scanner *s, struct ranges *r, uint64_t total, struct ranges *holes,
                    int *how)
{
    struct ranges first = {0};
    struct half second = {.s = s, .how = *how};
    int rc = split(r, total, s->a->copy_split, &first, &second.r);
    pthread_t thread;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the process's signals stay with its threads */
    int started = rc == 0 && pthread_create(&thread, NULL, fill_half, &second) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc < 0) {
        free(first.at);
        free(second.r.at);
        return -1;
    }
    if (!started) {
        free(first.at);
        free(second.r.at);
        return fill(s, r, holes, how, &s->a->snapshot_calls, 1);
    }
    rc = fill(s, &first, holes, how, &s->a->snapshot_calls, 1);
    pthread_join(thread, NULL);
    s->a->snapshot_calls += second.calls;
    if (second.how == SNAP_PREAD)
        *how = SNAP_PREAD;
    for (uint64_t k = 0; rc == 0 && k < second.holes.n; k++)
        rc = add(holes, second.holes.at[k].lo, second.holes.at[k].hi);
    if (rc == 0)
        rc = second.rc;
    free(first.at);
    free(second.r.at);
    free(second.holes.at);
    return rc;
}

/* 0: the snapshot is taken, or not (over budget, no memory: then the scan reads as before);
 * 1: the tick callback stopped it; -1: out of memory. */
static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int take_snapshot(struct scanner *s)
{
    uint64_t began = now_ns();
    struct ranges r = {0}, holes = {0};
    uint64_t total;
    int rc = 0;
    s->a->snapshot = SNAP_NONE;
    if (!s->a->budget)
        return 0;
    if (plan(s, &r, &total)) {
        rc = -1;
        goto out;
    }
    if (!r.n || total > s->a->budget)
        goto out;
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (mem == MAP_FAILED)
        goto out; /* the scan reads as before */
    /* 4 KiB pages, not 2 MiB ones (MADV_HUGEPAGE): a small page is zeroed by its fault just
     * before the copy writes it, in the cache; a huge page is zeroed whole first, twice the
     * memory traffic (on the benchmark's VM, 400 MiB copied in 0.2 s, not 0.7 to 1 s) */
    s->snap = mem;
    s->snap_len = total;
    uint64_t off = 0;
    for (uint64_t k = 0; k < r.n; k++) {
        r.at[k].data = s->snap + off;
        off += r.at[k].hi - r.at[k].lo;
    }
    int how = s->pid > 0 ? SNAP_VM : SNAP_PREAD;
    rc = fill_all(s, &r, total, &holes, &how);
    if (rc)
        goto out;
    rc = -1;
    /* the pieces: the ranges without their holes (both sorted) */
    s->segs = malloc((r.n + holes.n) * sizeof *s->segs);
    if (!s->segs)
        goto out;
    uint64_t h = 0, held = 0;
    for (uint64_t k = 0; k < r.n; k++) {
        uint64_t lo = r.at[k].lo;
        for (; h < holes.n && holes.at[h].lo < r.at[k].hi; h++) {
            if (holes.at[h].lo > lo)
                s->segs[s->n_segs++] = (struct seg){lo, holes.at[h].lo,
                                                    r.at[k].data + (lo - r.at[k].lo)};
            lo = holes.at[h].hi;
        }
        if (r.at[k].hi > lo)
            s->segs[s->n_segs++] = (struct seg){lo, r.at[k].hi, r.at[k].data + (lo - r.at[k].lo)};
    }
    for (uint64_t k = 0; k < s->n_segs; k++)
        held += s->segs[k].hi - s->segs[k].lo;
    s->a->snapshot = (uint64_t)how;
    s->a->snapshot_bytes = held;
    rc = 0;
out:
    free(r.at);
    free(holes.at);
    if (rc)
        drop_snapshot(s);
    s->a->snapshot_ns = now_ns() - began;
    return rc;
}

void drop_snapshot(struct scanner *s)
{
    if (s->snap)
        munmap(s->snap, s->snap_len);
    free(s->segs);
    s->snap = NULL;
    s->segs = NULL;
    s->n_segs = 0;
}

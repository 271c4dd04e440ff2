/**
 * @brief Shared-memory queue: segment checks, robust/adaptive/lock-free locking, contention stats.
 *
 * The segment layout is specified in docs/shmemq-format.md; the offsets below are checked against
 * it at compile time. Built with SHMEMQ_STATS defined, it is the counting library
 * dbgkit_shmemq_stats.
 */
#define _GNU_SOURCE

#include "shmemq.h"
#include "shmemq_testing.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- The segment format (docs/shmemq-format.md) ---- */

#define SHMEMQ_MAGIC_TEXT "DBGSHMQ" /* 8 bytes with its NUL, stored at offset 0 */
#define SHMEMQ_VERSION 1u
#define SHMEMQ_HEADER_SIZE 320u
#define SHMEMQ_SLOT_HEADER 8u
#define SHMEMQ_MAX_ATTACH 8
#define SHMEMQ_FLAG_ROBUST 1u
#define SHMEMQ_NAME_MAX 255              /* with the leading '/'; NAME_MAX of /dev/shm is 255 */
#define SHMEMQ_ELEMENT_MAX (1u << 30)    /* so that a length always fits an int */
#define SHMEMQ_SEGMENT_MAX (1ull << 40)  /* refuse absurd geometries before ftruncate */
/* glibc's default for its own adaptive spin (tunable glibc.pthread.mutex_spin_count). */
#define SHMEMQ_SPIN_MAX 100

struct shmemq_header {
    _Atomic uint64_t magic;          /* 0: SHMEMQ_MAGIC_TEXT, stored last with release ordering */
    uint32_t version;                /* 8 */
    uint32_t header_size;            /* 12 */
    uint64_t max_count;              /* 16 */
    uint32_t element_size;           /* 24 */
    uint32_t slot_size;              /* 28 */
    uint32_t lock_kind;              /* 32 */
    uint32_t flags;                  /* 36 */
    uint64_t segment_size;           /* 40 */
    _Atomic uint32_t creator_pid;    /* 48: stored first, before anything else is initialised */
    _Atomic uint32_t recoveries;     /* 52: dead lock holders recovered from */
    _Atomic uint32_t repairs;        /* 56: inconsistent indices found after such a recovery */
    _Atomic uint32_t spins;          /* 60: adaptive kind's spin estimate */
    _Atomic uint32_t attached[SHMEMQ_MAX_ATTACH]; /* 64: pids of attached processes, 0 = free */
    unsigned char reserved0[32];     /* 96 */
    pthread_mutex_t mutex;           /* 128 (glibc's layout, not part of the format) */
    unsigned char reserved1[64 - sizeof(pthread_mutex_t)];
    _Atomic uint64_t write_count;    /* 192: messages ever enqueued */
    unsigned char reserved2[56];
    _Atomic uint64_t read_count;     /* 256: messages ever dequeued */
    unsigned char reserved3[56];
};

_Static_assert(sizeof(pthread_mutex_t) <= 64, "the mutex must fit its 64-byte field");
_Static_assert(offsetof(struct shmemq_header, creator_pid) == 48, "format: creator_pid");
_Static_assert(offsetof(struct shmemq_header, attached) == 64, "format: attached");
_Static_assert(offsetof(struct shmemq_header, mutex) == 128, "format: mutex");
_Static_assert(offsetof(struct shmemq_header, write_count) == 192, "format: write_count");
_Static_assert(offsetof(struct shmemq_header, read_count) == 256, "format: read_count");
_Static_assert(sizeof(struct shmemq_header) == SHMEMQ_HEADER_SIZE, "format: header size");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4, "atomic sizes");

struct _shmemq {
    struct shmemq_header* hdr;
    unsigned char* slots;
    size_t size;
    uint64_t max_count;
    uint32_t element_size;
    uint32_t slot_size;
    shmemq_lock_kind kind;
    int robust;
    int attach_index; /* index in hdr->attached, -1 if the table was full */
    uint32_t attach_pid;
    dev_t dev; /* the object's identity, so that destroy unlinks this queue and no successor */
    ino_t ino;
    char name[SHMEMQ_NAME_MAX + 1];
};

/* ---- Errors ---- */

static _Thread_local char g_error[512];

__attribute__((format(printf, 2, 3))) static void fail(int err, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    errno = err;
}

const char* shmemq_last_error(void) { return g_error; }

/* ---- Statistics ---- */

#ifdef SHMEMQ_STATS
static struct {
    _Atomic unsigned long long acquisitions, contended, spin_acquired, blocking, slept, owner_died,
        full, empty;
    _Atomic unsigned long long spin_histogram[SHMEMQ_STATS_BUCKETS];
} g_stats;
#define STAT_ADD(field) atomic_fetch_add_explicit(&g_stats.field, 1, memory_order_relaxed)

static void stat_spins(unsigned spins) {
    int bucket = 0;
    while (bucket < SHMEMQ_STATS_BUCKETS - 1 && spins >= (1u << bucket)) {
        ++bucket;
    }
    atomic_fetch_add_explicit(&g_stats.spin_histogram[bucket], 1, memory_order_relaxed);
}

static long voluntary_switches(void) {
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : 0;
}
#else
#define STAT_ADD(field) ((void)0)
#endif

bool shmemq_stats_enabled(void) {
#ifdef SHMEMQ_STATS
    return true;
#else
    return false;
#endif
}

void shmemq_stats_get(shmemq_stats* out) {
    memset(out, 0, sizeof *out);
#ifdef SHMEMQ_STATS
    out->acquisitions = atomic_load(&g_stats.acquisitions);
    out->contended = atomic_load(&g_stats.contended);
    out->spin_acquired = atomic_load(&g_stats.spin_acquired);
    out->blocking = atomic_load(&g_stats.blocking);
    out->slept = atomic_load(&g_stats.slept);
    out->owner_died = atomic_load(&g_stats.owner_died);
    out->full = atomic_load(&g_stats.full);
    out->empty = atomic_load(&g_stats.empty);
    for (int i = 0; i < SHMEMQ_STATS_BUCKETS; ++i) {
        out->spin_histogram[i] = atomic_load(&g_stats.spin_histogram[i]);
    }
#endif
}

void shmemq_stats_reset(void) {
#ifdef SHMEMQ_STATS
    atomic_store(&g_stats.acquisitions, 0);
    atomic_store(&g_stats.contended, 0);
    atomic_store(&g_stats.spin_acquired, 0);
    atomic_store(&g_stats.blocking, 0);
    atomic_store(&g_stats.slept, 0);
    atomic_store(&g_stats.owner_died, 0);
    atomic_store(&g_stats.full, 0);
    atomic_store(&g_stats.empty, 0);
    for (int i = 0; i < SHMEMQ_STATS_BUCKETS; ++i) {
        atomic_store(&g_stats.spin_histogram[i], 0);
    }
#endif
}

const char* shmemq_stats_bucket_label(int bucket) {
    static const char* const labels[SHMEMQ_STATS_BUCKETS] = {
        "0", "1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128-255", "256+"};
    return bucket >= 0 && bucket < SHMEMQ_STATS_BUCKETS ? labels[bucket] : "?";
}

/* ---- Small helpers ---- */

int shmemq_lock_kind_from_name(const char* name) {
    if (name == NULL) return -1;
    if (strcmp(name, "normal") == 0) return SHMEMQ_LOCK_NORMAL;
    if (strcmp(name, "adaptive") == 0) return SHMEMQ_LOCK_ADAPTIVE;
    if (strcmp(name, "lockfree") == 0) return SHMEMQ_LOCK_LOCKFREE;
    return -1;
}

const char* shmemq_lock_kind_name(shmemq_lock_kind kind) {
    switch (kind) {
    case SHMEMQ_LOCK_NORMAL: return "normal";
    case SHMEMQ_LOCK_ADAPTIVE: return "adaptive";
    case SHMEMQ_LOCK_LOCKFREE: return "lockfree";
    }
    return "?";
}

void shmemq_options_init(shmemq_options* options) {
    options->lock = SHMEMQ_LOCK_NORMAL;
    options->robust = 1;
    options->recreate_stale = 0;
    options->open_timeout_ms = 1000;
}

static uint64_t magic_value(void) {
    uint64_t v;
    memcpy(&v, SHMEMQ_MAGIC_TEXT, sizeof v);
    return v;
}

/* True when PID names no process (kill(2) ESRCH). EPERM: it exists but belongs to someone else. */
static bool pid_dead(uint32_t pid) {
    return pid != 0 && kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static bool name_valid(const char* name) {
    if (name == NULL) {
        fail(EINVAL, "queue name is NULL");
        return false;
    }
    size_t len = strnlen(name, SHMEMQ_NAME_MAX + 1);
    if (len == 0 || name[0] != '/') {
        fail(EINVAL, "queue name must start with '/'");
        return false;
    }
    if (len == 1) {
        fail(EINVAL, "queue name is empty after the '/'");
        return false;
    }
    if (len > SHMEMQ_NAME_MAX) {
        fail(EINVAL, "queue name is longer than %d characters", SHMEMQ_NAME_MAX);
        return false;
    }
    if (strchr(name + 1, '/') != NULL) {
        fail(EINVAL, "queue name '%s' has a '/' after the first character", name);
        return false;
    }
    if (strcmp(name, "/.") == 0 || strcmp(name, "/..") == 0) {
        fail(EINVAL, "queue name '%s' is not a file name", name);
        return false;
    }
    return true;
}

/* ---- Attach table ---- */

static void attach_register(shmemq_t* q) {
    uint32_t self = (uint32_t)getpid();
    q->attach_index = -1;
    q->attach_pid = self;
    for (int i = 0; i < SHMEMQ_MAX_ATTACH; ++i) {
        uint32_t seen = atomic_load(&q->hdr->attached[i]);
        if ((seen == 0 || pid_dead(seen)) &&
            atomic_compare_exchange_strong(&q->hdr->attached[i], &seen, self)) {
            q->attach_index = i;
            return;
        }
    }
}

static void attach_unregister(shmemq_t* q) {
    /* A child that inherited the handle over fork() leaves its parent's entry alone. */
    if (q->attach_index >= 0 && (uint32_t)getpid() == q->attach_pid) {
        uint32_t expected = q->attach_pid;
        atomic_compare_exchange_strong(&q->hdr->attached[q->attach_index], &expected, 0);
    }
}

/* ---- Creating and attaching ---- */

enum attach_result { ATTACH_OK, ATTACH_FAILED, ATTACH_STALE };

struct geometry {
    uint64_t max_count;
    uint32_t element_size;
    uint32_t slot_size;
    uint32_t lock_kind;
    uint32_t flags;
    uint64_t segment_size;
};

static shmemq_t* handle_new(const char* name, const struct geometry* g, void* map,
                            const struct stat* st) {
    shmemq_t* q = calloc(1, sizeof *q);
    if (q == NULL) {
        fail(ENOMEM, "out of memory");
        return NULL;
    }
    q->hdr = map;
    q->slots = (unsigned char*)map + SHMEMQ_HEADER_SIZE;
    q->size = (size_t)g->segment_size;
    q->max_count = g->max_count;
    q->element_size = g->element_size;
    q->slot_size = g->slot_size;
    q->kind = (shmemq_lock_kind)g->lock_kind;
    q->robust = (g->flags & SHMEMQ_FLAG_ROBUST) != 0;
    q->dev = st->st_dev;
    q->ino = st->st_ino;
    snprintf(q->name, sizeof q->name, "%s", name);
    return q;
}

static shmemq_t* create_segment(int fd, const char* name, const struct geometry* g) {
    /* shm_open's mode is filtered by the umask; make it exactly 0600 whatever the umask. */
    struct stat st;
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)g->segment_size) != 0 ||
        fstat(fd, &st) != 0) {
        fail(errno, "cannot size queue '%s' to %llu bytes: %s", name,
             (unsigned long long)g->segment_size, strerror(errno));
        return NULL;
    }
    void* map = mmap(NULL, (size_t)g->segment_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        fail(errno, "cannot map queue '%s': %s", name, strerror(errno));
        return NULL;
    }
    struct shmemq_header* h = map;
    /* First the creator's pid, so that an opener can tell a dead creator from a slow one. */
    atomic_store_explicit(&h->creator_pid, (uint32_t)getpid(), memory_order_relaxed);
    h->version = SHMEMQ_VERSION;
    h->header_size = SHMEMQ_HEADER_SIZE;
    h->max_count = g->max_count;
    h->element_size = g->element_size;
    h->slot_size = g->slot_size;
    h->lock_kind = g->lock_kind;
    h->flags = g->flags;
    h->segment_size = g->segment_size;
    if (g->lock_kind != SHMEMQ_LOCK_LOCKFREE) {
        pthread_mutexattr_t attr;
        int rc = pthread_mutexattr_init(&attr);
        if (rc == 0) rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
        if (rc == 0) {
            rc = pthread_mutexattr_settype(&attr, g->lock_kind == SHMEMQ_LOCK_ADAPTIVE
                                                      ? PTHREAD_MUTEX_ADAPTIVE_NP
                                                      : PTHREAD_MUTEX_NORMAL);
        }
        if (rc == 0 && (g->flags & SHMEMQ_FLAG_ROBUST) != 0) {
            rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
        }
        if (rc == 0) rc = pthread_mutex_init(&h->mutex, &attr);
        pthread_mutexattr_destroy(&attr);
        if (rc != 0) {
            munmap(map, (size_t)g->segment_size);
            fail(rc, "cannot initialise the mutex of queue '%s': %s", name, strerror(rc));
            return NULL;
        }
    }
    shmemq_t* q = handle_new(name, g, map, &st);
    if (q == NULL) {
        munmap(map, (size_t)g->segment_size);
        return NULL;
    }
    attach_register(q);
    /* Publish: everything above happens-before an opener's acquire load that sees the magic. */
    atomic_store_explicit(&h->magic, magic_value(), memory_order_release);
    return q;
}

static void describe_geometry(char* out, size_t size, uint64_t max_count, uint32_t element_size,
                              uint32_t lock_kind, uint32_t flags) {
    snprintf(out, size, "max_count=%llu element_size=%u lock=%s%s", (unsigned long long)max_count,
             element_size, shmemq_lock_kind_name((shmemq_lock_kind)lock_kind),
             lock_kind == SHMEMQ_LOCK_LOCKFREE ? ""
             : (flags & SHMEMQ_FLAG_ROBUST) != 0 ? " (robust)"
                                                  : " (not robust)");
}

/* Checks an existing segment and maps it. ATTACH_STALE: stale or half-initialised (g_error says
 * which); ATTACH_FAILED: refused, errno and g_error set. */
static enum attach_result attach_segment(int fd, const char* name, const struct geometry* want,
                                         unsigned timeout_ms, shmemq_t** out) {
    const double deadline = now_ms() + timeout_ms;
    for (;;) {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            fail(errno, "cannot stat queue '%s': %s", name, strerror(errno));
            return ATTACH_FAILED;
        }
        if (!S_ISREG(st.st_mode)) {
            fail(EACCES, "queue '%s' is not a regular shared-memory file", name);
            return ATTACH_FAILED;
        }
        if (st.st_uid != geteuid()) {
            fail(EACCES, "queue '%s' belongs to uid %u, not to this user (uid %u); not opened",
                 name, (unsigned)st.st_uid, (unsigned)geteuid());
            return ATTACH_FAILED;
        }
        const bool waiting = now_ms() < deadline;
        /* The creator calls fchmod before ftruncate: once the object has its size, its mode is
         * final; before that it may still be shm_open's umask-filtered one. */
        if (st.st_size >= (off_t)SHMEMQ_HEADER_SIZE && (st.st_mode & 07777) != 0600) {
            fail(EACCES, "queue '%s' has mode %04o, not 0600; not opened", name,
                 (unsigned)(st.st_mode & 07777));
            return ATTACH_FAILED;
        }
        if (st.st_size < (off_t)SHMEMQ_HEADER_SIZE) {
            if (waiting) {
                sleep_ms(1);
                continue;
            }
            fail(ESTALE, "queue '%s' is half-initialised: %lld bytes, smaller than its header, "
                 "after %u ms (its creator died before sizing it)", name,
                 (long long)st.st_size, timeout_ms);
            return ATTACH_STALE;
        }
        struct shmemq_header* h =
            mmap(NULL, SHMEMQ_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (h == MAP_FAILED) {
            fail(errno, "cannot map queue '%s': %s", name, strerror(errno));
            return ATTACH_FAILED;
        }
        const uint64_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);
        if (magic == 0) {
            const uint32_t creator = atomic_load_explicit(&h->creator_pid, memory_order_relaxed);
            munmap(h, SHMEMQ_HEADER_SIZE);
            if (creator != 0 && pid_dead(creator)) {
                fail(ESTALE, "queue '%s' is half-initialised: its creator, pid %u, died before "
                     "publishing it", name, (unsigned)creator);
                return ATTACH_STALE;
            }
            if (waiting) {
                sleep_ms(1);
                continue;
            }
            if (creator != 0) {
                fail(EAGAIN, "queue '%s' is still being initialised by pid %u after %u ms", name,
                     (unsigned)creator, timeout_ms);
                return ATTACH_FAILED;
            }
            fail(ESTALE, "queue '%s' is half-initialised: no creator pid and no magic after %u ms",
                 name, timeout_ms);
            return ATTACH_STALE;
        }
        if (magic != magic_value()) {
            munmap(h, SHMEMQ_HEADER_SIZE);
            fail(EPROTO, "'%s' is not a shmemq queue (bad magic)", name);
            return ATTACH_FAILED;
        }
        if (h->version != SHMEMQ_VERSION || h->header_size != SHMEMQ_HEADER_SIZE) {
            fail(EPROTO, "queue '%s' has format version %u (header %u bytes); this library reads "
                 "version %u", name, h->version, h->header_size, SHMEMQ_VERSION);
            munmap(h, SHMEMQ_HEADER_SIZE);
            return ATTACH_FAILED;
        }
        if (h->max_count != want->max_count || h->element_size != want->element_size ||
            h->lock_kind != want->lock_kind || h->flags != want->flags) {
            char have[128], asked[128];
            describe_geometry(have, sizeof have, h->max_count, h->element_size, h->lock_kind,
                              h->flags);
            describe_geometry(asked, sizeof asked, want->max_count, want->element_size,
                              want->lock_kind, want->flags);
            munmap(h, SHMEMQ_HEADER_SIZE);
            fail(EINVAL, "queue '%s' exists with %s; asked for %s", name, have, asked);
            return ATTACH_FAILED;
        }
        if (h->slot_size != want->slot_size || h->segment_size != want->segment_size ||
            (uint64_t)st.st_size != want->segment_size) {
            fail(EPROTO, "queue '%s' is inconsistent: slot size %u, segment %llu bytes, file %lld "
                 "bytes; expected %u, %llu", name, h->slot_size,
                 (unsigned long long)h->segment_size, (long long)st.st_size, want->slot_size,
                 (unsigned long long)want->segment_size);
            munmap(h, SHMEMQ_HEADER_SIZE);
            return ATTACH_FAILED;
        }
        /* Stale: processes attached and every one of them died without detaching. */
        char dead[SHMEMQ_MAX_ATTACH * 12] = "";
        bool any_recorded = false, any_alive = false;
        for (int i = 0; i < SHMEMQ_MAX_ATTACH; ++i) {
            const uint32_t pid = atomic_load(&h->attached[i]);
            if (pid == 0) continue;
            any_recorded = true;
            if (pid_dead(pid)) {
                size_t used = strlen(dead);
                snprintf(dead + used, sizeof dead - used, "%s%u", used ? ", " : "", (unsigned)pid);
            } else {
                any_alive = true;
            }
        }
        munmap(h, SHMEMQ_HEADER_SIZE);
        if (any_recorded && !any_alive) {
            fail(ESTALE, "queue '%s' is stale: the processes attached to it (pid %s) died "
                 "without detaching", name, dead);
            return ATTACH_STALE;
        }
        void* map = mmap(NULL, (size_t)want->segment_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                         0);
        if (map == MAP_FAILED) {
            fail(errno, "cannot map queue '%s': %s", name, strerror(errno));
            return ATTACH_FAILED;
        }
        shmemq_t* q = handle_new(name, want, map, &st);
        if (q == NULL) {
            munmap(map, (size_t)want->segment_size);
            return ATTACH_FAILED;
        }
        attach_register(q);
        *out = q;
        return ATTACH_OK;
    }
}

shmemq_t* shmemq_new(char const* name, unsigned long max_count, unsigned int element_size) {
    shmemq_options options;
    shmemq_options_init(&options);
    return shmemq_open(name, max_count, element_size, &options);
}

shmemq_t* shmemq_open(char const* name, unsigned long max_count, unsigned int element_size,
                      const shmemq_options* options) {
    g_error[0] = '\0';
    shmemq_options defaults;
    if (options == NULL) {
        shmemq_options_init(&defaults);
        options = &defaults;
    }
    if (!name_valid(name)) return NULL;
    if (max_count == 0 || element_size == 0) {
        fail(EINVAL, "max_count and element_size must be at least 1 (got %lu, %u)", max_count,
             element_size);
        return NULL;
    }
    if (element_size > SHMEMQ_ELEMENT_MAX) {
        fail(EINVAL, "element_size %u is larger than %u", element_size, SHMEMQ_ELEMENT_MAX);
        return NULL;
    }
    if (options->lock != SHMEMQ_LOCK_NORMAL && options->lock != SHMEMQ_LOCK_ADAPTIVE &&
        options->lock != SHMEMQ_LOCK_LOCKFREE) {
        fail(EINVAL, "unknown lock kind %d", (int)options->lock);
        return NULL;
    }
    struct geometry g;
    g.max_count = max_count;
    g.element_size = element_size;
    g.slot_size = (SHMEMQ_SLOT_HEADER + element_size + 7u) & ~7u;
    g.lock_kind = (uint32_t)options->lock;
    g.flags = options->lock != SHMEMQ_LOCK_LOCKFREE && options->robust ? SHMEMQ_FLAG_ROBUST : 0;
    if (max_count > (SHMEMQ_SEGMENT_MAX - SHMEMQ_HEADER_SIZE) / g.slot_size) {
        fail(EINVAL, "max_count %lu x slot size %u is larger than %llu bytes", max_count,
             g.slot_size, SHMEMQ_SEGMENT_MAX);
        return NULL;
    }
    g.segment_size = SHMEMQ_HEADER_SIZE + (uint64_t)max_count * g.slot_size;

    /* Create exclusively first; only if the name exists, open it and check it. The loop covers
     * a segment unlinked between the two calls, and a stale one we were asked to recreate. */
    for (int attempt = 0; attempt < 4; ++attempt) {
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            shmemq_t* q = create_segment(fd, name, &g);
            const int err = errno;
            close(fd);
            if (q == NULL) {
                shm_unlink(name);
                errno = err;
            }
            return q;
        }
        if (errno != EEXIST) {
            fail(errno, "cannot create queue '%s': %s", name, strerror(errno));
            return NULL;
        }
        fd = shm_open(name, O_RDWR, 0);
        if (fd < 0) {
            if (errno == ENOENT) continue;
            fail(errno, "cannot open queue '%s': %s", name, strerror(errno));
            return NULL;
        }
        shmemq_t* q = NULL;
        const enum attach_result r = attach_segment(fd, name, &g, options->open_timeout_ms, &q);
        const int err = errno;
        close(fd);
        if (r == ATTACH_OK) return q;
        if (r == ATTACH_STALE && options->recreate_stale) {
            shm_unlink(name);
            continue;
        }
        errno = err;
        return NULL;
    }
    fail(EAGAIN, "queue '%s' kept appearing and disappearing while being opened", name);
    return NULL;
}

void shmemq_destroy(shmemq_t* self, int unlink) {
    if (self == NULL) return;
    attach_unregister(self);
    munmap(self->hdr, self->size);
    if (unlink) {
        /* Only if the name still refers to this queue: after someone unlinked it and created a
         * new queue under the same name, that one is not ours to remove. */
        const int fd = shm_open(self->name, O_RDONLY, 0);
        struct stat st;
        if (fd >= 0) {
            if (fstat(fd, &st) == 0 && st.st_dev == self->dev && st.st_ino == self->ino) {
                shm_unlink(self->name);
            }
            close(fd);
        }
    }
    free(self);
}

/* ---- Locking ---- */

/* After EOWNERDEAD: the dead holder may have stopped anywhere. Enqueue and dequeue publish with a
 * single store of a counter after writing the slot, so a death cannot leave half a message
 * visible; what can be wrong is memory the dead process scribbled on. Check the invariants
 * (0 <= write - read <= max_count, every queued length <= element_size) and cut the queue at the
 * first bad slot, or empty it if the counters themselves are impossible. */
static void repair(shmemq_t* q) {
    struct shmemq_header* h = q->hdr;
    const uint64_t r = atomic_load_explicit(&h->read_count, memory_order_relaxed);
    const uint64_t w = atomic_load_explicit(&h->write_count, memory_order_relaxed);
    if (w < r || w - r > q->max_count) {
        atomic_store_explicit(&h->write_count, r, memory_order_relaxed);
        atomic_fetch_add(&h->repairs, 1);
        return;
    }
    for (uint64_t i = r; i != w; ++i) {
        uint32_t len;
        memcpy(&len, q->slots + (size_t)(i % q->max_count) * q->slot_size, sizeof len);
        if (len > q->element_size) {
            atomic_store_explicit(&h->write_count, i, memory_order_relaxed);
            atomic_fetch_add(&h->repairs, 1);
            return;
        }
    }
}

static int queue_lock(shmemq_t* q) {
    pthread_mutex_t* m = &q->hdr->mutex;
    STAT_ADD(acquisitions);
    int rc = pthread_mutex_trylock(m);
    if (rc == EBUSY) {
        STAT_ADD(contended);
        unsigned spins = 0;
        if (q->kind == SHMEMQ_LOCK_ADAPTIVE && q->robust) {
            /* glibc 2.36 sends robust mutexes to __pthread_mutex_lock_full, which never spins
             * (README.md); spin here the way its adaptive path does, on trylock with a pause,
             * at most min(100, 2 * estimate + 10) times, then block. */
            const int estimate = (int)atomic_load_explicit(&q->hdr->spins, memory_order_relaxed);
            const unsigned max = estimate * 2 + 10 < SHMEMQ_SPIN_MAX ? (unsigned)estimate * 2 + 10
                                                                      : SHMEMQ_SPIN_MAX;
            while (rc == EBUSY && spins < max) {
                ++spins;
                cpu_relax();
                rc = pthread_mutex_trylock(m);
            }
        }
        if (rc == EBUSY) {
            STAT_ADD(blocking);
#ifdef SHMEMQ_STATS
            const long before = voluntary_switches();
            rc = pthread_mutex_lock(m);
            if (voluntary_switches() != before) STAT_ADD(slept);
#else
            rc = pthread_mutex_lock(m);
#endif
        } else {
            STAT_ADD(spin_acquired);
        }
#ifdef SHMEMQ_STATS
        stat_spins(spins);
#endif
        if ((rc == 0 || rc == EOWNERDEAD) && q->kind == SHMEMQ_LOCK_ADAPTIVE && q->robust) {
            /* The estimate moves an eighth of the way to this spin count, as glibc's __spins. */
            const int estimate = (int)atomic_load_explicit(&q->hdr->spins, memory_order_relaxed);
            const int moved = estimate + ((int)spins - estimate) / 8;
            atomic_store_explicit(&q->hdr->spins, (uint32_t)moved, memory_order_relaxed);
        }
    }
    if (rc == EOWNERDEAD) {
        STAT_ADD(owner_died);
        repair(q);
        atomic_fetch_add(&q->hdr->recoveries, 1);
        rc = pthread_mutex_consistent(m);
        if (rc != 0) pthread_mutex_unlock(m);  /* we hold it; the next locker retries */
    }
    if (rc != 0) {
        fail(rc, "cannot lock queue '%s': %s", q->name, strerror(rc));
    }
    return rc;
}

static void queue_unlock(shmemq_t* q) { pthread_mutex_unlock(&q->hdr->mutex); }

/* ---- Enqueue and dequeue ---- */

static unsigned char* slot_at(shmemq_t* q, uint64_t count) {
    return q->slots + (size_t)(count % q->max_count) * q->slot_size;
}

bool shmemq_try_enqueue(shmemq_t* self, void* element, int len) {
    if (len < 0 || (len > 0 && element == NULL)) {
        fail(EINVAL, "bad message: length %d, buffer %p", len, element);
        return false;
    }
    if ((unsigned)len > self->element_size) {
        fail(EMSGSIZE, "a message of %d bytes is larger than the element size (%u) of queue '%s'",
             len, self->element_size, self->name);
        return false;
    }
    struct shmemq_header* h = self->hdr;
    const uint32_t len32 = (uint32_t)len;
    if (self->kind == SHMEMQ_LOCK_LOCKFREE) {
        const uint64_t w = atomic_load_explicit(&h->write_count, memory_order_relaxed);
        const uint64_t r = atomic_load_explicit(&h->read_count, memory_order_acquire);
        if (w - r >= self->max_count) {
            STAT_ADD(full);
            errno = EAGAIN;
            return false;
        }
        unsigned char* slot = slot_at(self, w);
        memcpy(slot, &len32, sizeof len32);
        if (len32 > 0) memcpy(slot + SHMEMQ_SLOT_HEADER, element, len32);
        atomic_store_explicit(&h->write_count, w + 1, memory_order_release);
        return true;
    }
    const int rc = queue_lock(self);
    if (rc != 0) {
        errno = rc;
        return false;
    }
    const uint64_t w = atomic_load_explicit(&h->write_count, memory_order_relaxed);
    const uint64_t r = atomic_load_explicit(&h->read_count, memory_order_relaxed);
    if (w - r >= self->max_count) {
        queue_unlock(self);
        STAT_ADD(full);
        errno = EAGAIN;
        return false;
    }
    unsigned char* slot = slot_at(self, w);
    memcpy(slot, &len32, sizeof len32);
    if (len32 > 0) memcpy(slot + SHMEMQ_SLOT_HEADER, element, len32);
    atomic_store_explicit(&h->write_count, w + 1, memory_order_relaxed);
    queue_unlock(self);
    return true;
}

/* Copies the message at count R out if it fits; returns 0, EMSGSIZE or EPROTO. */
static int take(shmemq_t* self, uint64_t r, void* element, int len, int* out_len) {
    const unsigned char* slot = slot_at(self, r);
    uint32_t stored;
    memcpy(&stored, slot, sizeof stored);
    if (stored > self->element_size) {
        fail(EPROTO, "queue '%s' is corrupt: a message of %u bytes in slots of %u", self->name,
             stored, self->element_size);
        return EPROTO;
    }
    if (out_len != NULL) *out_len = (int)stored;
    if (stored > (uint32_t)len) {
        fail(EMSGSIZE, "the next message of queue '%s' has %u bytes; the buffer has %d; it stays "
             "in the queue", self->name, stored, len);
        return EMSGSIZE;
    }
    if (stored > 0) memcpy(element, slot + SHMEMQ_SLOT_HEADER, stored);
    return 0;
}

bool shmemq_try_dequeue_len(shmemq_t* self, void* element, int len, int* out_len) {
    if (len < 0 || (len > 0 && element == NULL)) {
        fail(EINVAL, "bad buffer: length %d, buffer %p", len, element);
        return false;
    }
    struct shmemq_header* h = self->hdr;
    if (self->kind == SHMEMQ_LOCK_LOCKFREE) {
        const uint64_t r = atomic_load_explicit(&h->read_count, memory_order_relaxed);
        const uint64_t w = atomic_load_explicit(&h->write_count, memory_order_acquire);
        if (r == w) {
            STAT_ADD(empty);
            errno = EAGAIN;
            return false;
        }
        const int err = take(self, r, element, len, out_len);
        if (err != 0) {
            errno = err;
            return false;
        }
        atomic_store_explicit(&h->read_count, r + 1, memory_order_release);
        return true;
    }
    const int rc = queue_lock(self);
    if (rc != 0) {
        errno = rc;
        return false;
    }
    const uint64_t r = atomic_load_explicit(&h->read_count, memory_order_relaxed);
    const uint64_t w = atomic_load_explicit(&h->write_count, memory_order_relaxed);
    if (r == w) {
        queue_unlock(self);
        STAT_ADD(empty);
        errno = EAGAIN;
        return false;
    }
    const int err = take(self, r, element, len, out_len);
    if (err == 0) atomic_store_explicit(&h->read_count, r + 1, memory_order_relaxed);
    queue_unlock(self);
    if (err != 0) {
        errno = err;
        return false;
    }
    return true;
}

bool shmemq_try_dequeue(shmemq_t* self, void* element, int len) {
    return shmemq_try_dequeue_len(self, element, len, NULL);
}

unsigned long shmemq_count(shmemq_t* self) {
    const uint64_t r = atomic_load_explicit(&self->hdr->read_count, memory_order_acquire);
    const uint64_t w = atomic_load_explicit(&self->hdr->write_count, memory_order_acquire);
    return w >= r ? (unsigned long)(w - r) : 0;
}

unsigned int shmemq_recoveries(shmemq_t* self) { return atomic_load(&self->hdr->recoveries); }

/* ---- Test hooks (shmemq_testing.h) ---- */

int shmemq_testing_lock(shmemq_t* self) { return pthread_mutex_lock(&self->hdr->mutex); }

int shmemq_testing_unlock(shmemq_t* self) { return pthread_mutex_unlock(&self->hdr->mutex); }

void shmemq_testing_set_counts(shmemq_t* self, unsigned long long read_count,
                               unsigned long long write_count) {
    atomic_store(&self->hdr->read_count, read_count);
    atomic_store(&self->hdr->write_count, write_count);
}

/**
 * @brief Shared-memory message queue between processes (C11, usable from C++), the seed's API.
 *
 * A queue is a POSIX shared-memory segment named like "/name" holding a circular buffer of
 * max_count slots, each carrying one message of 0..element_size bytes and its length. The layout is
 * specified in docs/shmemq-format.md. Enqueue and dequeue never block: they return false when the
 * queue is full or empty (errno EAGAIN) or on an error (errno says which, shmemq_last_error() says
 * why in a sentence).
 *
 * Thread safety: the locked kinds (normal, adaptive) allow any number of producers and consumers in
 * any number of processes; the lock-free kind allows one producer and one consumer in total. All
 * functions may allocate except the enqueue/dequeue calls; none is async-signal-safe.
 */
#ifndef DBGKIT_SHMEMQ_H
#define DBGKIT_SHMEMQ_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct _shmemq shmemq_t;

/** How the queue's indices are protected. Stored in the segment: all users of a name must agree. */
typedef enum shmemq_lock_kind {
    /** A process-shared pthread mutex: a contended lock goes straight to the kernel (futex). */
    SHMEMQ_LOCK_NORMAL = 0,
    /** A process-shared mutex with a bounded user-mode spin before sleeping (see README.md: with a
     * robust mutex glibc 2.36 does not spin, so the library spins on trylock itself). */
    SHMEMQ_LOCK_ADAPTIVE = 1,
    /** No lock: atomic indices, acquire/release ordering; one producer and one consumer only. */
    SHMEMQ_LOCK_LOCKFREE = 2
} shmemq_lock_kind;

/** Options of shmemq_open(); initialise with shmemq_options_init(). */
typedef struct shmemq_options {
    shmemq_lock_kind lock;
    /** Nonzero (default): PTHREAD_MUTEX_ROBUST, a peer that dies holding the lock is recovered
     * from. Zero: a plain mutex (an adaptive one then spins inside glibc); a dead lock holder then
     * blocks the others for ever. Ignored (stored as 0) for SHMEMQ_LOCK_LOCKFREE. */
    int robust;
    /** Nonzero: a stale segment (every attached process died without detaching) or a
     * half-initialised one (its creator died) is unlinked and created afresh instead of being
     * refused. Only safe when no other process opens the same name at the same time. Default 0. */
    int recreate_stale;
    /** How long an opener waits for a creator that is still initialising the segment (default
     * 1000 ms). */
    unsigned int open_timeout_ms;
} shmemq_options;

/** Default options: normal lock, robust, refuse stale segments, 1 s open timeout. */
void shmemq_options_init(shmemq_options* options);

/** The seed's constructor: shmemq_open() with default options (normal robust mutex). */
shmemq_t* shmemq_new(char const* name, unsigned long max_count, unsigned int element_size);

/**
 * Creates the queue NAME (a '/' followed by 1..254 characters, none of them '/', not "." or "..")
 * with mode 0600, or attaches to it if it exists with the same max_count, element_size, lock kind
 * and robustness. Returns NULL with errno set on failure: EINVAL (bad argument, or an existing
 * queue of another geometry), EACCES (owned by another user, or not mode 0600), EPROTO (not a
 * queue of a version this library reads), ESTALE (stale or half-initialised, see
 * shmemq_options.recreate_stale), EAGAIN (creator still initialising after the timeout) or the
 * errno of a failed system call. shmemq_last_error() then describes the failure.
 */
shmemq_t* shmemq_open(char const* name, unsigned long max_count, unsigned int element_size,
                      const shmemq_options* options);

/**
 * Copies LEN bytes at ELEMENT into the queue as one message. False when the queue is full (errno
 * EAGAIN), LEN is larger than element_size (EMSGSIZE) or negative (EINVAL), or the lock is
 * unusable (ENOTRECOVERABLE); the queue is unchanged then.
 */
bool shmemq_try_enqueue(shmemq_t* self, void* element, int len);

/**
 * Moves the oldest message into ELEMENT, a buffer of LEN bytes. False when the queue is empty
 * (errno EAGAIN), or the message is longer than LEN (EMSGSIZE: the message stays in the queue).
 */
bool shmemq_try_dequeue(shmemq_t* self, void* element, int len);

/** shmemq_try_dequeue() that also stores the message's length in *OUT_LEN (may be NULL); on
 * EMSGSIZE *OUT_LEN is the length of the message that did not fit. */
bool shmemq_try_dequeue_len(shmemq_t* self, void* element, int len, int* out_len);

/** The number of messages in the queue now (a snapshot when others are using it). */
unsigned long shmemq_count(shmemq_t* self);

/** Times a lock holder died and this segment's lock was recovered (kept in the segment). */
unsigned int shmemq_recoveries(shmemq_t* self);

/** Detaches and frees SELF; with UNLINK nonzero also removes the name if it still refers to this
 * queue (the memory goes away when the last process detaches). SELF may be NULL. */
void shmemq_destroy(shmemq_t* self, int unlink);

/** The last failure of this thread in a sentence ("" if none), valid until its next call. Full
 * and empty (EAGAIN from enqueue/dequeue) are not failures and leave it unchanged. */
const char* shmemq_last_error(void);

/** Parses "normal", "adaptive" or "lockfree"; returns -1 for anything else. */
int shmemq_lock_kind_from_name(const char* name);
/** "normal", "adaptive", "lockfree" or "?". */
const char* shmemq_lock_kind_name(shmemq_lock_kind kind);

/* ---- Contention statistics (counted only by the dbgkit_shmemq_stats build) ---- */

/** Buckets of the spin histogram: 0, 1, 2-3, 4-7, ..., 256 and more. */
#define SHMEMQ_STATS_BUCKETS 10

/** Counters of this process (all threads, all queues) since start or shmemq_stats_reset(). */
typedef struct shmemq_stats {
    /** Locks taken (one per enqueue/dequeue call on a locked queue). */
    unsigned long long acquisitions;
    /** Acquisitions whose first trylock found the lock held by someone else. */
    unsigned long long contended;
    /** Contended acquisitions that got the lock while spinning (adaptive kind). */
    unsigned long long spin_acquired;
    /** Contended acquisitions that called the blocking pthread_mutex_lock (spinning gave up, or
     * the normal kind, which does not spin). */
    unsigned long long blocking;
    /** Blocking acquisitions during which this thread's voluntary context switches rose
     * (getrusage RUSAGE_THREAD ru_nvcsw): it slept in the kernel (futex wait). */
    unsigned long long slept;
    /** Acquisitions that found the holder dead (EOWNERDEAD) and recovered the queue. */
    unsigned long long owner_died;
    /** try_enqueue calls that found the queue full; try_dequeue calls that found it empty. */
    unsigned long long full;
    unsigned long long empty;
    /** Contended acquisitions by the number of spins before the lock was taken or given up. */
    unsigned long long spin_histogram[SHMEMQ_STATS_BUCKETS];
} shmemq_stats;

/** True in the dbgkit_shmemq_stats build, false in dbgkit_shmemq (whose counters stay zero). */
bool shmemq_stats_enabled(void);
/** Copies this process's counters into *OUT. */
void shmemq_stats_get(shmemq_stats* out);
/** Sets this process's counters to zero (e.g. in a child after fork). */
void shmemq_stats_reset(void);
/** The histogram bucket's label: "0", "1", "2-3", ..., "256+". */
const char* shmemq_stats_bucket_label(int bucket);

#ifdef __cplusplus
}
#endif

#endif /* DBGKIT_SHMEMQ_H */

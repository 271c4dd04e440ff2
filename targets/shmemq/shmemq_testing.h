/**
 * @brief Test hooks of the shmemq library: hold the lock, corrupt the indices (not the API).
 *
 * The tests use them to play a peer that dies holding the lock or leaves the indices broken; a
 * program that calls them outside a test breaks its queue on purpose.
 */
#ifndef DBGKIT_SHMEMQ_TESTING_H
#define DBGKIT_SHMEMQ_TESTING_H

#include "shmemq.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Takes the queue's mutex (pthread_mutex_lock) and keeps it; returns its result. */
int shmemq_testing_lock(shmemq_t* self);
/** Releases the mutex taken by shmemq_testing_lock(); returns pthread_mutex_unlock's result. */
int shmemq_testing_unlock(shmemq_t* self);
/** Overwrites the read and write counters (header offsets 256 and 192) without locking. */
void shmemq_testing_set_counts(shmemq_t* self, unsigned long long read_count,
                               unsigned long long write_count);

#ifdef __cplusplus
}
#endif

#endif /* DBGKIT_SHMEMQ_TESTING_H */

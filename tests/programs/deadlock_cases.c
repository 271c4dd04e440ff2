// @brief Programs that hang deterministically on their locks, one case per argument (the `deadlocks` command's tests).
//
// Every case puts its threads in place with barriers, waits until each of them sleeps in the
// futex system call (/proc/self/task/TID/syscall), prints "ready PID" and waits forever: a test
// attaches to it then. A line marked `// WAIT: name` is where a thread waits.
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "in_futex.h"

pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
static struct station {
    int id;
    pthread_mutex_t guard;
} ring[3];
pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
pthread_mutex_t cond_lock = PTHREAD_MUTEX_INITIALIZER;
sem_t slots;
pthread_mutex_t bad_lock = PTHREAD_MUTEX_INITIALIZER;
unsigned int door_word;  // a futex word of the program's own
pthread_mutex_t join_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t step;
static pid_t tids[8];
static int sleeps_in[8];  // the system call thread i sleeps in once in place: futex(2) unless set
static int nthreads;
volatile int take_read_lock;  // never set: the bystander's read lock is on a branch not taken

/// Records the calling thread's id and name; the main thread waits for every recorded one.
static void enter(const char* name, int index) {
    pthread_setname_np(pthread_self(), name);
    tids[index] = (pid_t)syscall(SYS_gettid);
}

/// Waits until every started thread sleeps in futex(2) (or the call `sleeps_in` names), then
/// says so and waits forever.
static void announce(void) {
    for (int i = 0; i < nthreads; i++) {
        while (tids[i] == 0 || !in_syscall(tids[i], sleeps_in[i] ? sleeps_in[i] : SYS_futex)) {
            usleep(1000);
        }
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        pause();
    }
}

static void* abba_first(void* arg) {
    (void)arg;
    enter("abba-1", 0);
    pthread_mutex_lock(&lock_a);
    pthread_barrier_wait(&step);
    pthread_mutex_lock(&lock_b);  // WAIT: abba-1
    return NULL;
}

static void* abba_second(void* arg) {
    (void)arg;
    enter("abba-2", 1);
    pthread_mutex_lock(&lock_b);
    pthread_barrier_wait(&step);
    pthread_mutex_lock(&lock_a);  // WAIT: abba-2
    return NULL;
}

static void* ring_worker(void* arg) {
    int i = (int)(long)arg;
    char name[16];
    snprintf(name, sizeof name, "ring-%d", i);
    enter(name, i);
    pthread_mutex_lock(&ring[i].guard);
    pthread_barrier_wait(&step);
    pthread_mutex_lock(&ring[(i + 1) % 3].guard);  // WAIT: ring
    return NULL;
}

static void* rw_reader(void* arg) {
    (void)arg;
    enter("reader", 0);
    pthread_rwlock_rdlock(&table_lock);
    pthread_barrier_wait(&step);  // the writer takes state_lock
    pthread_barrier_wait(&step);
    pthread_mutex_lock(&state_lock);  // WAIT: reader
    return NULL;
}

static void* rw_writer(void* arg) {
    (void)arg;
    enter("writer", 1);
    pthread_barrier_wait(&step);
    pthread_mutex_lock(&state_lock);
    pthread_barrier_wait(&step);
    pthread_rwlock_wrlock(&table_lock);  // WAIT: writer
    return NULL;
}

static void* wr_owner(void* arg) {
    (void)arg;
    enter("table-writer", 0);
    pthread_rwlock_wrlock(&table_lock);
    pthread_barrier_wait(&step);
    pthread_mutex_lock(&state_lock);  // WAIT: table-writer
    return NULL;
}

static void* wr_reader(void* arg) {
    (void)arg;
    enter("state-owner", 1);
    pthread_mutex_lock(&state_lock);
    pthread_barrier_wait(&step);
    pthread_rwlock_rdlock(&table_lock);  // WAIT: state-owner
    return NULL;
}

static void* rd_sleeper(void* arg) {
    (void)arg;
    enter("rd-sleeper", 0);
    pthread_rwlock_rdlock(&table_lock);
    pthread_barrier_wait(&step);
    for (;;) {
        pause();  // holds table_lock for reading, and waits for no lock
    }
    return NULL;
}

static void* wr_waiter(void* arg) {
    (void)arg;
    enter("wr-waiter", 1);
    pthread_barrier_wait(&step);
    pthread_rwlock_wrlock(&table_lock);  // WAIT: wr-waiter
    return NULL;
}

static void* rd_bystander(void* arg) {
    (void)arg;
    enter("bystander", 2);
    if (take_read_lock) {
        pthread_rwlock_rdlock(&table_lock);  // the code takes it; this thread did not
    }
    pthread_barrier_wait(&step);
    pthread_mutex_lock(&state_lock);  // WAIT: bystander
    return NULL;
}

static void* join_worker(void* arg) {
    (void)arg;
    enter("worker", 0);
    pthread_mutex_lock(&join_lock);  // WAIT: worker
    return NULL;
}

static void* join_announcer(void* arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "announcer");
    announce();
    return NULL;
}

static void* cond_waiter(void* arg) {
    (void)arg;
    enter("cond-waiter", 0);
    pthread_mutex_lock(&cond_lock);
    pthread_cond_wait(&ready_cond, &cond_lock);  // WAIT: cond-waiter
    return NULL;
}

static void* sem_waiter(void* arg) {
    (void)arg;
    enter("sem-waiter", 1);
    sem_wait(&slots);  // WAIT: sem-waiter
    return NULL;
}

static void* futex_waiter(void* arg) {
    (void)arg;
    enter("futex-waiter", 2);
    syscall(SYS_futex, &door_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);  // WAIT: futex-waiter
    return NULL;
}

static void* bad_waiter(void* arg) {
    (void)arg;
    enter("bad-waiter", 0);
    pthread_mutex_lock(&bad_lock);  // WAIT: bad-waiter
    return NULL;
}

static void* shared_waiter(void* arg) {
    enter("shm-waiter", 0);
    pthread_mutex_lock((pthread_mutex_t*)arg);  // WAIT: shm-waiter
    return NULL;
}

static void start(pthread_t* threads, void* (*fn)(void*), void* arg) {
    pthread_create(&threads[nthreads++], NULL, fn, arg);
}

static void robust(pthread_mutex_t* m) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(m, &attr);
}

/// A process-shared mutex in a shared mapping, locked by a child process that then waits forever.
static pthread_mutex_t* shared_mutex_held_by_child(void) {
    pthread_mutex_t* m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                              -1, 0);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(m, &attr);
    int ready[2];
    if (pipe(ready) != 0) {
        exit(3);
    }
    if (fork() == 0) {
        pthread_mutex_lock(m);
        if (write(ready[1], "x", 1) != 1) {
            _exit(3);
        }
        for (;;) {
            pause();  // killed with its parent's process group, or when the parent dies
        }
    }
    char c;
    if (read(ready[0], &c, 1) != 1) {
        exit(3);
    }
    return m;
}

int main(int argc, char** argv) {
    pthread_t threads[8];
    const char* which = argc > 1 ? argv[1] : "";
    if (strcmp(which, "abba") == 0 || strcmp(which, "robust") == 0) {
        if (which[0] == 'r') {
            robust(&lock_a);
            robust(&lock_b);
        }
        pthread_barrier_init(&step, NULL, 2);
        start(threads, abba_first, NULL);
        start(threads, abba_second, NULL);
    } else if (strcmp(which, "ring") == 0) {
        pthread_barrier_init(&step, NULL, 3);
        for (long i = 0; i < 3; i++) {
            ring[i].id = (int)i;
            pthread_mutex_init(&ring[i].guard, NULL);
            start(threads, ring_worker, (void*)i);
        }
    } else if (strcmp(which, "rwlock") == 0) {
        pthread_barrier_init(&step, NULL, 2);
        start(threads, rw_reader, NULL);
        start(threads, rw_writer, NULL);
    } else if (strcmp(which, "wrcycle") == 0) {
        pthread_barrier_init(&step, NULL, 2);
        start(threads, wr_owner, NULL);
        start(threads, wr_reader, NULL);
    } else if (strcmp(which, "rdpause") == 0 || strcmp(which, "candidates") == 0) {
        // a reader sleeps in pause() holding table_lock; a writer waits for it; with
        // "candidates" a bystander's code reads it too (on a branch it did not take) and it
        // waits for state_lock, which the main thread holds
        pthread_barrier_init(&step, NULL, which[0] == 'c' ? 3 : 2);
        sleeps_in[0] = SYS_pause;
        start(threads, rd_sleeper, NULL);
        start(threads, wr_waiter, NULL);
        if (which[0] == 'c') {
            pthread_mutex_lock(&state_lock);
            start(threads, rd_bystander, NULL);
        }
    } else if (strcmp(which, "join") == 0) {
        // the main thread holds join_lock and joins the worker, which waits for join_lock
        pthread_t announcer;
        pthread_mutex_lock(&join_lock);
        start(threads, join_worker, NULL);
        tids[nthreads++] = (pid_t)syscall(SYS_gettid);
        pthread_create(&announcer, NULL, join_announcer, NULL);
        pthread_join(threads[0], NULL);  // WAIT: join
        return 0;
    } else if (strcmp(which, "waits") == 0) {
        sem_init(&slots, 0, 0);
        start(threads, cond_waiter, NULL);
        start(threads, sem_waiter, NULL);
        start(threads, futex_waiter, NULL);
    } else if (strcmp(which, "corrupt") == 0) {
        // A lock word that says "locked, with waiters" and an owner no thread has: memory
        // overwritten by a bug looks like this.
        bad_lock.__data.__lock = 2;
        bad_lock.__data.__owner = 0x7ffffff0;
        start(threads, bad_waiter, NULL);
    } else if (strcmp(which, "pshared") == 0) {
        start(threads, shared_waiter, shared_mutex_held_by_child());
    } else {
        fprintf(stderr, "usage: deadlock_cases abba|robust|ring|rwlock|wrcycle|rdpause|candidates|join|waits|corrupt|pshared\n");
        return 2;
    }
    announce();
}

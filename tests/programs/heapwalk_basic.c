/* @brief A heap of known blocks for the heap walk (tests/test_heapwalk.py): two threads with
 * arenas of their own (the second grows a second heap of 64 MiB), mmapped blocks, frees into
 * tcache, a fastbin and the unsorted bin, a cycle, a tree, interior pointers, leaks.
 *
 * It prints one line per block it holds, "BLOCK address requested usable", then "READY", and
 * stops itself (SIGSTOP) with its threads blocked on a pipe; continued, it exits. Under valgrind
 * (built with memcheck.h: heapwalk_basic_valgrind) it asks for valgrind's leak check there
 * instead. The addresses it keeps for the listing are stored XORed with a mask, so that the
 * listing itself points at nothing. Every requested size is 8 modulo 16 (24, 40, ...) and
 * mmapped sizes a page less 16: malloc_usable_size() is then the request, as valgrind counts. */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HEAPWALK_VALGRIND
#include <valgrind/memcheck.h>
#define CHECKPOINT() VALGRIND_DO_LEAK_CHECK
#else
#define CHECKPOINT() raise(SIGSTOP)
#endif

#define MASK ((uintptr_t)0x5a5a5a5a5a5a5a5aULL)
#define MAX_LISTED 4096
#define BIG_BLOCKS 1100

static uintptr_t listed[MAX_LISTED];
static size_t listed_size[MAX_LISTED];
static int n_listed;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;

void *held[64];          /* reachable: the program's globals point at these */
void *interior;          /* points 8 bytes into a block: possibly lost */
void **big_held;         /* thread 2's blocks, reachable */
static int wake[2], ready[2];

static void *take(size_t n) {
    void *p = malloc(n);
    pthread_mutex_lock(&list_lock);
    listed[n_listed] = (uintptr_t)p ^ MASK;
    listed_size[n_listed++] = n;
    pthread_mutex_unlock(&list_lock);
    return p;
}

static void drop(void *p) {  /* free a listed block and take it off the list */
    pthread_mutex_lock(&list_lock);
    for (int i = 0; i < n_listed; i++)
        if (listed[i] == ((uintptr_t)p ^ MASK)) {
            listed[i] = listed[--n_listed];
            listed_size[i] = listed_size[n_listed];
            break;
        }
    pthread_mutex_unlock(&list_lock);
    free(p);
}

static void __attribute__((noinline)) scrub(void) {  /* no stale pointer left on the stack */
    volatile char buf[32768];
    memset((char *)buf, 0, sizeof buf);
}

static void __attribute__((noinline)) thread_one_work(void) {
    held[20] = take(40);
    held[21] = take(1000);
    for (int i = 0; i < 3; i++)
        take(72);  /* leaked in a thread arena: definitely lost */
    void *f[4];
    for (int i = 0; i < 4; i++)
        f[i] = take(24);
    for (int i = 0; i < 4; i++)
        drop(f[i]);  /* into this thread's tcache */
}

static void __attribute__((noinline)) thread_two_work(void) {
    big_held = take(BIG_BLOCKS * sizeof(void *));
    for (int i = 0; i < BIG_BLOCKS; i++)
        big_held[i] = take(65528);  /* 70 MiB below the mmap threshold: a second heap */
}

/* the thread's DTV, which glibc's pthread_create allocates with calloc(length + 2, 16) (its
 * first element holds the length, the thread control block at fs:0 points 16 bytes in): a block
 * the program holds too, possibly lost for valgrind */
static void list_dtv(void) {
    char **tcb;
    __asm__("mov %%fs:0, %0" : "=r"(tcb));
    char *block = tcb[1] - 16;
    pthread_mutex_lock(&list_lock);
    listed[n_listed] = (uintptr_t)block ^ MASK;
    listed_size[n_listed++] = (*(size_t *)block + 2) * 16;
    pthread_mutex_unlock(&list_lock);
}

static void *thread_main(void *arg) {
    list_dtv();
    if (arg)
        thread_two_work();
    else
        thread_one_work();
    scrub();
    char c = 1;
    if (write(ready[1], &c, 1) != 1 || read(wake[0], &c, 1) < 0)
        abort();
    return NULL;
}

static void __attribute__((noinline)) main_work(void) {
    for (int i = 0; i < 8; i++)
        held[i] = take(24 + 16 * i);
    /* 10 leaked blocks of 40 bytes: definitely lost */
    for (int i = 0; i < 10; i++)
        take(40);
    /* a cycle of two, unreferenced: one definitely, one indirectly lost */
    void **a = take(24), **b = take(24);
    a[0] = b;
    b[0] = a;
    /* a tree: a lost root owning three children (indirectly lost) */
    void **root = take(40);
    for (int i = 0; i < 3; i++)
        root[i] = take(56);
    /* an interior pointer only: possibly lost */
    char *inner = take(88);
    interior = inner + 8;
    /* mmapped: one held, one leaked */
    held[30] = take(200 * 4096 - 16);
    take(300 * 4096 - 16);
    /* frees: 10 blocks of 56 bytes (7 to tcache, 3 to a fastbin), 2,000 bytes to the
     * unsorted bin (a guard block kept after it) */
    void *f[10];
    for (int i = 0; i < 10; i++)
        f[i] = take(56);
    void *big = take(2008);
    held[31] = take(24);
    for (int i = 0; i < 10; i++)
        drop(f[i]);
    drop(big);
}

int main(void) {
    if (pipe(wake) || pipe(ready))
        return 1;
    main_work();
    pthread_t t[2];
    for (long i = 0; i < 2; i++) {
        char c;
        pthread_create(&t[i], NULL, thread_main, (void *)i);
        if (read(ready[0], &c, 1) != 1)  /* one after the other: an arena each */
            return 1;
    }
    static char line[128];
    for (int i = 0; i < n_listed; i++) {
        void *p = (void *)(listed[i] ^ MASK);
        int n = snprintf(line, sizeof line, "BLOCK %#lx %zu %zu\n", (unsigned long)(uintptr_t)p,
                         listed_size[i], malloc_usable_size(p));
        if (write(1, line, (size_t)n) != n)
            return 1;
    }
    if (write(1, "READY\n", 6) != 6)
        return 1;
    scrub();
    CHECKPOINT();
    char c = 0;
    for (int i = 0; i < 2; i++)
        if (write(wake[1], &c, 1) != 1)
            return 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return 0;
}

/* @brief One heap error per mode (argv[1]), for the reference answers of valgrind and ASan
 * (tests/e2e/test_heap_error_programs.py, tests/fixtures/heap_errors.tsv): the faulting line carries
 * the marker ERROR with the mode's name, the block's allocation ALLOC and the free FREE (as LEAK
 * markers elsewhere: the tests look the lines up by marker).
 *
 *   past-end-write     one byte written past a 40-byte malloc
 *   read-loop          a loop reading 11 ints of a 10-int block
 *   memcpy-overflow    memcpy of 20 bytes into a 16-byte block
 *   slack-overflow     byte 21 of a 20-byte block: inside malloc's rounding (glibc gives it 24 usable
 *                      bytes, and a 16-aligned block ends 12 bytes before a guard page after it)
 *   uaf-read           an int read 8 bytes into a freed 32-byte block
 *   uaf-write          an int written 8 bytes into a freed 32-byte block
 *   uaf-thread         a second thread writes into a block the main thread freed
 *   stale-reused       a write through a stale pointer after glibc handed its chunk to another module:
 *                      that module's function pointer is overwritten, and it crashes later, elsewhere
 *   double-free        a 32-byte block freed twice
 *   interior-free      free of a pointer 8 bytes into a 40-byte block
 *   neighbour-read     a read far past a block that lands inside a live neighbour: an error no tool
 *                      that marks only the bytes between blocks sees (valgrind, ASan: none)
 *   clean              a heavy correct program (every size class, realloc chains, aligned blocks,
 *                      blocks freed by another thread): no error, nothing left
 *
 * The C++ classes (new[] underflow, delete of new[]) are in heap_errors_cpp.cpp. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"

/* Every value read is stored here, so that no read is dead code and no uninitialised value is used. */
static volatile int sink;

static int past_end_write(void) {
    char *text = malloc(40);  // ALLOC: past-end-write
    memset(text, 'a', 40);
    text[40] = '\0';  // ERROR: past-end-write
    free(text);  // FREE: past-end-write
    return 0;
}

static int read_loop(void) {
    int *values = malloc(10 * sizeof(int));  // ALLOC: read-loop
    for (int i = 0; i < 10; i++) {
        values[i] = i;
    }
    int sum = 0;
    for (int i = 0; i <= 10; i++) {
        sum += values[i];  // ERROR: read-loop
    }
    sink = sum;
    free(values);  // FREE: read-loop
    return 0;
}

static int memcpy_overflow(void) {
    /* static and aligned: valgrind's memcpy copies by words when it can, so its access size depends on
     * the source's alignment */
    static _Alignas(16) const char source[20] = "a 20-byte source...";
    char *copy = malloc(16);  // ALLOC: memcpy-overflow
    memcpy(copy, source, sizeof source);  // ERROR: memcpy-overflow
    free(copy);  // FREE: memcpy-overflow
    return 0;
}

static int slack_overflow(void) {
    char *name = malloc(20);  // ALLOC: slack-overflow
    memset(name, 'c', 20);
    name[20] = '\0';  // ERROR: slack-overflow
    sink = (int)strlen(name) > 0;  /* the read of the terminator is an error too: not the first */
    free(name);  // FREE: slack-overflow
    return 0;
}

static int neighbour_read(void) {
    int *first = malloc(8 * sizeof(int));  // ALLOC: neighbour-read
    int *second = malloc(8 * sizeof(int));
    for (int i = 0; i < 8; i++) {
        first[i] = i;
        second[i] = 10 + i;
    }
    /* the index of second[2] counted from first, wherever the allocator put the two blocks */
    intptr_t ahead = ((intptr_t)second - (intptr_t)first) / (intptr_t)sizeof(int) + 2;
    sink = first[ahead];  // ERROR: neighbour-read
    free(second);
    free(first);
    return 0;
}

static int *freed_ints(void) {
    int *values = calloc(8, sizeof(int));  // ALLOC: uaf
    free(values);  // FREE: uaf
    return values;
}

static int uaf_read(void) {
    int *values = freed_ints();
    sink = values[2];  // ERROR: uaf-read
    return 0;
}

static int uaf_write(void) {
    int *values = freed_ints();
    values[2] = 7;  // ERROR: uaf-write
    return 0;
}

static void *stale_writer(void *arg) {
    int *values = arg;
    values[2] = 7;  // ERROR: uaf-thread
    return NULL;
}

static int uaf_thread(void) {
    int *values = freed_ints();
    pthread_t thread;
    if (pthread_create(&thread, NULL, stale_writer, values) != 0) {
        return 1;
    }
    return pthread_join(thread, NULL) != 0;
}

/* "Another module": it allocates a 32-byte record with a callback and calls it later. */
struct other_record {
    void (*callback)(struct other_record *);
    long calls;
    char name[16];
};

static void other_count(struct other_record *record) {
    record->calls++;
}

static struct other_record *other_module_open(void) {
    struct other_record *record = malloc(sizeof *record);  // ALLOC: other-module
    record->callback = other_count;
    record->calls = 0;
    strcpy(record->name, "other");
    return record;
}

static void other_module_run(struct other_record *record) {
    record->callback(record);  // CRASH: stale-reused
}

static int stale_reused(void) {
    char *mine = malloc(32);  // ALLOC: stale-reused
    strcpy(mine, "mine");
    free(mine);  // FREE: stale-reused
    struct other_record *record = other_module_open();  /* glibc's tcache hands back mine's chunk */
    printf("stale-reused: mine %p, the other module's record %p\n", (void *)mine, (void *)record);
    fflush(stdout);
    memset(mine, 0, 8);  // ERROR: stale-reused
    other_module_run(record);
    free(record);
    return 0;
}

static int double_free(void) {
    char *twice = malloc(32);  // ALLOC: double-free
    free(twice);  // FREE: double-free
    free(twice);  // ERROR: double-free
    return 0;
}

static int interior_free(void) {
    char *block = malloc(40);  // ALLOC: interior-free
    free(block + 8);  // ERROR: interior-free
    free(block);
    return 0;
}

/* clean: nothing wrong, a lot of it (false positives). */
enum { CLEAN_THREADS = 4, CLEAN_ROUNDS = 1000, CLEAN_SLOTS = 64 };

struct handoff {
    pthread_mutex_t lock;
    unsigned seeds;
    void *blocks[CLEAN_SLOTS];
    unsigned next;
};

static size_t clean_size(unsigned seed) {
    static const size_t sizes[] = {1, 7, 8, 15, 16, 17, 24, 25, 31, 32, 33, 63, 100, 128, 255, 1000,
                                   1024, 4095, 4096, 4097, 65536, 200000};
    return sizes[seed % (sizeof sizes / sizeof sizes[0])];
}

static void *clean_worker(void *arg) {
    struct handoff *handoff = arg;
    unsigned seed = __atomic_fetch_add(&handoff->seeds, 1, __ATOMIC_RELAXED);
    for (unsigned round = 0; round < CLEAN_ROUNDS; round++) {
        seed = seed * 1103515245u + 12345u;
        size_t size = clean_size(seed >> 8);
        unsigned char *block = (seed & 1) ? malloc(size) : calloc(size, 1);
        memset(block, (int)round, size);
        /* a realloc chain that grows and shrinks across size classes, its contents kept */
        size_t sizes[] = {size * 2 + 1, size / 2 + 1, size + 100};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t kept = size < sizes[i] ? size : sizes[i];
            block = realloc(block, sizes[i]);
            for (size_t j = 0; j < kept; j += 97) {
                sink = block[j];
            }
            if (sizes[i] > kept) {
                memset(block + kept, 0, sizes[i] - kept);
            }
            size = sizes[i];
        }
        void *aligned = NULL;
        if (posix_memalign(&aligned, (size_t)64 << (round % 6), 48) == 0) {
            memset(aligned, 1, 48);
            free(aligned);
        }
        /* hand the block to whichever thread comes next; free the one found there */
        pthread_mutex_lock(&handoff->lock);
        unsigned slot = handoff->next++ % CLEAN_SLOTS;
        void *old = handoff->blocks[slot];
        handoff->blocks[slot] = block;
        pthread_mutex_unlock(&handoff->lock);
        free(old);
        char *copy = strdup("a string duplicated in a loop");
        sink = copy[(round % 28)];
        free(copy);
    }
    return NULL;
}

static int clean(void) {
    static struct handoff handoff = {.lock = PTHREAD_MUTEX_INITIALIZER};
    pthread_t threads[CLEAN_THREADS];
    for (int i = 0; i < CLEAN_THREADS; i++) {
        if (pthread_create(&threads[i], NULL, clean_worker, &handoff) != 0) {
            return 1;
        }
    }
    for (int i = 0; i < CLEAN_THREADS; i++) {
        pthread_join(threads[i], NULL);
    }
    for (int i = 0; i < CLEAN_SLOTS; i++) {
        free(handoff.blocks[i]);
    }
    return 0;
}

static const struct {
    const char *name;
    int (*run)(void);
} MODES[] = {
    {"past-end-write", past_end_write}, {"read-loop", read_loop},
    {"memcpy-overflow", memcpy_overflow}, {"slack-overflow", slack_overflow},
    {"uaf-read", uaf_read}, {"uaf-write", uaf_write}, {"uaf-thread", uaf_thread},
    {"stale-reused", stale_reused}, {"double-free", double_free},
    {"interior-free", interior_free}, {"neighbour-read", neighbour_read}, {"clean", clean},
};

int main(int argc, char **argv) {
    for (size_t i = 0; argc == 2 && i < sizeof MODES / sizeof MODES[0]; i++) {
        if (strcmp(argv[1], MODES[i].name) == 0) {
            return MODES[i].run();
        }
    }
    fprintf(stderr, "usage: heap_errors MODE (past-end-write, read-loop, memcpy-overflow, "
                    "slack-overflow, uaf-read, uaf-write, uaf-thread, stale-reused, double-free, "
                    "interior-free, neighbour-read, clean)\n");
    return 2;
}

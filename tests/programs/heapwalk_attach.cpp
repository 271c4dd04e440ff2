/* @brief Blocks allocated before a late attach and after it, for `memdump leaks` merging the
 * recording with the heap walk (tests/e2e/test_memdump_heap_attach.py).
 *
 * At its start (before anyone attaches) it allocates a known set: five leaked `Connection`s (56
 * bytes each, C++ objects with a vtable: definitely lost), a leaked cycle of two `graph::Node`s
 * (16 bytes each: one definitely, one indirectly lost), a `Registry` the global `registry` points
 * at (32 bytes, still reachable) holding a 100-byte block (reachable), and a 200-byte scratch block
 * (reachable until freed); first a thread with an arena of its own allocates 300 bytes its stack
 * holds (reachable) and leaks two blocks of 40, then waits for ever. It says "ready" and answers
 * each line on its stdin with one line:
 *   more  after the attach: frees the scratch block, allocates 200 bytes again (glibc gives back
 *         the same chunk: a recorded block) and leaks it, leaks two new `Connection`s, stores a new
 *         64-byte block in the old Registry (reachable through an old block only), and a new
 *         48-byte block in the first old leaked Connection (indirectly lost through an old block);
 *         answers "ok"
 *   exit  exits 0
 * Every figure is the program's own: valgrind run from the start (VALGRIND_DO_LEAK_CHECK at "more"'s
 * end in heapwalk_attach_valgrind) gives the same kinds. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HEAPWALK_VALGRIND
#include <valgrind/memcheck.h>
#endif

struct Connection {
    virtual ~Connection() = default;
    virtual int fd() const { return static_cast<int>(handle); }
    long handle = 3;
    long sent[5] = {};
};

namespace graph {
struct Node {
    virtual ~Node() = default;
    virtual int weight() const { return 1; }
    Node *next = nullptr;
};
}  // namespace graph

struct Registry {
    long count;
    void *old;
    void *latest;
    long spare;
};

Registry *registry;            /* the program's one root into the heap */
static char *scratch;
static Connection *first_lost; /* forgotten before the attach: cleared below */

static int idle[2]; /* the worker waits on it for ever */
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;

static void __attribute__((noinline)) worker_leaks(void) {
    for (int i = 0; i < 2; i++)
        memset(malloc(40), 0x55, 40);              /* leaked in the thread's arena */
}

/* A thread with an arena of its own: a block its stack holds, two leaked; then it waits. */
static void *worker(void *) {
    char *kept = static_cast<char *>(malloc(300)); /* reachable from its stack */
    memset(kept, 0x06, 300);
    worker_leaks();
    pthread_mutex_lock(&ready_lock);
    ready = 1;
    pthread_cond_signal(&ready_cond);
    pthread_mutex_unlock(&ready_lock);
    char c;
    while (read(idle[0], &c, 1) < 0) {
    }
    return kept;
}

static void __attribute__((noinline)) before(void) {
    for (int i = 0; i < 5; i++) {
        Connection *c = new Connection;           /* leaked before the attach */
        if (i == 0)
            first_lost = c;
    }
    graph::Node *a = new graph::Node, *b = new graph::Node;
    a->next = b;
    b->next = a;                                   /* a leaked cycle */
    registry = static_cast<Registry *>(calloc(1, sizeof(Registry)));
    registry->count = 1;
    registry->old = malloc(100);
    memset(registry->old, 0x11, 100);
    scratch = static_cast<char *>(malloc(200));
    memset(scratch, 0x22, 200);
}

static void __attribute__((noinline)) more(void) {
    free(scratch);                                 /* allocated before: an untracked free */
    scratch = nullptr;
    char *again = static_cast<char *>(malloc(200)); // LEAK: reused
    memset(again, 0x33, 200);
    again = nullptr;  /* leaked: its chunk again (the tcache's), a recorded block */
    for (int i = 0; i < 2; i++)
        new Connection;                            // LEAK: new-connection
    registry->latest = malloc(64);                 // LEAK: latest
    memset(registry->latest, 0x44, 64);
    first_lost->sent[0] = reinterpret_cast<long>(malloc(48)); // LEAK: held
}

int main(void) {
    pthread_t thread;
    if (pipe(idle) != 0 || pthread_create(&thread, nullptr, worker, nullptr) != 0)
        return 1;
    pthread_mutex_lock(&ready_lock);
    while (!ready)
        pthread_cond_wait(&ready_cond, &ready_lock);
    pthread_mutex_unlock(&ready_lock);
    before();
    first_lost = static_cast<Connection *>(
        reinterpret_cast<void *>(reinterpret_cast<unsigned long>(first_lost) ^ 0x5a5a5a5a5a5aUL));
    setvbuf(stdout, nullptr, _IOLBF, 0);
    puts("ready");
    char line[64];
    while (fgets(line, sizeof line, stdin) != nullptr) {
        if (strcmp(line, "more\n") == 0) {
            first_lost = static_cast<Connection *>(reinterpret_cast<void *>(
                reinterpret_cast<unsigned long>(first_lost) ^ 0x5a5a5a5a5a5aUL));
            more();
            first_lost = static_cast<Connection *>(reinterpret_cast<void *>(
                reinterpret_cast<unsigned long>(first_lost) ^ 0x5a5a5a5a5a5aUL));
#ifdef HEAPWALK_VALGRIND
            VALGRIND_DO_LEAK_CHECK;
#endif
            puts("ok");
        } else if (strcmp(line, "exit\n") == 0) {
            return 0;
        } else {
            puts("?");
        }
    }
    return 0;
}

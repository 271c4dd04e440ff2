/* @brief One leak kind per case (argv[1]): what memdump's pointer scan at exit must find, like
 * valgrind's leak check. Each case leaves its blocks, then scrubs the stack below main's frame so that
 * no stale copy of a pointer survives above the stack pointer at exit. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LIST_NODES 5

struct node {
    struct node *next;
    char payload[40];
};

static void *global_block;
static char *interior;
static void *length64_data;
static atomic_int ready;
static atomic_int holder_tid;
static int pipe_fds[2];

/* Overwrite the stack the cases used, and the registers they left pointers in. */
__attribute__((noinline)) static void scrub(void) {
    volatile char pad[16384];
    memset((char *)pad, 0, sizeof pad);
}

__attribute__((noinline)) static void case_global(void) {
    global_block = malloc(100);  // LEAK: global
}

__attribute__((noinline)) static void case_list(void) {
    struct node *head = NULL;
    for (int i = 0; i < LIST_NODES; i++) {
        struct node *n = malloc(sizeof *n);  // LEAK: list-node
        n->next = head;
        head = n;
    }
}

/* A lost tree: a 24-byte root points to two children, the first child to a grandchild. The
 * children are allocated first (lower addresses): valgrind's clique pass meets the first child
 * before the root, makes it lead a clique {kid1, kid2}, then the root's clique absorbs it. The
 * root: 428 (24 direct, 404 indirect) bytes in 1 blocks are definitely lost. */
__attribute__((noinline)) static void case_tree(void) {
    void **kid1 = calloc(1, 100);  // LEAK: tree-kid1
    void **kid2 = calloc(1, 150);  // LEAK: tree-kid2
    void **kid3 = calloc(1, 154);  // LEAK: tree-kid3
    void **root = calloc(3, sizeof(void *));  // LEAK: tree-root
    kid1[0] = kid2;
    root[0] = kid1;
    root[1] = kid3;
}

__attribute__((noinline)) static void case_interior(void) {
    interior = (char *)malloc(200) + 16;  // LEAK: interior
}

__attribute__((noinline)) static void case_cycle(void) {
    void **a = malloc(64);  // LEAK: cycle-a
    void **b = malloc(64);  // LEAK: cycle-b
    a[0] = b;
    b[0] = a;
}

/* sqlite's layout: the length of what follows, then the data; the program keeps a pointer to the
 * data (valgrind's length64 heuristic). */
__attribute__((noinline)) static void case_length64(void) {
    unsigned long *block = malloc(8 + 120);  // LEAK: length64
    block[0] = 120;
    length64_data = block + 1;
}

/* A large block gets an mmap of its own from glibc; an anonymous mapping the program makes right
 * below it (as CPython's pymalloc does for its arenas) merges with it into one kernel mapping. The
 * program's mapping is a root, the large block's region is not: the small block is reachable
 * through the mapping only. */
static void *big_block;

__attribute__((noinline)) static int case_mmap_neighbour(void) {
    big_block = malloc(256 * 1024);  // LEAK: mmapped-big
    char *chunk = (char *)big_block - 16;
    size_t size = 64 * 1024;
    void **area = mmap(chunk - size, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (area == MAP_FAILED) {  /* under valgrind, whose heap is elsewhere: anywhere will do */
        area = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (area == MAP_FAILED) {
        perror("reach_kinds: mmap");
        return 1;
    }
    area[100] = malloc(24);  // LEAK: in-mmap
    return 0;
}

static void *stack_holder(void *arg) {
    (void)arg;
    void *volatile kept = malloc(300);  // LEAK: thread-stack
    atomic_store(&holder_tid, (int)syscall(SYS_gettid));
    atomic_store(&ready, 1);
    for (;;) {
        pause();
    }
    return kept;
}

static void *exited_holder(void *arg) {
    (void)arg;
    void *volatile kept = malloc(310);  // LEAK: thread-exited
    (void)kept;
    return NULL;
}

/* The pointer lives in a register only: the thread blocks in read(2) into the block, so rsi holds
 * it (explicit register variables stay in their register at -O0), and nothing else does. */
static void *register_holder(void *arg) {
    (void)arg;
    int tid = (int)syscall(SYS_gettid);
    atomic_store(&holder_tid, tid);
    atomic_store(&ready, 1);
    register void *kept __asm__("rsi") = malloc(400);  // LEAK: register
    register long fd __asm__("rdi") = pipe_fds[0];
    register long len __asm__("rdx") = 400;
    for (;;) {
        long nr = SYS_read;
        __asm__ volatile("syscall" : "+a"(nr) : "D"(fd), "S"(kept), "d"(len) : "rcx", "r11", "memory");
    }
    return NULL;
}

/* Wait until the holder thread sits in a system call (it cannot move before exit). */
static void wait_blocked(void) {
    char path[64];
    char text[32] = "running";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", atomic_load(&holder_tid));
    for (;;) {
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            size_t n = fread(text, 1, sizeof text - 1, f);
            text[n] = '\0';
            fclose(f);
        }
        if (strncmp(text, "running", 7) != 0 && text[0] != '-') {
            return;
        }
        usleep(1000);
    }
}

static void start(void *(*fn)(void *), int wait_ready) {
    pthread_t t;
    pthread_create(&t, NULL, fn, NULL);
    if (wait_ready) {
        while (!atomic_load(&ready)) {
            usleep(1000);
        }
        wait_blocked();
    } else {
        pthread_join(t, NULL);
    }
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "";
    if (pipe(pipe_fds) != 0) {
        return 1;
    }
    if (strcmp(which, "global") == 0) {
        case_global();
    } else if (strcmp(which, "list") == 0) {
        case_list();
    } else if (strcmp(which, "tree") == 0) {
        case_tree();
    } else if (strcmp(which, "interior") == 0) {
        case_interior();
    } else if (strcmp(which, "cycle") == 0) {
        case_cycle();
    } else if (strcmp(which, "length64") == 0) {
        case_length64();
    } else if (strcmp(which, "thread-stack") == 0) {
        start(stack_holder, 1);
    } else if (strcmp(which, "thread-exited") == 0) {
        start(exited_holder, 0);
    } else if (strcmp(which, "register") == 0) {
        start(register_holder, 1);
    } else if (strcmp(which, "mmap-neighbour") == 0) {
        if (case_mmap_neighbour() != 0) {
            return 1;
        }
    } else {
        fprintf(stderr, "usage: reach_kinds global|list|tree|interior|cycle|length64|thread-stack|"
                        "thread-exited|register|mmap-neighbour\n");
        return 2;
    }
    scrub();
    return 0;
}

/* @brief Heap blocks of known types for the heap walk's typing (tests/e2e/test_heapwalk_types.py):
 * C++ objects with vtables (one class with multiple inheritance, one with a virtual base, one in a
 * namespace), leaked
 * objects of two classes, a cycle of leaked objects, C strings (strdup, a std::string's buffer),
 * a pointer array, and blocks of no type one can tell (raw numbers, a std::vector<int>'s buffer).
 *
 * It prints one line per block it lists, "BLOCK address usable type", then "READY", and stops
 * itself (SIGSTOP); continued, it exits 0. The leaked blocks' addresses are printed as they are
 * made, never kept: the program holds no pointer to them at its stop. */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

struct Connection {
    virtual ~Connection() = default;
    virtual int fd() const { return handle; }
    long handle = 3;
    long sent[5] = {};
};

struct Session {
    virtual ~Session() = default;
    virtual long user() const { return id; }
    long id = 7;
};

struct Reader {
    virtual ~Reader() = default;
    virtual int read() { return 1; }
    long r = 1;
};
struct Writer {
    virtual ~Writer() = default;
    virtual int write() { return 2; }
    long w = 2;
};
/* multiple inheritance: the Writer part's vptr at offset 16 is not the block's type */
struct Stream : Reader, Writer {
    long s = 3;
};

/* virtual inheritance: the vtable's address point is past the virtual base's offset, not at +16 */
struct Shared {
    virtual ~Shared() = default;
    long refs = 1;
};
struct Handle : virtual Shared {
    long h = 4;
};

namespace graph {
struct Node {
    virtual ~Node() = default;
    virtual int weight() const { return 1; }
    Node *next = nullptr;
};
}  // namespace graph

void *roots[16];              /* reachable: the program's globals point at these */
static std::string *text;     /* its buffer: a C string filling its block */
static std::vector<int> *numbers;

static void list(const void *p, const char *type) {
    printf("BLOCK %p %zu %s\n", p, malloc_usable_size(const_cast<void *>(p)), type);
}

static void __attribute__((noinline)) make(void) {
    for (int i = 0; i < 5; i++)
        list(new Connection, "Connection");  /* leaked: definitely lost */
    for (int i = 0; i < 3; i++)
        list(new Session, "Session");        /* leaked */
    graph::Node *a = new graph::Node, *b = new graph::Node, *c = new graph::Node;
    a->next = b;
    b->next = c;
    c->next = a;                             /* a leaked cycle */
    list(a, "graph::Node");
    list(b, "graph::Node");
    list(c, "graph::Node");
    Stream *s = new Stream;
    roots[0] = s;
    list(s, "Stream");
    Session **sessions = new Session *[6];   /* a pointer array of reachable sessions */
    for (int i = 0; i < 6; i++) {
        sessions[i] = new Session;
        list(sessions[i], "Session");
    }
    roots[1] = sessions;
    list(sessions, "pointer array");
    roots[2] = strdup("a C string of the program");
    list(roots[2], "char[]");
    roots[3] = strdup("/var/lib/heapwalk/types/a-path-name-of-forty-nine-bytes");
    list(roots[3], "char[]");
    text = new std::string(100, 'x');         /* its buffer: 101 bytes, a C string */
    list(text, "?");
    list(text->data(), "char[]");
    numbers = new std::vector<int>(30, 0x01020304);
    list(numbers, "pointer array");           /* begin, end, end of storage: 3 pointers */
    list(numbers->data(), "?");
    long *raw = static_cast<long *>(malloc(40));
    for (int i = 0; i < 5; i++)
        raw[i] = 0x10001 * (i + 1);
    roots[4] = raw;
    list(raw, "?");
    Handle *handle = new Handle;
    roots[5] = handle;
    list(handle, "Handle");
}

static void __attribute__((noinline)) scrub(void) {  /* no stale pointer left on the stack */
    volatile char buf[32768];
    memset(const_cast<char *>(buf), 0, sizeof buf);
}

int main(void) {
    make();
    scrub();
    printf("READY\n");
    fflush(stdout);
    raise(SIGSTOP);
    return 0;
}

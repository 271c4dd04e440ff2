/* Call chains into malloc/free: built -O0 -g and -O2 -g -fomit-frame-pointer by the tests. */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

void *(*volatile alloc_fn)(size_t) = malloc;
volatile int sink;
void *volatile kept;

NOINLINE void *recurse(int depth, size_t n) {
    if (depth == 0)
        return malloc(n);
    void *p = recurse(depth - 1, n + 1);
    sink += depth; /* keeps the call from being a tail call */
    return p;
}

/* Stack realignment plus alloca makes GCC use a DRAP register: the CFA and the saved rbp are
   then described by DWARF expressions (DW_OP_breg6 -8; DW_OP_deref). */
NOINLINE void *aligned_frame(size_t n) {
    char buf[256] __attribute__((aligned(64)));
    char *tmp = alloca(n + 16);
    memset(buf, (int)n, sizeof buf);
    memset(tmp, 2, n + 16);
    void *p = recurse(3, n + (size_t)buf[7] + (size_t)tmp[n]);
    sink += buf[3];
    return p;
}

/* alloca forces a frame pointer even with -fomit-frame-pointer: CFA = rbp + 16. */
NOINLINE void *vla_frame(size_t n) {
    char *tmp = alloca(n + 32);
    memset(tmp, 1, n + 32);
    void *p = aligned_frame(n + (size_t)tmp[n]);
    sink += tmp[1];
    return p;
}

NOINLINE void *c9(size_t n) { void *p = vla_frame(n); sink++; return p; }
NOINLINE void *c8(size_t n) { void *p = c9(n + 1); sink++; return p; }
NOINLINE void *c7(size_t n) { volatile char pad[100]; pad[0] = 1; void *p = c8(n + pad[0]); sink++; return p; }
NOINLINE void *c6(size_t n) { void *p = c7(n + 1); sink++; return p; }
NOINLINE void *c5(size_t n) { volatile long pad[40]; pad[3] = 2; void *p = c6(n + pad[3]); sink++; return p; }
NOINLINE void *c4(size_t n) { void *p = c5(n + 1); sink++; return p; }
NOINLINE void *c3(size_t n) { void *p = c4(n + 1); sink++; return p; }
NOINLINE void *c2(size_t n) { void *p = c3(n + 1); sink++; return p; }
NOINLINE void *c1(size_t n) { void *p = c2(n + 1); sink++; return p; }
NOINLINE void *c0(size_t n) { void *p = c1(n + 1); sink++; return p; }

NOINLINE void *through_pointer(size_t n) { void *p = alloc_fn(n); sink++; return p; }

NOINLINE void release(void *p) { free(p); sink++; }

/* A noreturn call as the last instruction of its caller: the return address is past its end. */
NOINLINE __attribute__((noreturn)) void finish(int code) {
    kept = malloc(77);
    fflush(stdout);
    exit(code);
}

NOINLINE void last_call(int argc) {
    if (argc > 0)
        finish(0);
    sink = 5;
}

int main(int argc, char **argv) {
    (void)argv;
    for (int i = 0; i < 3; i++)
        release(recurse(25, 16 + (size_t)i));
    release(c0(10));
    release(through_pointer(48));
    printf("chain %d\n", sink);
    char *s = strdup("hello");
    release(s);
    last_call(argc);
    return 1;
}

/* @brief Leak kinds at a stop in the middle of the run (GDB's `memdump leaks`), then none at
 * exit. At the line marked `BREAK: first`, the reachable and the possibly lost blocks below are
 * live; at the line marked `BREAK: check`: 40 bytes still reachable from a global, with a
 * 24-byte child reachable through it; a 48-byte block definitely lost, owning a 16-byte block
 * (indirectly lost); a 64-byte block possibly lost (a global points inside it). Built with
 * valgrind's memcheck.h when it is there (LIVE_LEAKS_VALGRIND), both points ask valgrind for
 * its leak check (VALGRIND_DO_LEAK_CHECK), the answers the tests compare with. */
#include <stdlib.h>
#include <string.h>
#ifdef LIVE_LEAKS_VALGRIND
#include <valgrind/memcheck.h>
#else
#define VALGRIND_DO_LEAK_CHECK
#endif

struct node { struct node *child; char pad[32]; };

struct node *held;        /* reachable: held -> child */
char *inside;             /* possibly lost: points 8 bytes into its block */
static struct node *lost_again;

__attribute__((noinline)) static void lose(void) {
    struct node *lost = malloc(48);  // LEAK: lost
    memset(lost, 0, 48);
    lost->child = malloc(16);  // LEAK: lost-child
    memset(lost->child, 0, 16);
    lost_again = lost;  /* kept for the end, but hidden: stored scrambled below */
    lost_again = (struct node *)((unsigned long)lost_again ^ 0x5a5a5a5aUL);
}

__attribute__((noinline)) static void scrub(void) {
    volatile char area[1024];
    memset((char *)area, 0, sizeof area);
}

int main(void) {
    held = malloc(40);  // LEAK: held
    memset(held, 0, 40);
    held->child = malloc(24);  // LEAK: held-child
    memset(held->child, 0, 24);
    char *block = malloc(64);  // LEAK: inside
    memset(block, 0, 64);
    inside = block + 8;
    block = NULL;
    VALGRIND_DO_LEAK_CHECK;  // BREAK: first
    lose();
    scrub();
    VALGRIND_DO_LEAK_CHECK;  // BREAK: check
    struct node *lost = (struct node *)((unsigned long)lost_again ^ 0x5a5a5a5aUL);
    free(lost->child);
    free(lost);
    free(inside - 8);
    free(held->child);
    free(held);
    return 0;
}

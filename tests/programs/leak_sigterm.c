/* @brief Leaks a 48-byte block (its pointer dropped) and keeps a 32-byte one reachable from a
 * global, then dies of SIGTERM's default action, as a server a supervisor stops. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *kept;

__attribute__((noinline)) static void lose(void) {
    char *lost = malloc(48);  // LEAK: lost
    memset(lost, 1, 48);
}

int main(void) {
    kept = malloc(32);  // LEAK: kept
    memset(kept, 2, 32);
    lose();
    char scrub[512];  // the dead frame of lose() held the lost pointer: overwrite it
    memset(scrub, 0, sizeof scrub);
    __asm__ volatile("" : : "r"(scrub) : "memory");
    kill(getpid(), SIGTERM);
    pause();
    return 0;
}

/* @brief Leaks 72 bytes, then sends itself SIGKILL: no debugger can stop that. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char *leaked = malloc(72);  // LEAK: before-kill
    leaked[0] = 'x';
    kill(getpid(), SIGKILL);
    return 0;
}

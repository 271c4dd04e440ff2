/* @brief Leaks 48 bytes, then leaves with _exit(5): no atexit handlers, no stdio flush. */
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char *leaked = malloc(48);  // LEAK: before-exit
    leaked[0] = 'x';
    _exit(5);
}

/* @brief Leaks 123 bytes, says "ready" on stdout, waits for a line on stdin, then leaks 321 bytes and
 * exits. Used to kill GDB while the program waits and to attach to a running program. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char *first = malloc(123);  // LEAK: first
    first[0] = 'x';
    char ready[] = "ready\n";
    if (write(1, ready, sizeof ready - 1) < 0) {
        return 1;
    }
    char line[64];
    ssize_t got = read(0, line, sizeof line);
    char *second = malloc(321);  // LEAK: second
    second[0] = 'y';
    return got < 0;
}

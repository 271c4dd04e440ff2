/* @brief For scripts/memdump.sh: prints its arguments one per line between brackets, copies stdin to
 * stdout byte for byte, writes "stderr line" to stderr, and exits with the status in $ECHO_STATUS. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        printf("[%s]\n", argv[i]);
    }
    fflush(stdout);
    char buf[4096];
    ssize_t got;
    while ((got = read(0, buf, sizeof buf)) > 0) {
        if (write(1, buf, (size_t)got) != got) {
            return 100;
        }
    }
    fputs("stderr line\n", stderr);
    const char *status = getenv("ECHO_STATUS");
    return status != NULL ? atoi(status) : 0;
}

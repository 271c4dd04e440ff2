/* @brief Leaks 90 bytes, then execs the program named by argv[1] (which leaks its own block): exec
 * replaces the image, so the first block is gone and only the new image's blocks remain. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: exec_leak PROGRAM [ARGS...]\n");
        return 2;
    }
    char *before_exec = malloc(90);  // LEAK: before-exec
    before_exec[0] = 'x';
    execv(argv[1], argv + 1);
    perror("execv");
    return 127;
}

/* @brief The parent leaks 70 bytes, its child 80 bytes; the parent waits for the child and exits with 0
 * only when the child exited normally with 0 (a child left with breakpoints would die of SIGTRAP). */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    char *parent_block = malloc(70);  // LEAK: parent
    parent_block[0] = 'p';
    pid_t child = fork();
    if (child < 0) {
        return 10;
    }
    if (child == 0) {
        char *child_block = malloc(80);  // LEAK: child
        child_block[0] = 'c';
        char *child_freed = malloc(90);  // FREE: child-freed
        free(child_freed);
        exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) {
        return 11;
    }
    if (!WIFEXITED(status)) {
        return 12;
    }
    return WEXITSTATUS(status);
}

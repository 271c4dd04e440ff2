/* @brief Starts the program named by argv[1] twice, once by fork and execv, once by posix_spawn
 * (glibc: a vfork-like clone, no fork handlers), and waits for both; the parent leaks 70 bytes
 * and the forked child, before its exec, allocates 40 bytes and frees them. Exits 0 when both
 * children exited with 0. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int waited(pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: spawn_leak PROGRAM [ARGS...]\n");
        return 2;
    }
    char *parent_block = malloc(70);  // LEAK: parent
    parent_block[0] = 'p';
    pid_t forked = fork();
    if (forked < 0)
        return 10;
    if (forked == 0) {
        char *before_exec = malloc(40);  // FREE: before-exec
        before_exec[0] = 'c';
        free(before_exec);
        execv(argv[1], argv + 1);
        _exit(127);
    }
    pid_t spawned = 0;
    if (posix_spawn(&spawned, argv[1], NULL, NULL, argv + 1, environ) != 0)
        return 11;
    return waited(forked) && waited(spawned) ? 0 : 12;
}

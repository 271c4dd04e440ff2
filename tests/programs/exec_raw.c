/* @brief Executes the program named by argv[1] with a raw execve system call, which no exec hook
 * of memdump's in-process recorder sees: the new image is recorded with breakpoints. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: exec_raw PROGRAM [ARGS...]\n");
        return 2;
    }
    syscall(SYS_execve, argv[1], argv + 1, environ);
    perror("execve");
    return 127;
}

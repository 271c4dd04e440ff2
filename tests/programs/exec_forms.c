/* @brief `exec_forms FORM PROGRAM N`: allocates, then executes PROGRAM N with the exec function FORM
 * names (v, ve, vp, vpe, l, le, lp, f for fexecve), after one failed attempt with the same function
 * on a path that does not exist, which must leave errno ENOENT (exit 3 otherwise). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static int run(const char *form, const char *path, char *n) {
    char *argv[] = {(char *)path, n, NULL};
    if (!strcmp(form, "v")) return execv(path, argv);
    if (!strcmp(form, "ve")) return execve(path, argv, environ);
    if (!strcmp(form, "vp")) return execvp(path, argv);
    if (!strcmp(form, "vpe")) return execvpe(path, argv, environ);
    if (!strcmp(form, "l")) return execl(path, path, n, (char *)NULL);
    if (!strcmp(form, "le")) return execle(path, path, n, (char *)NULL, environ);
    if (!strcmp(form, "lp")) return execlp(path, path, n, (char *)NULL);
    if (!strcmp(form, "f")) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) return -1;
        return fexecve(fd, argv, environ);
    }
    errno = EINVAL;
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: exec_forms FORM PROGRAM N\n");
        return 2;
    }
    char *before = malloc(60);  // FREE: before-exec (gone with the image)
    before[0] = 'x';
    errno = 0;
    if (run(argv[1], "/nonexistent/program", argv[3]) != -1 || errno != ENOENT) {
        fprintf(stderr, "exec_forms: errno %d after a failed exec\n", errno);
        return 3;
    }
    run(argv[1], argv[2], argv[3]);
    perror("exec_forms");
    return 127;
}

/* @brief Allocates on command, to be attached to. Allocates a block, says "ready", then answers each
 * line of stdin with one line on stdout: `leak N` allocates N bytes and keeps them, `temp N`
 * allocates N bytes and frees them, `free-first` frees the block allocated before "ready", `hold N`
 * allocates N bytes with a malloc call that says "holding" and waits for a line before it returns,
 * `exit` (or the end of stdin) exits 0. A SIGINT that reaches it prints "SIGINT".
 *
 * It brings its own malloc (over glibc's, as a program linked with an allocator does) so that a call
 * can be held open. Only read(2) and write(2) do I/O: stdio would allocate. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);

static volatile sig_atomic_t hold_next;

static void say(const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t done = write(1, text, left);
        if (done <= 0) {
            _exit(3);
        }
        text += done;
        left -= (size_t)done;
    }
}

/* One line of stdin without its newline, a byte at a time (nothing is read ahead); 0 at its end. */
static int read_line(char *line, size_t size) {
    size_t used = 0;
    for (;;) {
        char c;
        ssize_t got = read(0, &c, 1);
        if (got < 0) {
            continue; /* EINTR */
        }
        if (got == 0) {
            return used > 0;
        }
        if (c == '\n') {
            break;
        }
        if (used + 1 < size) {
            line[used++] = c;
        }
    }
    line[used] = '\0';
    return 1;
}

void *malloc(size_t size) {
    if (hold_next) {
        hold_next = 0;
        char line[64];
        say("holding\n");
        read_line(line, sizeof line);
    }
    return __libc_malloc(size);
}

static void on_sigint(int sig) {
    (void)sig;
    static const char text[] = "SIGINT\n";
    if (write(1, text, sizeof text - 1) < 0) {
        _exit(4);
    }
}

int main(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_sigint;
    sigaction(SIGINT, &action, NULL);

    char *first = malloc(50);  // LEAK: first
    first[0] = 'x';
    say("ready\n");
    char line[64];
    while (read_line(line, sizeof line)) {
        size_t size = (size_t)strtoul(line + strcspn(line, " "), NULL, 10);
        if (strncmp(line, "leak ", 5) == 0) {
            char *block = malloc(size);  // LEAK: leak
            block[0] = 'l';
        } else if (strncmp(line, "temp ", 5) == 0) {
            char *block = malloc(size);  // FREE: temp
            block[0] = 't';
            free(block);
        } else if (strcmp(line, "free-first") == 0) {
            free(first);  // FREE: first
            first = NULL;
        } else if (strncmp(line, "hold ", 5) == 0) {
            hold_next = 1;
            char *block = malloc(size);  // LEAK: hold
            block[0] = 'h';
        } else if (strcmp(line, "exit") == 0) {
            break;
        } else {
            say("unknown command\n");
            continue;
        }
        say("ok\n");
    }
    return 0;
}

/* @brief Blocks of known leak kinds when a recording ends before the program does (`memdump stop`,
 * `detach`, `memdump.sh -p`). `keep N` allocates N bytes a global array holds (still reachable),
 * `lose N` allocates N bytes and drops the only pointer (definitely lost). With arguments
 * (`keep:40 lose:48`) it does each, then stops at the line marked `BREAK: done`; without, it says
 * "ready" and answers each line of stdin (`keep N`, `lose N`, `exit`) with "ok", to be attached to.
 * Only read(2) and write(2) do I/O: stdio would allocate. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *kept[64];
static int nkept;

static void say(const char *text) {
    if (write(1, text, strlen(text)) < 0) {
        _exit(3);
    }
}

__attribute__((noinline)) static void keep(size_t size) {
    char *block = malloc(size);  // LEAK: keep
    block[0] = 'k';
    kept[nkept++ % 64] = block;
}

__attribute__((noinline)) static void lose(size_t size) {
    char *block = malloc(size);  // LEAK: lose
    block[0] = 'l';
}

/* The stack below the caller, where lose() kept its pointer, overwritten; and the registers
 * malloc left it in (rcx, rdi), by memset's call. */
__attribute__((noinline)) static void scrub(void) {
    volatile char area[1024];
    memset((char *)area, 0, sizeof area);
}

static int command(const char *verb, size_t size) {
    if (strcmp(verb, "keep") == 0) {
        keep(size);
    } else if (strcmp(verb, "lose") == 0) {
        lose(size);
    } else {
        return 0;
    }
    scrub();
    return 1;
}

__attribute__((noinline)) static void done(void) {
    say("done\n");  // BREAK: done
}

int main(int argc, char **argv) {
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            char *colon = strchr(argv[i], ':');
            if (colon == NULL) {
                return 2;
            }
            *colon = '\0';
            if (!command(argv[i], strtoul(colon + 1, NULL, 10))) {
                return 2;
            }
        }
        done();
        return 0;
    }
    say("ready\n");
    char line[64];
    size_t used = 0;
    char c;
    for (;;) {
        ssize_t got = read(0, &c, 1);
        if (got < 0 && errno == EINTR) {
            continue; /* a stop of GDB's */
        }
        if (got != 1) {
            break;
        }
        if (c != '\n') {
            if (used + 1 < sizeof line) {
                line[used++] = c;
            }
            continue;
        }
        line[used] = '\0';
        used = 0;
        if (strcmp(line, "exit") == 0) {
            break;
        }
        char *space = strchr(line, ' ');
        if (space != NULL) {
            *space = '\0';
        }
        say(space != NULL && command(line, strtoul(space + 1, NULL, 10)) ? "ok\n" : "bad\n");
    }
    return 0;
}

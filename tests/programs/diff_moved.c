/* @brief Five leaks for `memdump-analyze diff` across an edit that moves every line
 * (tests/e2e/test_memdump_ci.py): CMake builds this file as diff_moved and, with one comment line
 * added at its top, as diff_moved_edited. Two leaks share a stack shape (make_name called from two
 * lines of main). With `kill` the program ends by SIGKILL after leaking: its dump has no pointer
 * scan. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void *kept;

__attribute__((noinline)) static char *make_name(const char *text)
{
    char *name = malloc(strlen(text) + 1);  // LEAK: name
    strcpy(name, text);
    return name;
}

__attribute__((noinline)) static void *make_table(size_t n)
{
    return calloc(n, 8);  // LEAK: table
}

__attribute__((noinline)) static void leak_all(void)
{
    make_name("first");  // CALL: first
    make_name("second one");  // CALL: second
    make_table(4);  // CALL: table
    kept = make_table(9);  // CALL: kept
    char *raw = malloc(48);  // LEAK: raw
    memset(raw, 0, 48);
}

int main(int argc, char **argv)
{
    leak_all();  // CALL: leak_all
    if (argc > 1 && strcmp(argv[1], "kill") == 0)
        raise(SIGKILL);
    return 0;
}

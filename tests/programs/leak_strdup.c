/* @brief strdup leaks 12 bytes; the site is the user's line, not strdup's malloc call. */
#define _GNU_SOURCE
#include <string.h>

static char *copy_name(const char *name) {
    return strdup(name);  // LEAK: strdup
}

int main(void) {
    char *name = copy_name("hello world");
    return name == NULL;
}

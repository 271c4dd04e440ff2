/* @brief A plugin loaded with dlopen whose function leaks 33 bytes. */
#include <stdlib.h>

void *plugin_leak(void);

void *plugin_leak(void) {
    char *block = malloc(33);  // LEAK: plugin
    block[0] = 'p';
    return block;
}

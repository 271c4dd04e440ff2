/* @brief dlopen()s the plugin named by argv[1], calls its leaking function, dlclose()s it. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_main PLUGIN.so\n");
        return 2;
    }
    void *handle = dlopen(argv[1], RTLD_NOW);
    if (handle == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    void *(*leak)(void) = (void *(*)(void))dlsym(handle, "plugin_leak");
    if (leak == NULL) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    void *block = leak();  // CALL: plugin
    dlclose(handle);
    return block == NULL;
}

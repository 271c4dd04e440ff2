/* A pool in a shared library built with -O2 -fvisibility=hidden (tests/programs/CMakeLists.txt):
 * memdump_api.h's symbols keep default visibility, so both recorders see its objects. */
#include <stdlib.h>

#include <memdump_api.h>

#define OBJECT_SIZE 32

static char *block;

__attribute__((visibility("default"))) void *lib_pool_get(int i)
{
    if (block == NULL)
        block = malloc(OBJECT_SIZE * 8);
    void *object = block + OBJECT_SIZE * i;
    MEMDUMP_ALLOC(object, OBJECT_SIZE);  // LEAK: lib_object
    return object;
}

__attribute__((visibility("default"))) void lib_pool_put(void *object)
{
    MEMDUMP_FREE(object);
}

/* A small object pool that reports its objects with memdump_api.h: one malloc'd superblock of
 * 8 objects of 48 bytes, a free list threaded through the free objects. main takes 4 objects,
 * gives 3 back and drops its pointer to the third: that object is definitely lost, at the
 * MEMDUMP_ALLOC of pool_get (called from take_leaked). The superblock stays reachable from
 * `pool` and is not reported: it holds a live object (docs/dump-format.md, "Custom blocks"). */
#include <stdlib.h>
#include <string.h>

#include <memdump_api.h>

#define OBJECT_SIZE 48
#define OBJECTS 8

struct pool {
    char *block;
    void *free_list;
};

static struct pool pool;

static void pool_init(void)
{
    pool.block = malloc(OBJECT_SIZE * OBJECTS);
    pool.free_list = NULL;
    for (int i = OBJECTS - 1; i >= 0; i--) {
        void **object = (void **)(pool.block + i * OBJECT_SIZE);
        *object = pool.free_list;
        pool.free_list = object;
    }
}

static void *pool_get(void)
{
    void **object = pool.free_list;
    if (object == NULL)
        return NULL;
    pool.free_list = *object;
    memset(object, 0, OBJECT_SIZE);
    MEMDUMP_ALLOC(object, OBJECT_SIZE);  // LEAK: pool_object
    return object;
}

static void pool_put(void *object)
{
    MEMDUMP_FREE(object);  // FREE: pool_object
    *(void **)object = pool.free_list;
    pool.free_list = object;
}

/* No stale copy of the leaked pointer may survive in the stack above the stack pointer at exit
 * (as tests/programs/reach_kinds.c). */
static __attribute__((noinline)) void scrub(void)
{
    volatile char pad[16384];
    memset((char *)pad, 0, sizeof pad);
    __asm__ volatile("" : : "r"(pad) : "memory");  /* kept at -O2 */
}

static __attribute__((noinline)) void *take_leaked(void)
{
    return pool_get();  // CALL: take_leaked
}

int main(void)
{
    pool_init();
    void *a = pool_get();
    void *b = pool_get();
    void *leaked = take_leaked();
    void *d = pool_get();
    ((long *)leaked)[1] = 42;  /* used, then forgotten */
    leaked = NULL;
    pool_put(d);
    pool_put(b);
    pool_put(a);
    scrub();
    return 0;
}

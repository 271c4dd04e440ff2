/* Takes two objects from pool_lib's pool, gives one back and forgets the other. */
#include <string.h>

void *lib_pool_get(int i);
void lib_pool_put(void *object);

static __attribute__((noinline)) void scrub(void)
{
    volatile char pad[16384];
    memset((char *)pad, 0, sizeof pad);
    __asm__ volatile("" : : "r"(pad) : "memory");
}

static __attribute__((noinline)) void take(void)
{
    void *kept = lib_pool_get(0);
    lib_pool_get(3);  // CALL: lib_object
    lib_pool_put(kept);
}

int main(void)
{
    take();
    scrub();
    return 0;
}

/* @brief The red zones checked at GDB's stops (`set memdump check-at-stop`, docs/heap-errors.md):
 * `redzone_stops MODE [N]`, run with red zones (tests/e2e/test_check_at_stop.py):
 *
 *   overrun      one byte past a 20-byte block, then two stops (BREAK: first, BREAK: second)
 *                before the block's free
 *   freed        the same overrun, then the block's free (FREE: freed, where the recorder finds
 *                it), then a stop (BREAK: first) and another (BREAK: second)
 *   handler      the same overrun, then a stop inside a SIGUSR1 handler (BREAK: handler), then
 *                one after it (BREAK: second)
 *   many N       N live blocks of 32 bytes, then 20 stops at BREAK: many (the cost of a stop's
 *                check on a big heap), then their frees
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;
static volatile int stops;

__attribute__((noinline)) static void first(void)
{
    stops++;  // BREAK: first
}

__attribute__((noinline)) static void second(void)
{
    stops++;  // BREAK: second
}

static void on_usr1(int sig)
{
    (void)sig;
    stops++;  // BREAK: handler
}

static char *overrun(void)
{
    char *p = malloc(20);  // ALLOC: overrun
    memset(p, 'a', 20);
    p[20] = 'b';  // ERROR: overrun
    return p;
}

static int many(long n)
{
    void **blocks = calloc((size_t)n, sizeof *blocks);
    if (blocks == NULL)
        return 1;
    for (long i = 0; i < n; i++)
        blocks[i] = malloc(32);
    for (int i = 0; i < 20; i++)
        stops++;  // BREAK: many
    for (long i = 0; i < n; i++)
        free(blocks[i]);
    free(blocks);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "many") == 0)
        return many(argc > 2 ? atol(argv[2]) : 100000);
    if (strcmp(mode, "overrun") != 0 && strcmp(mode, "handler") != 0 &&
        strcmp(mode, "freed") != 0)
        return 2;
    char *p = overrun();
    sink = p;
    if (strcmp(mode, "freed") == 0) {
        free(p);  // FREE: freed
        first();
        second();
        return 0;
    }
    if (strcmp(mode, "handler") == 0) {
        signal(SIGUSR1, on_usr1);
        raise(SIGUSR1);
    } else {
        first();
    }
    second();
    free(p);  // FREE: overrun
    return 0;
}

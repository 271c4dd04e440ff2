/* @brief The resident set climbs in three steps of 16 MiB, 60 ms apart, then falls: the dump's clock
 * samples (`c` records) follow it. Each step also makes 256 small allocations, so that the in-process
 * recorder, which looks at the clock every 64th event, samples it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEP (16u << 20)

static void small_allocations(void)
{
    for (int i = 0; i < 256; i++)
        free(malloc(32));
}

int main(void)
{
    char *steps[3];
    struct timespec pause = {0, 60000000};
    for (int k = 0; k < 3; k++) {
        steps[k] = malloc(STEP);
        memset(steps[k], k + 1, STEP); /* touched: resident */
        small_allocations();
        nanosleep(&pause, NULL);
    }
    small_allocations();
    for (int k = 0; k < 3; k++)
        free(steps[k]);
    small_allocations();
    return 0;
}

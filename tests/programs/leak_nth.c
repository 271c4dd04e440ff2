/* @brief One call site allocates five blocks; the third (i == 2) is never freed: `memdump break
 * --leak 1 --from DUMP` must land on that call, not on the first from the same stack. */
#include <stdlib.h>
#include <string.h>

static char *make(int i)
{
    char *p = malloc(40 + (size_t)i); // BREAK: make
    memset(p, i, 40 + (size_t)i);
    return p;
}

int main(void)
{
    char *kept[5];
    for (int i = 0; i < 5; i++)
        kept[i] = make(i); // BREAK: call
    for (int i = 0; i < 5; i++)
        if (i != 2)
            free(kept[i]);
    kept[2][0] = 0;
    return 0;
}

/* A function to call in the process from GDB, with six arguments that each land in their own
 * digit of the result, and a process that waits on its stdin to be called
 * (tests/e2e/test_inferior_call.py). */
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline, used)) long weigh(long a, long b, long c, long d, long e, long f)
{
    return a + 10 * b + 100 * c + 1000 * d + 10000 * e + 100000 * f;
}

int main(void)
{
    char c;
    puts("ready");
    fflush(stdout);
    if (read(0, &c, 1) != 1)
        return 2;
    printf("resumed %c\n", c);
    return 0;
}

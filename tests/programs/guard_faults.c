/* @brief Heap access errors for guard pages under GDB (tests/e2e/test_memdump_guard_gdb.py):
 * one run makes each of its errors in turn, so that a batch run reports every one and the
 * program goes on to print "done" and exit 0. Each line the test checks carries a marker.
 *
 *   guard_faults all       one byte past a malloc, a read past the end in a loop, a use after
 *                          free in a second thread (each once)
 *   guard_faults MODE      past-end, read-loop or uaf-thread: that one only
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile char sink;

static void __attribute__((noinline)) past_end(void)
{
    int *a = malloc(10 * sizeof *a);  // ALLOC: past-end
    for (int i = 0; i < 10; i++)
        a[i] = i;
    a[10] = 10;  // ERROR: past-end
    free(a);
}

static int __attribute__((noinline)) read_loop(int n)
{
    char *s = malloc(24);  // ALLOC: read-loop
    memset(s, 'x', 24);
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += s[i];  // ERROR: read-loop
    free(s);
    return sum;
}

static void *late_reader(void *p)
{
    return (void *)(long)((int *)p)[3];  // ERROR: uaf-thread
}

static void __attribute__((noinline)) use_after_free_in_thread(void)
{
    int *p = calloc(8, sizeof *p);  // ALLOC: uaf-thread
    free(p);  // FREE: uaf-thread
    pthread_t t;
    void *out;
    pthread_create(&t, NULL, late_reader, p);
    pthread_join(t, &out);
    sink = (char)(long)out;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    int all = strcmp(mode, "all") == 0;
    if (all || strcmp(mode, "past-end") == 0)
        past_end();  // CALL: past-end
    if (all || strcmp(mode, "read-loop") == 0)
        sink = (char)read_loop(26);  // CALL: read-loop
    if (all || strcmp(mode, "uaf-thread") == 0)
        use_after_free_in_thread();  // CALL: uaf-thread
    puts("done");
    return 0;
}

/* @brief Red zones (scripts/memdump.sh --redzones, docs/heap-errors.md "Red zones"):
 * `redzone_errors MODE`, one heap corruption a mode, each at a marked line
 * (tests/e2e/test_memdump_redzones.py), or a heavy correct program:
 *
 *   slack        one byte past a 20-byte malloc: inside malloc's rounding slack (its chunk has
 *                24 usable bytes), where glibc and a 16-aligned guard page see nothing
 *   memcpy       a memcpy of 32 bytes into a 24-byte block, found at its free
 *   realloc      two bytes past a 10-byte block, found at its realloc
 *   underrun     the byte before a 16-byte block, found at its free
 *   freed        4 bytes written into a 32-byte block after its free; it stays in the
 *                quarantine (a few frees after it), and is found at exit
 *   evicted      the same write, then 300 KiB of frees: found as it leaves the 256 KiB
 *                quarantine
 *   child        a forked child's slack overflow (the parent's blocks intact)
 *   heavy        malloc, calloc, realloc, reallocarray, posix_memalign, aligned_alloc, memalign,
 *                malloc_usable_size used to its end, valloc, strdup, four threads and a fork:
 *                no error
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile sink;

static int slack(void)
{
    char *p = malloc(20);  // ALLOC: slack
    memset(p, 'a', 20);
    p[20] = 'b';  /* one byte past: in the slack */
    free(p);  // FOUND: slack
    return 0;
}

static int overflow_memcpy(const char *src)
{
    char *p = malloc(24);  // ALLOC: memcpy
    memcpy(p, src, 32);  /* 8 bytes too many */
    free(p);  // FOUND: memcpy
    return 0;
}

static int overflow_realloc(void)
{
    char *p = malloc(10);  // ALLOC: realloc
    memset(p, 'c', 12);  /* 2 bytes past */
    p = realloc(p, 100);  // FOUND: realloc
    free(p);
    return 0;
}

static int underrun(void)
{
    char *p = malloc(16);  // ALLOC: underrun
    p[-1] = 0;
    free(p);  // FOUND: underrun
    return 0;
}

static int write_after_free(int frees, size_t size)
{
    int *p = malloc(32);  // ALLOC: freed
    p[0] = 1;
    free(p);  // FREE: freed
    p[2] = 42;  /* bytes 8 to 11 of the freed block */
    for (int i = 0; i < frees; i++) {
        sink = malloc(size);
        free(sink);
    }
    return 0;
}

static void *churn(void *arg)
{
    long seed = (long)arg;
    void *live[64] = {0};
    for (long i = 0; i < 20000; i++) {
        long k = (i * 7919 + seed) % 64;
        size_t size = (size_t)((i * 31 + seed) % 700);
        if (live[k] != NULL) {
            if (i % 3 == 0) {
                char *q = realloc(live[k], size + 1);
                if (q != NULL) {
                    memset(q, 'r', size + 1);
                    live[k] = q;
                }
                continue;
            }
            free(live[k]);
        }
        char *p = i % 5 == 0 ? calloc(1, size + 1) : malloc(size + 1);
        memset(p, 'x', size + 1);
        live[k] = p;
    }
    for (int k = 0; k < 64; k++)
        free(live[k]);
    return NULL;
}

static int heavy(void)
{
    pthread_t th[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, churn, (void *)i);
    void *a = NULL;
    if (posix_memalign(&a, 64, 100) != 0 || ((size_t)a & 63) != 0)
        return 1;
    memset(a, 1, 100);
    char *b = aligned_alloc(256, 512);
    char *c = memalign(32, 33);
    if (((size_t)b & 255) != 0 || ((size_t)c & 31) != 0)
        return 1;
    memset(b, 2, 512);
    memset(c, 3, 33);
    char *d = malloc(13);
    size_t usable = malloc_usable_size(d);
    memset(d, 4, usable);  /* every usable byte is the program's */
    char *e = reallocarray(NULL, 7, 9);
    memset(e, 5, 63);
    e = realloc(e, 3);
    char *v = valloc(100);
    memset(v, 6, 100);
    char *s = strdup("red zones");
    pid_t pid = fork();
    if (pid == 0) {
        char *x = malloc(50);
        memset(x, 7, 50);
        free(x);
        free(s);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(v);
    free(s);
    printf("heavy: usable %zu\n", usable);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const char src[64] = "0123456789abcdef0123456789abcdef";
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "slack") == 0)
        return slack();
    if (strcmp(mode, "memcpy") == 0)
        return overflow_memcpy(src);
    if (strcmp(mode, "realloc") == 0)
        return overflow_realloc();
    if (strcmp(mode, "underrun") == 0)
        return underrun();
    if (strcmp(mode, "freed") == 0)
        return write_after_free(4, 64);  /* a few frees: it stays in the quarantine */
    if (strcmp(mode, "evicted") == 0)
        return write_after_free(300, 1024);
    if (strcmp(mode, "heavy") == 0)
        return heavy();
    if (strcmp(mode, "child") == 0) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(slack());
        int status = 0;
        waitpid(pid, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    fprintf(stderr, "usage: redzone_errors slack|memcpy|realloc|underrun|freed|evicted|child|heavy\n");
    return 2;
}

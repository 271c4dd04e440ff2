/* @brief A multi-threaded service to attach to: allocates in several threads forever, and a known
 * set of blocks on each command. At start it allocates OLD_BLOCKS blocks of 4242 bytes and says
 * "ready"; a background thread then mallocs and frees 24 bytes every 100 us, forever. Each line of
 * stdin is a command, answered with one line on stdout once done: `round K` has each of the
 * WORKERS threads malloc K blocks of 1000 + W bytes (W its number), free them, and malloc one of
 * 2000 + W bytes it keeps; `free-old` frees the blocks allocated before "ready"; `exit` (or the end
 * of stdin) exits 0. Only read(2) and write(2) do I/O (stdio would allocate). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 4
#define OLD_BLOCKS 5
#define MAX_ROUND 1000

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned generation, finished, round_size;
static volatile int quitting;

static void say(const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t done = write(1, text, left);
        if (done <= 0) {
            _exit(3);
        }
        text += done;
        left -= (size_t)done;
    }
}

static int read_line(char *line, size_t size) {
    size_t used = 0;
    for (;;) {
        char c;
        ssize_t got = read(0, &c, 1);
        if (got < 0) {
            continue; /* EINTR */
        }
        if (got == 0) {
            return used > 0;
        }
        if (c == '\n') {
            break;
        }
        if (used + 1 < size) {
            line[used++] = c;
        }
    }
    line[used] = '\0';
    return 1;
}

static void *worker(void *arg) {
    size_t w = (size_t)arg;
    unsigned seen = 0;
    static void *blocks[WORKERS][MAX_ROUND];
    for (;;) {
        pthread_mutex_lock(&mutex);
        while (generation == seen && !quitting) {
            pthread_cond_wait(&cond, &mutex);
        }
        if (quitting) {
            pthread_mutex_unlock(&mutex);
            return NULL;
        }
        seen = generation;
        unsigned k = round_size;
        pthread_mutex_unlock(&mutex);
        for (unsigned i = 0; i < k; i++) {
            blocks[w][i] = malloc(1000 + w);  // FREE: round
            memset(blocks[w][i], 1, 8);
        }
        for (unsigned i = 0; i < k; i++) {
            free(blocks[w][i]);
        }
        char *kept = malloc(2000 + w);  // LEAK: kept
        kept[0] = 'k';
        pthread_mutex_lock(&mutex);
        finished++;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&mutex);
    }
}

static void *noise(void *arg) {
    (void)arg;
    struct timespec pause = {0, 100000};
    while (!quitting) {
        void *p = malloc(24);  // FREE: noise
        memset(p, 2, 24);
        free(p);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(void) {
    void *old[OLD_BLOCKS];
    for (int i = 0; i < OLD_BLOCKS; i++) {
        old[i] = malloc(4242);  // LEAK: old
    }
    pthread_t threads[WORKERS + 1];
    for (size_t w = 0; w < WORKERS; w++) {
        pthread_create(&threads[w], NULL, worker, (void *)w);
    }
    pthread_create(&threads[WORKERS], NULL, noise, NULL);
    say("ready\n");
    char line[4096];
    while (read_line(line, sizeof line)) {
        if (strncmp(line, "round ", 6) == 0) {
            unsigned k = (unsigned)strtoul(line + 6, NULL, 10);
            pthread_mutex_lock(&mutex);
            round_size = k > MAX_ROUND ? MAX_ROUND : k;
            finished = 0;
            generation++;
            pthread_cond_broadcast(&cond);
            while (finished < WORKERS) {
                pthread_cond_wait(&cond, &mutex);
            }
            pthread_mutex_unlock(&mutex);
        } else if (strncmp(line, "one ", 4) == 0) {
            char *block = malloc((size_t)strtoul(line + 4, NULL, 10));  // LEAK: one
            block[0] = 'o';
        } else if (strncmp(line, "plugin ", 7) == 0) {
            void *handle = dlopen(line + 7, RTLD_NOW);  // kept loaded
            void *(*leak)(void) = handle ? (void *(*)(void))dlsym(handle, "plugin_leak") : NULL;
            if (leak == NULL) {
                say("no plugin\n");
                continue;
            }
            leak();
        } else if (strcmp(line, "free-old") == 0) {
            for (int i = 0; i < OLD_BLOCKS; i++) {
                free(old[i]);  // FREE: old
                old[i] = NULL;
            }
        } else if (strcmp(line, "exit") == 0) {
            break;
        } else {
            say("unknown command\n");
            continue;
        }
        say("ok\n");
    }
    pthread_mutex_lock(&mutex);
    quitting = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mutex);
    for (size_t w = 0; w <= WORKERS; w++) {
        pthread_join(threads[w], NULL);
    }
    return 0;
}

/* @brief A compact dump's direct output (compact.h) decoded a block ahead, on a thread of its own,
 * while the replay reads the block before (memdump_core.c's refill): the decoding and the replay
 * each take about half the work, and overlap where a second core is free. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compactfeed.h"

struct feed {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mdz_dec *dec;
    /* the block decoded and not yet taken (`ready`): the decoder's result, its output (valid
     * until the decoder's next call), how far it read and the text's tail after it */
    int ready, result, stop;
    const unsigned char *p;
    size_t n;
    uint64_t read, tail;
};

static void *decode_ahead(void *arg)
{
    struct feed *f = arg;
    char err[256];
    int r;
    do {
        const unsigned char *p;
        size_t n;
        r = mdz_dec_next(f->dec, &p, &n, err, sizeof err);
        pthread_mutex_lock(&f->mu);
        f->p = p;
        f->n = n;
        f->result = r;
        f->read = mdz_dec_read(f->dec);
        f->tail = mdz_dec_tail(f->dec);
        f->ready = 1;
        pthread_cond_broadcast(&f->cv);
        while (f->ready && !f->stop) /* the output is the reader's until it takes it */
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->stop)
            r = 0;
        pthread_mutex_unlock(&f->mu);
    } while (r == 1);
    return NULL;
}

struct feed *feed_open(int fd)
{
    char err[256];
    struct feed *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->dec = mdz_dec_open(fd, err, sizeof err);
    if (f->dec == NULL || pthread_mutex_init(&f->mu, NULL) != 0) {
        mdz_dec_close(f->dec);
        free(f);
        return NULL;
    }
    pthread_cond_init(&f->cv, NULL);
    if (pthread_create(&f->thread, NULL, decode_ahead, f) != 0) {
        pthread_cond_destroy(&f->cv);
        pthread_mutex_destroy(&f->mu);
        mdz_dec_close(f->dec);
        free(f);
        return NULL;
    }
    return f;
}

/* the block decoded, f->n bytes, into the reader's buffer (compactfeed.h): when the reader keeps
 * nothing, the decoder's buffer itself, the reader's going to the decoder (a block's output is
 * megabytes: no copy, and the pages stay the caches' and the process's); else appended. 1, or -1
 * out of memory */
static int give(struct feed *f, char **buf, uint64_t *len, uint64_t *cap, size_t slack)
{
    if (*len == 0) {
        unsigned char *mine = (unsigned char *)*buf;
        size_t room = *buf ? (size_t)*cap + slack : 0;
        if (mdz_dec_exchange(f->dec, &mine, &room, slack) == 0) {
            *buf = (char *)mine;
            *cap = room - slack;
            *len = f->n;
            return 1;
        }
    }
    if (*len + f->n > *cap) {
        char *bigger = realloc(*buf, *len + f->n + slack);
        if (bigger == NULL)
            return -1;
        *buf = bigger;
        *cap = *len + f->n;
    }
    memcpy(*buf + *len, f->p, f->n);
    *len += f->n;
    return 1;
}

int feed_take(struct feed *f, char **buf, uint64_t *len, uint64_t *cap, size_t slack,
              uint64_t *read, uint64_t *tail)
{
    pthread_mutex_lock(&f->mu);
    while (!f->ready)
        pthread_cond_wait(&f->cv, &f->mu);
    int r = f->result == 1 ? give(f, buf, len, cap, slack) : f->result;
    *read = f->read;
    *tail = f->tail;
    if (f->result == 1) { /* the next block, while the reader reads this one */
        f->ready = 0;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return r;
}

void feed_close(struct feed *f)
{
    if (f == NULL)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    mdz_dec_close(f->dec);
    free(f);
}

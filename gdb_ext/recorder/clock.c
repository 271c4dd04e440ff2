/* The recorder's clock: the time of each allocation, at no cost per call (docs/recorder.md).
 *
 * Reading a clock per call would cost a quarter of the recorder's time (clock_gettime with the
 * coarse clock: about 9 ns through the vDSO, rdtsc more in a VM). Instead one thread, started
 * with the recording as heaptrack's timer thread is, writes the time elapsed since the
 * recording began into the control block (`clock_cs`, centiseconds) every 10 ms; a call takes
 * the value with one load, and the live-block table keeps it in its entry's stack word (bits 32
 * to 62: GDB's `memdump leaks --older-than`). The thread blocks every signal (the program's
 * handlers never run on it), is named memdump-clock, and ends when the recorder is disabled.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "recorder.h"

#define C (memdump_recorder_control)
#define TICK_NS 10000000L

static struct timespec began;
static int running;

static void *tick(void *arg)
{
    (void)arg;
    struct timespec next = began;
    while (__atomic_load_n(&C.state, __ATOMIC_RELAXED) != MDR_DISABLED) {
        next.tv_nsec += TICK_NS;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t cs = (uint64_t)(now.tv_sec - began.tv_sec) * 100 +
                      (uint64_t)((now.tv_nsec - began.tv_nsec) / TICK_NS);
        __atomic_store_n(&C.clock_cs, cs, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
    return NULL;
}

void mdr_clock_start(void)
{
    if (__atomic_exchange_n(&running, 1, __ATOMIC_ACQ_REL))
        return;
    clock_gettime(CLOCK_MONOTONIC, &began);
    C.clock_cs = 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_t thread;
    int ok = pthread_attr_init(&attr) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        ok = pthread_create(&thread, &attr, tick, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ok)
        pthread_setname_np(thread, "memdump-clock");
    else
        __atomic_store_n(&running, 0, __ATOMIC_RELEASE);  /* no clock: every block at 0 */
}

void mdr_clock_forget(void)
{
    running = 0;  /* a forked child has no clock thread: the next recording starts one */
}

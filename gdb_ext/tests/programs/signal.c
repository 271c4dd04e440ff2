/* malloc called from signal handlers: raise(), kill(), a timer during a busy loop, sigaltstack. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile sig_atomic_t done;
static volatile long counter;

NOINLINE static void *in_handler(size_t n) { void *p = malloc(n); counter++; return p; }

static void handler(int sig) {
    /* Not async-signal-safe in general; fine here because main is never inside malloc. */
    free(in_handler(32 + (size_t)sig));
    done = 1;
}

NOINLINE static long spin(void) {
    long x = 0;
    while (!done)
        x += counter + 1;
    return x;
}

NOINLINE static void send_self(int sig) {
    kill(getpid(), sig);
    counter++;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);

    raise(SIGUSR1);
    send_self(SIGUSR1);

    done = 0;
    struct itimerval it = {{0, 0}, {0, 20000}};
    setitimer(ITIMER_REAL, &it, NULL);
    spin();

    /* The handler runs on an alternate stack: the walk must cross back to the main stack. */
    static char altstack[65536];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR2, &sa, NULL);
    raise(SIGUSR2);
    return (int)(counter & 0);
}

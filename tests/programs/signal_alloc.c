/* @brief A signal handler that allocates, interrupting a thread that allocates: a timer fires
 * every argv[2] us (default 50) while main makes argv[1] malloc/free pairs (default 200000); the
 * handler mallocs and frees one block each time. Every block is freed: a recorder that records a call twice, loses one,
 * or deadlocks on its own lock inside the handler shows up as a leak, an error or a hang. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static volatile sig_atomic_t handled;

static void on_alarm(int sig) {
    (void)sig;
    char *p = malloc(40);  // FREE: in_handler
    if (p != NULL) {
        p[0] = 1;
    }
    free(p);
    handled++;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200000;
    int period = argc > 2 ? atoi(argv[2]) : 50;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, period}, {0, period}};
    setitimer(ITIMER_REAL, &every, NULL);
    for (int i = 0; i < rounds; i++) {
        char *p = malloc(24 + (size_t)(i % 5));  // FREE: in_main
        p[0] = 2;
        free(p);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    return handled == 0;  /* the timer must have interrupted the loop at least once */
}

/* @brief Dies of SIGSEGV in a handler's hands: the handler keeps a new block in a global, _exits. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *kept;

/* main is not inside malloc when the fault comes, so calling it here is safe in practice. */
static void on_segv(int sig) {
    (void)sig;
    kept = malloc(40);  // LEAK: in-handler
    memset(kept, 1, 40);
    _exit(3);
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    volatile int *null = NULL;
    *null = 1;  // CRASH: handled
    return 0;
}

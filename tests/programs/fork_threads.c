/* @brief fork while other threads allocate: 4 threads make malloc/free pairs without pause while
 * main forks 20 children, each of which allocates, frees and exits 0. The parent exits 0 when
 * every child did: a recorder lock inherited held by a child would hang it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void *churn(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        char *p = malloc(32);  // FREE: churn
        p[0] = 1;
        free(p);
    }
    return NULL;
}

int main(void) {
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        pthread_create(&threads[i], NULL, churn, NULL);
    }
    int failed = 0;
    for (int i = 0; i < 20; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            char *p = malloc(64);
            p[0] = 2;
            free(p);
            _exit(0);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            failed = 1;
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
    }
    return failed;
}

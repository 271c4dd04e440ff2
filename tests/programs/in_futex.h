// @brief in_futex(), in_syscall(): whether a thread of this process sleeps in futex(2) (or another system call), for test programs that must hang deterministically before they say "ready".
#pragma once

#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/// Whether thread TID of this process sleeps in the x86-64 system call NR, from
/// /proc/self/task/TID/syscall (proc(5)).
static inline int in_syscall(pid_t tid, int nr) {
    char path[64];
    char want[16];
    char text[16] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE* f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    snprintf(want, sizeof want, "%d ", nr);
    return strncmp(text, want, strlen(want)) == 0;
}

/// Whether thread TID of this process sleeps in futex(2) (x86-64 system call 202).
static inline int in_futex(pid_t tid) { return in_syscall(tid, 202); }

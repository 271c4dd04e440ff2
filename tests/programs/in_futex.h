// @brief in_futex(): whether a thread of this process sleeps in futex(2), for test programs that must hang deterministically before they say "ready".
#pragma once

#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/// Whether thread TID of this process sleeps in futex(2) (x86-64 system call 202), from
/// /proc/self/task/TID/syscall (proc(5)).
static inline int in_futex(pid_t tid) {
    char path[64];
    char text[16] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE* f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return strncmp(text, "202 ", 4) == 0;
}

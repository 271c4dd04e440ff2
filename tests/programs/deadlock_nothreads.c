// @brief A program with no threads library, nor any C library: -nostdlib -static, system calls by hand (the `deadlocks` command's bad-input test). x86-64 only.
//
// It writes "ready PID" and sleeps in pause(2) for ever.

static long sys3(long nr, long a, long b, long c) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
}

void _start(void) {
    char text[32] = "ready ";
    char digits[16];
    long pid = sys3(39, 0, 0, 0);  // getpid
    int n = 0;
    do {
        digits[n++] = (char)('0' + pid % 10);
        pid /= 10;
    } while (pid > 0);
    int len = 6;
    while (n > 0) {
        text[len++] = digits[--n];
    }
    text[len++] = '\n';
    sys3(1, 1, (long)text, len);  // write(1, ...)
    for (;;) {
        sys3(34, 0, 0, 0);  // pause
    }
}

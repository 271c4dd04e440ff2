/* @brief The dump's clock samples, `c MILLIS RSS` (format 2.2, docs/dump-format.md).
 *
 * Every 64th event (under the writer lock) the recorder looks at the coarse monotonic clock (a
 * vDSO read, a few nanoseconds, so 0.1 ns an event); when 10 ms or more have passed since the
 * last sample it writes one: the milliseconds since the recording began (`clock_start` in the
 * control block, CLOCK_MONOTONIC, which GDB's time.monotonic() reads too) and the process's
 * resident set from /proc/self/statm. A program allocating slowly gets a sample every 64 events;
 * GDB adds one at each stop where it writes and one before the end record. The statm file is
 * opened once per process (again after a fork: the pid changes) and checked with fstat before a
 * read: a program that closed the descriptor and opened something else under that number is not
 * read from. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "recorder.h"

#define SAMPLE_EVERY_MS 10

static int statm_fd = -1;
static pid_t statm_pid;
static dev_t statm_dev;
static ino_t statm_ino;
static uint64_t last_sample_ms, page_bytes;

static uint64_t monotonic_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The recording begins now: the base of every sample's MILLIS; or it began at the `clock_start`
 * GDB gave, in the image the process executed before this one (the dump's clock goes on). */
MDR_HIDDEN void mdr_clock_start(void)
{
    if (memdump_recorder_control.clock_start == 0)
        memdump_recorder_control.clock_start = monotonic_ms(CLOCK_MONOTONIC);
    last_sample_ms = 0;
    if (!page_bytes) {
        long page = sysconf(_SC_PAGESIZE);
        page_bytes = page > 0 ? (uint64_t)page : 4096;
    }
}

static int statm_open(void)
{
    struct stat st;
    pid_t pid = getpid();
    if (statm_fd >= 0 && statm_pid == pid && fstat(statm_fd, &st) == 0
        && st.st_dev == statm_dev && st.st_ino == statm_ino)
        return statm_fd;
    if (statm_fd >= 0 && statm_pid == pid)
        statm_fd = -1; /* the program took the number over: not ours to close */
    else if (statm_fd >= 0)
        close(statm_fd); /* the parent's, inherited across fork */
    statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (statm_fd < 0 || fstat(statm_fd, &st) != 0) {
        if (statm_fd >= 0)
            close(statm_fd);
        statm_fd = -1;
        return -1;
    }
    statm_pid = pid;
    statm_dev = st.st_dev;
    statm_ino = st.st_ino;
    return statm_fd;
}

/* Resident bytes, 0 when /proc cannot tell */
static uint64_t resident_bytes(void)
{
    char buf[128];
    int fd = statm_open();
    ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *p = buf;
    while (*p && *p != ' ') /* size, then resident */
        p++;
    uint64_t pages = 0;
    for (p++; *p >= '0' && *p <= '9'; p++)
        pages = pages * 10 + (uint64_t)(*p - '0');
    return pages * page_bytes;
}

/* After an event, under the writer lock: a sample when 10 ms have passed since the last one. */
MDR_HIDDEN void mdr_clock_sample(void)
{
    struct mdr_control *c = &memdump_recorder_control;
    uint64_t now = monotonic_ms(CLOCK_MONOTONIC_COARSE);
    if (last_sample_ms && now - last_sample_ms < SAMPLE_EVERY_MS)
        return;
    last_sample_ms = now;
    char *p = mdr_out_reserve(64);
    if (p == NULL)
        return;
    char *start = p;
    *p++ = MEMDUMP_TAG_C_CHAR;
    *p++ = ' ';
    /* the coarse clock may lag the precise one that set the base by a tick */
    p = mdr_fmt_dec(p, now > c->clock_start ? now - c->clock_start : 0);
    *p++ = ' ';
    p = mdr_fmt_dec(p, resident_bytes());
    *p++ = '\n';
    mdr_out_commit((size_t)(p - start));
}

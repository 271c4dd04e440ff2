/* @brief The program's children, recorded when asked (`set memdump children on`, docs/recorder.md).
 *
 * GDB follows one process. With children on (control block `inherit`), the recorder in the
 * process GDB records leaves itself in LD_PRELOAD and sets MEMDUMP_CHILDREN=DEPTH:PATH (PATH: its
 * dump) and MEMDUMP_TRACED_PID (its pid: after an exec GDB records the new image itself, and the
 * recorder there, when GDB does not configure it, must stay out of it). A process the recorder runs in that GDB does not
 * configure (a forked child, which GDB detached from, or a program one of them executed) then
 * records alone, into STEM.PID.memdump beside PATH (STEM: PATH without its `.memdump`): the
 * recorder writes the dump's header itself, and an `end` record when the process exits through
 * exit() or main's return. Without GDB there are no symbols (the analyser reads them from the
 * modules) and no pointer scan.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recorder.h"

#define C (memdump_recorder_control)

static const char SUFFIX[] = ".memdump";

/* MEMDUMP_CHILDREN's DEPTH and PATH, when this process is one to record alone. */
static const char *children_path(uint64_t *depth)
{
    const char *spec = getenv("MEMDUMP_CHILDREN");
    if (spec == NULL)
        return NULL;
    const char *traced = getenv("MEMDUMP_TRACED_PID");
    if (traced != NULL && strtoull(traced, NULL, 10) == (unsigned long long)getpid())
        return NULL;  /* GDB's own process, in an image it records with breakpoints */
    char *end;
    unsigned long long d = strtoull(spec, &end, 10);
    if (end == spec || *end != ':' || end[1] != '/')
        return NULL;
    *depth = d;
    return end + 1;
}

/* YYYY-MM-DDTHH:MM:SSZ (UTC) into P: the `i start` value, without the locale's help. */
static char *fmt_utc(char *p)
{
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    int fields[6] = {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec};
    static const char seps[] = "--T::Z";
    for (int i = 0; i < 6; i++) {
        int v = fields[i], width = i == 0 ? 4 : 2;
        for (int k = width - 1; k >= 0; k--, v /= 10)
            p[k] = (char)('0' + v % 10);
        p += width;
        *p++ = seps[i];
    }
    return p;
}

static char *info(char *p, const char *key, const char *value)
{
    *p++ = MEMDUMP_TAG_I_CHAR;
    *p++ = ' ';
    p = stpcpy(p, key);
    *p++ = ' ';
    p = mdr_fmt_str(p, value);
    *p++ = '\n';
    return p;
}

static char *info_num(char *p, const char *key, uint64_t value)
{
    char text[24];
    *mdr_fmt_dec(text, value) = '\0';
    return info(p, key, text);
}

int mdr_children_configure(int forked)
{
    uint64_t depth;
    const char *parent = children_path(&depth);
    if (parent == NULL)
        return 0;
    size_t len = strlen(parent);
    if (len >= sizeof SUFFIX && strcmp(parent + len - (sizeof SUFFIX - 1), SUFFIX) == 0)
        len -= sizeof SUFFIX - 1;
    char pid[24];
    *mdr_fmt_dec(pid, (uint64_t)getpid()) = '\0';
    if (len + 1 + strlen(pid) + 4 + sizeof SUFFIX > sizeof C.path) {
        C.failure = MDR_OPEN;
        C.failure_errno = ENAMETOOLONG;
        return 0;
    }

    static char header[3 * 4096 + 512];
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *p = stpcpy(header, MEMDUMP_FORMAT_LINE);
    p = info(p, "program", exe);
    p = info(p, "pid", pid);
    p = info(p, "arch", "x86_64");
    p = info_num(p, "depth", depth);
    /* a forked child inherits its parent's blocks: freeing one is not an error */
    p = info(p, "attached", forked ? "1" : "0");
    char start[32];
    *fmt_utc(start) = '\0';
    p = info(p, "start", start);
    p = info(p, "recorder", MEMDUMP_RECORDER_IN_PROCESS);
    p = info_num(p, "parent", (uint64_t)getppid());

    /* STEM.PID.memdump; a forked child that allocated, then executed a program, left its dump
     * under that name: the program's is STEM.PID-2.memdump (then -3, ...) */
    int fd = -1;
    errno = EEXIST;
    for (uint64_t k = 1; fd < 0 && errno == EEXIST && k < 1000; k++) {
        char *q = mempcpy(C.path, parent, len);
        *q++ = '.';
        q = stpcpy(q, pid);
        if (k > 1) {
            *q++ = '-';
            q = mdr_fmt_dec(q, k);
        }
        memcpy(q, SUFFIX, sizeof SUFFIX);
        fd = open(C.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600); /* as a core file */
    }
    if (fd < 0 || write(fd, header, (size_t)(p - header)) != p - header) {
        C.failure = MDR_OPEN;
        C.failure_errno = (uint64_t)errno;
        C.path[0] = '\0';
        if (fd >= 0)
            close(fd);
        return 0;
    }
    close(fd);
    C.depth = depth;
    C.end = (uint64_t)(p - header);
    C.seq = 0;
    C.next_string = C.next_frame = C.next_node = 1;
    C.inherit = 1;
    C.attach = 0;
    return 1;
}

void mdr_children_traced(void)
{
    static char spec[24 + sizeof C.path];
    char *p = mdr_fmt_dec(spec, C.depth);
    *p++ = ':';
    strcpy(p, C.path);
    char pid[24];
    *mdr_fmt_dec(pid, (uint64_t)getpid()) = '\0';
    setenv("MEMDUMP_CHILDREN", spec, 1);
    setenv("MEMDUMP_TRACED_PID", pid, 1);
}

char *mdr_children_end(char *p, int status)
{
    p = stpcpy(p, MEMDUMP_TAG_END " ");
    p = mdr_fmt_dec(p, ++C.seq);
    p = stpcpy(p, " exit ");
    p = mdr_fmt_dec(p, (uint64_t)(status & 0xff));
    *p++ = '\n';
    return p;
}

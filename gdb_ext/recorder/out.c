/* @brief The dump, appended through a shared mapping of the file (under the recorder's lock).
 *
 * Records are formatted straight into a window of the file mapped MAP_SHARED: they are in the
 * page cache, hence in the file, as soon as they are written, whatever happens to the process
 * or to GDB afterwards. Windows grow from 2 MiB to 16 MiB (the program's resident memory counts the current one); each is reserved with
 * posix_fallocate first, so a full disk is an error here (the recorder stops, saying so)
 * instead of a SIGBUS at a page fault. The file ends with the unused part of the last window:
 * NUL bytes, which GDB truncates at the end (a reader skips them: docs/dump-format.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recorder.h"
#include "region.h"

#define WINDOW_MIN (2u << 20)
#define WINDOW_MAX (16u << 20)
#define PAGE 4096u
/* Windows start at a multiple of 2 MiB of the file, at an address aligned alike: the kernel
 * then maps the page cache's large folios whole, one fault for many pages (measured on ext4: half
 * the faults of page-aligned windows, 32,017 against 66,798 over a whole
 * 8M-event recording, GDB's own included). */
#define ALIGN (2u << 20)

static int out_fd = -1;
struct mdr_window mdr_out_window;
static size_t next_len = WINDOW_MIN;

int mdr_out_open(const char *path, uint64_t end)
{
    out_fd = open(path, O_RDWR | O_CLOEXEC);
    if (out_fd < 0)
        return -errno;
    memdump_recorder_control.end = end;
    return 0;
}

char *mdr_out_grow(size_t bytes)
{
    uint64_t end = memdump_recorder_control.end;
    if (out_fd < 0)
        return NULL;
    uint64_t off = end & ~(uint64_t)(ALIGN - 1);
    size_t len = next_len;
    while (len < (end - off) + bytes)
        len *= 2;
    int rc = posix_fallocate(out_fd, (off_t)off, (off_t)len);
    if (rc != 0) {
        memdump_recorder_control.failure = MDR_SPACE;
        memdump_recorder_control.failure_errno = (uint64_t)rc;
        return NULL;
    }
    char *m = mdr_reserve(len + ALIGN);
    if (m != NULL)
        m = (char *)(((uintptr_t)m + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
    if (m != NULL)
        m = mmap(m, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, out_fd, (off_t)off);
    if (m == NULL || (void *)m == MAP_FAILED) {
        memdump_recorder_control.failure = MDR_MEMORY;
        memdump_recorder_control.failure_errno = (uint64_t)errno;
        return NULL;
    }
    if (mdr_out_window.base != NULL)
        mdr_unmap(mdr_out_window.base, mdr_out_window.len);
    mdr_out_window.base = m;
    mdr_out_window.off = off;
    mdr_out_window.len = len;
    if (next_len < WINDOW_MAX)
        next_len *= 2;
    return mdr_out_window.base + (end - mdr_out_window.off);
}

void mdr_out_close(void)
{
    if (mdr_out_window.base != NULL)
        mdr_unmap(mdr_out_window.base, mdr_out_window.len);
    mdr_out_window.base = NULL;
    mdr_out_window.off = 0;
    mdr_out_window.len = 0;
    next_len = WINDOW_MIN;
    if (out_fd >= 0)
        close(out_fd);
    out_fd = -1;
}

void mdr_out_finish(void)
{
    if (out_fd >= 0 && ftruncate(out_fd, (off_t)memdump_recorder_control.end) != 0)
        memdump_recorder_control.failure_errno = (uint64_t)errno;
    mdr_out_close();
}

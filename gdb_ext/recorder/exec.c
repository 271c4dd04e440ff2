/* @brief The program the recorded process executes keeps the recorder (docs/recorder.md, exec).
 *
 * The recorder takes itself out of the program's LD_PRELOAD as it starts, so that the program
 * sees its environment as typed and the programs it starts do not inherit the recorder. The
 * process GDB records is different when it replaces its own image (`exec ./prog` in a wrapper
 * script, env(1), nice(1), a pyenv shim): the new image is the same recording, and GDB configures
 * the recorder in it as at the start. So the exec functions are hooked here: when the caller is
 * the process GDB configured (not a forked or vforked child: their pid differs), the environment
 * given to the new image gets the recorder first in its LD_PRELOAD. Before the exec, the recorder
 * calls memdump_recorder_unloading, where GDB symbolises the frames of the image about to go.
 *
 * The hooks allocate with mmap only (no malloc: nothing is recorded, nothing can recurse), unmap
 * it when the exec fails (a program may try again and again) and leave errno as the exec set it. A raw execve system call, or
 * posix_spawn's child (glibc calls its internal execve), passes no hook: GDB then records the new
 * image with breakpoints.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "recorder.h"

extern char **environ;

static const char PRELOAD[] = "LD_PRELOAD=";
#define PRELOAD_LEN (sizeof PRELOAD - 1)
static const char LIBRARY[] = "libmemdump_recorder.so";
#define LIBRARY_LEN (sizeof LIBRARY - 1)

/* Does the LD_PRELOAD list VALUE (separated by ':' or ' ', as ld.so reads it) name the recorder? */
static int names_recorder(const char *value)
{
    for (const char *p = value; *p;) {
        size_t len = strcspn(p, ": ");
        if (len >= LIBRARY_LEN && memcmp(p + len - LIBRARY_LEN, LIBRARY, LIBRARY_LEN) == 0)
            return 1;
        p += len;
        if (*p)
            p++;
    }
    return 0;
}

/* BYTES of fresh memory, NULL when there is none; freed with munmap. */
static void *map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The environment for the new image: ENVP, or a copy in MAP (BYTES long) with the recorder added. */
struct new_env {
    char *const *envp;
    void *map;
    size_t bytes;
};

/* ENVP with the recorder first in its LD_PRELOAD, when this process is the one GDB records. */
static struct new_env with_recorder(char *const *envp)
{
    struct new_env out = {envp, NULL, 0};
    if (!mdr_exec_keeps_recorder())
        return out;
    memdump_recorder_unloading(&memdump_recorder_control);  /* GDB: the image is about to go */
    Dl_info info;
    if (!dladdr((const void *)&memdump_recorder_control, &info) || info.dli_fname == NULL ||
        info.dli_fname[0] == '\0' || strpbrk(info.dli_fname, ": ") != NULL)
        return out;  /* a path ld.so would split: the new image is recorded with breakpoints */
    size_t n = 0, at = (size_t)-1;
    for (; envp != NULL && envp[n] != NULL; n++)
        if (strncmp(envp[n], PRELOAD, PRELOAD_LEN) == 0)
            at = n;  /* ld.so takes the last one */
    const char *old = at != (size_t)-1 ? envp[at] + PRELOAD_LEN : "";
    if (names_recorder(old))
        return out;  /* children asked for: the recorder never left */
    size_t self = strlen(info.dli_fname), rest = strlen(old);
    size_t pointers = (n + 2) * sizeof(char *);
    out.bytes = pointers + PRELOAD_LEN + self + 1 + rest + 1;
    out.map = map(out.bytes);
    if (out.map == NULL) {
        out.bytes = 0;
        return out;
    }
    char **env = out.map;
    char *value = (char *)out.map + pointers, *p = value;
    p = mempcpy(p, PRELOAD, PRELOAD_LEN);
    p = mempcpy(p, info.dli_fname, self);
    if (rest) {
        *p++ = ':';
        p = mempcpy(p, old, rest);
    }
    *p = '\0';
    for (size_t i = 0; i < n; i++)
        env[i] = i == at ? value : envp[i];
    if (at == (size_t)-1)
        env[n++] = value;
    env[n] = NULL;
    out.envp = env;
    return out;
}

/* The exec failed: free the environment made for it, errno as the exec left it. */
static int failed(struct new_env *env, int rc)
{
    int saved = errno;
    if (env->map != NULL)
        munmap(env->map, env->bytes);
    errno = saved;
    return rc;
}

#define REAL(name) static __typeof(name) *real_##name; \
    if (real_##name == NULL) \
        real_##name = (__typeof(name) *)dlsym(RTLD_NEXT, #name)

MDR_HIDDEN int mdr_hook_execve(const char *path, char *const argv[], char *const envp[])
{
    REAL(execve);
    struct new_env env = with_recorder(envp);
    return failed(&env, real_execve(path, argv, env.envp));
}

MDR_HIDDEN int mdr_hook_execvpe(const char *file, char *const argv[], char *const envp[])
{
    REAL(execvpe);
    struct new_env env = with_recorder(envp);
    return failed(&env, real_execvpe(file, argv, env.envp));
}

MDR_HIDDEN int mdr_hook_execv(const char *path, char *const argv[])
{
    return mdr_hook_execve(path, argv, environ);
}

MDR_HIDDEN int mdr_hook_execvp(const char *file, char *const argv[])
{
    return mdr_hook_execvpe(file, argv, environ);
}

MDR_HIDDEN int mdr_hook_fexecve(int fd, char *const argv[], char *const envp[])
{
    REAL(fexecve);
    struct new_env env = with_recorder(envp);
    return failed(&env, real_fexecve(fd, argv, env.envp));
}

MDR_HIDDEN int mdr_hook_execveat(int dirfd, const char *path, char *const argv[],
                                 char *const envp[], int flags)
{
    REAL(execveat);
    struct new_env env = with_recorder(envp);
    return failed(&env, real_execveat(dirfd, path, argv, env.envp, flags));
}

/* The arguments of execl, execlp or execle after ARG, to their NULL, as a mapped array of
 * *BYTES bytes; ENVP (execle's): the environment after the NULL. */
static char **list_args(const char *arg, va_list ap, size_t *bytes, char *const **envp)
{
    va_list count_ap;
    va_copy(count_ap, ap);
    size_t count = 1;
    while (va_arg(count_ap, const char *) != NULL)
        count++;
    va_end(count_ap);
    *bytes = (count + 1) * sizeof(char *);
    char **argv = map(*bytes);
    if (argv == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    argv[0] = (char *)arg;
    for (size_t i = 1; i <= count; i++)
        argv[i] = va_arg(ap, char *);
    if (envp != NULL)
        *envp = va_arg(ap, char *const *);
    return argv;
}

/* execl, execlp, execle: ARG and the arguments after it (AP) as an array, executed: SEARCH
 * for FILE in PATH (execlp), with the environment after the NULL (WITH_ENV: execle) or environ. */
static int exec_list(const char *file, const char *arg, va_list ap, int search, int with_env)
{
    size_t bytes;
    char *const *envp = environ;
    char **argv = list_args(arg, ap, &bytes, with_env ? &envp : NULL);
    if (argv == NULL)
        return -1;
    int rc = search ? mdr_hook_execvpe(file, argv, envp) : mdr_hook_execve(file, argv, envp);
    int saved = errno;
    munmap(argv, bytes);
    errno = saved;
    return rc;
}

#define LIST_HOOK(name, search, with_env)                                  \
    MDR_HIDDEN int mdr_hook_##name(const char *file, const char *arg, ...) \
    {                                                                      \
        va_list ap;                                                        \
        va_start(ap, arg);                                                 \
        int rc = exec_list(file, arg, ap, search, with_env);               \
        va_end(ap);                                                        \
        return rc;                                                         \
    }
LIST_HOOK(execl, 0, 0)
LIST_HOOK(execlp, 1, 0)
LIST_HOOK(execle, 0, 1)

/* The exported names (preloaded, they interpose the C library's) are aliases of the hooks, whose
 * hidden names got.c redirects GOT entries to (attach). */
#define EXEC_ALIAS(name) \
    extern __typeof(name) name __attribute__((alias("mdr_hook_" #name), visibility("default")))
EXEC_ALIAS(execve);
EXEC_ALIAS(execvpe);
EXEC_ALIAS(execv);
EXEC_ALIAS(execvp);
EXEC_ALIAS(fexecve);
EXEC_ALIAS(execveat);
EXEC_ALIAS(execl);
EXEC_ALIAS(execlp);
EXEC_ALIAS(execle);

#define EXEC_ENTRY(name) {#name, (const void *)mdr_hook_##name}
MDR_HIDDEN const struct mdr_hook mdr_exec_hooks[] = {
    EXEC_ENTRY(execve), EXEC_ENTRY(execvpe), EXEC_ENTRY(execv), EXEC_ENTRY(execvp),
    EXEC_ENTRY(fexecve), EXEC_ENTRY(execveat), EXEC_ENTRY(execl), EXEC_ENTRY(execlp),
    EXEC_ENTRY(execle),
};
MDR_HIDDEN const int mdr_exec_hook_count = (int)(sizeof mdr_exec_hooks / sizeof mdr_exec_hooks[0]);

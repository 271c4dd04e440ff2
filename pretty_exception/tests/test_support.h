/// @brief Shared by the pretty_exception tests: functions pinned out of line, and child processes on a pipe or a pseudo-terminal.
#ifndef PRETTY_EXCEPTION_TEST_SUPPORT_H
#define PRETTY_EXCEPTION_TEST_SUPPORT_H

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

// A frame the trace must show: never inlined, and (GCC) never cloned or otherwise changed by
// interprocedural optimisation, so its name is exact at -O2 too. Clang has no noipa and clones nothing.
#if defined(__clang__)
#define PE_TEST_NOINLINE __attribute__((noinline))
#else
#define PE_TEST_NOINLINE __attribute__((noipa))
#endif

namespace pe_test {

enum class terminal { pipe, pty };

struct child_result {
    std::string output;  // stdout and stderr together, "\r\n" of the terminal turned into "\n"
    int status = 0;      // as waitpid() gives it
    pid_t pid = -1;      // the child's, which is also its main thread's id
};

/// This program's name as the kernel keeps it for a thread (15 characters): what a child's main
/// thread, and a thread nobody named, are called.
inline std::string own_thread_name() {
    char name[32] = {};
    std::FILE* f = std::fopen("/proc/self/comm", "re");
    if (f != nullptr) {
        if (std::fgets(name, sizeof name, f) == nullptr) name[0] = '\0';
        std::fclose(f);
    }
    std::string s = name;
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

/// How the crash and terminate reports name a thread: ` in thread 4242 "worker"`.
inline std::string thread_label(long tid, const std::string& name) {
    return " in thread " + std::to_string(tid) + " \"" + name + "\"";
}

/// The label of a child's main thread (run_child).
inline std::string main_thread_label(const child_result& r) { return thread_label(r.pid, own_thread_name()); }

/// Print "TID:N" for the calling thread, first thing in a thread the test makes fail.
inline void print_tid() {
    std::printf("TID:%ld\n", static_cast<long>(::syscall(SYS_gettid)));
    std::fflush(stdout);
}

/// Run `body` on a new thread named `name` (nullptr: the name it inherits) that first prints its id
/// (print_tid()), and wait for it: the thread a test makes fail, whose reports name it.
inline void on_thread(const char* name, const std::function<void()>& body) {
    std::thread t([&] {
        if (name != nullptr) ::pthread_setname_np(::pthread_self(), name);
        print_tid();
        body();
    });
    t.join();
}

/// For a child whose failing thread called print_tid() first: that thread's label (by `name`, or
/// the inherited program name) and the output after the TID line.
inline std::pair<std::string, std::string> after_tid_line(const child_result& r, const std::string& name = "") {
    if (r.output.rfind("TID:", 0) != 0) return {"<no TID line>", r.output};
    const std::size_t eol = r.output.find('\n');
    return {thread_label(std::atol(r.output.c_str() + 4), name.empty() ? own_thread_name() : name),
            eol == std::string::npos ? std::string() : r.output.substr(eol + 1)};
}

/// Run `body` in a forked child whose stdout and stderr are a pipe or a pseudo-terminal, and collect
/// what it writes until it exits. The child exits 0 after `body`, 100 if `body` throws, and dumps no
/// core if it aborts.
inline child_result run_child(terminal where, const std::function<void()>& body) {
    child_result result;
    int fd = -1;
    pid_t pid = -1;
    if (where == terminal::pty) {
        pid = ::forkpty(&fd, nullptr, nullptr, nullptr);
    } else {
        int p[2];
        if (::pipe(p) != 0) return result;
        pid = ::fork();
        if (pid == 0) {
            ::dup2(p[1], STDOUT_FILENO);
            ::dup2(p[1], STDERR_FILENO);
        }
        ::close(p[1]);
        if (pid == 0) ::close(p[0]);
        fd = p[0];
    }
    if (pid < 0) {
        result.output = "fork failed";
        return result;
    }
    if (pid == 0) {
        const rlimit no_core{0, 0};
        ::setrlimit(RLIMIT_CORE, &no_core);
        try {
            body();
        } catch (...) {
            std::fflush(nullptr);
            ::_exit(100);
        }
        std::fflush(nullptr);
        ::_exit(0);
    }
    char buf[4096];
    for (;;) {
        pollfd pfd{fd, POLLIN, 0};
        // A bound on a hung child, not a synchronisation: the child's exit ends the loop.
        if (::poll(&pfd, 1, 60000) <= 0) {
            ::kill(pid, SIGKILL);
            result.output += "\n[run_child: no output for 60 s, child killed]\n";
            break;
        }
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // EOF on a pipe, EIO on a pty whose slave side is closed
        result.output.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    ::waitpid(pid, &result.status, 0);
    result.pid = pid;
    std::string clean;
    for (const char c : result.output)
        if (c != '\r') clean += c;
    result.output = clean;
    return result;
}

/// In a child process: take a mount namespace of its own (as root; else with a user namespace too)
/// and mount an empty tmpfs on /dev in it: no /dev/log. False after printing "SKIP: why" on stdout
/// (no namespaces here).
inline bool private_empty_dev() {
    const bool root = ::geteuid() == 0;
    if (::unshare(root ? CLONE_NEWNS : (CLONE_NEWUSER | CLONE_NEWNS)) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("pe-test-dev", "/dev", "tmpfs", 0, "size=64k") != 0) {
        std::printf("SKIP: private mount namespace: %s\n", std::strerror(errno));
        return false;
    }
    return true;
}

/// In a child process: private_empty_dev(), and a datagram socket bound at /dev/log in it, where
/// syslog(3) sends each record. Returns the socket, or -1 after printing "SKIP: why" (no namespaces
/// here) or "FAIL: why" on stdout.
inline int bind_private_dev_log() {
    if (!private_empty_dev()) return -1;
    const int sock = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, "/dev/log");
    if (sock < 0 || ::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        std::printf("FAIL: bind /dev/log: %s\n", std::strerror(errno));
        return -1;
    }
    return sock;
}

/// The next record waiting on `sock` (from bind_private_dev_log()), or "<none>".
inline std::string receive_record(int sock) {
    char buf[65536];
    const ssize_t n = ::recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("<none>");
}

}  // namespace pe_test

#endif  // PRETTY_EXCEPTION_TEST_SUPPORT_H

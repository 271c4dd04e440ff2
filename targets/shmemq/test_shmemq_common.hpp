/**
 * @brief Helpers of the shmemq tests: unique queue names removed at scope exit, bounded children.
 */
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dbgkit::targets::shmemq_test {

/// A queue name no other test or run uses (pid, counter, random), shm_unlink'ed on scope exit.
class ScopedName {
  public:
    explicit ScopedName(const char* tag) {
        static unsigned counter = 0;
        static std::mt19937 random{std::random_device{}()};
        char buf[128];
        std::snprintf(buf, sizeof buf, "/dbgkit-shmemq-test-%ld-%u-%08x-%s",
                      static_cast<long>(getpid()), counter++, static_cast<unsigned>(random()), tag);
        name_ = buf;
    }
    ~ScopedName() { shm_unlink(name_.c_str()); }
    ScopedName(const ScopedName&) = delete;
    ScopedName& operator=(const ScopedName&) = delete;

    const char* c_str() const { return name_.c_str(); }
    const std::string& str() const { return name_; }
    std::string path() const { return "/dev/shm" + name_; }

  private:
    std::string name_;
};

/// A forked child that is killed and reaped at scope exit unless it was waited for.
class Child {
  public:
    /// Forks; the child runs BODY and _exits with its result (no gtest assertions in there).
    template <typename Body>
    explicit Child(Body&& body) {
        std::fflush(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            _exit(body());
        }
    }
    ~Child() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    pid_t pid() const { return pid_; }

    /// The child's exit status, or -1 if it did not exit by the deadline (it is killed then), or
    /// 128 + signal if a signal ended it.
    int wait(std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        int status = 0;
        for (;;) {
            const pid_t r = waitpid(pid_, &status, WNOHANG);
            if (r == pid_) break;
            if (r < 0 || std::chrono::steady_clock::now() > deadline) {
                kill(pid_, SIGKILL);
                waitpid(pid_, &status, 0);
                pid_ = -1;
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    /// Kills the child with SIGKILL and reaps it.
    void kill_and_reap() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
    }

  private:
    pid_t pid_ = -1;
};

/// A pipe for one-byte signals from a child; read_byte waits at most TIMEOUT.
class Signal {
  public:
    Signal() {
        if (pipe(fds_) != 0) fds_[0] = fds_[1] = -1;
    }
    ~Signal() {
        close(fds_[0]);
        close(fds_[1]);
    }
    Signal(const Signal&) = delete;
    Signal& operator=(const Signal&) = delete;

    bool ok() const { return fds_[0] >= 0; }
    void send(char c = 'x') const { (void)!write(fds_[1], &c, 1); }
    bool read_byte(std::chrono::milliseconds timeout) const {
        pollfd p{fds_[0], POLLIN, 0};
        char c = 0;
        return poll(&p, 1, static_cast<int>(timeout.count())) == 1 && read(fds_[0], &c, 1) == 1;
    }

  private:
    int fds_[2];
};

/// Polls F until it returns true or TIMEOUT passes; returns F's last result.
template <typename F>
bool eventually(F&& f, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!f()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
    }
    return true;
}

/// A pid that names no process: a child that exited and was reaped.
inline pid_t dead_pid() {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, nullptr, 0);
    return pid;
}

}  // namespace dbgkit::targets::shmemq_test

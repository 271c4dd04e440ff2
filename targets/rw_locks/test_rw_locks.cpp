// @brief RW lock tests: no writer ever shares the lock with a reader or a writer; RW 1.4 really deadlocks (checked in a child process with a timeout).
#include "rw_locks.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <type_traits>

extern char** environ;

namespace {

namespace t = dbgkit::targets;

template <typename Lock>
class RwLockTest : public ::testing::Test {};

using Locks = ::testing::Types<t::Rw10ReaderPriority, t::Rw11OsOrdered, t::Rw12WriterPriority,
                               t::Rw13Textbook, t::PthreadRwLock, t::StdSharedMutex>;
struct LockName {
    template <typename T>
    static std::string GetName(int) {
        if (std::is_same_v<T, t::Rw10ReaderPriority>) return "rw1_0";
        if (std::is_same_v<T, t::Rw11OsOrdered>) return "rw1_1";
        if (std::is_same_v<T, t::Rw12WriterPriority>) return "rw1_2";
        if (std::is_same_v<T, t::Rw13Textbook>) return "rw1_3";
        if (std::is_same_v<T, t::PthreadRwLock>) return "pthread";
        return "shared_mutex";
    }
};
TYPED_TEST_SUITE(RwLockTest, Locks, LockName);

TYPED_TEST(RwLockTest, WritersExcludeEveryone) {
    TypeParam lock;
    t::RwWorkload w;
    w.readers = 6;
    w.writers = 3;
    w.duration = std::chrono::milliseconds(150);
    w.work = 2;
    const t::RwWorkloadResult r = t::run_rw_workload(lock, w);
    EXPECT_EQ(r.violations, 0u);
    EXPECT_TRUE(r.data_consistent);
    EXPECT_GT(r.reads, 0u);
    EXPECT_GT(r.writes, 0u);  // at the latest after the readers stop
}

TYPED_TEST(RwLockTest, ReadersShare) {
    TypeParam lock;
    lock.lock_shared();
    std::thread other([&] {
        lock.lock_shared();  // would hang if readers excluded each other
        lock.unlock_shared();
    });
    other.join();
    lock.unlock_shared();
    lock.lock();
    lock.unlock();
}

/// Runs `rw_locks_bench --variant 1.4-flawed` (posix_spawn, so nothing but exec runs in the child
/// of this multi-threaded test), waits for its "deadlocked" line, then checks it is still blocked
/// after a bounded wait and kills it.
TEST(RwFlawed14, ForcedInterleavingDeadlocks) {
    int out[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    char prog[] = RW_LOCKS_BENCH;
    char variant_opt[] = "--variant";
    char variant[] = "1.4-flawed";
    char* argv[] = {prog, variant_opt, variant, nullptr};
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, prog, &actions, nullptr, argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);

    std::string output;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (output.find("deadlocked") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
        pollfd p{out[0], POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
            char buf[256];
            const ssize_t n = read(out[0], buf, sizeof buf);
            if (n <= 0) {
                break;
            }
            output.append(buf, static_cast<size_t>(n));
        }
    }
    close(out[0]);
    EXPECT_NE(output.find("deadlocked"), std::string::npos) << output;

    // Bounded wait: a deadlocked child is still running 300 ms later.
    int status = 0;
    pid_t done = 0;
    for (int i = 0; i < 30 && done == 0; ++i) {
        done = waitpid(pid, &status, WNOHANG);
        if (done == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    EXPECT_EQ(done, 0) << "the child exited instead of deadlocking";
    if (done == 0) {
        kill(pid, SIGKILL);
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    }
}

}  // namespace

// @brief std::mutex and std::shared_mutex deadlocks on an object's members (the `deadlocks` command's tests).
//
// `deadlock_std mutex`: two threads transfer between two accounts in opposite orders (ABBA on
// Bank::accounts_ and Bank::audit_); `deadlock_std shared`: a reader holds Bank::ledger_ shared and
// wants Bank::accounts_, a writer holds accounts_ and wants ledger_ exclusively. Barriers put the
// threads in place; "ready PID" is printed once both sleep in futex(2).
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

namespace {

pthread_barrier_t step;
pid_t tids[2];

struct Bank {
    std::mutex accounts_;
    std::mutex audit_;
    std::shared_mutex ledger_;
    long balance_ = 0;

    void transfer_in(int slot) {
        std::lock_guard<std::mutex> hold(accounts_);
        pthread_barrier_wait(&step);
        std::lock_guard<std::mutex> also(audit_);  // WAIT: transfer_in
        balance_ += slot;
    }
    void transfer_out(int slot) {
        std::lock_guard<std::mutex> hold(audit_);
        pthread_barrier_wait(&step);
        std::lock_guard<std::mutex> also(accounts_);  // WAIT: transfer_out
        balance_ -= slot;
    }
    void read_ledger() {
        std::shared_lock<std::shared_mutex> read(ledger_);
        pthread_barrier_wait(&step);
        std::lock_guard<std::mutex> also(accounts_);  // WAIT: read_ledger
        (void)balance_;
    }
    void write_ledger() {
        std::lock_guard<std::mutex> hold(accounts_);
        pthread_barrier_wait(&step);
        std::unique_lock<std::shared_mutex> write(ledger_);  // WAIT: write_ledger
        balance_ = 0;
    }
};

void enter(const char* name, int index) {
    pthread_setname_np(pthread_self(), name);
    tids[index] = static_cast<pid_t>(syscall(SYS_gettid));
}

bool in_futex(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/syscall");
    std::string nr;
    return (f >> nr) && nr == "202";
}

}  // namespace

int main(int argc, char** argv) {
    const std::string which = argc > 1 ? argv[1] : "";
    if (which != "mutex" && which != "shared") {
        std::fprintf(stderr, "usage: deadlock_std mutex|shared\n");
        return 2;
    }
    auto* bank = new Bank;
    pthread_barrier_init(&step, nullptr, 2);
    std::thread first([&] {
        enter(which == "mutex" ? "teller-in" : "auditor", 0);
        if (which == "mutex") {
            bank->transfer_in(1);
        } else {
            bank->read_ledger();
        }
    });
    std::thread second([&] {
        enter(which == "mutex" ? "teller-out" : "clerk", 1);
        if (which == "mutex") {
            bank->transfer_out(1);
        } else {
            bank->write_ledger();
        }
    });
    for (pid_t& tid : tids) {
        while (tid == 0 || !in_futex(tid)) {
            usleep(1000);
        }
    }
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
    for (;;) {
        pause();
    }
}

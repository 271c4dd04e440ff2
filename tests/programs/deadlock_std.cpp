// @brief std::mutex and std::shared_mutex deadlocks on an object's members (the `deadlocks` command's tests).
//
// `deadlock_std mutex`: two threads transfer between two accounts in opposite orders (ABBA on
// Bank::accounts_ and Bank::audit_); `deadlock_std shared`: a reader holds Bank::ledger_ shared and
// wants Bank::accounts_, a writer holds accounts_ and wants ledger_ exclusively; `deadlock_std
// callee`: the reader takes its std::shared_lock on ledger_ in its own frame and waits for
// config_mutex in a function it calls, a writer holds config_mutex and wants ledger_; `deadlock_std
// join`: the main thread holds config_mutex and joins a std::thread that waits for it. Barriers put
// the threads in place; "ready PID" is printed once both sleep in futex(2).
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
std::mutex config_mutex;

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
    __attribute__((noinline)) void load_config() {
        std::lock_guard<std::mutex> config(config_mutex);  // WAIT: load_config
        ++balance_;
    }
    void read_with_config() {
        std::shared_lock<std::shared_mutex> read(ledger_);
        pthread_barrier_wait(&step);
        load_config();  // CALLS: load_config
    }
    void write_with_config() {
        std::lock_guard<std::mutex> hold(config_mutex);
        pthread_barrier_wait(&step);
        std::unique_lock<std::shared_mutex> write(ledger_);  // WAIT: write_with_config
        balance_ = 0;
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

void announce() {
    for (pid_t& tid : tids) {
        while (tid == 0 || !in_futex(tid)) {
            usleep(1000);
        }
    }
    std::printf("ready %d\n", static_cast<int>(getpid()));
    std::fflush(stdout);
}

/// The main thread holds config_mutex and joins a thread that waits for it.
void join_waiting_worker() {
    std::lock_guard<std::mutex> hold(config_mutex);
    std::thread worker([] {
        enter("worker", 0);
        std::lock_guard<std::mutex> config(config_mutex);  // WAIT: worker
    });
    tids[1] = static_cast<pid_t>(syscall(SYS_gettid));
    std::thread announcer([] {
        pthread_setname_np(pthread_self(), "announcer");
        announce();
        for (;;) {
            pause();
        }
    });
    announcer.detach();
    worker.join();  // WAIT: join
}

}  // namespace

int main(int argc, char** argv) {
    const std::string which = argc > 1 ? argv[1] : "";
    if (which == "join") {
        join_waiting_worker();
        return 0;
    }
    if (which != "mutex" && which != "shared" && which != "callee") {
        std::fprintf(stderr, "usage: deadlock_std mutex|shared|callee|join\n");
        return 2;
    }
    auto* bank = new Bank;
    pthread_barrier_init(&step, nullptr, 2);
    std::thread first([&] {
        enter(which == "mutex" ? "teller-in" : "auditor", 0);
        if (which == "mutex") {
            bank->transfer_in(1);
        } else if (which == "callee") {
            bank->read_with_config();
        } else {
            bank->read_ledger();
        }
    });
    std::thread second([&] {
        enter(which == "mutex" ? "teller-out" : "clerk", 1);
        if (which == "mutex") {
            bank->transfer_out(1);
        } else if (which == "callee") {
            bank->write_with_config();
        } else {
            bank->write_ledger();
        }
    });
    announce();
    for (;;) {
        pause();
    }
}

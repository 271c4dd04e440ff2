// @brief Benchmark: readers and writers on each reader-writer lock; shows writer starvation under RW 1.0; drives RW 1.4 into its deadlock on request.
#include "bench_cli.hpp"
#include "rw_locks.hpp"

#include <semaphore.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace t = dbgkit::targets;

constexpr const char* kUsage =
    "usage: rw_locks_bench [--readers R] [--writers W] [--millis MS] [--work N]\n"
    "                      [--variant 1.0|1.1|1.2|1.3|pthread|shared_mutex|all|1.4-flawed]\n"
    "\n"
    "R reader threads read continuously and W writer threads write continuously for MS\n"
    "milliseconds on each lock; prints one row per lock: reads and writes done, the writers'\n"
    "average and longest wait in lock(), and mutual-exclusion violations (always 0).\n"
    "Under RW 1.0 (reader priority) the stream of readers starves the writers.\n"
    "\n"
    "  --readers R    reader threads (default 8)\n"
    "  --writers W    writer threads (default 2)\n"
    "  --millis MS    run time per lock in milliseconds (default 1000)\n"
    "  --work N       passes over 64 shared slots per read or write (default 8)\n"
    "  --variant V    1.0 reader priority, 1.1 OS-ordered, 1.2 writer priority, 1.3 textbook\n"
    "                 (the slides' semaphore locks), pthread (pthread_rwlock_t), shared_mutex\n"
    "                 (std::shared_mutex), all (default: these six in that order);\n"
    "                 1.4-flawed: the slides' RW 1.4, which is WRONG ON PURPOSE: forces the\n"
    "                 interleaving that deadlocks it (two readers, one writer), prints one line\n"
    "                 when the threads are in place and then hangs forever; kill it (or attach a\n"
    "                 debugger to it)\n"
    "  --help         this text\n"
    "\n"
    "The seed's slides give no timings for these locks.\n"
    "Exit status: 0 on success, 1 on a mutual-exclusion violation, 2 on a bad argument.\n";

struct Options {
    t::RwWorkload workload;
    std::vector<std::string> variants{"1.0", "1.1", "1.2", "1.3", "pthread", "shared_mutex"};
    bool flawed = false;
};

const dbgkit::targets::cli::Program kProgram{"rw_locks_bench", kUsage};

Options parse(int argc, char** argv) {
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    const auto count = [&args](bool zero_ok) {
        return static_cast<unsigned>(args.count(zero_ok ? 0 : 1, 100000));
    };
    while (args.next()) {
        if (args.is("--readers")) {
            opt.workload.readers = count(true);
        } else if (args.is("--writers")) {
            opt.workload.writers = count(true);
        } else if (args.is("--millis")) {
            opt.workload.duration = std::chrono::milliseconds(count(false));
        } else if (args.is("--work")) {
            opt.workload.work = count(false);
        } else if (args.is("--variant")) {
            if (std::string(args.value()) == "1.4-flawed") {
                opt.flawed = true;
            } else {
                args.variant(std::vector<std::string>{"1.0", "1.1", "1.2", "1.3", "pthread",
                                                      "shared_mutex"},
                             opt.variants);
            }
        } else {
            args.unknown();
        }
    }
    if (opt.workload.readers + opt.workload.writers == 0) {
        dbgkit::targets::cli::usage_error(kProgram,
                                          "no threads: give --readers or --writers above 0");
    }
    return opt;
}

/// The steps of the forced RW 1.4 interleaving; each hook posts the step it reached.
struct FlawedDemo {
    std::atomic<bool> armed{false};
    sem_t writer_holds_pending;
    sem_t reader_b_holds_rcount;
};

void flawed_hook(t::RwFlawed14::Point point, void* context) {
    auto* demo = static_cast<FlawedDemo*>(context);
    if (!demo->armed.load()) {
        return;
    }
    switch (point) {
        case t::RwFlawed14::Point::writer_holds_pending:
            sem_post(&demo->writer_holds_pending);
            break;
        case t::RwFlawed14::Point::reader_holds_rcount:
            sem_post(&demo->reader_b_holds_rcount);
            break;
        case t::RwFlawed14::Point::reader_unlock_begins:
            std::printf(
                "rw_locks_bench: RW 1.4 deadlocked: reader A waits for mutexRcount (held by reader "
                "B), B waits for semaWriterPending (held by the writer), the writer waits for semaW "
                "(held by A's read)\n");
            std::fflush(stdout);
            break;
    }
}

[[noreturn]] void run_flawed_deadlock() {
    t::RwFlawed14 lock;
    FlawedDemo demo;
    sem_init(&demo.writer_holds_pending, 0, 0);
    sem_init(&demo.reader_b_holds_rcount, 0, 0);
    lock.set_hook(flawed_hook, &demo);

    lock.lock_shared();  // reader A (this thread) is reading: the readers hold semaW
    demo.armed.store(true);
    std::thread writer([&] {
        lock.lock();  // takes semaWriterPending, then waits for semaW
        lock.unlock();
    });
    while (sem_wait(&demo.writer_holds_pending) != 0) {
    }
    std::thread reader_b([&] {
        lock.lock_shared();  // takes mutexRcount, then waits for semaWriterPending
        lock.unlock_shared();
    });
    while (sem_wait(&demo.reader_b_holds_rcount) != 0) {
    }
    lock.unlock_shared();  // reader A waits for mutexRcount: never returns
    writer.join();
    reader_b.join();
    std::fprintf(stderr, "rw_locks_bench: RW 1.4 did not deadlock\n");
    std::exit(1);
}

template <typename Lock>
t::RwWorkloadResult run(const Options& opt) {
    Lock lock;
    return t::run_rw_workload(lock, opt.workload);
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    if (opt.flawed) {
        run_flawed_deadlock();
    }
    std::printf(
        "| variant | readers | writers | seconds | reads | writes | writer wait avg ms | "
        "writer wait max ms | violations |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    int status = 0;
    for (const std::string& v : opt.variants) {
        const auto start = std::chrono::steady_clock::now();
        t::RwWorkloadResult r;
        if (v == "1.0") {
            r = run<t::Rw10ReaderPriority>(opt);
        } else if (v == "1.1") {
            r = run<t::Rw11OsOrdered>(opt);
        } else if (v == "1.2") {
            r = run<t::Rw12WriterPriority>(opt);
        } else if (v == "1.3") {
            r = run<t::Rw13Textbook>(opt);
        } else if (v == "pthread") {
            r = run<t::PthreadRwLock>(opt);
        } else {
            r = run<t::StdSharedMutex>(opt);
        }
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        if (r.violations != 0 || !r.data_consistent) {
            std::fprintf(stderr, "rw_locks_bench: %s: mutual exclusion violated\n", v.c_str());
            status = 1;
        }
        std::printf("| %s | %u | %u | %.3f | %llu | %llu | %.3f | %.3f | %llu |\n", v.c_str(),
                    opt.workload.readers, opt.workload.writers, elapsed.count(),
                    static_cast<unsigned long long>(r.reads),
                    static_cast<unsigned long long>(r.writes), r.writer_wait_avg_ms,
                    r.writer_wait_max_ms, static_cast<unsigned long long>(r.violations));
    }
    return status;
}

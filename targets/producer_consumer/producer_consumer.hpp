// @brief Unbounded producer-consumer variants from the seed's slides (PC 1.1, 1.2, 1.4, 3.0, 3.4): each thread consumes one item, then produces a batch.
//
// As on the slides, every one of k threads loops: take one item x from the shared queue, then
// add `batch` new items. With batch = 1 the queue stays at k items; with batch = 10 it grows.
// Here production stops after `items` items in all, and the run ends when all are consumed.
// The variants differ in how a consumer waits for an item:
//   spin            PC 1.1: lock the mutex, look, unlock, again (busy spin through the mutex)
//   semaphore       PC 1.2: a counting semaphore, released once per item inside the mutex
//   bulk_semaphore  PC 1.4: released once per batch after the mutex (POSIX sem_post has no count
//                   argument, unlike ReleaseSemaphore, so it is `batch` posts without the mutex)
//   condvar         PC 3.0: a condition variable
//   sleep_poll      PC 3.4: look under the mutex, sleep when empty (the slides sleep 100 ms)
#pragma once

#include <semaphore.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

namespace dbgkit::targets {

enum class PcVariant { spin, semaphore, bulk_semaphore, condvar, sleep_poll };

inline const char* pc_variant_name(PcVariant v) {
    switch (v) {
        case PcVariant::spin: return "spin";
        case PcVariant::semaphore: return "semaphore";
        case PcVariant::bulk_semaphore: return "bulk_semaphore";
        case PcVariant::condvar: return "condvar";
        case PcVariant::sleep_poll: return "sleep_poll";
    }
    return "?";
}

inline const std::vector<PcVariant>& all_pc_variants() {
    static const std::vector<PcVariant> all{PcVariant::spin, PcVariant::semaphore,
                                            PcVariant::bulk_semaphore, PcVariant::condvar,
                                            PcVariant::sleep_poll};
    return all;
}

struct PcConfig {
    unsigned threads = 600;
    std::uint64_t items = 200000;
    unsigned batch = 1;
    std::chrono::microseconds sleep{100000};  // sleep_poll's sleep when the queue is empty
};

struct PcResult {
    std::uint64_t consumed = 0;
    double seconds = 0;
    bool exactly_once = false;  // every item 0..items-1 consumed exactly once
};

namespace detail {

class PcSemaphore {
public:
    PcSemaphore() {
        if (sem_init(&sem_, 0, 0) != 0) {
            throw std::system_error(errno, std::generic_category(), "sem_init");
        }
    }
    ~PcSemaphore() { sem_destroy(&sem_); }
    PcSemaphore(const PcSemaphore&) = delete;
    PcSemaphore& operator=(const PcSemaphore&) = delete;
    void wait() {
        while (sem_wait(&sem_) != 0 && errno == EINTR) {
        }
    }
    void release() { sem_post(&sem_); }

private:
    sem_t sem_;
};

class PcRun {
public:
    PcRun(PcVariant variant, const PcConfig& config)
        : variant_(variant), config_(config), seen_(new std::atomic<std::uint32_t>[config.items]) {
        for (std::uint64_t i = 0; i < config.items; ++i) {
            seen_[i].store(0, std::memory_order_relaxed);
        }
        // The first k items are there before the threads start.
        while (produced_ < config.items && produced_ < config.threads) {
            queue_.push_back(produced_++);
            if (uses_semaphore()) {
                sema_.release();
            }
        }
    }

    PcResult run() {
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::thread> threads;
        threads.reserve(config_.threads);
        for (unsigned i = 0; i < config_.threads; ++i) {
            threads.emplace_back([this] { worker(); });
        }
        for (std::thread& t : threads) {
            t.join();
        }
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        PcResult r;
        r.consumed = consumed_.load();
        r.seconds = elapsed.count();
        r.exactly_once = r.consumed == config_.items;
        for (std::uint64_t i = 0; i < config_.items; ++i) {
            r.exactly_once = r.exactly_once && seen_[i].load() == 1;
        }
        return r;
    }

private:
    bool uses_semaphore() const {
        return variant_ == PcVariant::semaphore || variant_ == PcVariant::bulk_semaphore;
    }

    void worker() {
        while (const std::optional<std::uint64_t> x = take()) {
            seen_[*x].fetch_add(1, std::memory_order_relaxed);
            if (consumed_.fetch_add(1) + 1 == config_.items) {
                finish();
            }
            produce();
        }
    }

    /// One item, or nullopt once every item was consumed.
    std::optional<std::uint64_t> take() {
        switch (variant_) {
            case PcVariant::spin:
            case PcVariant::sleep_poll:
                while (true) {
                    {
                        std::lock_guard<std::mutex> g(mutex_);
                        if (!queue_.empty()) {
                            return pop_locked();
                        }
                        if (done_.load()) {
                            return std::nullopt;
                        }
                    }
                    if (variant_ == PcVariant::sleep_poll) {
                        std::this_thread::sleep_for(config_.sleep);
                    }
                }
            case PcVariant::semaphore:
            case PcVariant::bulk_semaphore: {
                sema_.wait();
                std::lock_guard<std::mutex> g(mutex_);
                if (queue_.empty()) {
                    return std::nullopt;  // a wake-up from finish()
                }
                return pop_locked();
            }
            case PcVariant::condvar: {
                std::unique_lock<std::mutex> lock(mutex_);
                ready_.wait(lock, [this] { return !queue_.empty() || done_.load(); });
                if (queue_.empty()) {
                    return std::nullopt;
                }
                return pop_locked();
            }
        }
        return std::nullopt;
    }

    std::uint64_t pop_locked() {
        const std::uint64_t x = queue_.front();
        queue_.pop_front();
        return x;
    }

    void produce() {
        unsigned added = 0;
        {
            std::lock_guard<std::mutex> g(mutex_);
            for (; added < config_.batch && produced_ < config_.items; ++added) {
                queue_.push_back(produced_++);
                if (variant_ == PcVariant::semaphore) {
                    sema_.release();  // PC 1.2: one release per item, inside the mutex
                }
            }
        }
        if (added == 0) {
            return;
        }
        if (variant_ == PcVariant::bulk_semaphore) {
            for (unsigned i = 0; i < added; ++i) {
                sema_.release();
            }
        } else if (variant_ == PcVariant::condvar) {
            if (added == 1) {
                ready_.notify_one();
            } else {
                ready_.notify_all();
            }
        }
    }

    /// The last item was consumed: wake every thread still waiting so it sees the end.
    void finish() {
        {
            std::lock_guard<std::mutex> g(mutex_);
            done_.store(true);
        }
        if (uses_semaphore()) {
            for (unsigned i = 0; i < config_.threads; ++i) {
                sema_.release();
            }
        } else if (variant_ == PcVariant::condvar) {
            ready_.notify_all();
        }
    }

    PcVariant variant_;
    PcConfig config_;
    std::unique_ptr<std::atomic<std::uint32_t>[]> seen_;
    std::mutex mutex_;
    std::condition_variable ready_;
    PcSemaphore sema_;
    std::deque<std::uint64_t> queue_;  // guarded by mutex_
    std::uint64_t produced_ = 0;       // guarded by mutex_
    std::atomic<std::uint64_t> consumed_{0};
    std::atomic<bool> done_{false};
};

}  // namespace detail

/// Runs one variant to the end; every thread is joined before it returns.
inline PcResult run_pc(PcVariant variant, const PcConfig& config) {
    if (config.threads == 0 || config.items == 0 || config.batch == 0) {
        throw std::invalid_argument("run_pc: threads, items and batch must be positive");
    }
    detail::PcRun run(variant, config);
    return run.run();
}

}  // namespace dbgkit::targets

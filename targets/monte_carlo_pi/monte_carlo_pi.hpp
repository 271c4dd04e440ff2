// @brief Monte Carlo pi: k threads count points inside the quarter circle into one shared hit counter, synchronised in each way of the seed's slides.
//
// Variants of the shared counter update:
//   mutex       pthread mutex (default attributes)
//   spin        spin lock on an atomic exchange
//   spin_yield  spin lock that calls sched_yield() while the lock is taken
//   adaptive    pthread mutex of type PTHREAD_MUTEX_ADAPTIVE_NP (spins a little, then sleeps)
//   atomic      atomic fetch_add
//   none        WRONG ON PURPOSE: a relaxed atomic load then a separate relaxed store. That is a
//               non-atomic read-modify-write: two threads can read the same value and one
//               increment is lost, as in the slides' unsynchronised `(*hitCircle)++`; but being
//               atomic accesses it is no data race (no undefined behaviour, sanitizer-clean).
//   local       each thread counts in a local variable and adds it once at the end
// Each thread draws from its own std::mt19937_64 seeded with seed + thread index, so the hit
// count is the same for every correct variant.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dbgkit::targets {

enum class PiSync { mutex, spin, spin_yield, adaptive, atomic, none, local };

inline const char* pi_sync_name(PiSync s) {
    switch (s) {
        case PiSync::mutex: return "mutex";
        case PiSync::spin: return "spin";
        case PiSync::spin_yield: return "spin_yield";
        case PiSync::adaptive: return "adaptive";
        case PiSync::atomic: return "atomic";
        case PiSync::none: return "none";
        case PiSync::local: return "local";
    }
    return "?";
}

inline const std::vector<PiSync>& all_pi_syncs() {
    static const std::vector<PiSync> all{PiSync::mutex,  PiSync::spin, PiSync::spin_yield,
                                         PiSync::adaptive, PiSync::atomic, PiSync::none,
                                         PiSync::local};
    return all;
}

struct PiConfig {
    unsigned threads = 60;
    std::uint64_t points_per_thread = 200000;
    std::uint64_t seed = 1;
    bool affinity = false;  // pin thread i to CPU i mod (CPUs available)
};

struct PiResult {
    std::uint64_t hits = 0;
    std::uint64_t points = 0;
    double seconds = 0;
    double pi() const { return 4.0 * static_cast<double>(hits) / static_cast<double>(points); }
};

namespace detail {

/// The shared counter and whichever lock protects it.
class PiCounter {
public:
    explicit PiCounter(PiSync sync) : sync_(sync) {
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        if (sync == PiSync::adaptive) {
            pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
        }
        pthread_mutex_init(&mutex_, &attr);
        pthread_mutexattr_destroy(&attr);
    }
    ~PiCounter() { pthread_mutex_destroy(&mutex_); }
    PiCounter(const PiCounter&) = delete;
    PiCounter& operator=(const PiCounter&) = delete;

    void increment() {
        switch (sync_) {
            case PiSync::mutex:
            case PiSync::adaptive:
                pthread_mutex_lock(&mutex_);
                ++locked_;
                pthread_mutex_unlock(&mutex_);
                break;
            case PiSync::spin:
                while (spin_.exchange(true, std::memory_order_acquire)) {
                }
                ++locked_;
                spin_.store(false, std::memory_order_release);
                break;
            case PiSync::spin_yield:
                while (spin_.exchange(true, std::memory_order_acquire)) {
                    sched_yield();
                }
                ++locked_;
                spin_.store(false, std::memory_order_release);
                break;
            case PiSync::atomic:
                atomic_.fetch_add(1, std::memory_order_relaxed);
                break;
            case PiSync::none:
                // Lost updates on purpose: load and store are each atomic, the pair is not.
                atomic_.store(atomic_.load(std::memory_order_relaxed) + 1,
                              std::memory_order_relaxed);
                break;
            case PiSync::local:
                add(1);
                break;
        }
    }
    void add(std::uint64_t n) { atomic_.fetch_add(n, std::memory_order_relaxed); }
    /// Only after every thread was joined.
    std::uint64_t value() const { return locked_ + atomic_.load(); }

private:
    PiSync sync_;
    pthread_mutex_t mutex_;
    std::atomic<bool> spin_{false};
    std::uint64_t locked_ = 0;  // guarded by mutex_ or spin_
    std::atomic<std::uint64_t> atomic_{0};
};

inline void pin_to_cpu(unsigned index) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0) {
        return;
    }
    unsigned nth = index % static_cast<unsigned>(CPU_COUNT(&allowed));
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &allowed) && nth-- == 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

}  // namespace detail

/// Runs one experiment: config.threads threads of config.points_per_thread points each.
inline PiResult run_pi(PiSync sync, const PiConfig& config) {
    if (config.threads == 0 || config.points_per_thread == 0) {
        throw std::invalid_argument("run_pi: threads and points must be positive");
    }
    detail::PiCounter counter(sync);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    threads.reserve(config.threads);
    for (unsigned i = 0; i < config.threads; ++i) {
        threads.emplace_back([&, i] {
            if (config.affinity) {
                detail::pin_to_cpu(i);
            }
            std::mt19937_64 rng(config.seed + i);
            constexpr double kScale = 1.0 / 9007199254740992.0;  // 2^-53: uniform in [0, 1)
            std::uint64_t local = 0;
            for (std::uint64_t n = 0; n < config.points_per_thread; ++n) {
                const double x = static_cast<double>(rng() >> 11) * kScale;
                const double y = static_cast<double>(rng() >> 11) * kScale;
                if (x * x + y * y < 1.0) {
                    if (sync == PiSync::local) {
                        ++local;
                    } else {
                        counter.increment();
                    }
                }
            }
            if (sync == PiSync::local) {
                counter.add(local);
            }
        });
    }
    for (std::thread& t : threads) {
        t.join();
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    PiResult r;
    r.hits = counter.value();
    r.points = config.points_per_thread * config.threads;
    r.seconds = elapsed.count();
    return r;
}

}  // namespace dbgkit::targets

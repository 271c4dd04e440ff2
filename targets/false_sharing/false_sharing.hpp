// @brief False sharing: three threads each increment their own member of one struct, packed or cache-line aligned, with a CPU affinity choice.
//
// The members are std::atomic<std::uint32_t> updated with a relaxed load and a relaxed store, not
// fetch_add: each iteration is then a plain load, add and store to memory (no locked
// instruction), as in the seed's `int` members, but the compiler may not fold the loop into one
// addition and there is no data race for ThreadSanitizer to report.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dbgkit::targets {

namespace detail {
/// 64 bytes, the L1 line of the x86-64 CPUs the seed and we run on (see spsc_ring.hpp for why not
/// std::hardware_destructive_interference_size).
inline constexpr std::size_t fs_cache_line = 64;
}  // namespace detail

inline constexpr std::size_t kSharingThreads = 3;

/// Three counters in 12 bytes: all on one cache line.
struct PackedCounters {
    std::atomic<std::uint32_t> value[kSharingThreads] = {};
};

/// Three counters, each at the start of its own cache line.
struct AlignedCounters {
    struct alignas(detail::fs_cache_line) Slot {
        std::atomic<std::uint32_t> value{0};
    };
    Slot slot[kSharingThreads];
};

static_assert(sizeof(PackedCounters) == 3 * sizeof(std::uint32_t), "packed counters share a line");
static_assert(sizeof(AlignedCounters) == kSharingThreads * detail::fs_cache_line,
              "one line per counter");

inline std::atomic<std::uint32_t>& counter(PackedCounters& c, std::size_t i) { return c.value[i]; }
inline std::atomic<std::uint32_t>& counter(AlignedCounters& c, std::size_t i) {
    return c.slot[i].value;
}

enum class Affinity {
    none,    // the scheduler decides
    same,    // every thread on the first allowed CPU
    spread,  // thread i on allowed CPU i mod (number of allowed CPUs)
};

/// The CPUs this process may run on, in ascending order.
inline std::vector<int> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(errno));
    }
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) {
            cpus.push_back(cpu);
        }
    }
    return cpus;
}

/// The CPU each of the three threads is pinned to (-1: not pinned). With fewer CPUs than threads,
/// `spread` wraps around: on 2 CPUs threads 0 and 2 share the first one.
inline std::array<int, kSharingThreads> cpu_plan(Affinity affinity, const std::vector<int>& cpus) {
    std::array<int, kSharingThreads> plan{};
    for (std::size_t i = 0; i < kSharingThreads; ++i) {
        if (affinity == Affinity::none || cpus.empty()) {
            plan[i] = -1;
        } else if (affinity == Affinity::same) {
            plan[i] = cpus.front();
        } else {
            plan[i] = cpus[i % cpus.size()];
        }
    }
    return plan;
}

struct SharingResult {
    double seconds = 0;
    std::array<std::uint32_t, kSharingThreads> counts{};
};

/// Starts the three threads, pins them as PLAN says, lets each add 1 to its own counter
/// ITERATIONS times, and returns the wall time from start to the last join and the final counts.
template <typename Counters>
SharingResult run_false_sharing(std::uint32_t iterations, const std::array<int, kSharingThreads>& plan) {
    static Counters counters;  // static, as in the seed; reset for each run
    for (std::size_t i = 0; i < kSharingThreads; ++i) {
        counter(counters, i).store(0, std::memory_order_relaxed);
    }
    std::array<int, kSharingThreads> pin_error{};  // each written by its thread, read after join
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    threads.reserve(kSharingThreads);
    for (std::size_t i = 0; i < kSharingThreads; ++i) {
        threads.emplace_back([i, iterations, cpu = plan[i], &error = pin_error[i]] {
            if (cpu >= 0) {
                // Each thread pins itself before its first increment.
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                error = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
                if (error != 0) {
                    return;
                }
            }
            std::atomic<std::uint32_t>& mine = counter(counters, i);
            for (std::uint32_t n = 0; n < iterations; ++n) {
                mine.store(mine.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
            }
        });
    }
    for (std::thread& t : threads) {
        t.join();
    }
    for (std::size_t i = 0; i < kSharingThreads; ++i) {
        if (pin_error[i] != 0) {
            throw std::runtime_error("pthread_setaffinity_np(CPU " + std::to_string(plan[i]) +
                                     "): " + std::strerror(pin_error[i]));
        }
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    SharingResult result;
    result.seconds = elapsed.count();
    for (std::size_t i = 0; i < kSharingThreads; ++i) {
        result.counts[i] = counter(counters, i).load(std::memory_order_relaxed);
    }
    return result;
}

}  // namespace dbgkit::targets

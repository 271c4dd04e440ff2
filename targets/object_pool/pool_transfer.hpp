// @brief The seed's object-pool workload: N producers acquire blocks and pass them through a queue to M consumers that release them.
#pragma once

#include "mpmc_queue.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace dbgkit::targets {

/// Latency of one kind of call, in nanoseconds.
struct LatencyStats {
    std::uint64_t count = 0;
    std::uint64_t min_ns = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t max_ns = 0;
    std::uint64_t total_ns = 0;

    void add(std::uint64_t ns) noexcept {
        ++count;
        min_ns = std::min(min_ns, ns);
        max_ns = std::max(max_ns, ns);
        total_ns += ns;
    }
    void merge(const LatencyStats& other) noexcept {
        count += other.count;
        min_ns = std::min(min_ns, other.min_ns);
        max_ns = std::max(max_ns, other.max_ns);
        total_ns += other.total_ns;
    }
    double avg_ns() const noexcept {
        return count == 0 ? 0.0 : static_cast<double>(total_ns) / static_cast<double>(count);
    }
};

struct TransferStats {
    LatencyStats acquire;
    LatencyStats release;
};

namespace detail {

/// What a producer writes at the start of each block, and the consumer reads back.
struct Stamp {
    std::uint64_t producer;
    std::uint64_t sequence;
};

inline std::uint64_t ns_between(std::chrono::steady_clock::time_point a,
                                std::chrono::steady_clock::time_point b) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

/// Per-thread statistics, padded so threads do not share a cache line.
struct alignas(64) PaddedStats {
    LatencyStats stats;
};

}  // namespace detail

/// Runs the workload on `pool` (item_bytes() >= 16): `producers` threads each acquire
/// `items_per_producer` blocks, stamp them with (producer, sequence) and push them onto a
/// CoarseQueue; `consumers` threads pop until the queue is closed and drained, call
/// seen(consumer, producer, sequence) and release the block. Returns the merged latencies.
template <typename Pool, typename Seen>
TransferStats pool_transfer(Pool& pool, unsigned producers, unsigned consumers,
                            std::uint64_t items_per_producer, Seen seen) {
    using clock = std::chrono::steady_clock;
    CoarseQueue<void*> queue;
    std::vector<detail::PaddedStats> acquire_stats(producers);
    std::vector<detail::PaddedStats> release_stats(consumers);
    std::vector<std::thread> consumer_threads;
    consumer_threads.reserve(consumers);
    for (unsigned c = 0; c < consumers; ++c) {
        consumer_threads.emplace_back([&, c] {
            while (auto block = queue.pop()) {
                detail::Stamp stamp;
                std::memcpy(&stamp, *block, sizeof stamp);
                seen(c, stamp.producer, stamp.sequence);
                const auto t0 = clock::now();
                pool.release(*block);
                release_stats[c].stats.add(detail::ns_between(t0, clock::now()));
            }
        });
    }
    std::vector<std::thread> producer_threads;
    producer_threads.reserve(producers);
    for (unsigned p = 0; p < producers; ++p) {
        producer_threads.emplace_back([&, p] {
            for (std::uint64_t i = 0; i < items_per_producer; ++i) {
                const auto t0 = clock::now();
                void* block = pool.acquire();
                acquire_stats[p].stats.add(detail::ns_between(t0, clock::now()));
                const detail::Stamp stamp{p, i};
                std::memcpy(block, &stamp, sizeof stamp);
                queue.push(block);
            }
        });
    }
    for (std::thread& t : producer_threads) {
        t.join();
    }
    queue.close();
    for (std::thread& t : consumer_threads) {
        t.join();
    }
    TransferStats result;
    for (const auto& s : acquire_stats) {
        result.acquire.merge(s.stats);
    }
    for (const auto& s : release_stats) {
        result.release.merge(s.stats);
    }
    return result;
}

}  // namespace dbgkit::targets

// @brief Single-producer single-consumer ring buffers: mutex-based, lock-free seq_cst, lock-free acquire/release.
//
// The three share one interface so the benchmark and the tests drive them alike:
//   bool try_push(const T&)   false when the ring is full
//   bool try_pop(T&)          false when the ring is empty
// Exactly one thread may push and exactly one thread may pop (LockedRing allows more, but is measured
// with one of each). A ring of capacity C keeps C + 1 slots: one slot stays empty so that
// head == tail means "empty" and head + 1 == tail means "full" without a shared counter.
// Nothing here allocates after construction; the slots are freed by the destructor.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dbgkit::targets {

namespace detail {

/// 64 bytes: the L1 line of every x86-64 and most ARMv8 cores. Not
/// std::hardware_destructive_interference_size: GCC warns (-Winterference-size) when a header uses
/// it, because its value may differ between translation units built with different -mtune.
inline constexpr std::size_t cache_line = 64;

inline std::size_t slots_for(std::size_t capacity) {
    if (capacity == 0) {
        throw std::invalid_argument("ring capacity must be at least 1");
    }
    return capacity + 1;
}

/// The memory orders of one lock-free variant.
struct SeqCst {
    static constexpr std::memory_order load = std::memory_order_seq_cst;
    static constexpr std::memory_order store = std::memory_order_seq_cst;
};
struct AcquireRelease {
    static constexpr std::memory_order load = std::memory_order_acquire;
    static constexpr std::memory_order store = std::memory_order_release;
};

/// The two indices next to each other, as in the seed's first lock-free ring: one cache line
/// bounces between producer and consumer on every operation.
struct AdjacentIndices {
    std::atomic<std::size_t> head{0};  // next slot to write; written by the producer only
    std::atomic<std::size_t> tail{0};  // next slot to read; written by the consumer only
};

/// Each index on its own cache line, so a store to one does not invalidate the other.
struct SeparateIndices {
    alignas(cache_line) std::atomic<std::size_t> head{0};
    alignas(cache_line) std::atomic<std::size_t> tail{0};
};

/// The lock-free ring: Order picks the memory orders, Indices the layout of head and tail.
/// Each thread reads its own index relaxed (only it writes it) and the other's with Order::load;
/// it publishes its own with Order::store after touching the slot, which hands the slot over.
template <typename T, typename Order, typename Indices>
class AtomicRing {
public:
    explicit AtomicRing(std::size_t capacity) : slots_(slots_for(capacity)) {}

    bool try_push(const T& value) {
        const std::size_t head = idx_.head.load(std::memory_order_relaxed);
        const std::size_t next = advance(head);
        if (next == idx_.tail.load(Order::load)) {
            return false;  // full
        }
        slots_[head] = value;
        idx_.head.store(next, Order::store);
        return true;
    }

    bool try_pop(T& out) {
        const std::size_t tail = idx_.tail.load(std::memory_order_relaxed);
        if (tail == idx_.head.load(Order::load)) {
            return false;  // empty
        }
        out = slots_[tail];
        idx_.tail.store(advance(tail), Order::store);
        return true;
    }

    std::size_t capacity() const { return slots_.size() - 1; }

private:
    std::size_t advance(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }

    Indices idx_;
    std::vector<T> slots_;
};

}  // namespace detail

/// Mutex around every operation (the seed's lock-based ring).
template <typename T>
class LockedRing {
public:
    explicit LockedRing(std::size_t capacity) : slots_(detail::slots_for(capacity)) {}

    bool try_push(const T& value) {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::size_t next = advance(head_);
        if (next == tail_) {
            return false;
        }
        slots_[head_] = value;
        head_ = next;
        return true;
    }

    bool try_pop(T& out) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (tail_ == head_) {
            return false;
        }
        out = slots_[tail_];
        tail_ = advance(tail_);
        return true;
    }

    std::size_t capacity() const { return slots_.size() - 1; }

private:
    std::size_t advance(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }

    std::mutex mutex_;
    std::size_t head_ = 0;
    std::size_t tail_ = 0;
    std::vector<T> slots_;
};

/// Lock-free, sequentially consistent atomics, indices side by side (the seed's first lock-free ring).
template <typename T>
using SeqCstRing = detail::AtomicRing<T, detail::SeqCst, detail::AdjacentIndices>;

/// Lock-free, acquire loads and release stores, each index on its own cache line (the seed's
/// "fine-grained" lock-free ring).
template <typename T>
using AcqRelRing = detail::AtomicRing<T, detail::AcquireRelease, detail::SeparateIndices>;

/// Moves the values 0 .. count-1 through RING: a producer thread pushes them in order while the
/// calling thread pops COUNT values and hands each to SINK. Both sides yield when the ring is full
/// or empty, so the transfer also finishes on one core and under slow tools (valgrind, memdump).
template <typename Ring, typename Sink>
void spsc_transfer(Ring& ring, std::uint64_t count, Sink&& sink) {
    std::thread producer([&ring, count] {
        for (std::uint64_t i = 0; i < count; ++i) {
            while (!ring.try_push(i)) {
                std::this_thread::yield();
            }
        }
    });
    std::uint64_t value = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        while (!ring.try_pop(value)) {
            std::this_thread::yield();
        }
        sink(value);
    }
    producer.join();
}

}  // namespace dbgkit::targets

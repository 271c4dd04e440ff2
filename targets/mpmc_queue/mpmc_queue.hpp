// @brief Unbounded MPMC queues with a blocking pop: coarse-grained (one mutex) and fine-grained (two-lock linked list).
//
// Both have the same interface:
//   void push(T)                 never blocks for long; throws std::logic_error after close()
//   std::optional<T> pop()       blocks until an item is there, or returns nullopt once the queue
//                                is closed and drained
//   void close()                 wakes every waiting pop(); items already pushed are still popped
// The destructor frees every item and node left.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace dbgkit::targets {

/// One mutex around a std::queue and a condition variable for pop (the seed's coarse-grained queue).
template <typename T>
class CoarseQueue {
public:
    CoarseQueue() = default;
    CoarseQueue(const CoarseQueue&) = delete;
    CoarseQueue& operator=(const CoarseQueue&) = delete;

    void push(T value) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (closed_) {
                throw std::logic_error("push on a closed queue");
            }
            items_.push(std::move(value));
        }
        ready_.notify_one();
    }

    std::optional<T> pop() {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !items_.empty() || closed_; });
        if (items_.empty()) {
            return std::nullopt;  // closed and drained
        }
        std::optional<T> value(std::move(items_.front()));
        items_.pop();
        return value;
    }

    void close() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            closed_ = true;
        }
        ready_.notify_all();
    }

private:
    std::mutex mutex_;
    std::condition_variable ready_;
    std::queue<T> items_;
    bool closed_ = false;
};

/// The two-lock queue of Michael and Scott ("Simple, Fast, and Practical Non-Blocking and Blocking
/// Concurrent Queue Algorithms", PODC 1996): a singly linked list that starts with a dummy node;
/// push takes only the tail lock and pop only the head lock, so a writer and a reader never wait
/// for each other (the seed's fine-grained queue).
///
/// Two details the paper leaves to the reader:
///  - When the list holds one item, push writes `tail->next` while pop reads `head->next` of the
///    same node under different locks, so `next` is atomic (the paper assumes a sequentially
///    consistent machine).
///  - The blocking pop waits on a condition variable guarded by the head lock. A push must not
///    take the head lock every time (that would make it coarse again), so it takes it only when a
///    reader has announced itself in `waiters_`. Announcing (fetch_add) and the re-check of
///    `head->next` in pop, and the store of `next` and the load of `waiters_` in push, are all
///    seq_cst: in the single total order either the reader sees the new node or the writer sees
///    the waiter, and then the writer's lock/unlock of the head lock cannot fall between the
///    reader's check and its wait, so no wake-up is lost.
template <typename T>
class FineQueue {
public:
    FineQueue() : head_(new Node), tail_(head_) {}
    FineQueue(const FineQueue&) = delete;
    FineQueue& operator=(const FineQueue&) = delete;

    ~FineQueue() {
        Node* node = head_;
        while (node != nullptr) {
            Node* next = node->next.load(std::memory_order_relaxed);
            delete node;
            node = next;
        }
    }

    void push(T value) {
        if (closed_.load(std::memory_order_acquire)) {
            throw std::logic_error("push on a closed queue");
        }
        Node* node = new Node;
        node->value.emplace(std::move(value));
        {
            std::lock_guard<std::mutex> lock(tail_mutex_);
            tail_->next.store(node, std::memory_order_seq_cst);  // publishes node->value
            tail_ = node;
        }
        wake(false);
    }

    std::optional<T> pop() {
        std::unique_lock<std::mutex> lock(head_mutex_);
        for (;;) {
            Node* first = head_->next.load(std::memory_order_seq_cst);
            if (first != nullptr) {
                Node* old_dummy = head_;
                std::optional<T> value(std::move(first->value));
                first->value.reset();  // first becomes the new dummy
                head_ = first;
                lock.unlock();
                delete old_dummy;
                return value;
            }
            if (closed_.load(std::memory_order_seq_cst)) {
                return std::nullopt;
            }
            waiters_.fetch_add(1, std::memory_order_seq_cst);
            if (head_->next.load(std::memory_order_seq_cst) == nullptr &&
                !closed_.load(std::memory_order_seq_cst)) {
                ready_.wait(lock);
            }
            waiters_.fetch_sub(1, std::memory_order_seq_cst);
        }
    }

    void close() {
        closed_.store(true, std::memory_order_seq_cst);
        wake(true);
    }

private:
    struct Node {
        std::optional<T> value;  // empty in the dummy
        std::atomic<Node*> next{nullptr};
    };

    void wake(bool all) {
        if (all || waiters_.load(std::memory_order_seq_cst) > 0) {
            // Taking the head lock orders this wake-up after the waiter's check (see above).
            { std::lock_guard<std::mutex> lock(head_mutex_); }
            if (all) {
                ready_.notify_all();
            } else {
                ready_.notify_one();
            }
        }
    }

    std::mutex head_mutex_;
    Node* head_;  // the dummy; guarded by head_mutex_
    std::condition_variable ready_;
    std::atomic<int> waiters_{0};
    std::atomic<bool> closed_{false};
    std::mutex tail_mutex_;
    Node* tail_;  // guarded by tail_mutex_
};

/// The seed's benchmark: WRITERS threads each push ITEMS values (writer w pushes
/// w * ITEMS .. w * ITEMS + ITEMS - 1) while READERS threads pop until the queue is closed and
/// drained, calling ON_ITEM(reader_index, value) for each. The queue is closed once every writer
/// has finished, so all readers return. ON_ITEM runs concurrently for different readers.
template <typename Queue, typename OnItem>
void mpmc_transfer(Queue& queue, unsigned writers, unsigned readers, std::uint64_t items,
                   OnItem&& on_item) {
    std::vector<std::thread> reader_threads;
    reader_threads.reserve(readers);
    for (unsigned r = 0; r < readers; ++r) {
        reader_threads.emplace_back([&queue, &on_item, r] {
            while (std::optional<std::uint64_t> value = queue.pop()) {
                on_item(r, *value);
            }
        });
    }
    std::vector<std::thread> writer_threads;
    writer_threads.reserve(writers);
    for (unsigned w = 0; w < writers; ++w) {
        writer_threads.emplace_back([&queue, w, items] {
            for (std::uint64_t i = 0; i < items; ++i) {
                queue.push(std::uint64_t{w} * items + i);
            }
        });
    }
    for (std::thread& t : writer_threads) {
        t.join();
    }
    queue.close();
    for (std::thread& t : reader_threads) {
        t.join();
    }
}

}  // namespace dbgkit::targets

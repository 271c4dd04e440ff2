// @brief Reader-writer locks from the seed's slides (RW 1.0-1.4, mutexes + semaphores) beside pthread_rwlock_t and std::shared_mutex.
//
// Every lock has the same interface: lock_shared() / unlock_shared() for readers, lock() / unlock()
// for writers. The slides' Windows semaphores become POSIX sem_t (detail::Semaphore), their kernel
// mutexes std::mutex. Semaphores are needed where the slides release from another thread than the
// one that waited (the last reader releases semaW that the first reader took).
//
// RwFlawed14 is the slides' RW 1.4, which they leave as "find a problem at home": it deadlocks.
// It is kept only to be driven into that deadlock (rw_locks_bench --variant 1.4-flawed, and the
// tests); it takes optional hooks so a caller can force the interleaving deterministically.
#pragma once

#include <pthread.h>
#include <semaphore.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace dbgkit::targets {

namespace detail {

/// A counting semaphore on POSIX sem_t (std::counting_semaphore is C++20).
class Semaphore {
public:
    explicit Semaphore(unsigned initial) {
        if (sem_init(&sem_, 0, initial) != 0) {
            throw std::system_error(errno, std::generic_category(), "sem_init");
        }
    }
    ~Semaphore() { sem_destroy(&sem_); }
    Semaphore(const Semaphore&) = delete;
    Semaphore& operator=(const Semaphore&) = delete;

    void wait() {
        while (sem_wait(&sem_) != 0 && errno == EINTR) {
        }
    }
    void release() { sem_post(&sem_); }

private:
    sem_t sem_;
};

}  // namespace detail

/// RW 1.0: reader priority. The first reader takes semaW, the last gives it back; a steady stream
/// of readers keeps readerCount above zero and starves writers.
class Rw10ReaderPriority {
public:
    void lock_shared() {
        std::lock_guard<std::mutex> g(mutex_rcount_);
        if (reader_count_ == 0) {
            sema_w_.wait();  // first reader blocks writers
        }
        ++reader_count_;
    }
    void unlock_shared() {
        std::lock_guard<std::mutex> g(mutex_rcount_);
        if (--reader_count_ == 0) {
            sema_w_.release();  // last reader unblocks writers
        }
    }
    void lock() { sema_w_.wait(); }
    void unlock() { sema_w_.release(); }

private:
    std::mutex mutex_rcount_;
    detail::Semaphore sema_w_{1};
    long reader_count_ = 0;
};

/// RW 1.1: readers and writers queue on semaWriterPending; the order is whatever the OS gives.
class Rw11OsOrdered {
public:
    void lock_shared() {
        sema_writer_pending_.wait();
        sema_writer_pending_.release();
        std::lock_guard<std::mutex> g(mutex_rcount_);
        if (reader_count_ == 0) {
            sema_w_.wait();
        }
        ++reader_count_;
    }
    void unlock_shared() {
        std::lock_guard<std::mutex> g(mutex_rcount_);
        if (--reader_count_ == 0) {
            sema_w_.release();
        }
    }
    void lock() {
        sema_writer_pending_.wait();
        sema_w_.wait();
    }
    void unlock() {
        sema_w_.release();
        sema_writer_pending_.release();
    }

private:
    std::mutex mutex_rcount_;
    detail::Semaphore sema_w_{1};
    detail::Semaphore sema_writer_pending_{1};
    long reader_count_ = 0;
};

/// RW 1.2: writer priority. The first pending writer closes semaWriterPending to new readers,
/// the last writer reopens it; the first writer still competes with readers for it.
class Rw12WriterPriority {
public:
    void lock_shared() {
        sema_writer_pending_.wait();
        sema_writer_pending_.release();
        std::lock_guard<std::mutex> g(mutex_rcount_);
        if (reader_count_++ == 0) {
            sema_w_.wait();
        }
    }
    void unlock_shared() {
        std::lock_guard<std::mutex> g(mutex_rcount_);
        if (--reader_count_ == 0) {
            sema_w_.release();
        }
    }
    void lock() {
        {
            std::lock_guard<std::mutex> g(mutex_wcount_);
            if (writer_count_++ == 0) {
                sema_writer_pending_.wait();
            }
        }
        sema_w_.wait();
    }
    void unlock() {
        sema_w_.release();
        std::lock_guard<std::mutex> g(mutex_wcount_);
        if (--writer_count_ == 0) {
            sema_writer_pending_.release();
        }
    }

private:
    std::mutex mutex_rcount_;
    std::mutex mutex_wcount_;
    detail::Semaphore sema_w_{1};
    detail::Semaphore sema_writer_pending_{1};
    long reader_count_ = 0;
    long writer_count_ = 0;
};

/// RW 1.3: the textbook solution. mutexDontCompete lets at most one reader wait on
/// semaWriterPending, so the first writer never competes with a crowd of readers.
class Rw13Textbook {
public:
    void lock_shared() {
        std::lock_guard<std::mutex> dont_compete(mutex_dont_compete_);
        sema_writer_pending_.wait();
        {
            std::lock_guard<std::mutex> g(mutex_rcount_);
            if (reader_count_++ == 0) {
                sema_w_.wait();
            }
        }
        sema_writer_pending_.release();  // a pending writer gets unblocked here
    }
    void unlock_shared() {
        std::lock_guard<std::mutex> g(mutex_rcount_);
        if (--reader_count_ == 0) {
            sema_w_.release();
        }
    }
    void lock() {
        {
            std::lock_guard<std::mutex> g(mutex_wcount_);
            if (writer_count_++ == 0) {
                sema_writer_pending_.wait();
            }
        }
        sema_w_.wait();
    }
    void unlock() {
        sema_w_.release();
        std::lock_guard<std::mutex> g(mutex_wcount_);
        if (--writer_count_ == 0) {
            sema_writer_pending_.release();
        }
    }

private:
    std::mutex mutex_dont_compete_;
    std::mutex mutex_rcount_;
    std::mutex mutex_wcount_;
    detail::Semaphore sema_w_{1};
    detail::Semaphore sema_writer_pending_{1};
    long reader_count_ = 0;
    long writer_count_ = 0;
};

/// RW 1.4, FLAWED ON PURPOSE (the slides' "find a problem at home"): a reader holds mutexRcount
/// while it waits on semaWriterPending. Deadlock: reader A reads (readers hold semaW); writer W
/// takes semaWriterPending and waits for semaW; reader B takes mutexRcount and waits for
/// semaWriterPending; A, done reading, waits for mutexRcount to unlock semaW. A -> B -> W -> A.
class RwFlawed14 {
public:
    /// Points where a hook is called, to force the interleaving above.
    enum class Point {
        reader_holds_rcount,      // lock_shared(): mutexRcount held, about to wait on semaWriterPending
        reader_unlock_begins,     // unlock_shared(): about to lock mutexRcount
        writer_holds_pending,     // lock(): semaWriterPending taken, about to wait on semaW
    };
    using Hook = void (*)(Point, void* context);

    /// Installs a hook (nullptr: none). Not thread-safe: call before the lock is shared.
    void set_hook(Hook hook, void* context) {
        hook_ = hook;
        hook_context_ = context;
    }

    void lock_shared() {
        mutex_rcount_.lock();
        call(Point::reader_holds_rcount);
        sema_writer_pending_.wait();
        if (reader_count_++ == 0) {
            sema_w_.wait();  // first reader blocks writers
        }
        sema_writer_pending_.release();
        mutex_rcount_.unlock();
    }
    void unlock_shared() {
        call(Point::reader_unlock_begins);
        std::lock_guard<std::mutex> g(mutex_rcount_);
        if (--reader_count_ == 0) {
            sema_w_.release();
        }
    }
    void lock() {
        {
            std::lock_guard<std::mutex> g(mutex_wcount_);
            if (writer_count_++ == 0) {
                sema_writer_pending_.wait();
            }
        }
        call(Point::writer_holds_pending);
        sema_w_.wait();
    }
    void unlock() {
        sema_w_.release();
        std::lock_guard<std::mutex> g(mutex_wcount_);
        if (--writer_count_ == 0) {
            sema_writer_pending_.release();
        }
    }

private:
    void call(Point p) {
        if (hook_ != nullptr) {
            hook_(p, hook_context_);
        }
    }

    std::mutex mutex_rcount_;
    std::mutex mutex_wcount_;
    detail::Semaphore sema_w_{1};
    detail::Semaphore sema_writer_pending_{1};
    long reader_count_ = 0;
    long writer_count_ = 0;
    Hook hook_ = nullptr;
    void* hook_context_ = nullptr;
};

/// pthread_rwlock_t with the default (glibc: reader-preferring) attributes.
class PthreadRwLock {
public:
    PthreadRwLock() { pthread_rwlock_init(&lock_, nullptr); }
    ~PthreadRwLock() { pthread_rwlock_destroy(&lock_); }
    PthreadRwLock(const PthreadRwLock&) = delete;
    PthreadRwLock& operator=(const PthreadRwLock&) = delete;
    void lock_shared() { pthread_rwlock_rdlock(&lock_); }
    void unlock_shared() { pthread_rwlock_unlock(&lock_); }
    void lock() { pthread_rwlock_wrlock(&lock_); }
    void unlock() { pthread_rwlock_unlock(&lock_); }

private:
    pthread_rwlock_t lock_;
};

/// std::shared_mutex (libstdc++ wraps pthread_rwlock_t).
class StdSharedMutex {
public:
    void lock_shared() { m_.lock_shared(); }
    void unlock_shared() { m_.unlock_shared(); }
    void lock() { m_.lock(); }
    void unlock() { m_.unlock(); }

private:
    std::shared_mutex m_;
};

/// What a reader-writer workload did.
struct RwWorkloadResult {
    std::uint64_t reads = 0;
    std::uint64_t writes = 0;
    double writer_wait_max_ms = 0;  // longest time one writer waited in lock()
    double writer_wait_avg_ms = 0;
    std::uint64_t violations = 0;   // a writer was in with a reader or another writer
    bool data_consistent = true;    // every read saw all slots equal (no torn write)
};

/// Workload parameters: readers read continuously (no pause between reads, the "infinite stream
/// of readers" of the slides), writers write continuously, for `duration`.
struct RwWorkload {
    unsigned readers = 8;
    unsigned writers = 2;
    std::chrono::milliseconds duration{1000};
    unsigned work = 8;  // passes over the 64 shared slots per read or write
};

/// Runs the workload on `lock`. An atomic occupancy word checks mutual exclusion inside every
/// critical section; the shared slots are plain data, so a sanitizer sees any missing exclusion.
template <typename Lock>
RwWorkloadResult run_rw_workload(Lock& lock, const RwWorkload& w) {
    constexpr std::uint32_t kWriter = 1u << 16;
    std::atomic<std::uint32_t> occupancy{0};
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> violations{0};
    std::atomic<bool> consistent{true};
    std::vector<long> slots(64, 0);
    std::vector<std::uint64_t> reads(w.readers, 0);
    std::vector<std::uint64_t> writes(w.writers, 0);
    std::vector<double> wait_max(w.writers, 0), wait_sum(w.writers, 0);

    std::vector<std::thread> threads;
    threads.reserve(w.readers + w.writers);
    for (unsigned r = 0; r < w.readers; ++r) {
        threads.emplace_back([&, r] {
            while (!stop.load(std::memory_order_relaxed)) {
                lock.lock_shared();
                if (occupancy.fetch_add(1) >= kWriter) {
                    violations.fetch_add(1);
                }
                for (unsigned pass = 0; pass < w.work; ++pass) {
                    const long first = slots[0];
                    for (long v : slots) {
                        if (v != first) {
                            consistent.store(false);
                        }
                    }
                }
                occupancy.fetch_sub(1);
                lock.unlock_shared();
                ++reads[r];
            }
        });
    }
    for (unsigned wr = 0; wr < w.writers; ++wr) {
        threads.emplace_back([&, wr] {
            while (!stop.load(std::memory_order_relaxed)) {
                const auto t0 = std::chrono::steady_clock::now();
                lock.lock();
                const std::chrono::duration<double, std::milli> waited =
                    std::chrono::steady_clock::now() - t0;
                if (occupancy.fetch_add(kWriter) != 0) {
                    violations.fetch_add(1);
                }
                for (unsigned pass = 0; pass < w.work; ++pass) {
                    for (long& v : slots) {
                        ++v;
                    }
                }
                occupancy.fetch_sub(kWriter);
                lock.unlock();
                ++writes[wr];
                wait_max[wr] = std::max(wait_max[wr], waited.count());
                wait_sum[wr] += waited.count();
            }
        });
    }
    std::this_thread::sleep_for(w.duration);
    stop.store(true);
    for (std::thread& t : threads) {
        t.join();
    }

    RwWorkloadResult result;
    double sum = 0;
    for (std::uint64_t n : reads) result.reads += n;
    for (unsigned wr = 0; wr < w.writers; ++wr) {
        result.writes += writes[wr];
        result.writer_wait_max_ms = std::max(result.writer_wait_max_ms, wait_max[wr]);
        sum += wait_sum[wr];
    }
    result.writer_wait_avg_ms = result.writes > 0 ? sum / static_cast<double>(result.writes) : 0;
    result.violations = violations.load();
    result.data_consistent = consistent.load();
    return result;
}

}  // namespace dbgkit::targets

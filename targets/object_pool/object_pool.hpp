// @brief Object pools of fixed-size blocks: new/delete, mutex + free list, lock-free segment chain and segment trees.
//
// Every pool has the same interface:
//   void* acquire()              a block of item_bytes() bytes, aligned to 16; throws std::bad_alloc
//   void release(void*) noexcept gives a block back to the pool it came from
//   std::size_t blocks_owned()   blocks the pool holds (free or handed out); for NewDeletePool the
//                                blocks alive
//   std::size_t blocks_out()     blocks handed out and not yet released; exact only when no thread
//                                is acquiring or releasing
// The destructor frees every block and node; blocks still handed out become invalid.
//
// Lock-free pools (SegmentLinearPool, SegmentTreePool): a segment is 64 blocks plus one 64-bit
// atomic bitmap, bit i set = block i free. acquire claims a block with a compare-exchange that
// clears one set bit; release sets the bit again with fetch_or. There is no ABA problem: the
// bitmap is the whole state of a segment (no "next" pointer is read from a free block, as a
// Treiber stack would), so a compare-exchange that succeeds after the bitmap went A -> B -> A
// still clears a bit that is free at that moment, and every block is owned by exactly one side
// of a successful transition. Segments (nodes) are never freed before the pool is, so a thread
// walking the chain or tree never reads a freed node; a new node is published by a
// compare-exchange of a null pointer (the loser deletes its node). release is fetch_or with
// release order and the claiming compare-exchange has acquire order, so the releaser's writes to
// the block happen before the next owner's.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <vector>

// The pools report the blocks they hand out to memdump (no-ops without it): a leaked block is
// reported at its acquire, and a segment or a MutexPool's block is not reported twice.
#include <memdump_api.h>

namespace dbgkit::targets {

namespace detail {

constexpr std::size_t kBlockAlign = 16;

inline std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

/// 64 blocks of one size in one allocation, each preceded by a header naming its segment.
class Segment {
public:
    static constexpr unsigned kBlocks = 64;

    explicit Segment(std::size_t item_bytes)
        : stride_(kBlockAlign + round_up(item_bytes, kBlockAlign)),
          storage_(static_cast<unsigned char*>(
              ::operator new(stride_ * kBlocks, std::align_val_t{kBlockAlign}))) {
        for (unsigned i = 0; i < kBlocks; ++i) {
            ::new (storage_ + i * stride_) Segment*(this);
        }
    }
    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;
    ~Segment() {
        // Blocks still handed out die with the segment: memdump is told (a pool's destruction
        // frees them, it does not leak them).
        const std::uint64_t bits = free_.load(std::memory_order_acquire);
        for (unsigned i = 0; i < kBlocks; ++i) {
            if ((bits & (std::uint64_t{1} << i)) == 0) {
                MEMDUMP_FREE(storage_ + i * stride_ + kBlockAlign);
            }
        }
        ::operator delete(storage_, std::align_val_t{kBlockAlign});
    }

    /// A free block of this segment, or nullptr if all 64 are handed out.
    void* try_acquire() noexcept {
        std::uint64_t bits = free_.load(std::memory_order_relaxed);
        while (bits != 0) {
            const std::uint64_t lowest = bits & (~bits + 1);
            if (free_.compare_exchange_weak(bits, bits & ~lowest, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
                void* block = storage_ + index_of(lowest) * stride_ + kBlockAlign;
                MEMDUMP_ALLOC(block, stride_ - kBlockAlign);
                return block;
            }
        }
        return nullptr;
    }

    bool has_free() const noexcept { return free_.load(std::memory_order_relaxed) != 0; }

    unsigned blocks_out() const noexcept {
        return kBlocks - static_cast<unsigned>(
                             __builtin_popcountll(free_.load(std::memory_order_acquire)));
    }

    /// The segment that handed out `block`.
    static Segment* owner(void* block) noexcept {
        return *std::launder(
            reinterpret_cast<Segment**>(static_cast<unsigned char*>(block) - kBlockAlign));
    }

    void release(void* block) noexcept {
        const auto offset = static_cast<std::size_t>(static_cast<unsigned char*>(block) -
                                                     kBlockAlign - storage_);
        MEMDUMP_FREE(block);  // before the bit is set: then another thread may acquire it
        free_.fetch_or(std::uint64_t{1} << (offset / stride_), std::memory_order_release);
    }

private:
    static unsigned index_of(std::uint64_t single_bit) noexcept {
        return static_cast<unsigned>(__builtin_ctzll(single_bit));
    }

    std::size_t stride_;
    unsigned char* storage_;
    std::atomic<std::uint64_t> free_{~std::uint64_t{0}};
};

}  // namespace detail

/// No pool: acquire is operator new, release is operator delete (the seed's "none").
class NewDeletePool {
public:
    explicit NewDeletePool(std::size_t item_bytes) : item_bytes_(item_bytes) {}
    std::size_t item_bytes() const noexcept { return item_bytes_; }

    void* acquire() {
        void* block = ::operator new(item_bytes_, std::align_val_t{detail::kBlockAlign});
        live_.fetch_add(1, std::memory_order_relaxed);
        return block;
    }
    void release(void* block) noexcept {
        live_.fetch_sub(1, std::memory_order_relaxed);
        ::operator delete(block, std::align_val_t{detail::kBlockAlign});
    }
    std::size_t blocks_owned() const noexcept { return live_.load(std::memory_order_relaxed); }
    std::size_t blocks_out() const noexcept { return blocks_owned(); }

private:
    std::size_t item_bytes_;
    std::atomic<std::size_t> live_{0};
};

/// A free list (vector of blocks) under one mutex; grows with operator new when empty.
class MutexPool {
public:
    explicit MutexPool(std::size_t item_bytes) : item_bytes_(item_bytes) {}
    MutexPool(const MutexPool&) = delete;
    MutexPool& operator=(const MutexPool&) = delete;
    ~MutexPool() {
        // Blocks still handed out (in all_, not in free_) die with the pool: memdump is told.
        std::sort(all_.begin(), all_.end());
        std::sort(free_.begin(), free_.end());
        auto free_it = free_.begin();
        for (void* block : all_) {
            while (free_it != free_.end() && std::less<void*>()(*free_it, block)) {
                ++free_it;
            }
            if (free_it == free_.end() || *free_it != block) {
                MEMDUMP_FREE(block);
            }
            ::operator delete(block, std::align_val_t{detail::kBlockAlign});
        }
    }
    std::size_t item_bytes() const noexcept { return item_bytes_; }

    void* acquire() {
        void* block = take();
        MEMDUMP_ALLOC(block, item_bytes_);
        return block;
    }
    void release(void* block) noexcept {
        MEMDUMP_FREE(block);  // before the block is back on the list
        std::lock_guard<std::mutex> lock(mutex_);
        free_.push_back(block);
    }
    std::size_t blocks_owned() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return all_.size();
    }
    std::size_t blocks_out() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return all_.size() - free_.size();
    }

private:
    void* take() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!free_.empty()) {
            void* block = free_.back();
            free_.pop_back();
            return block;
        }
        all_.reserve(all_.size() + 1);
        free_.reserve(all_.size() + 1);  // so release never allocates
        void* block = ::operator new(item_bytes_, std::align_val_t{detail::kBlockAlign});
        all_.push_back(block);
        return block;
    }

    std::size_t item_bytes_;
    mutable std::mutex mutex_;
    std::vector<void*> free_;
    std::vector<void*> all_;
};

/// A singly linked chain of segments: acquire tries each segment from the first and appends a
/// new one at the end when all are full (the seed's "segment linear"). Lock-free.
class SegmentLinearPool {
public:
    explicit SegmentLinearPool(std::size_t item_bytes) : item_bytes_(item_bytes), root_(item_bytes) {}
    SegmentLinearPool(const SegmentLinearPool&) = delete;
    SegmentLinearPool& operator=(const SegmentLinearPool&) = delete;
    ~SegmentLinearPool() {
        Node* node = root_.next.load(std::memory_order_acquire);
        while (node != nullptr) {
            Node* next = node->next.load(std::memory_order_relaxed);
            delete node;
            node = next;
        }
    }
    std::size_t item_bytes() const noexcept { return item_bytes_; }

    void* acquire() {
        Node* node = &root_;
        for (;;) {
            if (void* block = node->segment.try_acquire()) {
                return block;
            }
            Node* next = node->next.load(std::memory_order_acquire);
            if (next == nullptr) {
                Node* fresh = new Node(item_bytes_);
                if (node->next.compare_exchange_strong(next, fresh, std::memory_order_acq_rel,
                                                       std::memory_order_acquire)) {
                    segments_.fetch_add(1, std::memory_order_relaxed);
                    next = fresh;
                } else {
                    delete fresh;  // another thread appended first; `next` is its node
                }
            }
            node = next;
        }
    }
    void release(void* block) noexcept { detail::Segment::owner(block)->release(block); }

    std::size_t blocks_owned() const noexcept {
        return segments_.load(std::memory_order_relaxed) * detail::Segment::kBlocks;
    }
    std::size_t blocks_out() const noexcept {
        std::size_t out = 0;
        for (const Node* n = &root_; n != nullptr; n = n->next.load(std::memory_order_acquire)) {
            out += n->segment.blocks_out();
        }
        return out;
    }

private:
    struct Node {
        explicit Node(std::size_t item_bytes) : segment(item_bytes) {}
        detail::Segment segment;
        std::atomic<Node*> next{nullptr};
    };

    std::size_t item_bytes_;
    Node root_;
    std::atomic<std::size_t> segments_{1};
};

/// How SegmentTreePool picks the child to descend into when a node's segment is full.
enum class TreeChoice {
    round_robin,  ///< the seed's "old": the next child in turn, created if missing
    best_child,   ///< the seed's "v2": a child with a free block, else a missing child, else the
                  ///< child with the fewest children
};

/// A tree of segments, 64 children per node (the seed's "segment tree"). Lock-free.
class SegmentTreePool {
public:
    static constexpr unsigned kChildren = 64;

    SegmentTreePool(std::size_t item_bytes, TreeChoice choice)
        : item_bytes_(item_bytes), choice_(choice), root_(item_bytes) {}
    SegmentTreePool(const SegmentTreePool&) = delete;
    SegmentTreePool& operator=(const SegmentTreePool&) = delete;
    ~SegmentTreePool() { free_children(root_); }
    std::size_t item_bytes() const noexcept { return item_bytes_; }

    void* acquire() {
        Node* node = &root_;
        for (;;) {
            if (void* block = node->segment.try_acquire()) {
                return block;
            }
            node = choice_ == TreeChoice::round_robin ? round_robin(*node) : best_child(*node);
        }
    }
    void release(void* block) noexcept { detail::Segment::owner(block)->release(block); }

    std::size_t blocks_owned() const noexcept {
        return segments_.load(std::memory_order_relaxed) * detail::Segment::kBlocks;
    }
    std::size_t blocks_out() const noexcept { return count_out(root_); }

private:
    struct Node {
        explicit Node(std::size_t item_bytes) : segment(item_bytes) {}
        detail::Segment segment;
        std::atomic<Node*> children[kChildren] = {};
        std::atomic<unsigned> child_count{0};
        std::atomic<unsigned> next_child{0};
    };

    /// The child in slot `i` of `parent`, created (and published) if missing.
    Node* child(Node& parent, unsigned i) {
        Node* existing = parent.children[i].load(std::memory_order_acquire);
        if (existing != nullptr) {
            return existing;
        }
        Node* fresh = new Node(item_bytes_);
        if (parent.children[i].compare_exchange_strong(existing, fresh, std::memory_order_acq_rel,
                                                       std::memory_order_acquire)) {
            segments_.fetch_add(1, std::memory_order_relaxed);
            parent.child_count.fetch_add(1, std::memory_order_relaxed);
            return fresh;
        }
        delete fresh;  // another thread created it first
        return existing;
    }

    Node* round_robin(Node& node) {
        return child(node, node.next_child.fetch_add(1, std::memory_order_relaxed) % kChildren);
    }

    Node* best_child(Node& node) {
        int missing = -1;
        Node* fewest = nullptr;
        unsigned fewest_count = 0;
        for (unsigned i = 0; i < kChildren; ++i) {
            Node* c = node.children[i].load(std::memory_order_acquire);
            if (c == nullptr) {
                if (missing < 0) {
                    missing = static_cast<int>(i);
                }
                continue;
            }
            if (c->segment.has_free()) {
                return c;
            }
            const unsigned count = c->child_count.load(std::memory_order_relaxed);
            if (fewest == nullptr || count < fewest_count) {
                fewest = c;
                fewest_count = count;
            }
        }
        if (missing >= 0) {
            return child(node, static_cast<unsigned>(missing));
        }
        return fewest;
    }

    static void free_children(Node& node) {
        for (auto& slot : node.children) {
            if (Node* c = slot.load(std::memory_order_acquire)) {
                free_children(*c);
                delete c;
            }
        }
    }

    static std::size_t count_out(const Node& node) {
        std::size_t out = node.segment.blocks_out();
        for (const auto& slot : node.children) {
            if (const Node* c = slot.load(std::memory_order_acquire)) {
                out += count_out(*c);
            }
        }
        return out;
    }

    std::size_t item_bytes_;
    TreeChoice choice_;
    Node root_;
    std::atomic<std::size_t> segments_{1};
};

}  // namespace dbgkit::targets

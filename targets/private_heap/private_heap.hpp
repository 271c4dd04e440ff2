// @brief Private heaps for one thread: a free-list heap of fixed-size blocks and an arena freed all at once.
//
// Neither type locks anything: each object belongs to one thread at a time (the seed's
// HeapCreate(HEAP_NO_SERIALIZE, ...)). Both take their memory in chunks from operator new and
// give every chunk back in the destructor; detail::live_chunks() counts the chunks alive in the
// process, so a test can see that destruction frees everything.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace dbgkit::targets {

namespace detail {

constexpr std::size_t kHeapAlign = alignof(std::max_align_t);

inline std::size_t heap_round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

/// Chunks alive in the process, across every heap and arena.
inline std::atomic<std::int64_t>& live_chunk_counter() {
    static std::atomic<std::int64_t> counter{0};
    return counter;
}

inline std::int64_t live_chunks() { return live_chunk_counter().load(std::memory_order_relaxed); }

/// The chunks of one heap or arena: allocated one by one, freed together.
class ChunkList {
public:
    ChunkList() = default;
    ChunkList(const ChunkList&) = delete;
    ChunkList& operator=(const ChunkList&) = delete;
    ~ChunkList() {
        for (void* chunk : chunks_) {
            ::operator delete(chunk, std::align_val_t{kHeapAlign});
        }
        live_chunk_counter().fetch_sub(static_cast<std::int64_t>(chunks_.size()),
                                       std::memory_order_relaxed);
    }

    unsigned char* add(std::size_t bytes) {
        chunks_.reserve(chunks_.size() + 1);  // so push_back cannot throw after the allocation
        void* chunk = ::operator new(bytes, std::align_val_t{kHeapAlign});
        chunks_.push_back(chunk);
        live_chunk_counter().fetch_add(1, std::memory_order_relaxed);
        return static_cast<unsigned char*>(chunk);
    }

    std::size_t size() const noexcept { return chunks_.size(); }

private:
    std::vector<void*> chunks_;
};

}  // namespace detail

/// Blocks of one size: allocate pops the free list, else carves the current chunk, else takes a
/// new chunk; deallocate pushes the block on the free list (its first bytes hold the link).
class FreeListHeap {
public:
    explicit FreeListHeap(std::size_t block_bytes, std::size_t blocks_per_chunk = 4096)
        : stride_(detail::heap_round_up(block_bytes < sizeof(Link) ? sizeof(Link) : block_bytes,
                                        detail::kHeapAlign)),
          chunk_bytes_(stride_ * (blocks_per_chunk == 0 ? 1 : blocks_per_chunk)) {}

    void* allocate() {
        if (free_ != nullptr) {
            Link* block = free_;
            free_ = block->next;
            return block;
        }
        if (next_ == end_) {
            next_ = chunks_.add(chunk_bytes_);
            end_ = next_ + chunk_bytes_;
        }
        void* block = next_;
        next_ += stride_;
        return block;
    }

    /// `block` must come from this heap's allocate() and not be freed already.
    void deallocate(void* block) noexcept { free_ = ::new (block) Link{free_}; }

    std::size_t chunks() const noexcept { return chunks_.size(); }

private:
    struct Link {
        Link* next;
    };

    std::size_t stride_;
    std::size_t chunk_bytes_;
    detail::ChunkList chunks_;
    Link* free_ = nullptr;
    unsigned char* next_ = nullptr;
    unsigned char* end_ = nullptr;
};

/// Bump allocation from chunks, no individual free: the destructor frees every chunk at once
/// (the seed's HeapDestroy without HeapFree).
class Arena {
public:
    explicit Arena(std::size_t chunk_bytes = 64 * 1024) : chunk_bytes_(chunk_bytes) {}

    void* allocate(std::size_t bytes) {
        const std::size_t size = detail::heap_round_up(bytes == 0 ? 1 : bytes, detail::kHeapAlign);
        if (static_cast<std::size_t>(end_ - next_) < size) {
            const std::size_t chunk = size > chunk_bytes_ ? size : chunk_bytes_;
            next_ = chunks_.add(chunk);
            end_ = next_ + chunk;
        }
        void* block = next_;
        next_ += size;
        return block;
    }

    std::size_t chunks() const noexcept { return chunks_.size(); }

private:
    std::size_t chunk_bytes_;
    detail::ChunkList chunks_;
    unsigned char* next_ = nullptr;
    unsigned char* end_ = nullptr;
};

}  // namespace dbgkit::targets

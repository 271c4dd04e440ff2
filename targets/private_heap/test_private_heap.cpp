// @brief Tests of the private heaps: distinct writable blocks, reuse of freed blocks, every chunk freed at destruction.
#include "private_heap.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace {

using dbgkit::targets::Arena;
using dbgkit::targets::FreeListHeap;
using dbgkit::targets::detail::live_chunks;

constexpr std::size_t kAlign = alignof(std::max_align_t);

/// Fills every block with its own byte, then checks that no block overwrote another.
void expect_distinct_and_writable(const std::vector<void*>& blocks, std::size_t bytes) {
    std::set<void*> distinct(blocks.begin(), blocks.end());
    EXPECT_EQ(distinct.size(), blocks.size());
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(blocks[i]) % kAlign, 0u);
        std::memset(blocks[i], static_cast<int>(i & 0xff), bytes);
    }
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        const auto* p = static_cast<const unsigned char*>(blocks[i]);
        for (std::size_t b = 0; b < bytes; ++b) {
            ASSERT_EQ(p[b], i & 0xff) << "block " << i << " byte " << b;
        }
    }
}

TEST(PrivateHeap, FreeListHeapBlocksAreDistinctAndReused) {
    const std::int64_t before = live_chunks();
    {
        FreeListHeap heap(4, 64);  // small chunks, so the test crosses many
        std::vector<void*> blocks;
        for (int i = 0; i < 1000; ++i) {
            blocks.push_back(heap.allocate());
        }
        expect_distinct_and_writable(blocks, 4);
        const std::size_t chunks = heap.chunks();
        EXPECT_EQ(chunks, 16u);  // ceil(1000 / 64)
        EXPECT_EQ(live_chunks() - before, 16);
        for (void* block : blocks) {
            heap.deallocate(block);
        }
        std::set<void*> first(blocks.begin(), blocks.end());
        std::vector<void*> again;
        for (int i = 0; i < 1000; ++i) {
            again.push_back(heap.allocate());
            EXPECT_EQ(first.count(again.back()), 1u) << "a freed block should be reused";
        }
        expect_distinct_and_writable(again, 4);
        EXPECT_EQ(heap.chunks(), chunks);  // no growth after free
    }
    EXPECT_EQ(live_chunks(), before);
}

TEST(PrivateHeap, FreeListHeapLargerBlocks) {
    const std::int64_t before = live_chunks();
    {
        FreeListHeap heap(100);
        std::vector<void*> blocks;
        for (int i = 0; i < 300; ++i) {
            blocks.push_back(heap.allocate());
        }
        expect_distinct_and_writable(blocks, 100);
        heap.deallocate(blocks[7]);
        EXPECT_EQ(heap.allocate(), blocks[7]);  // last freed, first reused
    }
    EXPECT_EQ(live_chunks(), before);
}

TEST(PrivateHeap, ArenaBlocksAreDistinctAndAllFreedAtDestruction) {
    const std::int64_t before = live_chunks();
    {
        Arena arena(1024);
        std::vector<void*> blocks;
        std::vector<std::size_t> sizes;
        for (int i = 0; i < 500; ++i) {
            const std::size_t bytes = 1 + static_cast<std::size_t>(i % 40);
            blocks.push_back(arena.allocate(bytes));
            sizes.push_back(bytes);
        }
        blocks.push_back(arena.allocate(5000));  // larger than a chunk: a chunk of its own
        expect_distinct_and_writable(blocks, 1);
        std::memset(blocks.back(), 0x5a, 5000);
        EXPECT_GT(arena.chunks(), 1u);
        EXPECT_EQ(live_chunks() - before, static_cast<std::int64_t>(arena.chunks()));
    }
    EXPECT_EQ(live_chunks(), before);
}

/// Each thread uses its own heap and arena, as the benchmark does; no locking is needed.
TEST(PrivateHeap, OneHeapPerThread) {
    const std::int64_t before = live_chunks();
    std::vector<std::thread> threads;
    std::vector<int> failures(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([t, &failures] {
            FreeListHeap heap(8, 128);
            Arena arena(4096);
            std::vector<void*> blocks;
            for (int i = 0; i < 5000; ++i) {
                void* a = heap.allocate();
                void* b = arena.allocate(8);
                std::memset(a, t, 8);
                std::memset(b, t, 8);
                blocks.push_back(a);
                blocks.push_back(b);
            }
            for (void* block : blocks) {
                if (static_cast<unsigned char*>(block)[7] != t) {
                    ++failures[static_cast<std::size_t>(t)];
                }
            }
            for (std::size_t i = 0; i < blocks.size(); i += 2) {
                heap.deallocate(blocks[i]);
            }
        });
    }
    for (std::thread& t : threads) {
        t.join();
    }
    EXPECT_EQ(failures, std::vector<int>(4, 0));
    EXPECT_EQ(live_chunks(), before);
}

}  // namespace

// @brief Tests of the object pools: no block handed out twice, every item consumed once, everything back at the end.
#include "object_pool.hpp"
#include "pool_transfer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace {

using namespace dbgkit::targets;

constexpr std::size_t kItemBytes = 100;

/// Makes one pool of each kind, so every test runs on all of them.
struct PoolFactory {
    template <typename Test>
    static void each(Test test) {
        { NewDeletePool pool(kItemBytes); test(pool, "none"); }
        { MutexPool pool(kItemBytes); test(pool, "mutex"); }
        { SegmentLinearPool pool(kItemBytes); test(pool, "linear"); }
        { SegmentTreePool pool(kItemBytes, TreeChoice::round_robin); test(pool, "tree-old"); }
        { SegmentTreePool pool(kItemBytes, TreeChoice::best_child); test(pool, "tree-new"); }
    }
};

TEST(ObjectPool, BlocksAreDistinctWritableAndAllReturn) {
    PoolFactory::each([](auto& pool, const char* name) {
        SCOPED_TRACE(name);
        std::vector<void*> blocks;
        std::set<void*> distinct;
        for (int i = 0; i < 1000; ++i) {  // spans many segments and tree levels
            void* block = pool.acquire();
            ASSERT_NE(block, nullptr);
            EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block) % 16, 0u);
            std::memset(block, i & 0xff, kItemBytes);
            EXPECT_TRUE(distinct.insert(block).second);
            blocks.push_back(block);
        }
        EXPECT_EQ(pool.blocks_out(), 1000u);
        EXPECT_GE(pool.blocks_owned(), 1000u);
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            EXPECT_EQ(static_cast<unsigned char*>(blocks[i])[kItemBytes - 1], i & 0xff);
            pool.release(blocks[i]);
        }
        EXPECT_EQ(pool.blocks_out(), 0u);
    });
}

TEST(ObjectPool, PoolsReuseReleasedBlocks) {
    MutexPool mutex_pool(kItemBytes);
    SegmentLinearPool linear(kItemBytes);
    SegmentTreePool tree(kItemBytes, TreeChoice::best_child);
    for (int round = 0; round < 100; ++round) {
        void* a = mutex_pool.acquire();
        void* b = linear.acquire();
        void* c = tree.acquire();
        mutex_pool.release(a);
        linear.release(b);
        tree.release(c);
    }
    EXPECT_EQ(mutex_pool.blocks_owned(), 1u);
    EXPECT_EQ(linear.blocks_owned(), 64u);  // one segment
    EXPECT_EQ(tree.blocks_owned(), 64u);
}

/// Many threads acquire and release at once; a set under a mutex catches a block handed to two
/// threads at the same time (it is removed from the set before it is released), and each thread
/// fills its blocks with its own byte and checks it before releasing them.
TEST(ObjectPool, ConcurrentAcquireNeverSharesABlock) {
    PoolFactory::each([](auto& pool, const char* name) {
        SCOPED_TRACE(name);
        std::mutex mutex;
        std::set<void*> owned;
        std::atomic<int> doubles{0};
        std::atomic<int> overwritten{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                const auto mark = static_cast<unsigned char>(t + 1);
                std::vector<void*> held;
                auto give_back = [&](void* block) {
                    for (std::size_t i = 0; i < kItemBytes; ++i) {
                        if (static_cast<unsigned char*>(block)[i] != mark) {
                            overwritten.fetch_add(1);
                            break;
                        }
                    }
                    {
                        std::lock_guard<std::mutex> lock(mutex);
                        owned.erase(block);
                    }
                    pool.release(block);
                };
                for (int i = 0; i < 2000; ++i) {
                    void* block = pool.acquire();
                    {
                        std::lock_guard<std::mutex> lock(mutex);
                        if (!owned.insert(block).second) {
                            doubles.fetch_add(1);
                        }
                    }
                    std::memset(block, mark, kItemBytes);
                    held.push_back(block);
                    if (held.size() > 50 || i % 3 == 0) {
                        give_back(held.front());
                        held.erase(held.begin());
                    }
                }
                for (void* block : held) {
                    give_back(block);
                }
            });
        }
        for (std::thread& t : threads) {
            t.join();
        }
        EXPECT_EQ(doubles.load(), 0);
        EXPECT_EQ(overwritten.load(), 0);
        EXPECT_TRUE(owned.empty());
        EXPECT_EQ(pool.blocks_out(), 0u);
    });
}

/// The benchmark's workload: every stamped item is consumed exactly once and all blocks return.
TEST(ObjectPool, TransferConsumesEveryItemOnce) {
    const unsigned shapes[][2] = {{6, 1}, {3, 3}, {1, 6}};
    for (const auto& shape : shapes) {
        PoolFactory::each([&shape](auto& pool, const char* name) {
            SCOPED_TRACE(name);
            constexpr std::uint64_t kItems = 1500;
            const unsigned producers = shape[0];
            std::vector<std::atomic<int>> counts(producers * kItems);
            const TransferStats stats = pool_transfer(
                pool, producers, shape[1], kItems,
                [&counts](unsigned, std::uint64_t producer, std::uint64_t seq) {
                    counts[producer * kItems + seq].fetch_add(1, std::memory_order_relaxed);
                });
            for (std::size_t i = 0; i < counts.size(); ++i) {
                ASSERT_EQ(counts[i].load(), 1) << "item " << i;
            }
            EXPECT_EQ(stats.acquire.count, producers * kItems);
            EXPECT_EQ(stats.release.count, producers * kItems);
            EXPECT_LE(stats.acquire.min_ns, stats.acquire.max_ns);
            EXPECT_EQ(pool.blocks_out(), 0u);
        });
    }
}

}  // namespace

// @brief MPMC queue tests: nothing lost or duplicated under many threads, FIFO with one thread, clean close.
#include "mpmc_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using dbgkit::targets::CoarseQueue;
using dbgkit::targets::FineQueue;

template <typename Queue>
class MpmcQueueTest : public ::testing::Test {};

using Queues = ::testing::Types<CoarseQueue<std::uint64_t>, FineQueue<std::uint64_t>>;
struct QueueName {
    template <typename T>
    static std::string GetName(int) {
        return std::is_same_v<T, CoarseQueue<std::uint64_t>> ? "coarse" : "fine";
    }
};
TYPED_TEST_SUITE(MpmcQueueTest, Queues, QueueName);

TYPED_TEST(MpmcQueueTest, OneThreadIsFifoAndCloseDrains) {
    TypeParam queue;
    for (std::uint64_t i = 0; i < 100; ++i) {
        queue.push(i);
    }
    queue.close();
    for (std::uint64_t i = 0; i < 100; ++i) {
        auto value = queue.pop();
        ASSERT_TRUE(value.has_value());
        EXPECT_EQ(*value, i);
    }
    EXPECT_FALSE(queue.pop().has_value());
    EXPECT_FALSE(queue.pop().has_value()) << "a closed, drained queue stays empty";
    EXPECT_THROW(queue.push(1), std::logic_error);
}

// Readers block in pop() on an empty queue; close() must wake every one of them.
TYPED_TEST(MpmcQueueTest, CloseWakesBlockedReaders) {
    TypeParam queue;
    std::vector<std::thread> readers;
    std::vector<int> got(4, -1);
    for (int r = 0; r < 4; ++r) {
        readers.emplace_back([&queue, &got, r] { got[r] = queue.pop().has_value() ? 1 : 0; });
    }
    queue.close();
    for (std::thread& t : readers) {
        t.join();
    }
    EXPECT_EQ(got, std::vector<int>(4, 0));
}

// The check: 8 writers x 10k distinct values; the readers' records, put together, are
// exactly the values pushed, each once.
TYPED_TEST(MpmcQueueTest, ManyWritersAndReadersLoseAndDuplicateNothing) {
    constexpr unsigned kWriters = 8;
    constexpr unsigned kReaders = 6;
    constexpr std::uint64_t kItems = 10000;
    TypeParam queue;
    std::vector<std::vector<std::uint64_t>> seen(kReaders);
    dbgkit::targets::mpmc_transfer(queue, kWriters, kReaders, kItems,
                                   [&seen](unsigned reader, std::uint64_t v) {
                                       seen[reader].push_back(v);
                                   });
    std::vector<std::uint64_t> all;
    for (const auto& s : seen) {
        // One writer's values reach one reader in the order that writer pushed them.
        for (std::size_t i = 1; i < s.size(); ++i) {
            if (s[i] / kItems == s[i - 1] / kItems) {
                ASSERT_LT(s[i - 1], s[i]) << "per-writer order broken";
            }
        }
        all.insert(all.end(), s.begin(), s.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<std::uint64_t> expected(kWriters * kItems);
    std::iota(expected.begin(), expected.end(), 0);
    ASSERT_EQ(all.size(), expected.size());
    EXPECT_TRUE(all == expected) << "values lost or duplicated";
}

// Items that are still queued at destruction are freed (ASan/memdump would report them otherwise).
TYPED_TEST(MpmcQueueTest, DestructorFreesQueuedItems) {
    TypeParam queue;
    for (std::uint64_t i = 0; i < 10; ++i) {
        queue.push(i);
    }
    ASSERT_EQ(*queue.pop(), 0u);
}

TEST(FineQueueTest, MoveOnlyItems) {
    FineQueue<std::unique_ptr<std::string>> queue;
    queue.push(std::make_unique<std::string>("a"));
    queue.push(std::make_unique<std::string>("b"));
    auto first = queue.pop();
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(**first, "a");
}

}  // namespace

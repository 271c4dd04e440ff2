// @brief SPSC ring tests: every value arrives exactly once and in FIFO order, full and empty are reported.
#include "spsc_ring.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <numeric>
#include <vector>

namespace {

using dbgkit::targets::AcqRelRing;
using dbgkit::targets::LockedRing;
using dbgkit::targets::SeqCstRing;

template <typename Ring>
class SpscRingTest : public ::testing::Test {};

using Rings = ::testing::Types<LockedRing<std::uint64_t>, SeqCstRing<std::uint64_t>,
                               AcqRelRing<std::uint64_t>>;
struct RingName {
    template <typename T>
    static std::string GetName(int) {
        if (std::is_same_v<T, LockedRing<std::uint64_t>>) return "locked";
        if (std::is_same_v<T, SeqCstRing<std::uint64_t>>) return "seq_cst";
        return "acq_rel";
    }
};
TYPED_TEST_SUITE(SpscRingTest, Rings, RingName);

TYPED_TEST(SpscRingTest, FullAndEmptyAtCapacity) {
    TypeParam ring(3);
    EXPECT_EQ(ring.capacity(), 3u);
    std::uint64_t out = 0;
    EXPECT_FALSE(ring.try_pop(out));
    EXPECT_TRUE(ring.try_push(10));
    EXPECT_TRUE(ring.try_push(11));
    EXPECT_TRUE(ring.try_push(12));
    EXPECT_FALSE(ring.try_push(13));
    ASSERT_TRUE(ring.try_pop(out));
    EXPECT_EQ(out, 10u);
    EXPECT_TRUE(ring.try_push(13));  // wraps around
    for (std::uint64_t want : {11u, 12u, 13u}) {
        ASSERT_TRUE(ring.try_pop(out));
        EXPECT_EQ(out, want);
    }
    EXPECT_FALSE(ring.try_pop(out));
}

TYPED_TEST(SpscRingTest, ZeroCapacityIsRejected) {
    EXPECT_THROW(TypeParam ring(0), std::invalid_argument);
}

// A small ring forces many full/empty transitions, wraps and hand-overs between the two threads.
TYPED_TEST(SpscRingTest, TwoThreadsKeepExactFifoSequence) {
    constexpr std::uint64_t kCount = 20000;
    for (std::size_t capacity : {1u, 7u, 1000u}) {
        TypeParam ring(capacity);
        std::vector<std::uint64_t> received;
        received.reserve(kCount);
        dbgkit::targets::spsc_transfer(ring, kCount, [&](std::uint64_t v) { received.push_back(v); });
        std::vector<std::uint64_t> expected(kCount);
        std::iota(expected.begin(), expected.end(), 0);
        ASSERT_EQ(received, expected) << "capacity " << capacity;
        std::uint64_t out = 0;
        EXPECT_FALSE(ring.try_pop(out)) << "ring not empty after the transfer";
    }
}

}  // namespace

// @brief shmemq stats build tests: exact lock, full/empty and spin counters for known sequences.
#include "shmemq.h"
#include "shmemq_testing.h"
#include "test_shmemq_common.hpp"

#include <gtest/gtest.h>

#include <string>

namespace dbgkit::targets {
namespace {

using namespace std::chrono_literals;
using shmemq_test::Child;
using shmemq_test::ScopedName;
using shmemq_test::Signal;

bool enqueue_string(shmemq_t* q, const std::string& s) {
    return shmemq_try_enqueue(q, const_cast<char*>(s.data()), static_cast<int>(s.size()));
}

shmemq_stats stats() {
    shmemq_stats st;
    shmemq_stats_get(&st);
    return st;
}

TEST(ShmemqStats, UncontendedCountsAreExact) {
    ASSERT_TRUE(shmemq_stats_enabled());
    ScopedName name("stats");
    shmemq_t* q = shmemq_new(name.c_str(), 2, 8);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    shmemq_stats_reset();
    char buf[8];
    EXPECT_FALSE(shmemq_try_dequeue(q, buf, sizeof buf));  // empty
    EXPECT_TRUE(enqueue_string(q, "a"));
    EXPECT_TRUE(enqueue_string(q, "b"));
    EXPECT_FALSE(enqueue_string(q, "c"));  // full
    EXPECT_FALSE(enqueue_string(q, "123456789"));  // too long: refused before locking
    EXPECT_TRUE(shmemq_try_dequeue(q, buf, sizeof buf));
    const shmemq_stats st = stats();
    EXPECT_EQ(st.acquisitions, 5u);
    EXPECT_EQ(st.contended, 0u);
    EXPECT_EQ(st.blocking, 0u);
    EXPECT_EQ(st.slept, 0u);
    EXPECT_EQ(st.full, 1u);
    EXPECT_EQ(st.empty, 1u);
    for (int b = 0; b < SHMEMQ_STATS_BUCKETS; ++b) EXPECT_EQ(st.spin_histogram[b], 0u) << b;
    shmemq_destroy(q, 1);
}

TEST(ShmemqStats, LockFreeCountsFullAndEmptyButNoLocks) {
    ScopedName name("statslf");
    shmemq_options o;
    shmemq_options_init(&o);
    o.lock = SHMEMQ_LOCK_LOCKFREE;
    shmemq_t* q = shmemq_open(name.c_str(), 1, 8, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    shmemq_stats_reset();
    char buf[8];
    EXPECT_FALSE(shmemq_try_dequeue(q, buf, sizeof buf));
    EXPECT_TRUE(enqueue_string(q, "a"));
    EXPECT_FALSE(enqueue_string(q, "b"));
    const shmemq_stats st = stats();
    EXPECT_EQ(st.acquisitions, 0u);
    EXPECT_EQ(st.full, 1u);
    EXPECT_EQ(st.empty, 1u);
    shmemq_destroy(q, 1);
}

struct ContendedCase {
    shmemq_lock_kind lock;
    int bucket;  // where the spin count of the one contended acquisition lands
    const char* label;
};

void PrintTo(const ContendedCase& c, std::ostream* os) { *os << c.label; }

class ShmemqStatsContended : public ::testing::TestWithParam<ContendedCase> {};

INSTANTIATE_TEST_SUITE_P(Kinds, ShmemqStatsContended,
                         ::testing::Values(
                             // normal: no spinning, straight to pthread_mutex_lock: 0 spins.
                             ContendedCase{SHMEMQ_LOCK_NORMAL, 0, "normal"},
                             // adaptive with a fresh estimate of 0: min(100, 0 * 2 + 10) = 10
                             // spins, then it gives up: bucket 8-15.
                             ContendedCase{SHMEMQ_LOCK_ADAPTIVE, 4, "adaptive"}),
                         [](const ::testing::TestParamInfo<ContendedCase>& info) {
                             return std::string(info.param.label);
                         });

// A child holds the lock for 400 ms; our one enqueue finds it taken, spins as its kind does, blocks
// in pthread_mutex_lock and sleeps in the kernel until the child unlocks.
TEST_P(ShmemqStatsContended, BlockedAcquisitionIsCountedAsContendedAndSlept) {
    ScopedName name("statsblock");
    shmemq_options o;
    shmemq_options_init(&o);
    o.lock = GetParam().lock;
    shmemq_t* q = shmemq_open(name.c_str(), 2, 8, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    Signal locked;
    Child child([&] {
        if (shmemq_testing_lock(q) != 0) return 2;
        locked.send();
        usleep(400000);
        return shmemq_testing_unlock(q) == 0 ? 0 : 3;
    });
    ASSERT_TRUE(locked.read_byte(4000ms));
    shmemq_stats_reset();
    EXPECT_TRUE(enqueue_string(q, "x"));
    const shmemq_stats st = stats();
    EXPECT_EQ(child.wait(4000ms), 0);
    EXPECT_EQ(st.acquisitions, 1u);
    EXPECT_EQ(st.contended, 1u);
    EXPECT_EQ(st.spin_acquired, 0u);
    EXPECT_EQ(st.blocking, 1u);
    EXPECT_EQ(st.slept, 1u);
    for (int b = 0; b < SHMEMQ_STATS_BUCKETS; ++b) {
        EXPECT_EQ(st.spin_histogram[b], b == GetParam().bucket ? 1u : 0u)
            << "bucket " << shmemq_stats_bucket_label(b);
    }
    shmemq_destroy(q, 1);
}

TEST(ShmemqStats, OwnerDeathIsCounted) {
    ScopedName name("statsdead");
    shmemq_t* q = shmemq_new(name.c_str(), 2, 8);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    Signal locked;
    Child child([&] {
        if (shmemq_testing_lock(q) != 0) return 2;
        locked.send();
        for (;;) pause();
    });
    ASSERT_TRUE(locked.read_byte(4000ms));
    child.kill_and_reap();
    shmemq_stats_reset();
    EXPECT_TRUE(enqueue_string(q, "x"));
    const shmemq_stats st = stats();
    EXPECT_EQ(st.acquisitions, 1u);
    EXPECT_EQ(st.owner_died, 1u);
    EXPECT_EQ(st.contended, 0u) << "trylock itself returns EOWNERDEAD";
    shmemq_destroy(q, 1);
}

TEST(ShmemqStats, BucketLabels) {
    EXPECT_STREQ(shmemq_stats_bucket_label(0), "0");
    EXPECT_STREQ(shmemq_stats_bucket_label(1), "1");
    EXPECT_STREQ(shmemq_stats_bucket_label(4), "8-15");
    EXPECT_STREQ(shmemq_stats_bucket_label(SHMEMQ_STATS_BUCKETS - 1), "256+");
    EXPECT_STREQ(shmemq_stats_bucket_label(SHMEMQ_STATS_BUCKETS), "?");
}

}  // namespace
}  // namespace dbgkit::targets

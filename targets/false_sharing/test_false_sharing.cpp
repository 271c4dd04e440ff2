// @brief False-sharing tests: every counter ends at exactly the iteration count, for each layout and affinity.
#include "false_sharing.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace {

using dbgkit::targets::Affinity;
using dbgkit::targets::AlignedCounters;
using dbgkit::targets::PackedCounters;

TEST(FalseSharingLayout, PackedSharesALineAlignedDoesNot) {
    PackedCounters packed;
    AlignedCounters aligned;
    const auto addr = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
    EXPECT_EQ(addr(&packed.value[2]) - addr(&packed.value[0]), 8u);
    EXPECT_EQ(addr(&aligned.slot[1].value) - addr(&aligned.slot[0].value), 64u);
    EXPECT_EQ(addr(&aligned.slot[0].value) % 64, 0u);
}

TEST(FalseSharingPlan, SpreadWrapsOnTwoCpus) {
    using Plan = std::array<int, 3>;
    EXPECT_EQ(dbgkit::targets::cpu_plan(Affinity::spread, {0, 1}), (Plan{0, 1, 0}));
    EXPECT_EQ(dbgkit::targets::cpu_plan(Affinity::spread, {2, 4, 6, 8}), (Plan{2, 4, 6}));
    EXPECT_EQ(dbgkit::targets::cpu_plan(Affinity::same, {3, 5}), (Plan{3, 3, 3}));
    EXPECT_EQ(dbgkit::targets::cpu_plan(Affinity::none, {0, 1}), (Plan{-1, -1, -1}));
}

template <typename Counters>
class FalseSharingRun : public ::testing::Test {};
using Layouts = ::testing::Types<PackedCounters, AlignedCounters>;
struct LayoutName {
    template <typename T>
    static std::string GetName(int) {
        return std::is_same_v<T, PackedCounters> ? "packed" : "aligned";
    }
};
TYPED_TEST_SUITE(FalseSharingRun, Layouts, LayoutName);

TYPED_TEST(FalseSharingRun, CountersEndExact) {
    constexpr std::uint32_t kIterations = 200000;
    const auto cpus = dbgkit::targets::allowed_cpus();
    ASSERT_FALSE(cpus.empty());
    for (Affinity affinity : {Affinity::none, Affinity::same, Affinity::spread}) {
        const auto plan = dbgkit::targets::cpu_plan(affinity, cpus);
        const auto result = dbgkit::targets::run_false_sharing<TypeParam>(kIterations, plan);
        for (std::uint32_t count : result.counts) {
            EXPECT_EQ(count, kIterations);
        }
        // Run twice: the static counters are reset, not accumulated.
        EXPECT_EQ(dbgkit::targets::run_false_sharing<TypeParam>(7, plan).counts,
                  (std::array<std::uint32_t, 3>{7, 7, 7}));
    }
}

TEST(FalseSharingRun, PinningToAForbiddenCpuThrows) {
    EXPECT_THROW(dbgkit::targets::run_false_sharing<PackedCounters>(1, {CPU_SETSIZE - 1, -1, -1}),
                 std::runtime_error);
}

}  // namespace

// @brief Producer-consumer tests: every item produced is consumed exactly once, for each variant and batch size.
#include "producer_consumer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <string>
#include <tuple>

namespace dbgkit::targets {
/// Found by GoogleTest through ADL: test parameters print as names, not as bytes.
void PrintTo(PcVariant v, std::ostream* os) { *os << pc_variant_name(v); }
}  // namespace dbgkit::targets

namespace {

namespace t = dbgkit::targets;

class PcTest : public ::testing::TestWithParam<std::tuple<t::PcVariant, unsigned>> {};

TEST_P(PcTest, EveryItemConsumedExactlyOnce) {
    t::PcConfig c;
    c.threads = 8;
    c.items = 5000;
    c.batch = std::get<1>(GetParam());
    c.sleep = std::chrono::microseconds(200);
    const t::PcResult r = t::run_pc(std::get<0>(GetParam()), c);
    EXPECT_EQ(r.consumed, 5000u);
    EXPECT_TRUE(r.exactly_once);
}

TEST_P(PcTest, FewerItemsThanThreads) {
    t::PcConfig c;
    c.threads = 6;
    c.items = 3;
    c.batch = std::get<1>(GetParam());
    c.sleep = std::chrono::microseconds(200);
    const t::PcResult r = t::run_pc(std::get<0>(GetParam()), c);
    EXPECT_EQ(r.consumed, 3u);
    EXPECT_TRUE(r.exactly_once);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, PcTest,
    ::testing::Combine(::testing::ValuesIn(t::all_pc_variants()), ::testing::Values(1u, 10u)),
    [](const ::testing::TestParamInfo<PcTest::ParamType>& info) {
        return std::string(t::pc_variant_name(std::get<0>(info.param))) + "_batch" +
               std::to_string(std::get<1>(info.param));
    });

TEST(ProducerConsumer, RejectsZeroBatch) {
    t::PcConfig c;
    c.batch = 0;
    EXPECT_THROW(t::run_pc(t::PcVariant::condvar, c), std::invalid_argument);
}

}  // namespace

// @brief Monte Carlo pi tests: correct variants agree exactly for fixed seeds and estimate pi; the unsynchronised one never counts more.
#include "monte_carlo_pi.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace {

namespace t = dbgkit::targets;

t::PiConfig small_config(bool affinity) {
    t::PiConfig c;
    c.threads = 4;
    c.points_per_thread = 20000;
    c.seed = 42;
    c.affinity = affinity;
    return c;
}

TEST(MonteCarloPi, CorrectVariantsCountTheSameHitsAndEstimatePi) {
    const std::uint64_t reference = t::run_pi(t::PiSync::local, small_config(false)).hits;
    for (t::PiSync sync : t::all_pi_syncs()) {
        if (sync == t::PiSync::none) {
            continue;
        }
        for (bool affinity : {false, true}) {
            const t::PiResult r = t::run_pi(sync, small_config(affinity));
            EXPECT_EQ(r.hits, reference) << t::pi_sync_name(sync) << " affinity " << affinity;
            EXPECT_EQ(r.points, 80000u);
            // 80000 points: the standard error of the estimate is about 0.006.
            EXPECT_NEAR(r.pi(), M_PI, 0.03) << t::pi_sync_name(sync);
        }
    }
}

TEST(MonteCarloPi, UnsynchronisedNeverCountsMore) {
    const std::uint64_t reference = t::run_pi(t::PiSync::local, small_config(false)).hits;
    const t::PiResult r = t::run_pi(t::PiSync::none, small_config(false));
    EXPECT_LE(r.hits, reference);
    EXPECT_GT(r.hits, 0u);
}

TEST(MonteCarloPi, OneThreadLosesNothingWithoutSync) {
    t::PiConfig c = small_config(false);
    c.threads = 1;
    EXPECT_EQ(t::run_pi(t::PiSync::none, c).hits, t::run_pi(t::PiSync::atomic, c).hits);
}

TEST(MonteCarloPi, RejectsZeroThreads) {
    t::PiConfig c = small_config(false);
    c.threads = 0;
    EXPECT_THROW(t::run_pi(t::PiSync::atomic, c), std::invalid_argument);
}

}  // namespace

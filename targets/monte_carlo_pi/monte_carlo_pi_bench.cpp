// @brief Benchmark: Monte Carlo pi with the shared hit counter synchronised each way, with and without CPU affinity.
#include "bench_cli.hpp"
#include "monte_carlo_pi.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace t = dbgkit::targets;

constexpr const char* kUsage =
    "usage: monte_carlo_pi_bench [--threads K] [--points N] [--seed S] [--affinity off|on|both]\n"
    "                            [--variant mutex|spin|spin_yield|adaptive|atomic|none|local|all]\n"
    "\n"
    "K threads each draw N random points in the unit square and count those inside the quarter\n"
    "circle into one shared counter; prints one row per variant and affinity mode: hits, the pi\n"
    "estimate, points per second, and the updates lost (hits short of the correct count).\n"
    "\n"
    "  --threads K    threads (default 60, as the seed; its k = 20K threads is not run here)\n"
    "  --points N     points per thread (default 200000; the seed does not say its count)\n"
    "  --seed S       thread i draws from mt19937_64(S + i) (default 1): every correct variant\n"
    "                 counts the same hits\n"
    "  --affinity A   off: no pinning; on: thread i pinned to CPU i mod CPUs; both (default)\n"
    "  --variant V    mutex: pthread mutex; spin: spin lock on an atomic exchange; spin_yield:\n"
    "                 spin + sched_yield; adaptive: PTHREAD_MUTEX_ADAPTIVE_NP; atomic: atomic\n"
    "                 increment; none: NO SYNCHRONISATION, WRONG ON PURPOSE (a relaxed load then\n"
    "                 a separate relaxed store: loses updates, though it is no data race); local:\n"
    "                 thread-local count added once at the end; all (default): each in turn\n"
    "  --help         this text\n"
    "\n"
    "Exit status: 0 on success, 1 if a correct variant lost a hit, 2 on a bad argument.\n";

struct Options {
    t::PiConfig config;
    std::vector<bool> affinity{false, true};
    std::vector<t::PiSync> variants = t::all_pi_syncs();
};

const dbgkit::targets::cli::Program kProgram{"monte_carlo_pi_bench", kUsage};

[[noreturn]] void usage_error(const std::string& message) {
    dbgkit::targets::cli::usage_error(kProgram, message);
}

Options parse(int argc, char** argv) {
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--threads")) {
            opt.config.threads = static_cast<unsigned>(args.count(1, 4096));
        } else if (args.is("--points")) {
            opt.config.points_per_thread = args.count(1, 1000000000000ULL);
        } else if (args.is("--seed")) {
            opt.config.seed = args.count(1, ~0ULL >> 16);
        } else if (args.is("--affinity")) {
            const std::string v = args.value();
            if (v == "off") {
                opt.affinity = {false};
            } else if (v == "on") {
                opt.affinity = {true};
            } else if (v == "both") {
                opt.affinity = {false, true};
            } else {
                usage_error("--affinity: expected off, on or both, not '" + v + "'");
            }
        } else if (args.is("--variant")) {
            args.variant(t::all_pi_syncs(), opt.variants,
                         [](t::PiSync s) { return std::string(t::pi_sync_name(s)); });
        } else {
            args.unknown();
        }
    }
    return opt;
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    // The correct hit count for these seeds: the fastest correct variant.
    const std::uint64_t correct = t::run_pi(t::PiSync::local, opt.config).hits;
    std::printf("| variant | threads | affinity | points | hits | pi | Mpoints/s | lost updates |\n");
    std::printf("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    int status = 0;
    for (t::PiSync sync : opt.variants) {
        for (bool affinity : opt.affinity) {
            t::PiConfig config = opt.config;
            config.affinity = affinity;
            const t::PiResult r = t::run_pi(sync, config);
            const long long lost = static_cast<long long>(correct) - static_cast<long long>(r.hits);
            if (sync != t::PiSync::none && lost != 0) {
                std::fprintf(stderr, "monte_carlo_pi_bench: %s lost %lld hits\n",
                             t::pi_sync_name(sync), lost);
                status = 1;
            }
            std::printf("| %s | %u | %s | %llu | %llu | %.5f | %.2f | %lld |\n",
                        t::pi_sync_name(sync), config.threads, affinity ? "on" : "off",
                        static_cast<unsigned long long>(r.points),
                        static_cast<unsigned long long>(r.hits), r.pi(),
                        static_cast<double>(r.points) / r.seconds / 1e6, lost);
        }
    }
    return status;
}

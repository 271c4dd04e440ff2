// @brief Benchmark: three threads increment their own counters in a packed or a cache-line aligned struct, on one CPU or spread.
#include "bench_cli.hpp"
#include "false_sharing.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace {

using dbgkit::targets::Affinity;
using dbgkit::targets::AlignedCounters;
using dbgkit::targets::PackedCounters;
using dbgkit::targets::SharingResult;

constexpr const char* kUsage =
    "usage: false_sharing_bench [--iterations N] [--layout packed|aligned|all]\n"
    "                           [--affinity none|same|spread|all]\n"
    "\n"
    "Three threads each add 1 to their own 32-bit member of one static struct N times; prints one\n"
    "row per layout and affinity (time) and checks every counter ends at exactly N.\n"
    "\n"
    "  --iterations N  increments per thread (default 100000000; the seed does not give its count)\n"
    "  --layout L      packed: the three counters in 12 bytes, one cache line; aligned: each on\n"
    "                  its own 64-byte line; all (default): both\n"
    "  --affinity A    none: no pinning; same: all threads on the first allowed CPU; spread:\n"
    "                  thread i on allowed CPU i mod #CPUs (with 2 CPUs the third thread shares\n"
    "                  the first CPU with the first thread); all (default): same, then spread\n"
    "  --help          this text\n"
    "\n"
    "Exit status: 0 on success, 1 if a counter is wrong or pinning failed, 2 on a bad argument.\n";

struct Options {
    std::uint32_t iterations = 100000000;
    std::vector<std::string> layouts{"packed", "aligned"};
    std::vector<std::pair<std::string, Affinity>> affinities{{"same", Affinity::same},
                                                             {"spread", Affinity::spread}};
};

const dbgkit::targets::cli::Program kProgram{"false_sharing_bench", kUsage};

[[noreturn]] void usage_error(const std::string& message) {
    dbgkit::targets::cli::usage_error(kProgram, message);
}

Options parse(int argc, char** argv) {
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--iterations")) {
            opt.iterations = static_cast<std::uint32_t>(args.count(1, UINT32_MAX));
        } else if (args.is("--layout")) {
            const std::string v = args.value();
            if (v == "packed" || v == "aligned") {
                opt.layouts = {v};
            } else if (v != "all") {
                usage_error("unknown layout '" + v + "'");
            }
        } else if (args.is("--affinity")) {
            const std::string v = args.value();
            if (v == "none") {
                opt.affinities = {{v, Affinity::none}};
            } else if (v == "same") {
                opt.affinities = {{v, Affinity::same}};
            } else if (v == "spread") {
                opt.affinities = {{v, Affinity::spread}};
            } else if (v != "all") {
                usage_error("unknown affinity '" + v + "'");
            }
        } else {
            args.unknown();
        }
    }
    return opt;
}

std::string describe(const std::array<int, dbgkit::targets::kSharingThreads>& plan) {
    std::string text;
    for (int cpu : plan) {
        text += text.empty() ? "" : ",";
        text += cpu < 0 ? std::string("any") : std::to_string(cpu);
    }
    return text;
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    try {
        const std::vector<int> cpus = dbgkit::targets::allowed_cpus();
        std::printf("| layout | affinity | CPUs of threads 1,2,3 | iterations | seconds |\n");
        std::printf("| --- | --- | --- | ---: | ---: |\n");
        int status = 0;
        for (const std::string& layout : opt.layouts) {
            for (const auto& [name, affinity] : opt.affinities) {
                const auto plan = dbgkit::targets::cpu_plan(affinity, cpus);
                const SharingResult r =
                    layout == "packed"
                        ? dbgkit::targets::run_false_sharing<PackedCounters>(opt.iterations, plan)
                        : dbgkit::targets::run_false_sharing<AlignedCounters>(opt.iterations, plan);
                for (std::uint32_t count : r.counts) {
                    if (count != opt.iterations) {
                        std::fprintf(stderr, "false_sharing_bench: a counter ended at %u, not %u\n",
                                     count, opt.iterations);
                        status = 1;
                    }
                }
                std::printf("| %s | %s | %s | %u | %.4f |\n", layout.c_str(), name.c_str(),
                            describe(plan).c_str(), opt.iterations, r.seconds);
            }
        }
        return status;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "false_sharing_bench: %s\n", e.what());
        return 1;
    }
}

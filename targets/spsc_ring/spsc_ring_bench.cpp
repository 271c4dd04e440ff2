// @brief Benchmark: one producer and one consumer move N values through each SPSC ring variant.
#include "bench_cli.hpp"
#include "spsc_ring.hpp"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using dbgkit::targets::AcqRelRing;
using dbgkit::targets::LockedRing;
using dbgkit::targets::SeqCstRing;

constexpr const char* kUsage =
    "usage: spsc_ring_bench [--ops N] [--capacity C] [--variant locked|seq_cst|acq_rel|all]\n"
    "\n"
    "One producer thread pushes the values 0..N-1 through a ring of capacity C while the main\n"
    "thread pops them; prints one row per variant (time, operations per second) and checks that\n"
    "every value arrived once and in order.\n"
    "\n"
    "  --ops N        values moved per variant (default 1000000, as the seed's first article;\n"
    "                its second article uses 5000000)\n"
    "  --capacity C   ring capacity (default 1000, as the seed)\n"
    "  --variant V    locked: a mutex around each operation; seq_cst: lock-free, sequentially\n"
    "                 consistent atomics; acq_rel: lock-free, acquire/release, indices on separate\n"
    "                 cache lines; all (default): the three in that order\n"
    "  --help         this text\n"
    "\n"
    "Exit status: 0 on success, 1 if a value was lost or out of order, 2 on a bad argument.\n";

struct Options {
    std::uint64_t ops = 1000000;
    std::uint64_t capacity = 1000;
    std::vector<std::string> variants{"locked", "seq_cst", "acq_rel"};
};

const dbgkit::targets::cli::Program kProgram{"spsc_ring_bench", kUsage};

Options parse(int argc, char** argv) {
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--ops")) {
            opt.ops = args.count(1, UINT64_MAX);
        } else if (args.is("--capacity")) {
            opt.capacity = args.count(1, UINT64_MAX);
        } else if (args.is("--variant")) {
            args.variant(std::vector<std::string>{"locked", "seq_cst", "acq_rel"}, opt.variants);
        } else {
            args.unknown();
        }
    }
    return opt;
}

/// Runs one variant; returns seconds, or a negative value if the sequence was wrong.
template <typename Ring>
double run(const Options& opt) {
    Ring ring(opt.capacity);
    std::uint64_t expected = 0;
    bool in_order = true;
    const auto start = std::chrono::steady_clock::now();
    dbgkit::targets::spsc_transfer(ring, opt.ops, [&](std::uint64_t v) {
        in_order = in_order && v == expected;
        ++expected;
    });
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return in_order ? elapsed.count() : -1.0;
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    std::printf("| variant | ops | capacity | seconds | Mops/s |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: |\n");
    int status = 0;
    for (const std::string& variant : opt.variants) {
        double seconds = 0;
        if (variant == "locked") {
            seconds = run<LockedRing<std::uint64_t>>(opt);
        } else if (variant == "seq_cst") {
            seconds = run<SeqCstRing<std::uint64_t>>(opt);
        } else {
            seconds = run<AcqRelRing<std::uint64_t>>(opt);
        }
        if (seconds < 0) {
            std::fprintf(stderr, "spsc_ring_bench: %s: values lost or out of order\n", variant.c_str());
            status = 1;
            continue;
        }
        std::printf("| %s | %llu | %llu | %.4f | %.2f |\n", variant.c_str(),
                    static_cast<unsigned long long>(opt.ops),
                    static_cast<unsigned long long>(opt.capacity), seconds,
                    static_cast<double>(opt.ops) / seconds / 1e6);
    }
    return status;
}

// @brief Benchmark: W writers and R readers move W x K items through the coarse- and fine-grained MPMC queues.
#include "bench_cli.hpp"
#include "mpmc_queue.hpp"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using dbgkit::targets::CoarseQueue;
using dbgkit::targets::FineQueue;

constexpr const char* kUsage =
    "usage: mpmc_queue_bench [--writers W] [--readers R] [--items K] [--variant coarse|fine|all]\n"
    "\n"
    "W writer threads each push K distinct values into an unbounded queue while R reader threads\n"
    "pop until the queue is closed and drained; prints one row per variant (time, items per second)\n"
    "and checks that every value was popped exactly once (count and sum).\n"
    "\n"
    "  --writers W    writer threads (default 50, as the seed)\n"
    "  --readers R    reader threads (default 50, as the seed)\n"
    "  --items K      values per writer (default 1000, as the seed)\n"
    "  --variant V    coarse: one mutex around std::queue + a condition variable; fine: two-lock\n"
    "                 linked list with a dummy node (Michael & Scott); all (default): both\n"
    "  --help         this text\n"
    "\n"
    "Exit status: 0 on success, 1 if a value was lost or duplicated, 2 on a bad argument.\n";

struct Options {
    std::uint64_t writers = 50;
    std::uint64_t readers = 50;
    std::uint64_t items = 1000;
    std::vector<std::string> variants{"coarse", "fine"};
};

const dbgkit::targets::cli::Program kProgram{"mpmc_queue_bench", kUsage};

Options parse(int argc, char** argv) {
    constexpr std::uint64_t kMaxThreads = 1000;
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--writers")) {
            opt.writers = args.count(1, kMaxThreads);
        } else if (args.is("--readers")) {
            opt.readers = args.count(1, kMaxThreads);
        } else if (args.is("--items")) {
            opt.items = args.count(1, std::uint64_t{1} << 32);
        } else if (args.is("--variant")) {
            args.variant(std::vector<std::string>{"coarse", "fine"}, opt.variants);
        } else {
            args.unknown();
        }
    }
    return opt;
}

/// What one reader saw; padded so readers do not share a cache line.
struct alignas(64) Tally {
    std::uint64_t count = 0;
    std::uint64_t sum = 0;
};

/// Runs one variant; returns seconds, or a negative value if an item was lost or duplicated.
template <typename Queue>
double run(const Options& opt) {
    std::vector<Tally> tallies(opt.readers);
    const auto start = std::chrono::steady_clock::now();
    {
        Queue queue;
        dbgkit::targets::mpmc_transfer(queue, static_cast<unsigned>(opt.writers),
                                       static_cast<unsigned>(opt.readers), opt.items,
                                       [&tallies](unsigned reader, std::uint64_t value) {
                                           tallies[reader].count += 1;
                                           tallies[reader].sum += value;
                                       });
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    std::uint64_t count = 0;
    std::uint64_t sum = 0;
    for (const Tally& t : tallies) {
        count += t.count;
        sum += t.sum;
    }
    const std::uint64_t total = opt.writers * opt.items;
    // The values are 0 .. total-1, each once: their sum is total * (total - 1) / 2.
    const bool exact = count == total && sum == total * (total - 1) / 2;
    return exact ? elapsed.count() : -1.0;
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    std::printf("| variant | writers | readers | items per writer | ms | items/s |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    int status = 0;
    for (const std::string& variant : opt.variants) {
        const double seconds = variant == "coarse" ? run<CoarseQueue<std::uint64_t>>(opt)
                                                   : run<FineQueue<std::uint64_t>>(opt);
        if (seconds < 0) {
            std::fprintf(stderr, "mpmc_queue_bench: %s: items lost or duplicated\n", variant.c_str());
            status = 1;
            continue;
        }
        std::printf("| %s | %llu | %llu | %llu | %.2f | %.0f |\n", variant.c_str(),
                    static_cast<unsigned long long>(opt.writers),
                    static_cast<unsigned long long>(opt.readers),
                    static_cast<unsigned long long>(opt.items), seconds * 1e3,
                    static_cast<double>(opt.writers * opt.items) / seconds);
    }
    return status;
}

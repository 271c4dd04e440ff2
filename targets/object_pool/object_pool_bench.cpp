// @brief Benchmark: N producers acquire blocks from an object pool and pass them through a queue to M consumers that release them.
#include "bench_cli.hpp"
#include "object_pool.hpp"
#include "pool_transfer.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace dbgkit::targets;

constexpr const char* kUsage =
    "usage: object_pool_bench [--producers N] [--consumers M] [--items K] [--item-bytes B]\n"
    "                         [--variant none|mutex|linear|tree-old|tree-new|all]\n"
    "\n"
    "N producer threads each acquire K blocks of B bytes from a pool and push them onto a queue\n"
    "(one mutex + condition variable); M consumer threads pop them and release them to the pool.\n"
    "Prints one row per variant: acquire and release latency (min / avg / max, ns), total time,\n"
    "blocks and bytes the pool holds at the end, and checks that every block was consumed exactly\n"
    "once and that every block is back in the pool.\n"
    "\n"
    "  --producers N   producer threads (default 15; the seed runs 30/1, 15/15 and 1/30)\n"
    "  --consumers M   consumer threads (default 15)\n"
    "  --items K       blocks per producer (default 20000; the seed's 100000 is 5x longer on\n"
    "                  2 cores and the queue can hold millions of 10 KiB blocks at once)\n"
    "  --item-bytes B  block size, at least 16 (default 10240, as the seed)\n"
    "  --variant V     none: new/delete; mutex: free list under a mutex; linear: lock-free chain\n"
    "                  of 64-block segments; tree-old: lock-free tree of segments, 64 children,\n"
    "                  round-robin child; tree-new: child with a free block, else a missing child,\n"
    "                  else the child with the fewest children; all (default): every variant\n"
    "  --help          this text\n"
    "\n"
    "Exit status: 0 on success, 1 if a block was lost, duplicated or not released, 2 on a bad\n"
    "argument.\n";

const std::vector<std::string> kVariants{"none", "mutex", "linear", "tree-old", "tree-new"};

struct Options {
    std::uint64_t producers = 15;
    std::uint64_t consumers = 15;
    std::uint64_t items = 20000;
    std::uint64_t item_bytes = 10240;
    std::vector<std::string> variants = kVariants;
};

const dbgkit::targets::cli::Program kProgram{"object_pool_bench", kUsage};

Options parse(int argc, char** argv) {
    constexpr std::uint64_t kMaxThreads = 1000;
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--producers")) {
            opt.producers = args.count(1, kMaxThreads);
        } else if (args.is("--consumers")) {
            opt.consumers = args.count(1, kMaxThreads);
        } else if (args.is("--items")) {
            opt.items = args.count(1, std::uint64_t{1} << 32);
        } else if (args.is("--item-bytes")) {
            opt.item_bytes = args.count(16, std::uint64_t{1} << 24);
        } else if (args.is("--variant")) {
            args.variant(kVariants, opt.variants);
        } else {
            args.unknown();
        }
    }
    return opt;
}

/// What one consumer saw; padded so consumers do not share a cache line.
struct alignas(64) Tally {
    std::uint64_t count = 0;
    std::uint64_t sum = 0;
};

struct Row {
    TransferStats stats;
    double seconds = 0;
    std::size_t blocks_owned = 0;
    std::size_t blocks_out = 0;
    bool exact = false;
};

template <typename Pool>
Row run(Pool& pool, const Options& opt) {
    std::vector<Tally> tallies(opt.consumers);
    Row row;
    const auto start = std::chrono::steady_clock::now();
    row.stats = pool_transfer(pool, static_cast<unsigned>(opt.producers),
                              static_cast<unsigned>(opt.consumers), opt.items,
                              [&tallies, &opt](unsigned c, std::uint64_t producer, std::uint64_t seq) {
                                  tallies[c].count += 1;
                                  tallies[c].sum += producer * opt.items + seq;
                              });
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    row.seconds = elapsed.count();
    row.blocks_owned = pool.blocks_owned();
    row.blocks_out = pool.blocks_out();
    std::uint64_t count = 0;
    std::uint64_t sum = 0;
    for (const Tally& t : tallies) {
        count += t.count;
        sum += t.sum;
    }
    const std::uint64_t total = opt.producers * opt.items;
    // Stamps are 0 .. total-1 once each: their sum is total * (total - 1) / 2.
    row.exact = count == total && sum == total * (total - 1) / 2 && row.blocks_out == 0;
    return row;
}

Row run_variant(const std::string& variant, const Options& opt) {
    const std::size_t bytes = static_cast<std::size_t>(opt.item_bytes);
    if (variant == "none") {
        NewDeletePool pool(bytes);
        return run(pool, opt);
    }
    if (variant == "mutex") {
        MutexPool pool(bytes);
        return run(pool, opt);
    }
    if (variant == "linear") {
        SegmentLinearPool pool(bytes);
        return run(pool, opt);
    }
    SegmentTreePool pool(bytes, variant == "tree-old" ? TreeChoice::round_robin
                                                       : TreeChoice::best_child);
    return run(pool, opt);
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    std::printf("| variant | producers | consumers | items per producer | acquire min/avg/max ns "
                "| release min/avg/max ns | ms | blocks held | MiB held |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    int status = 0;
    for (const std::string& variant : opt.variants) {
        const Row row = run_variant(variant, opt);
        if (!row.exact) {
            std::fprintf(stderr,
                         "object_pool_bench: %s: blocks lost, duplicated or not released (%zu out)\n",
                         variant.c_str(), row.blocks_out);
            status = 1;
            continue;
        }
        const auto& a = row.stats.acquire;
        const auto& r = row.stats.release;
        std::printf("| %s | %llu | %llu | %llu | %llu / %.0f / %llu | %llu / %.0f / %llu | %.2f | %zu "
                    "| %.1f |\n",
                    variant.c_str(), static_cast<unsigned long long>(opt.producers),
                    static_cast<unsigned long long>(opt.consumers),
                    static_cast<unsigned long long>(opt.items),
                    static_cast<unsigned long long>(a.min_ns), a.avg_ns(),
                    static_cast<unsigned long long>(a.max_ns),
                    static_cast<unsigned long long>(r.min_ns), r.avg_ns(),
                    static_cast<unsigned long long>(r.max_ns), row.seconds * 1e3, row.blocks_owned,
                    static_cast<double>(row.blocks_owned) * static_cast<double>(opt.item_bytes) /
                        (1024.0 * 1024.0));
    }
    return status;
}

// @brief Benchmark: the slides' producer-consumer variants (spin, semaphore, bulk semaphore, condition variable, sleep polling) with batch 1 and 10.
#include "bench_cli.hpp"
#include "producer_consumer.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace t = dbgkit::targets;

constexpr const char* kUsage =
    "usage: producer_consumer_bench [--threads K] [--items N] [--batch B|both] [--sleep-us U]\n"
    "                               [--variant spin|semaphore|bulk_semaphore|condvar|sleep_poll|all]\n"
    "\n"
    "K threads share one unbounded queue; each takes one item, then adds B new ones, until N\n"
    "items were produced and consumed. Prints one row per variant and batch size: time and items\n"
    "per second, and checks that every item was consumed exactly once.\n"
    "\n"
    "  --threads K    threads (default 600, as the seed; its k = 20K threads is not run here)\n"
    "  --items N      items produced and consumed per run (default 200000)\n"
    "  --batch B      items produced per item consumed: a number, or both (default: 1 and 10,\n"
    "                 as the seed)\n"
    "  --sleep-us U   sleep_poll's sleep when the queue is empty, microseconds (default 100000,\n"
    "                 the seed's 100 ms)\n"
    "  --variant V    spin: PC 1.1, busy spin through the mutex; semaphore: PC 1.2, one release\n"
    "                 per item; bulk_semaphore: PC 1.4, releases after the batch; condvar: PC 3.0;\n"
    "                 sleep_poll: PC 3.4, sleeps when empty; all (default): each in turn\n"
    "  --help         this text\n"
    "\n"
    "Exit status: 0 on success, 1 if an item was lost or consumed twice, 2 on a bad argument.\n";

struct Options {
    t::PcConfig config;
    std::vector<unsigned> batches{1, 10};
    std::vector<t::PcVariant> variants = t::all_pc_variants();
};

const dbgkit::targets::cli::Program kProgram{"producer_consumer_bench", kUsage};

Options parse(int argc, char** argv) {
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--threads")) {
            opt.config.threads = static_cast<unsigned>(args.count(1, 20000));
        } else if (args.is("--items")) {
            opt.config.items = args.count(1, 1000000000ULL);
        } else if (args.is("--batch")) {
            if (std::string(args.value()) == "both") {
                opt.batches = {1, 10};
            } else {
                opt.batches = {static_cast<unsigned>(args.count(1, 1000000))};
            }
        } else if (args.is("--sleep-us")) {
            opt.config.sleep = std::chrono::microseconds(args.count(1, 10000000));
        } else if (args.is("--variant")) {
            args.variant(t::all_pc_variants(), opt.variants,
                         [](t::PcVariant pc) { return std::string(t::pc_variant_name(pc)); });
        } else {
            args.unknown();
        }
    }
    return opt;
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    std::printf("| variant | threads | batch | items | seconds | items/s |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    int status = 0;
    for (t::PcVariant v : opt.variants) {
        for (unsigned batch : opt.batches) {
            t::PcConfig config = opt.config;
            config.batch = batch;
            const t::PcResult r = t::run_pc(v, config);
            if (!r.exactly_once) {
                std::fprintf(stderr, "producer_consumer_bench: %s batch %u: items lost or repeated\n",
                             t::pc_variant_name(v), batch);
                status = 1;
            }
            std::printf("| %s | %u | %u | %llu | %.3f | %.0f |\n", t::pc_variant_name(v),
                        config.threads, batch, static_cast<unsigned long long>(r.consumed),
                        r.seconds, static_cast<double>(r.consumed) / r.seconds);
        }
    }
    return status;
}

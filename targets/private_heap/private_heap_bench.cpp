// @brief Benchmark: threads allocating and freeing small blocks through malloc, a per-thread free-list heap and an arena.
#include "bench_cli.hpp"
#include "private_heap.hpp"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

using dbgkit::targets::Arena;
using dbgkit::targets::FreeListHeap;

constexpr const char* kUsage =
    "usage: private_heap_bench [--threads T] [--blocks K] [--block-bytes B]\n"
    "                          [--variant malloc|heap|arena|all]\n"
    "\n"
    "T threads each allocate K blocks of B bytes (writing into each), then free them, as the\n"
    "seed's HeapThread; prints one row per variant (time, allocations per second).\n"
    "\n"
    "  --threads T      threads (default 12, as the seed)\n"
    "  --blocks K       blocks per thread (default 1000000; the seed's 10000000 needs ~5 GiB\n"
    "                   through malloc with 12 threads and minutes on 2 cores)\n"
    "  --block-bytes B  block size (default 4, the seed's sizeof(DWORD))\n"
    "  --variant V      malloc: malloc and free each block (the process heap, shared by all\n"
    "                   threads); heap: a free-list heap per thread, no locking, free each block;\n"
    "                   arena: an arena per thread, destroyed at once without freeing the blocks;\n"
    "                   all (default): every variant\n"
    "  --help           this text\n"
    "\n"
    "Exit status: 0 on success, 1 if an allocation failed, 2 on a bad argument.\n";

const std::vector<std::string> kVariants{"malloc", "heap", "arena"};

struct Options {
    std::uint64_t threads = 12;
    std::uint64_t blocks = 1000000;
    std::uint64_t block_bytes = 4;
    std::vector<std::string> variants = kVariants;
};

const dbgkit::targets::cli::Program kProgram{"private_heap_bench", kUsage};

Options parse(int argc, char** argv) {
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--threads")) {
            opt.threads = args.count(1, 1000);
        } else if (args.is("--blocks")) {
            opt.blocks = args.count(1, std::uint64_t{1} << 32);
        } else if (args.is("--block-bytes")) {
            opt.block_bytes = args.count(4, 1 << 20);
        } else if (args.is("--variant")) {
            args.variant(kVariants, opt.variants);
        } else {
            args.unknown();
        }
    }
    return opt;
}

/// Writes the block's index into it, so each block is really used.
inline void touch(void* block, std::uint32_t i) { std::memcpy(block, &i, sizeof i); }

bool thread_body(const std::string& variant, std::vector<void*>& arr, std::size_t bytes) {
    const auto n = static_cast<std::uint32_t>(arr.size());
    if (variant == "malloc") {
        for (std::uint32_t i = 0; i < n; ++i) {
            arr[i] = std::malloc(bytes);
            if (arr[i] == nullptr) {
                for (std::uint32_t j = 0; j < i; ++j) {
                    std::free(arr[j]);
                }
                return false;
            }
            touch(arr[i], i);
        }
        for (std::uint32_t i = 0; i < n; ++i) {
            std::free(arr[i]);
        }
    } else if (variant == "heap") {
        FreeListHeap heap(bytes);
        for (std::uint32_t i = 0; i < n; ++i) {
            arr[i] = heap.allocate();
            touch(arr[i], i);
        }
        for (std::uint32_t i = 0; i < n; ++i) {
            heap.deallocate(arr[i]);
        }
    } else {
        Arena arena;
        for (std::uint32_t i = 0; i < n; ++i) {
            arr[i] = arena.allocate(bytes);
            touch(arr[i], i);
        }
    }  // the heap or arena frees its chunks here
    return true;
}

/// Runs one variant; returns seconds, or a negative value if an allocation failed.
double run(const std::string& variant, const Options& opt) {
    // The pointer arrays are made before the clock starts (the seed allocates them in the thread).
    std::vector<std::vector<void*>> arrays(opt.threads, std::vector<void*>(opt.blocks));
    std::vector<char> ok(opt.threads, 0);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    threads.reserve(opt.threads);
    for (std::size_t t = 0; t < opt.threads; ++t) {
        threads.emplace_back([&, t] {
            try {
                ok[t] = thread_body(variant, arrays[t], opt.block_bytes) ? 1 : 0;
            } catch (const std::bad_alloc&) {
                ok[t] = 0;
            }
        });
    }
    for (std::thread& t : threads) {
        t.join();
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    for (char c : ok) {
        if (c == 0) {
            return -1.0;
        }
    }
    return elapsed.count();
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);
    std::printf("| variant | threads | blocks per thread | block bytes | ms | allocations/s |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    int status = 0;
    for (const std::string& variant : opt.variants) {
        const double seconds = run(variant, opt);
        if (seconds < 0) {
            std::fprintf(stderr, "private_heap_bench: %s: an allocation failed\n", variant.c_str());
            status = 1;
            continue;
        }
        std::printf("| %s | %llu | %llu | %llu | %.2f | %.0f |\n", variant.c_str(),
                    static_cast<unsigned long long>(opt.threads),
                    static_cast<unsigned long long>(opt.blocks),
                    static_cast<unsigned long long>(opt.block_bytes), seconds * 1e3,
                    static_cast<double>(opt.threads * opt.blocks) / seconds);
    }
    return status;
}

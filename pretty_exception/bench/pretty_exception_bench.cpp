/// @brief Benchmark: throw+catch of a pretty exception vs std::runtime_error at several depths, and the cost of printing.
//
// Built twice: pretty_exception_bench without the __cxa_throw hook, pretty_exception_bench_any
// (PE_BENCH_ANY=1) with it, where "plain" is a throw through the hook switched off and "any" the same
// throw with trace_all_exceptions(true).
// Prints one JSON object (nanoseconds). scripts/bench-pretty-exception.py runs it several times,
// takes medians and writes the table in docs/benchmarks.md. One process measures the cold first
// printing once (libdw start-up, reading debug information), so it must run as a fresh process.
#include "pretty_exception.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#ifndef PE_BENCH_ANY
#define PE_BENCH_ANY 0
#endif

namespace bench {

volatile int g_sink = 0;

// `depth` frames of this function above the throw; the volatile store keeps every frame real.
template <bool Pretty>
[[gnu::noinline]] int descend(int depth) {
    if (depth <= 1) {
        if constexpr (Pretty)
            THROW_RUNTIME_ERROR("benchmark");
        else
            throw std::runtime_error("benchmark");
    }
    const int r = descend<Pretty>(depth - 1);
    g_sink = r;
    return r + 1;
}

using clock = std::chrono::steady_clock;

double ns_since(clock::time_point t0, long n) {
    return std::chrono::duration<double, std::nano>(clock::now() - t0).count() / static_cast<double>(n);
}

template <bool Pretty>
double throw_catch_ns(int depth, long iterations) {
    const auto t0 = clock::now();
    for (long i = 0; i < iterations; ++i) {
        try {
            descend<Pretty>(depth);
        } catch (const std::exception& e) {
            g_sink = e.what()[0];
        }
    }
    return ns_since(t0, iterations);
}

/// A fresh pretty exception thrown from `depth` frames (caught here, returned by value).
pretty_exception::traced<std::runtime_error> caught(int depth) {
    try {
        descend<true>(depth);
    } catch (const pretty_exception::traced<std::runtime_error>& e) {
        return e;
    }
    std::abort();
}

}  // namespace bench

int main(int argc, char** argv) {
    long iterations = 20000;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atol(argv[i + 1]);

    // Printing first: the cold first printing must be the first symbolisation of this process.
    const int print_depth = 20;
    auto e1 = bench::caught(print_depth);
    auto t0 = bench::clock::now();
    std::size_t chars = pretty_exception::to_string(e1).size();
    const double first_cold = bench::ns_since(t0, 1);
    auto e2 = bench::caught(print_depth);
    t0 = bench::clock::now();
    chars += pretty_exception::to_string(e2).size();
    const double first_warm = bench::ns_since(t0, 1);
    const long reprints = 2000;
    t0 = bench::clock::now();
    for (long i = 0; i < reprints; ++i) chars += pretty_exception::to_string(e2).size();
    const double later = bench::ns_since(t0, reprints);

    std::printf("{\"iterations\": %ld, \"print_depth\": %d, \"first_print_cold_ns\": %.0f, "
                "\"first_print_warm_ns\": %.0f, \"later_print_ns\": %.0f, \"chars\": %zu, \"depths\": [",
                iterations, print_depth, first_cold, first_warm, later, chars);
    const int depths[] = {5, 20, 50};
    for (std::size_t i = 0; i < 3; ++i) {
        const int d = depths[i];
        bench::throw_catch_ns<false>(d, iterations / 10);  // warm-up: unwinder caches, allocator
        bench::throw_catch_ns<true>(d, iterations / 10);
        // Interleaved halves, so drift of a shared machine weighs on all alike.
        double plain = 0, pretty = 0, any = 0;
        for (int half = 0; half < 2; ++half) {
            plain += bench::throw_catch_ns<false>(d, iterations / 2) / 2;
            pretty += bench::throw_catch_ns<true>(d, iterations / 2) / 2;
#if PE_BENCH_ANY
            // The same plain throw, its stack recorded by the __cxa_throw hook.
            pretty_exception::trace_all_exceptions(true);
            any += bench::throw_catch_ns<false>(d, iterations / 2) / 2;
            pretty_exception::trace_all_exceptions(false);
#endif
        }
        std::printf("%s{\"depth\": %d, \"plain_ns\": %.1f, \"pretty_ns\": %.1f", i ? ", " : "", d, plain, pretty);
        if (PE_BENCH_ANY) std::printf(", \"any_ns\": %.1f", any);
        std::printf("}");
    }
    std::printf("]}\n");
    return 0;
}

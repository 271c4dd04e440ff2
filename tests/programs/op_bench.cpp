// @brief The per-operation benchmark of scripts/bench-recorder.py: N heap events of one entry point.
//
// `op_bench OP N` makes N heap events (N rounded down to a whole number of iterations) through the
// entry point OP, each allocation and release two frames deep (main -> loop -> allocate): OP is
//   malloc          malloc + free
//   calloc          calloc + free
//   realloc         realloc(NULL, n), realloc(p, n + 512), realloc(q, 0): three reallocs
//   posix_memalign  posix_memalign(64) + free
//   aligned_alloc   aligned_alloc(64) + free
//   new             operator new + operator delete
//   new[]           operator new[] + operator delete[]
//   sized_delete    operator new + sized operator delete
//   aligned_new     aligned operator new (64) + aligned operator delete
// Sizes vary from 16 to 527 bytes. Built -O2 -fomit-frame-pointer -g: the recorder walks from the
// CFI. The operators are called by name (::operator new), which the compiler never elides. N = 0
// starts and exits (no event: the start-up cost). It prints nothing but, when OP_BENCH_TIME is set
// in the environment, `op_bench: loop_ns WALL cpu_ns CPU` on stderr: the loop's own wall and
// process CPU time (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID), without the start-up. A bad
// argument is one line on stderr and exit 2.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <ctime>

#if defined(__GNUC__) && !defined(__clang__)
#define CHAIN __attribute__((noipa))
#else
#define CHAIN __attribute__((noinline))
#endif

namespace {

void *volatile sink;

size_t size_of(long i) { return 16 + static_cast<size_t>((i * 7919) % 512); }

constexpr std::align_val_t kAlign{64};

// One iteration of OP: its events, each made here (one frame below loop(), two below main).
CHAIN long once(int op, long i) {
    size_t n = size_of(i);
    void *p = nullptr;
    switch (op) {
    case 0: p = malloc(n); sink = p; free(p); return 2;
    case 1: p = calloc(1, n); sink = p; free(p); return 2;
    case 2:
        p = realloc(nullptr, n);
        sink = p;
        p = realloc(p, n + 512);
        sink = p;
        sink = realloc(p, 0);
        return 3;
    case 3:
        if (posix_memalign(&p, 64, n) != 0) std::abort();
        sink = p;
        free(p);
        return 2;
    case 4: p = aligned_alloc(64, (n + 63) & ~size_t{63}); sink = p; free(p); return 2;
    case 5: p = ::operator new(n); sink = p; ::operator delete(p); return 2;
    case 6: p = ::operator new[](n); sink = p; ::operator delete[](p); return 2;
    case 7: p = ::operator new(n); sink = p; ::operator delete(p, n); return 2;
    default: p = ::operator new(n, kAlign); sink = p; ::operator delete(p, kAlign); return 2;
    }
}

CHAIN long loop(int op, long events) {
    long per = op == 2 ? 3 : 2;  // events of one iteration
    long made = 0;
    for (long i = 0; i < events / per; i++) made += once(op, i);
    return made;
}

}  // namespace

int main(int argc, char **argv) {
    static const char *const ops[] = {"malloc", "calloc", "realloc", "posix_memalign",
                                      "aligned_alloc", "new", "new[]", "sized_delete",
                                      "aligned_new"};
    int op = -1;
    for (int k = 0; argc == 3 && k < 9; k++)
        if (std::strcmp(argv[1], ops[k]) == 0) op = k;
    char *end = nullptr;
    long events = argc == 3 ? std::strtol(argv[2], &end, 10) : -1;
    if (op < 0 || events < 0 || *end != '\0') {
        std::fprintf(stderr, "usage: op_bench OP EVENTS (OP: malloc, calloc, realloc, "
                             "posix_memalign, aligned_alloc, new, new[], sized_delete, "
                             "aligned_new)\n");
        return 2;
    }
    timespec w0{}, c0{}, w1{}, c1{};
    clock_gettime(CLOCK_MONOTONIC, &w0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    long made = loop(op, events);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    auto ns = [](const timespec &a, const timespec &b) {
        return (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
    };
    if (std::getenv("OP_BENCH_TIME") != nullptr)
        std::fprintf(stderr, "op_bench: loop_ns %ld cpu_ns %ld\n", ns(w0, w1), ns(c0, c1));
    return made > events;
}

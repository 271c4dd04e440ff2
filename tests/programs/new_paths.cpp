// @brief The recorder's two ways through the C++ operators (docs/recorder.md, "C++ operators").
//
// Built twice: `new_paths`, whose operators are libstdc++'s (the recorder's direct path: it calls
// malloc, aligned_alloc and free itself), and `new_paths_counting`, linked with
// libnew_counting.so, whose operator new and operator delete count their calls and come before
// libstdc++'s (the recorder must call them: its path through the real operators). Both make the
// same calls: 3 new, 2 new[], 1 aligned new, a huge new that fails (its new_handler is called
// twice, the second time uninstalling itself, then std::bad_alloc), and deletes of every block
// but one (an int: the leak) in the plain, array, aligned and sized forms. Printed: the handler's
// calls, and the counting library's counts when it is linked.
#include <cstdio>
#include <cstdlib>
#include <new>

extern "C" {
// libnew_counting.so's counters; absent (weak, null) from new_paths
extern long new_counting_news __attribute__((weak));
extern long new_counting_deletes __attribute__((weak));
}

static void *volatile sink;
static int handler_calls;

// The new_handler: counts its calls; the second uninstalls it, so the failing new throws.
static void handler() {
    if (++handler_calls >= 2) std::set_new_handler(nullptr);
}

template <class T> static T *hide(T *p) {
    sink = p;
    return p;
}

int main() {
    int *a = hide(new int(1));                 // ALLOC: new-int
    long *b = hide(new long[4]);               // ALLOC: new-array
    char *c = hide(new char[100]);             // ALLOC: new-array-chars
    void *d = hide(::operator new(64, std::align_val_t(128)));  // ALLOC: aligned-new
    double *e = hide(new double(2.0));         // ALLOC: new-double
    sink = hide(new int(7));                   // LEAK: new-leak
    std::set_new_handler(handler);
    try {
        sink = ::operator new(std::size_t{1} << 62);  // FAIL: huge-new
    } catch (const std::bad_alloc &) {
        std::printf("bad_alloc after %d new_handler calls\n", handler_calls);
    }
    delete a;                                  // FREE: delete-int
    delete[] b;                                // FREE: delete-array
    delete[] c;                                // FREE: delete-array-chars
    ::operator delete(d, std::align_val_t(128));  // FREE: aligned-delete
    ::operator delete(e, sizeof *e);           // FREE: sized-delete
    if (&new_counting_news != nullptr)
        std::printf("counting library: %ld new, %ld delete\n", new_counting_news,
                    new_counting_deletes);
    return 0;
}

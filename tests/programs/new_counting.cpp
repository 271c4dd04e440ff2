// @brief libnew_counting.so: operator new and operator delete of a library other than libstdc++,
// counting their calls (tests/programs/new_paths.cpp). The recorder finds them with RTLD_NEXT and
// must call them, not the C library itself: each new and delete the program makes is counted.
#include <cstdlib>
#include <new>

extern "C" {
__attribute__((visibility("default"))) long new_counting_news;
__attribute__((visibility("default"))) long new_counting_deletes;
}

void *operator new(std::size_t size) {
    new_counting_news++;
    for (;;) {
        if (void *p = std::malloc(size != 0 ? size : 1)) return p;
        std::new_handler h = std::get_new_handler();
        if (h == nullptr) throw std::bad_alloc();
        h();
    }
}

void operator delete(void *p) noexcept {
    new_counting_deletes++;
    std::free(p);
}

void operator delete(void *p, std::size_t) noexcept { operator delete(p); }

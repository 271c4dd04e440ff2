/* @brief Leaks one block through each other form of operator new: aligned (libstdc++ calls
 * aligned_alloc), aligned array, nothrow, nothrow array, and an array of a class with a destructor
 * (new[] adds a cookie: 8 bytes more than the elements). valgrind: 304 bytes in 5 blocks. */
#include <cstdio>
#include <new>

struct alignas(64) Wide {
    char bytes[64];
};

struct WithDestructor {
    ~WithDestructor() { std::puts(""); }
    int value;
};

int main() {
    Wide *wide = new Wide;  // LEAK: aligned
    Wide *wides = new Wide[3];  // LEAK: aligned-array
    int *one = new (std::nothrow) int(5);  // LEAK: nothrow
    int *many = new (std::nothrow) int[7];  // LEAK: nothrow-array
    WithDestructor *objects = new WithDestructor[2];  // LEAK: cookie-array
    std::printf("%p %p %p %p %p\n", static_cast<void *>(wide), static_cast<void *>(wides),
                static_cast<void *>(one), static_cast<void *>(many), static_cast<void *>(objects));
    return 0;
}

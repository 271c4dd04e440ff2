// @brief object-size: reading an int through a pointer to a 2-byte heap block.
//
// The check compares the access with __builtin_object_size, which only the optimiser can compute:
// -fsanitize=object-size is silent at -O0, so this demo's sanitized builds are made at -O2.
#include <cstdio>
#include <cstdlib>

int main() {
    auto *small = static_cast<char *>(std::calloc(1, 2));
    std::printf("value %d\n", *reinterpret_cast<int *>(small));  // UB: object-size
    std::free(small);
    return 0;
}

/* @brief The heap errors where C++ is the point, one per mode (argv[1]), marked as in heap_errors.c
 * (tests/e2e/test_heap_error_programs.py, tests/fixtures/heap_errors.tsv):
 *
 *   new-array-underflow   an int written just before a `new int[8]` array
 *   delete-array-trivial  `delete` of a `new int[8]` array: the pointer is the block's, the operator the
 *                         wrong one
 *   delete-array-dtor     `delete` of a `new Named[4]` array of a class with a destructor: new[] put the
 *                         element count in the block's first 8 bytes, so `delete` passes a pointer 8 bytes
 *                         into the block (a mismatch, which the tools see as a free of an interior pointer)
 *   clean                 a heavy correct program: the standard containers, strings, shared and unique
 *                         pointers, in several threads; no error, nothing left */
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"

namespace {

volatile int sink;

struct Named {
    Named() : length(0) {}
    ~Named() { sink = length; }
    int length;
};

int new_array_underflow() {
    int *values = new int[8]();  // ALLOC: new-array-underflow
    values[-1] = 7;  // ERROR: new-array-underflow
    sink = values[0];
    return 0;  /* not deleted: glibc's chunk header is what the write hit */
}

int delete_array_trivial() {
    int *values = new int[8]();  // ALLOC: delete-array-trivial
    sink = values[3];
    delete values;  // ERROR: delete-array-trivial
    return 0;
}

int delete_array_dtor() {
    Named *names = new Named[4];  // ALLOC: delete-array-dtor
    sink = names[3].length;
    delete names;  // ERROR: delete-array-dtor
    return 0;
}

void clean_worker(int seed) {
    std::map<int, std::string> by_key;
    std::unordered_map<std::string, std::vector<int>> by_name;
    std::vector<std::shared_ptr<std::string>> shared;
    for (int round = 0; round < 700; round++) {
        int key = (seed * 7919 + round * 104729) % 997;
        by_key[key] = std::string(static_cast<size_t>(key % 300), 'x');
        auto &list = by_name["name " + std::to_string(key % 50)];
        list.push_back(round);
        if (list.size() > 40) {
            list.erase(list.begin(), list.begin() + 20);
            list.shrink_to_fit();
        }
        shared.push_back(std::make_shared<std::string>(by_key[key]));
        if (shared.size() > 100) {
            shared.erase(shared.begin(), shared.begin() + 50);
        }
        auto owned = std::make_unique<Named[]>(static_cast<size_t>(round % 17 + 1));
        owned[0].length = round;
        if (round % 3 == 0) {
            by_key.erase(key);
        }
    }
    sink = static_cast<int>(by_key.size() + by_name.size() + shared.size());
}

int clean() {
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; i++) {
        threads.emplace_back(clean_worker, i);
    }
    for (auto &thread : threads) {
        thread.join();
    }
    return 0;
}

const struct {
    const char *name;
    int (*run)();
} MODES[] = {
    {"new-array-underflow", new_array_underflow},
    {"delete-array-trivial", delete_array_trivial},
    {"delete-array-dtor", delete_array_dtor},
    {"clean", clean},
};

}  // namespace

int main(int argc, char **argv) {
    for (const auto &mode : MODES) {
        if (argc == 2 && std::strcmp(argv[1], mode.name) == 0) {
            return mode.run();
        }
    }
    std::fprintf(stderr, "usage: heap_errors_cpp MODE (new-array-underflow, delete-array-trivial, "
                         "delete-array-dtor, clean)\n");
    return 2;
}

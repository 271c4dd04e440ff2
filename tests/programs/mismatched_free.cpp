/* @brief Every mismatched deallocation valgrind memcheck reports ("Mismatched free() / delete /
 * delete []"), each at a marked line, and the matching pairs, which are fine: free of a new and of
 * a new[] block, realloc of a new block, delete of a malloc and of a new[] block, delete[] of a new
 * block (and of a malloc block). Every block is released: nothing leaks. The pointers go through
 * a volatile sink so that the compiler cannot pair or drop the calls.
 *
 * `mismatched_free bad-alloc` instead makes each form of operator new fail (std::bad_alloc caught,
 * or NULL from a nothrow form), then allocates and frees normally, and leaks one block.
 * `mismatched_free serve` says "ready" and answers each line of stdin: `run` does what the program
 * does without arguments, `exit` exits (to be attached to). */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

static void *volatile sink;

template <typename T>
static T *hide(T *p) {
    sink = p;
    return static_cast<T *>(sink);
}

static void free_of_new() {
    int *p = hide(new int(1));  // ALLOC: free-of-new
    std::free(p);  // MISMATCH: free-of-new
}

static void free_of_new_array() {
    char *p = hide(new char[10]);  // ALLOC: free-of-new-array
    std::free(p);  // MISMATCH: free-of-new-array
}

static void realloc_of_new() {
    long *p = hide(new long(2));  // ALLOC: realloc-of-new
    void *q = std::realloc(p, 64);  // MISMATCH: realloc-of-new
    std::free(q);  // FREE: realloc-of-new
}

static void delete_of_malloc() {
    int *p = hide(static_cast<int *>(std::malloc(12)));  // ALLOC: delete-of-malloc
    delete p;  // MISMATCH: delete-of-malloc
}

static void delete_of_new_array() {
    short *p = hide(new short[7]);  // ALLOC: delete-of-new-array
    delete p;  // MISMATCH: delete-of-new-array
}

static void delete_array_of_new() {
    double *p = hide(new double(3.0));  // ALLOC: delete-array-of-new
    delete[] p;  // MISMATCH: delete-array-of-new
}

static void delete_array_of_malloc() {
    char *p = hide(static_cast<char *>(std::malloc(20)));  // ALLOC: delete-array-of-malloc
    delete[] p;  // MISMATCH: delete-array-of-malloc
}

static void matching_pairs() {
    int *one = hide(new int(4));  // ALLOC: new
    delete one;  // FREE: delete
    char *many = hide(new char[33]);  // ALLOC: new-array
    delete[] many;  // FREE: delete-array
    int *quiet = hide(new (std::nothrow) int(5));  // ALLOC: nothrow-new
    delete quiet;  // FREE: nothrow-delete
    void *block = hide(std::malloc(8));  // ALLOC: malloc
    std::free(block);  // FREE: free
}

static size_t volatile huge = size_t(1) << 62;

static void failing_news() {
    try {
        sink = new char[huge];  // FAIL: new-array
    } catch (const std::bad_alloc &) {
        std::puts("bad_alloc: new[]");
    }
    try {
        sink = ::operator new(huge);  // FAIL: new
    } catch (const std::bad_alloc &) {
        std::puts("bad_alloc: new");
    }
    try {
        sink = ::operator new(huge, std::align_val_t(64));  // FAIL: aligned-new
    } catch (const std::bad_alloc &) {
        std::puts("bad_alloc: aligned new");
    }
    sink = new (std::nothrow) char[huge];  // FAIL: nothrow-new-array
    std::printf("nothrow new[]: %p\n", sink);
    int *after = hide(new int(6));  // ALLOC: after-bad-alloc
    delete after;  // FREE: after-bad-alloc
    sink = new long[3];  // LEAK: after-bad-alloc
}

static void mismatches() {
    free_of_new();  // CALL: free-of-new
    free_of_new_array();  // CALL: free-of-new-array
    realloc_of_new();  // CALL: realloc-of-new
    delete_of_malloc();  // CALL: delete-of-malloc
    delete_of_new_array();  // CALL: delete-of-new-array
    delete_array_of_new();  // CALL: delete-array-of-new
    delete_array_of_malloc();  // CALL: delete-array-of-malloc
    matching_pairs();
}

int main(int argc, char **argv) {
    if (argc > 1 && std::strcmp(argv[1], "bad-alloc") == 0) {
        failing_news();
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "serve") == 0) {
        std::puts("ready");
        std::fflush(stdout);
        char line[64];
        while (std::fgets(line, sizeof line, stdin) != nullptr &&
               std::strcmp(line, "exit\n") != 0) {
            mismatches();  // CALL: mismatches-served
            std::puts("ok");
            std::fflush(stdout);
        }
        return 0;
    }
    mismatches();  // CALL: mismatches
    std::puts("done");
    return 0;
}

/* @brief Every mismatched deallocation valgrind memcheck reports ("Mismatched free() / delete /
 * delete []"), each at a marked line, and the matching pairs, which are fine: free of a new and of
 * a new[] block, realloc of a new block, delete of a malloc and of a new[] block, delete[] of a new
 * block (and of a malloc block). Every block is released: nothing leaks. The pointers go through
 * a volatile sink so that the compiler cannot pair or drop the calls. */
#include <cstdio>
#include <cstdlib>
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

int main() {
    free_of_new();
    free_of_new_array();
    realloc_of_new();
    delete_of_malloc();
    delete_of_new_array();
    delete_array_of_new();
    delete_array_of_malloc();
    matching_pairs();
    std::puts("done");
    return 0;
}

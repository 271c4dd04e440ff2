// @brief Growth chains for the array analyser (memdump-analyze --growth): three vectors grown one
// element at a time to 100 ints (7 regrowths each: 1, 2, 4, ... 128 ints), a C buffer doubled by
// realloc five times (16 to 512 bytes), and a vector reserved first (no regrowth).
#include <cstdlib>
#include <cstring>
#include <vector>

static void fill(std::vector<int> &v, int n)
{
    for (int i = 0; i < n; i++)
        v.push_back(i);  // GROW: push
}

int main()
{
    for (int k = 0; k < 3; k++) {
        std::vector<int> v;
        fill(v, 100);  // GROW: three
    }
    size_t cap = 16;
    char *buf = static_cast<char *>(malloc(cap));
    for (int i = 0; i < 5; i++) {
        cap *= 2;
        buf = static_cast<char *>(realloc(buf, cap));  // GROW: realloc
        memset(buf, 0, cap);
    }
    free(buf);
    std::vector<int> reserved;
    reserved.reserve(100);
    fill(reserved, 100);
    return 0;
}

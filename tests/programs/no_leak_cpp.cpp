/* @brief A C++ program that frees everything it allocates: iostream, std::string, std::vector,
 * std::map and a thrown and caught exception. libstdc++'s emergency exception pool and the stream
 * buffers are runtime blocks, not leaks. */
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

static int parse(const std::string &text) {
    if (text.empty()) {
        throw std::invalid_argument("empty input string that is long enough to be allocated");
    }
    return static_cast<int>(text.size());
}

int main() {
    std::string name = "a string longer than the small string buffer";
    std::vector<int> numbers;
    for (int i = 0; i < 100; i++) {
        numbers.push_back(i);
    }
    std::map<std::string, int> counts;
    counts["first key long enough to allocate its own buffer"] = 1;
    counts["second key long enough to allocate its own buffer"] = 2;
    int caught = 0;
    try {
        parse("");
    } catch (const std::invalid_argument &err) {
        caught = static_cast<int>(std::string(err.what()).size());
    }
    std::cout << name << ' ' << numbers.size() << ' ' << counts.size() << ' ' << caught << std::endl;
    return 0;
}

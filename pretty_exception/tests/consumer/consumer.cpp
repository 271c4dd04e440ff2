/// @brief A user's program: throws through a frame of its own, prints the description, checks its first frame.
#include <pretty_exception.h>

#include <iostream>
#include <stdexcept>

namespace consumer {
[[gnu::noinline]] void thrower(int n) { THROW_INVALID_ARGUMENT("consumer says ", n); }
}  // namespace consumer

int main() {
    try {
        consumer::thrower(42);
    } catch (const std::invalid_argument& e) {
        std::cout << pretty_exception::to_string(e);
        const pretty_exception::traced_base* t = pretty_exception::trace_of(e);
        if (t == nullptr || t->trace().frames().empty()) return 1;
        const pretty_exception::frame& top = t->trace().frames().front();
        return top.function == "consumer::thrower(int)" && top.line == t->line() ? 0 : 1;
    }
    return 2;
}

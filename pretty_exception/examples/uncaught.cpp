/// @brief pretty_exception example: the terminate handler describes an exception nobody caught, then aborts.
#include "pretty_exception.h"

#include <map>
#include <string>

namespace inventory {

[[gnu::noinline]] int stock(const std::map<std::string, int>& items, const std::string& name) {
    const auto it = items.find(name);
    if (it == items.end()) PRETTY_THROW(std::out_of_range, "no item named '", name, "'");
    return it->second;
}

[[gnu::noinline]] int total(const std::map<std::string, int>& items) { return stock(items, "bolts") + stock(items, "nuts"); }

}  // namespace inventory

int main() {
    pretty_exception::install_terminate_handler();
    const std::map<std::string, int> items{{"bolts", 12}};
    return inventory::total(items);  // throws, nobody catches: described on stderr, then abort()
}

/// @brief pretty_exception example: a config reader throws through several frames; main prints the description.
#include "pretty_exception.h"

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace config {

struct setting {
    std::string key;
    int value;
};

// A type of the application's own: PRETTY_THROW works with any std::exception taking a message.
struct config_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

[[gnu::noinline]] int parse_number(const std::string& text, int line) {
    std::size_t used = 0;
    int value = 0;
    try {
        value = std::stoi(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used != text.size() || text.empty()) THROW_INVALID_ARGUMENT("line ", line, ": '", text, "' is not a number");
    return value;
}

[[gnu::noinline]] setting parse_line(const std::string& text, int line) {
    const auto eq = text.find('=');
    if (eq == std::string::npos) PRETTY_THROW(config_error, "line " + std::to_string(line) + ": no '='");
    return setting{text.substr(0, eq), parse_number(text.substr(eq + 1), line)};
}

[[gnu::noinline]] std::vector<setting> load(std::istream& in) {
    std::vector<setting> out;
    std::string text;
    for (int line = 1; std::getline(in, text); ++line) out.push_back(parse_line(text, line));
    return out;
}

}  // namespace config

int main() {
    pretty_exception::install_terminate_handler();  // anything uncaught is described too
    std::istringstream file("threads=4\nport=8080\nretries=eight\n");
    try {
        for (const auto& s : config::load(file)) std::cout << s.key << " = " << s.value << '\n';
    } catch (const pretty_exception::traced_base& t) {
        // Site and stack as data...
        std::cerr << "failed at " << t.file() << ':' << t.line() << " (" << t.trace().size() << " frames)\n";
        // ...or the whole description, coloured on a terminal.
        std::cerr << t;
    }
    return 0;
}

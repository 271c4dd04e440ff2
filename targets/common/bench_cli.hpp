/**
 * @brief Command-line helpers shared by the target benchmarks: one usage error, one count parser.
 */
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace dbgkit::targets::cli {

/// A benchmark's name (the prefix of its error lines) and its usage text.
struct Program {
    const char* name;
    const char* usage;
};

/// Prints `NAME: MESSAGE` and the usage on stderr, then exits with status 2 (bad arguments).
[[noreturn]] inline void usage_error(const Program& program, const std::string& message) {
    std::fprintf(stderr, "%s: %s\n%s", program.name, message.c_str(), program.usage);
    std::exit(2);
}

/// The decimal integer `text`, the value of `option`, within [min, max]; anything else (missing,
/// signed, trailing characters, out of range) is a usage error.
inline std::uint64_t count(const Program& program, const char* option, const char* text,
                           std::uint64_t min, std::uint64_t max) {
    if (text == nullptr) {
        usage_error(program, std::string(option) + " needs a value");
    }
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value < min ||
        value > max) {
        usage_error(program, std::string(option) + ": not an integer from " + std::to_string(min) +
                                 " to " + std::to_string(max) + ": '" + text + "'");
    }
    return value;
}

}  // namespace dbgkit::targets::cli

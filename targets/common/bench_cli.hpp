/**
 * @brief Command-line helpers shared by the target benchmarks: usage error, count parser, argument walker.
 */
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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

/// Walks a benchmark's command line: `while (args.next()) { if (args.is("--ops")) ...; else
/// args.unknown(); }`. `--help` and `-h` print the usage on stdout and exit 0; every error is a
/// usage error (exit 2).
class Args {
public:
    Args(const Program& program, int argc, char** argv)
        : program_(program), argc_(argc), argv_(argv) {}

    /// Moves to the next argument; false after the last one.
    bool next() {
        i_ += 1 + taken_;
        taken_ = 0;
        if (i_ >= argc_) {
            return false;
        }
        arg_ = argv_[i_];
        if (arg_ == "--help" || arg_ == "-h") {
            std::fputs(program_.usage, stdout);
            std::exit(0);
        }
        return true;
    }

    /// Whether the current argument is OPTION.
    bool is(const char* option) const { return arg_ == option; }

    /// The current option's value (the next argument, consumed; asking again gives it again); a
    /// usage error when missing.
    const char* value() {
        if (i_ + 1 >= argc_) {
            usage_error(program_, arg_ + " needs a value");
        }
        taken_ = 1;
        return argv_[i_ + 1];
    }

    /// The current option's value as a count within [min, max] (see count()).
    std::uint64_t count(std::uint64_t min, std::uint64_t max) {
        const char* text = i_ + 1 < argc_ ? argv_[i_ + 1] : nullptr;
        taken_ = text != nullptr ? 1 : 0;
        return cli::count(program_, arg_.c_str(), text, min, max);
    }

    /// `--variant V`: the variant of KNOWN named V (NAME_OF gives a variant's name) selects it
    /// alone; `all` leaves SELECTED (every variant); anything else is a usage error.
    template <typename T, typename NameOf>
    void variant(const std::vector<T>& known, std::vector<T>& selected, NameOf name_of) {
        const std::string v = value();
        for (const T& k : known) {
            if (v == name_of(k)) {
                selected = {k};
                return;
            }
        }
        if (v != "all") {
            usage_error(program_, "unknown variant '" + v + "'");
        }
    }

    /// variant() for variants that are their names.
    void variant(const std::vector<std::string>& known, std::vector<std::string>& selected) {
        variant(known, selected, [](const std::string& name) { return name; });
    }

    /// The current argument is not an option of this program.
    [[noreturn]] void unknown() const { usage_error(program_, "unknown argument '" + arg_ + "'"); }

private:
    const Program& program_;
    int argc_;
    char** argv_;
    int i_ = 0;
    int taken_ = 0;
    std::string arg_;
};

}  // namespace dbgkit::targets::cli

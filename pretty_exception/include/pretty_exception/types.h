/// @brief pretty_exception's plain types: a throw site, a resolved frame, the colour mode, the syslog settings.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_TYPES_H
#define PRETTY_EXCEPTION_TYPES_H

#include <cstdint>
#include <string>

namespace pretty_exception {

/// Where an exception was thrown. `function` is the compiler's __PRETTY_FUNCTION__.
struct source_site {
    const char* file;
    int line;
    const char* function;
};

/// One resolved frame of a stack trace. Empty strings and 0 mean "not known".
struct frame {
    std::uintptr_t address = 0;  ///< looked-up address: the call instruction (return address - 1)
    std::string module;          ///< path of the ELF object holding `address`
    std::uintptr_t offset = 0;   ///< address - the object's load bias: `addr2line -e module offset`
    std::string function;        ///< demangled function name
    std::string file;            ///< source file (needs debug info)
    int line = 0;                ///< source line (needs debug info)
    bool inlined = false;        ///< a function the compiler inlined into the next frame
};

/// When output is coloured: `automatic` colours on a terminal; NO_COLOR (set and non-empty) always wins.
enum class colour_mode { automatic, always, never };

/// syslog tracing settings: one record per exception, at construction.
struct syslog_settings {
    bool enabled;
    int facility;  ///< LOG_USER, LOG_LOCAL0, ... (already shifted, as <syslog.h> defines them)
    int priority;  ///< LOG_ERR, LOG_WARNING, ...
};

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_TYPES_H

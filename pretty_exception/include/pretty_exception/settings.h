/// @brief pretty_exception's run-time settings: syslog, colour, runtime frames, frame filter, snippets, as atomics.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
///
/// The functions that set them are public in format.h (printing) and syslog.h (syslog).
#ifndef PRETTY_EXCEPTION_SETTINGS_H
#define PRETTY_EXCEPTION_SETTINGS_H

#include "config.h"
#include "types.h"

#include <atomic>
#include <cstdlib>
#include <syslog.h>

namespace pretty_exception {

namespace detail {

// ---------------------------------------------------------------------------------------------
// Configuration: atomics, so reading it is cheap, thread-safe and signal-safe.
// ---------------------------------------------------------------------------------------------
constexpr int syslog_enabled_bit = 1 << 16;

inline std::atomic<int>& syslog_word() noexcept {
    static std::atomic<int> word{(PRETTY_EXCEPTION_SYSLOG ? syslog_enabled_bit : 0) |
                                 (PRETTY_EXCEPTION_SYSLOG_FACILITY & LOG_FACMASK) |
                                 (PRETTY_EXCEPTION_SYSLOG_PRIORITY & LOG_PRIMASK)};
    return word;
}

inline std::atomic<int>& colour_word() noexcept {
    static std::atomic<int> word{static_cast<int>(colour_mode::automatic)};
    return word;
}

/// Set by the terminate handler just before abort(): the exception is described already.
inline std::atomic<bool>& terminate_reported() noexcept {
    static std::atomic<bool> reported{false};
    return reported;
}

inline std::atomic<bool>& runtime_frames_word() noexcept {
    static std::atomic<bool> shown{false};
    return shown;
}

inline std::atomic<bool (*)(const frame&)>& filter_word() noexcept {
    static std::atomic<bool (*)(const frame&)> filter{nullptr};
    return filter;
}

inline std::atomic<int>& snippet_word() noexcept {
    static std::atomic<int> lines{PRETTY_EXCEPTION_SNIPPETS};
    return lines;
}

inline bool no_colour_env() noexcept {
    const char* v = std::getenv("NO_COLOR");
    return v != nullptr && v[0] != '\0';
}

}  // namespace detail

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_SETTINGS_H

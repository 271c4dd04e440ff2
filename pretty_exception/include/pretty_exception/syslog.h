/// @brief pretty_exception's syslog records: one per traced exception, per recorded throw, per crash; set_syslog.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_SYSLOG_H
#define PRETTY_EXCEPTION_SYSLOG_H

#include "format.h"
#include "names.h"
#include "settings.h"
#include "thrown.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <string>
#include <typeinfo>
#include <paths.h>
#include <syslog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace pretty_exception {

namespace detail {

/// Send one syslog record: `text` is an argument, never a format. glibc's syslog() drops a record
/// silently when it cannot reach the log socket (no syslog daemon: a container, a minimal image, a
/// chroot without /dev/log), so the first record checks that socket, and an unreachable one is said
/// once on stderr; later records are sent as they are (they reach a daemon started since). Not
/// async-signal-safe (syslog); allocates nothing itself.
inline void send_to_syslog(int priority, const char* text) noexcept {
    static std::atomic<int> checked{0};  // 0: not yet, 1: reachable, 2: unreachable (said)
    if (checked.load(std::memory_order_relaxed) == 0) {
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, _PATH_LOG, sizeof addr.sun_path - 1);
        int error = 0;
        // What glibc tries: a datagram socket, then a stream one (EPROTOTYPE).
        for (const int type : {SOCK_DGRAM, SOCK_STREAM}) {
            const int fd = ::socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
            error = fd < 0 ? errno : ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 ? 0 : errno;
            if (fd >= 0) ::close(fd);
            if (error != EPROTOTYPE) break;
        }
        int expected = 0;
        if (checked.compare_exchange_strong(expected, error == 0 ? 1 : 2) && error != 0) {
            std::string line = "pretty_exception: syslog records are lost: cannot connect to " _PATH_LOG " (";
            line += std::strerror(error);
            line += "); no syslog daemon listens there\n";
            write_all(STDERR_FILENO, line);
        }
    }
    ::syslog(priority, "%s", text);
}

/// Send one record for `e` to syslog if tracing is on. Format-string safe: the text is an argument.
inline void trace_to_syslog(const std::exception& e) noexcept {
    const int w = syslog_word().load(std::memory_order_relaxed);
    if ((w & syslog_enabled_bit) == 0) return;
    try {
        std::string line;
        describe_into(line, e, false, true);
        send_to_syslog((w & LOG_FACMASK) | (w & LOG_PRIMASK), line.c_str());
    } catch (...) {
        send_to_syslog((w & LOG_FACMASK) | (w & LOG_PRIMASK),
                       "pretty_exception: an exception was thrown; out of memory while describing it");
    }
}

/// The syslog record of a throw the hook recorded (trace_all_exceptions()), if tracing is on: as
/// trace_to_syslog() for a std::exception, the type and the stack for anything else.
inline void trace_thrown_to_syslog(void* object, const std::type_info* type) noexcept {
    const int w = syslog_word().load(std::memory_order_relaxed);
    if ((w & syslog_enabled_bit) == 0) return;
#if defined(__GLIBCXX__)
    // What a `catch (const std::exception&)` would match, and the address it would bind to: libstdc++'s
    // type_info::__do_catch, the check the personality routine makes.
    void* adjusted = object;
    if (typeid(std::exception).__do_catch(type, &adjusted, 1)) {
        trace_to_syslog(*static_cast<const std::exception*>(adjusted));
        return;
    }
#endif
    try {
        std::string line = demangle(type->name()) + " (not derived from std::exception)";
        if (const stack_trace t = find_thrown(object, type); !t.empty()) {
            line += " | stack at the throw: ";
            append_trace(line, t, make_palette(false), "", true);
        }
        send_to_syslog((w & LOG_FACMASK) | (w & LOG_PRIMASK), line.c_str());
    } catch (...) {
        send_to_syslog((w & LOG_FACMASK) | (w & LOG_PRIMASK),
                       "pretty_exception: an exception was thrown; out of memory while describing it");
    }
}

}  // namespace detail

/// Switch syslog tracing on or off, with facility and priority (process-wide, thread-safe,
/// async-signal-safe, does not allocate). With tracing on, every traced exception sends one record when constructed.
inline void set_syslog(bool enabled, int facility = PRETTY_EXCEPTION_SYSLOG_FACILITY,
                       int priority = PRETTY_EXCEPTION_SYSLOG_PRIORITY) noexcept {
    detail::syslog_word().store((enabled ? detail::syslog_enabled_bit : 0) | (facility & LOG_FACMASK) |
                                    (priority & LOG_PRIMASK),
                                std::memory_order_relaxed);
}
/// The current syslog tracing settings. Does not allocate; async-signal-safe.
inline syslog_settings get_syslog() noexcept {
    const int w = detail::syslog_word().load(std::memory_order_relaxed);
    return syslog_settings{(w & detail::syslog_enabled_bit) != 0, w & LOG_FACMASK, w & LOG_PRIMASK};
}

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_SYSLOG_H

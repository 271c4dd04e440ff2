/// @brief pretty_exception's traced<T> and the macros that throw it (PRETTY_THROW, THROW_RUNTIME_ERROR, ...).
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_TRACED_H
#define PRETTY_EXCEPTION_TRACED_H

#include "capture.h"
#include "syslog.h"
#include "thrown.h"

#include <cstdint>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>

/// The throw site as the preprocessor and the compiler see it (file, line, enclosing function).
#define PRETTY_EXCEPTION_SITE \
    (::pretty_exception::source_site{__FILE__, __LINE__, static_cast<const char*>(__PRETTY_FUNCTION__)})

/// Throw a `pretty_exception::traced<Type>`: is-a `Type`, carries the site and the stack.
/// The message is one string-like argument (literal, std::string, std::string_view) or several
/// arguments streamed with `operator<<`. `Type` must derive from std::exception and take the message
/// as `const std::string&` or `const char*` in its constructor (or be default-constructible).
#define PRETTY_THROW(Type, ...) \
    throw ::pretty_exception::detail::make<Type>(PRETTY_EXCEPTION_SITE, __VA_ARGS__)
#define PRETTY_THROW_RUNTIME_ERROR(...) PRETTY_THROW(::std::runtime_error, __VA_ARGS__)
#define PRETTY_THROW_INVALID_ARGUMENT(...) PRETTY_THROW(::std::invalid_argument, __VA_ARGS__)
#define PRETTY_THROW_LENGTH_ERROR(...) PRETTY_THROW(::std::length_error, __VA_ARGS__)
#define PRETTY_THROW_LOGIC_ERROR(...) PRETTY_THROW(::std::logic_error, __VA_ARGS__)

#ifndef PRETTY_EXCEPTION_NO_SHORT_MACROS
#define THROW_RUNTIME_ERROR(...) PRETTY_THROW_RUNTIME_ERROR(__VA_ARGS__)
#define THROW_INVALID_ARGUMENT(...) PRETTY_THROW_INVALID_ARGUMENT(__VA_ARGS__)
#define THROW_LENGTH_ERROR(...) PRETTY_THROW_LENGTH_ERROR(__VA_ARGS__)
#define THROW_LOGIC_ERROR(...) PRETTY_THROW_LOGIC_ERROR(__VA_ARGS__)
#endif

namespace pretty_exception {

namespace detail {

struct capture_tag {};

}  // namespace detail
/// `T` plus a throw site and a stack: what PRETTY_THROW throws. Catchable as `T` (and its bases) and
/// as `traced_base`. `what()` is `T`'s, i.e. the message.
template <class T>
class traced : public T, public traced_base {
    static_assert(std::is_class_v<T> && std::is_base_of_v<std::exception, T>,
                  "pretty_exception: the thrown type must derive from std::exception");
    static_assert(!std::is_final_v<T>, "pretty_exception: the thrown type must not be final");

    using kind = std::integral_constant<int, std::is_constructible_v<T, const std::string&>  ? 0
                                             : std::is_constructible_v<T, const char*> ? 1
                                                                                       : 2>;

public:
    /// Throw site `site`, message `message`; captures the stack from the caller outwards. Allocates
    /// (the message and one block for the stack); the stack part never throws; not async-signal-safe.
    [[gnu::noinline]] traced(const source_site& site, const std::string& message)
        : traced(detail::capture_tag{}, reinterpret_cast<std::uintptr_t>(__builtin_return_address(0)),
                 site, message) {}

    /// @internal Used by PRETTY_THROW: the stack starts at `start_at`, the user's frame.
    traced(detail::capture_tag, std::uintptr_t start_at, const source_site& site, const std::string& message)
        : traced(kind{}, start_at, site, message) {}

    traced(const traced&) = default;
    traced& operator=(const traced&) = default;
    ~traced() override = default;

private:
    traced(std::integral_constant<int, 0>, std::uintptr_t start_at, const source_site& site,
           const std::string& message)
        : T(message), traced_base(site, typeid(T), detail::trace_access::make(detail::capture(start_at))) {
        detail::self_traced_object() = static_cast<const void*>(this);
        detail::trace_to_syslog(*this);
    }
    traced(std::integral_constant<int, 1>, std::uintptr_t start_at, const source_site& site,
           const std::string& message)
        : T(message.c_str()), traced_base(site, typeid(T), detail::trace_access::make(detail::capture(start_at))) {
        detail::self_traced_object() = static_cast<const void*>(this);
        detail::trace_to_syslog(*this);
    }
    traced(std::integral_constant<int, 2>, std::uintptr_t start_at, const source_site& site,
           const std::string& message)
        : T(), traced_base(site, typeid(T), detail::trace_access::make(detail::capture(start_at))) {
        detail::self_traced_object() = static_cast<const void*>(this);
        if (auto* s = detail::trace_access::state(trace())) {
            try {
                s->message = message;
            } catch (...) {
            }
        }
        detail::trace_to_syslog(*this);
    }
};

namespace detail {

template <class A>
constexpr bool is_string_like = std::is_convertible_v<const A&, std::string_view>;

/// The message from one string-like argument, or several streamed with operator<<.
template <class... Args>
std::string build_message(const Args&... args) {
    if constexpr (sizeof...(Args) == 1 && (is_string_like<Args> && ...)) {
        return std::string(std::string_view(args...));
    } else {
        std::ostringstream os;
        (os << ... << args);
        return os.str();
    }
}

/// What PRETTY_THROW calls: out of line (so the stack can start at its return address, the throw
/// site) and cold (the throw path does not bloat the caller's hot code).
template <class T, class... Args>
[[gnu::noinline, gnu::cold]] traced<T> make(const source_site& site, const Args&... args) {
    const auto start_at = reinterpret_cast<std::uintptr_t>(__builtin_return_address(0));
    return traced<T>(capture_tag{}, start_at, site, build_message(args...));
}

}  // namespace detail

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_TRACED_H

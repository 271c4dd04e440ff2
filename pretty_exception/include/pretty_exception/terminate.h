/// @brief pretty_exception's terminate handler: an uncaught exception described with its stack (install_terminate_handler).
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_TERMINATE_H
#define PRETTY_EXCEPTION_TERMINATE_H

#include "capture.h"
#include "format.h"
#include "names.h"
#include "settings.h"
#include "thrown.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>
#include <cxxabi.h>
#include <unistd.h>

namespace pretty_exception {

namespace detail {

[[noreturn]] inline void terminate_handler() noexcept {
    static std::atomic<bool> entered{false};
    if (entered.exchange(true)) std::abort();  // terminate from within the handler
    try {
        const bool colour = colour_for(STDERR_FILENO);
        const palette p = make_palette(colour);
        const thread_label thread = thread_label::current();
        std::string out = "terminate called after an uncaught exception";
        out += thread.view();
        out += ":\n";
        bool need_stack = true;
        if (std::exception_ptr ep = std::current_exception()) {
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                describe_into(out, e, colour, false);
                need_stack = find_trace(e) == nullptr &&
                             find_thrown(dynamic_cast<const void*>(&e), &typeid(e)).empty();
            } catch (...) {
                const std::type_info* t = abi::__cxa_current_exception_type();
                out += p.type;
                out += t != nullptr ? demangle(t->name()) : std::string("an unknown type");
                out += p.reset;
                out += " (not derived from std::exception)\n";
            }
        } else {
            out = "terminate called without an active exception";
            out += thread.view();
            out += "\n";
        }
        if (need_stack) {
            stack_trace here = stack_trace::current();
            if (auto* s = trace_access::state(here)) s->hide_runtime = true;
            out += "  stack at std::terminate, innermost first:\n";
            append_trace(out, here, p, "    ", false);
        }
        write_all(STDERR_FILENO, out);
    } catch (...) {
        write_all(STDERR_FILENO, "terminate called; pretty_exception could not describe the exception\n");
    }
    terminate_reported().store(true);  // the crash handler need not describe this SIGABRT again
    std::abort();
}

}  // namespace detail

/// Install the terminate handler: an uncaught exception is described on stderr (a traced one with its
/// throw stack, any other with the stack at std::terminate, which for an exception that found no
/// handler still contains the throw site), then the process aborts. Returns the previous handler.
/// Call it once, early (e.g. first thing in main). Thread-safe; does not allocate; not
/// async-signal-safe. The handler itself allocates (it describes the exception).
inline std::terminate_handler install_terminate_handler() noexcept {
    return std::set_terminate(&detail::terminate_handler);
}

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_TERMINATE_H

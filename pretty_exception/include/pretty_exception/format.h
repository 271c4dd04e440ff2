/// @brief pretty_exception's printed form: frames, traces, descriptions, colour; to_string, print, describe, operator<<.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_FORMAT_H
#define PRETTY_EXCEPTION_FORMAT_H

#include "capture.h"
#include "names.h"
#include "settings.h"
#include "symbolise.h"
#include "thrown.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace pretty_exception {

namespace detail {

// ---------------------------------------------------------------------------------------------
// Rendering.
// ---------------------------------------------------------------------------------------------
struct palette {
    const char* type = "";
    const char* message = "";
    const char* where = "";
    const char* function = "";
    const char* dim = "";
    const char* reset = "";
};

inline palette make_palette(bool colour) noexcept {
    palette p;
    if (colour) {
        p.type = "\x1b[1;31m";
        p.message = "\x1b[1m";
        p.where = "\x1b[32m";
        p.function = "\x1b[33m";
        p.dim = "\x1b[2m";
        p.reset = "\x1b[0m";
    }
    return p;
}

inline void append_hex(std::string& out, std::uintptr_t v) {
    char buf[2 + 2 * sizeof v + 1];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    out += buf;
}

/// Make `text` safe for one syslog line: control characters become escapes.
inline void append_one_line(std::string& out, std::string_view text) {
    for (const char c : text) {
        if (c == '\n') {
            out += "\\n";
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            out += buf;
        } else {
            out += c;
        }
    }
}

inline void append_frame(std::string& out, std::size_t index, const frame& f, const palette& p) {
    out += '#';
    out += std::to_string(index);
    out += ' ';
    out += p.function;
    out += f.function.empty() ? std::string_view("??") : std::string_view(f.function);
    out += p.reset;
    if (!f.file.empty()) {
        out += " at ";
        out += p.where;
        out += f.file;
        out += ':';
        out += std::to_string(f.line);
        out += p.reset;
    } else {
        out += " in ";
        out += p.dim;
        out += f.module.empty() ? std::string_view("??") : std::string_view(f.module);
        out += '+';
        append_hex(out, f.module.empty() ? f.address : f.offset);
        out += p.reset;
    }
    if (f.inlined) out += " (inlined)";
}

/// A frame of the exception machinery or the C++ runtime: libstdc++, libgcc_s, libc++, libunwind,
/// the ABI's __cxa_* and _Unwind_* functions, std::__throw_* helpers, and this header's own.
inline bool is_runtime_frame(const frame& f) noexcept {
    std::string_view fn = f.function;
    if (const auto sp = fn.find(' '); sp != std::string_view::npos && sp < fn.find('('))
        fn = fn.substr(sp + 1);  // a template's return type
    const std::string_view mod = basename_of(f.module);
    return starts_with(mod, "libstdc++") || starts_with(mod, "libgcc_s") || starts_with(mod, "libc++") ||
           starts_with(mod, "libunwind") || starts_with(fn, "__cxa") || starts_with(fn, "__cxxabiv1::") ||
           starts_with(fn, "_Unwind_") || starts_with(fn, "__gxx_personality") || starts_with(fn, "std::__throw") ||
           starts_with(fn, "std::throw_with_nested") || starts_with(fn, "std::rethrow_exception") ||
           starts_with(fn, "std::terminate") || starts_with(fn, "pretty_exception::");
}

/// Whether a frame is printed: runtime frames only when shown, then the user's filter.
inline bool frame_shown(const frame& f, std::size_t& runtime_hidden, std::size_t& filtered) noexcept {
    if (!runtime_frames_word().load(std::memory_order_relaxed) && is_runtime_frame(f)) {
        ++runtime_hidden;
        return false;
    }
    if (bool (*filter)(const frame&) = filter_word().load(std::memory_order_relaxed)) {
        bool keep = true;
        try {
            keep = filter(f);
        } catch (...) {
        }
        if (!keep) {
            ++filtered;
            return false;
        }
    }
    return true;
}

/// Lines `line - context` to `line + context` of `path`, the frame's line marked with '>'. Files
/// under /usr/ (the standard library's headers, glibc's sources) are not the user's: no snippet.
inline void append_snippet(std::string& out, const frame& f, int context, const char* indent) {
    if (context <= 0 || f.file.empty() || f.line <= 0 || starts_with(f.file, "/usr/")) return;
    std::FILE* file = std::fopen(f.file.c_str(), "re");
    if (file == nullptr) return;
    const int first = std::max(1, f.line - context);
    const int last = f.line + context;
    const int width = static_cast<int>(std::to_string(last).size());
    std::string text;
    int number = 1;
    bool at_line_start = true;
    for (int c = std::fgetc(file); c != EOF && number <= last; c = std::fgetc(file)) {
        if (number >= first) {
            if (at_line_start) {
                char head[32];
                std::snprintf(head, sizeof head, "   %s %*d | ", number == f.line ? ">" : " ", width, number);
                text += indent;
                text += head;
            }
            if (c != '\r') text += static_cast<char>(c);
        }
        at_line_start = c == '\n';
        if (at_line_start) ++number;
    }
    std::fclose(file);
    if (!text.empty() && text.back() != '\n') text += '\n';
    out += text;
}

inline void append_trace(std::string& out, const stack_trace& t, const palette& p, const char* indent,
                         bool one_line) {
    const auto& frames = t.frames();
    const int context = one_line ? 0 : snippet_word().load(std::memory_order_relaxed);
    std::size_t shown = 0;
    std::size_t runtime_hidden = 0;
    std::size_t filtered = 0;
    for (const frame& f : frames) {
        if (!frame_shown(f, runtime_hidden, filtered)) continue;
        if (one_line) {
            if (shown != 0) out += " | ";
        } else {
            out += indent;
        }
        append_frame(out, shown++, f, p);
        if (!one_line) out += '\n';
        append_snippet(out, f, context, indent);
    }
    if (!one_line && runtime_hidden != 0) {
        out += indent;
        out += "(" + std::to_string(runtime_hidden) + (runtime_hidden == 1 ? " frame" : " frames") +
               " of the C++ runtime hidden: show_runtime_frames(true) shows them)\n";
    }
    if (!one_line && filtered != 0) {
        out += indent;
        out += "(" + std::to_string(filtered) + (filtered == 1 ? " frame" : " frames") +
               " hidden by the frame filter)\n";
    }
    if (frames.empty() && t.size() != 0) {  // symbolisation failed: raw addresses
        for (std::size_t i = 0; i < t.size(); ++i) {
            if (one_line) {
                if (i != 0) out += " | ";
            } else {
                out += indent;
            }
            out += '#' + std::to_string(i) + ' ';
            append_hex(out, t.address(i));
            if (!one_line) out += '\n';
        }
    }
    for (const auto& note : t.notes()) {
        if (one_line) {
            out += " | note: ";
        } else {
            out += indent;
            out += "note: ";
        }
        out += note;
        if (!one_line) out += '\n';
    }
}

inline std::string type_name(const std::exception& e) {
    const traced_base* t = find_trace(e);
    std::string name = demangle(t != nullptr ? t->type().name() : typeid(e).name());
    // std::throw_with_nested throws a type derived from the one it was given: show that one.
    constexpr std::string_view nested = "std::_Nested_exception<";
    if (name.size() > nested.size() && starts_with(name, nested) && name.back() == '>') {
        name.pop_back();
        if (!name.empty() && name.back() == ' ') name.pop_back();
        name.erase(0, nested.size());
    }
    return name;
}

/// Render `e` (and the exceptions nested in it, std::nested_exception) into `out`.
inline void describe_into(std::string& out, const std::exception& e, bool colour, bool one_line, int depth = 0) {
    const palette p = make_palette(colour);
    const traced_base* t = find_trace(e);
    out += p.type;
    out += type_name(e);
    out += p.reset;
    out += ": ";
    out += p.message;
    const char* msg = (t != nullptr && t->stored_message() != nullptr) ? t->stored_message() : e.what();
    if (one_line)
        append_one_line(out, msg != nullptr ? msg : "");
    else
        out += msg != nullptr ? msg : "";
    out += p.reset;
    if (t != nullptr) {
        out += one_line ? std::string_view(" | thrown at ") : std::string_view("\n  thrown at ");
        out += p.where;
        out += t->file();
        out += ':';
        out += std::to_string(t->line());
        out += p.reset;
        out += " in ";
        out += p.function;
        out += t->function();
        out += p.reset;
        out += one_line ? std::string_view(" | stack: ") : std::string_view("\n  stack, innermost first:\n");
        append_trace(out, t->trace(), p, "    ", one_line);
    } else if (const stack_trace any = find_thrown(dynamic_cast<const void*>(&e), &typeid(e)); !any.empty()) {
        out += one_line ? std::string_view(" | stack at the throw: ")
                        : std::string_view("\n  stack at the throw, innermost first:\n");
        append_trace(out, any, p, "    ", one_line);
    } else if (!one_line) {
        out += trace_all_flag().load(std::memory_order_relaxed)
                   ? "\n  (no stack: thrown before trace_all_exceptions(), on another thread, or 16 throws ago)\n"
                   : "\n  (no throw site or stack: not thrown with PRETTY_THROW)\n";
    }
    if (const auto* nested = dynamic_cast<const std::nested_exception*>(&e);
        nested != nullptr && nested->nested_ptr() && depth < 8) {
        try {
            std::rethrow_exception(nested->nested_ptr());
        } catch (const std::exception& inner) {
            out += one_line ? " | caused by: " : "caused by: ";
            describe_into(out, inner, colour, one_line, depth + 1);
        } catch (...) {
            out += one_line ? " | caused by: an exception not derived from std::exception"
                            : "caused by: an exception not derived from std::exception\n";
        }
    }
}

inline void write_all(int fd, std::string_view text) noexcept {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return;
        }
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Public functions.
// ---------------------------------------------------------------------------------------------

/// The throw site and stack of `e` if it was thrown by PRETTY_THROW (or is a traced<T>), else nullptr.
/// Does not allocate; never throws; async-signal-safe (a dynamic_cast).
inline const traced_base* trace_of(const std::exception& e) noexcept { return detail::find_trace(e); }

/// Colour for output written to file descriptor `fd` (-1: not a file): NO_COLOR (set, non-empty)
/// says no; else colour_mode::always yes, never no, automatic when `fd` is a terminal. Never throws;
/// does not allocate; not async-signal-safe (getenv).
inline bool colour_for(int fd) noexcept {
    if (detail::no_colour_env()) return false;
    switch (static_cast<colour_mode>(detail::colour_word().load(std::memory_order_relaxed))) {
        case colour_mode::always: return true;
        case colour_mode::never: return false;
        case colour_mode::automatic: break;
    }
    return fd >= 0 && ::isatty(fd) == 1;
}

/// Set the colour mode (process-wide, thread-safe, async-signal-safe, does not allocate).
inline void set_colour(colour_mode mode) noexcept {
    detail::colour_word().store(static_cast<int>(mode), std::memory_order_relaxed);
}
/// The current colour mode. Does not allocate; async-signal-safe.
inline colour_mode get_colour() noexcept {
    return static_cast<colour_mode>(detail::colour_word().load(std::memory_order_relaxed));
}

/// Show the frames of the exception machinery and the C++ runtime in printed traces (libstdc++,
/// libgcc_s, __cxa_*, _Unwind_*, std::__throw_*); hidden by default, with a line saying how many.
/// frames() always has them. Process-wide; thread-safe, async-signal-safe, does not allocate.
inline void show_runtime_frames(bool shown) noexcept {
    detail::runtime_frames_word().store(shown, std::memory_order_relaxed);
}
/// Whether printed traces show the runtime's frames. Does not allocate; async-signal-safe.
inline bool runtime_frames_shown() noexcept { return detail::runtime_frames_word().load(std::memory_order_relaxed); }

/// A frame filter: return false to leave the frame out of printed traces (frames() keeps it).
using frame_filter = bool (*)(const frame&);
/// Set the frame filter (nullptr: none), applied after the runtime frames are hidden; a filter that
/// throws keeps the frame. Returns the previous one. Thread-safe, async-signal-safe, does not allocate.
inline frame_filter set_frame_filter(frame_filter filter) noexcept {
    return detail::filter_word().exchange(filter, std::memory_order_relaxed);
}

/// Source snippets in printed traces: `lines` lines either side of each user frame's line (files
/// not under /usr/), 0 for none; PRETTY_EXCEPTION_SNIPPETS gives the starting value. Printing then
/// reads the source files. Thread-safe, async-signal-safe, does not allocate.
inline void set_snippets(int lines) noexcept { detail::snippet_word().store(lines, std::memory_order_relaxed); }
/// The number of snippet lines either side (0: no snippets). Does not allocate; async-signal-safe.
inline int get_snippets() noexcept { return detail::snippet_word().load(std::memory_order_relaxed); }

/// The pretty description of `e`: type (demangled), message, throw site and stack (for a traced
/// exception), and the exceptions nested in it. Plain text unless colour_mode::always is set (and
/// NO_COLOR is not). Symbolises on first use. Allocates; never throws ("" when out of memory); not
/// async-signal-safe.
inline std::string to_string(const std::exception& e) noexcept {
    try {
        std::string out;
        detail::describe_into(out, e, colour_for(-1), false);
        return out;
    } catch (...) {
        return std::string();
    }
}

/// The same description on one line, frames separated by " | " (what syslog receives). Allocates;
/// never throws; not async-signal-safe.
inline std::string to_one_line(const std::exception& e) noexcept {
    try {
        std::string out;
        detail::describe_into(out, e, false, true);
        return out;
    } catch (...) {
        return std::string();
    }
}

inline std::string stack_trace::to_string(bool colour) const noexcept {
    try {
        std::string out;
        detail::append_trace(out, *this, detail::make_palette(colour), "", false);
        return out;
    } catch (...) {
        return std::string();
    }
}

/// Write the description of `e` to `fd` (default stderr), coloured per colour_for(fd). Allocates;
/// never throws; not async-signal-safe.
inline void print(const std::exception& e, int fd = STDERR_FILENO) noexcept {
    try {
        std::string out;
        detail::describe_into(out, e, colour_for(fd), false);
        detail::write_all(fd, out);
    } catch (...) {
    }
}

/// `os << describe(e)`: the description, coloured when `os` is std::cout/cerr/clog on a terminal.
/// Streaming allocates and throws only what the stream throws; not async-signal-safe.
struct description {
    const std::exception& exception;
};
/// Wrap `e` for streaming: `std::cerr << pretty_exception::describe(e)`. Does not allocate;
/// async-signal-safe (the streaming is not).
inline description describe(const std::exception& e) noexcept { return description{e}; }

inline std::ostream& operator<<(std::ostream& os, const description& d) {
    int fd = -1;
    if (&os == &std::cout) fd = STDOUT_FILENO;
    if (&os == &std::cerr || &os == &std::clog) fd = STDERR_FILENO;
    std::string out;
    try {
        detail::describe_into(out, d.exception, colour_for(fd), false);
    } catch (...) {
        return os;
    }
    return os << out;
}

/// `os << e` for anything derived from std::exception or traced_base, found by ADL for traced<T>
/// and `const traced_base&`, or after `using pretty_exception::operator<<;`. As describe().
template <class E, std::enable_if_t<std::is_base_of_v<std::exception, E> || std::is_base_of_v<traced_base, E>,
                                    int> = 0>
std::ostream& operator<<(std::ostream& os, const E& e) {
    if constexpr (std::is_base_of_v<std::exception, E>) {
        return os << describe(e);
    } else {
        if (const auto* ex = dynamic_cast<const std::exception*>(&e)) return os << describe(*ex);
        return os << "(a traced exception not derived from std::exception)";
    }
}

namespace detail {

/// Which thread a report is about, as ` in thread 4242 "worker"`: its kernel id (the LWP that ps -L,
/// top -H and GDB show) and its name (pthread_setname_np; a new thread inherits its creator's, the
/// main thread's is the program's). A quote, a backslash or a control character in the name is
/// written as "?" so the label stays one unambiguous line. Async-signal-safe; does not allocate.
struct thread_label {
    char text[64];
    std::size_t size = 0;

    thread_label(long tid, const char* name) noexcept {
        add(" in thread ");
        char digits[24];
        std::size_t n = 0;
        for (unsigned long v = tid < 0 ? 0ul : static_cast<unsigned long>(tid); n == 0 || v != 0; v /= 10)
            digits[n++] = static_cast<char>('0' + v % 10);
        while (n > 0 && size + 1 < sizeof text) text[size++] = digits[--n];
        add(" \"");
        for (const char* c = name; *c != '\0' && *c != '\n' && c - name < 16; ++c) {
            const bool plain = static_cast<unsigned char>(*c) >= 0x20 && *c != 0x7f && *c != '"' && *c != '\\';
            if (size + 1 < sizeof text) text[size++] = plain ? *c : '?';
        }
        add("\"");
        text[size] = '\0';
    }

    /// The calling thread's label (gettid and PR_GET_NAME, two system calls).
    static thread_label current() noexcept {
        char name[17] = {};
        if (::syscall(SYS_prctl, PR_GET_NAME, name, 0, 0, 0) != 0) name[0] = '\0';
        return thread_label(::syscall(SYS_gettid), name);
    }

    std::string_view view() const noexcept { return std::string_view(text, size); }

private:
    void add(const char* s) noexcept {
        while (*s != '\0' && size + 1 < sizeof text) text[size++] = *s++;
    }
};

}  // namespace detail

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_FORMAT_H

/// @brief pretty_exception: throw any std::exception type with file, line, function and a lazily symbolised call stack; print it in colour, trace it to syslog; the throw-site stack of any exception (trace_all_exceptions); a crash handler (install_crash_handler).
///
/// Header-only, C++17, Linux (glibc) with GCC or Clang. See pretty_exception/README.md for the guide.
///
/// Link needs: `-ldw` (elfutils' libdw, Debian package libdw-dev) while PRETTY_EXCEPTION_USE_LIBDW is 1,
/// which is its default when <elfutils/libdwfl.h> is found; `-ldl` on glibc older than 2.34. The CMake
/// target `pretty_exception::pretty_exception` and `pkg-config --libs pretty_exception` bring both.
///
/// Configuration macros (define them identically in every translation unit, e.g. on the command line):
///   PRETTY_EXCEPTION_USE_LIBDW       1: names, file:line and inlined frames from libdw; 0: no libdw,
///                                    frames show exported names and module+offset. Default: 1 if
///                                    <elfutils/libdwfl.h> is found.
///   PRETTY_EXCEPTION_SYSLOG          1: syslog tracing starts switched on (default 0).
///   PRETTY_EXCEPTION_SYSLOG_FACILITY the default facility (default LOG_USER).
///   PRETTY_EXCEPTION_SYSLOG_PRIORITY the default priority (default LOG_ERR).
///   PRETTY_EXCEPTION_MAX_FRAMES      frames kept per exception (default 64; deeper stacks are cut, and
///                                    the trace says so).
///   PRETTY_EXCEPTION_NO_SHORT_MACROS define it to get only the PRETTY_-prefixed macros, not
///                                    THROW_RUNTIME_ERROR and friends.
///   PRETTY_EXCEPTION_SNIPPETS        N > 0: printed traces show N source lines either side of each
///                                    user frame's line (default 0: none; set_snippets() at run time).
///   PRETTY_EXCEPTION_TRACE_ALL       1: every TU that includes the header links the __cxa_throw hook
///                                    and the stack of every exception is captured from the start,
///                                    as after trace_all_exceptions() (default 0).
#ifndef PRETTY_EXCEPTION_H
#define PRETTY_EXCEPTION_H

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <cxxabi.h>
#include <link.h>
#include <paths.h>
#include <syslog.h>
#include <csignal>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#ifndef PRETTY_EXCEPTION_USE_LIBDW
#if defined(__has_include)
#if __has_include(<elfutils/libdwfl.h>) && __has_include(<dwarf.h>)
#define PRETTY_EXCEPTION_USE_LIBDW 1
#endif
#endif
#endif
#ifndef PRETTY_EXCEPTION_USE_LIBDW
#define PRETTY_EXCEPTION_USE_LIBDW 0
#endif

#if PRETTY_EXCEPTION_USE_LIBDW
#if defined(__has_include)
#if !__has_include(<elfutils/libdwfl.h>) || !__has_include(<dwarf.h>)
#error "pretty_exception: PRETTY_EXCEPTION_USE_LIBDW=1 needs elfutils' libdw headers: install libdw-dev (Debian, Ubuntu) or elfutils-devel (Fedora) and link with -ldw, or define PRETTY_EXCEPTION_USE_LIBDW=0"
#endif
#endif
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
// Every libdw function the header calls is a weak reference but one, dwfl_version, which only
// detail::add_ldw_to_the_link_or_define_PRETTY_EXCEPTION_USE_LIBDW_0() calls. Linking without -ldw then
// fails with one error whose "in function" line says what to do, instead of one "undefined reference"
// per libdw function.
#pragma weak dwarf_attr
#pragma weak dwarf_attr_integrate
#pragma weak dwarf_child
#pragma weak dwarf_dieoffset
#pragma weak dwarf_filesrc
#pragma weak dwarf_formstring
#pragma weak dwarf_formudata
#pragma weak dwarf_getsrc_die
#pragma weak dwarf_getsrcfiles
#pragma weak dwarf_haspc
#pragma weak dwarf_lineaddr
#pragma weak dwarf_lineno
#pragma weak dwarf_linesrc
#pragma weak dwarf_ranges
#pragma weak dwarf_siblingof
#pragma weak dwarf_tag
#pragma weak dwfl_addrmodule
#pragma weak dwfl_begin
#pragma weak dwfl_end
#pragma weak dwfl_errmsg
#pragma weak dwfl_linux_proc_find_elf
#pragma weak dwfl_linux_proc_report
#pragma weak dwfl_module_addrdie
#pragma weak dwfl_module_addrinfo
#pragma weak dwfl_module_getelf
#pragma weak dwfl_module_info
#pragma weak dwfl_module_nextcu
#pragma weak dwfl_report_begin
#pragma weak dwfl_report_end
#pragma weak dwfl_standard_find_debuginfo
#endif
#include <dlfcn.h>

#ifndef PRETTY_EXCEPTION_SYSLOG
#define PRETTY_EXCEPTION_SYSLOG 0
#endif
#ifndef PRETTY_EXCEPTION_SYSLOG_FACILITY
#define PRETTY_EXCEPTION_SYSLOG_FACILITY LOG_USER
#endif
#ifndef PRETTY_EXCEPTION_SYSLOG_PRIORITY
#define PRETTY_EXCEPTION_SYSLOG_PRIORITY LOG_ERR
#endif
#ifndef PRETTY_EXCEPTION_MAX_FRAMES
#define PRETTY_EXCEPTION_MAX_FRAMES 64
#endif
#ifndef PRETTY_EXCEPTION_TRACE_ALL
#define PRETTY_EXCEPTION_TRACE_ALL 0
#endif
#ifndef PRETTY_EXCEPTION_SNIPPETS
#define PRETTY_EXCEPTION_SNIPPETS 0
#endif

#define PRETTY_EXCEPTION_VERSION_MAJOR 1
#define PRETTY_EXCEPTION_VERSION_MINOR 0
#define PRETTY_EXCEPTION_VERSION_PATCH 0

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

namespace detail {

// ---------------------------------------------------------------------------------------------
// Shared state of one captured stack: raw PCs at capture, frames once symbolised.
// ---------------------------------------------------------------------------------------------
/// The raw PCs of one walk: what capture fills, with no allocation.
struct raw_capture {
    // User-provided so that make_shared does not zero the PC array on the throw path.
    raw_capture() noexcept {}  // NOLINT(modernize-use-equals-default)

    std::size_t count = 0;        // PCs kept
    bool truncated = false;       // more frames than PRETTY_EXCEPTION_MAX_FRAMES
    bool incomplete = false;      // the unwinder stopped before the outermost frame
    bool hide_runtime = false;    // drop leading C++ runtime frames (a stack taken in std::terminate)
    std::uintptr_t pcs[PRETTY_EXCEPTION_MAX_FRAMES];
};

struct trace_state : raw_capture {
    trace_state() noexcept {}  // NOLINT(modernize-use-equals-default)
    trace_state(const trace_state&) = delete;
    trace_state& operator=(const trace_state&) = delete;

    std::once_flag once;
    std::vector<frame> frames;
    std::vector<std::string> notes;  // what is missing, one sentence each
    std::string message;             // only for types whose constructor does not take the message
};

// ---------------------------------------------------------------------------------------------
// Capture: _Unwind_Backtrace (libgcc_s, which every C++ program with exceptions already uses).
// ---------------------------------------------------------------------------------------------
struct unwind_walk {
    raw_capture* state;
    std::uintptr_t start_at;  // first frame to keep: the return address into the user's code
    bool started;
    bool stopped;             // we stopped the walk (buffer full)
    bool reached_end;         // the walk went past the outermost frame (_start, a thread's clone)
};

inline _Unwind_Reason_Code unwind_one(_Unwind_Context* ctx, void* arg) noexcept {
    auto* w = static_cast<unwind_walk*>(arg);
    int before_insn = 0;
    const std::uintptr_t ip = _Unwind_GetIPInfo(ctx, &before_insn);
    // Past the outermost frame, whose unwind information marks its return address undefined,
    // libgcc reports one last frame with IP 0. A walk that ends without it ended on a frame the
    // unwinder has no information for (hand-written assembly, JIT code): the stack is incomplete.
    if (ip == 0) {
        w->reached_end = true;
        return _URC_NO_REASON;
    }
    if (!w->started) {
        if (ip != w->start_at) return _URC_NO_REASON;  // a frame of the capture machinery
        w->started = true;
    }
    raw_capture& s = *w->state;
    if (s.count == PRETTY_EXCEPTION_MAX_FRAMES) {
        s.truncated = true;
        w->stopped = true;
        return _URC_END_OF_STACK;
    }
    // A return address points after the call; the call itself (its line) is one byte earlier.
    s.pcs[s.count++] = before_insn ? ip : ip - 1;
    return _URC_NO_REASON;
}

/// Fill `s` with the stack from the frame whose PC is `start_at` outwards. When `start_at` is not
/// met (it always is, barring a compiler surprise), keep every frame: the leading internal ones are
/// then hidden by name at symbolisation.
/// Async-signal-safe as far as the unwinder is (libgcc 12 with glibc >= 2.35: _dl_find_object, no lock,
/// no allocation); allocates nothing itself.
[[gnu::noinline]] inline void capture_into(raw_capture& s, std::uintptr_t start_at) noexcept {
    unwind_walk w{&s, start_at, start_at == 0, false, false};
    _Unwind_Reason_Code rc = _Unwind_Backtrace(&unwind_one, &w);
    if (!w.started) {
        w = unwind_walk{&s, 0, true, false, false};
        s.count = 0;
        s.truncated = false;
        s.hide_runtime = true;
        rc = _Unwind_Backtrace(&unwind_one, &w);
    }
    s.incomplete = !w.stopped && (rc != _URC_END_OF_STACK || !w.reached_end);
}

/// A new trace_state holding the stack from `start_at` outwards; nullptr when out of memory.
inline std::shared_ptr<trace_state> capture(std::uintptr_t start_at) noexcept {
    std::shared_ptr<trace_state> s;
    try {
        s = std::make_shared<trace_state>();
    } catch (...) {
        return s;  // an empty stack_trace: its notes() say "not captured"
    }
    capture_into(*s, start_at);
    return s;
}

struct trace_access;

}  // namespace detail

/// A call stack: raw program counters at capture, symbolised on the first call of `frames()`.
/// Copies share the capture and the symbolised frames. Never throws.
class stack_trace {
public:
    /// An empty trace ("not captured"). Does not allocate; async-signal-safe.
    stack_trace() noexcept = default;

    /// Capture the caller's stack (the caller is frame #0). Allocates one block; not
    /// async-signal-safe. On failure returns a trace whose notes() say why.
    [[gnu::noinline]] static stack_trace current() noexcept {
        return stack_trace(detail::capture(reinterpret_cast<std::uintptr_t>(__builtin_return_address(0))));
    }

    /// True when nothing was captured (no frames). Does not allocate; async-signal-safe.
    bool empty() const noexcept { return !state_ || state_->count == 0; }
    /// Number of raw PCs captured. Does not allocate; async-signal-safe.
    std::size_t size() const noexcept { return state_ ? state_->count : 0; }
    /// Raw looked-up address of frame `i` (< size()). Does not allocate; async-signal-safe.
    std::uintptr_t address(std::size_t i) const noexcept {
        return state_ && i < state_->count ? state_->pcs[i] : 0;
    }
    /// Symbolised frames, innermost first, including inlined ones and without this header's own
    /// frames. Resolved once (thread-safe) on first call; later calls are free. Allocates and takes a
    /// lock the first time; never throws; not async-signal-safe.
    const std::vector<frame>& frames() const noexcept;
    /// Sentences saying what is missing (cut, incomplete, no debug-info reader, out of memory). As
    /// frames(): allocates the first time; never throws; not async-signal-safe.
    const std::vector<std::string>& notes() const noexcept;
    /// The frames, one per line (`#N function at file:line` or `in module+0xoffset`), as printed (runtime
    /// frames hidden, filter, snippets). Allocates; not async-signal-safe; never throws: returns "" when
    /// out of memory.
    std::string to_string(bool colour = false) const noexcept;

private:
    friend struct detail::trace_access;
    explicit stack_trace(std::shared_ptr<detail::trace_state> state) noexcept : state_(std::move(state)) {}

    std::shared_ptr<detail::trace_state> state_;
};

namespace detail {

/// The capture machinery's way into stack_trace's private parts.
struct trace_access {
    static stack_trace make(std::shared_ptr<trace_state> s) noexcept { return stack_trace(std::move(s)); }
    static trace_state* state(const stack_trace& t) noexcept { return t.state_.get(); }
};

}  // namespace detail

/// The common base of every `traced<T>`: throw site and stack. Catch `const traced_base&` to get them,
/// or call `trace_of(e)` on any std::exception.
class traced_base {
public:
    virtual ~traced_base() = default;

    /// Source file of the throw (__FILE__). Does not allocate; async-signal-safe.
    const char* file() const noexcept { return site_.file; }
    /// Line of the throw (__LINE__). Does not allocate; async-signal-safe.
    int line() const noexcept { return site_.line; }
    /// Enclosing function of the throw (__PRETTY_FUNCTION__). Does not allocate; async-signal-safe.
    const char* function() const noexcept { return site_.function; }
    /// The requested exception type (`T` of `traced<T>`), not `traced<T>` itself. Does not allocate;
    /// async-signal-safe.
    const std::type_info& type() const noexcept { return *type_; }
    /// The stack at the throw, innermost first. Symbolised on first use of `frames()`. Does not
    /// allocate; async-signal-safe (its frames() is not).
    const stack_trace& trace() const noexcept { return trace_; }
    /// The message given at the throw when `T`'s constructor could not take it; else nullptr. Does not
    /// allocate; async-signal-safe.
    const char* stored_message() const noexcept {
        auto* s = detail::trace_access::state(trace_);
        return s && !s->message.empty() ? s->message.c_str() : nullptr;
    }

protected:
    traced_base(const source_site& site, const std::type_info& type, stack_trace trace) noexcept
        : site_(site), type_(&type), trace_(std::move(trace)) {}
    traced_base(const traced_base&) noexcept = default;
    traced_base& operator=(const traced_base&) noexcept = default;

private:
    source_site site_;
    const std::type_info* type_;
    stack_trace trace_;
};

namespace detail {

inline const traced_base* find_trace(const std::exception& e) noexcept {
    return dynamic_cast<const traced_base*>(&e);
}

// ---------------------------------------------------------------------------------------------
// Any exception: a hook on __cxa_throw records the stack of every throw in a per-thread ring.
//
// Every `throw` expression, in the program and in libstdc++ (std::vector::at, std::stoi), calls
// __cxa_throw, through the PLT when it is in a shared library. A definition in the executable
// interposes on libstdc++'s, so every throw of the process passes through it; it records the stack
// and calls the next definition (libstdc++'s, or a sanitizer's interceptor) found by
// dlsym(RTLD_NEXT). The function is inline and named __cxa_throw only in assembly, so it is emitted
// (weak, once per program) in the translation units that take its address: trace_all_exceptions(),
// or every one with PRETTY_EXCEPTION_TRACE_ALL=1.
// ---------------------------------------------------------------------------------------------

/// One recorded throw: the thrown object (its most-derived address) and type, and the raw stack.
struct thrown_entry {
    const void* object = nullptr;
    const std::type_info* type = nullptr;
    raw_capture raw;
    std::shared_ptr<trace_state> made;  // the stack_trace handed out for it, so it symbolises once
};

/// The last throws of one thread, newest at `next - 1`. 16 covers an exception caught while others
/// are thrown and caught inside its handler (a rethrow, a nested exception).
struct thrown_ring {
    static constexpr unsigned size = 16;
    unsigned next = 0;
    thrown_entry slots[size];
};

/// This thread's ring, allocated at its first traced throw (nullptr before, or when out of memory).
inline thrown_ring* this_thread_ring(bool create) noexcept {
    static thread_local std::unique_ptr<thrown_ring> ring;
    if (!ring && create) ring.reset(new (std::nothrow) thrown_ring());
    return ring.get();
}

inline std::atomic<bool>& trace_all_flag() noexcept {
    static std::atomic<bool> on{PRETTY_EXCEPTION_TRACE_ALL != 0};
    return on;
}

/// Set by traced<T>'s constructor to its own address: the throw of a PRETTY_THROW exception already
/// has its stack, the hook does not take it again.
inline const void*& self_traced_object() noexcept {
    static thread_local const void* object = nullptr;
    return object;
}

/// Drop this thread's records of `object`: its memory now holds a new exception. Does not allocate.
inline void forget_thrown(const void* object) noexcept {
    if (thrown_ring* ring = this_thread_ring(false)) {
        for (thrown_entry& e : ring->slots) {
            if (e.object == object) {
                e.object = nullptr;
                e.type = nullptr;
            }
        }
    }
}

/// Record the stack of a throw of `object` (type `type`) from `start_at` outwards. Allocates only
/// the thread's ring, at its first throw; never throws.
[[gnu::noinline]] inline void record_throw(const void* object, const std::type_info* type,
                                           std::uintptr_t start_at) noexcept {
    thrown_ring* ring = this_thread_ring(true);
    if (ring == nullptr) return;
    thrown_entry& e = ring->slots[ring->next % thrown_ring::size];
    ring->next = (ring->next + 1) % thrown_ring::size;
    e.made.reset();
    e.object = object;
    e.type = type;
    e.raw.count = 0;
    e.raw.truncated = false;
    e.raw.incomplete = false;
    e.raw.hide_runtime = false;
    capture_into(e.raw, start_at);
}

using cxa_throw_fn = void (*)(void*, std::type_info*, void (*)(void*));

/// libstdc++'s __cxa_throw (or the next interposer's): what the hook passes the throw on to.
inline cxa_throw_fn next_cxa_throw() noexcept {
    static const cxa_throw_fn next = reinterpret_cast<cxa_throw_fn>(::dlsym(RTLD_NEXT, "__cxa_throw"));
    return next;
}

inline void trace_thrown_to_syslog(void* object, const std::type_info* type) noexcept;

[[noreturn]] inline void cxa_throw_hook(void* object, std::type_info* type, void (*destroy)(void*)) __asm__(
    "__cxa_throw");

/// The __cxa_throw of a program that traces all exceptions. Not async-signal-safe (neither is a
/// throw); allocates this thread's ring once; records nothing while trace_all_exceptions(false).
#if PRETTY_EXCEPTION_TRACE_ALL
[[gnu::used]]
#endif
[[noreturn]] inline void cxa_throw_hook(void* object, std::type_info* type, void (*destroy)(void*)) {
    const void*& self = self_traced_object();
    forget_thrown(object);  // a new exception at the address of one this thread recorded before
    if (self != object && trace_all_flag().load(std::memory_order_relaxed)) {
        record_throw(object, type, reinterpret_cast<std::uintptr_t>(__builtin_return_address(0)));
        trace_thrown_to_syslog(object, type);
    }
    self = nullptr;
    const cxa_throw_fn next = next_cxa_throw();
    if (next == nullptr) {  // statically linked libstdc++: its own __cxa_throw won, this is unused
        static const char msg[] = "pretty_exception: no __cxa_throw to pass the throw to\n";
        (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
        std::abort();
    }
    next(object, type, destroy);
    __builtin_unreachable();
}

/// The recorded stack of the throw of `object`, of dynamic type `type` (nullptr: any type), on this
/// thread; an empty trace when the ring no longer holds it. Allocates (one block, once per throw).
inline stack_trace find_thrown(const void* object, const std::type_info* type) noexcept {
    thrown_ring* ring = this_thread_ring(false);
    if (ring == nullptr) return stack_trace();
    for (unsigned i = 1; i <= thrown_ring::size; ++i) {
        thrown_entry& e = ring->slots[(ring->next + thrown_ring::size - i) % thrown_ring::size];
        if (e.type == nullptr || (object != nullptr && e.object != object) || (type != nullptr && *e.type != *type))
            continue;
        if (!e.made) {
            try {
                e.made = std::make_shared<trace_state>();
            } catch (...) {
                return stack_trace();
            }
            static_cast<raw_capture&>(*e.made) = e.raw;
        }
        return trace_access::make(e.made);
    }
    return stack_trace();
}

/// True when this process's __cxa_throw is the hook (so plain throws are recorded).
inline bool hook_in_place() noexcept {
    void* volatile mine = reinterpret_cast<void*>(&cxa_throw_hook);
    return ::dlsym(RTLD_DEFAULT, "__cxa_throw") == mine;
}

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

// ---------------------------------------------------------------------------------------------
// Symbolisation helpers.
// ---------------------------------------------------------------------------------------------
/// The split-off cold part of a function (GCC -freorder-blocks-and-partition) is that function: drop
/// the suffix of a demangled C++ name ("f(int) [clone .cold]") and of a C name, which does not
/// demangle ("main.cold"); GCC before 10 numbered them (".cold.0").
inline void drop_cold_suffix(std::string& name) {
    for (const std::string_view mark : {std::string_view(" [clone .cold"), std::string_view(".cold")}) {
        const std::size_t at = name.rfind(mark);
        if (at == std::string::npos || at == 0) continue;
        std::size_t end = at + mark.size();
        if (end + 1 < name.size() && name[end] == '.' && std::isdigit(static_cast<unsigned char>(name[end + 1]))) {
            for (++end; end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]));) ++end;
        }
        if (mark.front() == ' ' && end < name.size() && name[end] == ']') ++end;
        else if (mark.front() == ' ') continue;
        if (end == name.size()) {
            name.erase(at);
            return;
        }
    }
}

inline std::string demangle(const char* name) {
    if (name == nullptr) return std::string();
    int status = 0;
    char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    std::string out = (status == 0 && d != nullptr) ? std::string(d) : std::string(name);
    std::free(d);
    drop_cold_suffix(out);
    // The standard typedefs the reader wrote, not their expansions.
    static constexpr std::string_view expansions[][2] = {
        {"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string"},
        {"std::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string"},
        {"std::basic_string_view<char, std::char_traits<char> >", "std::string_view"},
        {"std::basic_ostream<char, std::char_traits<char> >", "std::ostream"},
        {"std::basic_istream<char, std::char_traits<char> >", "std::istream"},
    };
    for (const auto& e : expansions) {
        for (std::size_t at = out.find(e[0]); at != std::string::npos; at = out.find(e[0], at + e[1].size())) {
            out.replace(at, e[0].size(), e[1]);
            // The demangler's "> >" keeps two closing brackets apart; once the inner template is a
            // short name the space is stray: "std::allocator<std::string> >", not "<std::string > >".
            if (out.compare(at + e[1].size(), 2, " >") == 0) out.erase(at + e[1].size(), 1);
        }
    }
    return out;
}

inline const std::string& self_exe() {
    static const std::string path = [] {
        char buf[4096];
        const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
        return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    }();
    return path;
}

/// The process whose addresses symbolise() resolves: 0 for this one; the crashed parent's pid in the
/// crash handler's helper process (which reads its modules from /proc/PID).
inline pid_t& symbolise_pid() noexcept {
    static pid_t pid = 0;
    return pid;
}

struct module_hit {
    std::uintptr_t address;
    const char* name;
    std::uintptr_t bias;
    bool found;
};

/// The loaded ELF object holding `f.address`: its path and the address relative to its load bias.
inline void locate_module(frame& f) {
    module_hit hit{f.address, nullptr, 0, false};
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* arg) -> int {
            auto* h = static_cast<module_hit*>(arg);
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD) continue;
                const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
                if (h->address >= lo && h->address < lo + ph.p_memsz) {
                    h->name = info->dlpi_name;
                    h->bias = info->dlpi_addr;
                    h->found = true;
                    return 1;
                }
            }
            return 0;
        },
        &hit);
    if (!hit.found) return;
    f.module = (hit.name == nullptr || hit.name[0] == '\0') ? self_exe() : std::string(hit.name);
    f.offset = f.address - hit.bias;
}

inline std::string_view basename_of(std::string_view path) noexcept {
    const auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

inline bool starts_with(std::string_view s, std::string_view prefix) noexcept {
    return s.substr(0, prefix.size()) == prefix;
}

/// Frames to hide at the top of a trace: this header's own, and the C++ runtime's when the stack was
/// taken inside std::terminate.
inline bool is_internal(const frame& f, bool runtime_too) noexcept {
    std::string_view fn = f.function;
    // Template functions demangle with their return type first ("void pretty_exception::...").
    if (const auto sp = fn.find(' '); sp != std::string_view::npos && sp < fn.find('('))
        fn = fn.substr(sp + 1);
    if (starts_with(fn, "pretty_exception::")) return true;
    if (!runtime_too) return false;
    const std::string_view mod = basename_of(f.module);
    return starts_with(mod, "libstdc++") || starts_with(mod, "libgcc_s") || starts_with(mod, "libc++") ||
           starts_with(fn, "__cxa") || starts_with(fn, "__cxxabiv1::") || starts_with(fn, "_Unwind_") ||
           starts_with(fn, "std::terminate") || starts_with(fn, "__gxx_personality");
}

#if PRETTY_EXCEPTION_USE_LIBDW

/// The one strong reference to libdw (see the #pragma weak list above): a link without -ldw reports
/// "in function `...add_ldw_to_the_link_or_define_PRETTY_EXCEPTION_USE_LIBDW_0()': undefined reference
/// to `dwfl_version'". libdw's version string, never nullptr when libdw is loaded.
[[gnu::noinline]] inline const char* add_ldw_to_the_link_or_define_PRETTY_EXCEPTION_USE_LIBDW_0() noexcept {
    return ::dwfl_version(nullptr);
}

/// One process-wide libdwfl session, guarded by a mutex: debug info is read once per module, and
/// later traces reuse it. Deliberately never freed (it may be needed until the last terminate).
class dw_symboliser {
public:
    static dw_symboliser& instance() {
        static dw_symboliser* self = new dw_symboliser();
        return *self;
    }

    std::mutex mutex;

    /// Resolve one address into one frame, or several when inlined calls are involved (innermost
    /// first). Caller holds `mutex`.
    void resolve(const frame& located, std::vector<frame>& out) {
        Dwfl_Module* mod = nullptr;
        if (dwfl_ != nullptr) {
            mod = ::dwfl_addrmodule(dwfl_, located.address);
            if (mod == nullptr && report())  // a library loaded since the last report
                mod = ::dwfl_addrmodule(dwfl_, located.address);
        }
        if (mod == nullptr) {
            out.push_back(located);
            return;
        }
        frame base = located;
        if (base.module.empty()) {  // another process's address (the crash helper): libdwfl knows its module
            Dwarf_Addr load_bias = 0;
            const char* main_file = nullptr;
            const char* name = ::dwfl_module_info(mod, nullptr, nullptr, nullptr, nullptr, nullptr, &main_file, nullptr);
            if (::dwfl_module_getelf(mod, &load_bias) != nullptr) base.offset = base.address - load_bias;
            if (name != nullptr && name[0] == '/') base.module = name;
        }
        std::string outer_name;
        GElf_Off sym_off = 0;
        GElf_Sym sym;
        if (const char* n = ::dwfl_module_addrinfo(mod, base.address, &sym_off, &sym, nullptr, nullptr,
                                                   nullptr)) {
            // A versioned symbol ("__libc_start_main@@GLIBC_2.34") by its plain name.
            const char* at = std::strchr(n, '@');
            outer_name = at != nullptr ? demangle(std::string(n, at).c_str()) : demangle(n);
        }

        std::string file;
        int line = 0;
        Dwarf_Addr bias = 0;
        if (Dwarf_Die* cu = find_cu(mod, base.address, &bias)) {
            const Dwarf_Addr pc = base.address - bias;
            const range_index& functions = functions_of(mod, cu);
            const range_entry* fn = lookup(functions, pc);
            // libdw answers with the line table's last row at or before the address, even for code
            // of no function of the unit, and its rows are out of order where a discarded copy's
            // claim addresses from 0: `_start` after main got main's last line, assembly between a
            // unit's functions (GCC -O0 puts them all in one line sequence) the previous function's.
            // In a unit that has functions, a line counts only inside one, and only from a row of
            // that function's range; a unit without any (an assembler source's) has lines for its
            // own ranges.
            if (fn != nullptr || functions.empty()) {
                Dwarf_Addr row = 0;
                Dwarf_Line* l = ::dwarf_getsrc_die(cu, pc);
                if (l != nullptr && ::dwarf_lineaddr(l, &row) == 0 &&
                    (fn != nullptr ? row >= fn->lo && row < fn->hi : ::dwarf_haspc(cu, row) > 0)) {
                    int ln = 0;
                    if (const char* src = ::dwarf_linesrc(l, nullptr, nullptr); src && ::dwarf_lineno(l, &ln) == 0) {
                        file = src;
                        line = ln;
                    }
                }
            }
            // The chain of inlined calls at this address, from the DWARF DIE tree: innermost inlined
            // instance first, up to the out-of-line function (what `eu-addr2line -i` prints).
            std::vector<Dwarf_Die> chain;
            if (fn != nullptr) {
                chain.push_back(fn->die);
                find_scopes(&chain.back(), pc, chain, 1);
            }
            Dwarf_Files* files = nullptr;
            std::size_t nfiles = 0;
            const bool have_files = ::dwarf_getsrcfiles(cu, &files, &nfiles) == 0;
            for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
                Dwarf_Die* die = &*it;
                const int tag = ::dwarf_tag(die);
                if (tag == DW_TAG_subprogram) {
                    // Its linkage name beats the symbol's (which may be a ".cold" part); its plain
                    // DW_AT_name does not (the symbol is qualified).
                    bool qualified = false;
                    std::string name = die_name(die, &qualified);
                    if (!name.empty() && (qualified || outer_name.empty())) outer_name = std::move(name);
                    break;
                }
                if (tag != DW_TAG_inlined_subroutine) continue;
                frame f = base;
                f.function = die_name(die);
                f.file = file;
                f.line = line;
                f.inlined = true;
                out.push_back(std::move(f));
                // The caller's location is this instance's call site.
                Dwarf_Attribute attr;
                Dwarf_Word idx = 0;
                Dwarf_Word cl = 0;
                file.clear();
                line = 0;
                if (have_files && ::dwarf_formudata(::dwarf_attr(die, DW_AT_call_file, &attr), &idx) == 0 &&
                    idx < nfiles) {
                    if (const char* src = ::dwarf_filesrc(files, idx, nullptr, nullptr)) file = src;
                }
                if (::dwarf_formudata(::dwarf_attr(die, DW_AT_call_line, &attr), &cl) == 0)
                    line = static_cast<int>(cl);
            }
        }
        frame f = base;
        f.function = std::move(outer_name);
        f.file = std::move(file);
        f.line = line;
        out.push_back(std::move(f));
    }

private:
    dw_symboliser() = default;

    /// Address ranges of DIEs, sorted by start: a function's code or a compilation unit's.
    struct range_entry {
        Dwarf_Addr lo;
        Dwarf_Addr hi;
        Dwarf_Die die;
    };
    using range_index = std::vector<range_entry>;

    /// A range from address 0 is a discarded copy's (a function template or inline function two
    /// units emit: the linker keeps one, and GNU ld resolves the other's addresses to 0), never code:
    /// 0 is the ELF header of a shared object or PIE and unmapped in an executable.
    static void add_ranges(Dwarf_Die* die, range_index& index) {
        Dwarf_Addr base = 0, lo = 0, hi = 0;
        std::ptrdiff_t offset = 0;
        while ((offset = ::dwarf_ranges(die, offset, &base, &lo, &hi)) > 0)
            if (hi > lo && lo != 0) index.push_back(range_entry{lo, hi, *die});
    }

    static void sort_index(range_index& index) {
        std::sort(index.begin(), index.end(),
                  [](const range_entry& a, const range_entry& b) { return a.lo < b.lo; });
    }

    static const range_entry* lookup(const range_index& index, Dwarf_Addr pc) {
        auto it = std::upper_bound(index.begin(), index.end(), pc,
                                   [](Dwarf_Addr a, const range_entry& e) { return a < e.lo; });
        // Ranges of distinct functions do not overlap; look back a little in case some nest.
        for (int back = 0; it != index.begin() && back < 8; ++back) {
            --it;
            if (pc >= it->lo && pc < it->hi) return &*it;
        }
        return nullptr;
    }

    /// The compilation unit holding `addr`. libdw's lookup trusts .debug_aranges to be present and
    /// complete (elfutils bug 22288); Clang does not emit it by default, and libdw 0.188 (Debian 12)
    /// then finds nothing. So index the units' own ranges instead, once per module. libdwfl's answer
    /// is checked too: its search stops at the last range starting before `addr` without checking
    /// where that range ends, so code of no unit (the start files' _start, after the program's
    /// main in .text.startup) is given the unit before it.
    Dwarf_Die* find_cu(Dwfl_Module* mod, Dwarf_Addr addr, Dwarf_Addr* bias) {
        if (Dwarf_Die* cu = ::dwfl_module_addrdie(mod, addr, bias); cu != nullptr && ::dwarf_haspc(cu, addr - *bias) > 0)
            return cu;
        auto found = cu_index_.find(mod);
        if (found == cu_index_.end()) {
            std::pair<Dwarf_Addr, range_index> entry{0, {}};
            Dwarf_Die* cu = nullptr;
            while ((cu = ::dwfl_module_nextcu(mod, cu, &entry.first)) != nullptr) add_ranges(cu, entry.second);
            sort_index(entry.second);
            found = cu_index_.emplace(mod, std::move(entry)).first;
        }
        *bias = found->second.first;
        const range_entry* unit = lookup(found->second.second, addr - *bias);
        return unit != nullptr ? const_cast<Dwarf_Die*>(&unit->die) : nullptr;
    }

    /// The out-of-line functions of a compilation unit, by address (once per unit). Clang nests
    /// definitions inside DW_TAG_namespace DIEs, which have no address range (so dwarf_getscopes,
    /// which prunes such DIEs, misses them): namespaces are entered without a range check.
    const range_index& functions_of(Dwfl_Module* mod, Dwarf_Die* cu) {
        const auto key = std::make_pair(mod, ::dwarf_dieoffset(cu));
        auto found = function_index_.find(key);
        if (found == function_index_.end()) {
            range_index index;
            collect_functions(cu, index, 0);
            sort_index(index);
            found = function_index_.emplace(key, std::move(index)).first;
        }
        return found->second;
    }

    static void collect_functions(Dwarf_Die* parent, range_index& index, int depth) {
        Dwarf_Die child;
        if (depth > 16 || ::dwarf_child(parent, &child) != 0) return;
        do {
            switch (::dwarf_tag(&child)) {
                case DW_TAG_namespace:
                case DW_TAG_module:
                    collect_functions(&child, index, depth + 1);
                    break;
                case DW_TAG_subprogram:
                    add_ranges(&child, index);
                    break;
                default:
                    break;
            }
        } while (::dwarf_siblingof(&child, &child) == 0);
    }

    /// Append to `chain` the DIEs inside `parent` that contain `pc` (inlined instances, lexical
    /// blocks), outermost first.
    static void find_scopes(Dwarf_Die* parent, Dwarf_Addr pc, std::vector<Dwarf_Die>& chain, int depth) {
        Dwarf_Die child;
        if (depth > 64 || ::dwarf_child(parent, &child) != 0) return;
        do {
            switch (::dwarf_tag(&child)) {
                case DW_TAG_inlined_subroutine:
                case DW_TAG_lexical_block:
                case DW_TAG_try_block:
                case DW_TAG_catch_block:
                    if (::dwarf_haspc(&child, pc) > 0) {
                        chain.push_back(child);
                        find_scopes(&chain.back(), pc, chain, depth + 1);
                        return;
                    }
                    break;
                default:
                    break;
            }
        } while (::dwarf_siblingof(&child, &child) == 0);
    }

    /// The function's name: its demangled linkage name (qualified, with parameters) when the DIE
    /// or its origin has one, else the plain DW_AT_name.
    static std::string die_name(Dwarf_Die* die, bool* qualified = nullptr) {
        Dwarf_Attribute attr;
        for (const unsigned at : {static_cast<unsigned>(DW_AT_linkage_name),
                                  static_cast<unsigned>(DW_AT_MIPS_linkage_name)}) {
            if (const char* s = ::dwarf_formstring(::dwarf_attr_integrate(die, at, &attr))) {
                if (qualified != nullptr) *qualified = true;
                return demangle(s);
            }
        }
        if (const char* s = ::dwarf_formstring(::dwarf_attr_integrate(die, DW_AT_name, &attr)))
            return s;
        return std::string();
    }

    /// libdwfl's find_elf, and when the path /proc/self/maps names cannot be opened, the mapping
    /// itself through /proc/self/map_files/START-END: the file was deleted or replaced since it was
    /// mapped (a program upgraded while it runs), or it was mapped before the process entered another
    /// mount namespace inside a chroot, where the kernel then names it by its path outside the chroot.
    static int find_elf(Dwfl_Module* mod, void** userdata, const char* name, Dwarf_Addr base,
                        char** file_name, Elf** elfp) {
        const int fd = ::dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
        if (fd >= 0 || *elfp != nullptr || name == nullptr || name[0] != '/') return fd;
        Dwarf_Addr low = 0;
        Dwarf_Addr high = 0;
        ::dwfl_module_info(mod, nullptr, &low, &high, nullptr, nullptr, nullptr, nullptr);
        char maps_path[64];
        std::snprintf(maps_path, sizeof maps_path, "/proc/%d/maps", symbolise_pid() != 0 ? symbolise_pid() : ::getpid());
        std::FILE* maps = std::fopen(maps_path, "re");
        if (maps == nullptr) return -1;
        int found = -1;
        char line[4096];
        while (found < 0 && std::fgets(line, sizeof line, maps) != nullptr) {
            unsigned long start = 0;
            unsigned long end = 0;
            int path_at = 0;
            if (std::sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &start, &end, &path_at) != 2 ||
                path_at == 0 || line[path_at] != '/' || start < low || start >= high)
                continue;
            char path[64];
            std::snprintf(path, sizeof path, "/proc/%d/map_files/%lx-%lx",
                          symbolise_pid() != 0 ? symbolise_pid() : ::getpid(), start, end);
            found = ::open(path, O_RDONLY | O_CLOEXEC);
        }
        std::fclose(maps);
        return found;
    }

public:
    /// Start the libdwfl session on first use. False (and error() says why) when libdw cannot
    /// work: traces then show module+offset and say so. Caller holds `mutex`.
    bool ready() {
        if (dwfl_ != nullptr) return true;
        if (!error_.empty()) return false;
        // The weak references are null when libdw is not there to bind them (a static link with libdw.a
        // pulls in only what strong references need).
        void* const functions[] = {
            reinterpret_cast<void*>(&::dwarf_attr),
            reinterpret_cast<void*>(&::dwarf_attr_integrate),
            reinterpret_cast<void*>(&::dwarf_child),
            reinterpret_cast<void*>(&::dwarf_dieoffset),
            reinterpret_cast<void*>(&::dwarf_filesrc),
            reinterpret_cast<void*>(&::dwarf_formstring),
            reinterpret_cast<void*>(&::dwarf_formudata),
            reinterpret_cast<void*>(&::dwarf_getsrc_die),
            reinterpret_cast<void*>(&::dwarf_getsrcfiles),
            reinterpret_cast<void*>(&::dwarf_haspc),
            reinterpret_cast<void*>(&::dwarf_lineaddr),
            reinterpret_cast<void*>(&::dwarf_lineno),
            reinterpret_cast<void*>(&::dwarf_linesrc),
            reinterpret_cast<void*>(&::dwarf_ranges),
            reinterpret_cast<void*>(&::dwarf_siblingof),
            reinterpret_cast<void*>(&::dwarf_tag),
            reinterpret_cast<void*>(&::dwfl_addrmodule),
            reinterpret_cast<void*>(&::dwfl_begin),
            reinterpret_cast<void*>(&::dwfl_end),
            reinterpret_cast<void*>(&::dwfl_errmsg),
            reinterpret_cast<void*>(&::dwfl_linux_proc_find_elf),
            reinterpret_cast<void*>(&::dwfl_linux_proc_report),
            reinterpret_cast<void*>(&::dwfl_module_addrdie),
            reinterpret_cast<void*>(&::dwfl_module_addrinfo),
            reinterpret_cast<void*>(&::dwfl_module_getelf),
            reinterpret_cast<void*>(&::dwfl_module_info),
            reinterpret_cast<void*>(&::dwfl_module_nextcu),
            reinterpret_cast<void*>(&::dwfl_report_begin),
            reinterpret_cast<void*>(&::dwfl_report_end),
            reinterpret_cast<void*>(&::dwfl_standard_find_debuginfo),
        };
        bool all = add_ldw_to_the_link_or_define_PRETTY_EXCEPTION_USE_LIBDW_0() != nullptr;
        for (void* f : functions) all = all && f != nullptr;
        if (!all) {
            error_ = "no function names or file:line: libdw is not linked in whole (link with -ldw, dynamically)";
            return false;
        }
        callbacks_.find_elf = &dw_symboliser::find_elf;
        callbacks_.find_debuginfo = ::dwfl_standard_find_debuginfo;
        callbacks_.section_address = nullptr;
        callbacks_.debuginfo_path = &debuginfo_path_;
        dwfl_ = ::dwfl_begin(&callbacks_);
        if (dwfl_ == nullptr) {
            error_ = std::string("no function names or file:line: libdw could not start (") + ::dwfl_errmsg(-1) + ")";
            return false;
        }
        if (!report()) {
            ::dwfl_end(dwfl_);
            dwfl_ = nullptr;
            return false;
        }
        return true;
    }
    const std::string& error() const noexcept { return error_; }

private:
    bool report() {
        // Modules may go away in a new report: forget everything that points into them.
        cu_index_.clear();
        function_index_.clear();
        ::dwfl_report_begin(dwfl_);
        const int rc = ::dwfl_linux_proc_report(dwfl_, symbolise_pid() != 0 ? symbolise_pid() : ::getpid());
        ::dwfl_report_end(dwfl_, nullptr, nullptr);
        if (rc != 0) {
            error_ = std::string("no function names or file:line: libdw could not read the process's modules (") +
                     (rc > 0 ? std::strerror(rc) : ::dwfl_errmsg(-1)) + ")";
            return false;
        }
        return true;
    }

    Dwfl_Callbacks callbacks_{};
    char* debuginfo_path_ = nullptr;
    Dwfl* dwfl_ = nullptr;
    std::string error_;
    std::map<Dwfl_Module*, std::pair<Dwarf_Addr, range_index>> cu_index_;
    std::map<std::pair<Dwfl_Module*, Dwarf_Off>, range_index> function_index_;
};

#endif  // PRETTY_EXCEPTION_USE_LIBDW

/// How many traces were symbolised so far in this process (the tests check that capture does not).
inline std::atomic<unsigned long>& symbolise_calls() noexcept {
    static std::atomic<unsigned long> n{0};
    return n;
}

inline void symbolise(trace_state& s) noexcept {
    symbolise_calls().fetch_add(1, std::memory_order_relaxed);
    try {
        std::vector<frame> out;
        out.reserve(s.count + 4);
#if PRETTY_EXCEPTION_USE_LIBDW
        dw_symboliser& dw = dw_symboliser::instance();
        std::lock_guard<std::mutex> lock(dw.mutex);
        if (s.count != 0 && !dw.ready()) s.notes.push_back(dw.error());
#endif
        for (std::size_t i = 0; i < s.count; ++i) {
            frame base;
            base.address = s.pcs[i];
            if (symbolise_pid() == 0) locate_module(base);
#if PRETTY_EXCEPTION_USE_LIBDW
            dw.resolve(base, out);
#else
            Dl_info info;
            if (::dladdr(reinterpret_cast<void*>(base.address), &info) != 0 && info.dli_sname != nullptr)
                base.function = demangle(info.dli_sname);
            out.push_back(std::move(base));
#endif
        }
        // Hide the leading frames of this header (and of the runtime, for a stack taken in
        // std::terminate); never hide everything.
        std::size_t first = 0;
        while (first < out.size() && is_internal(out[first], s.hide_runtime)) ++first;
        if (first == out.size()) first = 0;
        out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(first));
        s.frames = std::move(out);
#if !PRETTY_EXCEPTION_USE_LIBDW
        s.notes.push_back(
            "built without libdw (PRETTY_EXCEPTION_USE_LIBDW=0): no file:line, names of exported "
            "functions only");
#endif
        if (s.truncated)
            s.notes.push_back("stack cut at " + std::to_string(PRETTY_EXCEPTION_MAX_FRAMES) +
                              " frames (PRETTY_EXCEPTION_MAX_FRAMES)");
        if (s.incomplete)
            s.notes.push_back("stack incomplete: the unwinder stopped after " + std::to_string(s.count) +
                              " frames (no unwind information for the last one's caller)");
        if (s.count == 0) s.notes.push_back("no frames: the unwinder could not walk the stack");
    } catch (...) {
        s.frames.clear();
        try {
            s.notes.emplace_back("symbolisation failed: out of memory; raw addresses only");
        } catch (...) {
        }
    }
}

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

// ---------------------------------------------------------------------------------------------
// stack_trace members.
// ---------------------------------------------------------------------------------------------
inline const std::vector<frame>& stack_trace::frames() const noexcept {
    static const std::vector<frame> none;
    if (!state_) return none;
    detail::trace_state* s = state_.get();
    try {
        std::call_once(s->once, [s] { detail::symbolise(*s); });
    } catch (...) {
        return none;
    }
    return s->frames;
}

inline const std::vector<std::string>& stack_trace::notes() const noexcept {
    static const std::vector<std::string> not_captured{"stack not captured (out of memory at the throw)"};
    if (!state_) return not_captured;
    (void)frames();
    return state_->notes;
}

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

/// Capture the stack of every exception thrown from now on, whoever throws it (a `throw` in the
/// program, std::vector::at or std::stoi in libstdc++, another library), so that describe(e),
/// to_string(e) and stack_of(e) inside the catch block, and current_trace(), give the throw-site stack.
/// `on == false` stops capturing. Returns true when the hook is in place (it is unless libstdc++ is
/// linked statically, or this header is only in a library loaded with dlopen). Call it first thing
/// in main. Thread-safe; does not allocate (the first throw of each thread allocates its ring); not
/// async-signal-safe (dlsym).
/// Cost: one stack walk per throw; see the README.
inline bool trace_all_exceptions(bool on = true) noexcept {
    detail::trace_all_flag().store(on, std::memory_order_relaxed);
    return detail::hook_in_place();
}

/// The throw-site stack of `e`: its own for a PRETTY_THROW exception; else the one the hook recorded
/// (trace_all_exceptions()) when `e` was thrown on this thread among its last 16 throws; else an
/// empty trace. A rethrow (`throw;`, std::rethrow_exception) keeps the first throw's stack.
/// Allocates one block the first time for a recorded stack; never throws; not async-signal-safe.
inline stack_trace stack_of(const std::exception& e) noexcept {
    if (const traced_base* t = detail::find_trace(e)) return t->trace();
    return detail::find_thrown(dynamic_cast<const void*>(&e), &typeid(e));
}

/// The throw-site stack of the exception being handled (inside a catch block, of any type, also
/// `catch (...)`); an empty trace outside one. As stack_of(). Never throws; not async-signal-safe.
inline stack_trace current_trace() noexcept {
    const std::type_info* type = abi::__cxa_current_exception_type();
    if (type == nullptr) return stack_trace();
    try {
        std::rethrow_exception(std::current_exception());
    } catch (const std::exception& e) {
        return stack_of(e);
    } catch (...) {
    }
    // Not a std::exception: its address is out of reach, its type is the key.
    return detail::find_thrown(nullptr, type);
}

/// Install the terminate handler: an uncaught exception is described on stderr (a traced one with its
/// throw stack, any other with the stack at std::terminate, which for an exception that found no
/// handler still contains the throw site), then the process aborts. Returns the previous handler.
/// Call it once, early (e.g. first thing in main). Thread-safe; does not allocate; not
/// async-signal-safe. The handler itself allocates (it describes the exception).
inline std::terminate_handler install_terminate_handler() noexcept {
    return std::set_terminate(&detail::terminate_handler);
}

namespace detail {

// ---------------------------------------------------------------------------------------------
// Crashes: a handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT.
//
// The handler runs on an alternate signal stack (so a stack overflow is reported too) and calls only
// async-signal-safe functions (POSIX.1-2017 2.4.3 lists them): it walks the stack from the signal's
// context with _Unwind_Backtrace into a buffer on its own stack, writes one line with write(2), and
// runs a helper: a fork made with the raw clone system call (glibc's fork() runs atfork handlers and
// takes malloc's locks) that execs this same program with PRETTY_EXCEPTION_CRASH_HELPER in its
// environment. In that fresh process, before main, the header symbolises the crashed process's
// addresses through /proc/PID (libdw, as for exceptions), prints the frames and sends the syslog record,
// then exits. The handler waits for it (at most 30 s), then puts the default action back and raises the
// signal again, so the process dies of it (shell status 128+N, a core dump if enabled).
// ---------------------------------------------------------------------------------------------

/// A fixed buffer that formats without allocating: async-signal-safe.
template <std::size_t N>
struct signal_text {
    char data[N];
    std::size_t size = 0;

    void add(const char* s) noexcept {
        while (s != nullptr && *s != '\0' && size < N) data[size++] = *s++;
    }
    void add_hex(std::uintptr_t v) noexcept {
        char digits[2 * sizeof v];
        int n = 0;
        do {
            digits[n++] = "0123456789abcdef"[v & 0xf];
            v >>= 4;
        } while (v != 0);
        add("0x");
        while (n > 0 && size < N) data[size++] = digits[--n];
    }
    void add_dec(long v) noexcept {
        char digits[24];
        int n = 0;
        const bool negative = v < 0;
        unsigned long u = negative ? 0ul - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
        do {
            digits[n++] = static_cast<char>('0' + u % 10);
            u /= 10;
        } while (u != 0);
        if (negative) add("-");
        while (n > 0 && size < N) data[size++] = digits[--n];
    }
    /// NUL-terminated (the last byte is given up when full).
    const char* c_str() noexcept {
        data[size < N ? size : N - 1] = '\0';
        return data;
    }
};

inline const char* signal_name(int sig) noexcept {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV";
        case SIGBUS: return "SIGBUS";
        case SIGILL: return "SIGILL";
        case SIGFPE: return "SIGFPE";
        case SIGABRT: return "SIGABRT";
        default: return "signal";
    }
}

/// What si_code says, in words (sigaction(2)).
inline const char* signal_cause(int sig, int code) noexcept {
    if (code == SI_USER) return "sent by kill";
    if (code == SI_TKILL) return "sent by tkill: raise or abort";
    if (code == SI_QUEUE) return "sent by sigqueue";
    switch (sig) {
        case SIGSEGV:
            if (code == SEGV_MAPERR) return "address not mapped to object";
            if (code == SEGV_ACCERR) return "invalid permissions for mapped object";
            break;
        case SIGBUS:
            if (code == BUS_ADRALN) return "invalid address alignment";
            if (code == BUS_ADRERR) return "nonexistent physical address";
            if (code == BUS_OBJERR) return "object-specific hardware error";
            break;
        case SIGILL:
            if (code == ILL_ILLOPC) return "illegal opcode";
            if (code == ILL_ILLOPN) return "illegal operand";
            if (code == ILL_ILLADR) return "illegal addressing mode";
            if (code == ILL_ILLTRP) return "illegal trap";
            if (code == ILL_PRVOPC) return "privileged opcode";
            break;
        case SIGFPE:
            if (code == FPE_INTDIV) return "integer divide by zero";
            if (code == FPE_INTOVF) return "integer overflow";
            if (code == FPE_FLTDIV) return "floating-point divide by zero";
            if (code == FPE_FLTOVF) return "floating-point overflow";
            if (code == FPE_FLTINV) return "floating-point invalid operation";
            break;
        default:
            break;
    }
    return "unknown cause";
}

/// "SIGSEGV (address not mapped to object) at address 0x0": async-signal-safe.
template <std::size_t N>
void describe_signal(signal_text<N>& t, int sig, int code, std::uintptr_t address) noexcept {
    t.add(signal_name(sig));
    t.add(" (");
    t.add(signal_cause(sig, code));
    t.add(")");
    if (code > 0 && sig != SIGABRT) {  // raised by the hardware: si_addr means something
        t.add(" at address ");
        t.add_hex(address);
    }
}

constexpr int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr const char* crash_helper_variable = "PRETTY_EXCEPTION_CRASH_HELPER";

/// The crash handler's settings, written once by install_crash_handler().
struct crash_config {
    std::atomic<bool> installed{false};
    std::atomic<bool> to_syslog{true};
    std::atomic<long> handling_thread{0};  // the thread reporting a crash (gettid), 0 for none
    std::atomic<bool> helper_entry_in_executable{false};  // re-executing the program reaches the helper
    char exe[4096] = {};                   // /proc/self/exe's target, for the raw fallback
};

inline crash_config& crash_settings() noexcept {
    static crash_config config;
    return config;
}

/// Write `pcs` as raw frames (`#N 0x... in module+0x...`): what is printed when the helper cannot run.
/// Async-signal-safe: _dl_find_object (glibc 2.35) takes no lock.
inline void write_raw_frames(const raw_capture& raw) noexcept {
    for (std::size_t i = 0; i < raw.count; ++i) {
        signal_text<4096 + 128> line;
        line.add("    #");
        line.add_dec(static_cast<long>(i));
        line.add(" ");
        line.add_hex(raw.pcs[i]);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
        dl_find_object found;
        if (::_dl_find_object(reinterpret_cast<void*>(raw.pcs[i]), &found) == 0 && found.dlfo_link_map != nullptr) {
            const char* name = found.dlfo_link_map->l_name;
            line.add(" in ");
            line.add(name != nullptr && name[0] != '\0' ? name : crash_settings().exe);
            line.add("+");
            line.add_hex(raw.pcs[i] - found.dlfo_link_map->l_addr);
        }
#endif
        line.add("\n");
        write_all(STDERR_FILENO, std::string_view(line.data, line.size));
    }
}

/// Run the helper (this program, re-executed) on the crash and wait for it. True when it printed the
/// frames. Async-signal-safe: raw clone, execve, waitpid, nanosleep, kill.
inline bool run_crash_helper(int sig, int code, std::uintptr_t address, const raw_capture& raw) noexcept {
#if !PRETTY_EXCEPTION_USE_LIBDW
    // Without libdw the helper could only repeat module+offset, which the handler writes itself.
    (void)sig;
    (void)code;
    (void)address;
    (void)raw;
    return false;
#endif
    // Re-executing a program whose executable lacks the helper's entry would start it a second time.
    if (!crash_settings().helper_entry_in_executable.load(std::memory_order_relaxed)) return false;
    static signal_text<64 + 20 * PRETTY_EXCEPTION_MAX_FRAMES + 256> value;  // only the reporting thread
    value.size = 0;
    value.add(crash_helper_variable);
    value.add("=3 ");
    value.add_dec(static_cast<long>(::getpid()));
    value.add(" ");
    value.add_dec(::syscall(SYS_gettid));
    value.add(" ");
    value.add_dec(sig);
    value.add(" ");
    value.add_dec(code);
    value.add(" ");
    value.add_hex(address);
    value.add(" ");
    const int word = syslog_word().load(std::memory_order_relaxed);
    value.add_dec(crash_settings().to_syslog.load(std::memory_order_relaxed) ? ((word & LOG_FACMASK) | LOG_CRIT) : -1);
    value.add(" ");
    value.add_dec((raw.truncated ? 1 : 0) | (raw.incomplete ? 2 : 0) |
                  (runtime_frames_word().load(std::memory_order_relaxed) ? 4 : 0));
    value.add(" ");
    value.add_dec(snippet_word().load(std::memory_order_relaxed));  // the printing settings, as here
    for (std::size_t i = 0; i < raw.count; ++i) {
        value.add(" ");
        value.add_hex(raw.pcs[i]);
    }
    // The environment as it is, without an older helper variable, plus ours.
    static char* env[1024];
    std::size_t n = 0;
    const std::size_t name_length = std::strlen(crash_helper_variable);
    for (char** e = environ; e != nullptr && *e != nullptr && n + 2 < sizeof env / sizeof env[0]; ++e) {
        if (std::strncmp(*e, crash_helper_variable, name_length) == 0 && (*e)[name_length] == '=') continue;
        env[n++] = *e;
    }
    env[n++] = const_cast<char*>(value.c_str());
    env[n] = nullptr;
    char helper_name[] = "pretty-exception-crash-helper";
    char* argv[] = {program_invocation_name != nullptr ? program_invocation_name : helper_name, nullptr};

    const long child = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (child < 0) return false;
    if (child == 0) {
        ::execve("/proc/self/exe", argv, env);
        ::_exit(127);
    }
    int status = 0;
    for (int waited_ms = 0;; waited_ms += 10) {
        const pid_t r = ::waitpid(static_cast<pid_t>(child), &status, WNOHANG);
        if (r == static_cast<pid_t>(child)) break;
        if (r < 0 && errno != EINTR) return false;
        if (waited_ms >= 30000) {
            ::kill(static_cast<pid_t>(child), SIGKILL);
            ::waitpid(static_cast<pid_t>(child), &status, 0);
            write_all(STDERR_FILENO, "    (the symbolising helper took more than 30 s: killed)\n");
            return false;
        }
        timespec ten_ms{0, 10 * 1000 * 1000};
        ::nanosleep(&ten_ms, nullptr);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

inline void crash_handler(int sig, siginfo_t* info, void* context) noexcept {
    const int saved_errno = errno;
    crash_config& config = crash_settings();
    const long self = ::syscall(SYS_gettid);
    long idle = 0;
    if (!config.handling_thread.compare_exchange_strong(idle, self)) {
        if (idle != self) {
            // Another thread is reporting its crash and will end the process: wait for that.
            for (;;) ::pause();
        }
        // A fault inside this handler: die of it at once.
        signal(sig, SIG_DFL);
        ::syscall(SYS_tgkill, ::getpid(), self, sig);
        return;
    }
    if (!(sig == SIGABRT && terminate_reported().load())) {
        std::uintptr_t pc = 0;
        if (context != nullptr) {
            const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
            pc = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__i386__)
            pc = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_EIP]);
#elif defined(__aarch64__)
            pc = static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
#else
            (void)uc;
#endif
        }
        // The walk passes through the kernel's signal frame; keep it from the faulting instruction on.
        raw_capture raw;
        unwind_walk w{&raw, pc, pc == 0, false, false};
        const _Unwind_Reason_Code rc = _Unwind_Backtrace(&unwind_one, &w);
        raw.incomplete = !w.stopped && (rc != _URC_END_OF_STACK || !w.reached_end);
        if (!w.started || raw.count == 0) {  // the unwinder did not reach the faulting frame
            raw.count = 1;
            raw.pcs[0] = pc;
            raw.incomplete = true;
        }
        signal_text<256> head;
        head.add("pretty_exception: ");
        describe_signal(head, sig, info != nullptr ? info->si_code : 0,
                        info != nullptr ? reinterpret_cast<std::uintptr_t>(info->si_addr) : 0);
        head.add(thread_label::current().text);
        head.add("; stack of the faulting thread, innermost first:\n");
        write_all(STDERR_FILENO, std::string_view(head.data, head.size));
        if (!run_crash_helper(sig, info != nullptr ? info->si_code : 0,
                              info != nullptr ? reinterpret_cast<std::uintptr_t>(info->si_addr) : 0, raw)) {
            write_raw_frames(raw);
            write_all(STDERR_FILENO,
                      !PRETTY_EXCEPTION_USE_LIBDW
                          ? "    note: raw addresses: built without libdw (addr2line -f -i -C -e MODULE OFFSET "
                            "resolves them)\n"
                      : !config.helper_entry_in_executable.load(std::memory_order_relaxed)
                          ? "    note: raw addresses: install_crash_handler() was called from a shared library, "
                            "and the helper runs only in an executable that calls it (addr2line -f -i -C -e "
                            "MODULE OFFSET resolves them)\n"
                          : "    note: raw addresses: the symbolising helper could not run (addr2line -f -i -C "
                            "-e MODULE OFFSET resolves them)\n");
        }
    }
    // The default action, for the same signal: pending until this handler returns, then fatal.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    ::syscall(SYS_tgkill, ::getpid(), self, sig);
    errno = saved_errno;
}

/// In the helper process (this program re-executed by the crash handler, before main): symbolise the
/// crashed parent's stack, print it to stderr, send the syslog record, exit. Returns false (and the
/// program runs normally) when this process is not such a helper.
inline bool run_as_crash_helper() noexcept {
    const char* value = ::secure_getenv(crash_helper_variable);
    if (value == nullptr) return false;
    try {
        char* p = nullptr;
        const long version = std::strtol(value, &p, 10);  // 3: with the printing settings and the thread
        const long pid = std::strtol(p, &p, 10);
        if (version != 3 || pid != static_cast<long>(::getppid())) {
            ::unsetenv(crash_helper_variable);  // not ours (copied from a crashed parent's environment?)
            return false;
        }
        const long tid = std::strtol(p, &p, 10);
        const int sig = static_cast<int>(std::strtol(p, &p, 10));
        const int code = static_cast<int>(std::strtol(p, &p, 10));
        const auto address = static_cast<std::uintptr_t>(std::strtoull(p, &p, 16));
        const long log = std::strtol(p, &p, 10);
        const long flags = std::strtol(p, &p, 10);
        runtime_frames_word().store((flags & 4) != 0);
        snippet_word().store(static_cast<int>(std::strtol(p, &p, 10)));
        auto state = std::make_shared<trace_state>();
        state->truncated = (flags & 1) != 0;
        state->incomplete = (flags & 2) != 0;
        while (*p == ' ' && state->count < PRETTY_EXCEPTION_MAX_FRAMES)
            state->pcs[state->count++] = static_cast<std::uintptr_t>(std::strtoull(p, &p, 16));
        symbolise_pid() = static_cast<pid_t>(pid);
        const stack_trace trace = trace_access::make(state);
        std::string out;
        append_trace(out, trace, make_palette(false), "    ", false);
        write_all(STDERR_FILENO, out);
        if (log >= 0) {
            signal_text<256> head;
            head.add("process ");
            head.add_dec(pid);
            head.add(" killed by ");
            describe_signal(head, sig, code, address);
            // The crashed thread's name, from the parent, which waits for this helper.
            char name[17] = {};
            const std::string comm = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm";
            if (const int fd = ::open(comm.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
                if (::read(fd, name, sizeof name - 1) < 0) name[0] = '\0';
                ::close(fd);
            }
            head.add(thread_label(tid, name).text);
            std::string line = head.c_str();
            line += " | stack: ";
            append_trace(line, trace, make_palette(false), "", true);
            send_to_syslog(static_cast<int>(log), line.c_str());
        }
    } catch (...) {
        ::_exit(1);
    }
    ::_exit(0);
}

/// Evaluated before main in every program that calls install_crash_handler(): the helper's entry.
inline const bool crash_helper_checked = run_as_crash_helper();

/// Whether `address` lies in the main executable (the first object dl_iterate_phdr reports).
inline bool in_executable(const void* address) noexcept {
    module_hit hit{reinterpret_cast<std::uintptr_t>(address), nullptr, 0, false};
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* arg) -> int {
            auto* h = static_cast<module_hit*>(arg);
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
                if (ph.p_type == PT_LOAD && h->address >= lo && h->address < lo + ph.p_memsz) h->found = true;
            }
            return 1;  // the executable comes first: stop there
        },
        &hit);
    return hit.found;
}

}  // namespace detail

/// Give the calling thread an alternate signal stack of 64 KiB (mmap, once per thread), so that the
/// crash handler can report a stack overflow of this thread. install_crash_handler() does it for its
/// caller; call it at the start of other threads. Not async-signal-safe; allocates (mmap). Keeps an
/// alternate stack already there of 64 KiB or more (a sanitizer's, the program's).
inline bool install_alternate_stack() noexcept {
    constexpr std::size_t size = 64 * 1024;
    stack_t old{};
    if (::sigaltstack(nullptr, &old) == 0 && (old.ss_flags & SS_DISABLE) == 0 && old.ss_size >= size) return true;
    void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (mem == MAP_FAILED) return false;
    stack_t st{};
    st.ss_sp = mem;
    st.ss_size = size;
    if (::sigaltstack(&st, nullptr) != 0) {
        ::munmap(mem, size);
        return false;
    }
    return true;
}

/// Install the crash handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT: the faulting thread's
/// stack, faulting frame first, symbolised to function and file:line, on stderr and (`to_syslog`) as
/// one syslog record (facility of set_syslog(), priority LOG_CRIT); then the default action, so the
/// process dies of the same signal (shell status 128+N, a core dump if enabled). The handler allocates
/// nothing and takes no lock; it symbolises in a helper process (this program, re-executed: see the
/// README). It runs on an alternate stack, installed here for the calling thread. Call it once, early
/// in main. Not async-signal-safe; allocates the alternate stack. Returns false if a sigaction failed.
inline bool install_crash_handler(bool to_syslog = true) noexcept {
    detail::crash_config& config = detail::crash_settings();
    // Links the helper's entry into the module that calls this. Only an executable's entry is reached
    // when the program is executed again; from a shared library the handler prints raw addresses.
    config.helper_entry_in_executable.store(detail::in_executable(&detail::crash_helper_checked));
    config.to_syslog.store(to_syslog);
    if (config.exe[0] == '\0') {
        const ssize_t n = ::readlink("/proc/self/exe", config.exe, sizeof config.exe - 1);
        config.exe[n > 0 ? n : 0] = '\0';
    }
    // Walk once now: the unwinder's one-time set-up and the lazy binding of its functions happen here,
    // not in the handler.
    detail::raw_capture warm;
    detail::capture_into(warm, 0);
    install_alternate_stack();
    struct sigaction sa {};
    sa.sa_sigaction = &detail::crash_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    bool ok = true;
    for (const int sig : detail::crash_signals) ok = ::sigaction(sig, &sa, nullptr) == 0 && ok;
    config.installed.store(ok);
    return ok;
}

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_H

/// @brief pretty_exception's stack capture: raw PCs by _Unwind_Backtrace, the stack_trace handle, traced_base.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
///
/// Capture allocates nothing beyond its one block and symbolises nothing: stack_trace::frames() and
/// notes() are defined in symbolise.h, stack_trace::to_string() in format.h.
#ifndef PRETTY_EXCEPTION_CAPTURE_H
#define PRETTY_EXCEPTION_CAPTURE_H

#include "config.h"
#include "types.h"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>
#include <unwind.h>

namespace pretty_exception {

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

}  // namespace detail

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_CAPTURE_H

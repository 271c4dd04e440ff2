/// @brief pretty_exception's symbolisation of a captured stack (libdw, or dladdr without it); stack_trace::frames() and notes().
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_SYMBOLISE_H
#define PRETTY_EXCEPTION_SYMBOLISE_H

#include "capture.h"
#include "libdw.h"
#include "names.h"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>
#include <dlfcn.h>

namespace pretty_exception {

namespace detail {

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

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_SYMBOLISE_H

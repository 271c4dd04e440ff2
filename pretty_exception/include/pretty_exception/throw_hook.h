/// @brief pretty_exception's __cxa_throw hook: the stack of every throw (trace_all_exceptions, stack_of, current_trace).
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_THROW_HOOK_H
#define PRETTY_EXCEPTION_THROW_HOOK_H

#include "capture.h"
#include "syslog.h"
#include "thrown.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <typeinfo>
#include <cxxabi.h>
#include <dlfcn.h>
#include <unistd.h>

namespace pretty_exception {

namespace detail {

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

using cxa_throw_fn = void (*)(void*, std::type_info*, void (*)(void*));

/// libstdc++'s __cxa_throw (or the next interposer's): what the hook passes the throw on to.
inline cxa_throw_fn next_cxa_throw() noexcept {
    static const cxa_throw_fn next = reinterpret_cast<cxa_throw_fn>(::dlsym(RTLD_NEXT, "__cxa_throw"));
    return next;
}

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

/// True when this process's __cxa_throw is the hook (so plain throws are recorded).
inline bool hook_in_place() noexcept {
    void* volatile mine = reinterpret_cast<void*>(&cxa_throw_hook);
    return ::dlsym(RTLD_DEFAULT, "__cxa_throw") == mine;
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

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_THROW_HOOK_H

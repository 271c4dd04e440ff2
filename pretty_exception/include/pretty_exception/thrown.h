/// @brief pretty_exception's record of the last throws of each thread, which the __cxa_throw hook fills.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
///
/// The hook itself (throw_hook.h) comes after the syslog record it sends; what it records, and the
/// look-up the description and stack_of() make, come here, before them.
#ifndef PRETTY_EXCEPTION_THROWN_H
#define PRETTY_EXCEPTION_THROWN_H

#include "capture.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <typeinfo>

namespace pretty_exception {

namespace detail {

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

}  // namespace detail

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_THROWN_H

/// @brief pretty_exception's frame names without debug information: demangling, the module of an address, internal frames.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_NAMES_H
#define PRETTY_EXCEPTION_NAMES_H

#include "types.h"

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <cxxabi.h>
#include <link.h>
#include <sys/types.h>
#include <unistd.h>

namespace pretty_exception {

namespace detail {

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

}  // namespace detail

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_NAMES_H

/// @brief pretty_exception's symboliser on elfutils' libdw: function, file:line and inlined frames (PRETTY_EXCEPTION_USE_LIBDW=1).
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
///
/// Empty when PRETTY_EXCEPTION_USE_LIBDW is 0.
#ifndef PRETTY_EXCEPTION_LIBDW_H
#define PRETTY_EXCEPTION_LIBDW_H

#include "config.h"
#include "names.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>
#include <fcntl.h>
#include <unistd.h>

#if PRETTY_EXCEPTION_USE_LIBDW
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

namespace pretty_exception {

namespace detail {

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

}  // namespace detail

}  // namespace pretty_exception

#endif  // PRETTY_EXCEPTION_USE_LIBDW

#endif  // PRETTY_EXCEPTION_LIBDW_H

/// @brief pretty_exception's crash handler: SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT reported with the faulting stack.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
#ifndef PRETTY_EXCEPTION_CRASH_H
#define PRETTY_EXCEPTION_CRASH_H

#include "capture.h"
#include "config.h"
#include "format.h"
#include "names.h"
#include "settings.h"
#include "symbolise.h"
#include "syslog.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

namespace pretty_exception {

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

#endif  // PRETTY_EXCEPTION_CRASH_H

/// @brief The crash handler, in child processes: SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT and a stack overflow give the faulting thread's stack with file:line, no allocation in the handler, death by the same signal, a syslog record.
#include "pretty_exception.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

// From the moment a test child is about to crash, any allocation in this process (the crash
// handler's) ends the child with status 99 and a line saying so. Sanitizers own malloc: there the
// allocator's hooks are told; elsewhere this program interposes on malloc, calloc and realloc.
namespace pe_test {
std::atomic<bool> g_no_malloc{false};
void forbidden_allocation() {
    static const char msg[] = "FORBIDDEN: the crash handler allocated\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(99);
}
}  // namespace pe_test

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PE_TEST_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PE_TEST_SANITIZER_ALLOCATOR 1
#endif
#endif

#if defined(PE_TEST_SANITIZER_ALLOCATOR)
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, std::size_t),
                                                         void (*free_hook)(const volatile void*));
namespace pe_test {
void watch_allocations() {
    // Both hooks must be given, or the sanitizer installs neither (and returns 0).
    const int installed = __sanitizer_install_malloc_and_free_hooks(
        [](const volatile void*, std::size_t) {
            if (g_no_malloc.load(std::memory_order_relaxed)) forbidden_allocation();
        },
        [](const volatile void*) {});
    if (installed == 0) {
        static const char msg[] = "FAIL: the sanitizer did not install the allocation hooks\n";
        (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
        ::_exit(98);
    }
}
}  // namespace pe_test
#else
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);
extern "C" void* malloc(std::size_t n) {
    if (pe_test::g_no_malloc.load(std::memory_order_relaxed)) pe_test::forbidden_allocation();
    return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t n, std::size_t size) {
    if (pe_test::g_no_malloc.load(std::memory_order_relaxed)) pe_test::forbidden_allocation();
    return __libc_calloc(n, size);
}
extern "C" void* realloc(void* p, std::size_t n) {
    if (pe_test::g_no_malloc.load(std::memory_order_relaxed)) pe_test::forbidden_allocation();
    return __libc_realloc(p, n);
}
namespace pe_test {
void watch_allocations() {}
}  // namespace pe_test
#endif

namespace pe_test {

volatile int g_crash_sink = 0;
// Not null: UBSan would report a null pointer first (and allocate doing so). Page 0 is unmapped all
// the same.
int* volatile g_bad = reinterpret_cast<int*>(16);
volatile int g_zero_divisor = 0;

// Each crash is on one line with the constant that names it, so the faulting instruction's line is
// that line whatever the compiler schedules.
constexpr int k_line_segv = __LINE__; PE_TEST_NOINLINE void write_through(int* p) { *p = 42; g_crash_sink = 1; }
constexpr int k_line_segv_caller = __LINE__; PE_TEST_NOINLINE void crash_segv() { write_through(g_bad); g_crash_sink = 2; }
constexpr int k_line_fpe = __LINE__; PE_TEST_NOINLINE int divide(int a) { return a / g_zero_divisor; }
constexpr int k_line_ill = __LINE__; PE_TEST_NOINLINE void trap() { __builtin_trap(); }
constexpr int k_line_abort = __LINE__; PE_TEST_NOINLINE void crash_abort() { std::abort(); }
volatile bool g_forever = true;  // the recursion's end, never reached (GCC warns of a recursion without one)
constexpr int k_line_overflow = __LINE__; PE_TEST_NOINLINE int overflow(int n) { volatile char pad[512]; pad[0] = static_cast<char>(n); pad[511] = pad[0]; return g_forever ? overflow(n + 1) + pad[511] : n; }
constexpr int k_line_bus = __LINE__; PE_TEST_NOINLINE int touch(const volatile char* p) { return p[0]; }

/// A page past the end of an empty file: reading it raises SIGBUS.
const volatile char* page_beyond_end_of_file() {
    const int fd = ::memfd_create("pe-test-bus", MFD_CLOEXEC);
    void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<const volatile char*>(p);
}

/// In a child: install the handler, forbid allocation, run `crash`.
template <class F>
child_result crash_child(F crash, bool to_syslog = false) {
    return run_child(terminal::pipe, [=] {
        watch_allocations();
        pretty_exception::install_crash_handler(to_syslog);
        g_no_malloc.store(true);
        crash();
        g_no_malloc.store(false);
        std::printf("no crash\n");
    });
}

std::string at(int line) { return std::string(__FILE__) + ":" + std::to_string(line); }

}  // namespace pe_test

namespace {

/// The output's first line, and the frame lines that follow it, as a prefix.
void expect_report(const pe_test::child_result& r, int sig, const std::string& head,
                   const std::vector<std::string>& frames) {
    ASSERT_TRUE(WIFSIGNALED(r.status)) << "status " << r.status << "\n" << r.output;
    EXPECT_EQ(WTERMSIG(r.status), sig) << r.output;
    EXPECT_EQ(r.output.rfind("pretty_exception: " + head + pe_test::main_thread_label(r) +
                                 "; stack of the faulting thread, innermost first:\n",
                             0),
              0u)
        << r.output;
    std::size_t from = r.output.find('\n');
    for (std::size_t i = 0; i < frames.size(); ++i) {
        const std::string want = "\n    #" + std::to_string(i) + " " + frames[i] + "\n";
        const std::size_t found = r.output.find(want, from);
        ASSERT_NE(found, std::string::npos) << "missing, or out of order: " << want << "in:\n" << r.output;
        from = found + want.size() - 1;
    }
    EXPECT_EQ(r.output.find("FORBIDDEN"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("raw addresses"), std::string::npos) << r.output;
}

}  // namespace

// The watch itself works: an allocation after the flag is set ends the child with 99.
TEST(PrettyCrash, AllocationWatchCatchesAnAllocation) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        pe_test::watch_allocations();
        pe_test::g_no_malloc.store(true);
        void* volatile p = std::malloc(64);
        pe_test::g_no_malloc.store(false);
        std::free(p);
    });
    ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
    EXPECT_EQ(WEXITSTATUS(r.status), 99);
    EXPECT_EQ(r.output, "FORBIDDEN: the crash handler allocated\n");
}

TEST(PrettyCrash, SegvGivesTheFaultingFrameFirst) {
    const auto r = pe_test::crash_child([] { pe_test::crash_segv(); });
    expect_report(r, SIGSEGV, "SIGSEGV (address not mapped to object) at address 0x10",
                  {"pe_test::write_through(int*) at " + pe_test::at(pe_test::k_line_segv),
                   "pe_test::crash_segv() at " + pe_test::at(pe_test::k_line_segv_caller)});
}

// The crashed process's printing settings reach the helper (snippets here; show_runtime_frames() goes
// the same way).
TEST(PrettyCrash, HelperPrintsSnippetsAsTheProcessAsked) {
    const auto r = pe_test::crash_child([] {
        pretty_exception::set_snippets(1);
        pe_test::crash_segv();
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    const int l = pe_test::k_line_segv;
    EXPECT_NE(r.output.find("\n    #0 pe_test::write_through(int*) at " + pe_test::at(l) + "\n"
                            "         " + std::to_string(l - 1) + " | // that line whatever the compiler schedules.\n"
                            "       > " + std::to_string(l) + " | constexpr int k_line_segv = __LINE__; "
                            "PE_TEST_NOINLINE void write_through(int* p) { *p = 42; g_crash_sink = 1; }\n"
                            "         " + std::to_string(l + 1) + " | constexpr int k_line_segv_caller = __LINE__;"),
              std::string::npos) << r.output;
}

TEST(PrettyCrash, FpeIntegerDivideByZero) {
#if PE_TEST_UBSAN
    GTEST_SKIP() << "UBSan build: -fsanitize=integer-divide-by-zero reports the division before the CPU faults";
#endif
    const auto r = pe_test::crash_child([] { pe_test::g_crash_sink = pe_test::divide(7); });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    const std::string head = "pretty_exception: SIGFPE (integer divide by zero) at address 0x";
    EXPECT_EQ(r.output.rfind(head, 0), 0u) << r.output;
    EXPECT_NE(r.output.find("; stack of the faulting thread, innermost first:\n"
                            "    #0 pe_test::divide(int) at " + pe_test::at(pe_test::k_line_fpe) + "\n"),
              std::string::npos) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGFPE);
    EXPECT_EQ(r.output.find("FORBIDDEN"), std::string::npos) << r.output;
}

TEST(PrettyCrash, IllFromATrapInstruction) {
#if defined(__x86_64__) || defined(__i386__)
    const auto r = pe_test::crash_child([] { pe_test::trap(); });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(r.output.rfind("pretty_exception: SIGILL (illegal operand) at address 0x", 0), 0u) << r.output;
    EXPECT_NE(r.output.find("\n    #0 pe_test::trap() at " + pe_test::at(pe_test::k_line_ill) + "\n"), std::string::npos)
        << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGILL);
#else
    GTEST_SKIP() << "__builtin_trap raises SIGTRAP, not SIGILL, here";
#endif
}

TEST(PrettyCrash, BusPastTheEndOfAMappedFile) {
    const auto r = pe_test::crash_child([] { pe_test::g_crash_sink = pe_test::touch(pe_test::page_beyond_end_of_file()); });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(r.output.rfind("pretty_exception: SIGBUS (nonexistent physical address) at address 0x", 0), 0u) << r.output;
    EXPECT_NE(r.output.find("\n    #0 pe_test::touch(char const volatile*) at " + pe_test::at(pe_test::k_line_bus) + "\n"),
              std::string::npos) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGBUS);
}

TEST(PrettyCrash, AbortShowsTheCallerOfAbort) {
    const auto r = pe_test::crash_child([] { pe_test::crash_abort(); });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGABRT);
    EXPECT_EQ(r.output.rfind("pretty_exception: SIGABRT (sent by tkill: raise or abort)" + pe_test::main_thread_label(r) +
                                 "; stack of the faulting thread, innermost first:\n    #0 ",
                             0),
              0u) << r.output;
    // glibc's frames (pthread_kill, raise, abort: "__GI_abort" with glibc's debug information), then
    // the caller.
    auto abort_frame = r.output.find(" abort at ");
    if (abort_frame == std::string::npos) abort_frame = r.output.find(" __GI_abort at ");
    const auto caller = r.output.find(" pe_test::crash_abort() at " + pe_test::at(pe_test::k_line_abort) + "\n");
    EXPECT_NE(abort_frame, std::string::npos) << r.output;
    EXPECT_NE(caller, std::string::npos) << r.output;
    EXPECT_LT(abort_frame, caller) << r.output;
}

TEST(PrettyCrash, StackOverflowIsReportedFromTheAlternateStack) {
    const auto r = pe_test::crash_child([] { pe_test::g_crash_sink = pe_test::overflow(0); });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGSEGV);
    const std::string frame = "pe_test::overflow(int) at " + pe_test::at(pe_test::k_line_overflow);
    EXPECT_EQ(r.output.rfind("pretty_exception: SIGSEGV (", 0), 0u) << r.output;
    // The innermost frames: the recursion's, after the sanitizer's own check when the overflow
    // hit the page guard inside it (TSan's __tsan_read1 instruments the frame's reads).
    std::istringstream lines(r.output.substr(r.output.find("innermost first:\n") + 17));
    std::vector<std::string> first;
    for (std::string line; first.size() < 3 && std::getline(lines, line);) {
        const auto name = line.substr(line.find(' ', line.find('#')) + 1);
        if (first.empty() && (name.rfind("__tsan_", 0) == 0 || name.rfind("__asan_", 0) == 0)) continue;
        first.push_back(name);
    }
    EXPECT_EQ(first, std::vector<std::string>(3, frame)) << r.output.substr(0, 2000);
    EXPECT_NE(r.output.find("\n    note: stack cut at " + std::to_string(PRETTY_EXCEPTION_MAX_FRAMES) + " frames"),
              std::string::npos) << r.output.substr(0, 2000);
    EXPECT_EQ(r.output.find("FORBIDDEN"), std::string::npos);
}

TEST(PrettyCrash, TerminateHandlerAndCrashHandlerDoNotBothReport) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        pretty_exception::install_terminate_handler();
        pretty_exception::install_crash_handler(false);
        pe_test::on_thread(nullptr, [] { throw std::runtime_error("escaped"); });
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGABRT);
    // The thread that threw: its id, and its name, which it inherited (nobody named it).
    const auto [label, out] = pe_test::after_tid_line(r);
    EXPECT_EQ(out.rfind("terminate called after an uncaught exception" + label + ":\nstd::runtime_error: escaped\n", 0),
              0u)
        << r.output;
    EXPECT_EQ(r.output.find("pretty_exception: SIGABRT"), std::string::npos) << r.output;
}

// A thread of the program crashes: the report names it, by its id (the LWP) and its name.
TEST(PrettyCrash, ReportNamesTheFaultingThread) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        pretty_exception::install_crash_handler(false);
        pe_test::on_thread("pe-\"crasher\"", [] { pe_test::crash_segv(); });
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGSEGV);
    // The quotes of the name are written as "?": the label stays unambiguous.
    const auto [label, out] = pe_test::after_tid_line(r, "pe-?crasher?");
    EXPECT_EQ(out.rfind("pretty_exception: SIGSEGV (address not mapped to object) at address 0x10" + label +
                                 "; stack of the faulting thread, innermost first:\n"
                                 "    #0 pe_test::write_through(int*) at " + pe_test::at(pe_test::k_line_segv) + "\n"
                                 "    #1 pe_test::crash_segv() at " + pe_test::at(pe_test::k_line_segv_caller) + "\n",
                             0),
              0u)
        << r.output;
}

// The record reaches /dev/log: as in test_output.cpp, a child with a private mount namespace binds
// it; its own child crashes, and the helper (a grandchild) sends the record.
TEST(PrettyCrash, SyslogRecord) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        const int sock = pe_test::bind_private_dev_log();
        if (sock < 0) return;
        const auto crashed = pe_test::crash_child([] { pe_test::crash_segv(); }, true);
        std::printf("SIGNAL:%d\nCRASHED:%d\nRECORD:%s\n", WIFSIGNALED(crashed.status) ? WTERMSIG(crashed.status) : -1,
                    static_cast<int>(crashed.pid), pe_test::receive_record(sock).c_str());
    });
    ASSERT_EQ(r.status, 0) << r.output;
    if (r.output.rfind("SKIP: ", 0) == 0) GTEST_SKIP() << "no private mount namespace here: " << r.output;
    EXPECT_NE(r.output.find("SIGNAL:" + std::to_string(SIGSEGV) + "\n"), std::string::npos) << r.output;
    const auto at = r.output.find("RECORD:");
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string record = r.output.substr(at + 7);
    // "<PRI>timestamp ident: process N killed by ...": LOG_USER | LOG_CRIT.
    EXPECT_EQ(record.rfind("<" + std::to_string(LOG_USER | LOG_CRIT) + ">", 0), 0u) << record;
    const long crashed = std::atol(r.output.c_str() + r.output.find("CRASHED:") + 8);
    const std::string want = " killed by SIGSEGV (address not mapped to object) at address 0x10" +
                             pe_test::thread_label(crashed, pe_test::own_thread_name()) + " | stack: "
                             "#0 pe_test::write_through(int*) at " + pe_test::at(pe_test::k_line_segv) +
                             " | #1 pe_test::crash_segv() at " + pe_test::at(pe_test::k_line_segv_caller) + " | ";
    EXPECT_NE(record.find(want), std::string::npos) << record;
}

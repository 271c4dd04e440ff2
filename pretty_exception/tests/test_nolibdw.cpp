/// @brief The header without libdw (frames and crash reports as module+offset, and the trace says so) and with syslog switched on by macros.
#include "pretty_exception.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <string>

namespace pe_test {

volatile int g_sink = 0;
int g_line = 0;
int* volatile g_bad_int = reinterpret_cast<int*>(16);  // unmapped; not null, which UBSan reports first

PE_TEST_NOINLINE int nl_thrower(int x) {
    if (x > 0) { g_line = __LINE__; THROW_INVALID_ARGUMENT("without libdw ", x); }
    return x;
}

}  // namespace pe_test

static_assert(PRETTY_EXCEPTION_USE_LIBDW == 0, "this test is built without libdw");

// Built with PRETTY_EXCEPTION_SYSLOG=1, _FACILITY=LOG_LOCAL7 and _PRIORITY=LOG_CRIT, TRACE_ALL=1 and
// SNIPPETS=2.
TEST(PrettyTraceNoLibdw, SyslogMacrosSetTheStartingSettings) {
    const pretty_exception::syslog_settings s = pretty_exception::get_syslog();
    EXPECT_TRUE(s.enabled);
    EXPECT_EQ(s.facility, LOG_LOCAL7);
    EXPECT_EQ(s.priority, LOG_CRIT);
}

TEST(PrettyTraceNoLibdw, SiteExactFramesModulePlusOffsetAndANote) {
    pretty_exception::set_syslog(false);  // this test throws: send nothing to the machine's syslog
    try {
        pe_test::nl_thrower(3);
        FAIL() << "nothing thrown";
    } catch (const std::invalid_argument& e) {
        const pretty_exception::traced_base* t = pretty_exception::trace_of(e);
        ASSERT_NE(t, nullptr);
        EXPECT_STREQ(e.what(), "without libdw 3");
        EXPECT_STREQ(t->file(), __FILE__);
        EXPECT_EQ(t->line(), pe_test::g_line);
        EXPECT_STREQ(t->function(), "int pe_test::nl_thrower(int)");
        const auto& frames = t->trace().frames();
        ASSERT_GE(frames.size(), 2u);
        char exe[4096];
        const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
        ASSERT_GT(n, 0);
        for (std::size_t i = 0; i < 2; ++i) {
            EXPECT_EQ(frames[i].module, std::string(exe, static_cast<std::size_t>(n)));
            EXPECT_EQ(frames[i].file, "");
            EXPECT_EQ(frames[i].function, "");  // not exported from the executable
            EXPECT_NE(frames[i].offset, 0u);
        }
        ASSERT_EQ(t->trace().notes().size(), 1u);
        EXPECT_EQ(t->trace().notes()[0],
                  "built without libdw (PRETTY_EXCEPTION_USE_LIBDW=0): no file:line, names of exported functions only");
        const std::string text = pretty_exception::to_string(e);
        EXPECT_NE(text.find("\n    #0 ?? in " + std::string(exe, static_cast<std::size_t>(n)) + "+0x"), std::string::npos)
            << text;
        EXPECT_NE(text.find("\n    note: built without libdw"), std::string::npos) << text;
    }
}

// Without libdw the crash handler writes raw frames itself: module+offset from _dl_find_object.
TEST(PrettyTraceNoLibdw, CrashGivesModulePlusOffset) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        pretty_exception::install_crash_handler(false);
        pe_test::g_sink = *pe_test::g_bad_int;
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGSEGV);
    char exe[4096];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    ASSERT_GT(n, 0);
    EXPECT_EQ(r.output.rfind("pretty_exception: SIGSEGV (address not mapped to object) at address 0x10" +
                                 pe_test::main_thread_label(r) + "; stack of the faulting thread, innermost first:\n    #0 0x",
                             0),
              0u) << r.output;
    EXPECT_NE(r.output.find(" in " + std::string(exe, static_cast<std::size_t>(n)) + "+0x"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("\n    note: raw addresses: built without libdw (addr2line -f -i -C -e MODULE OFFSET "
                            "resolves them)\n"),
              std::string::npos) << r.output;
}

// PRETTY_EXCEPTION_TRACE_ALL=1: plain throws are recorded without a call to trace_all_exceptions(), and
// PRETTY_EXCEPTION_SNIPPETS=2 is the starting snippet setting.
TEST(PrettyTraceNoLibdw, CompileTimeSwitchesForAnyExceptionAndSnippets) {
    pretty_exception::set_syslog(false);  // this test throws: send nothing to the machine's syslog
    EXPECT_EQ(pretty_exception::get_snippets(), 2);
    try {
        throw std::runtime_error("plain");
    } catch (const std::exception& e) {
        const pretty_exception::stack_trace t = pretty_exception::stack_of(e);
        ASSERT_FALSE(t.empty());
        EXPECT_EQ(pretty_exception::to_string(e).rfind("std::runtime_error: plain\n  stack at the throw, innermost first:\n    #0 ?? in ", 0),
                  0u) << pretty_exception::to_string(e);
    }
}

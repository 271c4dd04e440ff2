/// @brief The header without libdw (frames as module+offset, and the trace says so) and with syslog switched on by macros.
#include "pretty_exception.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <string>

namespace pe_test {

volatile int g_sink = 0;
int g_line = 0;

PE_TEST_NOINLINE int nl_thrower(int x) {
    if (x > 0) { g_line = __LINE__; THROW_INVALID_ARGUMENT("without libdw ", x); }
    return x;
}

}  // namespace pe_test

static_assert(PRETTY_EXCEPTION_USE_LIBDW == 0, "this test is built without libdw");

// Built with PRETTY_EXCEPTION_SYSLOG=1, _FACILITY=LOG_LOCAL7 and _PRIORITY=LOG_CRIT.
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

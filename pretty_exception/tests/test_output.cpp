/// @brief Output in child processes: colour on a pty only, syslog records received at /dev/log, the terminate handler.
#include "pretty_exception.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <sys/socket.h>

namespace pe_test {

volatile int g_out_sink = 0;

PE_TEST_NOINLINE int colour_thrower(int x) {
    THROW_RUNTIME_ERROR("colour test ", x);
}

// The children's throws happen in other processes: the lines they throw from are constants,
// each defined on the line of its throw.
constexpr int k_line_syslog = __LINE__; PE_TEST_NOINLINE int syslog_thrower(int x) { if (x > 0) PRETTY_THROW(std::range_error, "100%s%n of ", x, "\nnext line"); return x; }
PE_TEST_NOINLINE int syslog_caller(int x) {
    const int r = syslog_thrower(x + 1);
    g_out_sink = r;
    return r + 1;
}

constexpr int k_line_uncaught = __LINE__; PE_TEST_NOINLINE void uncaught_thrower(int n) { THROW_LENGTH_ERROR("too long: ", n); }
constexpr int k_line_plain = __LINE__; PE_TEST_NOINLINE void plain_thrower(int n) { throw std::runtime_error("plain uncaught " + std::to_string(n)); }
PE_TEST_NOINLINE void int_thrower(int n) { throw n; }

/// Throw and print the way an application does: catch as std::exception, stream to std::cerr.
void throw_and_print() {
    try {
        colour_thrower(7);
    } catch (const std::exception& e) {
        std::cerr << pretty_exception::describe(e);
        pretty_exception::print(e);  // the FILE-descriptor path decides the same way
    }
}

/// Run `f` on a thread of its own, which prints its id first: no handler above it (GoogleTest catches on
/// the main one).
void without_handlers(void (*f)(int), int arg) {
    on_thread(nullptr, [f, arg] { f(arg); });
}

}  // namespace pe_test

namespace {

bool has_escape(const std::string& s) { return s.find('\x1b') != std::string::npos; }

pe_test::child_result colour_child(pe_test::terminal where, const char* no_color,
                                   pretty_exception::colour_mode mode = pretty_exception::colour_mode::automatic) {
    return pe_test::run_child(where, [=] {
        if (no_color != nullptr)
            ::setenv("NO_COLOR", no_color, 1);
        else
            ::unsetenv("NO_COLOR");
        pretty_exception::set_colour(mode);
        pe_test::throw_and_print();
    });
}

}  // namespace

TEST(PrettyOutput, ColourOnPseudoTerminal) {
    const auto r = colour_child(pe_test::terminal::pty, nullptr);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(has_escape(r.output)) << r.output;
    EXPECT_NE(r.output.find("colour test 7"), std::string::npos);
}

TEST(PrettyOutput, NoColourOnPipe) {
    const auto r = colour_child(pe_test::terminal::pipe, nullptr);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_FALSE(has_escape(r.output)) << r.output;
    // Both printings, plain.
    const std::string head = "std::runtime_error: colour test 7\n  thrown at ";
    const auto first = r.output.find(head);
    ASSERT_EQ(first, 0u) << r.output;
    EXPECT_NE(r.output.find(head, first + 1), std::string::npos) << r.output;
}

TEST(PrettyOutput, NoColourWithNoColorOnPseudoTerminal) {
    const auto r = colour_child(pe_test::terminal::pty, "1");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_FALSE(has_escape(r.output)) << r.output;
    EXPECT_NE(r.output.find("std::runtime_error: colour test 7"), std::string::npos);
}

TEST(PrettyOutput, EmptyNoColorDoesNotCount) {
    const auto r = colour_child(pe_test::terminal::pty, "");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(has_escape(r.output)) << r.output;
}

TEST(PrettyOutput, ForcedColourOnPipe) {
    const auto r = colour_child(pe_test::terminal::pipe, nullptr, pretty_exception::colour_mode::always);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(has_escape(r.output)) << r.output;
}

TEST(PrettyOutput, ForcedPlainOnPseudoTerminal) {
    const auto r = colour_child(pe_test::terminal::pty, nullptr, pretty_exception::colour_mode::never);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_FALSE(has_escape(r.output)) << r.output;
}

TEST(PrettyOutput, NoColorWinsOverForcedColour) {
    const auto r = colour_child(pe_test::terminal::pipe, "1", pretty_exception::colour_mode::always);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_FALSE(has_escape(r.output)) << r.output;
}

TEST(PrettyOutput, ToStringIsPlainUnlessForced) {
    try {
        pe_test::colour_thrower(1);
    } catch (const std::exception& e) {
        EXPECT_FALSE(has_escape(pretty_exception::to_string(e)));
    }
}

TEST(PrettyOutput, ConfigSwitches) {
    EXPECT_EQ(pretty_exception::get_colour(), pretty_exception::colour_mode::automatic);
    const pretty_exception::syslog_settings s = pretty_exception::get_syslog();
    EXPECT_FALSE(s.enabled);  // off by default (PRETTY_EXCEPTION_SYSLOG is 0 here)
    EXPECT_EQ(s.facility, LOG_USER);
    EXPECT_EQ(s.priority, LOG_ERR);
    pretty_exception::set_syslog(false, LOG_LOCAL5, LOG_NOTICE);
    EXPECT_EQ(pretty_exception::get_syslog().facility, LOG_LOCAL5);
    EXPECT_EQ(pretty_exception::get_syslog().priority, LOG_NOTICE);
    pretty_exception::set_syslog(false);
}

// syslog(3) sends each record as one datagram to the socket at /dev/log. The child takes a mount
// namespace of its own (as root; else with a user namespace too), mounts an empty tmpfs on /dev in
// it, binds a datagram socket at /dev/log there and receives what the real syslog() sends.
TEST(PrettyOutput, SyslogRecordsReachDevLog) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        const int sock = pe_test::bind_private_dev_log();
        if (sock < 0) return;
        const auto receive = [sock] { return pe_test::receive_record(sock); };

        // Off by default: nothing is sent.
        try {
            pe_test::syslog_caller(0);
        } catch (const std::exception&) {
        }
        std::printf("OFF:%s\n", receive().c_str());

        pretty_exception::set_syslog(true, LOG_LOCAL3, LOG_WARNING);
        try {
            pe_test::syslog_caller(4);
        } catch (const std::exception& e) {
            std::printf("RECORD:%s\n", receive().c_str());
            std::printf("AGAIN:%s\n", receive().c_str());  // one record per exception
            std::printf("LINE:%s\n", pretty_exception::to_one_line(e).c_str());
        }
    });
    ASSERT_EQ(r.status, 0) << r.output;
    if (r.output.rfind("SKIP: ", 0) == 0) GTEST_SKIP() << "no private mount namespace here: " << r.output;
    const std::string out = "\n" + r.output;
    const auto field = [&out](const std::string& name) {
        const auto at = out.find("\n" + name + ":");
        if (at == std::string::npos) return std::string("<missing>");
        const auto start = at + name.size() + 2;
        return out.substr(start, out.find('\n', start) - start);
    };
    EXPECT_EQ(field("OFF"), "<none>");
    EXPECT_EQ(field("AGAIN"), "<none>");
    const std::string record = field("RECORD");
    const std::string line = field("LINE");
    // "<PRI>timestamp ident: text" with PRI = facility | priority = LOG_LOCAL3 | LOG_WARNING.
    EXPECT_EQ(record.rfind("<" + std::to_string(LOG_LOCAL3 | LOG_WARNING) + ">", 0), 0u) << record;
    ASSERT_GT(record.size(), line.size() + 2);
    EXPECT_EQ(record.substr(record.size() - line.size() - 2), ": " + line) << record;
    // The text: one line, the message verbatim (no format-string expansion, "\n" escaped), the
    // throw site and the frames in order, separated.
    const std::string file = __FILE__;
    const std::string site = file + ":" + std::to_string(pe_test::k_line_syslog);
    const std::string want = "std::range_error: 100%s%n of 5\\nnext line | thrown at " + site +
                             " in int pe_test::syslog_thrower(int) | stack: #0 pe_test::syslog_thrower(int) at " +
                             site + " | #1 pe_test::syslog_caller(int) at " + file + ":";
    EXPECT_EQ(line.rfind(want, 0), 0u) << line;
}

// No syslog daemon (no /dev/log): syslog(3) would drop the records silently; the first one says so,
// once, on stderr, and nothing else is written.
TEST(PrettyOutput, SyslogWithoutDevLogSaysSoOnce) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        if (!pe_test::private_empty_dev()) return;
        pretty_exception::set_syslog(true);
        for (int i = 0; i < 3; ++i) {
            try {
                pe_test::syslog_caller(i);
            } catch (const std::exception&) {
            }
        }
    });
    ASSERT_EQ(r.status, 0) << r.output;
    if (r.output.rfind("SKIP: ", 0) == 0) GTEST_SKIP() << "no private mount namespace here: " << r.output;
    EXPECT_EQ(r.output,
              "pretty_exception: syslog records are lost: cannot connect to /dev/log (No such file or directory); "
              "no syslog daemon listens there\n");
}

TEST(PrettyOutput, TerminateHandlerDescribesTracedException) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        pretty_exception::install_terminate_handler();
        pe_test::without_handlers(pe_test::uncaught_thrower, 99);
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGABRT);
    const std::string site = std::string(__FILE__) + ":" + std::to_string(pe_test::k_line_uncaught);
    const auto [label, out] = pe_test::after_tid_line(r);
    EXPECT_EQ(out.rfind("terminate called after an uncaught exception" + label + ":\n"
                             "std::length_error: too long: 99\n"
                             "  thrown at " + site + " in void pe_test::uncaught_thrower(int)\n"
                             "  stack, innermost first:\n"
                             "    #0 pe_test::uncaught_thrower(int) at " + site + "\n",
                             0),
              0u)
        << r.output;
    EXPECT_EQ(r.output.find("stack at std::terminate"), std::string::npos);
}

TEST(PrettyOutput, TerminateHandlerGivesAStackForPlainExceptions) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        pretty_exception::install_terminate_handler();
        pe_test::without_handlers(pe_test::plain_thrower, 5);
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGABRT);
    const std::string site = std::string(__FILE__) + ":" + std::to_string(pe_test::k_line_plain);
    // The exception found no handler, so std::terminate ran with the throw's frames still there.
    const auto [label, out] = pe_test::after_tid_line(r);
    EXPECT_EQ(out.rfind("terminate called after an uncaught exception" + label + ":\n"
                             "std::runtime_error: plain uncaught 5\n"
                             "  (no throw site or stack: not thrown with PRETTY_THROW)\n"
                             "  stack at std::terminate, innermost first:\n"
                             "    #0 pe_test::plain_thrower(int) at " + site + "\n",
                             0),
              0u)
        << r.output;
}

TEST(PrettyOutput, TerminateHandlerNamesNonStdTypes) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        pretty_exception::install_terminate_handler();
        pe_test::without_handlers(pe_test::int_thrower, 3);
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    const auto [label, out] = pe_test::after_tid_line(r);
    EXPECT_EQ(out.rfind("terminate called after an uncaught exception" + label + ":\n"
                             "int (not derived from std::exception)\n"
                             "  stack at std::terminate, innermost first:\n"
                             "    #0 pe_test::int_thrower(int) at ",
                             0),
              0u)
        << r.output;
}

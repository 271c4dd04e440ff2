/// @brief Any exception, after trace_all_exceptions(): library throws (std::vector::at, std::stoi), throw 42, rethrow, nested chains, and how traces read (runtime frames hidden, filter, snippets).
#include "pretty_exception.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace pe_test {

volatile int g_any_sink = 0;
int g_line_rethrow = 0, g_line_wrap = 0, g_line_caller = 0;

// The line before read_at: a snippet shows it.
constexpr int k_line_at = __LINE__; PE_TEST_NOINLINE int read_at(const std::vector<int>& v, std::size_t i) { return v.at(i); }
// The line after read_at.
PE_TEST_NOINLINE int read_caller(std::size_t i) {
    const std::vector<int> v{1, 2, 3};
    g_line_caller = __LINE__; const int r = read_at(v, i);
    g_any_sink = r;
    return r + 1;
}

constexpr int k_line_stoi = __LINE__; PE_TEST_NOINLINE int parse(const std::string& s) { return std::stoi(s); }
constexpr int k_line_int = __LINE__; PE_TEST_NOINLINE void throw_int(int n) { throw n; }
constexpr int k_line_plain = __LINE__; PE_TEST_NOINLINE void throw_plain() { throw std::runtime_error("plain"); }

PE_TEST_NOINLINE void rethrow_it() {
    try {
        throw_plain();
    } catch (...) {
        g_line_rethrow = __LINE__; throw;
    }
}

PE_TEST_NOINLINE void wrap() {
    try {
        parse("not a number");
    } catch (...) {
        g_line_wrap = __LINE__; std::throw_with_nested(std::runtime_error("while reading the port"));
    }
}

std::string at(int line) { return std::string(__FILE__) + ":" + std::to_string(line); }

/// The shown frames of `text` from the first line starting with "    #", joined.
std::string first_frame_line(const std::string& text) {
    const auto from = text.find("\n    #0 ");
    if (from == std::string::npos) return "<no frame>";
    return text.substr(from + 1, text.find('\n', from + 1) - from - 1);
}

}  // namespace pe_test

// A C function, as main is, whose throw GCC moves into a split-off cold part at -O2 (symbol
// "pe_test_c_thrower.cold"): a C name neither demangles to "... [clone .cold]" nor has a DWARF
// linkage name to take instead.
int g_line_c_thrower = 0;
extern "C" PE_TEST_NOINLINE int pe_test_c_thrower(int x) {
    for (int i = 0; i < x; ++i) pe_test::g_any_sink = pe_test::g_any_sink + i;
    if (x >= 0) { g_line_c_thrower = __LINE__; throw std::runtime_error("from C"); }
    return pe_test::g_any_sink;
}

namespace {

class PrettyAny : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(pretty_exception::trace_all_exceptions()); }
    void TearDown() override {
        pretty_exception::show_runtime_frames(false);
        pretty_exception::set_frame_filter(nullptr);
        pretty_exception::set_snippets(0);
        pretty_exception::trace_all_exceptions(true);
    }
};

/// Whole lines of `text`, in this order.
void expect_lines_in_order(const std::string& text, const std::vector<std::string>& lines) {
    const std::string t = "\n" + text;
    std::size_t from = 0;
    for (const auto& want : lines) {
        const std::size_t found = t.find("\n" + want + "\n", from);
        ASSERT_NE(found, std::string::npos) << "missing, or out of order: " << want << "\nin:\n" << text;
        from = found + want.size() + 1;
    }
}

}  // namespace

TEST_F(PrettyAny, VectorAtGivesTheThrowSite) {
    try {
        pe_test::read_caller(7);
        FAIL() << "nothing thrown";
    } catch (const std::out_of_range& e) {
        EXPECT_EQ(pretty_exception::trace_of(e), nullptr);  // not a PRETTY_THROW
        const std::string text = pretty_exception::to_string(e);
        EXPECT_EQ(text.rfind("std::out_of_range: vector::_M_range_check: __n (which is 7) >= this->size() (which is 3)\n"
                             "  stack at the throw, innermost first:\n"
                             "    #0 std::vector<int, std::allocator<int> >::_M_range_check(unsigned long) const at ",
                             0),
                  0u)
            << text;
        expect_lines_in_order(text, {
            "    #2 pe_test::read_at(std::vector<int, std::allocator<int> > const&, unsigned long) at " +
                pe_test::at(pe_test::k_line_at),
            "    #3 pe_test::read_caller(unsigned long) at " + pe_test::at(pe_test::g_line_caller),
            "    (1 frame of the C++ runtime hidden: show_runtime_frames(true) shows them)",
        });
        EXPECT_NE(text.find("\n    #1 std::vector<int, std::allocator<int> >::at(unsigned long) const at "),
                  std::string::npos) << text;
        // frames() keeps the runtime's frame: libstdc++'s std::__throw_out_of_range_fmt (its cold
        // part, which Debian's stripped libstdc++ has no symbol for).
        const pretty_exception::stack_trace t = pretty_exception::stack_of(e);
        ASSERT_FALSE(t.frames().empty());
        EXPECT_EQ(pretty_exception::detail::basename_of(t.frames()[0].module), "libstdc++.so.6");
        EXPECT_EQ(pretty_exception::current_trace().frames().size(), t.frames().size());
    }
}

TEST_F(PrettyAny, ColdPartOfACFunctionIsTheFunction) {
    try {
        pe_test_c_thrower(pe_test::g_any_sink + 3);
        FAIL() << "nothing thrown";
    } catch (const std::runtime_error& e) {
        const std::string text = pretty_exception::to_string(e);
        EXPECT_EQ(pe_test::first_frame_line(text), "    #0 pe_test_c_thrower at " + pe_test::at(g_line_c_thrower))
            << text;
    }
}

TEST_F(PrettyAny, StoiGivesTheThrowSite) {
    try {
        pe_test::parse("x");
        FAIL() << "nothing thrown";
    } catch (const std::invalid_argument& e) {
        const std::string text = pretty_exception::to_string(e);
        EXPECT_EQ(text.rfind("std::invalid_argument: stoi\n  stack at the throw, innermost first:\n", 0), 0u) << text;
        EXPECT_NE(text.find(" pe_test::parse(std::string const&) at " + pe_test::at(pe_test::k_line_stoi) + "\n"),
                  std::string::npos) << text;
        EXPECT_EQ(text.find("__throw_invalid_argument"), std::string::npos) << text;
    }
}

TEST_F(PrettyAny, CurrentTraceOfANonStdException) {
    try {
        pe_test::throw_int(42);
    } catch (...) {
        const pretty_exception::stack_trace t = pretty_exception::current_trace();
        ASSERT_FALSE(t.frames().empty());
        EXPECT_EQ(t.frames()[0].function, "pe_test::throw_int(int)");
        EXPECT_EQ(t.frames()[0].line, pe_test::k_line_int);
        EXPECT_EQ(t.to_string().rfind("#0 pe_test::throw_int(int) at " + pe_test::at(pe_test::k_line_int) + "\n", 0), 0u);
    }
    EXPECT_TRUE(pretty_exception::current_trace().empty());  // outside a catch block
}

TEST_F(PrettyAny, RethrowKeepsTheOriginalStack) {
    try {
        pe_test::rethrow_it();
    } catch (const std::exception& e) {
        const std::string text = pretty_exception::to_string(e);
        EXPECT_EQ(pe_test::first_frame_line(text), "    #0 pe_test::throw_plain() at " + pe_test::at(pe_test::k_line_plain))
            << text;
        EXPECT_EQ(text.find(pe_test::at(pe_test::g_line_rethrow)), std::string::npos) << text;
    }
}

TEST_F(PrettyAny, NestedChainsArePrintedCauseByCause) {
    try {
        pe_test::wrap();
    } catch (const std::exception& e) {
        const std::string text = pretty_exception::to_string(e);
        expect_lines_in_order(text, {
            "std::runtime_error: while reading the port",
            "  stack at the throw, innermost first:",
            "    #0 pe_test::wrap() at " + pe_test::at(pe_test::g_line_wrap),
            "caused by: std::invalid_argument: stoi",
            "  stack at the throw, innermost first:",
        });
        const std::string cause = text.substr(text.find("caused by: "));
        EXPECT_NE(cause.find(" pe_test::parse(std::string const&) at " + pe_test::at(pe_test::k_line_stoi) + "\n"),
                  std::string::npos) << text;
        EXPECT_NE(cause.find("\n    #", cause.find(pe_test::at(pe_test::k_line_stoi))), std::string::npos);
        const std::string one = pretty_exception::to_one_line(e);
        EXPECT_EQ(one.find('\n'), std::string::npos);
        EXPECT_EQ(one.rfind("std::runtime_error: while reading the port | stack at the throw: #0 pe_test::wrap() at " +
                                pe_test::at(pe_test::g_line_wrap) + " | ",
                            0),
                  0u) << one;
        EXPECT_NE(one.find(" | caused by: std::invalid_argument: stoi | stack at the throw: #0 "), std::string::npos)
            << one;
    }
}

TEST_F(PrettyAny, PrettyThrowsAreNotWalkedTwice) {
    try {
        pe_test::throw_plain();
    } catch (const std::exception&) {
    }
    const pretty_exception::detail::thrown_ring* ring = pretty_exception::detail::this_thread_ring(false);
    ASSERT_NE(ring, nullptr);
    const unsigned before = ring->next;
    try {
        THROW_RUNTIME_ERROR("traced already");
    } catch (const std::exception& e) {
        EXPECT_NE(pretty_exception::trace_of(e), nullptr);
        EXPECT_FALSE(pretty_exception::stack_of(e).empty());
    }
    EXPECT_EQ(ring->next, before);
}

TEST_F(PrettyAny, SwitchedOffRecordsNothing) {
    pretty_exception::trace_all_exceptions(false);
    try {
        pe_test::throw_plain();
    } catch (const std::exception& e) {
        EXPECT_TRUE(pretty_exception::stack_of(e).empty());
        EXPECT_EQ(pretty_exception::to_string(e),
                  "std::runtime_error: plain\n  (no throw site or stack: not thrown with PRETTY_THROW)\n");
    }
}

TEST_F(PrettyAny, RuntimeFramesShownOnRequest) {
    pretty_exception::show_runtime_frames(true);
    EXPECT_TRUE(pretty_exception::runtime_frames_shown());
    try {
        pe_test::read_caller(9);
    } catch (const std::exception& e) {
        const std::string text = pretty_exception::to_string(e);
        EXPECT_NE(text.find("\n    #1 std::vector<int, std::allocator<int> >::_M_range_check(unsigned long) const at "),
                  std::string::npos) << text;
        EXPECT_EQ(text.find("of the C++ runtime hidden"), std::string::npos) << text;
    }
}

TEST_F(PrettyAny, FilterLeavesFramesOut) {
    pretty_exception::set_frame_filter([](const pretty_exception::frame& f) {
        return f.function.rfind("std::", 0) != 0;  // keep everything but the standard library's
    });
    try {
        pe_test::read_caller(9);
    } catch (const std::exception& e) {
        const std::string text = pretty_exception::to_string(e);
        expect_lines_in_order(text, {
            "    #0 pe_test::read_at(std::vector<int, std::allocator<int> > const&, unsigned long) at " +
                pe_test::at(pe_test::k_line_at),
            "    #1 pe_test::read_caller(unsigned long) at " + pe_test::at(pe_test::g_line_caller),
            "    (1 frame of the C++ runtime hidden: show_runtime_frames(true) shows them)",
            "    (2 frames hidden by the frame filter)",
        });
    }
}

TEST_F(PrettyAny, SnippetsShowTheSourceAroundUserFrames) {
    pretty_exception::set_snippets(1);
    EXPECT_EQ(pretty_exception::get_snippets(), 1);
    try {
        pe_test::read_caller(9);
    } catch (const std::exception& e) {
        const std::string text = pretty_exception::to_string(e);
        const int l = pe_test::k_line_at;
        expect_lines_in_order(text, {
            "    #2 pe_test::read_at(std::vector<int, std::allocator<int> > const&, unsigned long) at " + pe_test::at(l),
            "         " + std::to_string(l - 1) + " | // The line before read_at: a snippet shows it.",
            "       > " + std::to_string(l) + " | constexpr int k_line_at = __LINE__; PE_TEST_NOINLINE int "
                "read_at(const std::vector<int>& v, std::size_t i) { return v.at(i); }",
            "         " + std::to_string(l + 1) + " | // The line after read_at.",
            "    #3 pe_test::read_caller(unsigned long) at " + pe_test::at(pe_test::g_line_caller),
        });
        // The standard library's header (under /usr/) gets none.
        const auto std_frame = text.find("\n    #0 std::vector");
        ASSERT_NE(std_frame, std::string::npos);
        EXPECT_EQ(text.compare(text.find('\n', std_frame + 1) + 1, 6, "    #1"), 0) << text;
    }
}

TEST(PrettyDemangle, NoStraySpaceAfterShortenedNames) {
    EXPECT_EQ(pretty_exception::detail::demangle(typeid(std::vector<std::string>).name()),
              "std::vector<std::string, std::allocator<std::string> >");
    EXPECT_EQ(pretty_exception::detail::demangle(typeid(std::vector<std::vector<int>>).name()),
              "std::vector<std::vector<int, std::allocator<int> >, std::allocator<std::vector<int, std::allocator<int> > > >");
}

// An uncaught plain exception: the terminate handler prints the recorded throw stack, not the stack
// at std::terminate (a thread of its own: GoogleTest catches on the main one).
TEST_F(PrettyAny, TerminateHandlerUsesTheRecordedStack) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        pretty_exception::install_terminate_handler();
        pe_test::on_thread("pe-thrower", [] { pe_test::throw_plain(); });
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << r.output;
    EXPECT_EQ(WTERMSIG(r.status), SIGABRT);
    // The thread that threw, by its id and its name.
    const auto [label, out] = pe_test::after_tid_line(r, "pe-thrower");
    EXPECT_EQ(out.rfind("terminate called after an uncaught exception" + label + ":\n"
                             "std::runtime_error: plain\n"
                             "  stack at the throw, innermost first:\n"
                             "    #0 pe_test::throw_plain() at " + pe_test::at(pe_test::k_line_plain) + "\n",
                             0),
              0u) << r.output;
    EXPECT_EQ(r.output.find("stack at std::terminate"), std::string::npos) << r.output;
}

// With syslog tracing on, every recorded throw sends its record too: a library's std::exception and a
// `throw 42` (received at a private /dev/log, as in test_output.cpp).
TEST_F(PrettyAny, SyslogRecordsOfAnyException) {
    const auto r = pe_test::run_child(pe_test::terminal::pipe, [] {
        const int sock = pe_test::bind_private_dev_log();
        if (sock < 0) return;
        const auto receive = [sock] { return pe_test::receive_record(sock); };
        pretty_exception::set_syslog(true, LOG_LOCAL1, LOG_NOTICE);
        try {
            pe_test::parse("x");
        } catch (const std::exception&) {
        }
        std::printf("STOI:%s\n", receive().c_str());
        try {
            pe_test::throw_int(7);
        } catch (...) {
        }
        std::printf("INT:%s\n", receive().c_str());
        std::printf("AGAIN:%s\n", receive().c_str());
    });
    ASSERT_EQ(r.status, 0) << r.output;
    if (r.output.rfind("SKIP: ", 0) == 0) GTEST_SKIP() << "no private mount namespace here: " << r.output;
    const auto field = [&r](const std::string& name) {
        const auto at = r.output.find(name + ":");
        if (at == std::string::npos) return std::string("<missing>");
        const auto start = at + name.size() + 1;
        return r.output.substr(start, r.output.find('\n', start) - start);
    };
    const std::string pri = "<" + std::to_string(LOG_LOCAL1 | LOG_NOTICE) + ">";
    const std::string stoi = field("STOI");
    EXPECT_EQ(stoi.rfind(pri, 0), 0u) << stoi;
    EXPECT_NE(stoi.find(": std::invalid_argument: stoi | stack at the throw: #0 "), std::string::npos) << stoi;
    EXPECT_NE(stoi.find(" pe_test::parse(std::string const&) at " + pe_test::at(pe_test::k_line_stoi) + " | "),
              std::string::npos) << stoi;
    const std::string thrown_int = field("INT");
    EXPECT_NE(thrown_int.find(": int (not derived from std::exception) | stack at the throw: #0 pe_test::throw_int(int) at " +
                              pe_test::at(pe_test::k_line_int) + " | "),
              std::string::npos) << thrown_int;
    EXPECT_EQ(field("AGAIN"), "<none>");
}

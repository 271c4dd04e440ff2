/// @brief Each throw macro throws the requested type with the right file, line, function and message.
#include "pretty_exception.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>

namespace pe_test {

int g_line = 0;  // __LINE__ of the last throw, set on the throw's own line

// A user type taking a std::string.
struct config_error : std::exception {
    explicit config_error(std::string m) : message(std::move(m)) {}
    const char* what() const noexcept override { return message.c_str(); }
    std::string message;
};

// A user type whose constructor only takes const char*.
struct c_string_error : std::runtime_error {
    explicit c_string_error(const char* m) : std::runtime_error(m) {}
};

// A user type that takes no message at all: the message is kept beside it.
struct fixed_error : std::exception {
    const char* what() const noexcept override { return "fixed what()"; }
};

[[noreturn]] void throw_runtime_literal() { g_line = __LINE__; THROW_RUNTIME_ERROR("disk full"); }
[[noreturn]] void throw_invalid_std_string() {
    const std::string m = "bad port: 70000";
    g_line = __LINE__; THROW_INVALID_ARGUMENT(m);
}
[[noreturn]] void throw_length_string_view() {
    const std::string_view whole = "[too long]";
    g_line = __LINE__; THROW_LENGTH_ERROR(whole.substr(1, 8));  // not NUL-terminated
}
[[noreturn]] void throw_logic_several(int a, double b) {
    g_line = __LINE__; THROW_LOGIC_ERROR("expected ", a, " < ", b, ", got '", 'x', "'");
}
[[noreturn]] void throw_config() { g_line = __LINE__; PRETTY_THROW(config_error, "no key ", std::string("port")); }
[[noreturn]] void throw_c_string() { g_line = __LINE__; PRETTY_THROW(c_string_error, "only char*"); }
[[noreturn]] void throw_fixed() { g_line = __LINE__; PRETTY_THROW(fixed_error, "kept beside"); }
[[noreturn]] void throw_prefixed() { g_line = __LINE__; PRETTY_THROW_RUNTIME_ERROR("prefixed"); }

}  // namespace pe_test

namespace {

/// Call `f`, catch it as `Caught`, and check type, message, site and function exactly.
template <class Caught, class Requested = Caught, class F>
void expect_throw(F f, const std::string& message, const char* function) {
    try {
        f();
        FAIL() << "nothing thrown";
    } catch (const Caught& e) {
        EXPECT_EQ(typeid(e), typeid(pretty_exception::traced<Requested>));
        EXPECT_EQ(e.what(), message);
        const pretty_exception::traced_base* t = pretty_exception::trace_of(e);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->type(), typeid(Requested));
        EXPECT_STREQ(t->file(), __FILE__);
        EXPECT_EQ(t->line(), pe_test::g_line);
        EXPECT_STREQ(t->function(), function);
        EXPECT_FALSE(t->trace().empty());
    }
}

}  // namespace

TEST(PrettyThrow, RuntimeErrorFromLiteral) {
    expect_throw<std::runtime_error>(pe_test::throw_runtime_literal, "disk full",
                                     "void pe_test::throw_runtime_literal()");
}

TEST(PrettyThrow, InvalidArgumentFromStdString) {
    expect_throw<std::invalid_argument>(pe_test::throw_invalid_std_string, "bad port: 70000",
                                        "void pe_test::throw_invalid_std_string()");
}

TEST(PrettyThrow, LengthErrorFromStringView) {
    expect_throw<std::length_error>(pe_test::throw_length_string_view, "too long",
                                    "void pe_test::throw_length_string_view()");
}

TEST(PrettyThrow, LogicErrorFromSeveralArguments) {
    expect_throw<std::logic_error>([] { pe_test::throw_logic_several(3, 2.5); }, "expected 3 < 2.5, got 'x'",
                                   "void pe_test::throw_logic_several(int, double)");
}

TEST(PrettyThrow, CatchableAsStandardBases) {
    // invalid_argument and length_error are logic_errors; all are std::exceptions.
    expect_throw<std::logic_error, std::invalid_argument>(pe_test::throw_invalid_std_string, "bad port: 70000",
                                                          "void pe_test::throw_invalid_std_string()");
    expect_throw<std::exception, std::length_error>(pe_test::throw_length_string_view, "too long",
                                                    "void pe_test::throw_length_string_view()");
    EXPECT_THROW(pe_test::throw_runtime_literal(), std::runtime_error);
    bool wrong = false;
    try {
        pe_test::throw_logic_several(1, 2);
    } catch (const std::runtime_error&) {
        wrong = true;
    } catch (const std::logic_error&) {
    }
    EXPECT_FALSE(wrong);
}

TEST(PrettyThrow, PrefixedMacro) {
    expect_throw<std::runtime_error>(pe_test::throw_prefixed, "prefixed", "void pe_test::throw_prefixed()");
}

TEST(PrettyThrow, UserTypeTakingStdString) {
    expect_throw<pe_test::config_error>(pe_test::throw_config, "no key port", "void pe_test::throw_config()");
}

TEST(PrettyThrow, UserTypeTakingCString) {
    expect_throw<pe_test::c_string_error>(pe_test::throw_c_string, "only char*", "void pe_test::throw_c_string()");
}

TEST(PrettyThrow, UserTypeWithoutMessageKeepsItBeside) {
    expect_throw<pe_test::fixed_error>(pe_test::throw_fixed, "fixed what()", "void pe_test::throw_fixed()");
    try {
        pe_test::throw_fixed();
    } catch (const std::exception& e) {
        ASSERT_NE(pretty_exception::trace_of(e), nullptr);
        EXPECT_STREQ(pretty_exception::trace_of(e)->stored_message(), "kept beside");
        EXPECT_EQ(pretty_exception::to_string(e).rfind("pe_test::fixed_error: kept beside\n", 0), 0u);
    }
}

TEST(PrettyThrow, CatchAsTracedBase) {
    try {
        pe_test::throw_runtime_literal();
    } catch (const pretty_exception::traced_base& t) {
        EXPECT_EQ(t.line(), pe_test::g_line);
        EXPECT_EQ(t.type(), typeid(std::runtime_error));
        const auto* e = dynamic_cast<const std::runtime_error*>(&t);
        ASSERT_NE(e, nullptr);
        EXPECT_STREQ(e->what(), "disk full");
    }
}

TEST(PrettyThrow, CopiesShareTheTrace) {
    try {
        pe_test::throw_runtime_literal();
    } catch (const pretty_exception::traced<std::runtime_error>& caught) {
        const pretty_exception::traced<std::runtime_error> copy = caught;
        const pretty_exception::traced<std::runtime_error> again = copy;
        EXPECT_STREQ(again.what(), "disk full");
        EXPECT_EQ(again.line(), copy.line());
        EXPECT_EQ(&again.trace().frames(), &copy.trace().frames());
    }
}

TEST(PrettyThrow, PlainExceptionsHaveNoTrace) {
    const std::runtime_error plain("plain");
    EXPECT_EQ(pretty_exception::trace_of(plain), nullptr);
    EXPECT_EQ(pretty_exception::to_string(plain),
              "std::runtime_error: plain\n  (no throw site or stack: not thrown with PRETTY_THROW)\n");
    EXPECT_EQ(pretty_exception::to_one_line(plain), "std::runtime_error: plain");
}

TEST(PrettyThrow, DirectConstructionCapturesFromTheCaller) {
    const int line = __LINE__; pretty_exception::traced<std::out_of_range> e(PRETTY_EXCEPTION_SITE, "direct");
    EXPECT_STREQ(e.what(), "direct");
    EXPECT_EQ(e.line(), line);
    ASSERT_FALSE(e.trace().frames().empty());
    EXPECT_EQ(e.trace().frames()[0].line, line);
    EXPECT_EQ(e.trace().frames()[0].file, __FILE__);
}

TEST(PrettyThrow, NestedExceptionsAreDescribed) {
    try {
        try {
            pe_test::throw_runtime_literal();
        } catch (...) {
            std::throw_with_nested(std::logic_error("while saving"));
        }
    } catch (const std::exception& e) {
        const std::string text = pretty_exception::to_string(e);
        EXPECT_NE(text.find("caused by: std::runtime_error: disk full\n  thrown at "), std::string::npos) << text;
        const std::string one = pretty_exception::to_one_line(e);
        EXPECT_EQ(one.find('\n'), std::string::npos);
        EXPECT_NE(one.find(" | caused by: std::runtime_error: disk full | thrown at "), std::string::npos) << one;
    }
}

TEST(PrettyThrow, MessageLineBreaksAreEscapedOnOneLine) {
    try {
        THROW_RUNTIME_ERROR("first\nsecond\tthird");
    } catch (const std::exception& e) {
        const std::string one = pretty_exception::to_one_line(e);
        EXPECT_EQ(one.rfind("std::runtime_error: first\\nsecond\\x09third | thrown at ", 0), 0u) << one;
        EXPECT_EQ(one.find('\n'), std::string::npos);
    }
}

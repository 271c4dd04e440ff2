/// @brief Built without debug information (-g0): frames still name their functions (symbol table) and give module+offset.
#include "pretty_exception.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <link.h>

#include <string>

namespace pe_test {

volatile int g_sink = 0;
int g_line = 0;

PE_TEST_NOINLINE int nd_level_two(int x) {
    if (x > 0) { g_line = __LINE__; THROW_RUNTIME_ERROR("no debug info ", x); }
    return x;
}
PE_TEST_NOINLINE int nd_level_one(int x) {
    const int r = nd_level_two(x + 1);
    g_sink = r;
    return r + 1;
}

}  // namespace pe_test

namespace {

std::string self_exe() {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

/// The main program's load bias (what module offsets are relative to).
std::uintptr_t main_bias() {
    std::uintptr_t bias = 0;
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* arg) -> int {
            *static_cast<std::uintptr_t*>(arg) = info->dlpi_addr;
            return 1;  // the first object is the main program
        },
        &bias);
    return bias;
}

std::string hex(std::uintptr_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

TEST(PrettyTraceNoDebug, FramesGiveNameAndModulePlusOffset) {
    try {
        pe_test::nd_level_one(0);
        FAIL() << "nothing thrown";
    } catch (const std::runtime_error& e) {
        const pretty_exception::traced_base* t = pretty_exception::trace_of(e);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->line(), pe_test::g_line);  // __LINE__ is there with or without -g
        EXPECT_STREQ(t->file(), __FILE__);
        EXPECT_STREQ(e.what(), "no debug info 1");
        const auto& frames = t->trace().frames();
        ASSERT_GE(frames.size(), 3u);
        const std::string exe = self_exe();
        const std::uintptr_t bias = main_bias();
        const char* names[] = {"pe_test::nd_level_two(int)", "pe_test::nd_level_one(int)",
                               "PrettyTraceNoDebug_FramesGiveNameAndModulePlusOffset_Test::TestBody()"};
        for (std::size_t i = 0; i < 3; ++i) {
            const pretty_exception::frame& f = frames[i];
            EXPECT_EQ(f.function, names[i]);
            EXPECT_EQ(f.file, "");
            EXPECT_EQ(f.line, 0);
            EXPECT_FALSE(f.inlined);
            EXPECT_EQ(f.module, exe);
            EXPECT_EQ(f.offset, f.address - bias);
            EXPECT_EQ(f.address, t->trace().address(i));
        }
        // The call in nd_level_one lies inside nd_level_one's code.
        const auto fn = reinterpret_cast<std::uintptr_t>(&pe_test::nd_level_one) - bias;
        EXPECT_GT(frames[1].offset, fn);
        EXPECT_LT(frames[1].offset, fn + 64);
        const std::string text = pretty_exception::to_string(e);
        EXPECT_NE(text.find("\n    #0 pe_test::nd_level_two(int) in " + exe + "+" + hex(frames[0].offset) + "\n"),
                  std::string::npos)
            << text;
        EXPECT_NE(text.find("\n    #1 pe_test::nd_level_one(int) in " + exe + "+" + hex(frames[1].offset) + "\n"),
                  std::string::npos)
            << text;
    }
}

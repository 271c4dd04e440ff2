/// @brief The captured stack: known noinline frames in order with file:line, inlined frames, hidden internals, lazy and once.
#include "pretty_exception.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pe_test {

volatile int g_sink = 0;
volatile int g_zero = 0;
int g_line_three = 0, g_line_two = 0, g_line_one = 0, g_line_inline = 0, g_line_here = 0;

PE_TEST_NOINLINE int level_three(int x) {
    if (x >= 0) { g_line_three = __LINE__; THROW_LOGIC_ERROR("deep ", x); }
    return x;
}
PE_TEST_NOINLINE int level_two(int x) {
    g_line_two = __LINE__; const int r = level_three(x + 1);
    g_sink = r;
    return r + 1;
}
PE_TEST_NOINLINE int level_one(int x) {
    g_line_one = __LINE__; const int r = level_two(x + 1);
    g_sink = r;
    return r + 1;
}

// Inlined at every optimisation level: the trace shows it as an inlined frame of its caller.
__attribute__((always_inline)) inline int inlined_step(int x) {
    g_line_inline = __LINE__; const int r = level_three(x);
    return r * 2;
}
PE_TEST_NOINLINE int calls_inlined(int x) {
    const int r = inlined_step(x + 1);
    g_sink = r;
    return r + 1;
}

PE_TEST_NOINLINE pretty_exception::stack_trace here() {
    g_line_here = __LINE__; pretty_exception::stack_trace t = pretty_exception::stack_trace::current();
    g_sink = 1;
    return t;
}

PE_TEST_NOINLINE int recurse(int depth) {
    if (depth == 0) THROW_RUNTIME_ERROR("bottom");
    const int r = recurse(depth - 1);
    g_sink = r;
    return r + 1;
}

#if defined(__x86_64__)
// A frame the unwinder knows nothing about: hand-written assembly without CFI directives, so no
// .eh_frame entry. It calls `fn` with a correctly aligned stack.
extern "C" void pe_test_no_cfi_trampoline(void (*fn)());
__asm__(".text\n"
        ".globl pe_test_no_cfi_trampoline\n"
        ".type pe_test_no_cfi_trampoline, @function\n"
        "pe_test_no_cfi_trampoline:\n"
        "    push %rbp\n"
        "    mov %rsp, %rbp\n"
        "    call *%rdi\n"
        "    pop %rbp\n"
        "    ret\n"
        ".size pe_test_no_cfi_trampoline, .-pe_test_no_cfi_trampoline\n");
#endif

pretty_exception::stack_trace g_beyond_asm;
PE_TEST_NOINLINE void capture_beyond_asm() { g_beyond_asm = pretty_exception::stack_trace::current(); }

}  // namespace pe_test

namespace {

void expect_frame(const pretty_exception::frame& f, const char* function, int line, bool inlined = false) {
    EXPECT_EQ(f.function, function);
    EXPECT_EQ(f.file, __FILE__);
    EXPECT_EQ(f.line, line) << f.function;
    EXPECT_EQ(f.inlined, inlined) << f.function;
}

}  // namespace

TEST(PrettyTrace, KnownFramesInOrderWithFileAndLine) {
    int call_line = 0;
    try {
        call_line = __LINE__; pe_test::level_one(pe_test::g_zero);
        FAIL() << "nothing thrown";
    } catch (const std::logic_error& e) {
        const pretty_exception::traced_base* t = pretty_exception::trace_of(e);
        ASSERT_NE(t, nullptr);
        const std::vector<pretty_exception::frame>& frames = t->trace().frames();
        ASSERT_GE(frames.size(), 4u);
        expect_frame(frames[0], "pe_test::level_three(int)", pe_test::g_line_three);
        expect_frame(frames[1], "pe_test::level_two(int)", pe_test::g_line_two);
        expect_frame(frames[2], "pe_test::level_one(int)", pe_test::g_line_one);
        expect_frame(frames[3], "PrettyTrace_KnownFramesInOrderWithFileAndLine_Test::TestBody()", call_line);
        EXPECT_EQ(t->line(), pe_test::g_line_three);
        for (const auto& f : frames) {
            EXPECT_EQ(f.function.find("pretty_exception::"), std::string::npos) << "header frame shown: " << f.function;
            EXPECT_FALSE(f.module.empty());
        }
        EXPECT_EQ(frames[0].module, frames[3].module);
        EXPECT_TRUE(t->trace().notes().empty()) << t->trace().notes().front();
    }
}

TEST(PrettyTrace, RenderedTraceListsTheFramesInOrder) {
    try {
        pe_test::level_one(pe_test::g_zero);
    } catch (const std::exception& e) {
        const std::string text = "\n" + pretty_exception::to_string(e);
        const std::string file = __FILE__;
        const auto at = [&](int line) { return file + ":" + std::to_string(line); };
        // Whole lines, in this order (the last one up to the line number of the call in this test).
        const std::vector<std::string> lines = {
            "\nstd::logic_error: deep 2\n",
            "\n  thrown at " + at(pe_test::g_line_three) + " in int pe_test::level_three(int)\n",
            "\n  stack, innermost first:\n",
            "\n    #0 pe_test::level_three(int) at " + at(pe_test::g_line_three) + "\n",
            "\n    #1 pe_test::level_two(int) at " + at(pe_test::g_line_two) + "\n",
            "\n    #2 pe_test::level_one(int) at " + at(pe_test::g_line_one) + "\n",
            "\n    #3 PrettyTrace_RenderedTraceListsTheFramesInOrder_Test::TestBody() at " + file + ":",
        };
        std::size_t from = 0;
        for (const auto& want : lines) {
            const std::size_t found = text.find(want, from);
            ASSERT_NE(found, std::string::npos) << "missing, or out of order: " << want << "\nin:" << text;
            from = found + want.size() - 1;  // the next line starts at this one's newline
        }
        EXPECT_EQ(text.rfind("\nstd::logic_error: deep 2\n", 0), 0u);
        EXPECT_EQ(text.find("\x1b["), std::string::npos);
    }
}

TEST(PrettyTrace, InlinedFramesAreShownWithTheirCallSite) {
    try {
        pe_test::calls_inlined(pe_test::g_zero);
    } catch (const std::exception& e) {
        const auto& frames = pretty_exception::trace_of(e)->trace().frames();
        ASSERT_GE(frames.size(), 3u);
        expect_frame(frames[0], "pe_test::level_three(int)", pe_test::g_line_three);
        expect_frame(frames[1], "pe_test::inlined_step(int)", pe_test::g_line_inline, true);
        EXPECT_EQ(frames[2].function, "pe_test::calls_inlined(int)");
        EXPECT_FALSE(frames[2].inlined);
        EXPECT_EQ(frames[1].address, frames[2].address);  // one return address, two functions
        EXPECT_NE(pretty_exception::to_string(e).find(
                      "    #1 pe_test::inlined_step(int) at " + std::string(__FILE__) + ":" +
                      std::to_string(pe_test::g_line_inline) + " (inlined)\n"),
                  std::string::npos);
    }
}

TEST(PrettyTrace, ColdSuffixesAreDropped) {
    using pretty_exception::detail::demangle;
    EXPECT_EQ(demangle("main.cold"), "main");
    EXPECT_EQ(demangle("parse.cold.3"), "parse");
    EXPECT_EQ(demangle("_Z5parsei.cold"), "parse(int)");
    EXPECT_EQ(demangle("_Z5parsei.constprop.0.cold"), "parse(int) [clone .constprop.0]");
    EXPECT_EQ(demangle("table.coldest"), "table.coldest");
    EXPECT_EQ(demangle(".cold"), ".cold");
}

TEST(PrettyTrace, CurrentStartsAtItsCaller) {
    const pretty_exception::stack_trace t = pe_test::here();
    ASSERT_GE(t.frames().size(), 2u);
    expect_frame(t.frames()[0], "pe_test::here()", pe_test::g_line_here);
    EXPECT_EQ(t.frames()[1].function, "PrettyTrace_CurrentStartsAtItsCaller_Test::TestBody()");
    const std::string text = t.to_string();
    EXPECT_EQ(text.rfind("#0 pe_test::here() at " + std::string(__FILE__) + ":" + std::to_string(pe_test::g_line_here) +
                             "\n#1 PrettyTrace_CurrentStartsAtItsCaller_Test::TestBody() at ",
                         0),
              0u)
        << text;
}

TEST(PrettyTrace, CaptureIsRawAndSymbolisationLazyAndOnce) {
    using pretty_exception::detail::symbolise_calls;
    try {
        pe_test::level_one(pe_test::g_zero);
    } catch (const std::exception& e) {
        const pretty_exception::stack_trace& t = pretty_exception::trace_of(e)->trace();
        const unsigned long before = symbolise_calls().load();
        EXPECT_GE(t.size(), 4u);  // raw PCs are there already
        EXPECT_NE(t.address(0), 0u);
        EXPECT_EQ(symbolise_calls().load(), before);  // nothing resolved at the throw
        const auto* first = &t.frames();
        EXPECT_EQ(symbolise_calls().load(), before + 1);
        (void)pretty_exception::to_string(e);
        (void)pretty_exception::to_one_line(e);
        EXPECT_EQ(&t.frames(), first);
        EXPECT_EQ(symbolise_calls().load(), before + 1);  // resolved once
        EXPECT_EQ(t.frames()[0].address, t.address(0));
    }
}

TEST(PrettyTrace, DeepStacksAreCutAndSaySo) {
    try {
        pe_test::recurse(PRETTY_EXCEPTION_MAX_FRAMES + 10);
    } catch (const std::exception& e) {
        const pretty_exception::stack_trace& t = pretty_exception::trace_of(e)->trace();
        EXPECT_EQ(t.size(), static_cast<std::size_t>(PRETTY_EXCEPTION_MAX_FRAMES));
        ASSERT_EQ(t.notes().size(), 1u);
        EXPECT_EQ(t.notes()[0], "stack cut at " + std::to_string(PRETTY_EXCEPTION_MAX_FRAMES) +
                                    " frames (PRETTY_EXCEPTION_MAX_FRAMES)");
        EXPECT_EQ(t.frames()[0].function, "pe_test::recurse(int)");
        EXPECT_NE(pretty_exception::to_string(e).find("    note: stack cut at "), std::string::npos);
    }
}

TEST(PrettyTrace, EmptyTraceSaysWhatIsMissing) {
    const pretty_exception::stack_trace none;
    EXPECT_TRUE(none.empty());
    EXPECT_TRUE(none.frames().empty());
    ASSERT_EQ(none.notes().size(), 1u);
    EXPECT_EQ(none.to_string(), "note: " + none.notes()[0] + "\n");
}

TEST(PrettyTrace, WalkStoppedByAFrameWithoutUnwindInformationSaysSo) {
#if defined(__x86_64__)
    pe_test::pe_test_no_cfi_trampoline(pe_test::capture_beyond_asm);
    const pretty_exception::stack_trace& t = pe_test::g_beyond_asm;
    ASSERT_EQ(t.size(), 2u);  // capture_beyond_asm, then the trampoline: nothing past it
    EXPECT_EQ(t.frames()[0].function, "pe_test::capture_beyond_asm()");
    EXPECT_EQ(t.frames()[1].function, "pe_test_no_cfi_trampoline");
    // Assembly in this unit's .text without line information: the line table's row before it is the
    // previous function's last line, which is not the trampoline's. No file:line, not a wrong one.
    EXPECT_EQ(t.frames()[1].file, "");
    EXPECT_EQ(t.frames()[1].line, 0);
    ASSERT_EQ(t.notes().size(), 1u);
    EXPECT_EQ(t.notes()[0],
              "stack incomplete: the unwinder stopped after 2 frames (no unwind information for the last one's caller)");
    // A complete walk says nothing.
    EXPECT_TRUE(pretty_exception::stack_trace::current().notes().empty());
#else
    GTEST_SKIP() << "the frame without unwind information is x86-64 assembly";
#endif
}

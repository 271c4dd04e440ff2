/// @brief A large function template that two translation units instantiate: the linker keeps one copy and discards the other, whose debug information then claims addresses from 0 (GNU ld's value for a discarded section).
#ifndef PRETTY_EXCEPTION_DISCARDED_COPY_H
#define PRETTY_EXCEPTION_DISCARDED_COPY_H

namespace pe_test {

extern volatile unsigned g_discarded_sink;  // unsigned: its products wrap, defined

#define PE_TEST_STEP g_discarded_sink = g_discarded_sink * 3u + static_cast<unsigned>(x);
#define PE_TEST_STEP10 PE_TEST_STEP PE_TEST_STEP PE_TEST_STEP PE_TEST_STEP PE_TEST_STEP \
                       PE_TEST_STEP PE_TEST_STEP PE_TEST_STEP PE_TEST_STEP PE_TEST_STEP
#define PE_TEST_STEP100 PE_TEST_STEP10 PE_TEST_STEP10 PE_TEST_STEP10 PE_TEST_STEP10 PE_TEST_STEP10 \
                        PE_TEST_STEP10 PE_TEST_STEP10 PE_TEST_STEP10 PE_TEST_STEP10 PE_TEST_STEP10

/// Some 60 KB of code: longer than everything before _start in the program, so the discarded copy's
/// line rows and ranges, from address 0, cover _start.
template <class T>
__attribute__((noinline)) T large(T x) {
    PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100
    PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100
    PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100
    PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100
    PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100
    PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100 PE_TEST_STEP100
    return static_cast<T>(g_discarded_sink & 0xffu);
}

int other_unit(int x);

}  // namespace pe_test

#endif

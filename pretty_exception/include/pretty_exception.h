/// @brief pretty_exception: throw any std::exception type with file, line, function and a lazily symbolised call stack; print it in colour, trace it to syslog; the throw-site stack of any exception (trace_all_exceptions); a crash handler (install_crash_handler).
///
/// Header-only, C++17, Linux (glibc) with GCC or Clang. See pretty_exception/README.md for the guide.
///
/// This header includes its parts, one per concern, in pretty_exception/ beside it (copy both, or put
/// the include/ directory on the include path). Each part includes the parts it needs:
///   config.h      the configuration macros' defaults, whether libdw is used, the version
///   types.h       source_site, frame, colour_mode, syslog_settings
///   capture.h     the raw capture (_Unwind_Backtrace), stack_trace, traced_base
///   thrown.h      each thread's record of its last throws, filled by the __cxa_throw hook
///   settings.h    the run-time settings, as atomics
///   names.h       demangling, the module of an address, which frames are the header's own
///   libdw.h       the libdw symboliser (function, file:line, inlined frames)
///   symbolise.h   a captured stack symbolised: stack_trace::frames() and notes()
///   format.h      the printed form: to_string, to_one_line, print, describe, operator<<, colour
///   syslog.h      the syslog records and set_syslog
///   throw_hook.h  the __cxa_throw hook: trace_all_exceptions, stack_of, current_trace
///   traced.h      traced<T> and the macros that throw it (PRETTY_THROW, THROW_RUNTIME_ERROR, ...)
///   terminate.h   the terminate handler
///   crash.h       the crash handler
///
/// Link needs: `-ldw` (elfutils' libdw, Debian package libdw-dev) while PRETTY_EXCEPTION_USE_LIBDW is 1,
/// which is its default when <elfutils/libdwfl.h> is found; `-ldl` on glibc older than 2.34. The CMake
/// target `pretty_exception::pretty_exception` and `pkg-config --libs pretty_exception` bring both.
///
/// Configuration macros (define them identically in every translation unit, e.g. on the command line):
///   PRETTY_EXCEPTION_USE_LIBDW       1: names, file:line and inlined frames from libdw; 0: no libdw,
///                                    frames show exported names and module+offset. Default: 1 if
///                                    <elfutils/libdwfl.h> is found.
///   PRETTY_EXCEPTION_SYSLOG          1: syslog tracing starts switched on (default 0).
///   PRETTY_EXCEPTION_SYSLOG_FACILITY the default facility (default LOG_USER).
///   PRETTY_EXCEPTION_SYSLOG_PRIORITY the default priority (default LOG_ERR).
///   PRETTY_EXCEPTION_MAX_FRAMES      frames kept per exception (default 64; deeper stacks are cut, and
///                                    the trace says so).
///   PRETTY_EXCEPTION_NO_SHORT_MACROS define it to get only the PRETTY_-prefixed macros, not
///                                    THROW_RUNTIME_ERROR and friends.
///   PRETTY_EXCEPTION_SNIPPETS        N > 0: printed traces show N source lines either side of each
///                                    user frame's line (default 0: none; set_snippets() at run time).
///   PRETTY_EXCEPTION_TRACE_ALL       1: every TU that includes the header links the __cxa_throw hook
///                                    and the stack of every exception is captured from the start,
///                                    as after trace_all_exceptions() (default 0).
#ifndef PRETTY_EXCEPTION_H
#define PRETTY_EXCEPTION_H

#include "pretty_exception/config.h"
#include "pretty_exception/types.h"
#include "pretty_exception/capture.h"
#include "pretty_exception/thrown.h"
#include "pretty_exception/settings.h"
#include "pretty_exception/names.h"
#include "pretty_exception/libdw.h"
#include "pretty_exception/symbolise.h"
#include "pretty_exception/format.h"
#include "pretty_exception/syslog.h"
#include "pretty_exception/throw_hook.h"
#include "pretty_exception/traced.h"
#include "pretty_exception/terminate.h"
#include "pretty_exception/crash.h"

#endif  // PRETTY_EXCEPTION_H

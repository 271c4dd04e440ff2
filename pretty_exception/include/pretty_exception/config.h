/// @brief pretty_exception's configuration macros: their defaults, whether libdw is used, the version.
///
/// Part of pretty_exception.h, which includes every part: include that one. This part includes the
/// parts it needs, so it also compiles on its own (test pretty_exception.headers_stand_alone).
/// The macros are listed in pretty_exception.h; define them identically in every translation unit.
#ifndef PRETTY_EXCEPTION_CONFIG_H
#define PRETTY_EXCEPTION_CONFIG_H

#include <syslog.h>

#ifndef PRETTY_EXCEPTION_USE_LIBDW
#if defined(__has_include)
#if __has_include(<elfutils/libdwfl.h>) && __has_include(<dwarf.h>)
#define PRETTY_EXCEPTION_USE_LIBDW 1
#endif
#endif
#endif
#ifndef PRETTY_EXCEPTION_USE_LIBDW
#define PRETTY_EXCEPTION_USE_LIBDW 0
#endif

#if PRETTY_EXCEPTION_USE_LIBDW
#if defined(__has_include)
#if !__has_include(<elfutils/libdwfl.h>) || !__has_include(<dwarf.h>)
#error "pretty_exception: PRETTY_EXCEPTION_USE_LIBDW=1 needs elfutils' libdw headers: install libdw-dev (Debian, Ubuntu) or elfutils-devel (Fedora) and link with -ldw, or define PRETTY_EXCEPTION_USE_LIBDW=0"
#endif
#endif
#endif

#ifndef PRETTY_EXCEPTION_SYSLOG
#define PRETTY_EXCEPTION_SYSLOG 0
#endif
#ifndef PRETTY_EXCEPTION_SYSLOG_FACILITY
#define PRETTY_EXCEPTION_SYSLOG_FACILITY LOG_USER
#endif
#ifndef PRETTY_EXCEPTION_SYSLOG_PRIORITY
#define PRETTY_EXCEPTION_SYSLOG_PRIORITY LOG_ERR
#endif
#ifndef PRETTY_EXCEPTION_MAX_FRAMES
#define PRETTY_EXCEPTION_MAX_FRAMES 64
#endif
#ifndef PRETTY_EXCEPTION_TRACE_ALL
#define PRETTY_EXCEPTION_TRACE_ALL 0
#endif
#ifndef PRETTY_EXCEPTION_SNIPPETS
#define PRETTY_EXCEPTION_SNIPPETS 0
#endif

#define PRETTY_EXCEPTION_VERSION_MAJOR 1
#define PRETTY_EXCEPTION_VERSION_MINOR 0
#define PRETTY_EXCEPTION_VERSION_PATCH 0

#endif  // PRETTY_EXCEPTION_CONFIG_H

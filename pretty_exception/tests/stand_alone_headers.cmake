# @brief Checks the parts of pretty_exception.h: each compiles on its own, opens with its @brief, and the umbrella includes them all.
#
# cmake -DSOURCE_DIR=... -DWORK_DIR=... -DCXX=... -DLIBDW=ON|OFF [-DSTD=17|20] -P stand_alone_headers.cmake
# Each part in include/pretty_exception/ is compiled as a translation unit of its own (included twice, for
# its guard), as C++17 (or STD, the build's standard) with the suite's warnings as errors, once with the
# configuration the build found and once with every compile-time switch flipped (no libdw, syslog on, every
# throw traced, snippets, no short macros). A part that uses what only an earlier part in the umbrella gives,
# without including that part, fails here by name. The parts are listed when the test runs, so a new one is
# checked without reconfiguring.
foreach(var SOURCE_DIR WORK_DIR CXX LIBDW)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "stand_alone_headers.cmake: -D${var}=... is required")
    endif()
endforeach()

if(NOT STD)
    set(STD 17)
endif()
set(include_dir "${SOURCE_DIR}/include")
file(GLOB parts RELATIVE "${include_dir}" "${include_dir}/pretty_exception/*.h")
list(SORT parts)
if(NOT parts)
    message(FATAL_ERROR "headers: no part under ${include_dir}/pretty_exception")
endif()

# The umbrella includes every part, and nothing that is not one.
file(STRINGS "${include_dir}/pretty_exception.h" umbrella_lines REGEX "^#include ")
set(included "")
foreach(line IN LISTS umbrella_lines)
    if(NOT line MATCHES "^#include \"(pretty_exception/[a-z_]+\\.h)\"$")
        message(FATAL_ERROR "headers: pretty_exception.h includes something other than its parts: ${line}")
    endif()
    list(APPEND included "${CMAKE_MATCH_1}")
endforeach()
list(SORT included)
if(NOT included STREQUAL parts)
    message(FATAL_ERROR "headers: pretty_exception.h includes [${included}], the folder holds [${parts}]")
endif()

if(LIBDW)
    set(found_config -DPRETTY_EXCEPTION_USE_LIBDW=1)
else()
    set(found_config -DPRETTY_EXCEPTION_USE_LIBDW=0)
endif()
set(flipped_config -DPRETTY_EXCEPTION_USE_LIBDW=0 -DPRETTY_EXCEPTION_SYSLOG=1 -DPRETTY_EXCEPTION_TRACE_ALL=1
    -DPRETTY_EXCEPTION_SNIPPETS=2 -DPRETTY_EXCEPTION_NO_SHORT_MACROS)

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(failures "")
foreach(part IN LISTS parts)
    file(STRINGS "${include_dir}/${part}" first LIMIT_COUNT 1)
    if(NOT first MATCHES "^/// @brief ")
        list(APPEND failures "${part}: its first line is not '/// @brief ...'")
    endif()
    get_filename_component(name "${part}" NAME_WE)
    set(unit "${WORK_DIR}/${name}.cpp")
    file(WRITE "${unit}" "#include \"${part}\"\n#include \"${part}\"\n")
    foreach(config found flipped)
        execute_process(
            COMMAND "${CXX}" -std=c++${STD} -Wall -Wextra -Wpedantic -Werror ${${config}_config}
                    -I "${include_dir}" -c "${unit}" -o "${WORK_DIR}/${name}.${config}.o"
            RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
        if(NOT rc EQUAL 0)
            list(APPEND failures "${part} (${config} configuration: ${${config}_config}) does not compile on its own:\n${err}")
        endif()
    endforeach()
endforeach()
if(failures)
    list(JOIN failures "\n" text)
    message(FATAL_ERROR "${text}")
endif()
list(LENGTH parts count)
message(STATUS "headers: ${count} parts each compile on their own, open with @brief, and are all in pretty_exception.h")

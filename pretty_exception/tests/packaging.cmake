# @brief Packaging tests: install then find_package, install then pkg-config, or add_subdirectory; build and run the consumer.
#
# cmake -DMODE=install|find_package|pkg_config|add_subdirectory -DSOURCE_DIR=... -DWORK_DIR=...
#       -DCONSUMER_DIR=... -DCXX=... -DGENERATOR=... [-DMAKE_PROGRAM=...] -P packaging.cmake
# Each mode starts from empty directories under WORK_DIR (in the build tree), so nothing stale passes.
foreach(var MODE SOURCE_DIR WORK_DIR CONSUMER_DIR CXX GENERATOR)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "packaging.cmake: -D${var}=... is required")
    endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(make_program "")
if(MAKE_PROGRAM)
    set(make_program "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()

function(run step)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "packaging ${MODE}: ${step} failed (${rc})\n${out}\n${err}")
    endif()
    set(last_output "${out}" PARENT_SCOPE)
endfunction()

# Run the consumer and check what it prints: the type, the message and its own frame by name.
function(check_consumer exe)
    run("running the consumer" "${exe}")
    foreach(want "std::invalid_argument: consumer says 42" "#0 consumer::thrower(int) at "
                 "consumer.cpp:")
        string(FIND "${last_output}" "${want}" at)
        if(at EQUAL -1)
            message(FATAL_ERROR "packaging ${MODE}: the consumer's output lacks '${want}':\n${last_output}")
        endif()
    endforeach()
    message(STATUS "packaging ${MODE}: consumer OK")
endfunction()

if(MODE STREQUAL "install")
    # As the README says and packagers do: the prefix is chosen at install time, not at configure
    # time (`cmake --install b --prefix DIR`), and the tree is then moved (a staging directory, an
    # unpacked archive). The consumers below find it only if the CMake package and the .pc are
    # relocatable; the configure-time prefix is never created, so nothing can find it there.
    set(configured "${WORK_DIR}/configured-prefix")
    set(staging "${WORK_DIR}/staging-prefix")
    file(REMOVE_RECURSE "${WORK_DIR}/build" "${prefix}" "${configured}" "${staging}")
    run(configure "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}" ${make_program}
        "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_INSTALL_PREFIX=${configured}"
        -DPRETTY_EXCEPTION_BUILD_TESTS=OFF -DPRETTY_EXCEPTION_BUILD_EXAMPLES=OFF
        -DPRETTY_EXCEPTION_BUILD_BENCH=OFF -DPRETTY_EXCEPTION_MATRIX_TESTS=OFF
        -DPRETTY_EXCEPTION_PACKAGING_TESTS=OFF)
    run(build "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
    run(install "${CMAKE_COMMAND}" --install "${WORK_DIR}/build" --prefix "${staging}")
    file(RENAME "${staging}" "${prefix}")
    if(EXISTS "${configured}")
        message(FATAL_ERROR "packaging install: installed into the configure-time prefix ${configured}")
    endif()
    file(GLOB_RECURSE installed_text "${prefix}/*.pc" "${prefix}/*.cmake")
    foreach(f IN LISTS installed_text)
        file(READ "${f}" text)
        foreach(path "${configured}" "${staging}")
            string(FIND "${text}" "${path}" at)
            if(NOT at EQUAL -1)
                message(FATAL_ERROR "packaging install: ${f} names ${path}: not relocatable")
            endif()
        endforeach()
    endforeach()
    # The umbrella header and every part of it in the source tree: a part left out of the install
    # rules would break every consumer at its first #include.
    file(GLOB parts RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/include/pretty_exception/*.h")
    if(NOT parts)
        message(FATAL_ERROR "packaging install: no header under ${SOURCE_DIR}/include/pretty_exception")
    endif()
    foreach(f include/pretty_exception.h ${parts})
        if(NOT EXISTS "${prefix}/${f}")
            message(FATAL_ERROR "packaging install: ${prefix}/${f} was not installed")
        endif()
    endforeach()
    file(GLOB_RECURSE config "${prefix}/*/pretty_exceptionConfig.cmake")
    file(GLOB_RECURSE pc "${prefix}/*/pretty_exception.pc")
    if(NOT config OR NOT pc)
        message(FATAL_ERROR "packaging install: no pretty_exceptionConfig.cmake or pretty_exception.pc under ${prefix}")
    endif()
    message(STATUS "packaging install: installed into ${staging}, moved to ${prefix}")

elseif(MODE STREQUAL "find_package")
    set(dir "${WORK_DIR}/find_package")
    file(REMOVE_RECURSE "${dir}")
    run(configure "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${dir}" -G "${GENERATOR}" ${make_program}
        "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_PREFIX_PATH=${prefix}" -DPE_CONSUMER_MODE=find_package)
    run(build "${CMAKE_COMMAND}" --build "${dir}")
    check_consumer("${dir}/consumer")

elseif(MODE STREQUAL "add_subdirectory")
    set(dir "${WORK_DIR}/add_subdirectory")
    file(REMOVE_RECURSE "${dir}")
    run(configure "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${dir}" -G "${GENERATOR}" ${make_program}
        "-DCMAKE_CXX_COMPILER=${CXX}" -DPE_CONSUMER_MODE=add_subdirectory "-DPE_SOURCE_DIR=${SOURCE_DIR}")
    run(build "${CMAKE_COMMAND}" --build "${dir}")
    check_consumer("${dir}/consumer")

elseif(MODE STREQUAL "pkg_config")
    find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
    file(GLOB_RECURSE pc "${prefix}/*/pretty_exception.pc")
    if(NOT pc)
        message(FATAL_ERROR "packaging pkg_config: no pretty_exception.pc under ${prefix}")
    endif()
    list(GET pc 0 pc)
    get_filename_component(pc_dir "${pc}" DIRECTORY)
    run("pkg-config --cflags --libs" "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${pc_dir}"
        "${PKG_CONFIG}" --cflags --libs pretty_exception)
    string(STRIP "${last_output}" flags)
    separate_arguments(flags UNIX_COMMAND "${flags}")
    set(dir "${WORK_DIR}/pkg_config")
    file(REMOVE_RECURSE "${dir}")
    file(MAKE_DIRECTORY "${dir}")
    # The way a Makefile user builds: one compiler command with the flags pkg-config gives.
    run(compile "${CXX}" -std=c++17 -g -Wall -Wextra -Wpedantic -Werror "${CONSUMER_DIR}/consumer.cpp"
        -o "${dir}/consumer" ${flags})
    check_consumer("${dir}/consumer")

else()
    message(FATAL_ERROR "packaging.cmake: unknown MODE '${MODE}'")
endif()

# @brief One cell of the compiler x optimisation matrix: configure, build and run the pretty_exception suite in BINARY_DIR.
#
# cmake -DSOURCE_DIR=... -DBINARY_DIR=... -DCXX=... -DFLAGS=... -DSTD=17|20 -DGENERATOR=...
#       [-DMAKE_PROGRAM=...] -P run_matrix_cell.cmake
# The sub-build is kept between runs, so a second `make test` only rebuilds what changed.
foreach(var SOURCE_DIR BINARY_DIR CXX FLAGS STD GENERATOR)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "run_matrix_cell.cmake: -D${var}=... is required")
    endif()
endforeach()

function(run step)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "matrix cell ${CXX} ${FLAGS} C++${STD}: ${step} failed (${rc})")
    endif()
endfunction()

set(make_program "")
if(MAKE_PROGRAM)
    set(make_program "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
run(configure "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${BINARY_DIR}" -G "${GENERATOR}" ${make_program}
    "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_CXX_FLAGS=${FLAGS}" "-DCMAKE_CXX_STANDARD=${STD}"
    -DCMAKE_CXX_STANDARD_REQUIRED=ON "-DCMAKE_BUILD_TYPE="
    -DPRETTY_EXCEPTION_BUILD_TESTS=ON -DPRETTY_EXCEPTION_BUILD_EXAMPLES=ON
    -DPRETTY_EXCEPTION_BUILD_BENCH=OFF -DPRETTY_EXCEPTION_MATRIX_TESTS=OFF
    -DPRETTY_EXCEPTION_PACKAGING_TESTS=OFF -DPRETTY_EXCEPTION_INSTALL=OFF)
run(build "${CMAKE_COMMAND}" --build "${BINARY_DIR}")
run(test "${CMAKE_CTEST_COMMAND}" --test-dir "${BINARY_DIR}" --output-on-failure --no-tests=error)

# dbgkit: the two commands a new user needs are `make demo` and `make test`.
# Both install what is missing (scripts/setup.sh), configure and build with CMake + Ninja in build/.

BUILD_DIR  ?= build
DEMO_BUILD_DIR ?= build-demo
BUILD_TYPE ?= RelWithDebInfo
VENV       := .venv
PYTEST     := $(VENV)/bin/python -m pytest
RUFF       := $(VENV)/bin/ruff
SHELL      := /bin/bash

.PHONY: all setup build demo test test-c test-python lint bench clean help \
        sanitize sanitize-ubsan sanitize-asan sanitize-tsan

all: build

help:
	@echo "make demo    set up, build, record a leaky sample program with memdump and print the leak report"
	@echo "make test    set up, build, run every test (C++ via CTest, Python via pytest, linters),"
	@echo "             and the C/C++ tests again in UBSan, ASan and TSan builds"
	@echo "make sanitize  the C/C++ tests in UBSan, ASan and TSan builds (build-ubsan, -asan, -tsan)"
	@echo "make bench   run the benchmarks and rewrite their tables in docs/benchmarks.md"
	@echo "             (heaptrack, which the benchmarks also compare with, comes with the test packages)"
	@echo "             (BENCH_BIG_C=FILE: the whole run's table on cppcheck checking FILE too)"
	@echo "make clean   remove build/ and the sanitizer builds (the virtualenv .venv stays)"

setup:
	@scripts/setup.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt | setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: setup $(BUILD_DIR)/build.ninja
	@cmake --build $(BUILD_DIR) -- --quiet

# The demo builds nothing but its program, in its own directory, after installing only what it needs.
demo:
	@scripts/setup.sh --demo
	@cmake -S . -B $(DEMO_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DDBGKIT_DEMO_ONLY=ON >/dev/null
	@cmake --build $(DEMO_BUILD_DIR) --target memdump_demo memdump_recorder -- --quiet
	@scripts/demo.sh "$(DEMO_BUILD_DIR)"

test: build test-c test-python lint sanitize

test-c: build
	@ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=ignore -j2

# pytest on every core (pytest-xdist, PYTEST_WORKERS=1 for one process): each worker takes one test
# file at a time (--dist loadfile), so that a module fixture's recording is made once. (xdist sends
# the files with the most tests first: analyzer/tests/test_analyzer_fuzz.py, three tests but the
# longest file, comes last.)
PYTEST_WORKERS ?= $(shell nproc)
test-python: build
	@MEMDUMP_BUILD_DIR="$(abspath $(BUILD_DIR))" $(PYTEST) -q -p no:cacheprovider \
	    $(if $(filter-out 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadfile)

lint: setup
	@$(RUFF) check --quiet gdb_ext analyzer tests scripts/*.py
	@shellcheck scripts/*.sh scripts/memdump-analyze .ci/run

# Sanitizer builds of the C/C++ targets and tests (DBGKIT_SANITIZER in CMakeLists.txt says what they
# leave out: what their CTest does not run), each in its own directory; any report fails the run.
# No suppressions are needed.
SAN_undefined := ubsan
SAN_address   := asan
SAN_thread    := tsan
SAN_ENV := UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
           ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 TSAN_OPTIONS=halt_on_error=1

sanitize: sanitize-ubsan sanitize-asan sanitize-tsan

sanitize-ubsan: SANITIZER := undefined
sanitize-asan:  SANITIZER := address
sanitize-tsan:  SANITIZER := thread
sanitize-ubsan sanitize-asan sanitize-tsan: setup
	@echo "== $@: build-$(SAN_$(SANITIZER)) (-fsanitize=$(SANITIZER))"
	@cmake -S . -B build-$(SAN_$(SANITIZER)) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	       -DDBGKIT_SANITIZER=$(SANITIZER) >/dev/null
	@cmake --build build-$(SAN_$(SANITIZER)) -- --quiet
	@$(SAN_ENV) ctest --test-dir build-$(SAN_$(SANITIZER)) --output-on-failure --no-tests=error -j2

# heaptrack (bench-recorder.py) is one of the test packages now; setup.sh --bench installs them.
bench: build
	@scripts/setup.sh --bench
	@$(VENV)/bin/python scripts/bench-memdump.py --build-dir "$(BUILD_DIR)"
	@$(VENV)/bin/python scripts/bench-recorder.py --build-dir "$(BUILD_DIR)"
	@$(VENV)/bin/python scripts/bench-scan.py --build-dir "$(BUILD_DIR)"
	@$(VENV)/bin/python scripts/bench-analyzer.py
	@$(VENV)/bin/python scripts/bench-analyzer.py --recorded --build-dir "$(BUILD_DIR)"
	@$(VENV)/bin/python scripts/bench-wholerun.py --build-dir "$(BUILD_DIR)" $(if $(BENCH_BIG_C),--big "$(BENCH_BIG_C)")
	@$(VENV)/bin/python scripts/bench-pretty-exception.py --build-dir "$(BUILD_DIR)"
	@$(VENV)/bin/python scripts/bench-targets.py --build-dir "$(BUILD_DIR)"
	@$(VENV)/bin/python scripts/bench-servers.py --build-dir "$(BUILD_DIR)"
	@$(VENV)/bin/python scripts/bench-shmemq.py --build-dir "$(BUILD_DIR)"

clean:
	rm -rf $(BUILD_DIR) $(DEMO_BUILD_DIR) build-ubsan build-asan build-tsan

# dbgkit: the two commands a new user needs are `make demo` and `make test`.
# Both install what is missing (scripts/setup.sh), configure and build with CMake + Ninja in build/.

BUILD_DIR  ?= build
BUILD_TYPE ?= RelWithDebInfo
VENV       := .venv
PYTEST     := $(VENV)/bin/python -m pytest
RUFF       := $(VENV)/bin/ruff
SHELL      := /bin/bash

.PHONY: all setup build demo test test-c test-python lint bench clean help

all: build

help:
	@echo "make demo    set up, build, record a leaky sample program with memdump and print the leak report"
	@echo "make test    set up, build, run every test (C++ via CTest, Python via pytest, linters)"
	@echo "make bench   run the benchmarks and rewrite their tables in docs/benchmarks.md"
	@echo "make clean   remove build/ (the virtualenv .venv stays)"

setup:
	@scripts/setup.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt | setup
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: setup $(BUILD_DIR)/build.ninja
	@cmake --build $(BUILD_DIR) -- --quiet

demo: build
	@scripts/demo.sh "$(BUILD_DIR)"

test: build test-c test-python lint

test-c: build
	@ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=ignore -j2

test-python: build
	@MEMDUMP_BUILD_DIR="$(abspath $(BUILD_DIR))" $(PYTEST) -q -p no:cacheprovider

lint: setup
	@$(RUFF) check --quiet gdb_ext analyzer tests scripts/*.py
	@shellcheck scripts/*.sh scripts/memdump-analyze .ci/run

bench: build
	@$(VENV)/bin/python scripts/bench-memdump.py --build-dir "$(BUILD_DIR)"
	@$(VENV)/bin/python scripts/bench-analyzer.py
	@$(VENV)/bin/python scripts/bench-pretty-exception.py --build-dir "$(BUILD_DIR)"

clean:
	rm -rf $(BUILD_DIR)

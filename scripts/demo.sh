#!/usr/bin/env bash
# @brief `make demo`: record the sample leaky program with memdump and print its leak report.
set -euo pipefail

usage() {
    echo "usage: scripts/demo.sh [BUILD_DIR]   (run by 'make demo'; BUILD_DIR defaults to build)"
}

if [[ $# -gt 1 || "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    usage
    [[ $# -gt 1 ]] && exit 2
    exit 0
fi

root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-${root_dir}/build}"
program="${build_dir}/targets/memdump_demo/memdump_demo"
dump="${build_dir}/memdump_demo.memdump"

if [[ ! -x "$program" ]]; then
    echo "demo.sh: ${program} is not built (run make build)" >&2
    exit 2
fi

echo "== recording ${program#"${root_dir}"/} with memdump (gdb -batch) =="
"${root_dir}/scripts/memdump.sh" -o "$dump" -- "$program"
echo
echo "== scripts/memdump-analyze ${dump#"${root_dir}"/} =="
"${root_dir}/scripts/memdump-analyze" "$dump"
